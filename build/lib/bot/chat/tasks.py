"""The adapters' background work: one registry of tasks, waited for or cancelled at shutdown.

A platform event (a Slack request, a Discord gateway event) must be acknowledged quickly
(Slack: within 3 s; Discord: interactions within 3 s), so each adapter only filters and
translates it, then runs the turn (service calls, posts) as a background task. asyncio keeps
only weak references to tasks ("Save a reference to the result of this function, to avoid
a task disappearing mid-execution", https://docs.python.org/3/library/asyncio-task.html#creating-tasks),
so the registry holds them until they end; a failed task is logged, never raised into the
event loop's "exception was never retrieved" handler.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine, Iterator
from typing import Any


class BackgroundTasks:
    """The running background tasks of one adapter.

    Args:
        platform: prefix of task names and log lines (``"slack"``, ``"discord"``).
        log: the adapter's logger (failures are logged there with the task's name).
    """

    def __init__(self, platform: str, log: logging.Logger) -> None:
        self.platform = platform
        self.log = log
        self._tasks: set[asyncio.Task[Any]] = set()

    def __iter__(self) -> Iterator[asyncio.Task[Any]]:
        return iter(list(self._tasks))

    def __len__(self) -> int:
        return len(self._tasks)

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        """Run ``coro`` in the background, keeping a reference until it ends.

        Errors are logged (``<platform> background task failed: <name>``) and never raised;
        awaiting the returned task therefore never raises either (except cancellation).
        """

        async def guarded() -> Any:
            try:
                return await coro
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - a failed turn must not kill the adapter
                self.log.exception("%s background task failed: %s", self.platform, name)
                return None

        task = asyncio.get_running_loop().create_task(guarded(), name=f"{self.platform}:{name}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def pending(self) -> list[asyncio.Task[Any]]:
        """The tasks not finished yet."""
        return [t for t in self._tasks if not t.done()]

    async def wait_idle(self, timeout: float | None = None) -> None:
        """Wait until no task is left, tasks started meanwhile included.

        Raises:
            TimeoutError: work still running after ``timeout`` seconds (None: no limit).
        """
        async with asyncio.timeout(timeout):
            while pending := self.pending():
                await asyncio.wait(pending)

    async def cancel_all(self) -> int:
        """Cancel every task and wait for them to end; returns how many were running."""
        pending = self.pending()
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=2.0)
        return len(pending)

    async def shutdown(self, grace: float) -> None:
        """Give running work up to ``grace`` seconds to finish, then cancel the rest (logged)."""
        try:
            await self.wait_idle(grace)
        except TimeoutError:
            late = await self.cancel_all()
            self.log.warning("%s shutdown: %d unfinished task(s) cancelled", self.platform, late)
