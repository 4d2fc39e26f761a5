"""Broadcast words in user, model or display-name text are never live, on any path that posts.

Slack: ``<!channel>``, ``<!here>``, ``<!everyone>`` markup and ``@channel`` / ``@here`` /
``@everyone`` words; Discord: ``@everyone`` / ``@here``. The guard sits where the bot talks to
the platform (the Slack Web API client and response_url poster; discord.py's REST and
webhook requests), so every post, update, ephemeral message, view and interaction response
is covered whatever built its text: checked here on raw text sent through each Slack method,
on the help request's "answered by NAME" update, and on Discord's messages, edits and
interaction responses, all seen by the fake servers."""

from __future__ import annotations

import json
import re
from typing import Any

import aiohttp
import discord
import pytest

from bot.platforms.slack.client import InertWebhookClient, make_client
from tests.fakes.chat_model import ScriptedChatModel
from tests.fakes.discord_gateway import DiscordHarness, FakeDiscord
from tests.fakes.slack_api import BOT_TOKEN, SlackHarness, write_config
from tests.test_slack_help import ask_until_help, click, grader, submit

HOSTILE = "<!channel> Mallory @here says @everyone and <!here|here> and <!everyone> @Channel hi"
SLACK_LIVE = re.compile(r"<!(channel|here|everyone)\b|(?<![\w@])@(channel|here|everyone)\b", re.I)
DISCORD_LIVE = re.compile(r"(?<![\w@])@(everyone|here)\b", re.I)


def shown_texts(value: Any) -> list[str]:
    """Every string a platform would show, anywhere in a request's arguments."""
    if isinstance(value, dict):
        return [t for item in value.values() for t in shown_texts(item)]
    if isinstance(value, list):
        return [t for item in value for t in shown_texts(item)]
    if isinstance(value, str):
        if value[:1] in "[{":
            try:
                return shown_texts(json.loads(value))
            except ValueError:
                pass
        return [value]
    return []


def slack_live(calls: list[Any]) -> list[str]:
    return [t for call in calls for t in shown_texts(call.args) if SLACK_LIVE.search(t)]


def _section(text: str) -> dict:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


async def test_every_slack_posting_method_is_guarded_whatever_its_text(fake):
    """Raw text, not rendered by anything, through each method the bot posts with."""
    client = make_client(BOT_TOKEN, fake.base_url, rate_limit_retries=0)
    posted = await client.chat_postMessage(channel="C0GENERAL", text=HOSTILE, blocks=[_section(HOSTILE)])
    await client.chat_update(
        channel="C0GENERAL",
        ts=posted["ts"],
        text=HOSTILE,
        blocks=[{"type": "context", "elements": [{"type": "mrkdwn", "text": HOSTILE}]}],
    )
    await client.chat_postEphemeral(channel="C0GENERAL", user="UASKER", text=HOSTILE, blocks=[_section(HOSTILE)])
    view = {"type": "modal", "callback_id": "x", "title": {"type": "plain_text", "text": "@here"}}
    await client.views_open(trigger_id="1.t", view={**view, "blocks": [_section(HOSTILE)]})
    await InertWebhookClient(fake.response_url()).send(text=HOSTILE, blocks=[_section(HOSTILE)])
    calls = fake.calls_to("chat.postMessage", "chat.update", "chat.postEphemeral", "views.open", "response_url")
    assert len(calls) == 5
    assert slack_live(calls) == [], slack_live(calls)
    assert "Mallory @\u2060here" in json.dumps([c.args for c in calls], ensure_ascii=False)  # shown, not dropped


@pytest.fixture
async def slack(tmp_path, fake):
    model = ScriptedChatModel(script={"grade_documents": grader({"stuck": True})})
    harness = await SlackHarness(tmp_path, fake, write_config(tmp_path, fake), model).open()
    yield harness
    await harness.close()


async def test_a_hostile_display_name_stays_inert_in_the_answered_by_update(slack):
    """The help request's "answered by NAME" note (chat.update) and the answer's note carry an
    expert's display name; the name, the form text and the question are data."""
    for profile in ("display_name", "real_name"):
        slack.fake.users["UEXPERT"]["profile"][profile] = HOSTILE
    slack.fake.users["UEXPERT"]["real_name"] = HOSTILE
    ts, help_msg = await ask_until_help(slack)
    await slack.send(click(slack, "UEXPERT", help_msg, "threadwise_answer"))
    await slack.send(submit(slack, "UEXPERT", slack.fake.views[-1], f"The freeze is on Dec 20. {HOSTILE}"))
    assert len(slack.answers()) == 1
    updates = slack.fake.calls_to("chat.update", ok_only=True)
    assert any("Mallory" in json.dumps(c.args) for c in updates)  # the note names the expert
    calls = slack.fake.calls_to("chat.postMessage", "chat.update", "chat.postEphemeral", "views.open")
    assert slack_live(calls) == [], slack_live(calls)


async def test_discord_messages_edits_thread_names_and_follow_ups_are_guarded(tmp_path):
    fake = await FakeDiscord().start()
    harness = None
    try:
        harness = await DiscordHarness(tmp_path, fake, ScriptedChatModel(script={"generate": HOSTILE})).open()
        user = fake.add_user(HOSTILE)
        msg = await fake.send_message(user, f"<@{fake.bot.id}> what is {HOSTILE}?")
        await fake.wait_until(lambda: msg["id"] in fake.threads)
        await harness.idle()
        # raw text through discord.py's own calls: a message, its edit, and a thread name
        channel = harness.bot.get_channel(int(msg["id"])) or await harness.bot.fetch_channel(int(msg["id"]))
        sent = await channel.send(HOSTILE, allowed_mentions=discord.AllowedMentions.none())
        await sent.edit(content=f"edited {HOSTILE}")
        # an interaction follow-up goes through discord.py's webhook adapter, not the bot's HTTP client
        async with aiohttp.ClientSession() as session:
            hook = discord.Webhook.partial(int(fake.application_id), "itok-1", session=session)
            await hook.send(f"follow-up {HOSTILE}", allowed_mentions=discord.AllowedMentions.none())
        await harness.idle()
    finally:
        if harness is not None:
            await harness.close()
        await fake.close()
    bodies = [r.body for r in fake.requests if r.method in ("POST", "PATCH", "PUT") and r.body]
    assert any("Mallory" in json.dumps(b, ensure_ascii=False) for b in bodies)
    assert any("follow-up" in m["content"] for m in fake.followups)
    live = [t for b in bodies for t in shown_texts(b) if DISCORD_LIVE.search(t)]
    assert live == [], live
