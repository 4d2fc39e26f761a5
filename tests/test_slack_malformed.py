"""Malformed but correctly signed requests to the Slack HTTP endpoint: each gets 400 (or 200)
and one log line without a traceback, never a 500, and the server keeps answering.

Through the real boundary: ``run_slack`` in HTTP mode serving on a local port, requests signed
with the signing secret as Slack signs them, sent over HTTP."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import urllib.parse
from typing import Any

import aiohttp
import pytest

from bot.config import Secrets, load_settings
from bot.platforms.slack.blocks import (
    ACTION_ANSWER,
    ACTION_DISMISS,
    ACTION_VOTE_UP,
    MODAL_ANSWER,
    MODAL_RETRY,
    MODAL_VOTE_REASON,
    HelpRef,
)
from bot.platforms.slack.run import run_slack
from bot.runtime import open_runtime
from tests.conftest import wait_healthy
from tests.fakes.chat_model import ScriptedChatModel
from tests.fakes.slack_api import APP_TOKEN, BOT_TOKEN, SIGNING_SECRET, TEAM_ID, SlackEvents, write_config

USER = {"id": "UASKER", "name": "asker", "team_id": TEAM_ID}
TEAM = {"id": TEAM_ID, "domain": "fake"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _interaction(payload: Any) -> tuple[str, str]:
    return urllib.parse.urlencode({"payload": json.dumps(payload)}), "application/x-www-form-urlencoded"


def _event(body: Any) -> tuple[str, str]:
    return json.dumps(body), "application/json"


def _block_actions(actions: Any, **extra: Any) -> tuple[str, str]:
    return _interaction(
        {"type": "block_actions", "team": TEAM, "user": USER, "trigger_id": "1.t", "actions": actions, **extra}
    )


def _view_submission(view: Any, **extra: Any) -> tuple[str, str]:
    return _interaction(
        {"type": "view_submission", "team": TEAM, "user": USER, "trigger_id": "1.t", "view": view, **extra}
    )


MALFORMED = {
    "block_actions, actions []": _block_actions([]),
    "block_actions, actions a string": _block_actions(ACTION_ANSWER),
    "block_actions, actions a list of strings": _block_actions([ACTION_ANSWER]),
    "block_actions, action without action_id": _block_actions([{"value": "x"}]),
    "block_actions, action_id not a string": _block_actions([{"action_id": 5, "value": "x"}]),
    "block_actions, no actions": _interaction({"type": "block_actions", "team": TEAM, "user": USER}),
    "block_actions, user a string": _block_actions([{"action_id": ACTION_ANSWER, "value": "x"}], user="UASKER"),
    "block_actions, our button with a junk value": _block_actions([{"action_id": ACTION_ANSWER, "value": "{junk"}]),
    "block_actions, vote with a value not text": _block_actions([{"action_id": ACTION_VOTE_UP, "value": 7}]),
    "block_actions, vote for no answer": _block_actions(
        [{"action_id": ACTION_VOTE_UP, "value": "nothing"}], channel={"id": "C0GENERAL"}
    ),
    "block_actions, our button on a junk message": _block_actions(
        [{"action_id": ACTION_DISMISS, "value": HelpRef("slack:T0TEAM:C1:1.1", "C1", "1.1", "1.1").dumps()}],
        message={"ts": "1.2", "blocks": ["junk", {"type": "section", "text": "junk"}]},
    ),
    "view_submission, view a string": _view_submission("junk"),
    "view_submission, view without callback_id": _view_submission({"type": "modal", "state": {"values": {}}}),
    "view_submission, view without type": _view_submission({"callback_id": MODAL_ANSWER}),
    "view_submission, our form with junk state": _view_submission(
        {"type": "modal", "callback_id": MODAL_ANSWER, "state": "junk", "private_metadata": "{"}
    ),
    "view_submission, our form with junk values": _view_submission(
        {
            "type": "modal",
            "callback_id": MODAL_ANSWER,
            "state": {"values": {"threadwise_text": "junk"}},
            "private_metadata": HelpRef("slack:T0TEAM:C1:1.1", "C1", "1.1", "1.1").dumps(),
        }
    ),
    "view_submission, our form without reference": _view_submission(
        {"type": "modal", "callback_id": MODAL_RETRY, "state": {"values": {}}, "private_metadata": "[]"}
    ),
    "view_submission, vote reason for no answer": _view_submission(
        {"type": "modal", "callback_id": MODAL_VOTE_REASON, "state": {"values": {}}, "private_metadata": "x"}
    ),
    "view_submission, no view": _interaction({"type": "view_submission", "team": TEAM, "user": USER}),
    "view_closed, view a list": _interaction({"type": "view_closed", "team": TEAM, "user": USER, "view": []}),
    "payload a list": _interaction([1, 2]),
    "payload a string": _interaction("block_actions"),
    "payload null": _interaction(None),
    "payload without type": _interaction({"team": TEAM, "user": USER}),
    "payload of an unknown type": _interaction({"type": "no_such_type", "team": TEAM, "user": USER}),
    "shortcut without callback_id": _interaction({"type": "shortcut", "team": TEAM, "user": USER}),
    "event body a list": _event([1, 2]),
    "event_callback, event a string": _event({"type": "event_callback", "team_id": TEAM_ID, "event": "x"}),
    "event_callback, event without type": _event({"type": "event_callback", "team_id": TEAM_ID, "event": {}}),
    "event_callback, no event": _event({"type": "event_callback", "team_id": TEAM_ID}),
    "event_callback, message with a list for text": _event(
        {
            "type": "event_callback",
            "team_id": TEAM_ID,
            "event": {"type": "message", "channel": "C0GENERAL", "user": "UASKER", "ts": "1.1", "text": ["x"]},
        }
    ),
    "url_verification without challenge": _event({"type": "url_verification"}),
    "slash command without command": ("text=status&user_id=UASKER", "application/x-www-form-urlencoded"),
    "form body without payload": ("foo=bar", "application/x-www-form-urlencoded"),
}


@pytest.fixture
async def served(tmp_path, fake):
    """``run_slack`` in HTTP mode on a free port: yields the endpoint's URL."""
    port = _free_port()
    settings = load_settings(write_config(tmp_path, fake, slack=f'http_port = {port}\nhttp_host = "127.0.0.1"'))
    secrets = Secrets(slack_bot_token=BOT_TOKEN, slack_signing_secret=SIGNING_SECRET)
    stop = asyncio.Event()
    async with open_runtime(settings, secrets, chat_model=ScriptedChatModel()) as runtime:
        task = asyncio.create_task(run_slack(runtime, stop=stop))
        try:
            async with aiohttp.ClientSession() as session:
                await wait_healthy(session, port)
            yield f"http://127.0.0.1:{port}/slack/events"
        finally:
            stop.set()
            await asyncio.wait_for(task, 15)


async def test_malformed_signed_requests_get_400_or_200_and_one_line(served, caplog):
    events = SlackEvents()
    caplog.set_level(logging.DEBUG)
    async with aiohttp.ClientSession() as session:
        for name, (body, content_type) in MALFORMED.items():
            caplog.clear()
            raw, headers = events.sign(body, content_type)
            async with session.post(served, data=raw.encode(), headers=headers) as resp:
                status = resp.status
            await asyncio.sleep(0.2)  # background work a listener may have started
            lines = [r for r in caplog.records if r.levelno >= logging.WARNING]
            assert status in (200, 400), (name, status, [r.getMessage() for r in lines])
            assert not any(r.exc_info or r.stack_info for r in caplog.records), (name, caplog.text)
            assert "Traceback" not in caplog.text, (name, caplog.text)
            assert len(lines) <= 1, (name, [r.getMessage() for r in lines])
        # still serving: a well-formed request is answered as before
        raw, headers = events.sign(json.dumps({"type": "url_verification", "challenge": "c-1"}), "application/json")
        async with session.post(served, data=raw.encode(), headers=headers) as resp:
            assert resp.status == 200 and "c-1" in await resp.text()


async def test_malformed_socket_mode_envelopes_are_acknowledged_with_one_line(tmp_path, fake, caplog):
    """The same payloads through Socket Mode: each envelope is acknowledged (Slack would
    redeliver it otherwise), with at most one warning and no traceback."""
    config = write_config(tmp_path, fake).read_text().replace('mode = "http"', 'mode = "socket"')
    (tmp_path / "config.toml").write_text(config)
    settings = load_settings(tmp_path / "config.toml")
    secrets = Secrets(slack_bot_token=BOT_TOKEN, slack_app_token=APP_TOKEN)
    caplog.set_level(logging.DEBUG)
    stop = asyncio.Event()
    async with open_runtime(settings, secrets, chat_model=ScriptedChatModel()) as runtime:
        task = asyncio.create_task(run_slack(runtime, stop=stop))
        try:
            await fake.wait_socket()
            for name, (body, content_type) in MALFORMED.items():
                if content_type != "application/x-www-form-urlencoded" or "payload=" not in body:
                    continue
                payload = json.loads(urllib.parse.parse_qs(body)["payload"][0])
                if not isinstance(payload, dict):
                    continue  # slack_sdk refuses a non-object payload itself (one line, before any handler)
                caplog.clear()
                ack = await fake.send_envelope("interactive", payload)
                assert "envelope_id" in ack, name
                await asyncio.sleep(0.2)
                lines = [r for r in caplog.records if r.levelno >= logging.WARNING]
                assert not any(r.exc_info or r.stack_info for r in caplog.records), (name, caplog.text)
                assert len(lines) <= 1, (name, [r.getMessage() for r in lines])
        finally:
            stop.set()
            await asyncio.wait_for(task, 15)
