"""Signals in the CLI: Ctrl-C in the one-shot commands, and the bounded graceful stop on SIGTERM/SIGHUP."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import threading
from collections.abc import AsyncIterator, Callable

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


#: Seconds the process may take to close its files after the stop grace expired, before it
#: exits anyway (a model call running in a thread cannot be cancelled, and Python waits for
#: such threads at exit).
CLOSE_SECONDS = 5.0


class StopGraceExpired(Exception):
    """A stop signal came and the answer in flight did not finish within the grace
    (``[service] stop_grace_seconds``); ``exit_code`` is the command's code for it."""

    def __init__(self, exit_code: int) -> None:
        super().__init__("the answer in flight was not finished within the stop grace")
        self.exit_code = exit_code


def _exit_now(code: int) -> None:
    os.write(2, b"stopped: closing took too long after the stop grace\n")
    os._exit(code)


@contextlib.asynccontextmanager
async def graceful_stop(
    grace: float,
    on_stop: Callable[[], None] | None = None,
    *,
    exit_code: int = 0,
    unfinished: str = "it is answered at the next start",
) -> AsyncIterator[list[int]]:
    """While inside: SIGTERM (and SIGHUP) do not kill the process at once; the answer in
    flight gets ``grace`` seconds (``[service] stop_grace_seconds``, the same as Slack's and
    Discord's) to finish, then the work inside is cancelled: a run cut off this way stays
    recorded and is answered at the next start (:mod:`bot.service.recovery`).

    Args:
        grace: seconds from the first signal until the work is cancelled.
        on_stop: called once on the first signal (e.g. stop reading input).
        exit_code: the command's exit code when the grace expires.
        unfinished: what becomes of the unfinished answer, for the log line.

    Yields:
        A list holding the signal numbers received.

    Raises:
        StopGraceExpired: the grace expired and the work was cancelled. The process then
            has :data:`CLOSE_SECONDS` to close its files before it exits anyway.
    """
    received: list[int] = []
    loop = asyncio.get_running_loop()
    sigs = [sig for sig in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None)) if sig]
    installed = []
    try:
        async with asyncio.timeout(None) as deadline:

            def handler(sig: int) -> None:
                first = not received
                received.append(sig)
                if not first:
                    return
                log.warning("signal %s: finishing the answer in flight (at most %g s), then exiting", sig, grace)
                deadline.reschedule(loop.time() + grace)
                if on_stop:
                    on_stop()

            for sig in sigs:
                try:
                    loop.add_signal_handler(sig, handler, sig)
                    installed.append(sig)
                except (NotImplementedError, RuntimeError, ValueError):
                    pass
            yield received
    except TimeoutError:
        if not deadline.expired():
            raise  # the work's own timeout, not the stop grace
        log.warning(
            "stopping: the answer in flight did not finish within %g s ([service] stop_grace_seconds); %s",
            grace,
            unfinished,
        )
        closer = threading.Timer(CLOSE_SECONDS, _exit_now, args=(exit_code,))
        closer.daemon = True
        closer.start()
        raise StopGraceExpired(exit_code) from None
    finally:
        for sig in installed:
            try:
                loop.remove_signal_handler(sig)
            except (NotImplementedError, RuntimeError, ValueError):
                pass
