"""Discord start-up through the fake gateway: the refused message-content intent (close 4014),
a rejected token, and stopping cleanly."""

from __future__ import annotations

import asyncio
import logging

import discord
import pytest

from bot.config import Secrets, load_settings
from bot.platforms.discord.app import discord_enabled, run_discord
from bot.runtime import open_runtime
from tests.fakes.chat_model import ScriptedChatModel
from tests.fakes.discord_gateway import (
    MESSAGE_CONTENT_INTENT,
    DiscordHarness,
    FakeDiscord,
    is_help_request,
    write_config,
)


@pytest.fixture
async def refusing_fake():
    server = await FakeDiscord(refuse_message_content=True).start()
    yield server
    await server.close()


def answers(fake: FakeDiscord, channel_id: str) -> list[str]:
    return [m["content"] for m in fake.bot_messages(channel_id) if not is_help_request(m)]


async def test_refused_message_content_intent_is_explained_and_falls_back_to_mentions_and_dms(
    tmp_path, refusing_fake, caplog
):
    fake = refusing_fake
    caplog.set_level(logging.INFO, logger="threadwise.discord")
    bot = await DiscordHarness(tmp_path, fake, ScriptedChatModel()).open()
    try:
        # first IDENTIFY asked for message content and was closed with 4014; the second did not ask
        assert [bool(i["intents"] & MESSAGE_CONTENT_INTENT) for i in fake.identifies] == [True, False]
        assert fake.close_codes[:1] == [4014]
        explained = [r.getMessage() for r in caplog.records if "4014" in r.getMessage()]
        assert explained and "MESSAGE CONTENT INTENT" in explained[0] and "developer portal" in explained[0]
        assert not bot.bot.message_content_enabled

        alice = fake.add_user("alice")
        question = await fake.send_message(alice, f"<@{fake.bot.id}> how do I deploy?")  # mentions keep their text
        await fake.wait_until(lambda: answers(fake, question["id"]))
        await bot.idle()
        thread_id = question["id"]
        assert len(answers(fake, thread_id)) == 1

        # a follow-up without a mention arrives with empty text: never answered, not even "ask a question"
        await fake.send_message(alice, "and how do I roll back?", channel_id=thread_id)
        await bot.idle()
        assert len(answers(fake, thread_id)) == 1
        calls = len(bot.model.calls)

        # a mention in the thread still works, and so do DMs
        await fake.send_message(alice, f"<@{fake.bot.id}> and how do I roll back?", channel_id=thread_id)
        await fake.send_message(alice, "where is the on-call rota?", dm=True)
        await fake.wait_until(lambda: len(answers(fake, thread_id)) == 2 and answers(fake, fake.dm_channels[alice.id]))
        await bot.idle()
        assert len(bot.model.calls) > calls
    finally:
        await bot.close()


async def test_rejected_token_fails_at_start_with_a_clear_message(tmp_path, caplog):
    fake = await FakeDiscord().start()
    try:
        settings = load_settings(write_config(tmp_path, fake))
        secrets = Secrets(discord_token="not-the-right-token")
        assert discord_enabled(settings, secrets) and not discord_enabled(settings, Secrets())
        async with open_runtime(settings, secrets, chat_model=ScriptedChatModel()) as runtime:
            with pytest.raises(discord.LoginFailure):
                await asyncio.wait_for(run_discord(runtime), 10)
        assert any("DISCORD_TOKEN" in r.getMessage() and "Reset Token" in r.getMessage() for r in caplog.records)
        assert "not-the-right-token" not in caplog.text
        assert fake.identifies == []  # never reached the gateway
    finally:
        await fake.close()


async def test_stop_event_disconnects_after_in_flight_answers(tmp_path):
    fake = await FakeDiscord().start()
    try:
        bot = await DiscordHarness(tmp_path, fake, ScriptedChatModel()).open()
        alice = fake.add_user("alice")
        await fake.send_message(alice, "how do I deploy?", dm=True)
        await fake.wait_until(lambda: fake.calls("PUT", "/reactions/"))
        runner = bot._runner
        await bot.close()  # sets stop and waits for run_discord to return
        assert runner is not None and runner.done() and runner.exception() is None
        assert len(answers(fake, fake.dm_channels[alice.id])) == 1  # the answer was not cut off
    finally:
        await fake.close()
