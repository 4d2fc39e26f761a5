"""Serving Slack: the token check, Socket Mode or HTTP mode, and the graceful stop."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse

from bot.config import Secrets, Settings
from bot.platforms.slack.app import SlackBot, build_slack_app
from bot.platforms.slack.client import InertWebClient, open_shared_session
from bot.platforms.slack.http_server import serve_http
from bot.platforms.slack.payloads import payload_problem

if TYPE_CHECKING:
    from bot.runtime import Runtime

log = logging.getLogger(__name__)


def slack_enabled(settings: Settings, secrets: Secrets) -> bool:
    """True when the tokens for the configured mode are present.

    Socket mode needs SLACK_BOT_TOKEN and SLACK_APP_TOKEN; HTTP mode needs SLACK_BOT_TOKEN
    and SLACK_SIGNING_SECRET. A bot token without its partner logs a warning naming the
    missing variable and returns False.
    """
    if not secrets.slack_bot_token:
        return False
    need = "SLACK_APP_TOKEN" if settings.slack.mode == "socket" else "SLACK_SIGNING_SECRET"
    have = secrets.slack_app_token if settings.slack.mode == "socket" else secrets.slack_signing_secret
    if not have:
        log.warning(
            "Slack disabled: SLACK_BOT_TOKEN is set but %s is missing ([slack] mode = %r)", need, settings.slack.mode
        )
        return False
    return True


class _CheckedSocketModeHandler(AsyncSocketModeHandler):
    """Socket Mode with the payload's shape checked before bolt reads it (as the HTTP server
    does): a malformed envelope is acknowledged with one log line, never dispatched. (The
    override narrows the client type exactly as slack-bolt's own handler does.)"""

    async def handle(self, client: SocketModeClient, req: SocketModeRequest) -> None:  # type: ignore[override]
        problem = payload_problem(req.payload)
        if problem:
            log.warning("slack Socket Mode: malformed %s envelope acknowledged, not handled: %s", req.type, problem)
            await client.send_socket_mode_response(SocketModeResponse(envelope_id=req.envelope_id))
            return
        await super().handle(client, req)


async def serve_socket(bot: SlackBot, app_token: str, stop: asyncio.Event) -> None:
    """Connect with Socket Mode (SLACK_APP_TOKEN) and serve until ``stop`` is set."""
    handler = _CheckedSocketModeHandler(bot.app, app_token, logger=logging.getLogger("slack_sdk.socket_mode"))
    await handler.connect_async()
    log.info("slack Socket Mode connected")
    bot.runtime.health.watch("slack", handler.client.is_connected)
    try:
        await stop.wait()
    finally:
        await handler.close_async()


async def run_slack(
    runtime: Runtime, *, stop: asyncio.Event | None = None, client: InertWebClient | None = None
) -> None:
    """Run the Slack adapter in the current event loop until ``stop`` is set (or cancelled).

    Checks the bot token with auth.test first, then serves in ``[slack] mode`` ("socket"
    or "http"). On the way out, waits up to ``[service] stop_grace_seconds`` for answers in
    progress, then cancels them (they are answered at the next start).

    Raises:
        slack_sdk.errors.SlackApiError: the bot token is refused (e.g. ``invalid_auth``).
    """
    stop = stop or asyncio.Event()
    bot = build_slack_app(runtime, client=client)
    session = open_shared_session(bot.client, bot.quiet_client)  # keep-alive, not a connection per call
    try:
        await _serve(bot, runtime, stop)
    finally:
        await session.close()


async def _serve(bot: SlackBot, runtime: Runtime, stop: asyncio.Event) -> None:
    auth = await bot.client.auth_test()
    log.info(
        "slack connected as %s (%s) in team %s, mode %s",
        auth.get("user"),
        auth.get("user_id"),
        auth.get("team_id"),
        bot.settings.mode,
    )
    bot.home_team_id = str(auth.get("team_id") or "") or None
    try:
        if bot.settings.mode == "http":
            await serve_http(bot, stop)
        else:
            await serve_socket(bot, runtime.secrets.slack_app_token, stop)
    finally:
        await bot.shutdown(bot.runtime.settings.service.stop_grace_seconds)
