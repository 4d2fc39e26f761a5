"""A reply to a help request in its syntax (``answer: ...``, ``retry: ...``, ``dismiss``) in
the request's thread always reaches the help desk, whatever the channel's reply policy
(``mentions_only`` included) and whomever else it mentions (``answer: <!channel> ...`` is the
expert's answer, its broadcast word broken when posted). Every reply policy x every reply
form, through signed Slack requests; one Discord case; and what still stays out: chatter
under ``mentions_only``, and the reply syntax where no help request waits."""

from __future__ import annotations

import json

import pytest

from tests.fakes.chat_model import ScriptedChatModel
from tests.fakes.discord_gateway import DiscordHarness, FakeDiscord, is_help_request
from tests.fakes.slack_api import TEAM_ID, SlackHarness, all_text, write_config
from tests.fakes.slack_api import is_help_request as is_slack_help_request

NOT_GROUNDED = json.dumps({"grounded": False, "useful": False, "feedback": "not supported by the documents"})
POLICIES = ["all", "unless_addressed_to_others", "mentions_only"]
FORMS = {
    "answer": "answer: Run make ship from main.",
    "answer to the channel": "answer: <!channel> Run make ship from main.",
    "answer naming a colleague": "answer: <@UOTHER> knows it: Run make ship from main.",
    "answer to a user group": "ANSWER: <!subteam^SEXPERTS> Run make ship from main.",
    "retry": "retry: the page is called shipping, look there",
    "retry mentioning here": "retry: <!here> the page is called shipping",
    "dismiss": "dismiss",
}


async def open_slack(tmp_path, fake, policy: str) -> SlackHarness:
    cfg = write_config(tmp_path, fake, slack=f'reply_policy = "{policy}"')
    return await SlackHarness(tmp_path, fake, cfg, ScriptedChatModel(script={"grade_answer": NOT_GROUNDED})).open()


async def paused_question(slack: SlackHarness) -> tuple[str, str, str]:
    """Ask a question the bot cannot ground: it posts a help request. Returns (ts, key, interrupt id)."""
    request, ts = slack.mention("UASKER", "how do I ship a release?")
    await slack.send(request, timeout=60)
    assert len(slack.help_requests()) == 1
    key = f"slack:{TEAM_ID}:{slack.channel}:{ts}"
    pending = await slack.runtime.service.pending_interrupt(key)
    assert pending is not None
    return ts, key, pending.id


@pytest.mark.parametrize("form", list(FORMS))
@pytest.mark.parametrize("policy", POLICIES)
async def test_a_help_reply_reaches_the_help_desk_whatever_the_policy(tmp_path, fake, policy, form):
    slack = await open_slack(tmp_path, fake, policy)
    try:
        ts, key, interrupt_id = await paused_question(slack)
        posts_before = len(slack.fake.posts(slack.channel))
        request, _ = slack.message("UEXPERT", FORMS[form], thread_ts=ts)
        await slack.send(request, timeout=60)
        pending = await slack.runtime.service.pending_interrupt(key)
        assert pending is None or pending.id != interrupt_id, "the help request is still waiting"
        posted = [p for p in slack.fake.posts(slack.channel)[posts_before:] if p.get("thread_ts") == ts]
        new = [all_text(p) for p in posted]
        assert new, "nothing was posted after the reply"
        for text in new:  # the expert's words are data: no live broadcast
            assert "<!channel>" not in text and "<!here>" not in text, text
        for post in posted:  # and no group mention but the help request's own (the configured experts)
            assert is_slack_help_request(post) or "<!subteam" not in all_text(post), all_text(post)
        if form.startswith("answer"):
            assert any("Run make ship from main." in t and "answered by Erik" in t for t in new), new
        elif form.startswith("retry"):
            asked = " ".join(str(m.content) for _, messages in slack.model.calls for m in messages)
            assert "the page is called shipping" in asked
        else:
            assert any("Sorry" in t for t in new), new
    finally:
        await slack.close()


async def test_what_stays_out_under_mentions_only(tmp_path, fake):
    """Chatter without a mention in a waiting thread, and the reply syntax in a thread that
    waits for nobody, are not for the bot under ``mentions_only``."""
    slack = await open_slack(tmp_path, fake, "mentions_only")
    try:
        ts, key, interrupt_id = await paused_question(slack)
        posts = len(slack.fake.posts(slack.channel))
        request, _ = slack.message("UEXPERT", "let me check with the team", thread_ts=ts)
        await slack.send(request)
        assert len(slack.fake.posts(slack.channel)) == posts
        assert (await slack.runtime.service.pending_interrupt(key)).id == interrupt_id
        request, _ = slack.message("UEXPERT", "dismiss", thread_ts=ts)
        await slack.send(request, timeout=60)
        assert await slack.runtime.service.pending_interrupt(key) is None
        posts = len(slack.fake.posts(slack.channel))
        request, _ = slack.message("UEXPERT", "answer: too late, nobody asked", thread_ts=ts)
        await slack.send(request)
        assert len(slack.fake.posts(slack.channel)) == posts  # nothing waits: not for the bot
        assert slack.model.calls and all("too late" not in str(m.content) for _, ms in slack.model.calls for m in ms)
    finally:
        await slack.close()


@pytest.fixture
async def discord_fake():
    server = await FakeDiscord().start()
    yield server
    await server.close()


async def test_discord_answer_to_everyone_in_a_mentions_only_thread(tmp_path, discord_fake):
    fake = discord_fake
    expert = fake.add_user("erin", roles=[fake.expert_role_id])
    bot = await DiscordHarness(
        tmp_path,
        fake,
        ScriptedChatModel(script={"grade_answer": NOT_GROUNDED}),
        discord='reply_policy = "mentions_only"',
    ).open()
    try:
        alice = fake.add_user("alice")
        msg = await fake.send_message(alice, f"<@{fake.bot.id}> How do I ship a release?")
        thread_id = msg["id"]
        await fake.wait_until(lambda: any(is_help_request(m) for m in fake.bot_messages(thread_id)), timeout=30)
        await bot.idle()
        await fake.send_message(expert, "answer: @everyone Run make ship from main.", channel_id=thread_id)
        await fake.wait_until(
            lambda: any(
                "Run make ship from main." in m["content"]
                for m in fake.bot_messages(thread_id)
                if not is_help_request(m)
            ),
            timeout=30,
        )
        await bot.idle()
        (answer,) = [
            m for m in fake.bot_messages(thread_id) if not is_help_request(m) and "Run make ship" in m["content"]
        ]
        assert not (answer["allowed_mentions"] or {}).get("parse")  # data: "@everyone" pings nobody
        assert await bot.runtime.service.pending_interrupt(f"discord:{fake.guild_id}:{thread_id}") is None
    finally:
        await bot.close()
