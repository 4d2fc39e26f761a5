"""Graph state of the adaptive RAG graph, and its contract with the runtime.

The runtime (``bot/service/``) never needs a node name. What crosses the boundary is
typed here:

- :class:`ProgressEvent` - the phase a run is in (:class:`Phase`), emitted by the nodes
  as LangGraph custom stream events (``stream_mode="custom"``);
- :class:`HelpPayload` - the value of the interrupt raised when the graph asks humans;
- :class:`ResumeValue` - what a human's reply resumes that interrupt with
  (``Command(resume=ResumeValue(...))``), checked by :func:`resume_value`;
- the answer fields of :class:`RAGState` (``generation``, ``sources``, ``outcome``,
  ``answer_route``, ``drafts``...) that the runtime turns into the posted answer.

``messages`` is the thread's history (``add_messages`` reducer: it persists across
turns). Every other field belongs to one question and is reset by the ``start`` node at
the beginning of each turn (plain replace semantics, no accumulating reducers, so a
reset really resets). Heavy fields (documents, knowledge) are cleared when a turn ends,
so a long-lived thread's checkpoints stay small.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages
from pydantic import TypeAdapter, ValidationError
from typing_extensions import TypedDict  # pydantic validates typing_extensions' TypedDict on Python < 3.12


class Doc(TypedDict, total=False):
    """One retrieved chunk or web result (a plain dict so checkpoints serialise it)."""

    id: str  # chunk id or URL
    text: str  # chunk text (at most graph.max_document_characters)
    location: str  # file path relative to its source folder, or URL
    title: str  # heading path ("Guide > Install") or page title
    score: float  # fused rank score, higher is better
    facts: str  # facts extracted by the document grader
    kind: str  # "learned" for a teammate's earlier answer (graphs/learned.py); absent for documents
    url: str  # the address an answer cites (web page, file on a Git host), when the document has one
    source: str  # the knowledge source's name ([[sources]] name or [knowledge] sources path)


class Phase(str, enum.Enum):
    """What a run is doing now, for the user (the runtime shows it as a reaction)."""

    SEARCHING = "searching"  # rewriting the query for, or searching, the knowledge base
    WEB = "web"  # rewriting the query for, or searching, the web
    WRITING = "writing"  # writing an answer (a draft, or a direct answer)


class ProgressEvent(TypedDict):
    """One custom stream event of a run (``graph.astream(..., stream_mode="custom")``).

    Emitted by a node when it starts, so the same phase may come several times in a row
    (e.g. ``rewrite_kb`` then ``retrieve``); a consumer shows only changes.
    """

    phase: Phase


#: How the final answer was found: the sources searched this turn ("kb", "web", both
#: as "kb+web"), or "direct" when none was (greetings, general knowledge).
AnswerRoute = Literal["kb", "web", "kb+web", "direct"]


class HelpPayload(TypedDict):
    """The value of the interrupt the graph raises when it asks humans for help."""

    question: str  # the standalone question it could not answer
    reason: str  # why it gave up, one line
    attempts: list[str]  # the search queries tried, in order


#: How a human resumes a paused run: ``answer`` (``text`` is the final answer), ``retry``
#: (``text`` is a hint for a new search, with fresh budgets) or ``dismiss`` (the apology).
ResumeAction = Literal["answer", "retry", "dismiss"]


class ResumeValue(TypedDict):
    """The resume value of the help interrupt: ``Command(resume=ResumeValue(...))``."""

    action: ResumeAction
    text: str  # the answer or the hint ("" for dismiss)
    by: str  # display name of the human who replied ("timeout" when nobody did)


class ContractError(ValueError):
    """A value crossing the graph/runtime boundary has the wrong shape (the message names
    the type expected and what was wrong)."""


_RESUME = TypeAdapter(ResumeValue)
_HELP = TypeAdapter(HelpPayload)


def _validated(adapter: TypeAdapter, keys: Any, value: object, what: str) -> Any:
    try:
        return adapter.validate_python(value, strict=True)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'value'}: {e['msg']}" for e in exc.errors())
        raise ContractError(
            f"{what} has the wrong shape ({problems}): expected a dict with {', '.join(keys)}; got {value!r:.200}"
        ) from None


def resume_value(value: object) -> ResumeValue:
    """Check a help interrupt's resume value.

    Args:
        value: what ``Command(resume=...)`` carried.

    Returns:
        ``value`` as a :class:`ResumeValue`.

    Raises:
        ContractError: ``value`` is not a dict with ``action`` (one of answer, retry,
            dismiss), ``text`` and ``by`` (strings).
    """
    return _validated(_RESUME, ResumeValue.__annotations__, value, "the resume value of a help request (ResumeValue)")


def help_payload(value: object) -> HelpPayload:
    """Check the value of a pending help interrupt (``state.interrupts[0].value``).

    Raises:
        ContractError: ``value`` is not a :class:`HelpPayload`.
    """
    return _validated(_HELP, HelpPayload.__annotations__, value, "the help request of a paused run (HelpPayload)")


class RAGState(TypedDict, total=False):
    """State of one thread. Per-turn fields are listed in :data:`PER_TURN_DEFAULTS`."""

    messages: Annotated[list[AnyMessage], add_messages]
    question: str  # standalone question (contextualised)
    route: str  # vectorstore | websearch | direct
    needs_web: bool  # routed to the web for current information, but web search is not available
    follow_up: bool  # the message is read with the thread's history (decided by route; graphs/offline.py)
    # offline: the route step's signals put the message nearer the world outside the team than the team
    # (graphs.offline_router.OfflineRouter.off_topic); the give-up step reads it instead of embedding again
    outside_team: bool
    # offline: the route step's signals read the message as small talk rather than general knowledge
    # (graphs.offline_router.OfflineRouter.chats); the canned reply reads it instead of embedding again
    small_talk: bool
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
    input_tokens: int  # tokens sent to the chat model this turn, as the provider counted them
    output_tokens: int  # tokens it wrote this turn
    path: list[str]  # nodes visited this turn, in order
    outcome: str  # answer | direct | human | apology
    answer_route: AnswerRoute  # set by ``finish``: how the answer was found
    drafts: int  # set by ``finish``: drafts written this turn (generate steps, across searches)
    answered_by: str
    verdict: str  # last answer grade: useful | hallucination | not_useful | empty | misshapen | downvoted
    human_action: str  # last human resume action: answer | retry | dismiss
    review_note: str  # why a teammate asked the experts about an answer (a 👎 escalated)
    scope: dict[str, Any]  # what this turn may use (the channel's settings): sources, web, learning


PER_TURN_DEFAULTS: dict[str, Any] = {
    "question": "",
    "route": "",
    "needs_web": False,
    "follow_up": False,
    "outside_team": False,
    "small_talk": False,
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
    "input_tokens": 0,
    "output_tokens": 0,
    "path": [],
    "outcome": "",
    "answer_route": "direct",
    "drafts": 0,
    "answered_by": "",
    "verdict": "",
    "human_action": "",
    "review_note": "",
    "scope": {},
}


def scope_of(state: Mapping[str, Any]) -> dict[str, Any]:
    """This turn's scope with its defaults: ``sources`` (resolved source paths the
    knowledge base may search, None for all), ``knowledge`` (the source names the turn
    searches, its ``sources`` or all of the knowledge base's, as the start of the turn wrote
    them; None where no turn started: any), ``web`` and ``learning`` (bools), and the
    ``platform`` and ``channel`` it runs in (a channel restricted to some sources uses only
    the learned entries learned in it)."""
    scope = state.get("scope") or {}
    knowledge = scope.get("knowledge")
    return {
        "sources": scope.get("sources"),
        "knowledge": None if knowledge is None else [str(n) for n in knowledge],
        "web": scope.get("web", True) is not False,
        "learning": scope.get("learning", True) is not False,
        "platform": str(scope.get("platform") or ""),
        "channel": str(scope.get("channel") or ""),
    }
