"""Malformed Unicode on every entry path: lone UTF-16 surrogates (half an emoji), NUL and
other control characters, decomposed accents. Cleaned once where a message enters
(IncomingMessage, CLI arguments, console input, eval files), so the question is answered
normally and the model server only ever receives valid UTF-8 JSON. On Discord, a gateway
frame the JSON parser refuses (or any error handling one event) must not end the process."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest

from bot.config import load_settings
from graphs.models import build_chat_model
from tests.fakes.mistral_stall import mistral_server, models_section
from tests.fakes.slack_api import SlackHarness, all_text, write_config

ROOT = Path(__file__).resolve().parent.parent
BAD = [
    "how do I roll back a deploy? \ud83d",  # a lone high surrogate (half of 😀)
    "\ude00 how do I roll back a deploy?",  # a lone low surrogate
    "how do I roll\x00 back a deploy?\x07\x1b[31m",  # NUL, BEL, an escape sequence
    "how do I roll back a de\u0301ploy?\r\n\x85",  # decomposed accent, CRLF, a C1 control
    "\ud83d\ude00 how do I roll back a deploy?",  # a pair split in two code points: joined
]


def is_clean(text: str) -> bool:
    return (
        not any("\ud800" <= c <= "\udfff" for c in text)
        and "\x00" not in text
        and not any(ord(c) < 32 and c not in "\n\t" for c in text)
        and not any(0x7F <= ord(c) <= 0x9F for c in text)
    )


@pytest.mark.parametrize("text", BAD)
async def test_slack_message_with_malformed_unicode_is_answered(tmp_path, fake, text):
    async with mistral_server() as model:
        config = write_config(tmp_path, fake, extra=models_section(model))
        chat = build_chat_model(load_settings(config).models, "test-key")
        harness = await SlackHarness(tmp_path, fake, config, chat).open()
        try:
            req, ts = harness.mention("UASKER", text)
            await harness.send(req, timeout=60)
            values = await harness.runtime.service.thread_values(f"slack:T0TEAM:{harness.channel}:{ts}")
        finally:
            await harness.close()
        assert model.bad_requests == []
        assert model.tasks()[:1] == ["route"]
    (answer,) = harness.answers()
    assert "make rollback" in all_text(answer)
    assert fake.reactions[(harness.channel, ts)] == ["white_check_mark"]
    question = values["messages"][0].content
    assert is_clean(question) and "roll back" in question
    if "\u0301" in text:
        assert "d\u00e9ploy" in question  # NFC


async def _cli(args: list, env_extra: dict, stdin: bytes | None = None) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "DISCORD_", "MISTRAL_", "TAVILY_"))}
    env.update(HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT), **env_extra)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        *args,
        cwd=ROOT,
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(stdin), 120)
    return proc.returncode, (out + err).decode("utf-8", "replace")


def cli_config(tmp_path: Path, model) -> Path:
    from tests.fakes import write_platform_config
    from tests.fakes.slack_api import KB_FILES

    return write_platform_config(tmp_path, KB_FILES, models_section(model))


@pytest.mark.parametrize(
    "arg",
    [
        b"how do I roll back a deploy? \xed\xa0\xbd",  # an encoded lone surrogate: arrives as \udced\udca0\udcbd
        b"how do I roll back a deploy? \xff\xfe",  # not UTF-8 at all
        b"how do I roll back\x01\x1b a deploy?",  # control characters
    ],
)
async def test_cli_ask_with_malformed_arguments_answers(tmp_path, arg):
    async with mistral_server() as model:
        cfg = cli_config(tmp_path, model)
        code, output = await _cli([b"ask", arg, b"--json", b"--config", str(cfg).encode()], {"MISTRAL_API_KEY": "k"})
        assert model.bad_requests == []
    assert code == 0, output
    result = json.loads(output[output.index("{") : output.rindex("}") + 1])
    assert result["kind"] == "answer" and "make rollback" in result["answer"]


async def test_console_input_with_malformed_bytes_is_answered(tmp_path):
    async with mistral_server() as model:
        cfg = cli_config(tmp_path, model)
        lines = b"how do I roll back a deploy? \xed\xa0\xbd\xff\x00\n/quit\n"
        code, output = await _cli([b"console", b"--config", str(cfg).encode()], {"MISTRAL_API_KEY": "k"}, stdin=lines)
        assert model.bad_requests == []
    assert code == 0, output
    assert "make rollback" in output


async def test_eval_file_with_malformed_unicode_runs(tmp_path):
    rows = [
        {
            "id": "a",
            "question": "how do I roll back a deploy? \ud83d\u0000",
            "expected_route": "vectorstore",
            "sources": ["deploy.md"],
        },
        {
            "id": "b",
            "question": "roll back?",
            "expected_route": "vectorstore",
            "history": [{"role": "user", "content": "deploys \udc00\x1b"}, {"role": "assistant", "content": "ok"}],
        },
    ]
    eval_file = tmp_path / "eval.jsonl"
    eval_file.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    report = tmp_path / "report.json"
    async with mistral_server() as model:
        cfg = cli_config(tmp_path, model)
        code, output = await _cli(
            [b"eval", str(eval_file).encode(), b"--json", str(report).encode(), b"--config", str(cfg).encode()],
            {"MISTRAL_API_KEY": "k"},
        )
        assert model.bad_requests == []
    assert code == 0, output
    rows = json.loads(report.read_text())["rows"]
    assert all("make rollback" in r["answer"] for r in rows), [(r["outcome"], r["answer"]) for r in rows]


# ---- Discord: the gateway connection survives one bad event ------------------------------------
@pytest.fixture
async def discord_fake():
    from tests.fakes.discord_gateway import FakeDiscord

    server = await FakeDiscord().start()
    yield server
    await server.close()


@pytest.mark.parametrize("bad", ["surrogate", "broken-json", "bad-payload"])
async def test_discord_survives_a_bad_gateway_event(tmp_path, discord_fake, bad):
    from tests.fakes.chat_model import ScriptedChatModel
    from tests.fakes.discord_gateway import DiscordHarness

    fake = discord_fake
    harness = await DiscordHarness(tmp_path, fake, ScriptedChatModel()).open()
    try:
        alice = fake.add_user("alice")
        if bad == "surrogate":  # a lone surrogate in the content: orjson refuses the whole frame
            first = await fake.send_message(alice, f"<@{fake.bot.id}> how do I deploy? \ud83d")
        elif bad == "broken-json":
            await fake._ws.send_str('{"op": 0, "t": "MESSAGE_CREATE", "s": 99, "d": {"id": ')
        else:  # valid JSON that discord.py's parser chokes on
            await fake.dispatch("MESSAGE_CREATE", {"id": "1", "channel_id": fake.channel_id})
        if bad != "surrogate":  # the bot reconnects (a new IDENTIFY) instead of exiting
            await fake.wait_until(lambda: len(fake.identifies) == 2, timeout=20)
            await fake.wait_identified(15)
        await asyncio.sleep(0.3)
        assert not harness._runner.done(), harness._runner.exception() if harness._runner.done() else ""
        later = await fake.send_message(alice, f"<@{fake.bot.id}> how do I roll back a deploy?")
        await fake.wait_until(lambda: later["id"] in fake.threads, timeout=30)
        await harness.idle()
        assert not harness._runner.done()
        texts = [m["content"] for m in fake.bot_messages(later["id"])]
        assert texts and "knowledge base" in texts[-1]
        if bad == "surrogate":
            assert first["id"] in fake.threads  # answered too (parsed, then cleaned)
    finally:
        await harness.close()
