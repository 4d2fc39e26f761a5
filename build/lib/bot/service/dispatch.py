"""One incoming message, in order: dedup -> empty or too long (a notice, no LLM call) ->
``remember:`` -> admin command -> a reply to a pending help request (claimed, then
resumed) -> a new question (status first, then a run slot, then the graph run).

The help request a reply answers is the one pending when it *arrived*: a second reply
to the same request loses the claim at once, even while the first one runs."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from typing import TYPE_CHECKING

from langchain_core.messages import HumanMessage

from bot.chat.text import parse_human_reply
from bot.logs import for_thread, with_log_context
from bot.protocol import IncomingMessage, Responder, Status
from bot.service import acknowledge, help_requests, learning, runs
from bot.service.dedup import first_delivery
from bot.service.errors import best_effort, fail
from bot.service.replies import REPLY_HINT, parse_remember
from bot.service.run_slots import SlotPromise
from bot.service.threads import Ticket

if TYPE_CHECKING:
    from bot.service.chat_service import ChatService
    from bot.service.runs import TurnResult

log = logging.getLogger("bot.service")  # one logger for the chat runtime: log filters name it


@with_log_context(thread_key="msg.thread_key", platform="msg.platform", message_id="msg.message_id")
async def handle(
    svc: ChatService, msg: IncomingMessage, out: Responder, ticket: Ticket | None = None
) -> TurnResult | None:
    """Handle one user message from a platform (see :meth:`ChatService.handle`): a plain
    question is acknowledged first (:mod:`bot.service.acknowledge`) and recorded at once; it
    takes its thread after the messages whose ``ticket`` came before its own. Never raises."""
    if ticket is None:  # before any await: the arrival order is the order of these calls
        ticket = svc.threads.ticket(msg.thread_key)
    try:
        await acknowledge.acknowledge(svc, msg, out)
        acked = acknowledge.take(svc, msg.message_id, out)
        try:
            if not await first_delivery(svc, msg, out, acked, received_at=ticket.received_at):
                return None
            return await dispatch_guarded(svc, msg, out, run_id=msg.message_id, acked=acked, ticket=ticket)
        finally:
            if acked is not None:
                acked.cancel()  # it did not run (nothing once its slot was held)
    finally:
        svc.threads.release(ticket)


@with_log_context(thread_key="thread_key", platform="platform")
async def ask(
    svc: ChatService, thread_key: str, text: str, out: Responder, platform: str = "console"
) -> TurnResult | None:
    """One message from the local user (see :meth:`ChatService.ask`). Never raises."""
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
    return await dispatch_guarded(svc, msg, out, run_id=f"ask:{uuid.uuid4().hex}")


async def dispatch_guarded(
    svc: ChatService,
    msg: IncomingMessage,
    out: Responder,
    *,
    run_id: str,
    acked: SlotPromise | None = None,
    ticket: Ticket | None = None,
) -> TurnResult | None:
    """:func:`dispatch`, with any failure ending in the apology; the run record is
    finished whatever happens (once: usually its answer finished it), except when the
    process stops it (cancelled at shutdown: the record stays, and the next start answers
    the message, :mod:`bot.service.recovery`). Never raises."""
    stopped = False
    try:
        return await dispatch(svc, msg, out, run_id=run_id, acked=acked, ticket=ticket)
    except asyncio.CancelledError:
        stopped = True
        raise
    except Exception as exc:  # noqa: BLE001 - nothing may crash the process
        await fail(svc, msg.thread_key, exc, out, what=f"handling {msg.message_id or 'a message'}", run_id=run_id)
        return None
    finally:
        if run_id in svc.finished:  # the usual case: finished when its answer went out
            svc.finished.discard(run_id)
        elif not stopped:
            await best_effort(svc.store.finish_run(run_id), msg.thread_key)


async def dispatch(
    svc: ChatService,
    msg: IncomingMessage,
    out: Responder,
    *,
    run_id: str,
    acked: SlotPromise | None = None,
    ticket: Ticket | None = None,
) -> TurnResult | None:
    """Route one message (see the module docstring); ``ticket``: its place in the thread's
    queue (:class:`bot.service.threads.Ticket`), None for a new one at the end."""
    text = msg.text.strip()
    key = msg.thread_key
    if not text:
        log.info("empty question from %s", msg.author_id, extra=for_thread(key))
        await out.post_notice(svc.empty_question_reply)
        return None
    if len(text) > svc.max_question_characters:
        log.info("question of %d characters refused", len(text), extra=for_thread(key))
        await out.post_notice(
            f"That message is too long for me ({len(text):,} characters; the limit is "
            f"{svc.max_question_characters:,}). Please shorten it or ask about one part at a time."
        )
        return None
    remembered = parse_remember(text)
    if remembered is not None:  # it answers the thread's question before it: after that one's turn
        async with svc.threads.hold(key, ticket):
            await learning.remember(svc, msg, remembered, out)
        return None
    command = svc.admin_commands.parse(text)
    if command:
        await svc.admin(command, actor_id=msg.author_id, is_admin=msg.is_admin, out=out)
        return None
    by = msg.author_name or msg.author_id
    parsed = parse_human_reply(text) if msg.is_expert else None
    # The help request this message answers is the one pending when it *arrived*: a second
    # reply to the same request loses the claim at once, even while the first one runs.
    seen = await svc.pending_interrupt(key) if parsed else None
    if seen is not None and not await help_requests.claim(svc, seen.id, key, by, parsed, out):
        return None
    await svc.store.wait_turn(run_id, key)  # replicas: the thread's earlier messages first
    async with svc.threads.hold(key, ticket):
        pending = await svc.pending_interrupt(key)
        if pending is not None:
            if acked is not None:  # paused by another replica meanwhile: not a new question after all
                await acknowledge.clear_status(out)
            if not msg.is_expert:
                log.info("non-expert %s replied to a help request", msg.author_id, extra=for_thread(key))
                await out.notify_private(
                    "This thread is waiting for an expert's answer; only the people named in the help "
                    "request can resume it. Your message was not sent to the bot."
                )
                return None
            if parsed is None:
                await out.notify_private(REPLY_HINT)
                return None
            if seen is None:  # it arrived while the bot was still working on the question
                if not await help_requests.claim(svc, pending.id, key, by, parsed, out):
                    return None
            elif pending.id != seen.id:
                await help_requests.already_handled(key, parsed[0], by, out)
                return None
            return await help_requests.resume_claimed(
                svc, key, parsed[0], parsed[1], by, out, pending.id, run_id=run_id, channel=msg.channel
            )
        if seen is not None:  # it was a reply, and someone else's reply (or the timeout) won
            assert parsed is not None
            await help_requests.already_handled(key, parsed[0], by, out)
            return None
        log.info("question from %s (%d chars)", msg.author_id, len(text), extra=for_thread(key))
        # status first, queue after: the user sees at once that the question arrived, and
        # whether it waits for a run slot (issue 11: the reaction came after the slot).
        # Acknowledged on receipt (the usual case): shown already, and recorded with the
        # dedup mark; "received" becomes "queued" only if its slot went to another run.
        svc.observer.question(msg.platform)
        queued = svc.slots.locked()
        if acked is None:
            await runs.show(svc, run_id, out, Status.QUEUED if queued else Status.RECEIVED)
        elif queued and not acked.queued:
            await runs.show(svc, run_id, out, Status.QUEUED)
        async with contextlib.AsyncExitStack() as slot:
            with svc.observer.waiting():
                await slot.enter_async_context(acked.hold() if acked is not None else svc.slots.hold())
            return await runs.run(
                svc,
                key,
                {"messages": [HumanMessage(text)]},
                out,
                platform=msg.platform,
                run_id=run_id,
                record={"question": text, "channel": msg.channel, "channel_name": msg.channel_name},
                announced=True,
            )
