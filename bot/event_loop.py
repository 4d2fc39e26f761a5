"""Which asyncio event loop the process runs on (``[service] event_loop``).

uvloop (https://github.com/MagicStack/uvloop) implements asyncio's loop on libuv in C. Under
load the bot's CPU is the event loop's own bookkeeping (scheduling callbacks and tasks,
selector calls, socket writes: a large share of a profile's samples)
plus the libraries on top; uvloop does the first part in C. Everything the bot runs on
(aiohttp, httpx/anyio, aiosqlite, discord.py, slack_sdk) supports it.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from bot.config import ConfigError

log = logging.getLogger(__name__)
T = TypeVar("T")


def loop_factory(choice: str = "auto") -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The event loop factory for ``choice`` (``"auto"``, ``"uvloop"`` or ``"asyncio"``).

    Returns:
        ``uvloop.new_event_loop`` for ``"uvloop"``, and for ``"auto"`` when uvloop is
        installed; None (asyncio's default loop) for ``"asyncio"`` or ``"auto"`` without it.

    Raises:
        ConfigError: ``"uvloop"`` was asked for and is not installed or cannot be imported
            (the message names the key); ``"auto"`` falls back to asyncio's loop then.
    """
    if choice == "asyncio":
        return None
    if importlib.util.find_spec("uvloop") is None:
        if choice == "uvloop":
            raise ConfigError('[service] event_loop is "uvloop" but uvloop is not installed: pip install uvloop')
        return None
    try:
        import uvloop
    except ImportError as exc:  # installed but broken (e.g. a wheel built for another platform)
        if choice == "uvloop":
            raise ConfigError(f'[service] event_loop is "uvloop" but uvloop cannot be imported: {exc}') from exc
        log.warning("uvloop cannot be imported (%s): running on asyncio's event loop", exc)
        return None
    return uvloop.new_event_loop


def run_async(coro: Coroutine[Any, Any, T], factory: Callable[[], asyncio.AbstractEventLoop] | None = None) -> T:
    """Run ``coro`` to completion on a new event loop made by ``factory`` (None: asyncio's;
    see :func:`loop_factory`), like :func:`asyncio.run`: the loop is closed and its async
    generators finalised after."""
    log.debug("event loop: %s", "asyncio" if factory is None else getattr(factory, "__module__", "custom"))
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(coro)
