"""One thread at a time: the messages of a thread run in order (one asyncio lock per
thread key, plus the store's lock, which spans replicas on PostgreSQL); different threads
run concurrently."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from bot.storage import BookkeepingStore


class ThreadLocks:
    """Per-thread locks, created on first use and dropped when nobody holds or waits.

    Args:
        store: the bookkeeping, whose ``thread_lock(key)`` serialises a thread across
            replicas (a no-op for SQLite).
    """

    def __init__(self, store: BookkeepingStore) -> None:
        self.store = store
        self._locks: dict[str, asyncio.Lock] = {}
        self._users: dict[str, int] = {}

    @asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        """Hold the lock of thread ``key`` (waits for earlier holders, in order)."""
        lock = self._locks.setdefault(key, asyncio.Lock())
        self._users[key] = self._users.get(key, 0) + 1
        try:
            async with lock, self.store.thread_lock(key):  # the store's lock spans replicas (PostgreSQL)
                yield
        finally:
            self._users[key] -= 1
            if not self._users[key]:
                self._locks.pop(key, None)
                self._users.pop(key, None)

    def busy(self) -> bool:
        """True while any thread's lock is held or awaited."""
        return bool(self._users)
