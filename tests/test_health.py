"""``[monitoring] health_port``: GET /healthz says, per platform, whether the bot is
connected: 503 while starting, 200 once Discord's gateway session is ready or Slack's
Socket Mode websocket is open, 503 again when the connection is lost. Real adapters
against the fakes (Discord gateway, Slack Web API + Socket Mode)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from bot.config import Secrets, load_settings
from bot.monitoring import serve_monitoring
from bot.platforms.discord.app import build_discord_bot, run_discord
from bot.platforms.slack.run import run_slack
from bot.runtime import open_runtime
from tests.fakes.chat_model import ScriptedChatModel
from tests.fakes.discord_gateway import FakeDiscord
from tests.fakes.discord_gateway import write_config as write_discord_config
from tests.fakes.slack_api import APP_TOKEN, BOT_TOKEN, FakeSlackAPI
from tests.fakes.slack_api import write_config as write_slack_config
from tests.test_slack_run import free_port


async def health(session: aiohttp.ClientSession, port: int) -> tuple[int, dict[str, Any]]:
    async with session.get(f"http://127.0.0.1:{port}/healthz") as resp:
        return resp.status, await resp.json()


async def until(session: aiohttp.ClientSession, port: int, status: int, timeout: float = 20.0) -> dict[str, Any]:
    """Poll /healthz until it answers ``status``; its body."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        got, body = await health(session, port)
        if got == status:
            return body
        if loop.time() > deadline:
            raise AssertionError(f"/healthz still {got} {body}")
        await asyncio.sleep(0.05)


class Monitor:
    """serve_monitoring on a free port for ``runtime`` until closed."""

    def __init__(self, runtime: Any) -> None:
        self.port = free_port()
        self.stop = asyncio.Event()
        started = asyncio.Event()
        self.task = asyncio.create_task(
            serve_monitoring(
                "127.0.0.1", self.port, 0, health=runtime.health, metrics=None, stop=self.stop, started=started
            )
        )
        self.started = started

    async def __aenter__(self) -> Monitor:
        await asyncio.wait_for(self.started.wait(), 10)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.stop.set()
        await asyncio.wait_for(self.task, 10)


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as s:
        yield s


async def test_discord_health_follows_the_gateway_connection(tmp_path, session):
    fake = await FakeDiscord().start()
    closed = False
    try:
        settings = load_settings(write_discord_config(tmp_path, fake))
        async with open_runtime(settings, Secrets(discord_token=fake.TOKEN), chat_model=ScriptedChatModel()) as rt:
            rt.health.expect("discord")  # as `threadwise run` does for each platform it starts
            async with Monitor(rt) as monitor:
                status, body = await health(session, monitor.port)
                assert (status, body) == (
                    503,
                    {"status": "unavailable", "platforms": {"discord": {"connected": False}}},
                )
                stop = asyncio.Event()
                bot = build_discord_bot(rt, guild_ready_timeout=0.05)
                runner = asyncio.create_task(run_discord(rt, stop=stop, bot=bot))
                try:
                    body = await until(session, monitor.port, 200)
                    assert body == {"status": "ok", "platforms": {"discord": {"connected": True}}}
                    await fake.close()  # Discord goes away: the gateway connection is lost
                    closed = True
                    body = await until(session, monitor.port, 503)
                    assert body["platforms"] == {"discord": {"connected": False}}
                finally:
                    stop.set()
                    await asyncio.wait_for(runner, 20)
    finally:
        if not closed:
            await fake.close()


async def test_slack_socket_mode_health_follows_the_websocket(tmp_path, session):
    fake = await FakeSlackAPI().start()
    stopped = False
    try:
        config = write_slack_config(tmp_path, fake).read_text().replace('mode = "http"', 'mode = "socket"')
        (tmp_path / "config.toml").write_text(config)
        settings = load_settings(tmp_path / "config.toml")
        secrets = Secrets(slack_bot_token=BOT_TOKEN, slack_app_token=APP_TOKEN)
        async with open_runtime(settings, secrets, chat_model=ScriptedChatModel()) as rt:
            rt.health.expect("slack")
            async with Monitor(rt) as monitor:
                assert (await health(session, monitor.port))[0] == 503
                stop = asyncio.Event()
                runner = asyncio.create_task(run_slack(rt, stop=stop))
                try:
                    body = await until(session, monitor.port, 200)
                    assert body == {"status": "ok", "platforms": {"slack": {"connected": True}}}
                    await fake.stop()  # Slack goes away: the websocket is closed, no reconnect possible
                    stopped = True
                    body = await until(session, monitor.port, 503)
                    assert body["platforms"] == {"slack": {"connected": False}}
                finally:
                    stop.set()
                    await asyncio.wait_for(runner, 20)
    finally:
        if not stopped:
            await fake.stop()


@pytest.mark.parametrize("key", ["health_port", "metrics_port"])
async def test_run_with_a_monitoring_port_in_use_stops_at_once_naming_it(tmp_path, fake, key):
    import socket

    from tests.test_storage import run_cli

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        cfg = write_slack_config(tmp_path, fake, slack=f'http_port = {free_port()}\nhttp_host = "127.0.0.1"')
        cfg.write_text(cfg.read_text() + f'\n[monitoring]\nhost = "127.0.0.1"\n{key} = {port}\n')
        code, output, _ = await run_cli(
            ["run", "--config", str(cfg)], {"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_SIGNING_SECRET": "s"}
        )
    assert code == 2, output
    assert output.strip().splitlines() == [output.strip()], output  # one line, before the index build
    assert f"[monitoring] {key} = {port}" in output and "in use" in output, output
    assert not fake.calls_to("auth.test")  # nothing started


async def test_run_in_console_mode_says_monitoring_is_off(tmp_path):
    from tests.conftest import write_config
    from tests.test_storage import run_cli

    cfg = write_config(tmp_path, extra=f"[monitoring]\nhealth_port = {free_port()}\n")
    code, output, _ = await run_cli(["run", "--config", str(cfg)], {})  # stdin: end of input, the console ends
    assert code == 0, output
    assert len([line for line in output.splitlines() if "monitoring is off in console mode" in line]) == 1, output
