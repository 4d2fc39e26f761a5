"""``-v`` (DEBUG) logs events, never the text of messages, documents or answers: not in our
lines and not in the libraries' request and payload dumps (slack_sdk, slack_bolt, discord.py,
httpx/httpcore, aiohttp, the model clients). Through the real process for Slack; the Discord
gateway and REST fakes with the same logging policy (:func:`bot.logs.setup_logging`) for Discord."""

from __future__ import annotations

import io
import logging

import aiohttp

from bot.logs import setup_logging
from tests.fakes.bot_process import BotProcess
from tests.fakes.chat_model import ScriptedChatModel
from tests.fakes.discord_gateway import DiscordHarness, FakeDiscord
from tests.fakes.mistral_stall import mistral_server, models_section
from tests.fakes.slack_api import BOT_USER_ID, SlackEvents, write_config
from tests.test_slack_run import free_port, post, thread_posts

CHANNEL = "C0GENERAL"
QUESTION = "how do I roll back a deploy, says Quetzalcoatl?"


def _leaks(output: str, texts: list[str]) -> list[str]:
    return [t for t in texts if t and t in output]


async def test_verbose_slack_run_logs_no_message_document_or_answer_text(tmp_path, fake):
    port = free_port()
    events = SlackEvents()
    async with mistral_server() as model:
        config = write_config(
            tmp_path, fake, slack=f'http_port = {port}\nhttp_host = "127.0.0.1"', extra=models_section(model)
        )
        proc = BotProcess(config, port, tmp_path / "run.log", {"MISTRAL_API_KEY": "k"}, args=["-v"])
        try:
            async with aiohttp.ClientSession() as session:
                await proc.wait_ready(session)
                ts = fake.next_ts()
                event = SlackEvents.message(
                    user="UASKER", channel=CHANNEL, ts=ts, kind="app_mention", text=f"<@{BOT_USER_ID}> {QUESTION}"
                )
                status, _ = await post(session, proc.url + "/slack/events", events.event(event))
                assert status == 200
                await fake.wait_for(
                    lambda: thread_posts(fake, ts) and fake.reactions.get((CHANNEL, ts)) == ["white_check_mark"],
                    timeout=60,
                )
        finally:
            output = await proc.stop()
    answer = thread_posts(fake, ts)[0]["text"]
    assert "make rollback" in answer
    assert " DEBUG " in output  # -v is on: events are logged
    answer_lines = [line.strip() for line in answer.splitlines() if len(line.strip()) > 20]
    leaks = _leaks(output, ["Quetzalcoatl", "roll back a deploy", "make rollback", "ten minutes", *answer_lines])
    assert not leaks, (leaks, [line for line in output.splitlines() if any(t in line for t in leaks)][:5])


async def test_verbose_discord_logs_no_message_or_answer_text(tmp_path):
    fake = await FakeDiscord().start()
    stream = io.StringIO()
    handler = setup_logging("DEBUG", "text", stream=stream)  # what `threadwise run -v` sets up
    harness = None
    try:
        harness = await DiscordHarness(tmp_path, fake, ScriptedChatModel()).open()
        user = fake.add_user("Asker")
        msg = await fake.send_message(user, f"<@{fake.bot.id}> {QUESTION}")
        await fake.wait_until(lambda: msg["id"] in fake.threads)
        await harness.idle()
        answer = "\n".join(m["content"] for m in fake.bot_messages(msg["id"]))
    finally:
        if harness is not None:
            await harness.close()
        await fake.close()
        logging.getLogger().removeHandler(handler)
    output = stream.getvalue()
    assert "answer from the knowledge base" in answer
    assert " DEBUG " in output  # events are logged
    answer_lines = [line.strip() for line in answer.splitlines() if len(line.strip()) > 20]
    leaks = _leaks(output, ["Quetzalcoatl", "roll back a deploy", "make rollback", "ten minutes", *answer_lines])
    assert not leaks, (leaks, [line for line in output.splitlines() if any(t in line for t in leaks)][:5])
