"""ChatService: the platform-neutral chat runtime, and the one face adapters talk to.

One :class:`~bot.protocol.IncomingMessage` in -> dedup -> (no words | too long | admin
command | reply to a pending help request | new graph run) -> statuses, answer, apology
or help request out through the adapter's :class:`~bot.protocol.Responder`.

Guarantees:
- a message id is handled once, persisted across restarts (:mod:`bot.service.dedup`); a
  turn that failed forgets it, so the platform's redelivery is answered;
- messages of one thread run in arrival order (a ticket per message, taken on receipt:
  :mod:`bot.service.thread_locks`), different threads run concurrently (capped by
  ``[service] max_concurrent_runs``);
- a thread with a pending interrupt is resumed (``Command(resume=...)``), never restarted;
  a help request resumes exactly once (:mod:`bot.service.help_desk`); no human in time ->
  the apology (:mod:`bot.service.help_timeouts`);
- any failure of a run ends in the apology and the apology status, never a traceback;
  a failure to save (full or read-only disk, the database away) ends in an apology that says so;
- a run in flight is recorded in the store; a crash leaves it there and the next start
  continues it or apologises (:mod:`bot.service.recovery`).

The parts are built here from the settings, each handed only what it uses; none of them
knows this class.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from langgraph.types import Interrupt

from bot.config import Settings
from bot.metrics import TurnObserver
from bot.protocol import HumanAction, IncomingMessage, Responder
from bot.service.acknowledgements import Acknowledgements
from bot.service.apologies import Apologies
from bot.service.conversations import Conversations
from bot.service.dedup import Dedup
from bot.service.dispatch import Commands, Dispatcher
from bot.service.feedback import Feedback
from bot.service.graph_pool import GraphPool
from bot.service.help_desk import HelpDesk
from bot.service.help_timeouts import HelpTimeouts
from bot.service.intake import Intake, Kind
from bot.service.learning import Learning, ScopeFor
from bot.service.recovery import Recovery
from bot.service.responders import Responders
from bot.service.run_records import RunRecords
from bot.service.run_slots import RunSlots
from bot.service.runs import Runs, TurnResult
from bot.service.thread_locks import ThreadLocks, Ticket
from bot.storage import BookkeepingStore
from graphs.adaptive_rag import RAGGraph
from graphs.knowledge import KnowledgeBase
from graphs.learned import LearnedStore
from graphs.state import RAGState


class Admin(Commands, Protocol):
    """The admin commands as the service uses them (:class:`bot.admin.AdminCommands`)."""

    def parse(self, text: str) -> str | None:
        """The admin command ``text`` is exactly, else None."""


class ChatService:
    """Platform-neutral chat runtime over a compiled graph with a checkpointer.

    Args:
        graph: the compiled adaptive RAG graph (with a checkpointer).
        store: the bookkeeping (dedup, run records, help requests, answers and votes).
        admin: the admin commands (:class:`bot.admin.AdminCommands`: ``parse``, ``run``).
        settings: the settings: ``[service]`` (timeouts, limits, replies, durability),
            ``[graph]`` (``recursion_limit``, ``human_review``) and, when the store is shared
            (PostgreSQL), ``[storage] database_apology``.
        max_concurrent_runs: ``[service] max_concurrent_runs`` with ``"auto"`` resolved for
            the model (:func:`bot.runtime.resolve_concurrency`); None: the setting, which must be a number.
        knowledge: the knowledge base, whose index generation replicas watch; None: not watched.
        learned: where experts' answers are saved (:mod:`graphs.learned`); None: not saved.
        scope_for: ``(platform, channel id, channel name) -> dict``: what a run in that channel
            may use (``[[channels]]``, :func:`bot.chat.channels.run_scope`); None: everything.
        answer_note: shown with every answer, e.g. that the chat model is unavailable.
        observer: metrics (:class:`bot.metrics.TurnObserver`); default: one that ignores them.
        graph_pool: graph worker processes that run the graph; None: it runs in this process.

    Raises:
        TypeError: the graph was compiled without a checkpointer.
    """

    def __init__(
        self,
        graph: RAGGraph,
        store: BookkeepingStore,
        admin: Admin,
        settings: Settings,
        *,
        max_concurrent_runs: int | None = None,
        knowledge: KnowledgeBase | None = None,
        learned: LearnedStore | None = None,
        scope_for: ScopeFor | None = None,
        answer_note: str = "",
        observer: TurnObserver | None = None,
        graph_pool: GraphPool | None = None,
    ) -> None:
        s = settings.service
        runs_at_once = max_concurrent_runs if max_concurrent_runs is not None else s.max_concurrent_runs
        if not isinstance(runs_at_once, int):
            raise TypeError("max_concurrent_runs must be resolved to a number (bot.runtime.resolve_concurrency)")
        self.observer = observer or TurnObserver()

        self._responders = Responders()
        slots = RunSlots(runs_at_once)
        self._locks = ThreadLocks(store)
        self._conversations = Conversations(
            graph, store, recursion_limit=settings.graph.recursion_limit, keep_checkpoints=s.keep_checkpoints_per_thread
        )
        apologies = Apologies(
            s.apology, settings.storage.database_apology if store.shared else s.storage_apology, store
        )
        records = RunRecords(store)
        self._intake = Intake(
            max_question_characters=s.max_question_characters,
            empty_question_reply=s.empty_question_reply,
            command_of=admin.parse,
        )
        timeouts = HelpTimeouts(s.help_timeout_seconds, self._expire)
        self._timeouts = timeouts
        self._acks = Acknowledgements(slots, store, self._intake, timeouts.waiting)
        dedup = Dedup(store, self._acks, apologies, retention_seconds=s.dedup_retention_days * 86400)
        self._learning = Learning(
            learned, self._conversations, scope_for, None if knowledge is None else knowledge.sources
        )
        runs = Runs(
            self._conversations,
            store,
            records,
            apologies,
            timeouts,
            self._learning,
            self.observer,
            durability=s.checkpoint_durability,
            graph_pool=graph_pool,
            scope_for=scope_for,
            answer_note=answer_note,
        )
        self._help_desk = HelpDesk(
            store, self._conversations, self._locks, slots, runs, self._responders, timeouts, apologies
        )
        self._feedback = Feedback(
            store, self._conversations, self._locks, slots, runs, human_review=settings.graph.human_review
        )
        self._dispatcher = Dispatcher(
            intake=self._intake,
            acks=self._acks,
            dedup=dedup,
            locks=self._locks,
            slots=slots,
            store=store,
            conversations=self._conversations,
            help_desk=self._help_desk,
            learning=self._learning,
            runs=runs,
            records=records,
            apologies=apologies,
            commands=admin,
            observer=self.observer,
        )
        self._recovery = Recovery(
            store=store,
            conversations=self._conversations,
            locks=self._locks,
            slots=slots,
            responders=self._responders,
            runs=runs,
            dispatcher=self._dispatcher,
            help_desk=self._help_desk,
            dedup=dedup,
            knowledge=knowledge,
            resume_window_seconds=s.resume_window_seconds,
        )
        self._store = store
        self._slots = slots

    async def _expire(self, thread_key: str, interrupt_id: str) -> None:
        await self._help_desk.expire(thread_key, interrupt_id)

    # ---- wiring ------------------------------------------------------------------
    def register_platform(
        self,
        platform: str,
        factory: Callable[[dict[str, Any]], Responder],
        ready: Callable[[], Awaitable[Any]] | None = None,
    ) -> None:
        """Let the service rebuild a responder from ``Responder.reference()`` (after a restart).

        ``ready`` (optional) is awaited before a rebuilt responder is used by crash
        recovery, e.g. the Discord client's ``wait_until_ready`` (it cannot post before login).
        """
        self._responders.register(platform, factory, ready)

    # ---- queries -----------------------------------------------------------------
    @property
    def human_review(self) -> bool:
        """``[graph] human_review``: a 👎'd answer may be sent to the experts (:meth:`escalate`)."""
        return self._feedback.human_review

    @property
    def help_timeout_seconds(self) -> float:
        """``[service] help_timeout_seconds``: how long a help request stays open."""
        return self._timeouts.seconds

    def command_of(self, text: str) -> str | None:
        """The admin command ``text`` is exactly (``reindex``, ``learned forget 3``...), else None."""
        return self._intake.command_of(text)

    async def pending_interrupt(self, thread_key: str) -> Interrupt | None:
        """The pending LangGraph interrupt of a thread (with ``.id`` and ``.value``, a
        :class:`graphs.state.HelpPayload`), or None."""
        return await self._conversations.pending_interrupt(thread_key)

    def is_question(self, text: str) -> bool:
        """True when ``text`` would be asked as a question (it has words, is no admin command,
        no ``remember:`` and no reply to a help request in the reply syntax)."""
        return self._intake.kind(text) is Kind.QUESTION

    async def waits_for_expert(self, thread_key: str) -> bool:
        """True while the thread's run is paused on a help request (an expert's reply resumes it)."""
        return await self._conversations.pending_interrupt(thread_key) is not None

    async def knows_thread(self, thread_key: str) -> bool:
        """True if the bot already took part in this thread: a checkpoint exists, or it
        handled a message there (e.g. replied to a bare mention)."""
        return await self._conversations.knows(thread_key)

    async def thread_keys(self, prefix: str = "") -> list[str]:
        """Saved thread keys starting with ``prefix`` (from the checkpointer)."""
        return await self._conversations.keys(prefix)

    async def thread_values(self, thread_key: str) -> RAGState:
        """The saved state of a thread ({} if none)."""
        return await self._conversations.values(thread_key)

    async def seed_history(self, thread_key: str, history: list[dict[str, str]]) -> None:
        """Write earlier turns (``[{"role": "user"|"assistant", "content": str}]``) into a
        thread, as if they had been asked (eval follow-ups)."""
        await self._conversations.seed(thread_key, history)

    async def thread_of(self, message_id: str) -> str | None:
        """The thread key a handled message was recorded with (e.g. the conversation a
        Discord reply continues), or None."""
        return await self._store.thread_of(message_id)

    async def answer_record(self, answer_id: str) -> dict[str, Any] | None:
        """The record of a posted answer (``thread_key``, ``platform``, ``channel``,
        ``question``...), None when unknown. Never raises."""
        return await self._feedback.answer(answer_id)

    def runs_wanted(self) -> int:
        """Questions holding, waiting for or promised a run slot (0 when idle)."""
        return self._slots.wanted

    # ---- entry points ------------------------------------------------------------
    async def remember_recent_messages(self) -> int:
        """Load the ids of the messages handled lately (by an earlier process too), so a
        redelivery after a restart is known in memory and never acknowledged again (called
        once at start, before any message; a failure is logged and only costs that). Returns how many."""
        return await self._acks.remember_recent()

    async def acknowledge(self, msg: IncomingMessage, out: Responder) -> bool:
        """Show at once that a question arrived: the received status, or queued when the
        run slots are all taken or promised (the first reaction waits for no storage,
        checkpointer or platform lookup).

        Decided in memory only: a message that may not be a new question (no words, too
        long, a command, an expert's ``answer:``/``retry:``/``dismiss``, a thread waiting
        for an expert) and a message id acknowledged before are left to :meth:`handle`,
        which shows what they need. Adapters may call this before their own lookups (a
        user's name) and must then pass the same ``out`` to :meth:`handle`, or call
        :meth:`release_acknowledgement` if they do not; :meth:`handle` calls it itself.
        Returns True if a status was shown by this call; a later delivery of the same
        message in this process is then a duplicate for :meth:`handle`. Never raises."""
        return await self._acks.acknowledge(msg, out)

    def release_acknowledgement(self, message_id: str, out: Responder) -> None:
        """Give back the run slot promised to ``message_id`` by :meth:`acknowledge` through
        ``out`` when its :meth:`handle` will not run (idempotent)."""
        self._acks.release(message_id, out)

    def ticket(self, thread_key: str) -> Ticket:
        """A message's place in its thread's queue, taken the moment it is received: call it
        in the first step of the task that handles a delivery, before any lookup (a user's
        name, "does the bot take part here"), pass it to :meth:`handle`, and
        :meth:`release_ticket` it if :meth:`handle` is not called. Without one,
        :meth:`handle` takes its own on entry."""
        return self._locks.ticket(thread_key)

    def release_ticket(self, ticket: Ticket) -> None:
        """End a ticket's turn (idempotent; :meth:`handle` releases the ticket it is given)."""
        self._locks.release(ticket)

    async def handle(self, msg: IncomingMessage, out: Responder, ticket: Ticket | None = None) -> TurnResult | None:
        """Handle one user message (see the module docstring and :mod:`bot.service.dispatch`).
        Never raises. ``ticket`` (:meth:`ticket`) is released when it returns.

        A plain question is acknowledged first (:meth:`acknowledge`), before any storage
        work. The message is recorded as a run in flight *with* its dedup mark, so a crash
        before it is answered is found again by :meth:`recover` (not lost), and a
        redelivery after the restart is ignored (not answered twice).

        Returns the run's :class:`TurnResult`, or None when no run happened (duplicate,
        no words or too long, admin command, refused or non-command reply)."""
        return await self._dispatcher.handle(msg, out, ticket)

    async def ask(self, thread_key: str, text: str, out: Responder, platform: str = "console") -> TurnResult | None:
        """One message from the local user (CLI ``ask``, eval): no dedup; the local user is
        admin and expert. Same checks as :meth:`handle` otherwise. Never raises."""
        return await self._dispatcher.ask(thread_key, text, out, platform)

    async def mark_handled(self, message_id: str, thread_key: str) -> bool:
        """Record ``message_id`` as handled without a run (e.g. an outsider's message refused):
        True the first time, False for a redelivery. Raises the store's errors."""
        return await self._store.mark_seen(message_id, thread_key)

    async def resume(
        self,
        thread_key: str,
        action: HumanAction,
        text: str,
        *,
        actor_id: str,
        actor_name: str,
        is_expert: bool,
        out: Responder,
        interrupt_id: str | None = None,
        channel: str = "",
    ) -> bool:
        """Resume a paused thread from a button or modal (``channel``: the conversation's
        channel, for its ``[[channels]]`` settings; :mod:`bot.service.help_desk`).

        Exactly one reply resumes a help request (text or button, any platform): the
        first to claim its interrupt id in the store. Returns False (after telling the
        actor privately) when the actor is not an expert, the request was already
        claimed or resumed, or ``interrupt_id`` names an older help request. Never raises.
        """
        return await self._help_desk.resume(
            thread_key,
            action,
            text,
            actor_id=actor_id,
            actor_name=actor_name,
            is_expert=is_expert,
            out=out,
            interrupt_id=interrupt_id,
            channel=channel,
        )

    async def admin(self, command: str, *, actor_id: str, is_admin: bool, out: Responder) -> None:
        """Run an admin command (``reindex``, ``status``, ``help``, ``learned ...``). Never raises."""
        await self._dispatcher.admin(command, actor_id=actor_id, is_admin=is_admin, out=out)

    async def remember(self, msg: IncomingMessage, text: str, out: Responder) -> None:
        """``remember: <text>`` from an expert in a thread: a learned entry answering the
        thread's last question (none asked: nothing is saved). Others are refused privately."""
        await self._learning.remember(msg, text, out)

    async def escalate(self, answer_id: str, *, actor_id: str, actor_name: str, out: Responder) -> bool:
        """A 👎'd answer goes to the experts: a help request in the answer's thread about its
        question (the graph resumes at ``human_review``; an expert's answer is then posted
        and learned like any other). ``out`` must write to that thread. Returns False (after
        telling the actor privately) when the answer is unknown, human review is off, or the
        thread already waits for an expert. The actor's 👎 reason, if any, is the request's "why".
        Never raises."""
        return await self._feedback.escalate(answer_id, actor_id=actor_id, actor_name=actor_name, out=out)

    async def vote(self, answer_id: str, user_id: str, vote: int, reason: str | None = None) -> bool:
        """Record a 👍 (``vote`` = 1) or 👎 (-1) on a posted answer; one vote per user and
        answer, the latest counts. ``reason`` (a 👎's optional reason) None keeps the
        reason given earlier. Returns False when the answer is unknown or the vote could
        not be saved (logged). Never raises."""
        return await self._feedback.vote(answer_id, user_id, vote, reason)

    # ---- lifecycle ---------------------------------------------------------------
    async def recover(self) -> int:
        """After a start: re-arm the timeouts of help requests left open by an earlier
        process, prune old message ids and claims, and finish the runs an earlier process
        left unfinished (a crash, ``kill -9``) in the background (:mod:`bot.service.recovery`).
        Call after the platforms are registered (or about to be: recovery waits a while
        for a run's platform). Returns how many help requests were re-armed."""
        return await self._recovery.start()

    def busy(self) -> bool:
        """True while a run (or a recovery) is in flight: a graceful stop waits for it."""
        return self._locks.busy() or self._recovery.busy()

    async def drain(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds until no run is in flight. Returns True if none is left."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self.busy() and loop.time() < deadline:
            await asyncio.sleep(0.05)
        return not self.busy()

    async def close(self) -> None:
        """Stop the replica watch, the help-request timers and a recovery in flight."""
        await self._recovery.close()
        self._timeouts.close()
