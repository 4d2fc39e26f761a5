"""The graders: is a retrieved document relevant, is a draft grounded and useful?

One strategy per kind of judge, chosen once when the graph is built
(:func:`graders_for`) or injected through :attr:`graphs.nodes.GraphDeps.graders`:

- :class:`LLMGraders` - the chat model grades (one batched structured call for the
  documents, extracting their key facts; one for the draft);
- :class:`LexicalGraders` - ``[graph] graders = "lexical"``: a chat model too small to
  judge writes, cheap term overlap grades (:mod:`graphs.signals`); its "direct" route is
  trusted only for small talk, and a redraft quotes the sources instead of calling it;
- :class:`ExtractiveGraders` - ``[graph] composer = "extractive"``: no chat model at
  all; embedding + lexical scores (:mod:`graphs.extractive`), and a composed quote is
  grounded by construction.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from graphs import prompts, releases, sections, signals
from graphs.citations import cited_numbers, format_docs
from graphs.messages import last_user_message
from graphs.models import ModelCaller
from graphs.offline import OfflineKit, offline_questions
from graphs.schemas import AnswerGrade, DocGrade, DocGrades
from graphs.state import Doc, RAGState

if TYPE_CHECKING:
    from graphs.extractive import Extractive
    from graphs.settings import GraphConfig


class Graders(Protocol):
    """How the graph judges documents and drafts (one implementation per judge).

    Attributes:
        facts_in_prompt: the document grades carry extracted key facts worth showing to
            the writer (``generate``).
    """

    facts_in_prompt: bool

    async def grade_documents(self, state: RAGState, retrieved: list[Doc]) -> tuple[DocGrades, int]:
        """Grade ``retrieved`` (non-empty) for the turn's question. Returns the grades
        (``id`` = 1-based position in ``retrieved``) and the LLM calls made."""
        ...

    async def grade_answer(self, state: RAGState) -> tuple[AnswerGrade, int]:
        """Grade the turn's non-empty draft (``state["generation"]``) against
        ``state["documents"]``. Returns the grade and the LLM calls made."""
        ...

    def check_route(self, message: str, route: str) -> str:
        """The route to take for ``message`` given the chat model's choice ``route``."""
        ...

    def redraft(self, state: RAGState) -> str | None:
        """An answer written without the chat model after a draft failed its check, or
        None to ask the chat model again."""
        ...


class LLMGraders:
    """The chat model grades (``[graph] graders = "llm"``).

    Args:
        caller: the model caller (retries, budgets, structured output).
        max_document_characters: each document is cut to this many characters in prompts.
    """

    facts_in_prompt = True

    def __init__(self, caller: ModelCaller, max_document_characters: int) -> None:
        self.caller = caller
        self.max_document_characters = max_document_characters

    async def grade_documents(self, state: RAGState, retrieved: list[Doc]) -> tuple[DocGrades, int]:
        """One batched structured call; on unparseable output every document is kept (the
        answer checks still guard)."""
        default = DocGrades(documents=[DocGrade(id=i, relevant=True) for i in range(1, len(retrieved) + 1)])
        grades, calls = await self.caller.structured(
            prompts.GRADE_DOCUMENTS,
            prompts.GRADE_DOCUMENTS_INPUT.format(
                question=state.get("question") or last_user_message(state),
                documents=prompts.data_block("documents", format_docs(retrieved, self.max_document_characters)),
            ),
            DocGrades,
            default,
        )
        return grades, calls

    async def grade_answer(self, state: RAGState) -> tuple[AnswerGrade, int]:
        """Grounding and usefulness in one structured call, against the sources the draft
        cites (all when it cites none): a claim is checked against what it names, and the
        prompt does not carry every chunk a third time. On unparseable output the
        draft passes (it cites retrieved sources)."""
        docs = state.get("documents", [])
        cited = cited_numbers(state.get("generation", ""), len(docs)) or None
        grade, calls = await self.caller.structured(
            prompts.GRADE_ANSWER,
            prompts.GRADE_ANSWER_INPUT.format(
                question=state.get("question") or last_user_message(state),
                sources=prompts.data_block("sources", format_docs(docs, self.max_document_characters, only=cited)),
                draft=prompts.data_block("draft", state.get("generation", "")),
            ),
            AnswerGrade,
            AnswerGrade(grounded=True, useful=True),
        )
        return grade, calls

    def check_route(self, message: str, route: str) -> str:
        """The chat model's route, except the web for a present-tense question about what the
        documents state ("which version is currently supported?",
        :func:`graphs.signals.asks_what_documents_state`): the knowledge base, as offline."""
        return "vectorstore" if route == "websearch" and signals.asks_what_documents_state(message) else route

    def redraft(self, state: RAGState) -> str | None:
        return None


class LexicalGraders:
    """Term-overlap graders for a chat model too small to judge (``[graph] graders =
    "lexical"``, :mod:`graphs.signals`); no LLM call.

    Args:
        relevance_threshold: share of the question's terms a relevant document holds.
        grounding_threshold: share of the draft's terms found in the sources.
    """

    facts_in_prompt = False

    def __init__(self, relevance_threshold: float, grounding_threshold: float) -> None:
        self.relevance_threshold = relevance_threshold
        self.grounding_threshold = grounding_threshold

    @staticmethod
    def _question(state: RAGState) -> str:
        return f"{state.get('question', '')} {last_user_message(state)}"

    async def grade_documents(self, state: RAGState, retrieved: list[Doc]) -> tuple[DocGrades, int]:
        question = self._question(state)
        return DocGrades(
            documents=[
                DocGrade(
                    id=i,
                    relevant=signals.relevance(question, f"{d.get('title', '')} {d['text']}")
                    >= self.relevance_threshold,
                    facts=" ".join(signals.key_sentences(question, d["text"])),
                )
                for i, d in enumerate(retrieved, start=1)
            ]
        ), 0

    async def grade_answer(self, state: RAGState) -> tuple[AnswerGrade, int]:
        docs = [f"{d.get('title', '')} {d['text']}" for d in state.get("documents", [])]
        draft = state.get("generation", "")
        grounded = signals.grounding(draft, docs) >= self.grounding_threshold
        useful = signals.is_useful(self._question(state), draft)
        return AnswerGrade(
            grounded=grounded, useful=useful, feedback="" if grounded else "use only words and facts from the sources"
        ), 0

    def check_route(self, message: str, route: str) -> str:
        """A model too small to judge: its "direct" is trusted only for greetings and
        thanks, and a greeting never costs a search; the web is not taken for what the documents
        state (:func:`graphs.signals.asks_what_documents_state`)."""
        if signals.is_small_talk(message):
            return "direct"
        if route == "direct" or (route == "websearch" and signals.asks_what_documents_state(message)):
            return "vectorstore"  # "which version is currently supported?": what the documents state
        return route

    def redraft(self, state: RAGState) -> str | None:
        """After a draft failed the grounding check: the sources' own key sentences, cited
        (so a small model never shows a hallucination to the user); None when none fits."""
        if state.get("generations", 0) < 1:
            return None
        return signals.extractive_answer(self._question(state), [dict(d) for d in state.get("documents", [])]) or None


def none_relevant(count: int, feedback: str) -> DocGrades:
    """Grades marking all ``count`` documents not relevant, with why (the rewrite's and the help
    request's reason)."""
    return DocGrades(documents=[DocGrade(id=i, relevant=False) for i in range(1, count + 1)], feedback=feedback)


def relevance_grades(
    extractive: Extractive,
    questions: Sequence[str],
    message: str,
    docs: Sequence[Doc],
    current: bool = False,
    web_missing: bool = False,
) -> DocGrades:
    """The extractive graders' decision on ``docs`` (non-empty) for the question variants
    ``questions`` of the user's ``message``: a document is relevant when its best unit scores over
    the threshold, which the question's best passage match moves
    (:meth:`~graphs.extractive.Extractive.threshold_for`); a current-events question (``current``:
    the router sent it to the web) must be answered strongly (a higher one), and one about the
    present moment is never answered from documents when no web search may run (``web_missing``).
    A question asking for a page ("where is the doc on webhooks?") is answered by a page whose own
    name says what it asks about, whatever its text scores (:func:`graphs.sections.page_named`).
    Documents that pass only on the words every page holds
    (:meth:`~graphs.extractive.Extractive.only_common_words`) are not relevant: the question is off
    the knowledge base's subject; a question naming a code or a version is answered by a document
    naming it (:func:`graphs.signals.code_share`), one asking for the newest version or about a
    release it names by the changelog's entry for that version (:func:`graphs.releases.names_release`);
    nor are documents none of which names a code the message asks about ("PH-500",
    :func:`graphs.signals.codes_missing`), nor, for a question about a release, a changelog lacking
    its version (:func:`graphs.releases.releases_missing`: "what changed in 9.9?"). A question asking
    who in the team does something is answered only by a document with a sentence naming who does it
    (:meth:`~graphs.extractive.Extractive.says_who`: a role, a team, a handle), never by one that only
    shares its words ("The release notes now open ..." for "who signs off a release?"). The
    ``feedback`` of a grade marking
    none relevant says why (the rewrite's and the help request's reason). Shared by the graph and
    the benchmarks (bench/decisions.py), so both decide alike."""
    scores = extractive.grade(questions, docs)
    threshold = extractive.threshold_for(questions, current, extractive.passage_match(questions, docs))
    if web_missing and signals.asks_for_now(message):
        # documents cannot tell what is true right now: say so (the help request's reason)
        # rather than quote text about the subject
        return none_relevant(len(scores), "it asks about the present moment, which documents cannot tell")
    missing = signals.codes_missing(message, [f"{d.get('title', '')}\n{d.get('text', '')}" for d in docs])
    if missing:
        # "what does PH-500 mean?": a page on PH-403 shares every other word and answers nothing
        return none_relevant(len(scores), f"no page found names {', '.join(missing)}")
    versions = releases.releases_missing(message, docs)
    if versions:
        # "what changed in 9.9?": the changelog's other releases share every other word and answer nothing
        return none_relevant(len(scores), f"no release notes found for {', '.join(versions)}")
    who = extractive.says_who(message, docs) if signals.asks_who_in_team(message) else [True] * len(docs)
    if not any(who):
        # "who signs off a release?": a changelog line about a release names no one who signs it off
        return none_relevant(len(scores), "no page says who does it")
    named = sections.page_named(message, docs)
    # a document naming every code the message asks about ("AB-403" in a table row) answers it,
    # however little its other words score
    coded = [signals.code_share(message, f"{d.get('title', '')}\n{d.get('text', '')}") == 1.0 for d in docs]
    # "whats the latest version", "what changed in 3.10?": the changelog's entry for that version answers
    # it, whose words do not say so
    newest = releases.names_release(message, docs)
    named = [a or b or c for a, b, c in zip(named, coded, newest, strict=True)]
    passing = any(score >= threshold for score in scores)
    if passing and not current and not any(named) and extractive.only_common_words(questions, docs):
        # the pages share only the words every page holds (the product's name) with the question
        return none_relevant(len(scores), "no page speaks of it: they share only words every page holds")
    return DocGrades(
        documents=[
            DocGrade(id=i, relevant=(score >= threshold or named[i - 1]) and who[i - 1])
            for i, score in enumerate(scores, start=1)
        ]
    )


class ExtractiveGraders:
    """Embedding + lexical graders for the extractive composer (``[graph] composer =
    "extractive"``, :mod:`graphs.extractive`); no chat-model call.

    Args:
        kit: the extractive scorer and the embedding router (built on first use).
        history_messages: earlier messages a follow-up is read with.
    """

    facts_in_prompt = False

    def __init__(self, kit: OfflineKit, history_messages: int) -> None:
        self.kit = kit
        self.history_messages = history_messages

    async def grade_documents(self, state: RAGState, retrieved: list[Doc]) -> tuple[DocGrades, int]:
        """:func:`relevance_grades` for the turn's question variants and route."""
        questions = offline_questions(state, self.history_messages)
        # the route step's decision: routed to the web (searched there first, or not allowed to)
        current = state.get("source") == "kb" and (state.get("route") == "websearch" or bool(state.get("needs_web")))
        grades = await asyncio.to_thread(
            relevance_grades,
            self.kit.extractive,
            questions,
            last_user_message(state),
            retrieved,
            current,
            current and bool(state.get("needs_web")),
        )
        return grades, 0

    async def grade_answer(self, state: RAGState) -> tuple[AnswerGrade, int]:
        """Quotes are grounded by construction; an empty composition is not useful."""
        draft = state.get("generation", "")
        return AnswerGrade(
            grounded=True,
            useful=bool(draft.strip()),
            feedback="" if draft.strip() else "no sentence of the documents answers it",
        ), 0

    def check_route(self, message: str, route: str) -> str:
        return route

    def redraft(self, state: RAGState) -> str | None:
        return None


def graders_for(config: GraphConfig, caller: ModelCaller, kit: OfflineKit) -> Graders:
    """The graders ``config`` asks for: extractive with the extractive composer (whatever
    ``graders`` says), lexical for ``graders = "lexical"``, else the LLM graders."""
    if config.composer == "extractive":
        return ExtractiveGraders(kit, config.history_messages)
    if config.graders == "lexical":
        return LexicalGraders(config.relevance_threshold, config.grounding_threshold)
    return LLMGraders(caller, config.max_document_characters)


_CODE_BLOCK = re.compile(r"^[ \t]*(```|~~~).*?^[ \t]*\1[ \t]*$", re.S | re.M)


def shape_problem(draft: str, answer_characters: int) -> str:
    """What is wrong with the shape of a chat model's ``draft`` ("" when nothing): its
    text (code blocks and tables aside) runs past twice the budget, or a step or command
    is cut with "…". The model's own check covers where the answer opens; these two are
    counted here, because a model's judgement of length is unreliable."""
    prose = _CODE_BLOCK.sub("", draft)
    prose = "\n".join(line for line in prose.split("\n") if not line.lstrip().startswith("|"))
    if len(prose.strip()) > 2 * answer_characters:
        return (
            f"the draft is {len(prose.strip())} characters of text: answer in about {answer_characters}, "
            "opening with the sentence or step that answers, then only what supports it"
        )
    for line in draft.split("\n"):
        stripped = line.strip()
        if ("…" in stripped or "..." in stripped) and (
            re.match(r"^(?:[-*+]|\d+[.)])\s", stripped) or stripped.startswith(("$ ", "`"))
        ):
            return "a step or command is cut with an ellipsis: quote it whole"
    return ""


def documents_define(extractive: Extractive, message: str, docs: list[Doc]) -> bool:
    """The documents ``docs`` (the message's search results) answer ``message`` over the bar a
    current-events question must clear (:func:`graphs.graders.relevance_grades` with ``current``):
    "what's a seat?" on pages whose glossary defines Seat, "what does HTTP 429 mean?" where the
    API page names it. Such a question reads like general knowledge, but the team's documents
    name the very thing asked, and their meaning of it is the one wanted."""
    if not docs:
        return False
    grades = relevance_grades(extractive, [message], message, docs, current=True)
    return any(g.relevant for g in grades.documents)
