"""The first status on receipt (issue 11): a plain question shows received (or queued,
when every run slot is taken or promised) before any storage, checkpointer or platform
lookup; its run slot is promised at once (:mod:`bot.service.run_slots`). Message ids
acknowledged lately are remembered in memory, so a second delivery shows nothing
(:mod:`bot.service.dedup` ignores it)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from bot.chat.text import parse_human_reply
from bot.failures import describe_failure
from bot.logs import for_thread
from bot.protocol import IncomingMessage, Responder, Status
from bot.service.replies import parse_remember
from bot.service.run_slots import SlotPromise

if TYPE_CHECKING:
    from bot.service.chat_service import ChatService

log = logging.getLogger("bot.service")  # one logger for the chat runtime: log filters name it

#: Message ids remembered as acknowledged (a second delivery of one shows nothing).
ACKED_MEMORY = 4096
#: How far back :func:`remember_recent_messages` looks (Slack retries an event for
#: minutes; a Discord gateway resume replays recent messages).
RECENT_SECONDS = 3600.0


def plain_question(svc: ChatService, msg: IncomingMessage) -> bool:
    """True when ``msg`` is a new question by everything known in memory: text within
    the limit, not a command or an expert's reply syntax, in a thread this process
    does not know to be waiting for an expert."""
    text = msg.text.strip()
    return bool(
        text
        and msg.message_id
        and len(text) <= svc.max_question_characters
        and parse_remember(text) is None
        and not svc.admin_commands.parse(text)
        and parse_human_reply(text) is None
        and msg.thread_key not in svc.timers
    )


def _remember(svc: ChatService, message_id: str) -> None:
    svc.acked[message_id] = None
    while len(svc.acked) > ACKED_MEMORY:
        svc.acked.popitem(last=False)


async def remember_recent_messages(svc: ChatService) -> int:
    """Load the ids of the messages handled lately (see :meth:`ChatService.remember_recent_messages`)."""
    try:
        ids = await svc.store.recent_message_ids(RECENT_SECONDS, ACKED_MEMORY)
    except Exception as exc:  # noqa: BLE001 - the dedup mark on disk still catches redeliveries
        log.warning("recent message ids not loaded: %s", describe_failure(exc))
        return 0
    for message_id in ids:
        _remember(svc, message_id)
    return len(ids)


async def acknowledge(svc: ChatService, msg: IncomingMessage, out: Responder) -> bool:
    """Show at once that a question arrived (see :meth:`ChatService.acknowledge`). Never raises."""
    if not plain_question(svc, msg) or msg.message_id in svc.acked:
        return False
    _remember(svc, msg.message_id)
    promise = svc.slots.promise()
    svc.acks[msg.message_id] = (out, promise)
    try:
        await out.set_status(Status.QUEUED if promise.queued else Status.RECEIVED)
    except Exception as exc:  # noqa: BLE001 - a status is best effort; the turn goes on
        log.warning("first status not shown: %s", describe_failure(exc), extra=for_thread(msg.thread_key))
    return True


def take(svc: ChatService, message_id: str, out: Responder) -> SlotPromise | None:
    """The run-slot promise made when ``out`` acknowledged ``message_id`` (now the caller's), or None."""
    ack = svc.acks.get(message_id)
    if ack is None or ack[0] is not out:
        return None
    del svc.acks[message_id]
    return ack[1]


def release(svc: ChatService, message_id: str, out: Responder) -> None:
    """Give back the run slot promised to ``message_id`` through ``out`` (idempotent)."""
    promise = take(svc, message_id, out)
    if promise is not None:
        promise.cancel()


async def clear_status(out: Responder) -> None:
    """Take the status shown on receipt off a message that turned out not to be a new
    question (best effort; a responder without ``clear_status`` keeps it)."""
    clear = getattr(out, "clear_status", None)
    if clear is not None:
        try:
            await clear()
        except Exception as exc:  # noqa: BLE001
            log.warning("status not cleared: %s", describe_failure(exc))
