"""Serving Slack for real: ``run_slack`` in HTTP mode (signed requests over HTTP) and in Socket
Mode (a websocket from the fake), and ``threadwise run`` as a subprocess in HTTP mode."""

from __future__ import annotations

import asyncio
import json
import select
import signal
import socket
import subprocess
from pathlib import Path

import aiohttp
import pytest

from bot.config import Secrets, load_settings
from bot.platforms.slack.run import run_slack, slack_enabled
from bot.runtime import open_runtime
from tests.conftest import requires_offline_model, wait_healthy
from tests.fakes.bot_process import BotProcess
from tests.fakes.chat_model import ScriptedChatModel
from tests.fakes.slack_api import (
    APP_TOKEN,
    BOT_TOKEN,
    BOT_USER_ID,
    SIGNING_SECRET,
    FakeSlackAPI,
    SlackEvents,
    all_text,
    write_config,
)

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def mention_event(fake: FakeSlackAPI, text: str, channel: str = "C0GENERAL") -> tuple[dict, str]:
    ts = fake.next_ts()
    return SlackEvents.message(
        user="UASKER", channel=channel, ts=ts, text=f"<@{BOT_USER_ID}> {text}", kind="app_mention"
    ), ts


async def post(session: aiohttp.ClientSession, url: str, request: tuple[str, dict]) -> tuple[int, str]:
    body, headers = request
    async with session.post(url, data=body.encode(), headers=headers) as resp:
        return resp.status, await resp.text()


def thread_posts(fake: FakeSlackAPI, ts: str) -> list[dict]:
    return [p for p in fake.posts() if p.get("thread_ts") == ts]


@pytest.mark.parametrize(
    "mode, env, enabled",
    [
        ("socket", {"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "xapp-1"}, True),
        ("socket", {"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_SIGNING_SECRET": "s"}, False),
        ("http", {"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_SIGNING_SECRET": "s"}, True),
        ("http", {"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "xapp-1"}, False),
        ("socket", {"SLACK_APP_TOKEN": "xapp-1"}, False),
    ],
)
def test_slack_enabled_needs_the_tokens_of_its_mode(tmp_path, mode, env, enabled):
    path = tmp_path / "config.toml"
    path.write_text(f'[slack]\nmode = "{mode}"\n')
    assert slack_enabled(load_settings(path), Secrets.from_env(env)) is enabled


async def test_run_slack_http_mode_over_real_http(tmp_path, fake):
    port = free_port()
    settings = load_settings(write_config(tmp_path, fake, slack=f'http_port = {port}\nhttp_host = "127.0.0.1"'))
    secrets = Secrets(slack_bot_token=BOT_TOKEN, slack_signing_secret=SIGNING_SECRET)
    events = SlackEvents()
    url = f"http://127.0.0.1:{port}/slack/events"
    stop = asyncio.Event()
    async with open_runtime(settings, secrets, chat_model=ScriptedChatModel()) as runtime:
        task = asyncio.create_task(run_slack(runtime, stop=stop))
        try:
            async with aiohttp.ClientSession() as session:
                await wait_healthy(session, port)
                status, body = await post(
                    session,
                    url,
                    events.sign(
                        json.dumps({"type": "url_verification", "challenge": "c-123", "token": "t"}), "application/json"
                    ),
                )
                assert status == 200 and "c-123" in body
                event, ts = mention_event(fake, "how do I deploy?")
                status, _ = await post(session, url, events.event(event, bad_signature=True))
                assert status == 401
                status, _ = await post(session, url, events.event(event))
                assert status == 200
                await fake.wait_for(lambda: thread_posts(fake, ts), timeout=15)
                await fake.wait_for(lambda: fake.reactions.get(("C0GENERAL", ts)) == ["white_check_mark"])
        finally:
            stop.set()
            await asyncio.wait_for(task, 15)
    assert len(thread_posts(fake, ts)) == 1
    assert fake.calls_to("auth.test")  # the token is checked at start


async def test_run_slack_socket_mode(tmp_path, fake):
    config = write_config(tmp_path, fake).read_text().replace('mode = "http"', 'mode = "socket"')
    (tmp_path / "config.toml").write_text(config)
    settings = load_settings(tmp_path / "config.toml")
    secrets = Secrets(slack_bot_token=BOT_TOKEN, slack_app_token=APP_TOKEN)
    events = SlackEvents()
    stop = asyncio.Event()
    async with open_runtime(settings, secrets, chat_model=ScriptedChatModel()) as runtime:
        task = asyncio.create_task(run_slack(runtime, stop=stop))
        try:
            await fake.wait_socket()
            event, ts = mention_event(fake, "how do I deploy?")
            ack = await fake.send_envelope("events_api", events.event_body(event))
            assert "envelope_id" in ack
            await fake.wait_for(lambda: thread_posts(fake, ts), timeout=15)
            ack = await fake.send_envelope(
                "slash_commands",
                {
                    "command": "/threadwise",
                    "text": "status",
                    "user_id": "UASKER",
                    "channel_id": "C0GENERAL",
                    "team_id": "T0TEAM",
                    "response_url": fake.response_url(),
                    "trigger_id": "1.t",
                    "api_app_id": "A0APP",
                },
            )
            assert "envelope_id" in ack
            await fake.wait_for(lambda: any("Knowledge base" in p["text"] for p in fake.posts()), timeout=15)
        finally:
            stop.set()
            await asyncio.wait_for(task, 15)
    assert len(thread_posts(fake, ts)) == 1
    assert fake.calls_to("apps.connections.open", ok_only=True)


async def test_run_slack_fails_fast_on_a_bad_token(tmp_path, fake):
    settings = load_settings(write_config(tmp_path, fake))
    secrets = Secrets(slack_bot_token="xoxb-wrong", slack_signing_secret=SIGNING_SECRET)
    async with open_runtime(settings, secrets, chat_model=ScriptedChatModel()) as runtime:
        with pytest.raises(Exception, match="invalid_auth"):
            await asyncio.wait_for(run_slack(runtime, stop=asyncio.Event()), 10)


class ThreadwiseProcess(BotProcess):
    """``threadwise run`` in a subprocess, configured for HTTP mode against the fake."""

    def __init__(self, tmp_path: Path, fake: FakeSlackAPI) -> None:
        port = free_port()
        config = write_config(tmp_path, fake, slack=f'http_port = {port}\nhttp_host = "127.0.0.1"')
        super().__init__(config, port, tmp_path / "threadwise.log")

    def stop_now(self) -> str:
        """SIGTERM, SIGKILL after 15 s (synchronous, for ``finally`` blocks); returns the log."""
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        return self.text()


async def test_threadwise_run_http_mode_subprocess(tmp_path, fake):
    """No LLM needed: a bare mention gets the short reply, /threadwise status the status."""
    proc = ThreadwiseProcess(tmp_path, fake)
    events = SlackEvents()
    try:
        async with aiohttp.ClientSession() as session:
            await proc.wait_ready(session)
            event, ts = mention_event(fake, "")
            status, _ = await post(session, proc.url + "/slack/events", events.event(event))
            assert status == 200
            await fake.wait_for(lambda: thread_posts(fake, ts), timeout=30)
            status, _ = await post(
                session,
                proc.url + "/slack/events",
                events.command(user="UASKER", text="status", channel="C0GENERAL", response_url=fake.response_url()),
            )
            assert status == 200
            await fake.wait_for(lambda: any("Knowledge base" in p["text"] for p in fake.posts()), timeout=30)
    finally:
        output = proc.stop_now()
    assert "question" in thread_posts(fake, ts)[0]["text"].lower()
    assert BOT_TOKEN not in output and SIGNING_SECRET not in output  # no secrets in logs


async def test_a_burst_of_connections_while_the_bot_is_busy_waits_in_the_backlog(tmp_path, fake):
    """Slack delivers a burst on many connections at once (an app_mention and a message event
    per question): those that arrive while the event loop is busy must wait in the kernel's
    listen backlog, not be dropped. The process is frozen (SIGSTOP, so it accepts none) while
    400 connections are opened: every handshake completes (with aiohttp's default backlog of
    128 the kernel dropped the other SYNs, and those deliveries waited 1 s for TCP's
    retransmission); thawed, the bot answers each."""
    proc = ThreadwiseProcess(tmp_path, fake)
    socks: list[socket.socket] = []
    try:
        async with aiohttp.ClientSession() as session:
            await proc.wait_ready(session)
        proc.proc.send_signal(signal.SIGSTOP)
        try:
            poller = select.poll()
            for _ in range(400):
                s = socket.socket()
                s.setblocking(False)
                s.connect_ex(("127.0.0.1", proc.port))
                socks.append(s)
                poller.register(s, select.POLLOUT)
            await asyncio.sleep(0.5)  # loopback handshakes take microseconds; a dropped SYN waits 1 s
            ready = {fd for fd, _ in poller.poll(0)}
            connected = [
                s for s in socks if s.fileno() in ready and s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0
            ]
        finally:
            proc.proc.send_signal(signal.SIGCONT)
        assert len(connected) == len(socks)
        for s in socks:
            s.setblocking(True)
            s.settimeout(30)
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: bot\r\nConnection: close\r\n\r\n")
        assert all(s.recv(64).startswith(b"HTTP/1.1 200") for s in socks)
    finally:
        for s in socks:
            s.close()
        proc.stop_now()


@pytest.mark.slow
@requires_offline_model
async def test_threadwise_run_answers_a_question_with_the_offline_model(tmp_path, fake):
    proc = ThreadwiseProcess(tmp_path, fake)
    events = SlackEvents()
    try:
        async with aiohttp.ClientSession() as session:
            await proc.wait_ready(session)
            event, ts = mention_event(fake, "How do I roll back a deploy?")
            status, _ = await post(session, proc.url + "/slack/events", events.event(event))
            assert status == 200
            resting = {"white_check_mark", "disappointed", "raising_hand"}
            await fake.wait_for(
                lambda: (
                    len(fake.reactions.get(("C0GENERAL", ts), [])) == 1
                    and set(fake.reactions[("C0GENERAL", ts)]) & resting
                    and thread_posts(fake, ts)
                ),
                timeout=300,
            )
    finally:
        output = proc.stop_now()
    posts = thread_posts(fake, ts)
    assert len(posts) == 1, output[-3000:]
    assert all_text(posts[0]).strip()
    assert len(fake.reactions[("C0GENERAL", ts)]) == 1


@pytest.mark.parametrize(
    "body, content_type, headers",
    [
        (b"not json", "application/json", {}),
        (b"%zz=%%&&\xff\xfe", "application/x-www-form-urlencoded", {}),
        (b"{" * 900_000, "application/json", {}),
        (b"\x00\x01binary", "application/octet-stream", {}),
        (b"not json", "application/json", {"X-Slack-Request-Timestamp": "1", "X-Slack-Signature": "v0=00"}),
        (b"\xff\xfe not utf-8", "application/json", {"X-Slack-Request-Timestamp": "x", "X-Slack-Signature": "junk"}),
    ],
)
async def test_unsigned_malformed_requests_get_401_without_a_traceback(
    tmp_path, fake, caplog, body, content_type, headers
):
    port = free_port()
    settings = load_settings(write_config(tmp_path, fake, slack=f'http_port = {port}\nhttp_host = "127.0.0.1"'))
    secrets = Secrets(slack_bot_token=BOT_TOKEN, slack_signing_secret=SIGNING_SECRET)
    url = f"http://127.0.0.1:{port}/slack/events"
    stop = asyncio.Event()
    async with open_runtime(settings, secrets, chat_model=ScriptedChatModel()) as runtime:
        task = asyncio.create_task(run_slack(runtime, stop=stop))
        try:
            async with aiohttp.ClientSession() as session:
                await wait_healthy(session, port)
                caplog.clear()
                async with session.post(url, data=body, headers={"Content-Type": content_type, **headers}) as resp:
                    status = resp.status
                # a signed request still goes through afterwards
                ok, _ = await post(
                    session,
                    url,
                    SlackEvents().sign(
                        json.dumps({"type": "url_verification", "challenge": "c-1", "token": "t"}), "application/json"
                    ),
                )
        finally:
            stop.set()
            await asyncio.wait_for(task, 15)
    assert status == 401
    assert ok == 200
    assert not [r for r in caplog.records if r.exc_info or "Traceback" in r.getMessage()]
    assert len([r for r in caplog.records if "refused" in r.getMessage()]) == 1
