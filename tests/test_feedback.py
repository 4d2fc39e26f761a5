"""Answer feedback: 👍/👎 on every answer, one vote per user per answer (the latest counts),
a 👎 asks privately for an optional reason, and ``threadwise feedback`` summarises and exports."""

from __future__ import annotations

import asyncio
import json

from bot.cli import main
from bot.config import load_settings
from tests.fakes.chat_model import ScriptedChatModel
from tests.fakes.slack_api import SlackHarness, all_text, vote_buttons, write_config


def shown(slack, post: dict) -> dict:
    """A posted message as a client shows it (with its ts)."""
    ts = next(c.response["ts"] for c in slack.fake.calls_to("chat.postMessage", ok_only=True) if c.args is post)
    return slack.fake.messages[(slack.channel, ts)]


def vote(slack, user: str, post: dict, which: str):
    post = shown(slack, post)
    button = vote_buttons(post)[f"threadwise_vote_{which}"]
    return slack.events.block_action(
        user=user, action_id=button["action_id"], value=button["value"], channel=slack.channel, message=post
    )


def reason(slack, user: str, view: dict, text: str):
    block = next(b for b in view["blocks"] if b["type"] == "input")
    return slack.events.view_submission(
        user=user, view=view, values={block["block_id"]: {block["element"]["action_id"]: text}}
    )


async def rows(slack) -> list[dict]:
    return await slack.runtime.bookkeeping.feedback_rows()


async def test_every_slack_answer_carries_vote_buttons_and_votes_count_once_per_user(slack):
    req, ts = slack.mention("UASKER", "how do I deploy?")
    await slack.send(req)
    (answer,) = slack.answers()
    assert set(vote_buttons(answer)) == {"threadwise_vote_up", "threadwise_vote_down"}
    assert "👍" in json.dumps(answer["blocks"], ensure_ascii=False)

    await slack.send(vote(slack, "UASKER", answer, "up"))
    await slack.send(vote(slack, "UASKER", answer, "up"))  # a double click: still one vote
    await slack.send(vote(slack, "UOTHER", answer, "up"))
    got = await rows(slack)
    assert sorted((r["user_id"], r["vote"]) for r in got) == [("UASKER", 1), ("UOTHER", 1)]
    assert got[0]["question"] == "how do I deploy?" and got[0]["thread_key"].endswith(ts)
    assert got[0]["channel"] == slack.channel and got[0]["route"] == "vectorstore"
    assert [s["location"] for s in got[0]["sources"]] == ["deploy.md"]
    assert got[0]["path"][:2] == ["start", "route"] and "retrieve" in got[0]["path"]
    assert "Here is the answer" in got[0]["answer"]

    # changing one's mind: 👎 replaces the 👍 and opens the reason modal, privately
    await slack.send(vote(slack, "UASKER", answer, "down"))
    view = slack.fake.views[-1]
    assert view["callback_id"] == "threadwise_vote_reason"
    await slack.send(reason(slack, "UASKER", view, "It should say make deploy-prod"))
    got = {r["user_id"]: r for r in await rows(slack)}
    assert got["UASKER"]["vote"] == -1 and got["UASKER"]["reason"] == "It should say make deploy-prod"
    assert got["UOTHER"]["vote"] == 1 and len(got) == 2
    # the reason was asked privately: nothing new in the channel
    assert len(slack.answers()) == 1


async def test_a_down_vote_without_a_reason_is_kept_and_a_forged_answer_id_is_not(slack):
    req, _ = slack.mention("UASKER", "how do I roll back?")
    await slack.send(req)
    (answer,) = slack.answers()
    await slack.send(vote(slack, "UOTHER", answer, "down"))  # the modal is closed unanswered ("Skip")
    assert [(r["user_id"], r["vote"], r["reason"]) for r in await rows(slack)] == [("UOTHER", -1, "")]
    forged = slack.events.block_action(
        user="UOTHER",
        action_id="threadwise_vote_up",
        value="deadbeefdeadbeef",
        channel=slack.channel,
        message=shown(slack, answer),
    )
    await slack.send(forged)
    notes = [c.args["text"] for c in slack.fake.calls_to("chat.postEphemeral", ok_only=True)]
    assert any("couldn't record that vote" in n for n in notes)
    assert len(await rows(slack)) == 1


async def test_apologies_carry_no_vote_buttons(tmp_path, fake):
    model = ScriptedChatModel(
        script={"grade_documents": lambda m: json.dumps({"documents": [], "feedback": "nothing relevant"})}
    )
    config = write_config(tmp_path, fake, extra="[graph]\nhuman_review = false\n")
    harness = await SlackHarness(tmp_path, fake, config, model).open()
    try:
        req, _ = harness.mention("UASKER", "what is the airspeed of a swallow?")
        await harness.send(req)
        (apology,) = harness.answers()
        assert "couldn't find a reliable answer" in all_text(apology)
        assert vote_buttons(apology) == {}
    finally:
        await harness.close()


# ---- console and the CLI summary ------------------------------------------------------------
async def test_console_good_and_bad_rate_the_last_answer_and_the_cli_summarises(tmp_path, capsys):
    import io

    from rich.console import Console

    from bot.platforms.console import run_console
    from tests.conftest import scripted_runtime
    from tests.conftest import write_config as write_core_config

    config = write_core_config(tmp_path)
    settings = load_settings(config)
    lines = (
        "\n".join(
            [
                "/good",
                "how do I lock down studio auth?",
                "/good",
                "/bad it cites the wrong page",
                "/thread other",
                "/bad",
                "what does the standalone container need to boot?",
                "/bad",
                "/quit",
            ]
        )
        + "\n"
    )
    screen = io.StringIO()
    async with scripted_runtime(settings) as (rt, _):
        await run_console(rt, thread="main", stdin=io.StringIO(lines), console=Console(file=screen, width=200))
        got = await rt.bookkeeping.feedback_rows()
    text = screen.getvalue()
    assert text.count("No answer to rate in this thread yet.") == 2  # before any answer, and on a new thread
    assert "Rate it: /good or /bad" in text
    # one vote per user and answer: /bad replaced /good, with its reason
    assert [(r["question"], r["vote"], r["reason"]) for r in got] == [
        ("how do I lock down studio auth?", -1, "it cites the wrong page"),
        ("what does the standalone container need to boot?", -1, ""),
    ]

    capsys.readouterr()
    assert await asyncio.to_thread(main, ["feedback", "--config", str(config)]) == 0
    summary = capsys.readouterr().out
    assert "2 answers voted on: 0 👍, 2 👎" in summary
    assert "Per channel" in summary and "console: 0 👍, 2 👎" in summary
    assert "vectorstore: 0 👍, 2 👎" in summary
    assert "Worst-rated documents" in summary and "auth.md" in summary

    assert await asyncio.to_thread(main, ["feedback", "--config", str(config), "--json", "-"]) == 0
    exported = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [e["question"] for e in exported] == [
        "how do I lock down studio auth?",
        "what does the standalone container need to boot?",
    ]
    first = exported[0]
    assert {"id", "kind", "question", "history", "expected_route", "sources", "answer_facts"} <= set(first)
    assert first["kind"] == "kb" and first["expected_route"] == "vectorstore" and first["down"] == 1
    assert first["reasons"] == ["it cites the wrong page"] and "auth.md" in first["cited_sources"]
    # the export is a valid eval file once the expected sources are filled in
    from bot.eval import load_eval

    path = tmp_path / "cases.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in exported))
    assert len(load_eval(path)) == 2


def test_feedback_summary_before_any_vote(tmp_path, capsys):
    from tests.conftest import write_config as write_core_config

    assert main(["feedback", "--config", str(write_core_config(tmp_path))]) == 0
    assert "No votes yet" in capsys.readouterr().out


async def test_a_thumbs_down_can_ask_the_experts_whose_answer_is_then_learned(slack):
    req, ts = slack.mention("UASKER", "how do I deploy?")
    await slack.send(req)
    (answer,) = slack.answers()
    await slack.send(vote(slack, "UASKER", answer, "down"))
    await slack.send(reason(slack, "UASKER", slack.fake.views[-1], "it is make ship now"))
    offer = [c.args for c in slack.fake.calls_to("chat.postEphemeral", ok_only=True) if c.args.get("blocks")][-1]
    assert offer["user"] == "UASKER" and offer["thread_ts"] == ts
    button = next(e for b in offer["blocks"] if b["type"] == "actions" for e in b["elements"])
    click = slack.events.block_action(
        user="UASKER",
        action_id=button["action_id"],
        value=button["value"],
        channel=slack.channel,
        message={"ts": slack.fake.next_ts(), "thread_ts": ts},
    )
    await slack.send(click)
    (help_msg,) = slack.help_requests()
    assert help_msg["thread_ts"] == ts
    text = all_text(help_msg)
    assert "how do I deploy?" in text and "it is make ship now" in text and "<@UEXPERT>" in text
    await slack.send(click)  # asking twice: the thread already waits
    assert len(slack.help_requests()) == 1
    reply, _ = slack.message("UEXPERT", "answer: Run make ship from main.", thread_ts=ts)
    await slack.send(reply)
    assert "Run make ship from main." in all_text(slack.answers()[-1])
    assert [e.answer for e in slack.runtime.learned.entries()] == ["Run make ship from main."]
