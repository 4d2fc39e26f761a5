"""The status reaction state machine shared by the Slack and Discord responders.

A question carries at most one bot reaction (received -> searching -> web -> writing ->
done | apology | waiting for a human). Moving to a status adds its reaction, then
removes every other reaction the bot may have left, *whether or not the add worked*: a
refused add of "done" must not leave "writing" behind, so the resting state is exactly
one of done / apology / waiting (or none, if the platform refuses them all). Removals that
fail stay recorded and are retried on the next move; a platform that says reactions are
pointless on this message (permission, archived thread, deleted message) sets
:attr:`ReactionState.disabled`.

Pacing: the steps of a run (``settle=False``) are shown in the background, no
sooner than ``min_interval`` seconds after the previous change on the message; a step
that a newer status replaces before its turn is never sent. Every change costs two API
calls (an add and a remove) that both platforms rate-limit (Slack's ``reactions.add`` is
a Tier 3 method, about 50 calls a minute: https://docs.slack.dev/reference/methods/reactions.add;
Discord limits reactions per channel), and a stage shorter than a second cannot be read
anyway. The first reaction and the resting ones (``settle=True``) are shown at once and
awaited; a step still waiting is dropped by them.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

ReactionCall = Callable[[str], Awaitable[bool]]

log = logging.getLogger(__name__)


class ReactionState:
    """The bot's reactions on one message.

    Args:
        shown: reactions the bot may have on the message now (e.g. from a responder
            rebuilt after a restart). The list object is kept and updated in place.
        min_interval: least seconds between two changes made by steps (``move_to(...,
            settle=False)``); 0 shows every step at once, in order.
    """

    def __init__(self, shown: list[str] | None = None, *, min_interval: float = 0.0) -> None:
        self.shown: list[str] = shown if shown is not None else []
        self.current: str | None = None
        self.disabled = False
        self.min_interval = max(0.0, float(min_interval))
        self._lock = asyncio.Lock()
        self._changed_at = -float("inf")  # when the last change was sent
        self._pending: tuple[str, ReactionCall, ReactionCall] | None = None  # the newest step not yet shown
        self._flusher: asyncio.Task[None] | None = None
        self._applying = False  # the flusher is making platform calls (never cancelled then)

    async def move_to(self, name: str, *, add: ReactionCall, remove: ReactionCall, settle: bool = True) -> bool:
        """Show ``name`` as the only bot reaction.

        Args:
            name: the reaction (Slack emoji name, Discord emoji).
            add, remove: platform calls; return True on success (already present / already
                gone count as success), False on failure (logged by the platform).
            settle: True (the first reaction, a resting status): shown now, after any call
                in flight on this message, and awaited; a step still waiting is dropped.
                False (a step of a run): returns at once; shown in the background no sooner
                than ``min_interval`` seconds after the previous change, or not at all when
                a newer status comes first.

        Returns:
            True if ``name`` is shown afterwards (a step: True when it was accepted).
        """
        self.current = name
        if not settle:
            self._pending = (name, add, remove)
            if self._flusher is None or self._flusher.done():
                self._flusher = asyncio.get_running_loop().create_task(self._flush(), name="reaction-step")
            return not self.disabled
        self._drop_pending()
        async with self._lock:
            return await self._apply(name, add, remove)

    def _drop_pending(self) -> None:
        """Forget the step waiting for its turn; stop the flusher unless it is making calls."""
        self._pending = None
        if self._flusher is not None and not self._flusher.done() and not self._applying:
            self._flusher.cancel()  # asleep or waiting for the lock: nothing half done

    async def _flush(self) -> None:
        """Show the newest waiting step once its turn comes (see :meth:`move_to`)."""
        while self._pending is not None:
            delay = self._changed_at + self.min_interval - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            async with self._lock:
                step, self._pending = self._pending, None
                if step is None:  # a resting status or a clear came first
                    return
                self._applying = True
                try:
                    await self._apply(*step)
                except Exception:  # noqa: BLE001 - the platform calls log their own failures
                    log.debug("status step %s failed", step[0], exc_info=True)
                finally:
                    self._applying = False

    async def _apply(self, name: str, add: ReactionCall, remove: ReactionCall) -> bool:
        if self.disabled or self.shown == [name]:
            return not self.disabled
        self._changed_at = time.monotonic()
        added = await add(name)
        if added and name not in self.shown:
            self.shown.append(name)
        for old in [n for n in self.shown if n != name]:
            if self.disabled:
                break
            if await remove(old):
                self.shown.remove(old)
        return added

    def assume(self, name: str) -> None:
        """The message may already show ``name`` (left by an earlier delivery of it, e.g. the
        apology of a turn that failed): the next change removes it like any other."""
        if name and name not in self.shown:
            self.shown.append(name)

    async def clear(self, *, remove: ReactionCall) -> None:
        """Remove every reaction the bot may have left (a message that turned out not to be
        a new question after its receipt was acknowledged). Failed removals stay recorded;
        a step still waiting is dropped."""
        self._drop_pending()
        async with self._lock:
            self.current = None
            for old in list(self.shown):
                if self.disabled:
                    break
                if await remove(old):
                    self.shown.remove(old)
