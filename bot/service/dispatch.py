"""One incoming message, in order: dedup -> no words or too long (a notice, no LLM call)
-> ``remember:`` -> admin command -> a reply to a pending help request (claimed, then
resumed; in a thread with none, a notice saying so) -> a new question (status first, then a
run slot, then the graph run).

The help request a reply answers is the one pending when it *arrived*: a second reply
to the same request loses the claim at once, even while the first one runs."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from typing import Protocol

from langchain_core.messages import HumanMessage

from bot.chat.syntax import NOTHING_WAITING, REPLY_HINT, parse_human_reply, parse_remember
from bot.logs import for_thread, with_log_context
from bot.metrics import TurnObserver
from bot.protocol import IncomingMessage, Responder, Status
from bot.service.acknowledgements import Acknowledgements, clear_status
from bot.service.apologies import Apologies
from bot.service.conversations import Conversations
from bot.service.dedup import Dedup
from bot.service.help_desk import HelpDesk
from bot.service.intake import Intake, Kind
from bot.service.learning import Learning
from bot.service.run_records import RunRecords
from bot.service.run_slots import RunSlots, SlotPromise
from bot.service.runs import Runs, TurnResult
from bot.service.thread_locks import ThreadLocks, Ticket
from bot.storage import Coordination

log = logging.getLogger("bot.service")

WAITING_FOR_EXPERT = (
    "This thread is waiting for an expert's answer; only the people named in the help "
    "request can resume it. Your message was not sent to the bot."
)


class Commands(Protocol):
    """The admin commands (:class:`bot.admin.AdminCommands`)."""

    async def run(self, command: str, *, actor_id: str, is_admin: bool, out: Responder) -> None:
        """Run ``command`` (as :meth:`bot.admin.AdminCommands.parse` returned it) for ``actor_id``."""


class Dispatcher:
    """Routes messages (see the module docstring).

    Args:
        intake: reads what a message is. acks: the acknowledgements on receipt.
        dedup: a message id is handled once. locks: one message of a thread at a time.
        slots: the run slots. store: the bookkeeping (per-thread order among replicas).
        conversations: the threads. help_desk: replies to help requests.
        learning: ``remember:``. runs: the graph runs. records: run records finished once.
        apologies: a failed turn's apology. commands: the admin commands.
        observer: metrics.
    """

    def __init__(
        self,
        *,
        intake: Intake,
        acks: Acknowledgements,
        dedup: Dedup,
        locks: ThreadLocks,
        slots: RunSlots,
        store: Coordination,
        conversations: Conversations,
        help_desk: HelpDesk,
        learning: Learning,
        runs: Runs,
        records: RunRecords,
        apologies: Apologies,
        commands: Commands,
        observer: TurnObserver,
    ) -> None:
        self._intake = intake
        self._acks = acks
        self._dedup = dedup
        self._locks = locks
        self._slots = slots
        self._store = store
        self._conversations = conversations
        self._help_desk = help_desk
        self._learning = learning
        self._runs = runs
        self._records = records
        self._apologies = apologies
        self._commands = commands
        self._observer = observer

    @with_log_context(thread_key="msg.thread_key", platform="msg.platform", message_id="msg.message_id")
    async def handle(self, msg: IncomingMessage, out: Responder, ticket: Ticket | None = None) -> TurnResult | None:
        """Handle one user message from a platform (see :meth:`bot.service.ChatService.handle`):
        a plain question is acknowledged first and recorded at once; it takes its thread after
        the messages whose ``ticket`` came before its own. Never raises."""
        if ticket is None:  # before any await: the arrival order is the order of these calls
            ticket = self._locks.ticket(msg.thread_key)
        try:
            await self._acks.acknowledge(msg, out)
            acked = self._acks.take(msg.message_id, out)
            try:
                if not await self._dedup.first_delivery(msg, out, acked, received_at=ticket.received_at):
                    return None
                return await self.guarded(msg, out, run_id=msg.message_id, acked=acked, ticket=ticket)
            finally:
                if acked is not None:
                    acked.cancel()  # it did not run (nothing once its slot was held)
        finally:
            self._locks.release(ticket)

    @with_log_context(thread_key="thread_key", platform="platform")
    async def ask(self, thread_key: str, text: str, out: Responder, platform: str = "console") -> TurnResult | None:
        """One message from the local user (see :meth:`bot.service.ChatService.ask`). Never raises."""
        msg = IncomingMessage(
            platform=platform,
            thread_key=thread_key,
            message_id="",
            author_id="console",
            author_name="console",
            text=text,
            is_admin=True,
            is_expert=True,
        )
        return await self.guarded(msg, out, run_id=f"ask:{uuid.uuid4().hex}")

    async def guarded(
        self,
        msg: IncomingMessage,
        out: Responder,
        *,
        run_id: str,
        acked: SlotPromise | None = None,
        ticket: Ticket | None = None,
    ) -> TurnResult | None:
        """:meth:`dispatch`, with any failure ending in the apology; the run record is
        finished whatever happens (once: usually its answer finished it), except when the
        process stops it (cancelled at shutdown: the record stays, and the next start answers
        the message, :mod:`bot.service.recovery`). A failed turn forgets the message
        (:meth:`bot.service.dedup.Dedup.forget`): its redelivery is answered. Never raises."""
        stopped = failed = False
        try:
            result = await self.dispatch(msg, out, run_id=run_id, acked=acked, ticket=ticket)
            failed = result is not None and bool(result.error)
            return result
        except asyncio.CancelledError:
            stopped = True
            raise
        except Exception as exc:  # noqa: BLE001 - nothing may crash the process
            failed = True
            await self._apologies.fail(
                msg.thread_key, exc, out, what=f"handling {msg.message_id or 'a message'}", run_id=run_id
            )
            return None
        finally:
            if not stopped:
                await self._records.settle(run_id, msg.thread_key)
            if failed:
                await self._dedup.forget(msg)

    async def admin(self, command: str, *, actor_id: str, is_admin: bool, out: Responder) -> None:
        """Run an admin command (see :meth:`bot.service.ChatService.admin`). Never raises."""
        try:
            await self._commands.run(command, actor_id=actor_id, is_admin=is_admin, out=out)
        except Exception:  # noqa: BLE001
            log.exception("admin command %s failed", command)
            await out.post_notice(f"Sorry, `{command}` failed; the logs have the details.")

    async def dispatch(
        self,
        msg: IncomingMessage,
        out: Responder,
        *,
        run_id: str,
        acked: SlotPromise | None = None,
        ticket: Ticket | None = None,
    ) -> TurnResult | None:
        """Route one message (see the module docstring); ``ticket``: its place in the thread's
        queue (:class:`bot.service.thread_locks.Ticket`), None for a new one at the end."""
        text = msg.text.strip()
        key = msg.thread_key
        kind = self._intake.kind(text)
        if kind is Kind.NO_WORDS:
            log.info("empty question from %s", msg.author_id, extra=for_thread(key))  # no words
            await out.post_notice(self._intake.empty_question_reply)
            return None
        if kind is Kind.TOO_LONG:
            log.info("question of %d characters refused", len(text), extra=for_thread(key))
            await out.post_notice(self._intake.too_long_notice(len(text)))
            return None
        if kind is Kind.REMEMBER:  # it answers the thread's question before it: after that one's turn
            async with self._locks.hold(key, ticket):
                await self._learning.remember(msg, parse_remember(text) or "", out)
            return None
        if kind is Kind.COMMAND:
            await self.admin(
                self._intake.command_of(text) or "", actor_id=msg.author_id, is_admin=msg.is_admin, out=out
            )
            return None
        by = msg.author_name or msg.author_id
        parsed = parse_human_reply(text) if msg.is_expert else None
        # The help request this message answers is the one pending when it *arrived*: a second
        # reply to the same request loses the claim at once, even while the first one runs.
        seen = await self._conversations.pending_interrupt(key) if parsed else None
        if seen is not None and not await self._help_desk.claim(seen.id, key, by, parsed, out):
            return None
        await self._store.wait_turn(run_id, key)  # replicas: the thread's earlier messages first
        async with self._locks.hold(key, ticket):
            pending = await self._conversations.pending_interrupt(key)
            if pending is not None:
                if acked is not None:  # paused by another replica meanwhile: not a new question after all
                    await clear_status(out)
                if not msg.is_expert:
                    log.info("non-expert %s replied to a help request", msg.author_id, extra=for_thread(key))
                    await out.notify_private(WAITING_FOR_EXPERT)
                    return None
                if parsed is None:
                    await out.notify_private(REPLY_HINT)
                    return None
                if seen is None:  # it arrived while the bot was still working on the question
                    if not await self._help_desk.claim(pending.id, key, by, parsed, out):
                        return None
                elif pending.id != seen.id:
                    await self._help_desk.already_handled(key, parsed[0], by, out)
                    return None
                return await self._help_desk.resume_claimed(
                    key, parsed[0], parsed[1], by, out, pending.id, run_id=run_id, channel=msg.channel
                )
            if seen is not None:  # it was a reply, and someone else's reply (or the timeout) won
                assert parsed is not None
                await self._help_desk.already_handled(key, parsed[0], by, out)
                return None
            if kind is Kind.HELP_REPLY:  # a reply to no help request: neither asked nor learned
                log.info("reply syntax from %s with no help request", msg.author_id, extra=for_thread(key))
                await out.notify_private(NOTHING_WAITING)
                return None
            log.info("question from %s (%d chars)", msg.author_id, len(text), extra=for_thread(key))
            # status first, queue after: the user sees at once that the question arrived, and
            # whether it waits for a run slot. Acknowledged on receipt (the usual case): shown
            # already, and recorded with the dedup mark; "received" becomes "queued" only if
            # its slot went to another run.
            self._observer.question(msg.platform)
            queued = self._slots.locked()
            if acked is None:
                await self._runs.show(run_id, out, Status.QUEUED if queued else Status.RECEIVED)
            elif queued and not acked.queued:
                await self._runs.show(run_id, out, Status.QUEUED)
            async with contextlib.AsyncExitStack() as slot:
                with self._observer.waiting():
                    await slot.enter_async_context(acked.hold() if acked is not None else self._slots.hold())
                return await self._runs.run(
                    key,
                    {"messages": [HumanMessage(text)]},
                    out,
                    platform=msg.platform,
                    run_id=run_id,
                    record={"question": text, "channel": msg.channel, "channel_name": msg.channel_name},
                    announced=True,
                )
