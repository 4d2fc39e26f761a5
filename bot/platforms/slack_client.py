"""Slack Web API clients with retry policies, and who-is-who lookups (names, experts, admins).

Two clients share one token: the *reliable* one honours ``Retry-After`` on HTTP 429
(slack_sdk's AsyncRateLimitErrorRetryHandler, ``[slack] rate_limit_retries`` times) and
retries 500/503 and connection errors; it carries everything that must land (answers,
help requests, the last reaction, modals). The *best-effort* one does not wait out rate
limits: an intermediate status reaction that is rate limited is skipped rather than
delaying the answer. Slack documents its limits at https://docs.slack.dev/apis/web-api/rate-limits.
"""

from __future__ import annotations

import logging
import time

from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
    AsyncServerErrorRetryHandler,
)
from slack_sdk.web.async_client import AsyncWebClient

from bot.config import SlackSettings

log = logging.getLogger(__name__)

_GROUP_TTL_SECONDS = 300.0


def make_client(token: str, base_url: str, *, rate_limit_retries: int, timeout: int = 30) -> AsyncWebClient:
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
    return AsyncWebClient(token=token, base_url=base, timeout=timeout, retry_handlers=handlers)


def best_effort_copy(client: AsyncWebClient) -> AsyncWebClient:
    """A client like ``client`` (same token and base URL) that does not wait out rate limits."""
    return AsyncWebClient(token=client.token, base_url=client.base_url, timeout=client.timeout,
                          retry_handlers=[AsyncConnectionErrorRetryHandler(max_retry_count=1),
                                          AsyncServerErrorRetryHandler(max_retry_count=1)])


def slack_error(exc: Exception) -> str:
    """The Slack error code of a failed call (``already_reacted``...), or the exception's type."""
    if isinstance(exc, SlackApiError):
        return str(exc.response.get("error") or exc.response.status_code)
    return type(exc).__name__


class SlackDirectory:
    """Display names (users.info, cached) and roles from config.toml.

    Experts are user ids or user-group ids (``S...``, members from
    usergroups.users.list, cached for five minutes); admins are user ids.
    Lookup failures are logged and treated as "unknown name" / "not a member".
    """

    def __init__(self, client: AsyncWebClient, settings: SlackSettings) -> None:
        self.client = client
        self.settings = settings
        self._names: dict[str, str] = {}
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
        """The user's display name (or real name, or ``fallback``, or the id)."""
        if user_id in self._names:
            return self._names[user_id]
        try:
            user = (await self.client.users_info(user=user_id)).get("user") or {}
            profile = user.get("profile") or {}
            name = (profile.get("display_name") or profile.get("real_name") or user.get("real_name")
                    or user.get("name") or fallback or user_id)
        except Exception as exc:  # noqa: BLE001
            log.info("slack users.info %s failed: %s", user_id, slack_error(exc))
            name = fallback or user_id
        self._names[user_id] = name
        return name
