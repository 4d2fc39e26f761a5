"""The bookkeeping contract, split by concern: what the chat runtime needs from a backend.

A backend is one class that satisfies every concern below (:class:`BookkeepingStore`):
:class:`bot.storage.sqlite.SqliteBookkeeping` (one process, one file) and
:class:`bot.storage.postgres.PostgresBookkeeping` (replicas sharing one database). The
behaviour each method promises is pinned by ``tests/test_storage_conformance.py``, which runs
the same cases against both: a third backend passes that suite, nothing more is asked of it.

The concerns (each a Protocol; the runtime's parts are typed against the smallest one they use):

- :class:`Deliveries`: which platform messages were handled (deduplication across restarts
  and replicas).
- :class:`RunLedger`: the runs in flight, so a crash or a dead replica loses none; leases and
  fencing where several processes share the store.
- :class:`Coordination`: per-thread order and exclusive jobs across processes, and the index
  generation every replica serves.
- :class:`HelpDesk`: open help requests and the claims that let exactly one human reply resume
  a paused run.
- :class:`Feedback`: posted answers and the 👍/👎 votes on them.
- :class:`AuditLog`: the admin commands run, allowed or not.

The learned entries (experts' answers kept as knowledge) have their own contract in the
graph package, :class:`graphs.learned.LearnedStore`, since the graph searches them; each
backend provides one (:attr:`bot.storage.Storage.learned`).

Times are epoch seconds (``time.time()``) unless a method says otherwise; JSON-able dicts
go in and come back equal.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:  # importing bot.storage stays light: the CLI loads these libraries only where used
    from langgraph.checkpoint.base import BaseCheckpointSaver

    from graphs.learned import LearnedStore


@runtime_checkable
class Deliveries(Protocol):
    """Handled message ids (deduplication)."""

    async def mark_seen(
        self, message_id: str, thread_key: str, run: tuple[str, dict[str, Any], dict[str, Any]] | None = None
    ) -> bool:
        """Record a message id; True the first time (on any process sharing the store),
        False for every repeated delivery.

        With ``run = (platform, responder reference, message record)`` the message is also
        queued as a run in flight (run id = ``message_id``, stage ``queued``) in the same
        transaction: from then on a crash cannot lose it (:meth:`RunLedger.unfinished_runs`)."""
        ...

    async def thread_of(self, message_id: str) -> str | None:
        """The thread key a handled message id was recorded with, or None."""
        ...

    async def has_thread(self, thread_key: str) -> bool:
        """True if a message of this thread was handled before."""
        ...

    async def recent_message_ids(self, seconds: float, limit: int) -> list[str]:
        """Ids of the messages handled in the last ``seconds`` (the newest ``limit``, oldest first)."""
        ...

    async def forget_message(self, message_id: str) -> None:
        """Forget one handled message id (its turn failed and said so): a redelivery of the
        message is then a first delivery again. Nothing happens for an unknown id."""
        ...

    async def forget_seen_before(self, seconds: float) -> int:
        """Drop the ids handled more than ``seconds`` ago; returns how many."""
        ...


@runtime_checkable
class RunLedger(Protocol):
    """Runs in flight (crash recovery, takeover of a dead replica's runs).

    A run's row: ``run_id, thread_key, platform, reference, message, input,
    checkpoint_before, started_at, stage`` with stage ``queued`` | ``running`` | ``posting``
    | ``posted``."""

    async def run_started(
        self,
        run_id: str,
        thread_key: str,
        platform: str,
        reference: dict[str, Any],
        graph_input: dict[str, Any],
        checkpoint_before: str,
    ) -> bool:
        """Record that the graph is about to run (a queued message's row becomes ``running``).

        Args:
            run_id: the message id for a user message, else a made-up unique id.
            reference: the responder's :meth:`~bot.protocol.Responder.reference`.
            graph_input: JSON-able input to start the run again: ``{"question": str}`` or
                ``{"resume": {...}, "interrupt_id": str}``.
            checkpoint_before: the thread's newest checkpoint id before the run ("" if none),
                telling a recovery whether the run saved anything.

        Returns:
            False when the run is no longer this process's (another replica took it over or
            finished it): the caller must not run it.
        """
        ...

    async def update_run(
        self, run_id: str, *, reference: dict[str, Any] | None = None, stage: str | None = None
    ) -> None:
        """Refresh a run's responder reference and/or stage (``posted``: only the final
        reaction is left). A run another process holds is left alone."""
        ...

    async def finish_run(self, run_id: str) -> None:
        """Forget a run that ended (answered, apologised for, paused for a human, or no run needed)."""
        ...

    async def run_in_flight(self, run_id: str) -> bool:
        """True while the run is queued or running (on any process sharing the store)."""
        ...

    async def unfinished_runs(self) -> list[dict[str, Any]]:
        """The runs to recover, oldest first: in one process every run not finished; with
        replicas, the runs whose lease expired, each handed to one caller only."""
        ...

    async def renew_leases(self) -> int:
        """Extend the leases of this process's runs; returns how many (0 without leases).

        Raises:
            Exception: the store cannot be reached (call again later).
        """
        ...

    async def may_post(self, run_id: str) -> bool:
        """Just before a run's result is posted: True if this process still holds the run
        (and it is now marked ``posting``); False if another took it over."""
        ...

    async def holds(self, run_id: str) -> bool:
        """Before a cosmetic step (a status reaction): True while this process holds the run."""
        ...


@runtime_checkable
class Coordination(Protocol):
    """Order and exclusion across the processes that share the store."""

    async def wait_turn(self, run_id: str, thread_key: str) -> None:
        """Wait until the thread's runs that arrived before ``run_id`` are finished (bounded)."""
        ...

    def thread_lock(self, thread_key: str) -> AbstractAsyncContextManager[None]:
        """Held while a thread's graph runs: one run per thread across processes."""
        ...

    def exclusive(self, name: str) -> AbstractAsyncContextManager[bool]:
        """Try to take the named job lock for the body; yields False at once when another holds it."""
        ...

    async def index_generation(self, name: str = "knowledge") -> str:
        """The index generation every process should serve ("" if none recorded)."""
        ...

    async def set_index_generation(self, generation: str, name: str = "knowledge") -> None:
        """Record the generation a reindex just built."""
        ...


@runtime_checkable
class HelpDesk(Protocol):
    """Open help requests and the claims on their interrupts."""

    async def open_help_request(
        self,
        thread_key: str,
        platform: str,
        reference: dict[str, Any],
        question: str,
        timeout_seconds: float,
        interrupt_id: str = "",
    ) -> float:
        """Record an open help request (replacing the thread's earlier one); returns its deadline."""
        ...

    async def claim_help_request(self, thread_key: str, by: str) -> dict[str, Any] | None:
        """Move the thread's open help request to resolved; returns ``{platform, reference,
        question}`` to the first caller only, None to the others or when none is open."""
        ...

    async def open_help_requests(self) -> list[dict[str, Any]]:
        """Every open help request: ``thread_key, platform, reference, deadline, interrupt_id``."""
        ...

    async def claim_interrupt(self, interrupt_id: str, thread_key: str, by: str) -> bool:
        """The right to resume the interrupt ``interrupt_id``: True for the first caller only."""
        ...

    async def forget_claims_before(self, seconds: float) -> int:
        """Drop claims older than ``seconds``; returns how many."""
        ...


@runtime_checkable
class Feedback(Protocol):
    """Posted answers and the votes on them."""

    async def record_answer(
        self,
        answer_id: str,
        *,
        thread_key: str,
        platform: str,
        channel: str,
        question: str,
        answer: str,
        kind: str,
        route: str,
        sources: list[dict[str, str]],
        path: list[str],
    ) -> None:
        """Remember a posted answer so votes on it can be summarised and exported.

        Args:
            answer_id: unique id carried by the answer's vote buttons (hex, at most 32 characters).
            channel: the platform channel id ("" when there is none, e.g. the console).
            question: the standalone question (the router's ``state["question"]``).
            kind: ``answer`` | ``direct`` | ``human``. route: ``vectorstore`` | ``websearch`` | ``direct`` | "".
            sources: ``[{"title": str, "location": str}]`` as cited. path: the graph's nodes, in order.
        """
        ...

    async def answer_record(self, answer_id: str) -> dict[str, Any] | None:
        """The answer recorded as ``answer_id`` (the fields of :meth:`record_answer` and ``at``), or None."""
        ...

    async def record_vote(self, answer_id: str, user_id: str, vote: int, reason: str | None = None) -> bool:
        """One vote per user and answer (+1 or -1; a later vote replaces the earlier one).
        ``reason`` None keeps the reason already given with a -1 (a +1 clears it).

        Returns:
            False when the answer is unknown.

        Raises:
            ValueError: ``vote`` is not +1 or -1.
        """
        ...

    async def vote_of(self, answer_id: str, user_id: str) -> dict[str, Any] | None:
        """``{"vote": +1|-1, "reason": str}`` of one user on one answer, or None."""
        ...

    async def feedback_rows(self) -> list[dict[str, Any]]:
        """Every vote with its answer, oldest first: the answer's fields plus ``user_id``,
        ``vote``, ``reason`` and ``voted_at``."""
        ...


@runtime_checkable
class AuditLog(Protocol):
    """Admin commands, allowed or refused."""

    async def audit(self, actor: str, command: str, allowed: bool, detail: str = "") -> None:
        """Append one command to the log."""
        ...

    async def audit_rows(self) -> list[tuple]:
        """``(actor, command, allowed as 0/1, detail)``, oldest first."""
        ...


@runtime_checkable
class BookkeepingStore(Deliveries, RunLedger, Coordination, HelpDesk, Feedback, AuditLog, Protocol):
    """Every concern of one backend. ``shared`` is True when other processes use the same
    store (replicas): then runs carry leases and recovery runs periodically
    (:func:`bot.service.recovery.watch`)."""

    shared: bool

    async def close(self) -> None:
        """Release what the store holds (not the pools it was handed)."""
        ...


@runtime_checkable
class SharedBookkeepingStore(BookkeepingStore, Protocol):
    """A bookkeeping shared by replicas (``shared`` is True): runs carry leases renewed
    every ``lease_seconds / 3``; the runs of a dead replica are taken over every
    ``recovery_interval_seconds``."""

    lease_seconds: float
    recovery_interval_seconds: float


@dataclass
class Storage:
    """An opened backend (:func:`bot.storage.open_storage`).

    Attributes:
        backend: ``"sqlite"`` or ``"postgres"``.
        bookkeeping: the :class:`BookkeepingStore`.
        checkpointer: the LangGraph saver of the threads.
        learned: the experts' answers kept as knowledge, where every process of this
            backend reads them.
        pools: PostgreSQL: the connection pools by role (``queries``, ``thread_locks``,
            ``learned``), for health and tests; SQLite: empty.
    """

    backend: str
    bookkeeping: BookkeepingStore
    checkpointer: BaseCheckpointSaver
    learned: LearnedStore
    pools: dict[str, Any]
