"""The composers: who routes, rewrites queries, searches and writes the answer.

One strategy per writer, chosen once when the graph is built (:func:`composer_for`) or
injected through :attr:`graphs.nodes.GraphDeps.composer`:

- :class:`LLMComposer` - the chat model routes (:data:`graphs.prompts.ROUTE`), rewrites
  queries, answers directly and writes the cited answer;
- :class:`ExtractiveComposer` - ``[graph] composer = "extractive"``: no chat-model call
  at all; the embedding router (:mod:`graphs.offline_router`) routes, canned replies
  answer small talk, and the answer quotes the documents' best sentences
  (:mod:`graphs.extractive`). Also the fallback when the offline model's backend is broken.

The nodes (:mod:`graphs.nodes`) keep what both share: budgets, the path, the state update.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, NamedTuple, Protocol

from langchain_core.messages import HumanMessage

from graphs import prompts, releases, sections, signals, verdicts
from graphs.citations import format_docs
from graphs.graders import Graders, documents_define
from graphs.knowledge import KnowledgeBase
from graphs.learned import shown_entry
from graphs.messages import history_before_last, last_user_message, message_text
from graphs.models import ModelCaller
from graphs.offline import (
    OfflineKit,
    offline_questions,
    offline_search_queries,
    resolved_message,
    route_message,
    thread_history,
)
from graphs.offline_router import canned_reply
from graphs.schemas import RewrittenQuery, RouteDecision
from graphs.state import Doc, RAGState

if TYPE_CHECKING:
    from graphs.settings import GraphConfig

log = logging.getLogger(__name__)


class Routing(NamedTuple):
    """What a composer's route step decided for the newest message."""

    decision: RouteDecision  # the standalone question, the route and the first query
    calls: int  # the LLM calls it made (a graphs.models.Calls carries their tokens too)
    follow_up: bool  # the message is read with the thread's history
    # the offline router's signals put the message nearer the world outside the team than the team
    # (OfflineRouter.off_topic): kept in the state so the give-up step need not embed it again
    outside_team: bool = False
    # the offline router's signals read the message as small talk rather than general knowledge
    # (OfflineRouter.chats): kept in the state so the canned reply need not embed it again
    small_talk: bool = False


class Composer(Protocol):
    """How the graph routes, rewrites, searches and writes (one implementation per writer).
    Every method returns its result and the LLM calls it made, where it can make any."""

    async def route(self, state: RAGState) -> Routing:
        """The standalone question, the route and the first query for the newest message,
        whether it is read with the thread's history (a follow-up), and (offline) whether it is
        about the world outside the team (:class:`Routing`)."""
        ...

    async def direct(self, state: RAGState) -> tuple[str, int]:
        """An answer without retrieval ("" when none was written)."""
        ...

    async def rewrite(self, state: RAGState, target: str) -> tuple[str, int]:
        """A new search query for ``target`` (e.g. "a web search engine") after query feedback."""
        ...

    async def search(self, state: RAGState, queries: list[str], k: int, sources: list[str] | None) -> list[Doc]:
        """Up to ``k`` knowledge-base chunks for the query variants ``queries`` (restricted
        to ``sources``, None: all)."""
        ...

    async def generate(self, state: RAGState) -> tuple[str, int]:
        """The answer from ``state["documents"]``, citing them as ``[n]``."""
        ...


class LLMComposer:
    """The chat model writes (``[graph] composer = "llm"``).

    Args:
        caller: the model caller (retries, budgets, structured output).
        knowledge: the knowledge base searched.
        config: budgets and sizes (``history_messages``, ``max_document_characters``, ``kb_description``).
        graders: the graders (a redraft after a failed check may come from them, and
            their extracted facts are shown to the writer).
    """

    def __init__(self, caller: ModelCaller, knowledge: KnowledgeBase, config: GraphConfig, graders: Graders) -> None:
        self.caller = caller
        self.knowledge = knowledge
        self.cfg = config
        self.graders = graders

    async def route(self, state: RAGState) -> Routing:
        """Contextualise the newest message with the history, route it and write the first
        query in one structured call; on bad output: the knowledge base, with the message.
        The model reads every message with the history there is."""
        raw = last_user_message(state)
        history = history_before_last(state, self.cfg.history_messages)
        convo = (
            "\n".join(
                f"{'User' if isinstance(m, HumanMessage) else 'Assistant'}: {message_text(m)[:600]}" for m in history
            )
            or "(none)"
        )
        default = RouteDecision(question=raw, route="vectorstore", query=raw)
        decision, calls = await self.caller.structured(
            prompts.ROUTE.format(kb_description=self.cfg.kb_description),
            f"Conversation so far:\n{convo}\n\nNew message: {raw}",
            RouteDecision,
            default,
        )
        return Routing(decision, calls, bool(history))

    async def direct(self, state: RAGState) -> tuple[str, int]:
        history = history_before_last(state, self.cfg.history_messages)
        return await self.caller.complete(prompts.DIRECT, last_user_message(state), history)

    async def rewrite(self, state: RAGState, target: str) -> tuple[str, int]:
        tried = "\n".join(f"- {q}" for q in state.get("queries", [])) or "- (none)"
        feedback = "\n".join(f"- {f}" for f in state.get("query_feedback", [])) or "- (none)"
        default = RewrittenQuery(query=state.get("question") or last_user_message(state))
        out, calls = await self.caller.structured(
            prompts.REWRITE.format(target=target),
            f"Question: {state.get('question')}\nEarlier queries:\n{tried}\nFeedback:\n{feedback}",
            RewrittenQuery,
            default,
        )
        return out.query.strip() or default.query, calls

    async def search(self, state: RAGState, queries: list[str], k: int, sources: list[str] | None) -> list[Doc]:
        """Hybrid search (:meth:`graphs.knowledge.KnowledgeBase.search`) fusing ``queries``."""
        return await asyncio.to_thread(self.knowledge.search, queries, k, sources=sources)

    async def generate(self, state: RAGState) -> tuple[str, int]:
        """A cited answer from the documents and the generation feedback; after a failed
        draft, the graders' redraft when they have one (lexical graders: the documents'
        own key sentences, so a small model never shows a hallucination to the user)."""
        if state.get("generations", 0) >= 1:
            redrafted = self.graders.redraft(state)
            if redrafted:
                return redrafted, 0
        fb = state.get("generation_feedback", [])
        feedback = (
            prompts.GENERATION_FEEDBACK.format(items=prompts.data_block("feedback", "\n".join(f"- {f}" for f in fb)))
            if fb
            else ""
        )
        user = prompts.GENERATE_INPUT.format(  # retrieved text is data: user message, never the system prompt
            question=state.get("question") or last_user_message(state),
            sources=prompts.data_block(
                "sources",
                format_docs(
                    state.get("documents", []),
                    self.cfg.max_document_characters,
                    with_facts=self.graders.facts_in_prompt,
                ),
            ),
            feedback=feedback,
        )
        learned = any(d.get("kind") == "learned" for d in state.get("documents", []))
        system = prompts.generate_prompt(self.cfg.answer_characters)
        system = system + prompts.LEARNED_RULE if learned else system
        return await self.caller.complete(system, user)


class ExtractiveComposer:
    """No chat model (``[graph] composer = "extractive"``): embedding routing, canned
    replies, quoted answers. Never makes an LLM call.

    Args:
        kit: the extractive scorer and the embedding router (built on first use).
        config: ``history_messages`` and ``kb_description``.
    """

    def __init__(self, kit: OfflineKit, config: GraphConfig) -> None:
        self.kit = kit
        self.cfg = config

    async def route(self, state: RAGState) -> Routing:
        """The embedding router's decision (:func:`graphs.offline.route_message`: whether the
        message is a follow-up, whether it is about the world outside the team
        (:meth:`graphs.offline_router.OfflineRouter.off_topic`) and whether it is small talk
        (:meth:`graphs.offline_router.OfflineRouter.chats`), are decided here, once, from one
        embedding of the message, and kept in the state for the later steps); the question and the
        queries are the message."""
        raw = last_user_message(state)
        route, sig, follow_up = await asyncio.to_thread(
            route_message, state, self.cfg.history_messages, self.kit.router, self.cfg.k, documents_define
        )
        log.info(
            "offline route %s (kb %.2f, small talk %.2f, general %.2f, current %.2f)",
            route,
            sig.kb,
            sig.small_talk,
            sig.general,
            sig.current,
        )
        decision = RouteDecision.model_validate({"question": raw, "route": route, "query": raw})
        router = self.kit.router
        return Routing(decision, 0, follow_up, router.off_topic(sig), router.chats(sig))

    async def direct(self, state: RAGState) -> tuple[str, int]:
        """A canned reply (a greeting, thanks, or what the bot can answer); after a search that
        found nothing (an off-topic question, :meth:`graphs.nodes.Nodes.off_topic`) never a greeting;
        a question after thanks ("thanks! who won the cup?") is replied to as the question, not thanked.
        Whether it is small talk is the route step's verdict (``state["small_talk"]``): the message
        is embedded once a turn."""
        raw = signals.after_chat_opening(last_user_message(state))
        small_talk = not state.get("kb_searches") and bool(state.get("small_talk"))
        return canned_reply(raw, self.cfg.kb_description, small_talk), 0

    async def rewrite(self, state: RAGState, target: str) -> tuple[str, int]:
        """A human's latest hint with the question, else the question's own terms."""
        hints = [f.split(": ", 1)[1] for f in state.get("query_feedback", []) if f.startswith("Hint from ")]
        question = state.get("question") or last_user_message(state)
        query = " ".join([*hints[-1:], question]) if hints else " ".join(sorted(signals.terms(question)))
        return query or question, 0

    async def search(self, state: RAGState, queries: list[str], k: int, sources: list[str] | None) -> list[Doc]:
        """More candidates, reranked by embeddings, widened to their sections
        (:meth:`graphs.extractive.Extractive.retrieve`), from the offline query variants; for a
        how-to question the sections that answer it ahead of those only mentioning its words
        (:func:`graphs.sections.answering_first`; in another language: sections of steps first,
        :func:`graphs.sections.steps_first`), and for a question asking for a page the sections of
        the page it names (:func:`graphs.sections.asked_page_first`), and for a question asking for the
        newest version or about a release it names that version's entry of a changelog among them
        (:func:`graphs.releases.release_first`)."""
        variants = offline_search_queries(state, self.cfg.history_messages)
        question = last_user_message(state)
        subject = sections.page_subject_query(question)
        if subject:  # "the link to the Slack setup guide" is searched as "Slack setup": "link" finds link previews
            variants = [subject, *((v, 0.5) if isinstance(v, str) else (v[0], v[1] * 0.5) for v in variants)]
        docs = await asyncio.to_thread(self.kit.extractive.retrieve, variants, k, sources=sources)
        docs = sections.steps_first(question, docs, self._page_sections)
        docs = releases.release_first(question, docs, self._page_sections)  # "whats the latest version"
        return sections.asked_page_first(question, sections.answering_first(question, docs))

    def _page_sections(self, doc: Doc) -> list[tuple[str, str]]:
        """The ``(heading path, text)`` of every chunk of ``doc``'s page, in order ([] without an index)."""
        chunks = self.kit.extractive.page_chunks(doc.get("location", ""), doc.get("source"))
        return [(c.title, c.text) for c, _ in chunks]

    async def generate(self, state: RAGState) -> tuple[str, int]:
        """The documents' best sentences for the question, cited, within ``[graph]
        answer_characters``; a follow-up's own new terms (:func:`followup_focus`) lead; a how-to
        question's troubleshooting sections are not quoted while another section is there
        (:func:`graphs.sections.leading_sections`); a question asking for a page opens with the
        page's title and where it is (:func:`graphs.sections.page_pointer`), a question a changelog's
        headings answer with the version's heading (:func:`graphs.releases.release_lead`) and that
        release's notes only (:func:`graphs.releases.only_release`), a yes/no
        question with
        the yes or the no its documents state (:func:`graphs.verdicts.with_verdict`); an expert's
        learned answer first among the documents (one about this question) opens the answer as the
        expert wrote it, with who answered and when (:func:`graphs.learned.shown_entry`), the
        documents' quotes after it."""
        questions = offline_questions(state, self.cfg.history_messages)
        subject = sections.page_subject_query(last_user_message(state))
        if subject and not signals.asks_for_link(last_user_message(state)):
            # "where is the doc on X": the quotes are about X (a question asking for links keeps its
            # words: the quoted sentences then show their links' addresses)
            questions = [subject, *questions[1:]]
        focus = followup_focus(state, self.cfg.history_messages)
        docs = state.get("documents", [])
        # an expert's answer leads only from the front, where the search puts an answer to this
        # question (graphs.nodes: by meaning); one sharing only its words stays among the sources
        # unquoted (it reads as an answer to another question, not as a passage)
        rest = [Doc(**{**d, "text": ""}) if d.get("kind") == "learned" else d for d in docs]
        if docs and docs[0].get("kind") == "learned":  # reads as an answer, with who gave it, not as a quote
            more = await asyncio.to_thread(
                self.kit.extractive.compose, questions, rest, self.cfg.answer_characters // 2, focus
            )
            shown = shown_entry(docs[0], 1)
            return (f"{shown}\n\n{more}" if more else shown), 0
        docs = rest
        # "what changed in 3.10?": that release's notes only, not the other releases of the changelog page
        quoted = releases.only_release(
            last_user_message(state), sections.leading_sections(last_user_message(state), docs)
        )
        answer = await asyncio.to_thread(
            self.kit.extractive.compose, questions, quoted, self.cfg.answer_characters, focus
        )
        if not answer and quoted != docs:  # the troubleshooting sections were all there was to quote
            answer = await asyncio.to_thread(
                self.kit.extractive.compose, questions, docs, self.cfg.answer_characters, focus
            )
        # "can I use Discord instead of Slack?": the yes or the no the documents state, first
        answer = verdicts.with_verdict(last_user_message(state), docs, answer)
        pointer = sections.page_pointer(last_user_message(state), docs)  # "the link to the setup guide"
        # "when was 4.2.1 released?": the changelog heading holds the version and its date
        lead = pointer or releases.release_lead(last_user_message(state), docs)
        return (f"{lead}\n\n{answer}" if lead and answer else answer or lead), 0


def followup_focus(state: RAGState, history_limit: int) -> list[str]:
    """The terms a follow-up adds to the thread's question (``"and sick leave, same cap?"``
    after a question about annual leave: ``["sick"]``), [] without history or new terms, and
    for a message that stands alone (:func:`graphs.offline.thread_history`).
    Words of the earlier user messages are what the follow-up refers back to; the rest is
    what it asks about now."""
    history = thread_history(state, history_limit)
    earlier = [message_text(m) for m in history if isinstance(m, HumanMessage)]
    if not earlier:
        return []
    before: set[str] = set()
    for text in earlier:
        before |= signals.terms(text)
    return sorted(signals.terms(resolved_message(state, history_limit)) - before - _FOLLOWUP_WORDS)


# Words a follow-up uses to point back ("same", "too", "that one"): never its new subject.
_FOLLOWUP_WORDS = frozenset(
    "same too either else other another again instead ok okay then thanks still work works apply applies case".split()
)


def composer_for(
    config: GraphConfig, caller: ModelCaller, knowledge: KnowledgeBase, kit: OfflineKit, graders: Graders
) -> Composer:
    """The composer ``config`` asks for: extractive for ``composer = "extractive"``, else the LLM."""
    if config.composer == "extractive":
        return ExtractiveComposer(kit, config)
    return LLMComposer(caller, knowledge, config, graders)
