"""The model-free pieces of the graph (``[graph] composer = "extractive"``): the
extractive grader/composer and the embedding router, built on first use, and the
question variants they score against."""

from __future__ import annotations

import threading

from langchain_core.messages import AIMessage, HumanMessage

from graphs.extractive import Extractive, TextEmbedder
from graphs.knowledge import KnowledgeBase
from graphs.knowledge.crosslingual import load_encoder
from graphs.messages import history_before_last, kb_queries, last_user_message, message_text
from graphs.offline_router import OfflineRouter
from graphs.state import RAGState


class OfflineKit:
    """:class:`~graphs.extractive.Extractive` and :class:`~graphs.offline_router.OfflineRouter`
    over the knowledge base's embeddings, built together on first use (loading the
    embeddings is slow; a graph that never runs offline never pays for it).

    Args:
        knowledge: the knowledge base (its ``embeddings`` may be None: lexical only).
    """

    def __init__(self, knowledge: KnowledgeBase, cross_language: bool = True) -> None:
        self.knowledge = knowledge
        self.cross_language = cross_language
        self._extractive: Extractive | None = None
        self._router: OfflineRouter | None = None
        self._lock = threading.Lock()

    @property
    def extractive(self) -> Extractive:
        """The extractive grader/composer (built on first use)."""
        with self._lock:
            if self._extractive is None:
                cross = load_encoder() if self.cross_language and self.knowledge.embeddings is not None else None
                extractive = Extractive(TextEmbedder(self.knowledge.embeddings), self.knowledge, cross_encoder=cross)
                self._router = OfflineRouter(extractive.embedder, self.knowledge, extractive=extractive)
                self._extractive = extractive
            return self._extractive

    @property
    def router(self) -> OfflineRouter:
        """The embedding router (built with :attr:`extractive`)."""
        self.extractive  # noqa: B018 - builds both
        assert self._router is not None
        return self._router


def offline_questions(state: RAGState, history_limit: int) -> list[str]:
    """Question variants the extractive graders and composer score against: the
    user's words (the message; for a follow-up also the previous user message joined
    with it), never a rewritten keyword query (documents must answer the question)."""
    raw = last_user_message(state)
    prev = [message_text(m) for m in history_before_last(state, history_limit) if isinstance(m, HumanMessage)]
    return [raw, f"{prev[-1]} {raw}"] if prev else [raw]


#: RRF weight of the search variants that join the thread's history to the message (the
#: message alone weighs 1): a new, unrelated question in a thread is pulled less towards the
#: old topic, while a real follow-up still finds its page (lower weights lost follow-ups).
HISTORY_WEIGHT = 0.75


def offline_search_queries(state: RAGState, history_limit: int) -> list[str | tuple[str, float]]:
    """Search variants without a model: :func:`~graphs.messages.kb_queries` plus, for a
    follow-up, the previous answer's opening joined with the message (it names what "it"
    is, which a follow-up like "and how do I stop it?" does not say), as
    ``(query, weight)`` where the weight is not 1: the variants that carry the thread's
    history weigh :data:`HISTORY_WEIGHT`."""
    raw = last_user_message(state)
    history = history_before_last(state, history_limit)
    prev_user = [message_text(m) for m in history if isinstance(m, HumanMessage)]
    joined = f"{prev_user[-1]} {raw}".strip() if prev_user else None  # kb_queries' history variant
    queries: list[str | tuple[str, float]] = [
        (q, HISTORY_WEIGHT) if q == joined else q for q in kb_queries(state, history_limit)
    ]
    answers = [message_text(m) for m in history if isinstance(m, AIMessage)]
    if answers:
        queries.append((f"{answers[-1][:300]} {raw}", HISTORY_WEIGHT))
    rewritten = state.get("kb_query", "")
    if (
        (state.get("path") or [""])[-1] == "rewrite_kb"
        and rewritten in queries
        and not any(f.startswith("Hint from ") for f in state.get("query_feedback", []))
    ):
        # the model-free rewrite (the question's terms) only nudges the ranking: its extra
        # hits are what the grader's threshold, calibrated on first searches, has not seen
        queries[queries.index(rewritten)] = (rewritten, 0.5)
    return queries
