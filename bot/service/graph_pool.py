"""Graph worker processes (``[service] graph_workers``): the graph runs beside the chat process.

Why: one question costs ~20-45 ms of CPU on one event loop (LangGraph's steps,
langchain-core and the model's HTTP client are most of it, ``bench/bench_floor.py``), so a
single process answers at most ~25-50 questions a second whatever the model's speed, and
leaves the machine's other cores idle. With workers the chat process keeps everything
that talks to Slack and Discord (receipt, reactions, dedup, per-thread order, posting,
help requests, recovery), and each graph run streams from a worker:
:meth:`GraphPool.astream` is a drop-in for ``graph.astream(input, config,
stream_mode=["custom", "values"], durability=...)`` that yields the same
``(mode, chunk)`` pairs (every custom progress event, then the last ``values`` chunk).

Each worker (:mod:`bot.graph_worker`) builds the same graph from the same settings, with
its own checkpointer connection on the same SQLite file (WAL: one writer at a time,
readers never blocked; the chat process serialises the runs of one thread, so two
processes never write one thread at once). A worker that dies fails its runs with
:class:`GraphWorkerGone` (the caller may run them again) and is started again.

Wire format on a socketpair: frames of a 4-byte big-endian length and a pickle
(both ends are this program: nothing else can reach the socket).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import pickle
import socket
import struct
import sys
from collections.abc import AsyncIterator, Callable
from typing import Any

log = logging.getLogger("bot.service")

_HEADER = struct.Struct(">I")
#: Seconds a worker may take to import, open the index and say it is ready.
START_TIMEOUT_SECONDS = 180.0
#: Seconds before a dead worker is started again (doubled per failure in a row, at most 30 s).
RESTART_DELAY_SECONDS = 0.5


class GraphWorkerGone(RuntimeError):
    """The worker process running this graph run died (or the pool closed) before the run ended."""


def encode(message: Any) -> bytes:
    """One frame: ``message`` pickled, behind its length."""
    body = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return _HEADER.pack(len(body)) + body


async def read_frame(reader: asyncio.StreamReader) -> Any:
    """The next frame's message.

    Raises:
        asyncio.IncompleteReadError: the other end closed the socket.
    """
    (size,) = _HEADER.unpack(await reader.readexactly(_HEADER.size))
    return pickle.loads(await reader.readexactly(size))


def worker_config(config: dict[str, Any]) -> dict[str, Any]:
    """The part of a run's ``RunnableConfig`` a worker can receive: everything but
    ``callbacks`` (handlers of this process; the worker counts LLM calls itself)."""
    return {k: v for k, v in config.items() if k != "callbacks"}


class _Worker:
    """One worker process and the runs streaming from it."""

    def __init__(self, number: int) -> None:
        self.number = number
        self.process: asyncio.subprocess.Process | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.runs: dict[int, asyncio.Queue[tuple[Any, ...]]] = {}
        self.ready = False
        self.reader_task: asyncio.Task | None = None

    def send(self, message: Any) -> None:
        if self.writer is not None and not self.writer.is_closing():
            self.writer.write(encode(message))

    def gone(self) -> None:
        self.ready = False
        for queue in self.runs.values():
            queue.put_nowait(("gone",))
        self.runs.clear()


class GraphPool:
    """``workers`` graph worker processes, started by :meth:`start`, closed by :meth:`close`.

    Args:
        workers: processes, >= 1.
        init: what every worker builds its graph from: ``{"settings": Settings, "sources":
            list[str] | None, "max_calls": int (LLM calls in flight per worker), "log_level":
            str, "log_format": str}`` (pickled to each worker).
        event_loop: ``[service] event_loop`` for the workers.
        on_llm_requests: called with the number of LLM requests each run made and their input
            and output tokens (metrics).
    """

    def __init__(
        self,
        workers: int,
        init: dict[str, Any],
        event_loop: str = "auto",
        on_llm_requests: Callable[..., None] | None = None,
    ) -> None:
        self.workers = [_Worker(i) for i in range(max(1, workers))]
        self.init = init
        self.event_loop = event_loop
        self.on_llm_requests = on_llm_requests
        self._ids = itertools.count(1)
        self._closing = False
        self._changed = asyncio.Event()  # a worker became ready (or the pool closed)
        self._tasks: set[asyncio.Task] = set()

    @property
    def pids(self) -> list[int]:
        """Process ids of the running workers."""
        return [w.process.pid for w in self.workers if w.process is not None and w.process.returncode is None]

    async def start(self, timeout: float = START_TIMEOUT_SECONDS) -> None:
        """Start every worker and wait until each says it is ready.

        Raises:
            GraphWorkerGone: a worker exited or did not get ready within ``timeout`` seconds
                (its own error line is in the log); the pool is closed then.
        """
        try:
            await asyncio.wait_for(asyncio.gather(*(self._spawn(w) for w in self.workers)), timeout)
        except (TimeoutError, Exception) as exc:
            await self.close()
            raise GraphWorkerGone(f"graph workers did not start: {type(exc).__name__}: {exc}") from exc
        log.info("graph workers ready: %d processes (pids %s)", len(self.workers), ", ".join(map(str, self.pids)))

    async def _spawn(self, worker: _Worker) -> None:
        parent, child = socket.socketpair()
        try:
            worker.process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "bot.graph_worker",
                str(child.fileno()),
                self.event_loop,
                pass_fds=(child.fileno(),),
                stdin=asyncio.subprocess.DEVNULL,
            )
        finally:
            child.close()
        reader, worker.writer = await asyncio.open_connection(sock=parent)
        worker.send(("init", self.init))
        first = await read_frame(reader)
        if first[0] != "ready":
            raise GraphWorkerGone(f"graph worker {worker.number}: {first[1]}")
        worker.ready = True
        worker.reader_task = asyncio.create_task(self._read(worker, reader), name=f"graph worker {worker.number}")
        self._changed.set()

    async def _read(self, worker: _Worker, reader: asyncio.StreamReader) -> None:
        """Hand each frame of ``worker`` to its run; when the worker dies, fail its runs and start another."""
        try:
            while True:
                message = await read_frame(reader)
                queue = worker.runs.get(message[1])
                if queue is not None:
                    queue.put_nowait(message)
        except (asyncio.IncompleteReadError, ConnectionError, OSError, pickle.UnpicklingError, EOFError):
            pass
        finally:
            runs = len(worker.runs)
            worker.gone()
            if worker.writer is not None:
                worker.writer.close()
            if not self._closing:
                code = await worker.process.wait() if worker.process is not None else None
                log.error(
                    "graph worker %d (pid %s) exited with %s, %d runs in flight: starting another",
                    worker.number,
                    worker.process.pid if worker.process else "?",
                    code,
                    runs,
                )
                task = asyncio.create_task(self._restart(worker), name=f"restart graph worker {worker.number}")
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

    async def _restart(self, worker: _Worker) -> None:
        delay = RESTART_DELAY_SECONDS
        while not self._closing:
            await asyncio.sleep(delay)
            try:
                await asyncio.wait_for(self._spawn(worker), START_TIMEOUT_SECONDS)
                log.info(
                    "graph worker %d started again (pid %s)",
                    worker.number,
                    worker.process.pid if worker.process else "?",
                )
                return
            except Exception as exc:  # noqa: BLE001 - try again, slower
                log.error("graph worker %d did not start: %s: %s", worker.number, type(exc).__name__, exc)
                if worker.process is not None and worker.process.returncode is None:
                    worker.process.kill()
                delay = min(30.0, delay * 2)

    async def _pick(self) -> _Worker:
        """The ready worker with the fewest runs in flight (waits while none is ready).

        Raises:
            GraphWorkerGone: the pool is closing.
        """
        while not self._closing:
            ready = [w for w in self.workers if w.ready]
            if ready:
                return min(ready, key=lambda w: len(w.runs))
            self._changed.clear()
            await self._changed.wait()
        raise GraphWorkerGone("the graph workers are closing")

    async def astream(
        self, graph_input: Any, config: dict[str, Any], *, durability: str = "exit"
    ) -> AsyncIterator[tuple[str, Any]]:
        """Run the graph on a worker: yields ``("custom", event)`` for each progress event,
        then ``("values", state)`` with the state the run ended (or paused) with. Closing the
        generator early (the run's task cancelled) cancels the run in the worker.

        Raises:
            GraphWorkerGone: the worker died before the run ended.
            RemoteFailure: the graph run failed in the worker (its kind and one-line
                description, :mod:`bot.failures`).
        """
        worker = await self._pick()
        rid = next(self._ids)
        queue: asyncio.Queue[tuple[Any, ...]] = asyncio.Queue()
        worker.runs[rid] = queue
        ended = False
        try:
            worker.send(("run", rid, graph_input, worker_config(config), durability))
            while True:
                message = await queue.get()
                kind = message[0]
                if kind == "event":
                    yield "custom", message[2]
                elif kind == "done":
                    ended = True
                    if self.on_llm_requests is not None:
                        self.on_llm_requests(*(int(n) for n in message[3:6]))
                    yield "values", message[2]
                    return
                elif kind == "error":
                    ended = True
                    raise message[2]
                else:  # "gone"
                    ended = True
                    raise GraphWorkerGone(f"graph worker {worker.number} died during the run")
        finally:
            worker.runs.pop(rid, None)
            if not ended:
                worker.send(("cancel", rid))

    async def close(self) -> None:
        """Stop every worker and wait for them, 5 s at most each. Runs still in flight are
        cancelled first, so each worker ends them as a stop ends them in process (LangGraph
        saves their checkpoints) before it sees its socket close and exits; a worker that sees
        the socket close with runs nobody cancelled takes it for a crash and saves nothing."""
        self._closing = True
        self._changed.set()
        for task in list(self._tasks):
            task.cancel()
        for w in self.workers:
            for rid in list(w.runs):
                w.send(("cancel", rid))
            w.gone()
            if w.writer is not None:
                w.writer.close()
        for w in self.workers:
            if w.process is None or w.process.returncode is not None:
                continue
            try:
                await asyncio.wait_for(w.process.wait(), 5.0)
            except TimeoutError:
                w.process.kill()
                await w.process.wait()
        for w in self.workers:
            if w.reader_task is not None:
                w.reader_task.cancel()


def default_workers() -> int:
    """One worker per CPU core this process may use; 0 on a single core (a worker there
    would only add its messages to the same core's work)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return cores if cores >= 2 else 0
