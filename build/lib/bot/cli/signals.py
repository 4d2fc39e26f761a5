"""Signals in the CLI: Ctrl-C in the one-shot commands, and the graceful stop on SIGTERM/SIGHUP."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Callable, Iterator

from bot.cli.output import out

log = logging.getLogger("threadwise")


class _CtrlC:
    """Whether the running command answers questions (``ask``, ``eval``): then the Ctrl-C
    line says one was not answered."""

    asking = False


ctrl_c = _CtrlC()


def interrupted(signum: int, frame: object) -> None:
    """SIGINT during ask/eval/console: one line, exit code 130 now."""
    out.err.print("interrupted (Ctrl-C)" + (": the question was not answered" if ctrl_c.asking else ""), style="red")
    sys.stderr.flush()
    sys.stdout.flush()
    os._exit(130)


@contextlib.contextmanager
def graceful_stop(on_stop: Callable[[], None] | None = None) -> Iterator[list[int]]:
    """While inside: SIGTERM (and SIGHUP) do not kill the process at once; the answer in
    flight is finished first (the same graceful stop ``run`` gives Slack and Discord).
    ``on_stop`` is called once on the first signal (e.g. stop reading input). Yields a
    ``list`` that holds the signal numbers received."""
    received: list[int] = []
    loop = asyncio.get_running_loop()
    sigs = [sig for sig in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None)) if sig]

    def handler(sig: int) -> None:
        first = not received
        received.append(sig)
        log.warning("signal %s: finishing the answer in flight, then exiting", sig)
        if first and on_stop:
            on_stop()

    installed = []
    for sig in sigs:
        try:
            loop.add_signal_handler(sig, handler, sig)
            installed.append(sig)
        except (NotImplementedError, RuntimeError, ValueError):
            pass
    try:
        yield received
    finally:
        for sig in installed:
            try:
                loop.remove_signal_handler(sig)
            except (NotImplementedError, RuntimeError, ValueError):
                pass
