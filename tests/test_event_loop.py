"""The event loop (``[service] event_loop``, bot/event_loop.py): uvloop by default when it is
installed, asyncio's own on request; a real ``threadwise run`` answers on either."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

from bot.config import ConfigError
from bot.event_loop import loop_factory, run_async
from tests.fakes.bot_process import BotProcess
from tests.fakes.slack_api import BOT_USER_ID, FakeSlackAPI, SlackEvents, write_config
from tests.test_slack_run import free_port, post


async def _loop_module() -> str:
    return type(asyncio.get_running_loop()).__module__.split(".")[0]


def test_auto_is_uvloop_when_installed_and_asyncio_on_request():
    pytest.importorskip("uvloop")
    assert run_async(_loop_module(), loop_factory("auto")) == "uvloop"
    assert run_async(_loop_module(), loop_factory("uvloop")) == "uvloop"
    assert run_async(_loop_module(), loop_factory("asyncio")) == "asyncio"


def test_uvloop_asked_for_but_missing_names_the_key(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "uvloop" else real(name, *a))
    assert loop_factory("auto") is None  # auto falls back to asyncio's loop
    with pytest.raises(ConfigError, match=r"\[service\] event_loop"):
        loop_factory("uvloop")


@pytest.mark.parametrize("choice", ["auto", "asyncio"])
async def test_a_real_process_answers_on_the_configured_loop(tmp_path, fake: FakeSlackAPI, choice):
    port = free_port()
    config = write_config(tmp_path, fake, slack=f'http_port = {port}\nhttp_host = "127.0.0.1"')
    config.write_text(config.read_text().replace("[service]\n", f'[service]\nevent_loop = "{choice}"\n', 1))
    proc = BotProcess(config, port, tmp_path / "run.log")
    events = SlackEvents()
    try:
        async with aiohttp.ClientSession() as session:
            await proc.wait_ready(session)
            ts = fake.next_ts()
            event = SlackEvents.message(
                user="UASKER", channel="C0GENERAL", ts=ts, kind="app_mention", text=f"<@{BOT_USER_ID}> "
            )
            status, _ = await post(session, proc.url + "/slack/events", events.event(event))
            assert status == 200
            await fake.wait_for(lambda: [p for p in fake.posts("C0GENERAL") if p.get("thread_ts") == ts], timeout=30)
    finally:
        output = await proc.stop()
    expected = "asyncio" if choice == "asyncio" else "uvloop"
    assert f"event loop: {expected}" in output, output[-2000:]


def test_a_broken_uvloop_falls_back_on_auto_and_names_the_key_when_asked_for(monkeypatch, tmp_path):
    """uvloop installed but failing to import (a wheel for another platform)."""
    broken = tmp_path / "uvloop"
    broken.mkdir()
    (broken / "__init__.py").write_text("raise ImportError('wrong platform')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(__import__("sys").modules, "uvloop", raising=False)
    assert loop_factory("auto") is None
    assert run_async(_loop_module(), loop_factory("auto")) == "asyncio"
    with pytest.raises(ConfigError, match=r"\[service\] event_loop.*cannot be imported"):
        loop_factory("uvloop")
