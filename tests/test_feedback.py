"""Answer feedback: 👍/👎 on every answer, one vote per user per answer (the latest counts),
a 👎 asks privately for an optional reason, and ``threadwise feedback`` summarises and exports."""

from __future__ import annotations

import json

import pytest

from bot.__main__ import main
from graphs.models import ScriptedChatModel
from tests.fakes.slack_api import SlackHarness, all_text, vote_buttons, write_config


def shown(slack, post: dict) -> dict:
    """A posted message as a client shows it (with its ts)."""
    ts = next(c.response["ts"] for c in slack.fake.calls_to("chat.postMessage", ok_only=True) if c.args is post)
    return slack.fake.messages[(slack.channel, ts)]


def vote(slack, user: str, post: dict, which: str):
    post = shown(slack, post)
    button = vote_buttons(post)[f"threadwise_vote_{which}"]
    return slack.events.block_action(user=user, action_id=button["action_id"], value=button["value"],
                                     channel=slack.channel, message=post)


def reason(slack, user: str, view: dict, text: str):
    block = next(b for b in view["blocks"] if b["type"] == "input")
    return slack.events.view_submission(user=user, view=view, values={
        block["block_id"]: {block["element"]["action_id"]: text}})


async def rows(slack) -> list[dict]:
    return await slack.runtime.service.store.feedback_rows()


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
    forged = slack.events.block_action(user="UOTHER", action_id="threadwise_vote_up", value="deadbeefdeadbeef",
                                       channel=slack.channel, message=shown(slack, answer))
    await slack.send(forged)
    notes = [c.args["text"] for c in slack.fake.calls_to("chat.postEphemeral", ok_only=True)]
    assert any("couldn't record that vote" in n for n in notes)
    assert len(await rows(slack)) == 1


async def test_apologies_carry_no_vote_buttons(tmp_path, fake):
    model = ScriptedChatModel(script={
        "grade_documents": lambda m: json.dumps({"documents": [], "feedback": "nothing relevant"})})
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

