"""One thread at a time, in arrival order: each message takes a ticket, its place in its
thread's queue, the moment it is received (before any lookup or storage call that could
let a later message overtake it); it records its run and takes the thread only after the
tickets before it have (plus the store's lock, which spans replicas on PostgreSQL).
Different threads run concurrently."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from bot.storage import BookkeepingStore


class Ticket:
    """A message's place in its thread's queue (:meth:`ThreadLocks.ticket`).

    Two stages, each reached in queue order: *recorded* (the message's dedup mark and run
    record are written, so the records' order is the arrival order, which replicas and crash
    recovery follow) and *released* (its turn is over: answered, or it needed none).
    Releasing implies recorded; both are idempotent."""

    __slots__ = ("key", "recorded", "released")

    def __init__(self, key: str) -> None:
        self.key = key
        self.recorded = asyncio.Event()
        self.released = asyncio.Event()


class ThreadLocks:
    """Per-thread queues of tickets, created on first use and dropped when empty.

    Args:
        store: the bookkeeping, whose ``thread_lock(key)`` serialises a thread across
            replicas (a no-op for SQLite).
    """

    def __init__(self, store: BookkeepingStore) -> None:
        self.store = store
        self._queues: dict[str, deque[Ticket]] = {}

    def ticket(self, key: str) -> Ticket:
        """A place at the end of thread ``key``'s queue (synchronous: take it in the first
        step of the task that handles a delivery). The caller must :meth:`release` it."""
        ticket = Ticket(key)
        self._queues.setdefault(key, deque()).append(ticket)
        return ticket

    async def _after_earlier(self, ticket: Ticket, stage: str) -> None:
        """Wait until every ticket ahead of ``ticket`` has reached ``stage`` ("recorded" or
        "released")."""
        if ticket.released.is_set():
            return
        for earlier in list(self._queues.get(ticket.key, ())):
            if earlier is ticket:
                return
            await getattr(earlier, stage).wait()

    async def recorded_turn(self, ticket: Ticket) -> None:
        """Wait until the messages received before ``ticket`` in its thread are recorded."""
        await self._after_earlier(ticket, "recorded")

    @staticmethod
    def mark_recorded(ticket: Ticket) -> None:
        """``ticket``'s message is recorded: the next one may record its own."""
        ticket.recorded.set()

    def release(self, ticket: Ticket) -> None:
        """End ``ticket``'s turn (idempotent): the next message of the thread may go on."""
        ticket.recorded.set()
        ticket.released.set()
        queue = self._queues.get(ticket.key)
        while queue and queue[0].released.is_set():
            queue.popleft()
        if queue is not None and not queue:
            del self._queues[ticket.key]

    @asynccontextmanager
    async def hold(self, key: str, ticket: Ticket | None = None) -> AsyncIterator[None]:
        """Hold thread ``key`` once the messages received before ``ticket`` are done (a new
        ticket at the end of the queue when None); ``ticket`` is released on exit."""
        ticket = ticket or self.ticket(key)
        try:
            await self._after_earlier(ticket, "released")
            async with self.store.thread_lock(key):  # the store's lock spans replicas (PostgreSQL)
                yield
        finally:
            self.release(ticket)

    def busy(self) -> bool:
        """True while any message holds, or waits for, its thread."""
        return bool(self._queues)
