"""Reading the thread's messages: the newest user message, the history before it, and the
query variants a knowledge-base search fuses (:func:`kb_queries`)."""

from __future__ import annotations

from langchain_core.messages import AnyMessage, HumanMessage

from graphs.state import RAGState


def message_text(m: AnyMessage) -> str:
    """The text of a message (the text parts of a multi-part content, joined by spaces)."""
    c = m.content
    return c if isinstance(c, str) else " ".join(str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in c)


def last_user_message(state: RAGState) -> str:
    """Text of the newest human message of the thread ('' if none)."""
    for m in reversed(state.get("messages", [])):
        if isinstance(m, HumanMessage):
            return message_text(m).strip()
    return ""


def history_before_last(state: RAGState, limit: int) -> list[AnyMessage]:
    """Up to ``limit`` messages before the newest human message."""
    msgs = list(state.get("messages", []))
    for i in range(len(msgs) - 1, -1, -1):
        if isinstance(msgs[i], HumanMessage):
            return msgs[max(0, i - limit) : i] if limit else []
    return []


def kb_queries(state: RAGState, history_limit: int = 6) -> list[str]:
    """Query variants for a knowledge-base search, fused by the retriever.

    The user's own words (the raw message, and for a follow-up the previous user message
    joined with it: a cheap signal that keeps follow-ups retrievable even when a small
    model contextualises poorly) and the model's standalone question. The model's
    rewritten keyword query joins only on a search after ``rewrite_kb`` (query feedback
    or a human's hint), where changing the query is the point.
    """
    raw = last_user_message(state)
    variants = [raw]
    prev_user = [message_text(m) for m in history_before_last(state, history_limit) if isinstance(m, HumanMessage)]
    if prev_user:
        variants.append(f"{prev_user[-1]} {raw}")
    variants.append(state.get("question", ""))
    if (state.get("path") or [""])[-1] == "rewrite_kb":
        variants.insert(0, state.get("kb_query", ""))
    return [v for v in dict.fromkeys(v.strip() for v in variants) if v]
