"""The status reaction state machine shared by the Slack and Discord responders.

A question carries at most one bot reaction (received -> searching -> web -> writing ->
done | apology | waiting for a human). Moving to a status adds its reaction, then
removes every other reaction the bot may have left, *whether or not the add worked*: a
refused add of "done" must not leave "writing" behind, so the resting state is exactly
one of done / apology / waiting (or none, if the platform refuses them all). Removals that
fail stay recorded and are retried on the next move; a platform that says reactions are
pointless on this message (permission, archived thread, deleted message) sets
:attr:`ReactionState.disabled`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

ReactionCall = Callable[[str], Awaitable[bool]]


class ReactionState:
    """The bot's reactions on one message.

    Args:
        shown: reactions the bot may have on the message now (e.g. from a responder
            rebuilt after a restart). The list object is kept and updated in place.
    """

    def __init__(self, shown: list[str] | None = None) -> None:
        self.shown: list[str] = shown if shown is not None else []
        self.current: str | None = None
        self.disabled = False
        self._lock = asyncio.Lock()

    async def move_to(self, name: str, *, add: ReactionCall, remove: ReactionCall) -> bool:
        """Show ``name`` as the only bot reaction.

        Args:
            name: the reaction (Slack emoji name, Discord emoji).
            add, remove: platform calls; return True on success (already present / already
                gone count as success), False on failure (logged by the platform).

        Returns:
            True if ``name`` is shown afterwards.
        """
        async with self._lock:
            self.current = name
            if self.disabled or self.shown == [name]:
                return not self.disabled
            added = await add(name)
            if added and name not in self.shown:
                self.shown.append(name)
            for old in [n for n in self.shown if n != name]:
                if self.disabled:
                    break
                if await remove(old):
                    self.shown.remove(old)
            return added

    async def clear(self, *, remove: ReactionCall) -> None:
        """Remove every reaction the bot may have left (a message that turned out not to be
        a new question after its receipt was acknowledged). Failed removals stay recorded."""
        async with self._lock:
            self.current = None
            for old in list(self.shown):
                if self.disabled:
                    break
                if await remove(old):
                    self.shown.remove(old)
