"""A graph worker process: ``python -m bot.graph_worker FD EVENT_LOOP`` (started by
:class:`bot.service.graph_pool.GraphPool`, never by hand).

It reads its settings from the socket ``FD``, builds the same graph as the chat process
(model, knowledge base, web search, learned entries, a checkpointer on the same SQLite
file; :func:`bot.runtime.graph_deps`), says ``ready`` and then runs graph runs as they
come: ``("run", id, input, config, durability)`` streams ``("event", id, progress)`` for
each custom progress event and ends with ``("done", id, values, llm_requests, input_tokens,
output_tokens)`` or
``("error", id, exception)``; ``("cancel", id)`` cancels a run. It exits when the socket
closes (the chat process stopped or died), so no worker outlives the bot; runs the chat
process did not cancel first are cut off at once, saving nothing (:func:`_cut_off`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import sys
from typing import Any

log = logging.getLogger("bot.graph_worker")


class _LLMRequests:
    """Counts chat-model starts in a run (what the chat process's metrics callback counts in-process)."""

    def __init__(self) -> None:
        from langchain_core.callbacks import BaseCallbackHandler

        count = self

        class Handler(BaseCallbackHandler):
            run_inline = True  # counted at once, not in an executor thread

            def on_chat_model_start(self, *args: Any, **kwargs: Any) -> None:
                count.n += 1

            def on_llm_start(self, *args: Any, **kwargs: Any) -> None:
                count.n += 1

            def on_llm_end(self, response: Any, **kwargs: Any) -> None:
                from bot.metrics import llm_result_tokens

                used = llm_result_tokens(response)
                count.input_tokens += used[0]
                count.output_tokens += used[1]

        self.n = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.handler = Handler()


async def serve(fd: int) -> int:
    """Serve graph runs on socket ``fd`` until it closes. Returns the exit code (2: the graph
    could not be built; the reason is sent to the chat process and logged)."""
    from bot.failures import RemoteFailure
    from bot.service.graph_pool import encode, read_frame

    reader, writer = await asyncio.open_connection(sock=socket.socket(fileno=fd))
    kind, init = await read_frame(reader)
    from bot.logs import setup_logging

    setup_logging(init["log_level"], init["log_format"])
    try:
        graph, close = await _build(init)
    except Exception as exc:  # noqa: BLE001 - told to the chat process, which logs it
        from bot.failures import describe_failure

        writer.write(encode(("failed", describe_failure(exc))))
        await writer.drain()
        return 2
    writer.write(encode(("ready", 0)))
    runs: dict[int, asyncio.Task] = {}
    cancelled: set[int] = set()  # runs the chat process ended (a stop): they end as in it, saving their checkpoint
    count_requests = bool(init["settings"].monitoring.metrics_port)

    async def run(rid: int, graph_input: Any, config: dict[str, Any], durability: str) -> None:
        from bot.logs import log_context

        meta = config.get("metadata") or {}
        counter = _LLMRequests()
        if count_requests:  # the chat process serves metrics ([monitoring] metrics_port)
            config = {**config, "callbacks": [counter.handler]}
        final: Any = None
        with log_context(
            thread_key=meta.get("thread_key"), platform=meta.get("platform"), message_id=meta.get("message_id")
        ):
            try:
                async for mode, chunk in graph.astream(
                    graph_input, config, stream_mode=["custom", "values"], durability=durability
                ):
                    if mode == "values":
                        final = chunk
                    else:
                        writer.write(encode(("event", rid, chunk)))
                writer.write(encode(("done", rid, final, counter.n, counter.input_tokens, counter.output_tokens)))
            except Exception as exc:  # noqa: BLE001 - the chat process turns it into the apology
                writer.write(encode(("error", rid, RemoteFailure.of(exc))))
            finally:
                runs.pop(rid, None)
                cancelled.discard(rid)

    try:
        while True:
            try:
                message = await read_frame(reader)
            except (asyncio.IncompleteReadError, ConnectionError, OSError):
                if cut_off := set(runs) - cancelled:
                    _cut_off(len(cut_off))
                return 0  # the chat process stopped (its runs were ended first): so does this worker
            if message[0] == "run":
                _, rid, graph_input, config, durability = message
                runs[rid] = asyncio.create_task(run(rid, graph_input, config, durability))
            elif message[0] == "cancel" and message[1] in runs:
                cancelled.add(message[1])
                runs[message[1]].cancel()
    finally:
        # a run cancelled already is saving its checkpoint on the way out: cancelling it again
        # would cut that save short (half the stopped runs were then started again after a restart)
        for rid, task in runs.items():
            if rid not in cancelled:
                task.cancel()
        await asyncio.gather(*runs.values(), return_exceptions=True)
        await close()


def _cut_off(n_runs: int) -> None:
    """The chat process died with runs in flight: end at once, as those runs would have ended in
    it. Cancelling them instead would let LangGraph save each run's checkpoint on the way out
    (durability "exit" saves when a run ends, also by cancellation), and crash recovery would then
    continue a turn from a half-run state instead of asking the question again (tests/test_recovery.py)."""
    log.warning("graph worker: the chat process is gone with %d runs in flight; they end here", n_runs)
    logging.shutdown()
    os._exit(0)


async def _build(init: dict[str, Any]) -> tuple[Any, Any]:
    """The compiled graph and an async ``close()`` for what it holds."""
    from contextlib import AsyncExitStack

    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    from bot.config import Secrets
    from bot.runtime import _chat_model, build_knowledge_base, freeze_startup_objects, graph_deps
    from bot.storage import checkpoints
    from graphs.adaptive_rag import build_graph
    from graphs.models import build_embeddings, close_chat_model

    settings = init["settings"]
    secrets = Secrets.from_env()
    stack = AsyncExitStack()
    model, degraded = _chat_model(settings, secrets, None)
    stack.push_async_callback(close_chat_model, model)
    emb, emb_id = build_embeddings(settings.knowledge.embeddings, settings.models, secrets.mistral_api_key)
    knowledge = build_knowledge_base(settings, emb, emb_id, init.get("sources"))
    deps = await graph_deps(
        settings, secrets, model, knowledge, int(init["max_calls"]), degraded=degraded, sources=init.get("sources")
    )
    saver = await stack.enter_async_context(
        AsyncSqliteSaver.from_conn_string(str(settings.path(settings.service.checkpoint_db)))
    )
    await checkpoints.prepare(saver)  # the chat process set the file up; this sets the connection's pragmas
    graph = build_graph(deps, checkpointer=saver)
    freeze_startup_objects()
    return graph, stack.aclose


def main(argv: list[str]) -> int:
    """Entry point: ``argv`` = [FD, EVENT_LOOP]."""
    from bot.event_loop import loop_factory, run_async

    # Ctrl-C or a SIGTERM sent to the whole group: the chat process stops the runs and then closes
    # the socket, which ends this process
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    return run_async(serve(int(argv[0])), loop_factory(argv[1] if len(argv) > 1 else "auto"))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
