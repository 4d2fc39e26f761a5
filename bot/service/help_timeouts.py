"""Help-request timeouts: a help request unanswered for ``[service] help_timeout_seconds``
ends in the apology. One timer per waiting thread in this process; the timers of requests
left open by an earlier process (or another replica) are armed again from the store."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from bot.failures import describe_failure
from bot.logs import for_thread

log = logging.getLogger("bot.service")

#: ``(thread key, interrupt id)`` -> dismiss the thread's help request if it is still pending
#: and unclaimed (:meth:`bot.service.help_desk.HelpDesk.expire`).
Expire = Callable[[str, str], Awaitable[Any]]


class HelpTimeouts:
    """The timers of open help requests, by thread key.

    Args:
        seconds: ``[service] help_timeout_seconds``.
        expire: what a timer does when it fires (:data:`Expire`).
    """

    def __init__(self, seconds: float, expire: Expire) -> None:
        self.seconds = seconds
        self._expire = expire
        self._timers: dict[str, asyncio.Task[None]] = {}

    def waiting(self, thread_key: str) -> bool:
        """True while this process has a timer for the thread's help request."""
        return thread_key in self._timers

    def arm(self, thread_key: str, interrupt_id: str = "", delay: float | None = None) -> None:
        """In ``delay`` seconds (default :attr:`seconds`), expire the thread's help request
        ``interrupt_id``; replaces the thread's earlier timer."""
        self.cancel(thread_key)
        wait = self.seconds if delay is None else delay

        async def fire() -> None:
            await asyncio.sleep(wait)
            log.info("no human answered in time", extra=for_thread(thread_key))
            try:
                await self._expire(thread_key, interrupt_id)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001
                log.error("help request timeout failed: %s", describe_failure(exc), extra=for_thread(thread_key))

        self._timers[thread_key] = asyncio.create_task(fire(), name=f"help-timeout:{thread_key}")

    def cancel(self, thread_key: str) -> None:
        """Stop the thread's timer (a reply claimed its help request); not from inside the timer itself."""
        timer = self._timers.pop(thread_key, None)
        if timer is not None and timer is not asyncio.current_task():
            timer.cancel()

    def rearm(self, rows: list[dict[str, Any]], *, missing_only: bool = False) -> None:
        """Arm the timers of open help requests (rows of the bookkeeping's ``open_help_requests``:
        ``thread_key``, ``deadline`` in Unix seconds, ``interrupt_id``); ``missing_only``: only
        those with no live timer in this process (replicas)."""
        for row in rows:
            timer = self._timers.get(row["thread_key"])
            if missing_only and timer is not None and not timer.done():
                continue
            self.arm(row["thread_key"], row.get("interrupt_id", ""), max(0.0, row["deadline"] - time.time()))

    def close(self) -> None:
        """Cancel every timer (the requests stay open in the store for the next start)."""
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
