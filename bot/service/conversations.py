"""Conversations as the graph's checkpointer keeps them: one chat thread is one LangGraph
thread (``thread_id`` = the thread key, :mod:`bot.chat.threads`), with its saved state,
its pending interrupt (a help request) and its checkpoints."""

from __future__ import annotations

import logging
from typing import Any, cast

from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.types import Interrupt

from bot.failures import describe_failure
from bot.logs import for_thread
from bot.storage import Deliveries, checkpoints
from graphs.adaptive_rag import RAGGraph, seed_history
from graphs.state import RAGState

log = logging.getLogger("bot.service")


class Conversations:
    """The threads of one compiled graph.

    Args:
        graph: the compiled adaptive RAG graph, compiled with a checkpointer.
        store: the bookkeeping (threads the bot handled a message in without a run).
        recursion_limit: ``[graph] recursion_limit`` of every run (budgets end loops long before it).
        keep_checkpoints: ``[service] keep_checkpoints_per_thread``: checkpoints kept per
            thread after each run (older ones pruned).

    Raises:
        TypeError: the graph was compiled without a checkpointer.
    """

    def __init__(self, graph: RAGGraph, store: Deliveries, *, recursion_limit: int, keep_checkpoints: int) -> None:
        if not isinstance(graph.checkpointer, BaseCheckpointSaver):
            raise TypeError("the ChatService's graph was compiled without a checkpointer")
        self.graph = graph
        self.saver: BaseCheckpointSaver = graph.checkpointer
        self._store = store
        self.recursion_limit = recursion_limit
        self.keep_checkpoints = keep_checkpoints

    def run_config(self, key: str) -> RunnableConfig:
        """The LangGraph run config of thread ``key`` (thread id, recursion limit)."""
        return {"configurable": {"thread_id": key}, "recursion_limit": self.recursion_limit}

    async def pending_interrupt(self, key: str) -> Interrupt | None:
        """The pending LangGraph interrupt of a thread (with ``.id`` and ``.value``, a
        :class:`graphs.state.HelpPayload`), or None."""
        state = await self.graph.aget_state(self.run_config(key))
        return state.interrupts[0] if state.interrupts else None

    async def state(self, key: str) -> Any:
        """The thread's ``StateSnapshot`` (values, next, tasks, interrupts, config)."""
        return await self.graph.aget_state(self.run_config(key))

    async def knows(self, key: str) -> bool:
        """True if the bot already took part in this thread: a checkpoint exists, or it
        handled a message there (e.g. replied to a bare mention)."""
        if await self.saver.aget_tuple(self.run_config(key)) is not None:
            return True
        return await self._store.has_thread(key)

    async def keys(self, prefix: str = "") -> list[str]:
        """Saved thread keys starting with ``prefix`` (from the checkpointer)."""
        return await checkpoints.thread_keys(self.saver, prefix)

    async def values(self, key: str) -> RAGState:
        """The saved state of a thread ({} if none)."""
        return cast(RAGState, dict((await self.graph.aget_state(self.run_config(key))).values or {}))

    async def latest_checkpoint_id(self, key: str) -> str:
        """The id of the thread's newest checkpoint ("" when it has none)."""
        return await checkpoints.latest_checkpoint_id(self.saver, key)

    async def seed(self, key: str, history: list[dict[str, str]]) -> None:
        """Write earlier turns (``[{"role": "user"|"assistant", "content": str}]``) into a
        thread, as if they had been asked."""
        msgs = [HumanMessage(h["content"]) if h["role"] == "user" else AIMessage(h["content"]) for h in history]
        if msgs:
            await seed_history(self.graph, self.run_config(key), msgs)

    async def prune(self, key: str) -> None:
        """Keep only the newest ``keep_checkpoints`` of a thread (they hold the messages and
        any pending interrupt) and give the freed pages back (best effort)."""
        try:
            await checkpoints.prune(self.saver, key, self.keep_checkpoints)
        except Exception as exc:  # noqa: BLE001 - pruning is best effort
            log.warning("checkpoint pruning failed: %s", describe_failure(exc), extra=for_thread(key))
