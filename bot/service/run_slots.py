"""Run slots: how many graph runs may be in flight at once, and who is waiting for one.

A plain ``asyncio.Semaphore`` answers "is a slot free now?"; a question acknowledged on
receipt (the first reaction does not wait for any storage work) needs "will it
wait behind others?" before it reaches the semaphore. :class:`RunSlots` counts every
question that wants a slot: promised on receipt (:meth:`promise`), waiting for one, or
running, so the receipt can show "received" or "queued" truthfully.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any


class RunSlots:
    """``limit`` run slots (``[service] max_concurrent_runs``), first come first served.

    ``async with slots:`` waits for a slot and holds it (counted while waiting). A question
    acknowledged on receipt calls :meth:`promise` at once (no await) and later either
    holds the promised slot (:meth:`SlotPromise.hold`) or cancels the promise.

    Args:
        limit: slots, >= 1.
    """

    def __init__(self, limit: int) -> None:
        self.limit = max(1, int(limit))
        self._sem = asyncio.Semaphore(self.limit)
        self._wanted = 0  # promised + waiting + running

    def locked(self) -> bool:
        """True when no slot is free right now."""
        return self._sem.locked()

    @property
    def wanted(self) -> int:
        """Questions promised a slot, waiting for one or holding one."""
        return self._wanted

    def promise(self) -> SlotPromise:
        """Count one more question wanting a slot (no await); its :attr:`SlotPromise.queued`
        says whether it waits behind others (``limit`` or more wanted before it)."""
        queued = self._wanted >= self.limit
        self._wanted += 1
        return SlotPromise(self, queued)

    @asynccontextmanager
    async def hold(self, *, promised: bool = False) -> AsyncIterator[None]:
        """Wait for a slot and hold it for the block; ``promised``: counted by :meth:`promise` already."""
        if not promised:
            self._wanted += 1
        try:
            async with self._sem:
                yield
        finally:
            self._wanted = max(0, self._wanted - 1)

    async def __aenter__(self) -> None:
        self._wanted += 1
        try:
            await self._sem.acquire()
        except BaseException:
            self._wanted = max(0, self._wanted - 1)
            raise

    async def __aexit__(self, *exc: object) -> None:
        self._sem.release()
        self._wanted = max(0, self._wanted - 1)


class SlotPromise:
    """A place in the run-slot queue taken on receipt (:meth:`RunSlots.promise`).

    Attributes:
        queued: True when the question waits behind others for a slot.
    """

    def __init__(self, slots: RunSlots, queued: bool) -> None:
        self._slots = slots
        self.queued = queued
        self._open = True

    def hold(self) -> Any:
        """``async with promise.hold():`` wait for the promised slot and hold it."""
        self._open = False
        return self._slots.hold(promised=True)

    def cancel(self) -> None:
        """The question will not run: give the place back (idempotent; nothing after :meth:`hold`)."""
        if self._open:
            self._open = False
            self._slots._wanted = max(0, self._slots._wanted - 1)
