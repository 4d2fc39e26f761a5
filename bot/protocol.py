"""The platform-neutral contract between chat adapters and the ChatService.

Data flows one way: a platform adapter turns a platform event into one
:class:`IncomingMessage`, hands it to ``ChatService.handle`` together with a
:class:`Responder` bound to that message, and the service drives the graph and
calls the responder (set a status, post an answer, post a help request, post a
notice). Nothing here knows about Slack, Discord or graph nodes.
"""

from __future__ import annotations

import enum
import re
import unicodedata
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Protocol, runtime_checkable

# C0 and C1 control characters except tab and newline, and the Unicode noncharacters
# U+FFFE/U+FFFF: they break JSON encoders, terminals, SQLite text and HTTP clients.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ufffe\uffff]")


def clean_text(text: str) -> str:
    """Make text from outside (chat events, CLI arguments, terminals, eval files) safe to
    store, send and show, once, at the boundary.

    - UTF-16 surrogates: a pair split into two code points is joined into its
      character; a lone surrogate (a broken emoji, or a byte Python's
      ``surrogateescape`` could not decode) becomes U+FFFD.
    - ``\\r\\n`` and ``\\r`` become ``\\n``; NUL and the other C0/C1 control characters
      except tab and newline are removed, as are U+FFFE and U+FFFF.
    - NFC normalisation (composed accents, so equal text compares and searches equal).
    - Text of only white space and invisible format characters (zero-width space, BOM,
      word joiner) becomes ``""``.

    Args:
        text: any ``str`` (non-str values are converted with ``str()``).

    Returns:
        The cleaned text (a valid UTF-8 encodable string).
    """
    if not isinstance(text, str):
        text = str(text)
    if any("\ud800" <= ch <= "\udfff" for ch in text):
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    text = _CONTROL.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))
    text = unicodedata.normalize("NFC", text)
    # invisible format characters (zero-width space, BOM, ...) at the edges: a message of
    # only those and spaces is an empty message, not a question
    edges = 0
    while edges < len(text) and (text[edges].isspace() or unicodedata.category(text[edges]) == "Cf"):
        edges += 1
    return "" if edges == len(text) else text


class PostError(Exception):
    """A responder could not post an answer or a help request (the platform refused it
    after its retries, e.g. Slack ``not_in_channel`` or Discord 403 Missing Access).

    Raised by :meth:`Responder.post_answer` and :meth:`Responder.post_help_request`
    (only those: reactions, notices and private notes stay best effort). The
    ChatService then ends the question with :attr:`Status.APOLOGY` instead of
    :attr:`Status.DONE` (or :attr:`Status.WAITING_HUMAN`) and logs one line.

    Args:
        message: what failed, for the log line (no message text, no secrets).
        reason: the platform's short error code (``not_in_channel``, ``403``...), or "".
    """

    def __init__(self, message: str, reason: str = "") -> None:
        super().__init__(message)
        self.reason = reason


class Status(str, enum.Enum):
    """Progress of one question, shown by adapters as a reaction (emoji names in config.toml)."""

    RECEIVED = "received"
    QUEUED = "queued"  # received, waiting for a free run slot ([service] max_concurrent_runs)
    SEARCHING = "searching"  # searching the knowledge base
    WEB = "web"  # searching the web
    WRITING = "writing"  # generating the answer
    WAITING_HUMAN = "waiting_human"  # paused, help requested
    DONE = "done"
    APOLOGY = "apology"


#: The statuses a message may show while its run is unfinished: a responder rebuilt from a
#: stored reference (crash recovery, a help request's timeout, a run taken over by another
#: replica) treats all of them as possibly shown and clears them, because the reference is
#: stored when the message is received, not again at every status (one bookkeeping write
#: less per status shown).
UNFINISHED_STATUSES = (
    Status.RECEIVED,
    Status.QUEUED,
    Status.SEARCHING,
    Status.WEB,
    Status.WRITING,
    Status.WAITING_HUMAN,
)

#: The steps of a run: shown paced, in the background, and skipped when a newer status comes
#: first (:class:`bot.chat.reactions.ReactionState`, ``[slack.reactions] change_interval_seconds``).
#: Every other status (the first reaction, the resting ones) is shown at once.
STEP_STATUSES = frozenset({Status.SEARCHING, Status.WEB, Status.WRITING})


class HumanAction(str, enum.Enum):
    """How a human resumes a paused run (the ``action`` of :class:`graphs.state.ResumeValue`)."""

    ANSWER = "answer"  # text is the answer, posted as the final answer
    RETRY = "retry"  # text is a hint that becomes query feedback, with a fresh budget
    DISMISS = "dismiss"  # give up: the bot apologises


@dataclass(frozen=True)
class IncomingMessage:
    """One user message, translated from a platform event.

    Attributes:
        platform: ``"slack"``, ``"discord"`` or ``"console"``.
        thread_key: the LangGraph thread id, e.g. ``slack:T1:C1:1700000000.000100``
            (root ts), ``discord:<guild or dm>:<thread or channel>``, ``console:<name>``.
        message_id: the platform identity of the message (not of the delivery), used to
            deduplicate repeated deliveries, e.g. ``slack:C1:1700000000.000200``.
        author_id: platform user id of the author.
        text: the question, with bot mentions stripped and platform escapes undone.
            Cleaned on construction by :func:`clean_text` (so are the other strings).
        author_name: display name, for logs and help requests.
        is_admin: may run admin commands (reindex).
        is_expert: may answer a help request (resume a paused run).
        channel: the platform channel the conversation belongs to (Slack channel id; Discord
            parent channel of a thread, or the channel): picks the ``[[channels]]`` settings
            and is recorded with answers. "" when there is none (console, CLI).
        channel_name: its name without ``#`` when the event gives it (Discord), else "".
    """

    platform: str
    thread_key: str
    message_id: str
    author_id: str
    text: str
    author_name: str = ""
    is_admin: bool = False
    is_expert: bool = False
    channel: str = ""
    channel_name: str = ""

    def __post_init__(self) -> None:
        # Every entry path builds one of these: clean the text once, here (clean_text).
        for name in ("thread_key", "message_id", "author_id", "text", "author_name", "channel", "channel_name"):
            object.__setattr__(self, name, clean_text(getattr(self, name)))


def message_record(msg: IncomingMessage, **extra: Any) -> dict[str, Any]:
    """A JSON-able copy of ``msg`` plus ``extra`` keys (stored with a run in flight, e.g. its
    ``received_at``); :func:`message_from_record` rebuilds the message."""
    return {**asdict(msg), **extra}


def message_from_record(record: dict[str, Any]) -> IncomingMessage:
    """The :class:`IncomingMessage` a :func:`message_record` holds (its extra keys ignored)."""
    names = {f.name for f in fields(IncomingMessage)}
    return IncomingMessage(**{k: v for k, v in record.items() if k in names})


@dataclass(frozen=True)
class Source:
    """A cited source: ``title`` (heading path or page title) and ``location`` (file path or URL)."""

    title: str
    location: str

    @property
    def is_url(self) -> bool:
        return self.location.startswith(("http://", "https://"))


@dataclass(frozen=True)
class Answer:
    """The final reply of a turn.

    Attributes:
        text: Markdown text (adapters convert it to the platform's dialect).
        sources: cited sources, in citation order ([1] is ``sources[0]``).
        route: how the answer was found (:data:`graphs.state.AnswerRoute`): ``"kb"``,
            ``"web"``, ``"kb+web"`` (the sources searched) or ``"direct"`` (none).
        drafts: drafts the graph wrote for it (more than one: earlier ones failed a check).
        path: the steps the graph took, for logs and the console (opaque here).
        kind: ``"answer"`` (grounded answer), ``"direct"`` (no retrieval),
            ``"human"`` (a human's answer to a help request) or ``"apology"``.
        answered_by: for ``kind == "human"``, the name of the human who answered.
        note: a note the runtime adds to the route note (e.g. that the chat model is
            unavailable and the answer quotes the documents); empty for none.
        answer_id: the id votes on this answer carry (👍/👎 controls); "" when it takes no
            votes (apologies, or the answer could not be recorded).
    """

    text: str
    sources: list[Source] = field(default_factory=list)
    route: str = "direct"
    drafts: int = 0
    path: list[str] = field(default_factory=list)
    kind: str = "answer"
    answered_by: str = ""
    note: str = ""
    answer_id: str = ""

    @property
    def route_note(self) -> str:
        """A short human note of how the answer was found, e.g. ``knowledge base, 1 draft``."""
        if self.kind == "human":
            return f"answered by {self.answered_by or 'a teammate'}"
        if self.kind == "apology":
            return "no grounded answer found"
        searched = {"kb": "knowledge base", "web": "web search"}
        parts = [searched[s] for s in self.route.split("+") if s in searched] or ["direct answer"]
        if self.drafts > 1:
            parts.append(f"{self.drafts} drafts")
        return " + ".join(parts) + (f"; {self.note}" if self.note else "")


@dataclass(frozen=True)
class HelpRequest:
    """The graph paused and asks humans for help.

    Attributes:
        thread_key: thread of the paused run.
        question: the standalone question the bot could not answer.
        reason: why it gave up (e.g. "knowledge base and web search exhausted").
        attempts: what was tried, one short line each.
        timeout_seconds: after this many seconds without a human reply the bot apologises.
        interrupt_id: the LangGraph interrupt id; buttons carry it so a stale click on an
            older help request cannot resume a newer one.

    Adapters add the expert mentions from their own config section.
    """

    thread_key: str
    question: str
    reason: str
    attempts: list[str] = field(default_factory=list)
    timeout_seconds: float = 0.0
    interrupt_id: str = ""


@runtime_checkable
class Responder(Protocol):
    """Output side of an adapter, bound to one incoming message (and so to its thread).

    Every method must swallow its own platform errors (log them): a failing reaction
    never stops an answer. The exceptions: :meth:`post_answer` and
    :meth:`post_help_request` raise :class:`PostError` when the text could not be
    posted at all, so the question never ends as "done" without an answer.
    Methods are awaited in order by the ChatService.

    Adapters subclass this class: the optional abilities (:meth:`clear_status`,
    :meth:`may_show`, :meth:`permalink`) then have their defaults here, and a platform overrides only what
    it can do (as errbot's ``ErrBot`` backend base class does).
    """

    async def set_status(self, status: Status) -> None:
        """Show ``status`` on the user's message (one reaction at a time)."""

    async def post_answer(self, answer: Answer) -> None:
        """Post the final answer (or apology) in the thread, split as the platform needs.

        Raises:
            PostError: the answer could not be posted (after the platform's retries).
        """

    async def post_help_request(self, request: HelpRequest) -> None:
        """Post a help request in the thread mentioning the experts, with resume controls.

        Raises:
            PostError: the help request could not be posted.
        """

    async def post_notice(self, text: str) -> None:
        """Post a short plain notice in the thread (empty question, refusal, progress)."""

    async def update_progress(self, text: str, *, final: bool = False) -> None:
        """Show progress of a long admin task: the first call posts a message, later
        calls edit that same message (reindex progress). ``final`` marks the result: an
        adapter with a limited number of updates (Slack's response_url) skips interim
        steps, never the final one."""

    async def notify_private(self, text: str) -> None:
        """Tell only the author (Slack: ephemeral; Discord: ephemeral or DM; console: print),
        e.g. a refused admin command or a non-expert trying to resume."""

    def reference(self) -> dict[str, Any]:
        """A JSON-serialisable reference from which the adapter can rebuild this responder
        after a restart (to post the apology when a help request times out)."""

    # ---- optional abilities: defaults for platforms that cannot ----------------------
    async def clear_status(self) -> None:
        """Take the status shown on the user's message off again (a message acknowledged on
        receipt that turned out not to be a new question). Default: the status stays."""
        return None

    async def may_show(self, status: Status) -> None:
        """The user's message may already show ``status`` (an earlier delivery's: the
        apology of a turn that failed and is now handled again), so the next status shown
        replaces it. Default: nothing is known, nothing is replaced."""
        return None

    async def permalink(self) -> str:
        """A link to the thread, saved with a learned entry so people can read where it came
        from. Default: "" (no link)."""
        return ""
