"""What the offline benchmarks share (bench/answer_shape.py, bench/calibrate_offline.py):
the eval rows, each row's question and search variants made by the graph's own functions
(:func:`graphs.offline.offline_questions`, :func:`graphs.offline.offline_search_queries`, after
the route step's :func:`graphs.offline.route_message`),
and the knowledge base, local embeddings and text embedder they run on.

Import it after the script has put the project on ``sys.path``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage

from bot.config import Settings, load_settings
from bot.runtime import build_knowledge_base
from graphs import extractive as ex
from graphs.graders import documents_define
from graphs.knowledge import KnowledgeBase
from graphs.models import build_embeddings
from graphs.offline import follows_thread, offline_questions, offline_search_queries, route_message
from graphs.offline_router import OfflineRouter


def read_rows(path: str | Path) -> list[dict]:
    """The rows of an eval set (JSON lines)."""
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def row_state(row: dict, settings: Settings | None = None, router: OfflineRouter | None = None) -> dict[str, Any]:
    """An eval row as the graph's state at its first search: the thread's history, then the
    message; no model rewrote it (the standalone question is the message). With ``settings``,
    routed as the graph's route step routes it (:func:`graphs.offline.route_message`: ``route``
    and ``follow_up``, a new question in the thread told from a follow-up); without a
    ``router`` only whether it is a follow-up, on its words."""
    kinds = {"user": HumanMessage, "assistant": AIMessage}
    history = [kinds[h["role"]](h["content"]) for h in row.get("history", [])]
    state: dict[str, Any] = {"messages": [*history, HumanMessage(row["question"])], "question": row["question"]}
    if settings is not None:
        limit = settings.graph.history_messages
        if router is not None:
            state["route"], _, state["follow_up"] = route_message(  # type: ignore[arg-type]
                state, limit, router, settings.knowledge.k, documents_define
            )
        else:
            state["follow_up"] = follows_thread(state, limit)  # type: ignore[arg-type]
    return state


def queries_for(row: dict, settings: Settings, state: dict[str, Any] | None = None) -> list[str]:
    """The extractive graders' and composer's question variants for ``row`` (``state``: its
    :func:`row_state`, routed; by default routed on the words alone)."""
    state = state if state is not None else row_state(row, settings)
    return offline_questions(state, settings.graph.history_messages)  # type: ignore[arg-type]


def search_queries_for(
    row: dict, settings: Settings, state: dict[str, Any] | None = None
) -> list[str | tuple[str, float]]:
    """The extractive retrieve node's search variants for ``row`` (its first search; ``state`` as
    for :func:`queries_for`)."""
    state = state if state is not None else row_state(row, settings)
    return offline_search_queries(state, settings.graph.history_messages)  # type: ignore[arg-type]


def mean(xs: list[float]) -> float | None:
    """The mean to 3 decimals, None for no values."""
    return round(sum(xs) / len(xs), 3) if xs else None


def open_offline(config: str | Path, corpus: str | Path) -> tuple[Settings, KnowledgeBase, ex.TextEmbedder]:
    """The settings of ``config``, the knowledge base of the folder ``corpus`` on the local
    embeddings (built on first use: a line on stderr says how long it took) and a text
    embedder on the same model."""
    settings = load_settings(config)
    emb, eid = build_embeddings("local", settings.models)
    kb = build_knowledge_base(settings, emb, eid, [str(corpus)])
    if kb.needs_rebuild():
        t = time.perf_counter()
        kb.reindex()
        print(f"index built in {time.perf_counter() - t:.0f}s", file=sys.stderr)
    return settings, kb, ex.TextEmbedder(emb, cache_size=200_000)
