"""build_graph(deps) -> the compiled adaptive RAG graph. Wiring reads top to bottom.

    START -> start -> route -> direct ---------------------------------------> finish -> END
                            -> retrieve -> grade_documents -> generate -> grade_answer
                            -> web_search -^        |  none relevant          | useful -> finish
                                                    v                         | bad draft -> generate (budget)
                                      rewrite_kb / rewrite_web / human_review | not useful -> next search
    human_review --answer--> finish; --retry--> rewrite_kb; --dismiss--> apology -> finish

"Next search" (corrective RAG): the knowledge base again while its budget lasts, then the
web (when configured) while its budget lasts, then a human (interrupt), or the apology
when human review is off; without a chat model, a question about the world outside the team
(sports, cooking, general coding) gets the polite ``direct`` reply there instead. A question
routed to the web that the web cannot answer tries the knowledge base (while its budget lasts)
before a human. A bad draft is an ungrounded, empty or misshapen one (too long, a step cut
short): it is rewritten from the same documents.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeAlias

from langchain_core.messages import AnyMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from graphs.nodes import GraphDeps, Nodes
from graphs.settings import worst_case_steps  # noqa: F401 - where it was defined before
from graphs.state import RAGState

#: The compiled graph: state, input and output are :class:`RAGState`; no context schema.
RAGGraph: TypeAlias = CompiledStateGraph[RAGState, Any, RAGState, RAGState]


def _next_search(nodes: Nodes, state: RAGState) -> str:
    """Where to go when the documents were not good enough: the knowledge base while its
    budget lasts (a plain search when the question went to the web first, a rewritten
    query after a knowledge-base search), then the web while its budget lasts, then a
    human or the apology."""
    cfg = nodes.cfg
    if state.get("verdict") == "downvoted":  # a teammate asked the experts about a rated answer
        return "human_review" if cfg.human_review else "apology"
    kb_left = state.get("kb_searches", 0) < cfg.max_kb_searches
    if state.get("source") == "kb" and kb_left:
        return "rewrite_kb"
    if state.get("source") == "web" and kb_left:
        return "retrieve" if state.get("kb_searches", 0) == 0 else "rewrite_kb"
    if nodes.web_allowed(state) and state.get("web_searches", 0) < cfg.max_web_searches:
        return "rewrite_web"
    return "human_review" if cfg.human_review else "apology"


def build_graph(deps: GraphDeps, checkpointer: BaseCheckpointSaver | None = None) -> RAGGraph:
    """Build and compile the graph.

    Args:
        deps: model caller, knowledge base, web search and budgets (:class:`GraphDeps`).
        checkpointer: e.g. an AsyncSqliteSaver; required for follow-ups and interrupts.

    Returns:
        The compiled LangGraph graph (``ainvoke``/``astream`` with
        ``{"configurable": {"thread_id": ...}}``).
    """
    nodes = Nodes(deps)
    g = StateGraph(RAGState)
    for name in (
        "start",
        "route",
        "direct",
        "rewrite_kb",
        "rewrite_web",
        "retrieve",
        "web_search",
        "grade_documents",
        "generate",
        "grade_answer",
        "human_review",
        "apology",
        "finish",
    ):
        g.add_node(name, getattr(nodes, name))

    g.add_edge(START, "start")
    g.add_edge("start", "route")

    # Every path function is a coroutine: LangGraph runs a plain function on a thread of the
    # default executor in an async run (three thread hops per question in a profile).
    async def after_route(s: RAGState) -> str:
        return {"direct": "direct", "websearch": "web_search"}.get(s["route"], "retrieve")

    g.add_conditional_edges("route", after_route, ["direct", "web_search", "retrieve"])
    g.add_edge("direct", "finish")
    g.add_edge("rewrite_kb", "retrieve")
    g.add_edge("rewrite_web", "web_search")
    g.add_edge("retrieve", "grade_documents")
    g.add_edge("web_search", "grade_documents")

    async def give_up(s: RAGState) -> str:
        """:func:`_next_search`; at its end a question about the world outside the team gets the
        polite reply (``direct``) rather than the experts (:meth:`Nodes.off_topic`)."""
        target = _next_search(nodes, s)
        if target in ("human_review", "apology") and nodes.off_topic(s):
            return "direct"
        return target

    async def after_grading(s: RAGState) -> str:
        return "generate" if s.get("documents") else await give_up(s)

    g.add_conditional_edges(
        "grade_documents",
        after_grading,
        ["generate", "retrieve", "rewrite_kb", "rewrite_web", "human_review", "apology", "direct"],
    )
    g.add_edge("generate", "grade_answer")

    async def after_answer(s: RAGState) -> str:
        verdict = s.get("verdict")
        if verdict == "useful":
            return "finish"
        if verdict in ("hallucination", "empty", "misshapen") and s.get("generations", 0) < nodes.cfg.max_generations:
            return "generate"  # an ungrounded, empty or misshapen draft: write another from the same documents
        return await give_up(s)

    g.add_conditional_edges(
        "grade_answer",
        after_answer,
        ["finish", "generate", "retrieve", "rewrite_kb", "rewrite_web", "human_review", "apology", "direct"],
    )

    async def after_review(s: RAGState) -> str:
        return {"answer": "finish", "retry": "rewrite_kb"}.get(s.get("human_action", ""), "apology")

    g.add_conditional_edges("human_review", after_review, ["finish", "rewrite_kb", "apology"])
    g.add_edge("apology", "finish")
    g.add_edge("finish", END)
    return g.compile(checkpointer=checkpointer)


async def seed_history(graph: Any, config: RunnableConfig, messages: Sequence[AnyMessage]) -> None:
    """Write earlier turns into a thread as if they had been asked and answered (eval
    follow-ups): the next question continues after them.

    Args:
        graph: the compiled graph (with a checkpointer).
        config: the thread's run config (``{"configurable": {"thread_id": ...}}``).
        messages: the turns, oldest first (Human/AI messages).
    """
    await graph.aupdate_state(config, {"messages": list(messages)}, as_node="finish")


async def ask_experts(graph: Any, config: RunnableConfig, question: str, note: str) -> None:
    """Make the thread's next run (``graph.astream(None, config)``) ask the experts about
    ``question`` at once (``human_review``): a teammate marked its answer as wrong.

    Args:
        graph: the compiled graph (with a checkpointer).
        config: the thread's run config.
        question: the question the answer was about.
        note: why, one line (shown as the help request's reason).
    """
    await graph.aupdate_state(
        config,
        {
            "question": question,
            "documents": [],
            "retrieved": [],
            "verdict": "downvoted",
            "review_note": note,
            "queries": [],
            "path": ["downvoted"],
        },
        as_node="grade_documents",
    )
