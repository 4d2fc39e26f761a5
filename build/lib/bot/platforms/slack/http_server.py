"""The Slack Events API endpoint (HTTP mode): an aiohttp server in front of bolt.

Every request's signature is checked on the raw bytes before bolt reads the body; the
verified request is dispatched to :class:`bot.platforms.slack.app.SlackBot`'s bolt app.
``GET /healthz`` answers "ok" while serving.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.request.internals import parse_body
from slack_sdk.signature import SignatureVerifier

from bot.platforms.slack.payloads import payload_problem

if TYPE_CHECKING:
    from bot.platforms.slack.app import SlackBot

log = logging.getLogger(__name__)

#: Listen backlog of the Events API server (connections the kernel holds before the event
#: loop accepts them; listen(2), capped by net.core.somaxconn). aiohttp's default is 128:
#: a burst of 200 questions (400 deliveries, as Slack sends an app_mention and a message
#: event each) overflowed it, the kernel dropped SYNs and those acks waited for TCP's initial
#: retransmission timeout (1 s, RFC 6298).
HTTP_BACKLOG = 2048


async def verified_request(request: web.Request, verifier: SignatureVerifier) -> AsyncBoltRequest | web.Response:
    """Check the Slack signature of ``request`` before bolt sees its body.

    Works around a slack-bolt fault (1.x): ``AsyncBoltRequest`` parses the body (JSON or form)
    in its constructor, before the app's signature middleware runs, so an unsigned request
    with a malformed body raised out of bolt as a 500 with a traceback. Here the signature
    (``X-Slack-Signature`` / ``X-Slack-Request-Timestamp``, HMAC-SHA256 with the signing
    secret, 5-minute window; https://api.slack.com/authentication/verifying-requests-from-slack)
    is checked on the raw bytes first.

    Args:
        request: the incoming aiohttp request (body up to aiohttp's ``client_max_size``,
            1 MiB by default; larger bodies get aiohttp's 413).
        verifier: holds the signing secret.

    Returns:
        The bolt request to dispatch, or the response to send: 401 when the signature
        headers are missing or wrong (no body read when the headers are missing), 400 when
        a correctly signed body is not valid UTF-8 / JSON / form data or not shaped as Slack
        sends it (:func:`bot.platforms.slack.payloads.payload_problem`). One log line each.
    """
    timestamp = request.headers.get("X-Slack-Request-Timestamp")
    signature = request.headers.get("X-Slack-Signature")
    if not timestamp or not signature or not timestamp.strip().isdigit():
        log.warning("slack HTTP: refused a request without valid signature headers (401)")
        return web.Response(status=401, text="invalid request")
    raw = await request.read()
    if not verifier.is_valid(raw, timestamp, signature):
        log.warning("slack HTTP: refused a request with an invalid or stale signature (401)")
        return web.Response(status=401, text="invalid request")
    try:
        text = raw.decode("utf-8")
        problem = payload_problem(parse_body(text, request.content_type))
    except (UnicodeDecodeError, ValueError) as exc:  # JSONDecodeError is a ValueError
        log.warning("slack HTTP: signed request with an unreadable body (400): %s", type(exc).__name__)
        return web.Response(status=400, text="bad request")
    if problem:
        log.warning("slack HTTP: signed request with a malformed body (400): %s", problem)
        return web.Response(status=400, text="bad request")
    return AsyncBoltRequest(body=text, query=request.query_string, headers=request.headers)  # type: ignore[arg-type]


async def serve_http(bot: SlackBot, stop: asyncio.Event) -> None:
    """Serve the Events API / interactivity / slash commands on ``[slack] http_host:http_port``
    at ``http_path`` until ``stop`` is set. Requests are verified with SLACK_SIGNING_SECRET."""
    cfg = bot.settings
    verifier = SignatureVerifier(bot.runtime.secrets.slack_signing_secret)

    async def handle(request: web.Request) -> web.Response:
        bolt_request = await verified_request(request, verifier)
        if isinstance(bolt_request, web.Response):
            return bolt_request
        return await to_aiohttp_response(await bot.app.async_dispatch(bolt_request))

    async def health(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    web_app = web.Application()
    web_app.router.add_post(cfg.http_path, handle)
    web_app.router.add_get("/healthz", health)
    runner = web.AppRunner(web_app, access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, cfg.http_host, cfg.http_port, backlog=HTTP_BACKLOG).start()
        log.info("slack HTTP mode listening on %s:%d%s", cfg.http_host, cfg.http_port, cfg.http_path)
        bot.runtime.health.watch("slack", lambda: not stop.is_set())  # serving = reachable by Slack
        await stop.wait()
    finally:
        await runner.cleanup()
