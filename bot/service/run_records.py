"""The record of a run in flight: written with a message's dedup mark on receipt
(:meth:`bot.service.dedup.Dedup.first_delivery`), refreshed when the graph starts and when the
answer goes out, deleted once the answer, apology or help request is out. A record left
behind by a crash is what :mod:`bot.service.recovery` finishes at the next start.

Bookkeeping writes are best effort: a failure (a full disk) is logged and the turn goes on.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from typing import Any

from bot.failures import describe_failure
from bot.logs import for_thread
from bot.storage import RunLedger

log = logging.getLogger("bot.service")

#: Run ids remembered as finished (runs not entered through :meth:`RunRecords.settle` are forgotten in bulk).
FINISHED_MEMORY = 4096


async def best_effort(write: Awaitable[Any], thread_key: str) -> None:
    """Await a bookkeeping write; a failure (full disk) is logged, the turn goes on."""
    try:
        await write
    except Exception as exc:  # noqa: BLE001
        log.warning("bookkeeping write failed: %s", describe_failure(exc), extra=for_thread(thread_key))


class RunRecords:
    """Finishes run records once: the run that posted its outcome deletes its record at
    once (:meth:`finish`), and the guard around every turn (:meth:`settle`) deletes it only
    when that did not happen.

    Args:
        store: the bookkeeping (``finish_run``).
    """

    def __init__(self, store: RunLedger) -> None:
        self._store = store
        self._finished: set[str] = set()  # finished by finish(), not yet settled

    async def finish(self, run_id: str, thread_key: str) -> None:
        """Delete the run's record (best effort) and remember that it is done, so
        :meth:`settle` does not delete it a second time."""
        try:
            await self._store.finish_run(run_id)
        except Exception as exc:  # noqa: BLE001 - e.g. a full disk: settle() tries again
            log.warning("bookkeeping write failed: %s", describe_failure(exc), extra=for_thread(thread_key))
            return
        self._finished.add(run_id)
        if len(self._finished) > FINISHED_MEMORY:
            self._finished.clear()

    async def settle(self, run_id: str, thread_key: str) -> None:
        """The end of a turn: delete the record unless :meth:`finish` did (best effort)."""
        if run_id in self._finished:
            self._finished.discard(run_id)
        else:
            await best_effort(self._store.finish_run(run_id), thread_key)
