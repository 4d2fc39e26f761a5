"""The shared chat layer (bot/chat/) as Slack shows it: the same rules as on Discord
(tests/test_chat_discord.py), through the fake Slack Web API.

* who may answer a help request: its experts *and* the admins (bot.chat.policy.may_answer_help);
* the help request says how long it stays open (bot.chat.help.expiry_note);
* after a resume the help request shows the shared handled note (bot.chat.help.handled_note);
* the reply syntax shown is the one parsed (bot.chat.text).
"""

from __future__ import annotations

import pytest

from bot.chat.help import expiry_note
from bot.chat.policy import HELP_REFUSAL
from bot.chat.syntax import REPLY_SYNTAX, parse_human_reply
from tests.fakes.chat_model import ScriptedChatModel
from tests.fakes.slack_api import SlackHarness, all_text, write_config
from tests.test_slack_help import ask_until_help, click, ephemerals_to, grader, submit


@pytest.fixture
async def slack(tmp_path, fake):
    model = ScriptedChatModel(script={"grade_documents": grader({"stuck": True})})
    harness = await SlackHarness(tmp_path, fake, write_config(tmp_path, fake), model).open()
    yield harness
    await harness.close()


async def test_an_admin_who_is_no_expert_may_answer_by_button_and_modal(slack):
    ts, help_msg = await ask_until_help(slack)
    await slack.send(click(slack, "UADMIN", help_msg, "threadwise_answer"))
    assert slack.fake.calls_to("views.open", ok_only=True), "no modal opened for the admin"
    await slack.send(submit(slack, "UADMIN", slack.fake.views[-1], "The freeze starts on Dec 20."))
    (answer,) = slack.answers()
    assert answer["thread_ts"] == ts and "Dec 20" in all_text(answer)
    assert slack.reactions_now(ts) == ["white_check_mark"]
    # the help request shows the shared handled note, naming who resumed it
    updated = slack.fake.messages[(slack.channel, help_msg["ts"])]
    assert "Help request answered by <@UADMIN>." in all_text(updated)
    assert not any(b["type"] == "actions" for b in updated["blocks"])


async def test_an_admin_may_answer_by_text_reply(slack):
    ts, _ = await ask_until_help(slack)
    await slack.send(slack.message("UADMIN", "answer: the freeze starts on Dec 20", thread_ts=ts)[0])
    (answer,) = slack.answers()
    assert "Dec 20" in all_text(answer)


async def test_someone_neither_expert_nor_admin_is_refused_with_the_shared_words(slack):
    ts, help_msg = await ask_until_help(slack)
    await slack.send(click(slack, "UOTHER", help_msg, "threadwise_dismiss"))
    (refusal,) = ephemerals_to(slack, "UOTHER")
    assert refusal.startswith("Only the experts named for this channel (<@UEXPERT>")
    assert refusal.endswith(HELP_REFUSAL.split("channel")[1])  # ", or an admin, can answer help requests."
    assert slack.answers() == []
    assert slack.reactions_now(ts) == ["raising_hand"]


async def test_help_request_says_how_long_it_stays_open_and_shows_the_parsed_syntax(slack):
    _, help_msg = await ask_until_help(slack)
    text = all_text(help_msg)
    assert "stays open for 10 min" in text  # [service] help_timeout_seconds = 600 in the test config
    assert expiry_note("10 min").replace("'", "") in text.replace("'", "")
    for shown in ("answer: <your answer>", "retry: <a hint for a new search>", "dismiss"):
        assert shown.replace("<", "&lt;").replace(">", "&gt;") in text
        assert parse_human_reply(shown) is not None
    assert REPLY_SYNTAX.count("`") == 6


def _model_down(messages) -> str:
    raise RuntimeError("model down")


async def test_a_failing_run_ends_in_one_apology_from_the_service(tmp_path, fake):
    """ChatService.handle never raises: a failing run posts its own apology, once; the Slack
    adapter adds nothing (no second apology, no second status)."""
    model = ScriptedChatModel(script={"route": _model_down, "generate": _model_down})
    harness = await SlackHarness(tmp_path, fake, write_config(tmp_path, fake), model).open()
    try:
        req, ts = harness.mention("UASKER", "how do I deploy?")
        await harness.deliver(req)
        await harness.bot.drain(20)
        posted = [all_text(p) for p in fake.posts(harness.channel) if p.get("thread_ts") == ts]
        assert len(posted) == 1 and posted[0].startswith("Sorry, I couldn't find a reliable answer")
        assert harness.reactions_now(ts) == ["disappointed"]
    finally:
        await harness.close()
