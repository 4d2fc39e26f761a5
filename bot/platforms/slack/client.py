"""Slack Web API clients with retry policies, and who-is-who lookups (names, experts, admins).

Two clients share one token: the *reliable* one honours ``Retry-After`` on HTTP 429
(slack_sdk's AsyncRateLimitErrorRetryHandler, ``[slack] rate_limit_retries`` times) and
retries 500/503 and connection errors; it carries everything that must land (answers,
help requests, the last reaction, modals). The *best-effort* one does not wait out rate
limits: an intermediate status reaction that is rate limited is skipped rather than
delaying the answer. Slack documents its limits at https://docs.slack.dev/apis/web-api/rate-limits.

Both clients share one aiohttp session (:func:`open_shared_session`): without it slack_sdk
opens a new session and TCP connection for every call (connect and close were a tenth
of the bot's CPU under load).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
    AsyncServerErrorRetryHandler,
)
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse
from slack_sdk.webhook import WebhookResponse
from slack_sdk.webhook.async_client import AsyncWebhookClient

from bot.config import SlackSettings
from bot.platforms.slack.format import inert_payload

log = logging.getLogger(__name__)

_GROUP_TTL_SECONDS = 300.0
#: users.info answers are kept this long (display names change rarely; Slack's users.info is a
#: Tier 4 method, https://docs.slack.dev/reference/methods/users.info).
NAME_TTL_SECONDS = 3600.0
_NAME_RETRY_SECONDS = 60.0  # a failed lookup is tried again after this, not on every message


class InertWebClient(AsyncWebClient):
    """The Web API client every Slack call goes through: each request's shown text is made
    inert (:func:`bot.platforms.slack.format.inert_payload`) at this one place, so no path
    (answers, help requests and their updates, ephemeral notes, modals) can post a live
    broadcast, however its text was built."""

    async def api_call(
        self,
        api_method: str,
        *,
        http_verb: str = "POST",
        files: dict | None = None,
        data: dict | Any = None,
        params: dict | None = None,
        json: dict | None = None,
        headers: dict | None = None,
        auth: dict | None = None,
    ) -> AsyncSlackResponse:
        return await super().api_call(
            api_method,
            http_verb=http_verb,
            files=files,
            data=inert_payload(data) if isinstance(data, dict) else data,
            params=inert_payload(params) if params else params,
            json=inert_payload(json) if json else json,
            headers=headers,
            auth=auth,
        )


class InertWebhookClient(AsyncWebhookClient):
    """A slash command's ``response_url`` poster with the same guard as :class:`InertWebClient`."""

    async def send_dict(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> WebhookResponse:
        return await super().send_dict(inert_payload(body), headers)


def make_client(token: str, base_url: str, *, rate_limit_retries: int, timeout: int = 30) -> InertWebClient:
    """An AsyncWebClient for ``base_url`` (e.g. ``https://slack.com/api/``).

    Args:
        token: bot token (``xoxb-...``); never logged.
        rate_limit_retries: how many times a 429 is retried after its ``Retry-After``
            (0: fail at once with ``SlackApiError(error="ratelimited")``).
        timeout: seconds per HTTP request.
    """
    handlers = [AsyncConnectionErrorRetryHandler(max_retry_count=2), AsyncServerErrorRetryHandler(max_retry_count=2)]
    if rate_limit_retries:
        handlers.append(AsyncRateLimitErrorRetryHandler(max_retry_count=rate_limit_retries))
    base = base_url if base_url.endswith("/") else base_url + "/"
    return InertWebClient(token=token, base_url=base, timeout=timeout, retry_handlers=handlers)


def best_effort_copy(client: AsyncWebClient) -> InertWebClient:
    """A client like ``client`` (same token and base URL) that does not wait out rate limits."""
    return InertWebClient(
        token=client.token,
        base_url=client.base_url,
        timeout=client.timeout,
        retry_handlers=[
            AsyncConnectionErrorRetryHandler(max_retry_count=1),
            AsyncServerErrorRetryHandler(max_retry_count=1),
        ],
    )


def open_shared_session(*clients: AsyncWebClient, connections: int = 100) -> aiohttp.ClientSession:
    """One aiohttp session (keep-alive connections) for ``clients``; call inside the event loop.

    Clients that already have a session keep it. The caller closes the returned session
    (``await session.close()``) after the clients' last call.

    Args:
        connections: most connections open at once to the Slack API (aiohttp's ``limit``).
    """
    timeout = max((c.timeout for c in clients), default=30)
    session = aiohttp.ClientSession(
        timeout=aiohttp.ClientTimeout(total=timeout), connector=aiohttp.TCPConnector(limit=connections)
    )
    for client in clients:
        if client.session is None or client.session.closed:
            client.session = session
    return session


def slack_error(exc: Exception) -> str:
    """The Slack error code of a failed call (``already_reacted``...), or the exception's type."""
    if isinstance(exc, SlackApiError):
        return str(exc.response.get("error") or exc.response.status_code)
    return type(exc).__name__


class SlackDirectory:
    """Display names (users.info, cached for :data:`NAME_TTL_SECONDS`) and roles from config.toml.

    Experts are user ids or user-group ids (``S...``, members from
    usergroups.users.list, cached for five minutes); admins are user ids.
    Lookup failures are logged and treated as "unknown name" / "not a member".
    """

    def __init__(self, client: AsyncWebClient, settings: SlackSettings) -> None:
        self.client = client
        self.settings = settings
        self._names: dict[str, tuple[float, str]] = {}  # user id -> (expires at, name)
        self._lookups: dict[str, asyncio.Future[str]] = {}  # lookups in flight, shared by concurrent callers
        self._groups: dict[str, tuple[float, frozenset[str]]] = {}

    def is_admin(self, user_id: str) -> bool:
        """True when ``user_id`` is listed in ``[slack] admins``."""
        return user_id in self.settings.admins

    async def is_expert(self, user_id: str, experts: list[str] | None = None) -> bool:
        """True when ``user_id`` is in ``experts`` (default ``[slack] experts``; a channel's
        ``[[channels]] experts`` replace them there) directly or through a user group."""
        experts = [e.strip().lstrip("@") for e in (self.settings.experts if experts is None else experts)]
        if user_id in experts:
            return True
        for group in (e for e in experts if e.startswith("S")):
            if user_id in await self._members(group):
                return True
        return False

    async def _members(self, group: str) -> frozenset[str]:
        cached = self._groups.get(group)
        if cached and time.monotonic() - cached[0] < _GROUP_TTL_SECONDS:
            return cached[1]
        try:
            resp = await self.client.usergroups_users_list(usergroup=group)
            members = frozenset(resp.get("users") or [])
        except Exception as exc:  # noqa: BLE001 - a lookup failure must not stop the bot
            log.warning("slack usergroups.users.list %s failed: %s", group, slack_error(exc))
            members = cached[1] if cached else frozenset()
            # try again in a minute, not on every message
            self._groups[group] = (time.monotonic() - _GROUP_TTL_SECONDS + 60.0, members)
            return members
        self._groups[group] = (time.monotonic(), members)
        return members

    async def display_name(self, user_id: str, fallback: str = "") -> str:
        """The user's display name (or real name, or ``fallback``, or the id).

        One users.info call per user per :data:`NAME_TTL_SECONDS`; concurrent lookups of
        the same user (e.g. the two deliveries of a channel mention) share one call. A
        failed lookup is logged and answered with ``fallback`` (or the id) for a minute.
        """
        cached = self._names.get(user_id)
        if cached and time.monotonic() < cached[0]:
            return cached[1] if cached[1] != user_id or not fallback else fallback
        running = self._lookups.get(user_id)
        if running is not None:
            return await asyncio.shield(running)
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._lookups[user_id] = future
        try:
            name, ttl = await self._lookup(user_id)
            self._names[user_id] = (time.monotonic() + ttl, name)
            future.set_result(name)
        except BaseException as exc:  # cancelled: the waiters retry on their own
            future.set_exception(exc)
            future.exception()  # retrieved: no "never retrieved" warning when nobody waits
            raise
        finally:
            self._lookups.pop(user_id, None)
        return name if name != user_id or not fallback else fallback

    async def _lookup(self, user_id: str) -> tuple[str, float]:
        """users.info -> (name, seconds to keep it); the id for a minute when it fails."""
        try:
            user = (await self.client.users_info(user=user_id)).get("user") or {}
        except Exception as exc:  # noqa: BLE001
            log.info("slack users.info %s failed: %s", user_id, slack_error(exc))
            return user_id, _NAME_RETRY_SECONDS
        profile = user.get("profile") or {}
        name = (
            profile.get("display_name")
            or profile.get("real_name")
            or user.get("real_name")
            or user.get("name")
            or user_id
        )
        return name, NAME_TTL_SECONDS
