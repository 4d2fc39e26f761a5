"""The nodes of the adaptive RAG graph: one documented async method each.

LLM calls on a knowledge-base question answered on the first pass (4 in all):

1. ``route``: contextualises the message with the thread history, picks the route and
   writes the first search query, in one structured call.
2. ``grade_documents``: grades every retrieved chunk in one batched call and extracts the
   relevant facts of each (grading and knowledge extraction fused).
3. ``generate``: the cited answer.
4. ``grade_answer``: the grounding check and the usefulness check in one structured call.

``rewrite_kb`` / ``rewrite_web`` only run on later passes, when there is query feedback.
Budgets come from :class:`GraphConfig` (config.toml), never from module constants.
"""

from __future__ import annotations

import asyncio
import logging
import re
from dataclasses import dataclass
from typing import Any, Literal

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.types import interrupt
from pydantic import BaseModel, Field

from graphs import prompts, signals
from graphs.extractive import Extractive, TextEmbedder
from graphs.knowledge import KnowledgeBase
from graphs.learned import LearnedStore, entry_doc
from graphs.models import ModelCaller
from graphs.offline_router import OfflineRouter, canned_reply
from graphs.state import PER_TURN_DEFAULTS, Doc, RAGState
from graphs.web import WebSearch, clip_query

log = logging.getLogger(__name__)

LEARNED_PER_SEARCH = 2  # learned entries offered to the grader per knowledge-base search


@dataclass
class GraphConfig:
    """Budgets and sizes of the graph, from config.toml ``[graph]`` and ``[knowledge]``.

    Attributes:
        k: chunks retrieved per knowledge-base search.
        max_generations: drafts per set of documents before searching again.
        max_kb_searches / max_web_searches: searches per source per turn (and per human retry).
        history_messages: earlier messages shown to the router.
        max_document_characters: each document is cut to this many characters in prompts.
        human_review: pause for a human when budgets are spent (else apologise).
        kb_description: what the knowledge base holds (helps the router).
        apology: text of the apology.
    """

    k: int = 5
    max_generations: int = 2
    max_kb_searches: int = 2
    max_web_searches: int = 1
    history_messages: int = 6
    max_document_characters: int = 1500
    human_review: bool = True
    kb_description: str = "the team's documentation"
    apology: str = "Sorry, I couldn't find a reliable answer to that."
    graders: str = "llm"  # "llm" or "lexical" (graphs/signals.py, for models too small to judge)
    relevance_threshold: float = 0.3  # lexical: share of question terms a relevant document holds
    grounding_threshold: float = 0.6  # lexical: share of answer terms found in the sources
    # "llm" (the chat model routes and writes) or "extractive" (no chat-model call at all:
    # graphs/offline_router.py routes, graphs/extractive.py grades and composes; the
    # graders are then lexical/embedding whatever ``graders`` says). Also the fallback
    # when the offline model's backend is broken.
    composer: str = "llm"


@dataclass
class GraphDeps:
    """What the nodes need: the model caller, the knowledge base, web search (or None)."""

    caller: ModelCaller
    knowledge: KnowledgeBase
    web: WebSearch | None
    config: GraphConfig
    learned: LearnedStore | None = None  # experts' earlier answers, searched with the documents


# ---- structured outputs ----------------------------------------------------------------
class RouteDecision(BaseModel):
    question: str = Field(description="standalone question")
    route: Literal["vectorstore", "websearch", "direct"]
    query: str = Field(description="search keywords")


class RewrittenQuery(BaseModel):
    query: str


class DocGrade(BaseModel):
    id: int
    relevant: bool
    facts: str = ""


class DocGrades(BaseModel):
    documents: list[DocGrade]
    feedback: str = ""


class AnswerGrade(BaseModel):
    grounded: bool
    useful: bool
    feedback: str = ""


def _text(m: AnyMessage) -> str:
    c = m.content
    return c if isinstance(c, str) else " ".join(str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in c)


def last_user_message(state: RAGState) -> str:
    """Text of the newest human message of the thread ('' if none)."""
    for m in reversed(state.get("messages", [])):
        if isinstance(m, HumanMessage):
            return _text(m).strip()
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
    prev_user = [_text(m) for m in history_before_last(state, history_limit) if isinstance(m, HumanMessage)]
    if prev_user:
        variants.append(f"{prev_user[-1]} {raw}")
    variants.append(state.get("question", ""))
    if (state.get("path") or [""])[-1] == "rewrite_kb":
        variants.insert(0, state.get("kb_query", ""))
    return [v for v in dict.fromkeys(v.strip() for v in variants) if v]


def _format_docs(docs: list[Doc], limit: int, with_facts: bool = False, only: set[int] | None = None) -> str:
    """Numbered documents (``[n] title (location)`` then the text, at most ``limit``
    characters); ``only``: the numbers to include (the others are left out, numbers kept)."""
    parts = []
    for i, d in enumerate(docs, start=1):
        if only is not None and i not in only:
            continue
        head = f"[{i}] {d.get('title') or ''} ({d.get('location', '')})".replace(" ()", "")
        body = d.get("text", "")[:limit]
        if with_facts and d.get("facts"):
            body = f"Key facts: {d['facts']}\n{body}"
        parts.append(f"{head}\n{body}")
    return "\n\n".join(parts)


_CODE = re.compile(r"```.*?(?:```|$)|`[^`\n]*`", re.S)
_CITATION = re.compile(r"\[(\d+(?:\s*,\s*\d+)*)\]")


def cite_sources(generation: str, docs: list[Doc]) -> tuple[str, list[dict[str, str]]]:
    """Number the sources by file, in citation order, and renumber the answer's
    citations (``[n]`` or ``[n, m]``, ``n`` = position in ``docs``) to match, so ``[k]``
    in the text is the k-th listed source even when two cited chunks come from one file.
    Code (fenced or inline) is left untouched.

    Returns ``(text, sources)``; with no valid citation, every document is listed and
    the text is unchanged. Citations of documents that do not exist are dropped.
    """
    order: list[str] = []
    sources: dict[str, dict[str, str]] = {}

    def number(match: re.Match) -> str:
        numbers: list[int] = []
        for part in match.group(1).split(","):
            i = int(part) - 1
            if not 0 <= i < len(docs):
                continue
            loc = docs[i]["location"]
            if loc not in sources:
                order.append(loc)
                sources[loc] = {"title": docs[i].get("title") or loc, "location": loc}
            if order.index(loc) + 1 not in numbers:
                numbers.append(order.index(loc) + 1)
        return "".join(f"[{n}]" for n in numbers)

    pieces, last = [], 0
    for code in _CODE.finditer(generation):  # renumber prose only
        pieces += [_CITATION.sub(number, generation[last:code.start()]), code.group(0)]
        last = code.end()
    pieces.append(_CITATION.sub(number, generation[last:]))
    if not order:
        for d in docs:
            sources.setdefault(d["location"], {"title": d.get("title") or d["location"], "location": d["location"]})
        return generation, list(sources.values())
    text = re.sub(r"(\[\d+\])(\1)+", r"\1", "".join(pieces))  # "[1][1]" after merging -> "[1]"
    return text, [sources[loc] for loc in order]


def cited_numbers(generation: str, count: int) -> set[int]:
    """The document numbers (1..``count``) a draft cites as ``[n]`` or ``[n, m]`` outside code."""
    prose = _CODE.sub(" ", generation)
    return {n for m in _CITATION.finditer(prose) for n in map(int, m.group(1).split(",")) if 1 <= n <= count}


def scope_of(state: RAGState) -> dict[str, Any]:
    """This turn's scope with its defaults: ``sources`` (resolved source paths the
    knowledge base may search, None for all), ``web`` and ``learning`` (bools), and the
    ``platform`` and ``channel`` it runs in (a channel restricted to some sources uses only
    the learned entries learned in it)."""
    scope = state.get("scope") or {}
    return {"sources": scope.get("sources"), "web": scope.get("web", True) is not False,
            "learning": scope.get("learning", True) is not False, "platform": str(scope.get("platform") or ""),
            "channel": str(scope.get("channel") or "")}


class Nodes:
    """The graph's nodes, bound to their dependencies. Every node returns a partial state
    update and appends its name to ``path``."""

    def __init__(self, deps: GraphDeps):
        self.deps = deps
        self.cfg = deps.config
        self._extractive: Extractive | None = None
        self._router: OfflineRouter | None = None

    @property
    def offline(self) -> bool:
        """Extractive composer: no chat-model call in any node."""
        return self.cfg.composer == "extractive"

    @property
    def extractive(self) -> Extractive:
        """The extractive grader/composer over the knowledge base's embeddings (built on first use)."""
        if self._extractive is None:
            self._extractive = Extractive(TextEmbedder(self.deps.knowledge.embeddings), self.deps.knowledge)
            self._router = OfflineRouter(self._extractive.embedder, self.deps.knowledge)
        return self._extractive

    @property
    def offline_router(self) -> OfflineRouter:
        self.extractive  # noqa: B018 - builds both
        assert self._router is not None
        return self._router

    def _offline_questions(self, state: RAGState) -> list[str]:
        """Question variants the extractive graders and composer score against: the
        user's words (the message; for a follow-up also the previous user message joined
        with it), never a rewritten keyword query (documents must answer the question)."""
        raw = last_user_message(state)
        prev = [_text(m) for m in history_before_last(state, self.cfg.history_messages) if isinstance(m, HumanMessage)]
        return [raw, f"{prev[-1]} {raw}"] if prev else [raw]

    def _offline_search_queries(self, state: RAGState) -> list[str | tuple[str, float]]:
        """Search variants without a model: :func:`kb_queries` plus, for a follow-up, the
        previous answer's opening joined with the message (it names what "it" is; on the
        dev set follow-up recall@5 0.70 -> 1.0, bench/README.md), as ``(query, weight)``
        where the weight is not 1."""
        queries: list[str | tuple[str, float]] = list(kb_queries(state, self.cfg.history_messages))
        answers = [_text(m) for m in history_before_last(state, self.cfg.history_messages) if isinstance(m, AIMessage)]
        if answers:
            queries.append((f"{answers[-1][:300]} {last_user_message(state)}", 1.0))
        rewritten = state.get("kb_query", "")
        if (state.get("path") or [""])[-1] == "rewrite_kb" and rewritten in queries and \
                not any(f.startswith("Hint from ") for f in state.get("query_feedback", [])):
            # the model-free rewrite (the question's terms) only nudges the ranking: its extra
            # hits are what the grader's threshold, calibrated on first searches, has not seen
            queries[queries.index(rewritten)] = (rewritten, 0.5)
        return queries

    @property
    def web_available(self) -> bool:
        return self.deps.web is not None and self.cfg.max_web_searches > 0

    def web_allowed(self, state: RAGState) -> bool:
        """Web search is configured and this turn's scope (its channel) allows it."""
        return self.web_available and scope_of(state)["web"]

    def _step(self, state: RAGState, name: str, calls: int = 0) -> dict[str, Any]:
        return {"path": [*state.get("path", []), name], "llm_calls": state.get("llm_calls", 0) + calls}

    # ---- turn start --------------------------------------------------------------
    async def start(self, state: RAGState, config: RunnableConfig) -> dict[str, Any]:
        """Reset every per-question field (the history persists) and take this turn's scope
        from the run's ``configurable["scope"]`` (the channel's settings: which sources,
        web search, learned entries; see :func:`scope_of`). A resumed turn keeps its scope."""
        scope = dict((config.get("configurable") or {}).get("scope") or {})
        return {**{k: (list(v) if isinstance(v, list) else v) for k, v in PER_TURN_DEFAULTS.items()}, "path": ["start"],
                "scope": scope}

    async def route(self, state: RAGState) -> dict[str, Any]:
        """Contextualise the newest message with the history, route it and write the first
        query (one structured LLM call). Falls back to the knowledge base on bad output;
        ``websearch`` without web search configured goes to the knowledge base too."""
        raw = last_user_message(state)
        history = history_before_last(state, self.cfg.history_messages)
        if self.offline:
            route, sig = await asyncio.to_thread(self.offline_router.route, raw, bool(history))
            if route == "websearch" and not self.web_allowed(state):
                route = "vectorstore"
            log.info("offline route %s (kb %.2f, small talk %.2f, general %.2f, current %.2f)",
                     route, sig.kb, sig.small_talk, sig.general, sig.current)
            return {**self._step(state, "route"), "route": route, "question": raw, "kb_query": raw, "web_query": raw}
        convo = "\n".join(
            f"{'User' if isinstance(m, HumanMessage) else 'Assistant'}: {_text(m)[:600]}" for m in history
        ) or "(none)"
        default = RouteDecision(question=raw, route="vectorstore", query=raw)
        decision, calls, _ = await self.deps.caller.structured(
            prompts.ROUTE.format(kb_description=self.cfg.kb_description),
            f"Conversation so far:\n{convo}\n\nNew message: {raw}",
            RouteDecision, default,
        )
        route = decision.route
        if self.cfg.graders == "lexical":
            # a model too small to judge: its "direct" is trusted only for greetings and thanks,
            # and a greeting never costs a search
            route = "direct" if signals.is_small_talk(raw) else ("vectorstore" if route == "direct" else route)
        if route == "websearch" and not self.web_allowed(state):
            route = "vectorstore"
        question = decision.question.strip() or raw
        query = decision.query.strip() or question
        return {**self._step(state, "route", calls), "route": route, "question": question,
                "kb_query": query, "web_query": query}

    async def direct(self, state: RAGState) -> dict[str, Any]:
        """Answer without retrieval (greetings, small talk, general knowledge). An empty
        reply is no answer: the apology is given instead."""
        history = history_before_last(state, self.cfg.history_messages)
        if self.offline:
            raw = last_user_message(state)
            small_talk = await asyncio.to_thread(self.offline_router.is_small_talk, raw)
            return {**self._step(state, "direct"), "outcome": "direct",
                    "generation": canned_reply(raw, self.cfg.kb_description, small_talk)}
        answer, calls = await self.deps.caller.complete(prompts.DIRECT, last_user_message(state), history)
        if not answer.strip():
            log.warning("the direct answer was empty: apologising")
            return {**self._step(state, "direct", calls), "generation": self.cfg.apology, "outcome": "apology"}
        return {**self._step(state, "direct", calls), "generation": answer, "outcome": "direct"}

    async def _rewrite(self, state: RAGState, target: str, name: str, field: str) -> dict[str, Any]:
        if self.offline:  # no model: search with a human's hint, else the question's own terms
            hints = [f.split(": ", 1)[1] for f in state.get("query_feedback", []) if f.startswith("Hint from ")]
            question = state.get("question") or last_user_message(state)
            query = " ".join([*hints[-1:], question]) if hints else " ".join(sorted(signals.terms(question)))
            return {**self._step(state, name), field: query or question}
        tried = "\n".join(f"- {q}" for q in state.get("queries", [])) or "- (none)"
        feedback = "\n".join(f"- {f}" for f in state.get("query_feedback", [])) or "- (none)"
        default = RewrittenQuery(query=state.get("question") or last_user_message(state))
        out, calls, _ = await self.deps.caller.structured(
            prompts.REWRITE.format(target=target),
            f"Question: {state.get('question')}\nEarlier queries:\n{tried}\nFeedback:\n{feedback}",
            RewrittenQuery, default,
        )
        return {**self._step(state, name, calls), field: out.query.strip() or default.query}

    async def rewrite_kb(self, state: RAGState) -> dict[str, Any]:
        """Rewrite the knowledge-base query using the accumulated query feedback."""
        return await self._rewrite(state, "the team knowledge base (" + self.cfg.kb_description + ")", "rewrite_kb", "kb_query")

    async def rewrite_web(self, state: RAGState) -> dict[str, Any]:
        """Rewrite the web search query using the accumulated query feedback."""
        return await self._rewrite(state, "a web search engine", "rewrite_web", "web_query")

    # ---- search ------------------------------------------------------------------
    async def retrieve(self, state: RAGState) -> dict[str, Any]:
        """Hybrid search of the knowledge base with the query variants of :func:`kb_queries`,
        restricted to the turn's sources (:func:`scope_of`); the best learned entries (experts'
        earlier answers, :mod:`graphs.learned`) come first when the turn's scope allows them."""
        queries = kb_queries(state, self.cfg.history_messages)
        sources = scope_of(state)["sources"]  # a channel restricted to some sources never sees others
        if self.offline:  # more candidates, reranked by embeddings, widened to their sections
            docs = await asyncio.to_thread(self.extractive.retrieve, self._offline_search_queries(state), self.cfg.k,
                                           sources=sources)
        else:
            docs = await asyncio.to_thread(self.deps.knowledge.search, queries, self.cfg.k, sources=sources)
        scope = scope_of(state)
        documents = list(docs)
        if self.deps.learned is not None and scope["learning"]:
            entries = await asyncio.to_thread(self.deps.learned.search, queries, LEARNED_PER_SEARCH * 4)
            if sources is not None:  # a restricted channel uses only what was learned in it
                entries = [e for e in entries if (e.platform, e.channel) == (scope["platform"], scope["channel"])]
            docs = [entry_doc(e, self.cfg.max_document_characters) for e in entries[:LEARNED_PER_SEARCH]] + documents
        update = {**self._step(state, "retrieve"), "source": "kb", "retrieved": docs, "generations": 0,
                  "kb_searches": state.get("kb_searches", 0) + 1,
                  "queries": [*state.get("queries", []), queries[0] if queries else ""]}
        if not state.get("first_retrieval"):  # documents only: eval recall measures the knowledge base
            update["first_retrieval"] = [d["location"] for d in documents]
        return update

    async def web_search(self, state: RAGState) -> dict[str, Any]:
        """Search the web (Tavily); failures and empty results count as no documents.
        The query is cut to the search API's limit (:func:`graphs.web.clip_query`)."""
        query = clip_query(state.get("web_query") or state.get("question") or last_user_message(state))
        docs = await self.deps.web.search(query) if self.deps.web else []
        return {**self._step(state, "web_search"), "source": "web", "retrieved": docs, "generations": 0,
                "web_searches": state.get("web_searches", 0) + 1, "queries": [*state.get("queries", []), query]}

    async def grade_documents(self, state: RAGState) -> dict[str, Any]:
        """Grade all retrieved documents in one call, keep the relevant ones with their
        extracted facts; record query feedback when none is relevant. On unparseable
        output every retrieved document is kept (the answer checks still guard)."""
        retrieved = list(state.get("retrieved", []))
        query = (state.get("queries") or [""])[-1]
        if not retrieved:
            return {**self._step(state, "grade_documents"), "documents": [],
                    "query_feedback": [*state.get("query_feedback", []),
                                       f"The {state.get('source')} search for '{query}' found nothing."]}
        default = DocGrades(documents=[DocGrade(id=i, relevant=True) for i in range(1, len(retrieved) + 1)])
        if self.offline:
            scores = await asyncio.to_thread(self.extractive.grade, self._offline_questions(state), retrieved)
            threshold = self.extractive.relevance_threshold
            if state.get("source") == "kb":  # a current-events question the knowledge base must answer strongly
                history = history_before_last(state, self.cfg.history_messages)
                route, _ = await asyncio.to_thread(self.offline_router.route, last_user_message(state), bool(history))
                threshold = self.extractive.current_relevance_threshold if route == "websearch" else threshold
            grades, calls = DocGrades(documents=[DocGrade(id=i, relevant=score >= threshold)
                                                 for i, score in enumerate(scores, start=1)]), 0
        elif self.cfg.graders == "lexical":
            question = f"{state.get('question', '')} {last_user_message(state)}"
            grades, calls = DocGrades(documents=[
                DocGrade(id=i, relevant=signals.relevance(question, f"{d.get('title', '')} {d['text']}")
                         >= self.cfg.relevance_threshold,
                         facts=" ".join(signals.key_sentences(question, d["text"])))
                for i, d in enumerate(retrieved, start=1)]), 0
        else:
            grades, calls, _ = await self.deps.caller.structured(
                prompts.GRADE_DOCUMENTS,
                prompts.GRADE_DOCUMENTS_INPUT.format(
                    question=state.get("question") or last_user_message(state),
                    documents=prompts.data_block("documents", _format_docs(retrieved, self.cfg.max_document_characters))),
                DocGrades, default,
            )
        kept: list[Doc] = []
        for g in grades.documents:
            if g.relevant and 1 <= g.id <= len(retrieved) and all(k["id"] != retrieved[g.id - 1]["id"] for k in kept):
                kept.append(Doc(**{**retrieved[g.id - 1], "facts": g.facts.strip()[:600]}))
        update = {**self._step(state, "grade_documents", calls), "documents": kept}
        if not kept:
            reason = grades.feedback.strip() or "none of the results was relevant"
            update["query_feedback"] = [*state.get("query_feedback", []),
                                        f"The {state.get('source')} search for '{query}': {reason}"]
        log.info("graded %d documents: %d relevant", len(retrieved), len(kept))
        return update

    # ---- answer ------------------------------------------------------------------
    async def generate(self, state: RAGState) -> dict[str, Any]:
        """Write a cited answer from the relevant documents and the generation feedback.

        With lexical graders (a model too small to judge), a redraft after a failed
        grounding check is extractive: the documents' own key sentences, cited, with no
        model call, so a small model never shows a hallucination to the user."""
        if self.offline:
            answer = await asyncio.to_thread(self.extractive.compose, self._offline_questions(state),
                                             state.get("documents", []))
            return {**self._step(state, "generate"), "generation": answer,
                    "generations": state.get("generations", 0) + 1}
        if self.cfg.graders == "lexical" and state.get("generations", 0) >= 1:
            # a small model's draft failed the grounding check: answer with the sources' own sentences
            question = f"{state.get('question', '')} {last_user_message(state)}"
            answer = signals.extractive_answer(question, state.get("documents", []))
            if answer:
                return {**self._step(state, "generate"), "generation": answer,
                        "generations": state.get("generations", 0) + 1}
        fb = state.get("generation_feedback", [])
        feedback = prompts.GENERATION_FEEDBACK.format(
            items=prompts.data_block("feedback", "\n".join(f"- {f}" for f in fb))) if fb else ""
        user = prompts.GENERATE_INPUT.format(  # retrieved text is data: user message, never the system prompt
            question=state.get("question") or last_user_message(state),
            sources=prompts.data_block("sources", _format_docs(
                state.get("documents", []), self.cfg.max_document_characters, with_facts=self.cfg.graders == "llm")),
            feedback=feedback,
        )
        learned = any(d.get("kind") == "learned" for d in state.get("documents", []))
        system = prompts.GENERATE + prompts.LEARNED_RULE if learned else prompts.GENERATE
        answer, calls = await self.deps.caller.complete(system, user)
        return {**self._step(state, "generate", calls), "generation": answer,
                "generations": state.get("generations", 0) + 1}

    async def grade_answer(self, state: RAGState) -> dict[str, Any]:
        """Check grounding and usefulness in one structured call; record generation
        feedback (not grounded) or query feedback (grounded but not useful). On
        unparseable output the draft passes (it cites retrieved sources). An empty draft
        is a failed draft (verdict ``empty``, no model call): it counts against
        ``max_generations`` like an ungrounded one and is never posted."""
        if not state.get("generation", "").strip():
            return {**self._step(state, "grade_answer"), "verdict": "empty",
                    "generation_feedback": [*state.get("generation_feedback", []),
                                            "the draft was empty: write the answer"]}
        default = AnswerGrade(grounded=True, useful=True)
        if self.offline:  # quotes are grounded by construction; an empty composition is not useful
            draft = state.get("generation", "")
            grade, calls = AnswerGrade(grounded=True, useful=bool(draft.strip()),
                                       feedback="" if draft.strip() else "no sentence of the documents answers it"), 0
        elif self.cfg.graders == "lexical":
            docs = [f"{d.get('title', '')} {d['text']}" for d in state.get("documents", [])]
            draft = state.get("generation", "")
            grounded = signals.grounding(draft, docs) >= self.cfg.grounding_threshold
            useful = signals.is_useful(f"{state.get('question', '')} {last_user_message(state)}", draft)
            grade, calls = AnswerGrade(grounded=grounded, useful=useful,
                                       feedback="" if grounded else "use only words and facts from the sources"), 0
        else:
            # the sources the draft cites (all when it cites none): a claim is checked against
            # what it names, and the prompt does not carry every chunk a third time (issue 11)
            docs = state.get("documents", [])
            cited = cited_numbers(state.get("generation", ""), len(docs)) or None
            grade, calls, _ = await self.deps.caller.structured(
                prompts.GRADE_ANSWER,
                prompts.GRADE_ANSWER_INPUT.format(
                    question=state.get("question") or last_user_message(state),
                    sources=prompts.data_block("sources", _format_docs(docs, self.cfg.max_document_characters,
                                                                       only=cited)),
                    draft=prompts.data_block("draft", state.get("generation", ""))),
                AnswerGrade, default,
            )
        update = {**self._step(state, "grade_answer", calls)}
        if not grade.grounded:
            update["verdict"] = "hallucination"
            update["generation_feedback"] = [*state.get("generation_feedback", []),
                                             grade.feedback.strip() or "the draft makes claims the sources do not support"]
        elif not grade.useful:
            update["verdict"] = "not_useful"
            update["query_feedback"] = [*state.get("query_feedback", []),
                                        f"Documents found for '{(state.get('queries') or [''])[-1]}' did not answer it: "
                                        + (grade.feedback.strip() or "the answer missed the point")]
        else:
            update["verdict"] = "useful"
        return update

    # ---- endings -----------------------------------------------------------------
    async def human_review(self, state: RAGState) -> dict[str, Any]:
        """Pause with a LangGraph interrupt and ask humans. Nothing happens before
        ``interrupt()`` (the node re-runs from its first line on resume).

        Resume value: ``{"action": "answer"|"retry"|"dismiss", "text": str, "by": str}``.
        ``retry`` turns the hint into query feedback and gives a fresh budget.
        """
        reason = self._review_reason(state)
        value = interrupt({
            "question": state.get("question") or last_user_message(state),
            "reason": reason,
            "attempts": list(state.get("queries", [])),
        })
        value = value if isinstance(value, dict) else {"action": "answer", "text": str(value)}
        action, text, by = value.get("action", "dismiss"), str(value.get("text", "")).strip(), value.get("by", "")
        step = self._step(state, "human_review")
        if action == "answer" and text:
            return {**step, "generation": text, "outcome": "human", "answered_by": by, "human_action": "answer"}
        if action == "retry":
            return {**step, "human_action": "retry", "kb_searches": 0, "web_searches": 0, "generations": 0,
                    "query_feedback": [f"Hint from {by or 'a teammate'}: {text}"] if text else [],
                    "generation_feedback": [], "human_retries": state.get("human_retries", 0) + 1}
        return {**step, "human_action": "dismiss"}

    def _review_reason(self, state: RAGState) -> str:
        """Why the budget ran out, in one line for the help request."""
        if state.get("verdict") == "downvoted":
            return state.get("review_note") or "a teammate marked the answer as wrong"
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
        if state.get("verdict") == "not_useful":
            return f"the documents found did not answer it; searched {', '.join(searched)}"
        return f"nothing relevant found; searched {', '.join(searched)}"

    async def apology(self, state: RAGState) -> dict[str, Any]:
        """Give up politely."""
        return {**self._step(state, "apology"), "generation": self.cfg.apology, "outcome": "apology", "sources": []}

    async def finish(self, state: RAGState) -> dict[str, Any]:
        """Record the answer in the history, set its sources, drop heavy per-turn fields."""
        outcome = state.get("outcome") or "answer"
        text, sources = state.get("generation", ""), []
        if outcome == "answer":
            text, sources = cite_sources(text, state.get("documents", []))
        return {**self._step(state, "finish"), "outcome": outcome, "sources": sources, "generation": text,
                "messages": [AIMessage(text)], "documents": [], "retrieved": []}
