"""What the offline benchmarks share (bench/answer_shape.py, bench/calibrate_offline.py):
the eval rows, each row's question and search variants made by the graph's own functions
(:func:`graphs.offline.offline_questions`, :func:`graphs.offline.offline_search_queries`),
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
from graphs.knowledge import KnowledgeBase
from graphs.models import build_embeddings
from graphs.offline import offline_questions, offline_search_queries, thread_history
from graphs.offline_router import OfflineRouter


def read_rows(path: str | Path) -> list[dict]:
    """The rows of an eval set (JSON lines)."""
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def row_state(row: dict) -> dict[str, Any]:
    """An eval row as the graph's state at its first search: the thread's history, then the
    message; no model rewrote it (the standalone question is the message)."""
    kinds = {"user": HumanMessage, "assistant": AIMessage}
    history = [kinds[h["role"]](h["content"]) for h in row.get("history", [])]
    return {"messages": [*history, HumanMessage(row["question"])], "question": row["question"]}


def queries_for(row: dict, settings: Settings, router: OfflineRouter | None = None) -> list[str]:
    """The extractive graders' and composer's question variants for ``row`` (``router``: tells
    a new question in the thread from a follow-up as the graph does, :func:`graphs.offline.thread_history`)."""
    return offline_questions(row_state(row), settings.graph.history_messages, router)  # type: ignore[arg-type]


def search_queries_for(
    row: dict, settings: Settings, router: OfflineRouter | None = None
) -> list[str | tuple[str, float]]:
    """The extractive retrieve node's search variants for ``row`` (its first search)."""
    return offline_search_queries(row_state(row), settings.graph.history_messages, router)  # type: ignore[arg-type]


def has_thread(row: dict, settings: Settings, router: OfflineRouter | None = None) -> bool:
    """``row`` is read with its thread's history (a follow-up), as the router is told."""
    return bool(thread_history(row_state(row), settings.graph.history_messages, router))  # type: ignore[arg-type]


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
