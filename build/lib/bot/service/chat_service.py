"""ChatService: the platform-neutral chat runtime.

One :class:`~bot.protocol.IncomingMessage` in -> dedup -> (empty question | admin
command | reply to a pending help request | new graph run) -> statuses, answer, apology
or help request out through the adapter's :class:`~bot.protocol.Responder`.

Guarantees (failure-modes.md):
- a message id is handled once, persisted across restarts (:mod:`bot.storage`);
- messages of one thread run in arrival order (a ticket per message, taken on receipt:
  :mod:`bot.service.threads`), different
  threads run concurrently (capped by ``service.max_concurrent_runs``);
- a thread with a pending interrupt is resumed (``Command(resume=...)``), never restarted;
  a help request resumes exactly once: each reply (text or button) claims the interrupt
  id pending when it arrived, atomically in the store; the loser is told privately;
  no human in time -> the apology (the timeout claims too);
- any failure of a run ends in the apology and the apology reaction, never a traceback;
  a failure to save (full or read-only disk) ends in an apology that says so;
- a run in flight is recorded in the store; a crash leaves it there and the next start
  continues it or apologises (:mod:`bot.service.recovery`); the final status is one of done,
  apology or waiting, and done only when the answer was posted (:class:`PostError`).
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, cast

from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.types import Durability, Interrupt

from bot.metrics import TurnObserver
from bot.protocol import HumanAction, IncomingMessage, Responder
from bot.service import acknowledge, dispatch, feedback, help_requests, learning, recovery
from bot.service.dedup import forget_old
from bot.service.graph_pool import GraphPool
from bot.service.responders import Responders
from bot.service.run_slots import RunSlots, SlotPromise
from bot.service.runs import TurnResult
from bot.service.threads import ThreadLocks, Ticket
from bot.storage import BookkeepingStore, checkpoints
from graphs.adaptive_rag import seed_history
from graphs.learned import LearnedStore
from graphs.state import RAGState

if TYPE_CHECKING:
    from bot.admin import AdminCommands
    from graphs.adaptive_rag import RAGGraph

log = logging.getLogger("bot.service")  # one logger for the chat runtime: log filters name it


class ChatService:
    """Platform-neutral chat runtime over a compiled graph with a checkpointer.

    Args:
        graph: the compiled adaptive RAG graph (with an AsyncSqliteSaver).
        store: bookkeeping (dedup, help requests, audit).
        admin: the admin command handler (:class:`bot.admin.AdminCommands`).
        help_timeout_seconds: a help request unanswered this long ends in the apology.
        max_concurrent_runs: graph runs in flight across all threads.
        recursion_limit: LangGraph recursion limit (budgets end loops long before it).
        empty_question_reply: reply to a message with no text (costs no LLM call).
        keep_checkpoints: checkpoints kept per thread after each run (older ones pruned).
        max_question_characters: longer messages get a polite refusal (they would not fit
            the model's context window).
        dedup_retention_seconds: handled message ids older than this are forgotten by
            :meth:`recover` (redeliveries come within minutes).
        resume_window_seconds: a run left unfinished by a crash is continued from its last
            checkpoint after a restart when it started less than this long ago; older ones
            get the apology (:mod:`bot.service.recovery`).
        storage_apology: the apology when the bot cannot save (disk full or read-only).
        scope_for: ``(platform, channel id, channel name) -> dict``: what a run in that
            channel may use (``[[channels]]``, :func:`bot.chat.channels.run_scope`), passed
            to the graph as ``configurable["scope"]``; None: everything.
        learned: where experts' answers are saved as knowledge (:mod:`graphs.learned`); None: not saved.
        human_review: ``[graph] human_review``: a 👎 may ask the experts (:meth:`escalate`).
        durability: ``[service] checkpoint_durability``, LangGraph's durability mode of a run:
            ``"exit"`` saves the state when the run ends or pauses (a crash mid-run starts it
            again from its input, :mod:`bot.service.recovery`), ``"async"``/``"sync"`` after every step.

    The settings have no defaults here: their one default is in the settings models
    (``[service]`` and ``[graph]`` of :mod:`bot.config`), passed in by :mod:`bot.runtime`.
    """

    def __init__(
        self,
        graph: RAGGraph,
        store: BookkeepingStore,
        admin: AdminCommands,
        *,
        help_timeout_seconds: float,
        max_concurrent_runs: int,
        recursion_limit: int,
        empty_question_reply: str,
        keep_checkpoints: int,
        max_question_characters: int,
        dedup_retention_seconds: float,
        resume_window_seconds: float,
        storage_apology: str,
        human_review: bool,
        durability: Durability,
        answer_note: str = "",
        scope_for: Callable[[str, str, str], dict[str, Any]] | None = None,
        learned: LearnedStore | None = None,
    ):
        self.graph = graph
        self.graph_pool: GraphPool | None = None  # graph worker processes that run the graph (runtime.py)
        self.durability = durability
        self.human_review = human_review
        self.scope_for = scope_for
        self.learned = learned
        self.answer_note = answer_note  # shown with every answer, e.g. "chat model unavailable"
        self.store = store
        self.admin_commands = admin
        self.help_timeout_seconds = help_timeout_seconds
        self.recursion_limit = recursion_limit
        self.empty_question_reply = empty_question_reply
        self.keep_checkpoints = keep_checkpoints
        self.max_question_characters = max_question_characters
        self.dedup_retention_seconds = dedup_retention_seconds
        self.resume_window_seconds = resume_window_seconds
        self.storage_apology = storage_apology
        self.recovery_task: asyncio.Task | None = None  # runs left unfinished, being finished (recovery.py)
        self.watch_task: asyncio.Task | None = None  # replicas: leases and takeovers (recovery.watch)
        self.slots = RunSlots(max_concurrent_runs)  # graph runs in flight (or promised), across threads
        # acknowledged on receipt (acknowledge.py): message id -> (responder, slot promise) until
        # its handle() takes it; ids recently acknowledged, so a second delivery shows nothing
        self.acks: dict[str, tuple[Responder, SlotPromise]] = {}
        self.acked: OrderedDict[str, None] = OrderedDict()
        self.finished: set[str] = set()  # runs whose record errors.finish_run deleted (read by dispatch)
        self.threads = ThreadLocks(store)  # one message of a thread at a time
        self.responders = Responders()  # the platforms' responder factories
        self.timers: dict[str, asyncio.Task] = {}  # help-request timeouts by thread key
        self.observer = TurnObserver()  # metrics (bot.metrics); its callbacks join every graph run

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
        self.responders.register(platform, factory, ready)

    def run_config(self, key: str) -> RunnableConfig:
        """The LangGraph run config of thread ``key`` (thread id, recursion limit)."""
        return {"configurable": {"thread_id": key}, "recursion_limit": self.recursion_limit}

    # ---- queries -----------------------------------------------------------------
    @property
    def saver(self) -> BaseCheckpointSaver:
        """The graph's checkpointer (the service's graph is always compiled with one)."""
        saver = self.graph.checkpointer
        if not isinstance(saver, BaseCheckpointSaver):
            raise TypeError("the ChatService's graph was compiled without a checkpointer")
        return saver

    async def pending_interrupt(self, thread_key: str) -> Interrupt | None:
        """The pending LangGraph interrupt of a thread (with ``.id`` and ``.value``, a
        :class:`graphs.state.HelpPayload`), or None."""
        state = await self.graph.aget_state(self.run_config(thread_key))
        return state.interrupts[0] if state.interrupts else None

    async def knows_thread(self, thread_key: str) -> bool:
        """True if the bot already took part in this thread: a checkpoint exists, or it
        handled a message there (e.g. replied to a bare mention)."""
        if await self.saver.aget_tuple(self.run_config(thread_key)) is not None:
            return True
        return await self.store.has_thread(thread_key)

    async def thread_keys(self, prefix: str = "") -> list[str]:
        """Saved thread keys starting with ``prefix`` (from the checkpoint file)."""
        return await checkpoints.thread_keys(self.saver, prefix)

    async def thread_values(self, thread_key: str) -> RAGState:
        """The saved state of a thread ({} if none)."""
        return cast(RAGState, dict((await self.graph.aget_state(self.run_config(thread_key))).values or {}))

    async def seed_history(self, thread_key: str, history: list[dict[str, str]]) -> None:
        """Write earlier turns (``[{"role": "user"|"assistant", "content": str}]``) into a
        thread, as if they had been asked (eval follow-ups)."""
        msgs = [HumanMessage(h["content"]) if h["role"] == "user" else AIMessage(h["content"]) for h in history]
        if msgs:
            await seed_history(self.graph, self.run_config(thread_key), msgs)

    # ---- entry points ------------------------------------------------------------
    async def remember_recent_messages(self) -> int:
        """Load the ids of the messages handled lately (by an earlier process too), so a
        redelivery after a restart is known in memory and never acknowledged again (called
        once at start, before any message; a failure is logged and only costs that). Returns how many."""
        return await acknowledge.remember_recent_messages(self)

    async def acknowledge(self, msg: IncomingMessage, out: Responder) -> bool:
        """Show at once that a question arrived: the received status, or queued when the
        run slots are all taken or promised (issue 11: acknowledge on receipt; the
        first reaction waits for no storage, checkpointer or platform lookup).

        Decided in memory only: a message that may not be a new question (empty, too
        long, a command, an expert's ``answer:``/``retry:``/``dismiss``, a thread waiting
        for an expert) and a message id acknowledged before are left to :meth:`handle`,
        which shows what they need. Adapters may call this before their own lookups (a
        user's name) and must then pass the same ``out`` to :meth:`handle`, or call
        :meth:`release_acknowledgement` if they do not; :meth:`handle` calls it itself.
        Returns True if a status was shown by this call; a later delivery of the same
        message in this process is then a duplicate for :meth:`handle`. Never raises."""
        return await acknowledge.acknowledge(self, msg, out)

    def release_acknowledgement(self, message_id: str, out: Responder) -> None:
        """Give back the run slot promised to ``message_id`` by :meth:`acknowledge` through
        ``out`` when its :meth:`handle` will not run (idempotent)."""
        acknowledge.release(self, message_id, out)

    def ticket(self, thread_key: str) -> Ticket:
        """A message's place in its thread's queue, taken the moment it is received: call it
        in the first step of the task that handles a delivery, before any lookup (a user's
        name, "does the bot take part here"), pass it to :meth:`handle`, and
        ``self.threads.release`` it if :meth:`handle` is not called. Without one,
        :meth:`handle` takes its own on entry."""
        return self.threads.ticket(thread_key)

    async def handle(self, msg: IncomingMessage, out: Responder, ticket: Ticket | None = None) -> TurnResult | None:
        """Handle one user message (see the module docstring and :mod:`bot.service.dispatch`).
        Never raises. ``ticket`` (:meth:`ticket`) is released when it returns.

        A plain question is acknowledged first (:meth:`acknowledge`), before any storage
        work. The message is recorded as a run in flight *with* its dedup mark, so a crash
        before it is answered is found again by :meth:`recover` (not lost), and a
        redelivery after the restart is ignored (not answered twice).

        Returns the run's :class:`TurnResult`, or None when no run happened (duplicate,
        empty or too long message, admin command, refused or non-command reply)."""
        return await dispatch.handle(self, msg, out, ticket)

    async def ask(self, thread_key: str, text: str, out: Responder, platform: str = "console") -> TurnResult | None:
        """One message from the local user (CLI ``ask``, eval): no dedup; the local user is
        admin and expert. Same checks as :meth:`handle` otherwise. Never raises."""
        return await dispatch.ask(self, thread_key, text, out, platform)

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
        channel, for its ``[[channels]]`` settings; :mod:`bot.service.help_requests`).

        Exactly one reply resumes a help request (text or button, any platform): the
        first to claim its interrupt id in the store. Returns False (after telling the
        actor privately) when the actor is not an expert, the request was already
        claimed or resumed, or ``interrupt_id`` names an older help request. Never raises.
        """
        return await help_requests.resume(
            self,
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
        """Run an admin command (``reindex``, ``status``, ``help``). Never raises."""
        try:
            await self.admin_commands.run(command, actor_id=actor_id, is_admin=is_admin, out=out)
        except Exception:  # noqa: BLE001
            log.exception("admin command %s failed", command)
            await out.post_notice(f"Sorry, `{command}` failed; the logs have the details.")

    async def remember(self, msg: IncomingMessage, text: str, out: Responder) -> None:
        """``remember: <text>`` from an expert in a thread: a learned entry answering the
        thread's last question (or standing alone). Others are refused privately."""
        await learning.remember(self, msg, text, out)

    async def escalate(self, answer_id: str, *, actor_id: str, actor_name: str, out: Responder) -> bool:
        """A 👎'd answer goes to the experts: a help request in the answer's thread about its
        question (the graph resumes at ``human_review``; an expert's answer is then posted
        and learned like any other). ``out`` must write to that thread. Returns False (after
        telling the actor privately) when the answer is unknown, human review is off, or the
        thread already waits for an expert. The actor's 👎 reason, if any, is the request's "why".
        Never raises."""
        return await feedback.escalate(self, answer_id, actor_id=actor_id, actor_name=actor_name, out=out)

    async def vote(self, answer_id: str, user_id: str, vote: int, reason: str | None = None) -> bool:
        """Record a 👍 (``vote`` = 1) or 👎 (-1) on a posted answer; one vote per user and
        answer, the latest counts. ``reason`` (a 👎's optional reason) None keeps the
        reason given earlier. Returns False when the answer is unknown or the vote could
        not be saved (logged). Never raises."""
        return await feedback.vote(self, answer_id, user_id, vote, reason)

    # ---- lifecycle ---------------------------------------------------------------
    async def recover(self) -> int:
        """After a start: re-arm the timeouts of help requests left open by an earlier
        process, prune old message ids and claims, and finish the runs an earlier process
        left unfinished (a crash, ``kill -9``) in the background (:mod:`bot.service.recovery`).
        Call after the platforms are registered (or about to be: recovery waits up to
        ``platform_wait_seconds`` for a run's platform). Returns how many help requests
        were re-armed."""
        await forget_old(self)
        rows = await self.store.open_help_requests()
        help_requests.rearm(self, rows)
        if rows:
            log.info("re-armed %d open help requests", len(rows))
        runs = await self.store.unfinished_runs()
        if runs:
            log.info("%d runs were left unfinished by the last process: recovering them", len(runs))
            places = recovery.queue_places(self, runs)  # before any new message of those threads
            self.recovery_task = asyncio.create_task(recovery.recover_runs(self, places), name="recover-runs")
        if self.store.shared and self.watch_task is None:
            self.watch_task = asyncio.create_task(recovery.watch(self), name="replica-watch")
        return len(rows)

    def busy(self) -> bool:
        """True while a run (or a recovery) is in flight: a graceful stop waits for it."""
        return self.threads.busy() or (self.recovery_task is not None and not self.recovery_task.done())

    async def drain(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds until no run is in flight. Returns True if none is left."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self.busy() and loop.time() < deadline:
            await asyncio.sleep(0.05)
        return not self.busy()

    async def close(self) -> None:
        """Stop the replica watch, the help-request timers and a recovery in flight."""
        if self.watch_task is not None:
            self.watch_task.cancel()
            await asyncio.gather(self.watch_task, return_exceptions=True)
        for t in self.timers.values():
            t.cancel()
        self.timers.clear()
        if self.recovery_task is not None and not self.recovery_task.done():
            self.recovery_task.cancel()
            await asyncio.gather(self.recovery_task, return_exceptions=True)
