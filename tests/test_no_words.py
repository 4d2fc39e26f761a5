"""A message with no words (only emoji, symbols, mentions, lone surrogates or control
characters) gets the "What would you like to know?" reply, with no model call and no graph
run, on every entry path: Slack (signed requests), Discord (the fake gateway), the console
and ``threadwise ask`` (a real process). One definition: :func:`bot.chat.syntax.has_words`."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest
from rich.console import Console

from bot.chat.syntax import has_words
from bot.config import ServiceSettings
from bot.platforms.console import run_console
from tests.conftest import scripted_runtime, write_config
from tests.fakes.chat_model import ScriptedChatModel
from tests.fakes.discord_gateway import DiscordHarness, FakeDiscord
from tests.fakes.slack_api import TEAM_ID, SlackHarness
from tests.fakes.slack_api import write_config as write_slack_config

REPLY = ServiceSettings().empty_question_reply

#: What people send that holds no words: an emoji, a shortcode, symbols, a lone surrogate
#: (a broken emoji), control characters, mentions of others only, nothing after the mention.
SLACK_NO_WORDS = [
    "🙂",
    ":slightly_smiling_face: :+1::skin-tone-2:",
    "?!… ★ → © ✔︎ 👍🏽",
    "\ud83d",
    "\x00\x07\x1b",
    "<@UOTHER> <!here>",
    "",
]
DISCORD_NO_WORDS = ["🙂", "<:party:123456789012345678> ✨", "?!… ★ → ©", "\ud83d", "<@&42> <#43>", ""]


@pytest.mark.parametrize(
    "text",
    [
        "🙂",
        "?!",
        "\ufffd\ufffd",
        ":wave:",
        "<@U1> <#C1|general>",
        "@ann #general",
        "<:custom:1234> <a:dance:99>",
        "\u200b\u0301",
        "  \n\t",
    ],
)
def test_no_words(text):
    assert not has_words(text)


@pytest.mark.parametrize("text", ["hi", "日本語", "Ωμέγα?", "٣", "x²", "what is @ann doing?", "C# vs F#", "#1 issue"])
def test_words(text):
    assert has_words(text)


@pytest.mark.parametrize("text", SLACK_NO_WORDS)
async def test_slack_message_with_no_words_gets_the_empty_question_reply(slack, text):
    request, ts = slack.mention("UASKER", text)
    await slack.send(request)
    replies = [p for p in slack.fake.posts(slack.channel) if p.get("thread_ts") == ts]
    assert len(replies) == 1 and "What would you like to know?" in replies[0]["text"], replies
    assert slack.model.calls == []  # no model call
    assert await slack.runtime.service.thread_values(f"slack:{TEAM_ID}:{slack.channel}:{ts}") == {}  # no run
    assert slack.reactions_now(ts) == []  # no "received" shown for it


@pytest.fixture
async def discord_fake():
    server = await FakeDiscord().start()
    yield server
    await server.close()


async def test_discord_message_with_no_words_gets_the_empty_question_reply(tmp_path, discord_fake):
    fake = discord_fake
    bot = await DiscordHarness(tmp_path, fake, ScriptedChatModel()).open()
    try:
        alice = fake.add_user("alice")
        for text in DISCORD_NO_WORDS:
            msg = await fake.send_message(alice, f"<@{fake.bot.id}> {text}")
            await fake.wait_until(
                lambda msg=msg: any(
                    REPLY in m["content"]
                    for m in fake.bot_messages(fake.channel_id)
                    if str((m.get("message_reference") or {}).get("message_id")) == msg["id"]
                )
            )
            await bot.idle()
            assert msg["id"] not in fake.threads, text  # no thread opened for it
            assert bot.model.calls == [], text
            assert await bot.runtime.service.thread_values(f"discord:{fake.guild_id}:{msg['id']}") == {}
        dm = await fake.send_message(alice, "🙂🙂", dm=True)
        dm_channel = dm["channel_id"]
        await fake.wait_until(lambda: any(REPLY in m["content"] for m in fake.bot_messages(dm_channel)))
        await bot.idle()
        assert bot.model.calls == []
        assert await bot.runtime.service.thread_values(f"discord:dm:{dm_channel}") == {}
    finally:
        await bot.close()


async def test_console_message_with_no_words_gets_the_empty_question_reply(settings):
    lines = "\n".join(["🙂", "★ → ©", "\ud83d", "/quit"]) + "\n"
    screen = io.StringIO()
    async with scripted_runtime(settings) as (rt, model):
        await run_console(rt, thread="main", stdin=io.StringIO(lines), console=Console(file=screen, width=200))
        assert await rt.service.thread_values("console:main") == {}
    assert screen.getvalue().count("What would you like to know?") == 3
    assert model.calls == []


@pytest.mark.parametrize("argument", [b"\xff\xfe", "🙂".encode(), b"?! \xe2\x98\x85"])
def test_threadwise_ask_with_no_words(tmp_path, argument):
    """``threadwise ask "$(printf '\\xff\\xfe')"``: undecodable bytes, an emoji, symbols."""
    cfg = write_config(tmp_path)
    cfg.write_text(cfg.read_text() + '\n[graph]\ncomposer = "extractive"\ngraders = "lexical"\n')
    result = subprocess.run(
        [sys.executable.encode(), b"-m", b"bot", b"ask", b"--json", argument, b"--config", str(cfg).encode()],
        cwd=tmp_path,
        capture_output=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stderr.decode(errors="replace")
    out = json.loads(result.stdout)
    assert out["kind"] == "notice" and out["path"] == [] and out["llm_calls"] == 0, out
    assert out["notices"] == [REPLY] and out["answer"] == REPLY, out


def test_threadwise_ask_with_no_words_prints_the_reply_as_its_output(tmp_path):
    """Without --json the reply is the command's output on stdout, not only a line on stderr."""
    cfg = write_config(tmp_path)
    cfg.write_text(cfg.read_text() + '\n[graph]\ncomposer = "extractive"\ngraders = "lexical"\n')
    result = subprocess.run(
        [sys.executable, "-m", "bot", "ask", "🙂", "--config", str(cfg)],
        cwd=tmp_path,
        capture_output=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stderr.decode(errors="replace")
    assert REPLY in result.stdout.decode() and REPLY not in result.stderr.decode()


async def test_an_expert_answer_or_remember_with_no_words_is_asked_for_words(tmp_path, fake):
    """The same rule for what an expert gives the bot: ``answer: 🙂`` does not answer the help
    request and ``remember: 👍`` saves nothing; both are told privately what is missing."""
    not_grounded = json.dumps({"grounded": False, "useful": False, "feedback": "not supported"})
    slack = await SlackHarness(
        tmp_path, fake, write_slack_config(tmp_path, fake), ScriptedChatModel(script={"grade_answer": not_grounded})
    ).open()
    try:
        request, ts = slack.mention("UASKER", "how do I ship a release?")
        await slack.send(request, timeout=60)
        key = f"slack:{TEAM_ID}:{slack.channel}:{ts}"
        pending = await slack.runtime.service.pending_interrupt(key)
        assert pending is not None
        for text in ("answer: 🙂", "remember: 👍 ★"):
            request, _ = slack.message("UEXPERT", text, thread_ts=ts)
            await slack.send(request)
        notes = [c.args.get("text", "") for c in fake.calls_to("chat.postEphemeral") if c.args.get("user") == "UEXPERT"]
        assert any("Please include the answer" in n for n in notes), notes
        assert any("Please include what to remember" in n for n in notes), notes
        assert (await slack.runtime.service.pending_interrupt(key)).id == pending.id  # still waiting
        assert slack.runtime.learned is None or slack.runtime.learned.entries() == []
    finally:
        await slack.close()
