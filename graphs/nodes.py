"""The nodes of the adaptive RAG graph: one documented async method each.

LLM calls on a knowledge-base question answered on the first pass (4 in all):

1. ``route``: contextualises the message with the thread history, picks the route and
   writes the first search query, in one structured call.
2. ``grade_documents``: grades every retrieved chunk in one batched call and extracts the
   relevant facts of each (grading and knowledge extraction fused).
3. ``generate``: the cited answer.
4. ``grade_answer``: the grounding check and the usefulness check in one structured call.

``rewrite_kb`` / ``rewrite_web`` only run on later passes, when there is query feedback.
Budgets come from :class:`graphs.settings.GraphConfig` (config.toml), never from module constants.

Who routes, searches and writes (the chat model, or nobody: the extractive composer) and
how documents and drafts are judged are strategies (:mod:`graphs.composers`,
:mod:`graphs.graders`, in :attr:`GraphDeps.composer` and :attr:`GraphDeps.graders`); the
nodes hold what every strategy shares: budgets, the path, the state updates.

Each node that starts a phase the user sees (searching the knowledge base, searching the
web, writing) says so with :func:`emit_phase`; the runtime shows it without knowing the
node names (:mod:`graphs.state`).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from langgraph.config import get_stream_writer
from langgraph.types import interrupt

from graphs import signals
from graphs.citations import cite_sources
from graphs.composers import Composer, composer_for
from graphs.graders import Graders, graders_for, shape_problem
from graphs.knowledge import KnowledgeBase
from graphs.learned import MEANING_MATCH, LearnedStore, entry_doc, usable_for
from graphs.messages import kb_queries, last_user_message
from graphs.models import ModelCaller
from graphs.offline import OfflineKit
from graphs.offline_router import capabilities
from graphs.settings import GraphConfig
from graphs.state import (
    PER_TURN_DEFAULTS,
    AnswerRoute,
    Doc,
    HelpPayload,
    Phase,
    ProgressEvent,
    RAGState,
    resume_value,
    scope_of,
)
from graphs.web import WebSearch, clip_query

log = logging.getLogger(__name__)

LEARNED_PER_SEARCH = 2  # learned entries offered to the grader per knowledge-base search


@dataclass
class GraphDeps:
    """What the nodes need: the model caller, the knowledge base, web search (or None),
    the budgets, the learned entries (or None), the graders and the composer (None: the
    ones ``config`` asks for, :func:`graphs.graders.graders_for`,
    :func:`graphs.composers.composer_for`)."""

    caller: ModelCaller
    knowledge: KnowledgeBase
    web: WebSearch | None
    config: GraphConfig
    learned: LearnedStore | None = None  # experts' earlier answers, searched with the documents
    graders: Graders | None = None  # how documents and drafts are judged (graphs/graders.py)
    composer: Composer | None = None  # who routes, searches and writes (graphs/composers.py)


def emit_phase(phase: Phase) -> None:
    """Tell the runtime what the run is doing now: a :class:`~graphs.state.ProgressEvent`
    on LangGraph's custom stream (``stream_mode="custom"``; a no-op for other modes)."""
    event: ProgressEvent = {"phase": phase}
    get_stream_writer()(event)


def answer_route(path: list[str]) -> AnswerRoute:
    """How a turn's answer was found, from the nodes it visited (see :data:`AnswerRoute`)."""
    searched = [name for name, node in (("kb", "retrieve"), ("web", "web_search")) if node in path]
    return "+".join(searched) or "direct"  # type: ignore[return-value]


class Nodes:
    """The graph's nodes, bound to their dependencies. Every node returns a partial state
    update and appends its name to ``path``."""

    def __init__(self, deps: GraphDeps):
        self.deps = deps
        self.cfg = deps.config
        # built on first use, shared by the extractive graders and composer
        kit = OfflineKit(deps.knowledge, cross_language=self.cfg.cross_language == "auto", learned=deps.learned)
        self.kit = kit
        self.graders: Graders = deps.graders or graders_for(self.cfg, deps.caller, kit)
        self.composer: Composer = deps.composer or composer_for(
            self.cfg, deps.caller, deps.knowledge, kit, self.graders
        )

    @property
    def web_available(self) -> bool:
        return self.deps.web is not None and self.cfg.max_web_searches > 0

    def off_topic(self, state: RAGState) -> bool:
        """Without a chat model, a new question the knowledge base answered nothing for is about the
        world outside the team (:meth:`graphs.offline_router.OfflineRouter.off_topic`: sports, cooking,
        general coding): it gets the polite reply that it is not about the documents (the ``direct``
        step) instead of a help request paging the experts. Never for a follow-up, a teammate's
        retry hint or a rated answer, nor with a chat model (it routes general knowledge itself);
        nor for a question about the present moment without web search ("who won the final
        yesterday?"), whose help request says it needs current information. The router's verdict is
        the route step's (``state["outside_team"]``): the message is embedded once a turn."""
        if (
            self.cfg.composer != "extractive"
            or self._needs_current(state)
            or state.get("follow_up")
            or state.get("human_action")
            or state.get("verdict") == "downvoted"
        ):
            return False
        return bool(state.get("outside_team"))

    def web_allowed(self, state: RAGState) -> bool:
        """Web search is configured and this turn's scope (its channel) allows it."""
        return self.web_available and scope_of(state)["web"]

    def _step(self, state: RAGState, name: str, calls: int = 0) -> dict[str, Any]:
        """The path and the turn's LLM calls and tokens (``calls`` may be a
        :class:`graphs.models.Calls`, which carries the tokens) after node ``name``."""
        return {
            "path": [*state.get("path", []), name],
            "llm_calls": state.get("llm_calls", 0) + calls,
            "input_tokens": state.get("input_tokens", 0) + getattr(calls, "input_tokens", 0),
            "output_tokens": state.get("output_tokens", 0) + getattr(calls, "output_tokens", 0),
        }

    # ---- turn start --------------------------------------------------------------
    async def start(self, state: RAGState, config: RunnableConfig) -> dict[str, Any]:
        """Reset every per-question field (the history persists) and take this turn's scope
        from the run's ``configurable["scope"]`` (the channel's settings: which sources,
        web search, learned entries; see :func:`scope_of`), with the knowledge it searches (its
        sources, else all of the knowledge base's: what an expert's answer in this thread is
        learned under). A resumed turn keeps its scope."""
        scope = dict((config.get("configurable") or {}).get("scope") or {})
        if scope.get("knowledge") is None:
            searched = scope.get("sources")
            scope["knowledge"] = sorted(searched if searched is not None else self.deps.knowledge.sources)
        return {
            **{k: (list(v) if isinstance(v, list) else v) for k, v in PER_TURN_DEFAULTS.items()},
            "path": ["start"],
            "scope": scope,
        }

    async def route(self, state: RAGState) -> dict[str, Any]:
        """Contextualise the newest message with the history, route it and write the first
        query (:attr:`composer`; one structured LLM call), and keep whether it is read with the
        thread's history (``follow_up``: offline, the later steps read it instead of deciding
        again). ``websearch`` without web search allowed goes to the knowledge base, and ``direct``
        for a message a learned entry is about by meaning (:class:`graphs.learned.LearnedMeaning`)
        too."""
        raw = last_user_message(state)
        routing = await self.composer.route(state)
        decision, calls = routing.decision, routing.calls
        route = self.graders.check_route(raw, decision.route)
        if signals.asks_what_bot_does(raw):  # "what can you do?", "help": the bot says what it is for
            route = "direct"
        if route == "direct" and self.deps.learned is not None and scope_of(state)["learning"]:
            # an expert answered this before, in other words ("wifi password pls"): a chat model that
            # took it for small talk is overruled, as the offline router never takes it for it
            allowed = usable_for(scope_of(state))
            if await asyncio.to_thread(self.kit.learned_meaning.best, raw, allowed) >= MEANING_MATCH:
                route = "vectorstore"
        needs_web = route == "websearch" and not self.web_allowed(state)
        if needs_web:
            route = "vectorstore"
        question = decision.question.strip() or raw
        query = decision.query.strip() or question
        return {
            **self._step(state, "route", calls),
            "route": route,
            "question": question,
            "kb_query": query,
            "web_query": query,
            "needs_web": needs_web,
            "follow_up": routing.follow_up,
            "outside_team": routing.outside_team,
            "small_talk": routing.small_talk,
        }

    async def direct(self, state: RAGState) -> dict[str, Any]:
        """Answer without retrieval (greetings, small talk, general knowledge); a message asking
        what the bot can do gets what it does and what the knowledge base holds
        (:func:`graphs.offline_router.capabilities`), with a chat model or without. An empty
        reply is no answer: the apology is given instead."""
        emit_phase(Phase.WRITING)
        if signals.asks_what_bot_does(last_user_message(state)):
            return {
                **self._step(state, "direct"),
                "generation": capabilities(self.cfg.kb_description),
                "outcome": "direct",
            }
        answer, calls = await self.composer.direct(state)
        if not answer.strip():
            log.warning("the direct answer was empty: apologising")
            return {**self._step(state, "direct", calls), "generation": self.cfg.apology, "outcome": "apology"}
        return {**self._step(state, "direct", calls), "generation": answer, "outcome": "direct"}

    async def _rewrite(self, state: RAGState, target: str, name: str, field: str) -> dict[str, Any]:
        query, calls = await self.composer.rewrite(state, target)
        return {**self._step(state, name, calls), field: query}

    async def rewrite_kb(self, state: RAGState) -> dict[str, Any]:
        """Rewrite the knowledge-base query using the accumulated query feedback."""
        emit_phase(Phase.SEARCHING)
        target = f"the team knowledge base ({self.cfg.kb_description})"
        return await self._rewrite(state, target, "rewrite_kb", "kb_query")

    async def rewrite_web(self, state: RAGState) -> dict[str, Any]:
        """Rewrite the web search query using the accumulated query feedback."""
        emit_phase(Phase.WEB)
        return await self._rewrite(state, "a web search engine", "rewrite_web", "web_query")

    # ---- search ------------------------------------------------------------------
    async def retrieve(self, state: RAGState) -> dict[str, Any]:
        """Hybrid search of the knowledge base with the query variants of :func:`kb_queries`,
        restricted to the turn's sources (:func:`scope_of`); the best learned entries (experts'
        earlier answers, :mod:`graphs.learned`) when the turn's scope allows them: those about the
        message by meaning first, those sharing only its words after the documents."""
        emit_phase(Phase.SEARCHING)
        queries = kb_queries(state, self.cfg.history_messages)
        sources = scope_of(state)["sources"]  # a channel restricted to some sources never sees others
        docs = await self.composer.search(state, queries, self.cfg.k, sources)
        scope = scope_of(state)
        documents = list(docs)
        if self.deps.learned is not None and scope["learning"]:
            # only those learned under knowledge this turn searches (and, in a channel restricted to
            # some sources, learned in it): an answer about another folder's product is no answer here
            about, sharing = await asyncio.to_thread(
                self.kit.learned_meaning.search,
                last_user_message(state),
                queries,
                LEARNED_PER_SEARCH * 4,
                usable_for(scope),
            )
            about = about[:LEARNED_PER_SEARCH]
            sharing = sharing[: LEARNED_PER_SEARCH - len(about)]
            # an expert's answer to this question leads; one that only shares its words (an answer
            # about Slack for any question about Slack) comes after the documents, graded like them
            cap = self.cfg.max_document_characters
            docs = [entry_doc(e, cap) for e in about] + documents + [entry_doc(e, cap) for e in sharing]
        update = {
            **self._step(state, "retrieve"),
            "source": "kb",
            "retrieved": docs,
            "generations": 0,
            "kb_searches": state.get("kb_searches", 0) + 1,
            "queries": [*state.get("queries", []), queries[0] if queries else ""],
        }
        if not state.get("first_retrieval"):  # documents only: eval recall measures the knowledge base
            update["first_retrieval"] = [d["location"] for d in documents]
        return update

    async def web_search(self, state: RAGState) -> dict[str, Any]:
        """Search the web (Tavily); failures and empty results count as no documents.
        The query is cut to the search API's limit (:func:`graphs.web.clip_query`)."""
        emit_phase(Phase.WEB)
        query = clip_query(state.get("web_query") or state.get("question") or last_user_message(state))
        docs = await self.deps.web.search(query) if self.deps.web else []
        return {
            **self._step(state, "web_search"),
            "source": "web",
            "retrieved": docs,
            "generations": 0,
            "web_searches": state.get("web_searches", 0) + 1,
            "queries": [*state.get("queries", []), query],
        }

    async def grade_documents(self, state: RAGState) -> dict[str, Any]:
        """Grade the retrieved documents (:attr:`graders`), keep the relevant ones with
        their extracted facts; record query feedback when none is relevant."""
        retrieved = list(state.get("retrieved", []))
        query = (state.get("queries") or [""])[-1]
        if not retrieved:
            return {
                **self._step(state, "grade_documents"),
                "documents": [],
                "query_feedback": [
                    *state.get("query_feedback", []),
                    f"The {state.get('source')} search for '{query}' found nothing.",
                ],
            }
        grades, calls = await self.graders.grade_documents(state, retrieved)
        kept: list[Doc] = []
        for g in grades.documents:
            if g.relevant and 1 <= g.id <= len(retrieved) and all(k["id"] != retrieved[g.id - 1]["id"] for k in kept):
                kept.append(Doc(**{**retrieved[g.id - 1], "facts": g.facts.strip()[:600]}))
        update = {**self._step(state, "grade_documents", calls), "documents": kept}
        if not kept:
            reason = grades.feedback.strip() or "none of the results was relevant"
            update["query_feedback"] = [
                *state.get("query_feedback", []),
                f"The {state.get('source')} search for '{query}': {reason}",
            ]
        log.info("graded %d documents: %d relevant", len(retrieved), len(kept))
        return update

    # ---- answer ------------------------------------------------------------------
    async def generate(self, state: RAGState) -> dict[str, Any]:
        """Write a cited answer from the relevant documents and the generation feedback
        (:attr:`composer`)."""
        emit_phase(Phase.WRITING)
        answer, calls = await self.composer.generate(state)
        return {
            **self._step(state, "generate", calls),
            "generation": answer,
            "generations": state.get("generations", 0) + 1,
        }

    async def grade_answer(self, state: RAGState) -> dict[str, Any]:
        """Check grounding and usefulness (:attr:`graders`); record generation feedback
        (not grounded) or query feedback (grounded but not useful). An empty draft
        is a failed draft (verdict ``empty``, no model call): it counts against
        ``max_generations`` like an ungrounded one and is never posted. A chat model's draft
        whose shape is wrong (:func:`graphs.graders.shape_problem`: far past ``answer_characters``,
        a step cut with "…") is sent back the same way (verdict ``misshapen``), before any
        model call."""
        if not state.get("generation", "").strip():
            return {
                **self._step(state, "grade_answer"),
                "verdict": "empty",
                "generation_feedback": [*state.get("generation_feedback", []), "the draft was empty: write the answer"],
            }
        quoted = self.cfg.composer == "extractive"  # quotes are shaped by construction
        problem = "" if quoted else shape_problem(state["generation"], self.cfg.answer_characters)
        if problem:
            # the draft's shape is the writer's fault, not the documents': the writer redrafts
            # from the same documents, told why (a new search would not make it shorter)
            return {
                **self._step(state, "grade_answer"),
                "verdict": "misshapen",
                "generation_feedback": [*state.get("generation_feedback", []), problem],
            }
        grade, calls = await self.graders.grade_answer(state)
        update = {**self._step(state, "grade_answer", calls)}
        if not grade.grounded:
            update["verdict"] = "hallucination"
            reason = grade.feedback.strip() or "the draft makes claims the sources do not support"
            update["generation_feedback"] = [*state.get("generation_feedback", []), reason]
        elif not grade.useful:
            update["verdict"] = "not_useful"
            query = (state.get("queries") or [""])[-1]
            reason = grade.feedback.strip() or "the answer missed the point"
            update["query_feedback"] = [
                *state.get("query_feedback", []),
                f"Documents found for '{query}' did not answer it: {reason}",
            ]
        else:
            update["verdict"] = "useful"
        return update

    # ---- endings -----------------------------------------------------------------
    async def human_review(self, state: RAGState) -> dict[str, Any]:
        """Pause with a LangGraph interrupt and ask humans. Nothing happens before
        ``interrupt()`` (the node re-runs from its first line on resume).

        The interrupt's value is a :class:`~graphs.state.HelpPayload`, the resume value a
        :class:`~graphs.state.ResumeValue`. ``retry`` turns the hint into query feedback
        and gives a fresh budget.

        Raises:
            ContractError: the resume value is not a ``ResumeValue``.
        """
        payload: HelpPayload = {
            "question": state.get("question") or last_user_message(state),
            "reason": self._review_reason(state),
            "attempts": list(state.get("queries", [])),
        }
        value = resume_value(interrupt(payload))
        action, text, by = value["action"], value["text"].strip(), value["by"]
        step = self._step(state, "human_review")
        if action == "answer" and text:
            return {**step, "generation": text, "outcome": "human", "answered_by": by, "human_action": "answer"}
        if action == "retry":
            return {
                **step,
                "human_action": "retry",
                "kb_searches": 0,
                "web_searches": 0,
                "generations": 0,
                "query_feedback": [f"Hint from {by or 'a teammate'}: {text}"] if text else [],
                "generation_feedback": [],
            }
        return {**step, "human_action": "dismiss"}

    @staticmethod
    def _needs_current(state: RAGState) -> bool:
        """The turn wanted the web, had none, and its question asks about the present moment
        (:func:`graphs.signals.asks_for_now`: "is the API down right now?"). A question the
        router sent to the web only because it reads like news ("do I need a GPU?", "where can I
        find the pricing page?") is not said to need current information: that would tell the
        asker something untrue about their question."""
        return (
            bool(state.get("needs_web"))
            and not state.get("web_searches")
            and signals.asks_for_now(last_user_message(state))
        )

    def _review_reason(self, state: RAGState) -> str:
        """Why the budget ran out, in one line for the help request."""
        if state.get("verdict") == "downvoted":
            return state.get("review_note") or "a teammate marked the answer as wrong"
        if self._needs_current(state):
            # say what the bot cannot do, rather than that it found "nothing relevant"
            why = "web search is not configured" if not self.web_available else "web search is off in this channel"
            return (
                f"it needs current information, which I cannot check ({why}), and the knowledge base "
                f"({self.cfg.kb_description}) does not cover it: could an expert answer?"
            )
        searched = [f"the knowledge base ({state.get('kb_searches', 0)} searches)"]
        if state.get("web_searches"):
            searched.append(f"the web ({state['web_searches']} searches)")
        elif not self.web_available:
            searched.append("web search is not configured")
        elif not self.web_allowed(state):
            searched.append("web search is off in this channel")
        if state.get("verdict") == "hallucination":
            return f"drafts were not supported by the sources; searched {', '.join(searched)}"
        if state.get("verdict") == "empty":
            return f"the model's drafts were empty; searched {', '.join(searched)}"
        if state.get("verdict") == "misshapen":
            return f"the model's drafts were too long or cut steps short; searched {', '.join(searched)}"
        if state.get("verdict") == "not_useful":
            return f"the documents found did not answer it; searched {', '.join(searched)}"
        return f"nothing relevant found; searched {', '.join(searched)}"

    async def apology(self, state: RAGState) -> dict[str, Any]:
        """Give up politely; a question that needed current information, with no web search
        to check it, says so first (not a search that "found nothing")."""
        text = self.cfg.apology
        if self._needs_current(state) and state.get("human_action") != "dismiss":
            text = f"I can't check current information here (no web search), and the documents don't cover it. {text}"
        return {**self._step(state, "apology"), "generation": text, "outcome": "apology", "sources": []}

    async def finish(self, state: RAGState) -> dict[str, Any]:
        """Record the answer in the history, set its sources and how it was found
        (``answer_route``, ``drafts``), drop heavy per-turn fields."""
        outcome = state.get("outcome") or "answer"
        text = state.get("generation", "")
        sources: list[dict[str, str]] = []
        if outcome == "answer":
            text, sources = cite_sources(text, state.get("documents", []))
        path = state.get("path", [])
        return {
            **self._step(state, "finish"),
            "outcome": outcome,
            "sources": sources,
            "generation": text,
            "answer_route": answer_route(path),
            "drafts": path.count("generate"),
            "messages": [AIMessage(text)],
            "documents": [],
            "retrieved": [],
        }
