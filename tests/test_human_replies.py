"""Two human replies to one help request arriving together: exactly one resumes the run, the
other is told privately that the request was already handled. Text replies and buttons, in
Slack (signed events through bolt) and Discord (the fake gateway)."""

from __future__ import annotations

import asyncio

import pytest

from tests.fakes.chat_model import ScriptedChatModel
from tests.fakes.slack_api import SlackHarness, all_text, write_config
from tests.test_slack_help import ask_until_help, click, ephemerals_to, grader


@pytest.fixture
def flag():
    return {"stuck": True}


@pytest.fixture
async def slack(tmp_path, fake, flag):
    model = ScriptedChatModel(script={"grade_documents": grader(flag)})
    harness = await SlackHarness(tmp_path, fake, write_config(tmp_path, fake), model).open()
    yield harness
    await harness.close()


def text_reply(slack: SlackHarness, ts: str, text: str, user: str = "UEXPERT"):
    return slack.message(user, text, thread_ts=ts)[0]


async def together(slack: SlackHarness, *requests) -> None:
    """Deliver all requests before any of their work runs, then wait for all of it."""
    responses = await asyncio.gather(*(slack.deliver(r) for r in requests))
    assert all(r.status == 200 for r in responses)
    await slack.bot.drain(30)


def finals(slack: SlackHarness, ts: str) -> list[dict]:
    return [a for a in slack.answers() if a.get("thread_ts") == ts]


def handled_notes(slack: SlackHarness, user: str = "UEXPERT") -> list[str]:
    return [t for t in ephemerals_to(slack, user) if "already been handled" in t]


@pytest.mark.parametrize(
    "first, second",
    [
        ("answer: the freeze starts on Dec 20", "answer: it starts on Dec 18"),
        ("answer: the freeze starts on Dec 20", "dismiss"),
        ("dismiss", "answer: the freeze starts on Dec 20"),
    ],
)
async def test_two_text_replies_one_wins(slack, first, second):
    ts, _ = await ask_until_help(slack)
    await together(slack, text_reply(slack, ts, first), text_reply(slack, ts, second))
    assert len(finals(slack, ts)) == 1
    assert len(handled_notes(slack)) == 1
    assert slack.reactions_now(ts) in (["white_check_mark"], ["disappointed"])


@pytest.mark.parametrize("button", ["threadwise_dismiss"])
@pytest.mark.parametrize("text_first", [True, False])
async def test_text_reply_and_button_one_wins(slack, button, text_first):
    ts, help_msg = await ask_until_help(slack)
    reqs = [text_reply(slack, ts, "answer: the freeze starts on Dec 20"), click(slack, "UEXPERT", help_msg, button)]
    await together(slack, *(reqs if text_first else reqs[::-1]))
    assert len(finals(slack, ts)) == 1
    assert len(handled_notes(slack)) == 1


async def test_retry_and_answer_together_the_answer_does_not_resume_the_next_request(slack):
    """The loser must not resume the help request the winner's retry led to."""
    ts, _ = await ask_until_help(slack)
    await together(
        slack,
        text_reply(slack, ts, "retry: look for the release calendar"),
        text_reply(slack, ts, "answer: the freeze starts on Dec 20"),
    )
    helps = [h for h in slack.help_requests() if h.get("thread_ts") == ts]
    answered = finals(slack, ts)
    # either the retry won (a second help request, no answer) or the answer won (no new request)
    assert (len(helps), len(answered)) in ((2, 0), (1, 1)), (len(helps), [all_text(a) for a in answered])
    assert len(handled_notes(slack)) == 1


async def test_after_a_retry_a_reply_to_the_old_request_is_refused(slack):
    """A reply written to the first help request, arriving after a retry produced a second one."""
    ts, help_msg = await ask_until_help(slack)
    await slack.send(text_reply(slack, ts, "retry: look for the release calendar"))
    assert len([h for h in slack.help_requests() if h.get("thread_ts") == ts]) == 2
    await slack.send(click(slack, "UEXPERT", help_msg, "threadwise_dismiss"))  # a button of the first request
    assert finals(slack, ts) == []
    assert len(handled_notes(slack)) == 1
    await slack.send(text_reply(slack, ts, "answer: the freeze starts on Dec 20"))  # the current one: resumes
    assert len(finals(slack, ts)) == 1


async def test_reply_restart_second_reply_refused(slack):
    """Claims live in the store: after a restart a second reply is still refused."""
    ts, help_msg = await ask_until_help(slack)
    await slack.send(text_reply(slack, ts, "answer: the freeze starts on Dec 20"))
    await slack.restart()
    await slack.send(click(slack, "UEXPERT", help_msg, "threadwise_dismiss"))
    assert len(finals(slack, ts)) == 1
    assert len(handled_notes(slack)) == 1


# ---- Discord: a text reply and a button at once ------------------------------------------------
@pytest.fixture
async def discord_fake():
    from tests.fakes.discord_gateway import FakeDiscord

    server = await FakeDiscord().start()
    yield server
    await server.close()


@pytest.mark.parametrize("button_first", [False, True])
async def test_discord_text_reply_and_button_one_wins(tmp_path, discord_fake, button_first):
    from tests.fakes.discord_gateway import DiscordHarness
    from tests.test_discord_bot import (
        answers,
        ask_in_channel,
        button_ids,
        ephemeral_texts,
        never_grounded,
        wait_help_request,
    )

    fake = discord_fake
    bot = await DiscordHarness(tmp_path, fake, never_grounded()).open()
    try:
        alice = fake.add_user("alice")
        erin = fake.add_user("erin", roles=[fake.expert_role_id])
        _, thread_id = await ask_in_channel(fake, bot, alice, "what is the VPN password policy?")
        help_msg = await wait_help_request(fake, bot, thread_id)
        text = fake.send_message(erin, "answer: Every 90 days, enforced by IT.", channel_id=thread_id)
        click = fake.click(erin, help_msg, button_ids(help_msg)["Dismiss"])
        results = await asyncio.gather(*((click, text) if button_first else (text, click)))
        click_payload = results[0] if button_first else results[1]
        await fake.wait_until(lambda: answers(fake, thread_id), timeout=20)
        await asyncio.sleep(0.5)
        await bot.idle()
        notes = ephemeral_texts(fake, click_payload) + answers(fake, fake.dm_channels.get(erin.id, "-"))
        assert len(answers(fake, thread_id)) == 1
        assert len([n for n in notes if "already been handled" in n]) == 1, notes
    finally:
        await bot.close()
