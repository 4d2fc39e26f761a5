"""Graph state of the adaptive RAG graph.

``messages`` is the thread's history (``add_messages`` reducer: it persists across
turns). Every other field belongs to one question and is reset by the ``start`` node at
the beginning of each turn (plain replace semantics, no accumulating reducers, so a
reset really resets). Heavy fields (documents, knowledge) are cleared when a turn ends,
so a long-lived thread's checkpoints stay small.
"""

from __future__ import annotations

from typing import Annotated, Any, TypedDict

from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages


class Doc(TypedDict, total=False):
    """One retrieved chunk or web result (a plain dict so checkpoints serialise it)."""

    id: str  # chunk id or URL
    text: str  # chunk text (at most graph.max_document_characters)
    location: str  # file path relative to its source folder, or URL
    title: str  # heading path ("Guide > Install") or page title
    score: float  # fused rank score, higher is better
    facts: str  # facts extracted by the document grader
    kind: str  # "learned" for a teammate's earlier answer (graphs/learned.py); absent for documents


class RAGState(TypedDict, total=False):
    """State of one thread. Per-turn fields are listed in :data:`PER_TURN_DEFAULTS`."""

    messages: Annotated[list[AnyMessage], add_messages]
    question: str  # standalone question (contextualised)
    route: str  # vectorstore | websearch | direct
    source: str  # source searched last: kb | web
    kb_query: str
    web_query: str
    queries: list[str]  # every search query tried this turn
    documents: list[Doc]  # relevant documents kept for generation
    retrieved: list[Doc]  # documents of the last search, before grading
    first_retrieval: list[str]  # locations of the first knowledge-base search (for eval)
    generation: str  # last draft
    sources: list[dict[str, str]]  # cited sources of the final answer
    query_feedback: list[str]
    generation_feedback: list[str]
    generations: int
    kb_searches: int
    web_searches: int
    llm_calls: int
    path: list[str]  # nodes visited this turn, in order
    outcome: str  # answer | direct | human | apology
    answered_by: str
    verdict: str  # last answer grade: useful | hallucination | not_useful
    human_action: str  # last human resume action: answer | retry | dismiss
    human_retries: int
    review_note: str  # why a teammate asked the experts about an answer (a 👎 escalated)
    scope: dict[str, Any]  # what this turn may use (the channel's settings): sources, web, learning


PER_TURN_DEFAULTS: dict[str, Any] = {
    "question": "",
    "route": "",
    "source": "",
    "kb_query": "",
    "web_query": "",
    "queries": [],
    "documents": [],
    "retrieved": [],
    "first_retrieval": [],
    "generation": "",
    "sources": [],
    "query_feedback": [],
    "generation_feedback": [],
    "generations": 0,
    "kb_searches": 0,
    "web_searches": 0,
    "llm_calls": 0,
    "path": [],
    "outcome": "",
    "answered_by": "",
    "verdict": "",
    "human_action": "",
    "human_retries": 0,
    "review_note": "",
    "scope": {},
}
