"""The one place Threadwise changes discord.py process-wide (module and class attributes).

discord.py has no per-client setting for its endpoints or its JSON parser, so both are
module state; everything that changes them is here, applied by :func:`apply` when a client
is built (:func:`bot.platforms.discord.app.build_discord_bot`), with a test each
(tests/test_discord_startup.py, tests/test_unicode.py):

* **Endpoints** - ``[discord] api_base_url`` / ``gateway_url`` (a local fake gateway in tests,
  tests/fakes/discord_gateway.py; a proxy in production) replace ``discord.http.Route.BASE``
  and ``DiscordWebSocket.DEFAULT_GATEWAY``; empty values restore Discord's own. Being
  process-wide, every discord.py client in the process uses the last values applied.
* **JSON** - discord.py parses gateway frames with orjson when it is installed, and orjson
  refuses lone UTF-16 surrogates (``"\\ud83d"``: half an emoji, which Discord does send);
  such a frame is parsed with the standard library instead (the text is cleaned later, in
  :class:`bot.protocol.IncomingMessage`), so one odd message cannot drop the connection.
* **Outgoing text** - every REST request (the bot's ``HTTPClient.request``, and the webhook
  adapter's that carries interaction responses and follow-ups) passes its JSON through
  :func:`bot.platforms.discord.format.inert_payload`, so no message, edit, ephemeral reply,
  modal or component shows a live ``@everyone`` / ``@here``, whatever built its text
  (tests/test_broadcast_words.py).
"""

from __future__ import annotations

import json
from typing import Any

import discord
import discord.webhook.async_
import yarl

from bot.platforms.discord.format import inert_form, inert_payload

DISCORD_API_BASE = discord.http.Route.BASE
DISCORD_GATEWAY = discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY
_strict_from_json = discord.utils._from_json


def _tolerant_from_json(raw: Any) -> Any:
    """discord.py's JSON parser, falling back to :func:`json.loads` on what orjson refuses."""
    try:
        return _strict_from_json(raw)
    except ValueError:
        return json.loads(raw)


_http_request = discord.http.HTTPClient.request
_webhook_request = discord.webhook.async_.AsyncWebhookAdapter.request


async def _inert_http_request(self: Any, route: Any, *, files: Any = None, form: Any = None, **kwargs: Any) -> Any:
    if "json" in kwargs:
        kwargs["json"] = inert_payload(kwargs["json"])
    return await _http_request(self, route, files=files, form=inert_form(form), **kwargs)


async def _inert_webhook_request(
    self: Any, route: Any, session: Any, *, payload: Any = None, multipart: Any = None, **kwargs: Any
) -> Any:
    return await _webhook_request(
        self, route, session, payload=inert_payload(payload), multipart=inert_form(multipart), **kwargs
    )


def apply(api_base_url: str = "", gateway_url: str = "") -> None:
    """Point discord.py at ``api_base_url`` / ``gateway_url`` ("" : Discord's own), make its
    JSON parsing tolerant and its outgoing text inert (see the module docstring). Idempotent."""
    discord.utils._from_json = _tolerant_from_json
    discord.http.HTTPClient.request = _inert_http_request  # type: ignore[method-assign]
    discord.webhook.async_.AsyncWebhookAdapter.request = _inert_webhook_request  # type: ignore[method-assign]
    discord.http.Route.BASE = api_base_url.rstrip("/") if api_base_url else DISCORD_API_BASE
    discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(gateway_url) if gateway_url else DISCORD_GATEWAY
