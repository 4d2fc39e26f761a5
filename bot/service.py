"""ChatService: the platform-neutral chat runtime.

One :class:`~bot.protocol.IncomingMessage` in -> dedup -> (empty question | admin
command | reply to a pending help request | new graph run) -> statuses, answer, apology
or help request out through the adapter's :class:`~bot.protocol.Responder`.

Guarantees (failure-modes.md):
- a message id is handled once, persisted across restarts (:class:`bot.store.Bookkeeping`);
- messages of one thread run in order (one asyncio lock per thread key), different
  threads run concurrently (capped by ``service.max_concurrent_runs``);
- a thread with a pending interrupt is resumed (``Command(resume=...)``), never restarted;
  a help request resumes exactly once: each reply (text or button) claims the interrupt
  id pending when it arrived, atomically in the store; the loser is told privately;
  no human in time -> the apology (the timeout claims too);
- any failure of a run ends in the apology and the apology reaction, never a traceback;
  a failure to save (full or read-only disk) ends in an apology that says so;
- a run in flight is recorded in the store; a crash leaves it there and the next start
  continues it or apologises (:mod:`bot.recovery`); the final status is one of done,
  apology or waiting, and done only when the answer was posted (:class:`PostError`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
import uuid
from collections import OrderedDict
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import Any, AsyncIterator, Awaitable, Callable

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.types import Command

from bot import checkpoints
from bot.chat.policy import HELP_REFUSAL
from bot.chat.text import REPLY_SYNTAX, parse_human_reply
from bot.failures import describe_failure, failure_kind
from bot.logs import for_thread, with_log_context
from bot.metrics import TurnObserver
from bot.protocol import (Answer, HelpRequest, HumanAction, IncomingMessage, PostError, Responder, Source, Status,
                          clean_text, message_record)
from bot.run_slots import RunSlots, SlotPromise
from bot.store import Bookkeeping
from bot.tracing import run_config
from graphs.learned import LearnedEntry, LearnedStore
from graphs.nodes import scope_of

log = logging.getLogger(__name__)

NODE_STATUS: dict[str, Status] = {
    "rewrite_kb": Status.SEARCHING,
    "retrieve": Status.SEARCHING,
    "rewrite_web": Status.WEB,
    "web_search": Status.WEB,
    "generate": Status.WRITING,
    "direct": Status.WRITING,
}
_OUTCOME_KIND = {"answer": "answer", "direct": "direct", "human": "human", "apology": "apology"}
_REMEMBER_RE = re.compile(r"^\s*/?remember\s*:\s*(\S.*)$", re.I | re.S)
DEFAULT_STORAGE_APOLOGY = ("Sorry, I can't save anything right now (the bot's storage is full or read-only), "
                           "so I can't answer this. Please try again later; the admins have been told in the logs.")

REPLY_HINT = f"This thread is waiting for an expert. Reply with {REPLY_SYNTAX}."


class _NullResponder:
    """Used when a timed-out help request's platform is not running: logs only."""

    async def set_status(self, status: Status) -> None: ...
    async def post_answer(self, answer: Answer) -> None:
        log.info("no adapter to post a %s answer", answer.kind)
    async def post_help_request(self, request: HelpRequest) -> None: ...
    async def post_notice(self, text: str) -> None: ...
    async def update_progress(self, text: str, *, final: bool = False) -> None: ...
    async def notify_private(self, text: str) -> None: ...
    def reference(self) -> dict[str, Any]:
        return {}


@dataclass
class TurnResult:
    """What one run of the graph ended with (for the CLI and eval)."""

    thread_key: str
    answer: Answer | None
    help_request: HelpRequest | None
    values: dict[str, Any]
    seconds: float
    error: str = ""  # one line (bot.failures.describe_failure) when the run failed and ended in the apology


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
            get the apology (:mod:`bot.recovery`).
        storage_apology: the apology when the bot cannot save (disk full or read-only).
        scope_for: ``(platform, channel id, channel name) -> dict``: what a run in that
            channel may use (``[[channels]]``, :func:`bot.chat.channels.run_scope`), passed
            to the graph as ``configurable["scope"]``; None: everything.
        learned: where experts' answers are saved as knowledge (:mod:`graphs.learned`); None: not saved.
        human_review: ``[graph] human_review``: a 👎 may ask the experts (:meth:`escalate`).
        durability: ``[service] checkpoint_durability``, LangGraph's durability mode of a run:
            ``"exit"`` saves the state when the run ends or pauses (a crash mid-run starts it
            again from its input, :mod:`bot.recovery`), ``"async"``/``"sync"`` after every step.
    """

    def __init__(self, graph: Any, store: Bookkeeping, admin: Any, *, help_timeout_seconds: float = 3600.0,
                 max_concurrent_runs: int = 8, recursion_limit: int = 60,
                 empty_question_reply: str = "What would you like to know?", keep_checkpoints: int = 1,
                 max_question_characters: int = 4000, dedup_retention_seconds: float = 7 * 86400,
                 resume_window_seconds: float = 900.0, storage_apology: str = DEFAULT_STORAGE_APOLOGY,
                 answer_note: str = "", scope_for: Callable[[str, str, str], dict[str, Any]] | None = None,
                 learned: LearnedStore | None = None, human_review: bool = True, durability: str = "exit"):
        self.graph = graph
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
        self._recovery: asyncio.Task | None = None
        self._watch: asyncio.Task | None = None  # replicas: leases and takeovers (bot.recovery.watch)
        self._runs = RunSlots(max_concurrent_runs)
        # acknowledged on receipt (issue 11): message id -> (responder, status shown) until
        # its handle() takes it; ids recently acknowledged, so a second delivery shows nothing
        self._acks: dict[str, tuple[Responder, SlotPromise]] = {}
        self._acked: OrderedDict[str, None] = OrderedDict()
        self._finished: set[str] = set()  # runs whose record _finish_run deleted (read by _dispatch_guarded)
        self._locks: dict[str, asyncio.Lock] = {}
        self._lock_users: dict[str, int] = {}
        self._factories: dict[str, Callable[[dict[str, Any]], Responder]] = {}
        self._ready: dict[str, Callable[[], Awaitable[Any]]] = {}
        self._timers: dict[str, asyncio.Task] = {}
        self.observer = TurnObserver()  # metrics (bot.metrics); its callbacks join every graph run

    # ---- wiring ------------------------------------------------------------------
    def register_platform(self, platform: str, factory: Callable[[dict[str, Any]], Responder],
                          ready: Callable[[], Awaitable[Any]] | None = None) -> None:
        """Let the service rebuild a responder from ``Responder.reference()`` (after a restart).

        ``ready`` (optional) is awaited before a rebuilt responder is used by crash
        recovery, e.g. the Discord client's ``wait_until_ready`` (it cannot post before login).
        """
        self._factories[platform] = factory
        if ready is not None:
            self._ready[platform] = ready

    def _responder_from(self, platform: str, reference: dict[str, Any], fallback: Responder | None) -> Responder:
        factory = self._factories.get(platform)
        if factory and reference:
            try:
                return factory(reference)
            except Exception:  # noqa: BLE001
                log.exception("cannot rebuild a %s responder", platform)
        return fallback or _NullResponder()

    @asynccontextmanager
    async def _thread(self, key: str) -> AsyncIterator[None]:
        lock = self._locks.setdefault(key, asyncio.Lock())
        self._lock_users[key] = self._lock_users.get(key, 0) + 1
        try:
            async with lock, self.store.thread_lock(key):  # the store's lock spans replicas (PostgreSQL)
                yield
        finally:
            self._lock_users[key] -= 1
            if not self._lock_users[key]:
                self._locks.pop(key, None)
                self._lock_users.pop(key, None)

    def _cfg(self, key: str) -> dict[str, Any]:
        return {"configurable": {"thread_id": key}, "recursion_limit": self.recursion_limit}

    # ---- queries -----------------------------------------------------------------
    async def pending_interrupt(self, thread_key: str) -> Any | None:
        """The pending LangGraph interrupt of a thread (with ``.id`` and ``.value``), or None."""
        state = await self.graph.aget_state(self._cfg(thread_key))
        return state.interrupts[0] if state.interrupts else None

    async def knows_thread(self, thread_key: str) -> bool:
        """True if the bot already took part in this thread: a checkpoint exists, or it
        handled a message there (e.g. replied to a bare mention)."""
        if await self.graph.checkpointer.aget_tuple(self._cfg(thread_key)) is not None:
            return True
        return await self.store.has_thread(thread_key)

    async def thread_keys(self, prefix: str = "") -> list[str]:
        """Saved thread keys starting with ``prefix`` (from the checkpoint file)."""
        return await checkpoints.thread_keys(self.graph.checkpointer, prefix)

    async def thread_values(self, thread_key: str) -> dict[str, Any]:
        """The saved state of a thread ({} if none)."""
        return dict((await self.graph.aget_state(self._cfg(thread_key))).values or {})

    # ---- entry points ------------------------------------------------------------
    #: Message ids remembered as acknowledged (a second delivery of one shows nothing).
    ACKED_MEMORY = 4096

    def _plain_question(self, msg: IncomingMessage) -> bool:
        """True when ``msg`` is a new question by everything known in memory: text within
        the limit, not a command or an expert's reply syntax, in a thread this process
        does not know to be waiting for an expert."""
        text = msg.text.strip()
        return bool(text and msg.message_id and len(text) <= self.max_question_characters
                    and not _REMEMBER_RE.match(text) and not self.admin_commands.parse(text)
                    and parse_human_reply(text) is None and msg.thread_key not in self._timers)

    #: How far back :meth:`remember_recent_messages` looks (Slack retries an event for
    #: minutes; a Discord gateway resume replays recent messages).
    RECENT_SECONDS = 3600.0

    async def remember_recent_messages(self) -> int:
        """Load the ids of the messages handled lately (by an earlier process too), so a
        redelivery after a restart is known in memory and never acknowledged again (called
        once at start, before any message; a failure is logged and only costs that). Returns how many."""
        try:
            ids = await self.store.recent_message_ids(self.RECENT_SECONDS, self.ACKED_MEMORY)
        except Exception as exc:  # noqa: BLE001 - the dedup mark on disk still catches redeliveries
            log.warning("recent message ids not loaded: %s", describe_failure(exc))
            return 0
        for message_id in ids:
            self._acked[message_id] = None
        while len(self._acked) > self.ACKED_MEMORY:
            self._acked.popitem(last=False)
        return len(ids)

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
        if not self._plain_question(msg) or msg.message_id in self._acked:
            return False
        self._acked[msg.message_id] = None
        while len(self._acked) > self.ACKED_MEMORY:
            self._acked.popitem(last=False)
        promise = self._runs.promise()
        self._acks[msg.message_id] = (out, promise)
        try:
            await out.set_status(Status.QUEUED if promise.queued else Status.RECEIVED)
        except Exception as exc:  # noqa: BLE001 - a status is best effort; the turn goes on
            log.warning("first status not shown: %s", describe_failure(exc), extra=for_thread(msg.thread_key))
        return True

    def release_acknowledgement(self, message_id: str, out: Responder) -> None:
        """Give back the run slot promised to ``message_id`` by :meth:`acknowledge` through
        ``out`` when its :meth:`handle` will not run (idempotent)."""
        promise = self._take_ack(message_id, out)
        if promise is not None:
            promise.cancel()

    def _take_ack(self, message_id: str, out: Responder) -> SlotPromise | None:
        """The run-slot promise made when ``out`` acknowledged ``message_id`` (now the caller's), or None."""
        ack = self._acks.get(message_id)
        if ack is None or ack[0] is not out:
            return None
        del self._acks[message_id]
        return ack[1]

    @with_log_context(thread_key="msg.thread_key", platform="msg.platform", message_id="msg.message_id")
    async def handle(self, msg: IncomingMessage, out: Responder) -> TurnResult | None:
        """Handle one user message (see the module docstring). Never raises.

        A plain question is acknowledged first (:meth:`acknowledge`), before any storage
        work. The message is recorded as a run in flight *with* its dedup mark, so a crash
        before it is answered is found again by :meth:`recover` (not lost), and a
        redelivery after the restart is ignored (not answered twice).

        Returns the run's :class:`TurnResult`, or None when no run happened (duplicate,
        empty or too long message, admin command, refused or non-command reply)."""
        await self.acknowledge(msg, out)
        acked = self._take_ack(msg.message_id, out)
        if acked is None and msg.message_id in self._acked:  # another delivery of it is in this process
            log.info("duplicate delivery of %s ignored", msg.message_id, extra=for_thread(msg.thread_key))
            return None
        try:
            try:
                if not await self.store.mark_seen(msg.message_id, msg.thread_key,
                                                  run=(msg.platform, out.reference(), message_record(msg))):
                    log.info("duplicate delivery of %s ignored", msg.message_id, extra=for_thread(msg.thread_key))
                    if acked is not None:  # e.g. redelivered after a restart: it was handled before
                        await self._clear_status(out)
                    return None
            except Exception as exc:  # noqa: BLE001 - e.g. the disk is full: tell the user, keep serving
                await self._fail(msg.thread_key, exc, out, what=f"recording {msg.message_id}")
                return None
            return await self._dispatch_guarded(msg, out, run_id=msg.message_id, acked=acked)
        finally:
            if acked is not None:
                acked.cancel()  # it did not run (nothing once its slot was held)

    @staticmethod
    async def _clear_status(out: Responder) -> None:
        """Take the status shown on receipt off a message that turned out not to be a new
        question (best effort; a responder without ``clear_status`` keeps it)."""
        clear = getattr(out, "clear_status", None)
        if clear is not None:
            try:
                await clear()
            except Exception as exc:  # noqa: BLE001
                log.warning("status not cleared: %s", describe_failure(exc))

    async def _dispatch_guarded(self, msg: IncomingMessage, out: Responder, *, run_id: str,
                                acked: SlotPromise | None = None) -> TurnResult | None:
        try:
            return await self._dispatch(msg, out, run_id=run_id, acked=acked)
        except Exception as exc:  # noqa: BLE001 - nothing may crash the process
            await self._fail(msg.thread_key, exc, out, what=f"handling {msg.message_id or 'a message'}")
            return None
        finally:
            if run_id in self._finished:  # the usual case: finished when its answer went out
                self._finished.discard(run_id)
            else:
                await self._best_effort(self.store.finish_run(run_id), msg.thread_key)

    @with_log_context(thread_key="thread_key", platform="platform")
    async def ask(self, thread_key: str, text: str, out: Responder, platform: str = "console") -> TurnResult | None:
        """One message from the local user (CLI ``ask``, eval): no dedup; the local user is
        admin and expert. Same checks as :meth:`handle` otherwise. Never raises."""
        msg = IncomingMessage(platform=platform, thread_key=thread_key, message_id="", author_id="console",
                              author_name="console", text=text, is_admin=True, is_expert=True)
        return await self._dispatch_guarded(msg, out, run_id=f"ask:{uuid.uuid4().hex}")

    async def _dispatch(self, msg: IncomingMessage, out: Responder, *, run_id: str,
                        acked: SlotPromise | None = None) -> TurnResult | None:
        text = msg.text.strip()
        key = msg.thread_key
        if not text:
            log.info("empty question from %s", msg.author_id, extra=for_thread(key))
            await out.post_notice(self.empty_question_reply)
            return None
        if len(text) > self.max_question_characters:
            log.info("question of %d characters refused", len(text), extra=for_thread(key))
            await out.post_notice(
                f"That message is too long for me ({len(text):,} characters; the limit is "
                f"{self.max_question_characters:,}). Please shorten it or ask about one part at a time.")
            return None
        remembered = _REMEMBER_RE.match(text)
        if remembered:
            await self.remember(msg, remembered.group(1).strip(), out)
            return None
        command = self.admin_commands.parse(text)
        if command:
            await self.admin(command, actor_id=msg.author_id, is_admin=msg.is_admin, out=out)
            return None
        by = msg.author_name or msg.author_id
        parsed = parse_human_reply(text) if msg.is_expert else None
        # The help request this message answers is the one pending when it *arrived*: a second
        # reply to the same request loses the claim at once, even while the first one runs.
        seen = await self.pending_interrupt(key) if parsed else None
        if seen is not None and not await self._claim(seen.id, key, by, parsed, out):
            return None
        await self.store.wait_turn(run_id, key)  # replicas: the thread's earlier messages first
        async with self._thread(key):
            pending = await self.pending_interrupt(key)
            if pending is not None:
                if acked is not None:  # paused by another replica meanwhile: not a new question after all
                    await self._clear_status(out)
                if not msg.is_expert:
                    log.info("non-expert %s replied to a help request", msg.author_id, extra=for_thread(key))
                    await out.notify_private(
                        "This thread is waiting for an expert's answer; only the people named in the help "
                        "request can resume it. Your message was not sent to the bot.")
                    return None
                if parsed is None:
                    await out.notify_private(REPLY_HINT)
                    return None
                if seen is None:  # it arrived while the bot was still working on the question
                    if not await self._claim(pending.id, key, by, parsed, out):
                        return None
                elif pending.id != seen.id:
                    return await self._already_handled(key, parsed[0], by, out)
                return await self._resume_locked(key, parsed[0], parsed[1], by, out, pending.id, run_id=run_id,
                                                 channel=msg.channel)
            if seen is not None:  # it was a reply, and someone else's reply (or the timeout) won
                return await self._already_handled(key, parsed[0], by, out)
            log.info("question from %s (%d chars)", msg.author_id, len(text), extra=for_thread(key))
            # status first, queue after: the user sees at once that the question arrived, and
            # whether it waits for a run slot (issue 11: the reaction came after the slot).
            # Acknowledged on receipt (the usual case): shown already, and recorded with the
            # dedup mark; "received" becomes "queued" only if its slot went to another run.
            self.observer.question(msg.platform)
            queued = self._runs.locked()
            if acked is None:
                await self._show(run_id, out, Status.QUEUED if queued else Status.RECEIVED)
            elif queued and not acked.queued:
                await self._show(run_id, out, Status.QUEUED)
            async with contextlib.AsyncExitStack() as slot:
                with self.observer.waiting():
                    await slot.enter_async_context(acked.hold() if acked is not None else self._runs.hold())
                return await self._run(key, {"messages": [HumanMessage(text)]}, out, platform=msg.platform,
                                       run_id=run_id,
                                       record={"question": text, "channel": msg.channel,
                                               "channel_name": msg.channel_name}, announced=True)

    async def _claim(self, interrupt_id: str, key: str, by: str, parsed: tuple[HumanAction, str] | None,
                     out: Responder) -> bool:
        """Claim a help request for one reply (atomic in the store). False, after telling the
        replier privately, when another reply or the timeout claimed it first."""
        if parsed and parsed[0] == HumanAction.ANSWER and not parsed[1]:
            await out.notify_private("Please include the answer, e.g. `answer: the setting is X`.")
            return False
        if await self.store.claim_interrupt(interrupt_id, key, by):
            return True
        await self._already_handled(key, parsed[0] if parsed else HumanAction.DISMISS, by, out)
        return False

    async def _already_handled(self, key: str, action: HumanAction, by: str, out: Responder) -> None:
        log.info("%s by %s ignored: the help request was already handled", action.value, by, extra=for_thread(key))
        await out.notify_private("This help request has already been handled.")
        return None

    async def seed_history(self, thread_key: str, history: list[dict[str, str]]) -> None:
        """Write earlier turns (``[{"role": "user"|"assistant", "content": str}]``) into a
        thread, as if they had been asked (eval follow-ups)."""
        msgs = [HumanMessage(h["content"]) if h["role"] == "user" else AIMessage(h["content"]) for h in history]
        if msgs:
            await self.graph.aupdate_state(self._cfg(thread_key), {"messages": msgs}, as_node="finish")

    @with_log_context(thread_key="thread_key")
    async def resume(self, thread_key: str, action: HumanAction, text: str, *, actor_id: str, actor_name: str,
                     is_expert: bool, out: Responder, interrupt_id: str | None = None, channel: str = "") -> bool:
        """Resume a paused thread from a button or modal (``channel``: the conversation's
        channel, for its ``[[channels]]`` settings).

        Exactly one reply resumes a help request (text or button, any platform): the
        first to claim its interrupt id in the store. Returns False (after telling the
        actor privately) when the actor is not an expert, the request was already
        claimed or resumed, or ``interrupt_id`` names an older help request. Never raises.
        """
        try:
            if not is_expert:
                log.info("resume refused for non-expert %s", actor_id, extra=for_thread(thread_key))
                await out.notify_private(HELP_REFUSAL)
                return False
            action, by = HumanAction(action), actor_name or actor_id
            parsed = (action, text)
            if interrupt_id and not await self._claim(interrupt_id, thread_key, by, parsed, out):
                return False
            async with self._thread(thread_key):
                pending = await self.pending_interrupt(thread_key)
                if pending is None or (interrupt_id and pending.id != interrupt_id):
                    await self._already_handled(thread_key, action, by, out)
                    return False
                if not interrupt_id and not await self._claim(pending.id, thread_key, by, parsed, out):
                    return False
                run_id = f"resume:{pending.id}"
                try:
                    result = await self._resume_locked(thread_key, action, text, by, out, pending.id, run_id=run_id,
                                                       channel=channel)
                finally:
                    await self._best_effort(self.store.finish_run(run_id), thread_key)
                return result is not None
        except Exception as exc:  # noqa: BLE001
            await self._fail(thread_key, exc, out, what="resume")
            return False

    async def admin(self, command: str, *, actor_id: str, is_admin: bool, out: Responder) -> None:
        """Run an admin command (``reindex``, ``status``, ``help``). Never raises."""
        try:
            await self.admin_commands.run(command, actor_id=actor_id, is_admin=is_admin, out=out)
        except Exception:  # noqa: BLE001
            log.exception("admin command %s failed", command)
            await out.post_notice(f"Sorry, `{command}` failed; the logs have the details.")

    async def recover(self) -> int:
        """After a start: re-arm the timeouts of help requests left open by an earlier
        process, prune old message ids and claims, and finish the runs an earlier process
        left unfinished (a crash, ``kill -9``) in the background (:mod:`bot.recovery`).
        Call after the platforms are registered (or about to be: recovery waits up to
        ``platform_wait_seconds`` for a run's platform). Returns how many help requests
        were re-armed."""
        forgotten = await self.store.forget_seen_before(self.dedup_retention_seconds)
        await self.store.forget_claims_before(self.dedup_retention_seconds)
        if forgotten:
            log.info("forgot %d message ids older than %.0f days", forgotten, self.dedup_retention_seconds / 86400)
        rows = await self.store.open_help_requests()
        for row in rows:
            self._arm_timeout(row["thread_key"], max(0.0, row["deadline"] - time.time()), row.get("interrupt_id", ""))
        if rows:
            log.info("re-armed %d open help requests", len(rows))
        from bot.recovery import recover_runs

        runs = await self.store.unfinished_runs()
        if runs:
            log.info("%d runs were left unfinished by the last process: recovering them", len(runs))
            self._recovery = asyncio.create_task(recover_runs(self, runs), name="recover-runs")
        if self.store.shared and self._watch is None:
            from bot.recovery import watch

            self._watch = asyncio.create_task(watch(self), name="replica-watch")
        return len(rows)

    async def wait_recovered(self) -> None:
        """Wait until the unfinished runs found by :meth:`recover` are finished."""
        if self._recovery is not None:
            await asyncio.gather(self._recovery, return_exceptions=True)

    def busy(self) -> bool:
        """True while a run (or a recovery) is in flight: a graceful stop waits for it."""
        return bool(self._lock_users) or (self._recovery is not None and not self._recovery.done())

    async def drain(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds until no run is in flight. Returns True if none is left."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self.busy() and loop.time() < deadline:
            await asyncio.sleep(0.05)
        return not self.busy()

    async def close(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            await asyncio.gather(self._watch, return_exceptions=True)
        for t in self._timers.values():
            t.cancel()
        self._timers.clear()
        if self._recovery is not None and not self._recovery.done():
            self._recovery.cancel()
            await asyncio.gather(self._recovery, return_exceptions=True)

    # ---- internals ---------------------------------------------------------------
    async def _finish_run(self, run_id: str, thread_key: str) -> None:
        """Delete the run's in-flight record (best effort) and remember that it is done, so
        :meth:`_dispatch_guarded` does not delete it a second time."""
        try:
            await self.store.finish_run(run_id)
        except Exception as exc:  # noqa: BLE001 - e.g. a full disk: _dispatch_guarded tries again
            log.warning("bookkeeping write failed: %s", describe_failure(exc), extra=for_thread(thread_key))
            return
        self._finished.add(run_id)
        if len(self._finished) > self.ACKED_MEMORY:  # runs not entered through _dispatch_guarded
            self._finished.clear()

    async def _best_effort(self, coro: Any, thread_key: str) -> None:
        """Await a bookkeeping write; a failure (full disk) is logged, the turn goes on."""
        try:
            await coro
        except Exception as exc:  # noqa: BLE001
            log.warning("bookkeeping write failed: %s", describe_failure(exc), extra=for_thread(thread_key))

    async def _fail(self, thread_key: str, exc: BaseException, out: Responder, *, what: str) -> None:
        """A turn failed outside the graph: one log line, the (storage) apology, the apology reaction."""
        log.error("%s failed: %s", what, describe_failure(exc), extra=for_thread(thread_key))
        log.debug("traceback", exc_info=exc)
        try:
            await out.post_answer(Answer(text=self._apology_for(exc), kind="apology"))
        except Exception as post_exc:  # noqa: BLE001
            log.error("the apology could not be posted either: %s", describe_failure(post_exc),
                      extra=for_thread(thread_key))
        try:
            await out.set_status(Status.APOLOGY)
        except Exception:  # noqa: BLE001
            pass

    def _apology_for(self, exc: BaseException) -> str:
        if failure_kind(exc) == "storage":
            return self.storage_apology
        return self.admin_commands.apology

    async def _resume_locked(self, thread_key: str, action: HumanAction, text: str, by: str, out: Responder,
                             interrupt_id: str, *, run_id: str, channel: str = "") -> TurnResult | None:
        """Resume the claimed interrupt ``interrupt_id`` (caller holds the thread lock)."""
        claim = await self.store.claim_help_request(thread_key, by)
        target = self._responder_from(claim["platform"], claim["reference"], out) if claim else out
        timer = self._timers.pop(thread_key, None)
        if timer and timer is not asyncio.current_task():
            timer.cancel()
        log.info("help request resumed by %s: %s", by, action.value, extra=for_thread(thread_key))
        resume = {"action": action.value, "text": text, "by": by}
        async with self._runs:
            return await self._run(thread_key, Command(resume=resume), target,
                                   platform=claim["platform"] if claim else "console", is_resume=True,
                                   run_id=run_id,
                                   record={"resume": resume, "interrupt_id": interrupt_id, "channel": channel})

    @with_log_context(thread_key="thread_key", platform="platform")
    async def _run(self, thread_key: str, graph_input: Any, out: Responder, *, platform: str, run_id: str,
                   record: dict[str, Any], is_resume: bool = False, t0: float | None = None,
                   announced: bool = False) -> TurnResult:
        """Run the graph on ``graph_input`` (None: continue from the last checkpoint) and
        report the outcome through ``out``. The run is recorded in the store while in
        flight (with the responder reference and the reaction shown) so that a crash
        leaves a trace :meth:`recover` finds. ``announced``: the caller already showed
        received (or queued). Never raises."""
        t0 = time.perf_counter() if t0 is None else t0
        cfg = self._cfg(thread_key)
        if self.scope_for is not None:  # the channel's settings, for this run only
            cfg["configurable"]["scope"] = self.scope_for(platform, str(record.get("channel") or ""),
                                                          str(record.get("channel_name") or ""))
        kind = "continue" if graph_input is None else "resume" if is_resume else "question"
        cfg.update(run_config(thread_key, platform, run_id, kind, self.observer.callbacks))
        with self.observer.running():
            result = await self._run_graph(thread_key, graph_input, out, cfg, platform=platform, run_id=run_id,
                                           record=record, is_resume=is_resume, t0=t0, announced=announced)
        if result.answer or result.help_request:  # neither: another replica took the run over
            self.observer.finished(platform, result.answer.kind if result.answer else "help", result.seconds)
        return result

    async def _run_graph(self, thread_key: str, graph_input: Any, out: Responder, cfg: dict[str, Any], *,
                         platform: str, run_id: str, record: dict[str, Any], is_resume: bool, t0: float,
                         announced: bool) -> TurnResult:
        try:
            before = await checkpoints.latest_checkpoint_id(self.graph.checkpointer, thread_key)
            await self.store.run_started(run_id, thread_key, platform, out.reference(), record, before)
            if not is_resume and graph_input is not None and not announced:
                await self._show(run_id, out, Status.RECEIVED)
            last: Status | None = None
            async for mode, chunk in self.graph.astream(graph_input, cfg, stream_mode=["tasks", "updates"],
                                                        durability=self.durability):
                if mode == "tasks" and "result" not in chunk:
                    status = NODE_STATUS.get(chunk.get("name", ""))
                    if status and status != last:
                        last = status
                        await self._show(run_id, out, status)
            state = await self.graph.aget_state(cfg)
        except Exception as exc:  # noqa: BLE001 - the user gets an apology, never a traceback
            log.error("graph run failed: %s", describe_failure(exc), extra=for_thread(thread_key))
            log.debug("traceback", exc_info=True)
            answer = Answer(text=self._apology_for(exc), kind="apology")
            await self._post_final(thread_key, run_id, answer, out)
            return TurnResult(thread_key, answer, None, {}, time.perf_counter() - t0, error=describe_failure(exc))
        return await self._report(thread_key, state, out, platform=platform, run_id=run_id, t0=t0,
                                  channel=str(record.get("channel") or ""))

    async def _show(self, run_id: str, out: Responder, status: Status) -> None:
        """Set a status and remember the reaction now shown (so a restart can clear it)."""
        await out.set_status(status)
        await self._best_effort(self.store.update_run(run_id, reference=out.reference()), run_id)

    async def _report(self, thread_key: str, state: Any, out: Responder, *, platform: str, run_id: str,
                      t0: float, channel: str = "") -> TurnResult:
        """Post what a finished (or paused) run ended with: the answer, the apology or the
        help request; the final status is done, apology or waiting."""
        values = dict(state.values or {})
        if state.interrupts:
            intr = state.interrupts[0]
            payload = intr.value if isinstance(intr.value, dict) else {}
            request = HelpRequest(
                thread_key=thread_key, question=str(payload.get("question", "")),
                reason=str(payload.get("reason", "")), attempts=list(payload.get("attempts", [])),
                timeout_seconds=self.help_timeout_seconds, interrupt_id=intr.id,
            )
            if not await self.store.may_post(run_id):  # replicas: another one took this run over
                return TurnResult(thread_key, None, None, values, time.perf_counter() - t0)
            try:
                await out.post_help_request(request)
            except PostError as exc:
                log.error("help request could not be posted: %s", exc, extra=for_thread(thread_key))
                await out.set_status(Status.APOLOGY)
            else:
                await out.set_status(Status.WAITING_HUMAN)
            # the reference is taken after posting, so it names the help message and the current reaction
            await self._best_effort(self.store.open_help_request(
                thread_key, platform, out.reference(), request.question, self.help_timeout_seconds,
                interrupt_id=intr.id), thread_key)
            self._arm_timeout(thread_key, self.help_timeout_seconds, intr.id)
            await self._finish_run(run_id, thread_key)
            log.info("paused for a human after %s", "->".join(values.get("path", [])), extra=for_thread(thread_key))
            await self._prune(thread_key)
            return TurnResult(thread_key, None, request, values, time.perf_counter() - t0)
        outcome = values.get("outcome") or "answer"
        answer = Answer(
            text=values.get("generation", ""),
            sources=[Source(s.get("title", ""), s.get("location", "")) for s in values.get("sources", [])],
            route=list(values.get("path", [])), kind=_OUTCOME_KIND.get(outcome, "answer"),
            answered_by=values.get("answered_by", ""),
            note=self.answer_note if outcome in ("answer", "direct") else "",
        )
        if answer.kind != "apology":
            answer = await self._recorded(answer, values, thread_key=thread_key, platform=platform, channel=channel)
        posted = await self._post_final(thread_key, run_id, answer, out)
        if posted and answer.kind == "human" and values.get("human_action") == "answer":
            await self._learn(values.get("question") or "", answer.text, answer.answered_by, values, out,
                              thread_key=thread_key, platform=platform, channel=channel)
        seconds = time.perf_counter() - t0
        log.info("%s%s in %.1fs, %d LLM calls, path %s", answer.kind, "" if posted else " NOT posted", seconds,
                 values.get("llm_calls", 0), "->".join(answer.route), extra=for_thread(thread_key))
        await self._prune(thread_key)
        return TurnResult(thread_key, answer, None, values, seconds)

    async def _recorded(self, answer: Answer, values: dict[str, Any], *, thread_key: str, platform: str,
                        channel: str) -> Answer:
        """Record an answer for feedback and give it the id its 👍/👎 controls carry; when
        the record cannot be written the answer goes out without controls (logged)."""
        answer_id = uuid.uuid4().hex[:16]
        try:
            await self.store.record_answer(
                answer_id, thread_key=thread_key, platform=platform, channel=channel,
                question=str(values.get("question") or ""), answer=answer.text, kind=answer.kind,
                route=str(values.get("route") or ""), sources=[dict(s) for s in values.get("sources", [])],
                path=list(answer.route))
        except Exception as exc:  # noqa: BLE001 - feedback is bookkeeping: the answer still goes out
            log.warning("answer not recorded for feedback: %s", describe_failure(exc), extra=for_thread(thread_key))
            return answer
        return replace(answer, answer_id=answer_id)

    async def _learn(self, question: str, text: str, by: str, values: dict[str, Any], out: Responder, *,
                     thread_key: str, platform: str, channel: str) -> LearnedEntry | None:
        """Save an expert's answer as a learned entry (when learning is on for the turn's
        channel), with a link to the thread where the responder can give one. Best effort:
        a failure is logged, the answer is already posted."""
        if self.learned is None or not scope_of(values)["learning"]:
            return None
        try:
            permalink = ""
            make_link = getattr(out, "permalink", None)
            if callable(make_link):
                permalink = str(await make_link() or "")
            entry = await asyncio.to_thread(self.learned.add, question, text, by, thread_key=thread_key,
                                            permalink=permalink, platform=platform, channel=channel)
        except Exception as exc:  # noqa: BLE001
            log.warning("expert answer not saved as a learned entry: %s", describe_failure(exc),
                        extra=for_thread(thread_key))
            return None
        log.info("learned entry %d saved (answered by %s)", entry.id, by, extra=for_thread(thread_key))
        return entry

    async def remember(self, msg: IncomingMessage, text: str, out: Responder) -> None:
        """``remember: <text>`` from an expert in a thread: a learned entry answering the
        thread's last question (or standing alone). Others are refused privately."""
        key = msg.thread_key
        if not msg.is_expert:
            await out.notify_private("Only the experts named for this channel can add to what I've learned.")
            return
        if self.learned is None:
            await out.notify_private("Learning is turned off ([learning] enabled = false in config.toml).")
            return
        values = await self.thread_values(key) if await self.knows_thread(key) else {}
        scope = (self.scope_for(msg.platform, msg.channel, msg.channel_name) if self.scope_for else {})
        entry = await self._learn(str(values.get("question") or ""), text, msg.author_name or msg.author_id,
                                  {"scope": scope}, out, thread_key=key, platform=msg.platform, channel=msg.channel)
        if entry is None:
            await out.notify_private("Sorry, I couldn't save that (learning is off in this channel, or the "
                                     "storage failed: see the logs).")
            return
        about = f" as the answer to “{entry.question}”" if entry.question else ""
        await out.notify_private(f"Saved{about} (learned entry {entry.id}, {entry.citation}). Admins can remove it "
                                 f"with `learned forget {entry.id}`.")

    async def escalate(self, answer_id: str, *, actor_id: str, actor_name: str, out: Responder) -> bool:
        """A 👎'd answer goes to the experts: a help request in the answer's thread about its
        question (the graph resumes at ``human_review``; an expert's answer is then posted
        and learned like any other). ``out`` must write to that thread. Returns False (after
        telling the actor privately) when the answer is unknown, human review is off, or the
        thread already waits for an expert. The actor's 👎 reason, if any, is the request's "why".
        Never raises."""
        rec: dict[str, Any] | None = None
        try:
            rec = await self.store.answer_record(answer_id)
            if rec is None or not self.human_review:
                await out.notify_private("Sorry, I can't ask the experts about that answer." if rec is not None
                                         else "I can't find that answer any more.")
                return False
            key = rec["thread_key"]
            vote = await self.store.vote_of(answer_id, actor_id)
            reason = vote["reason"] if vote else ""
            note = f"{actor_name or 'a teammate'} marked the answer as wrong" + (f": {reason}" if reason else "")
            async with self._thread(key):
                if await self.pending_interrupt(key) is not None:
                    await out.notify_private("This thread is already waiting for an expert.")
                    return False
                await self.graph.aupdate_state(self._cfg(key), {
                    "question": rec["question"], "documents": [], "retrieved": [], "verdict": "downvoted",
                    "review_note": clean_text(note), "queries": [], "path": ["downvoted"]}, as_node="grade_documents")
                log.info("answer %s sent to the experts by %s", answer_id, actor_name, extra=for_thread(key))
                async with self._runs:
                    result = await self._run(key, None, out, platform=rec["platform"], is_resume=True,
                                             run_id=f"escalate:{answer_id}:{uuid.uuid4().hex[:8]}",
                                             record={"channel": rec["channel"]})
            return result.help_request is not None
        except Exception as exc:  # noqa: BLE001
            log.error("asking the experts about %s failed: %s", answer_id,
                      describe_failure(exc), extra=for_thread(rec["thread_key"] if rec else ""))
            await out.notify_private("Sorry, I couldn't ask the experts (see the logs).")
            return False

    async def vote(self, answer_id: str, user_id: str, vote: int, reason: str | None = None) -> bool:
        """Record a 👍 (``vote`` = 1) or 👎 (-1) on a posted answer; one vote per user and
        answer, the latest counts. ``reason`` (a 👎's optional reason) None keeps the
        reason given earlier. Returns False when the answer is unknown or the vote could
        not be saved (logged). Never raises."""
        try:
            ok = await self.store.record_vote(answer_id, user_id, vote, clean_text(reason) if reason else reason)
        except Exception as exc:  # noqa: BLE001
            log.warning("vote on %s by %s not recorded: %s", answer_id, user_id, describe_failure(exc))
            return False
        log.info("vote %+d on answer %s by %s%s", vote, answer_id, user_id, "" if ok else " ignored: unknown answer")
        return ok

    async def _post_final(self, thread_key: str, run_id: str, answer: Answer, out: Responder) -> bool:
        """Post an answer or apology and set the resting status: DONE only when a real
        answer was posted; APOLOGY for an apology or when posting failed (:class:`PostError`).
        Returns True if it was posted."""
        if not await self.store.may_post(run_id):  # replicas: another one took this run over
            return False
        try:
            await out.post_answer(answer)
            posted = True
        except Exception as exc:  # noqa: BLE001 - PostError, or a responder that broke its contract
            log.error("%s could not be posted: %s", answer.kind, describe_failure(exc), extra=for_thread(thread_key))
            posted = False
        await self._best_effort(self.store.update_run(run_id, stage="posted"), thread_key)
        await out.set_status(Status.DONE if posted and answer.kind != "apology" else Status.APOLOGY)
        await self._finish_run(run_id, thread_key)
        return posted

    def _arm_timeout(self, thread_key: str, delay: float, interrupt_id: str = "") -> None:
        old = self._timers.pop(thread_key, None)
        if old:
            old.cancel()

        async def fire() -> None:
            await asyncio.sleep(delay)
            log.info("no human answered in time", extra=for_thread(thread_key))
            try:
                async with self._thread(thread_key):
                    pending = await self.pending_interrupt(thread_key)
                    if pending is None or (interrupt_id and pending.id != interrupt_id):
                        return
                    if not await self.store.claim_interrupt(pending.id, thread_key, "timeout"):
                        return  # a human's reply won the claim a moment ago
                    run_id = f"timeout:{pending.id}"
                    await self._resume_locked(thread_key, HumanAction.DISMISS, "", "timeout", _NullResponder(),
                                              pending.id, run_id=run_id)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001
                log.error("help request timeout failed: %s", describe_failure(exc), extra=for_thread(thread_key))

        self._timers[thread_key] = asyncio.create_task(fire(), name=f"help-timeout:{thread_key}")

    async def _prune(self, thread_key: str) -> None:
        """Keep only the newest checkpoints of a thread (they hold the messages and any
        pending interrupt) and give the freed pages back (:func:`bot.checkpoints.prune`)."""
        try:
            await checkpoints.prune(self.graph.checkpointer, thread_key, self.keep_checkpoints)
        except Exception as exc:  # noqa: BLE001 - pruning is best effort
            log.warning("checkpoint pruning failed: %s", describe_failure(exc), extra=for_thread(thread_key))
