"""Help requests in Slack: posted with expert mentions and buttons, resumed exactly once by an
expert (button -> modal -> submission, or a text reply), refused for everybody else."""

from __future__ import annotations

import asyncio
import copy
import json
import re

import pytest

from tests.fakes.chat_model import ScriptedChatModel
from tests.fakes.slack_api import SlackHarness, all_text, section_texts, write_config


def grader(flag: dict) -> callable:
    """grade_documents: nothing relevant while ``flag["stuck"]``, so the graph asks a human."""

    def reply(messages):
        if not flag["stuck"]:
            return ScriptedChatModel.default_reply("grade_documents", messages)
        ids = [int(i) for i in re.findall(r"^\[(\d+)\]", str(messages[-1].content), re.M)]
        return json.dumps(
            {
                "documents": [{"id": i, "relevant": False, "facts": ""} for i in ids],
                "feedback": "nothing about the deploy freeze",
            }
        )

    return reply


@pytest.fixture
def flag():
    return {"stuck": True}


@pytest.fixture
async def slack(tmp_path, fake, flag):
    model = ScriptedChatModel(script={"grade_documents": grader(flag)})
    harness = await SlackHarness(tmp_path, fake, write_config(tmp_path, fake), model).open()
    yield harness
    await harness.close()


async def ask_until_help(slack: SlackHarness) -> tuple[str, dict]:
    """Ask a question the knowledge base can't answer; return (question ts, help message)."""
    req, ts = slack.mention("UASKER", "when is the deploy freeze?")
    await slack.send(req)
    helps = slack.help_requests()
    assert len(helps) == 1
    help_ts = [c.response["ts"] for c in slack.fake.calls_to("chat.postMessage", ok_only=True) if c.args is helps[0]][0]
    return ts, copy.deepcopy(slack.fake.messages[(slack.channel, help_ts)])  # as a client still shows it


def click(slack: SlackHarness, user: str, help_msg: dict, action_id: str) -> tuple[str, dict]:
    button = next(
        e for b in help_msg["blocks"] if b["type"] == "actions" for e in b["elements"] if e["action_id"] == action_id
    )
    return slack.events.block_action(
        user=user, action_id=action_id, value=button["value"], channel=slack.channel, message=help_msg
    )


def submit(slack: SlackHarness, user: str, view: dict, text: str) -> tuple[str, dict]:
    input_block = next(b for b in view["blocks"] if b["type"] == "input")
    return slack.events.view_submission(
        user=user, view=view, values={input_block["block_id"]: {input_block["element"]["action_id"]: text}}
    )


def ephemerals_to(slack: SlackHarness, user: str) -> list[str]:
    return [c.args["text"] for c in slack.fake.calls_to("chat.postEphemeral", ok_only=True) if c.args["user"] == user]


async def test_help_request_mentions_experts_with_buttons_in_thread(slack):
    ts, help_msg = await ask_until_help(slack)
    assert help_msg["thread_ts"] == ts
    text = all_text(help_msg)
    assert "<@UEXPERT>" in text and "<!subteam^SEXPERTS>" in text
    assert "when is the deploy freeze?" in text
    buttons = [e["text"]["text"] for b in help_msg["blocks"] if b["type"] == "actions" for e in b["elements"]]
    assert buttons == ["Answer", "Retry with hint", "Dismiss"]
    assert "answer:" in text and "retry:" in text and "dismiss" in text  # for clients without buttons
    assert slack.answers() == []
    assert slack.reactions_now(ts) == ["raising_hand"]


async def test_answer_button_opens_modal_and_submission_posts_the_answer_once(slack):
    ts, help_msg = await ask_until_help(slack)
    await slack.send(click(slack, "UEXPERT", help_msg, "threadwise_answer"))
    opened = slack.fake.calls_to("views.open", ok_only=True)
    assert len(opened) == 1
    view = slack.fake.views[-1]
    assert "when is the deploy freeze?" in json.dumps(view["blocks"])

    await slack.send(submit(slack, "UEXPERT", view, "The freeze starts on **Dec 20**."))
    answers = slack.answers()
    assert len(answers) == 1 and answers[0]["thread_ts"] == ts
    assert "The freeze starts on *Dec 20*." in section_texts(answers[0])[0]
    assert "answered by Erik" in all_text(answers[0])
    assert slack.reactions_now(ts) == ["white_check_mark"]
    # the help request lost its buttons and says who took it
    updated = slack.fake.messages[(slack.channel, help_msg["ts"])]
    assert not any(b["type"] == "actions" for b in updated["blocks"])
    assert "<@UEXPERT>" in all_text(updated)

    # a second submission (another modal, a double click) does not resume twice
    await slack.send(submit(slack, "UEXPERT", view, "Something else"))
    await slack.send(click(slack, "UEXPERT", help_msg, "threadwise_dismiss"))
    assert len(slack.answers()) == 1
    assert len(ephemerals_to(slack, "UEXPERT")) == 2
    assert "already been handled" in ephemerals_to(slack, "UEXPERT")[0]


async def test_non_expert_cannot_use_the_buttons_or_the_modal(slack):
    ts, help_msg = await ask_until_help(slack)
    for action in ("threadwise_answer", "threadwise_retry", "threadwise_dismiss"):
        await slack.send(click(slack, "UOTHER", help_msg, action))
    assert slack.fake.calls_to("views.open") == []
    notes = ephemerals_to(slack, "UOTHER")
    assert len(notes) == 3 and all("expert" in n for n in notes)
    # a forged submission of the modal is refused as well
    await slack.send(click(slack, "UEXPERT", help_msg, "threadwise_answer"))
    await slack.send(submit(slack, "UOTHER", slack.fake.views[-1], "wrong answer"))
    assert slack.answers() == []
    assert len(ephemerals_to(slack, "UOTHER")) == 4
    assert slack.reactions_now(ts) == ["raising_hand"]  # still waiting for an expert


async def test_group_member_is_an_expert(slack):
    ts, help_msg = await ask_until_help(slack)
    await slack.send(click(slack, "UGROUPEXPERT", help_msg, "threadwise_dismiss"))
    answers = slack.answers()
    assert len(answers) == 1 and "couldn't find a reliable answer" in all_text(answers[0])
    assert slack.reactions_now(ts) == ["disappointed"]


async def test_dismiss_button_apologises_once_even_when_clicked_twice_at_once(slack):
    ts, help_msg = await ask_until_help(slack)
    first = click(slack, "UEXPERT", help_msg, "threadwise_dismiss")
    second = click(slack, "UEXPERT", help_msg, "threadwise_dismiss")
    await asyncio.gather(slack.deliver(first), slack.deliver(second))
    await slack.bot.drain(20)
    answers = slack.answers()
    assert len(answers) == 1 and answers[0]["thread_ts"] == ts
    assert "no grounded answer found" in all_text(answers[0])
    assert slack.reactions_now(ts) == ["disappointed"]


async def test_retry_with_hint_modal_runs_again_with_the_hint(slack, flag):
    ts, help_msg = await ask_until_help(slack)
    await slack.send(click(slack, "UEXPERT", help_msg, "threadwise_retry"))
    view = slack.fake.views[-1]
    assert view["callback_id"] == "threadwise_retry_modal"
    flag["stuck"] = False
    calls_before = len(slack.model.calls)
    await slack.send(submit(slack, "UEXPERT", view, "it is called the change freeze"))
    answers = slack.answers()
    assert len(answers) == 1 and answers[0]["thread_ts"] == ts
    assert "Here is the answer from the knowledge base" in all_text(answers[0])
    later = " ".join(str(m.content) for _, msgs in slack.model.calls[calls_before:] for m in msgs)
    assert "it is called the change freeze" in later
    assert slack.reactions_now(ts) == ["white_check_mark"]


async def test_expert_text_reply_answers_in_thread(slack):
    ts, _ = await ask_until_help(slack)
    reply, reply_ts = slack.message("UEXPERT", "answer: from Dec 20 to Jan 3", thread_ts=ts)
    await slack.send(reply)
    answers = slack.answers()
    assert len(answers) == 1 and answers[0]["thread_ts"] == ts
    assert "from Dec 20 to Jan 3" in all_text(answers[0])
    assert slack.reactions_now(ts) == ["white_check_mark"]  # the question's status, not the reply's
    # the same reply delivered again does nothing
    again, _ = slack.message("UEXPERT", "answer: from Dec 20 to Jan 3", thread_ts=ts, ts=reply_ts)
    await slack.send(again)
    assert len(slack.answers()) == 1


async def test_expert_text_dismiss_and_retry(slack, flag):
    ts, _ = await ask_until_help(slack)
    reply, _ = slack.message("UEXPERT", "retry: look for the change freeze page", thread_ts=ts)
    await slack.send(reply)  # still stuck: a second help request
    assert len(slack.help_requests()) == 2 and slack.answers() == []
    dismiss, _ = slack.message("UEXPERT", "dismiss", thread_ts=ts)
    await slack.send(dismiss)
    answers = slack.answers()
    assert len(answers) == 1 and "no grounded answer found" in all_text(answers[0])
    assert slack.reactions_now(ts) == ["disappointed"]


async def test_non_expert_text_reply_is_refused_privately(slack):
    ts, _ = await ask_until_help(slack)
    reply, _ = slack.message("UOTHER", "answer: tomorrow", thread_ts=ts)
    await slack.send(reply)
    assert slack.answers() == []
    assert len(ephemerals_to(slack, "UOTHER")) == 1
    assert slack.reactions_now(ts) == ["raising_hand"]
    # an expert can still answer afterwards
    reply, _ = slack.message("UEXPERT", "answer: Dec 20", thread_ts=ts)
    await slack.send(reply)
    assert len(slack.answers()) == 1


async def test_stale_button_of_an_older_help_request_does_not_resume_a_newer_one(slack):
    ts, first_help = await ask_until_help(slack)
    reply, _ = slack.message("UEXPERT", "retry: try again", thread_ts=ts)
    await slack.send(reply)  # still stuck: a new help request in the same thread
    assert len(slack.help_requests()) == 2
    await slack.send(click(slack, "UEXPERT", first_help, "threadwise_dismiss"))
    assert slack.answers() == []  # the old button does not dismiss the new request
    assert "already been handled" in ephemerals_to(slack, "UEXPERT")[-1]


async def test_buttons_work_after_a_restart(slack):
    ts, help_msg = await ask_until_help(slack)
    await slack.restart()
    await slack.send(click(slack, "UEXPERT", help_msg, "threadwise_answer"))
    await slack.send(submit(slack, "UEXPERT", slack.fake.views[-1], "Dec 20"))
    answers = slack.answers()
    assert len(answers) == 1 and answers[0]["thread_ts"] == ts
    assert slack.reactions_now(ts) == ["white_check_mark"]


async def test_help_timeout_apologises_in_the_thread(tmp_path, fake, flag):
    config = write_config(tmp_path, fake, extra="")
    text = config.read_text().replace("help_timeout_seconds = 600", "help_timeout_seconds = 0.5")
    config.write_text(text)
    model = ScriptedChatModel(script={"grade_documents": grader(flag)})
    harness = await SlackHarness(tmp_path, fake, config, model).open()
    try:
        req, ts = harness.mention("UASKER", "when is the deploy freeze?")
        await harness.send(req)
        assert len(harness.help_requests()) == 1
        await fake.wait_for(lambda: harness.answers(), timeout=10)
        await fake.wait_for(lambda: harness.reactions_now(ts) == ["disappointed"], timeout=10)
        assert harness.answers()[0]["thread_ts"] == ts
    finally:
        await harness.close()


async def test_text_reply_resumes_after_a_restart(slack):
    ts, _ = await ask_until_help(slack)
    await slack.restart()
    reply, _ = slack.message("UEXPERT", "answer: Dec 20", thread_ts=ts)  # no mention: the thread is known
    await slack.send(reply)
    answers = slack.answers()
    assert len(answers) == 1 and answers[0]["thread_ts"] == ts and "Dec 20" in all_text(answers[0])
    assert slack.reactions_now(ts) == ["white_check_mark"]


async def test_blank_modal_submission_is_sent_back_with_an_error(slack):
    ts, help_msg = await ask_until_help(slack)
    await slack.send(click(slack, "UEXPERT", help_msg, "threadwise_answer"))
    resp = await slack.deliver(submit(slack, "UEXPERT", slack.fake.views[-1], "   "))
    assert resp.status == 200 and json.loads(resp.body)["response_action"] == "errors"
    await slack.bot.drain(10)
    assert slack.answers() == [] and slack.reactions_now(ts) == ["raising_hand"]


async def test_a_text_reply_in_a_thread_waiting_for_no_one_is_neither_asked_nor_learned(slack, flag):
    """The same code answers it on every platform (the dispatch): one private line, no second answer."""
    flag["stuck"] = False
    req, ts = slack.mention("UASKER", "when is the deploy freeze?")
    await slack.send(req)
    assert len(slack.answers()) == 1 and slack.help_requests() == []
    await slack.send(slack.message("UEXPERT", "answer: the freeze starts on Dec 20", thread_ts=ts)[0])
    assert len(slack.answers()) == 1 and slack.help_requests() == []
    notes = ephemerals_to(slack, "UEXPERT")
    assert len(notes) == 1 and notes[0].startswith("Nothing in this thread is waiting for an expert's answer"), notes
