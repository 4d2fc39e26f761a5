"""One thread at a time, in arrival order: each message takes a ticket, its place in its
thread's queue, the moment it is received (before any lookup or storage call that could
let a later message overtake it), and takes the thread only after the tickets before it
are released (plus the store's lock, which spans replicas on PostgreSQL). Different
threads run concurrently.

A message is recorded (dedup mark and run record) as soon as it can be, not in queue
order: a slow platform call of one message must not keep the ones behind it unrecorded,
where a crash would lose them. The record carries the ticket's arrival time instead, and
crash recovery replays a thread's runs in that order (:mod:`bot.service.recovery`)."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from bot.storage import Coordination


class Ticket:
    """A message's place in its thread's queue (:meth:`ThreadLocks.ticket`).

    Attributes:
        key: the thread key.
        received_at: when it was taken (Unix seconds, strictly increasing within a process):
            the message's arrival, stored with its run record.
        released: set when its turn is over (answered, or it needed none); idempotent.
    """

    __slots__ = ("key", "received_at", "released")

    def __init__(self, key: str, received_at: float) -> None:
        self.key = key
        self.received_at = received_at
        self.released = asyncio.Event()


class ThreadLocks:
    """Per-thread queues of tickets, created on first use and dropped when empty.

    Re-entrant per task: a task that holds a thread may hold it again (crash recovery
    replays a thread's runs inside one hold).

    Args:
        store: the bookkeeping, whose ``thread_lock(key)`` serialises a thread across
            replicas (a no-op for SQLite).
    """

    def __init__(self, store: Coordination) -> None:
        self.store = store
        self._queues: dict[str, deque[Ticket]] = {}
        self._holders: dict[str, asyncio.Task] = {}
        self._last_time = 0.0

    def ticket(self, key: str, received_at: float | None = None) -> Ticket:
        """A place in thread ``key``'s queue: at the end for a message received now
        (synchronous: take it in the first step of the task that handles a delivery), or,
        with ``received_at`` (Unix seconds: runs recovered or taken over from a dead
        replica), before every ticket received later. The caller must :meth:`release` it."""
        if received_at is None:
            self._last_time = max(time.time(), self._last_time + 1e-6)
            received_at = self._last_time
        ticket = Ticket(key, received_at)
        queue = self._queues.setdefault(key, deque())
        at = len(queue)
        while at and queue[at - 1].received_at > received_at:
            at -= 1
        queue.insert(at, ticket)
        return ticket

    def release(self, ticket: Ticket) -> None:
        """End ``ticket``'s turn (idempotent): the next message of the thread may go on."""
        ticket.released.set()
        queue = self._queues.get(ticket.key)
        while queue and queue[0].released.is_set():
            queue.popleft()
        if queue is not None and not queue:
            del self._queues[ticket.key]

    @asynccontextmanager
    async def hold(self, key: str, ticket: Ticket | None = None) -> AsyncIterator[None]:
        """Hold thread ``key`` once the messages received before ``ticket`` are done (a new
        ticket at the end of the queue when None); ``ticket`` is released on exit. Inside a
        hold of the same thread by the same task, enters at once."""
        me = asyncio.current_task()
        if me is not None and self._holders.get(key) is me:
            try:
                yield
            finally:
                if ticket is not None:
                    self.release(ticket)
            return
        ticket = ticket or self.ticket(key)
        try:
            while not ticket.released.is_set():  # looked at again: an earlier ticket may be put in meanwhile
                waiting = next((t for t in self._queues.get(key, ()) if t is ticket or not t.released.is_set()), ticket)
                if waiting is ticket:
                    break
                await waiting.released.wait()
            async with self.store.thread_lock(key):  # the store's lock spans replicas (PostgreSQL)
                if me is not None:
                    self._holders[key] = me
                try:
                    yield
                finally:
                    if self._holders.get(key) is me:
                        del self._holders[key]
        finally:
            self.release(ticket)

    def busy(self) -> bool:
        """True while any message holds, or waits for, its thread."""
        return bool(self._queues)
