"""The one place Threadwise changes discord.py process-wide (two class/module attributes).

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
"""

from __future__ import annotations

import json
from typing import Any

import discord
import yarl

DISCORD_API_BASE = discord.http.Route.BASE
DISCORD_GATEWAY = discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY
_strict_from_json = discord.utils._from_json


def _tolerant_from_json(raw: Any) -> Any:
    """discord.py's JSON parser, falling back to :func:`json.loads` on what orjson refuses."""
    try:
        return _strict_from_json(raw)
    except ValueError:
        return json.loads(raw)


def apply(api_base_url: str = "", gateway_url: str = "") -> None:
    """Point discord.py at ``api_base_url`` / ``gateway_url`` ("" : Discord's own) and make its
    JSON parsing tolerant (see the module docstring). Idempotent."""
    discord.utils._from_json = _tolerant_from_json
    discord.http.Route.BASE = api_base_url.rstrip("/") if api_base_url else DISCORD_API_BASE
    discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(gateway_url) if gateway_url else DISCORD_GATEWAY
