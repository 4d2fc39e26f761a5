"""Responders rebuilt after a restart: the platforms register a factory that turns a
:meth:`~bot.protocol.Responder.reference` back into a responder (to post a timed-out
help request's apology, or to finish a run a crash left unfinished)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from bot.protocol import Answer, HelpRequest, Responder, Status

log = logging.getLogger("bot.service")

#: How long recovery waits for a run's platform adapter to register (it starts alongside).
PLATFORM_WAIT_SECONDS = 30.0


class NullResponder(Responder):
    """Used when a timed-out help request's platform is not running: logs only."""

    async def set_status(self, status: Status) -> None: ...
    async def post_answer(self, answer: Answer) -> None:
        log.info("no adapter to post a %s answer", answer.kind)

    async def post_help_request(self, request: HelpRequest) -> None: ...
    async def post_notice(self, text: str) -> None: ...
    async def update_progress(self, text: str, *, final: bool = False) -> None: ...
    async def notify_private(self, text: str) -> None: ...
    def reference(self) -> dict[str, Any]:
        return {}


class Responders:
    """The registered platforms' responder factories (``register_platform``)."""

    def __init__(self) -> None:
        self.factories: dict[str, Callable[[dict[str, Any]], Responder]] = {}
        self.ready: dict[str, Callable[[], Awaitable[Any]]] = {}

    def register(
        self,
        platform: str,
        factory: Callable[[dict[str, Any]], Responder],
        ready: Callable[[], Awaitable[Any]] | None = None,
    ) -> None:
        """Let the service rebuild a responder of ``platform`` from its reference;
        ``ready`` (optional) is awaited before a rebuilt responder is used by crash recovery."""
        self.factories[platform] = factory
        if ready is not None:
            self.ready[platform] = ready

    def rebuild(self, platform: str, reference: dict[str, Any], fallback: Responder | None) -> Responder:
        """The responder ``reference`` names, or ``fallback`` (or a :class:`NullResponder`)
        when the platform is not registered or the reference is empty or broken (logged)."""
        factory = self.factories.get(platform)
        if factory and reference:
            try:
                return factory(reference)
            except Exception:  # noqa: BLE001
                log.exception("cannot rebuild a %s responder", platform)
        return fallback or NullResponder()

    async def when_ready(
        self, platform: str, reference: dict[str, Any], wait_seconds: float = PLATFORM_WAIT_SECONDS
    ) -> Responder | None:
        """The responder, once its platform adapter is registered and ready (waiting up to
        ``wait_seconds``); None if no adapter of that platform runs in this process."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_seconds
        while platform not in self.factories and loop.time() < deadline:
            await asyncio.sleep(0.1)
        if platform not in self.factories:
            return None
        ready = self.ready.get(platform)
        while ready is not None:
            try:
                await asyncio.wait_for(ready(), max(1.0, deadline - loop.time()))
                break
            except RuntimeError:  # e.g. discord.py before login: "Client has not been properly initialised"
                if loop.time() > deadline:
                    break
                await asyncio.sleep(0.2)
            except TimeoutError:
                log.warning("recovery: the %s adapter is not ready; posting anyway", platform)
                break
        return self.rebuild(platform, reference, None)
