"""Deduplication of deliveries (Slack, Discord, any platform): a message id is handled
once, also across restarts and replicas. Platforms deliver a message more than once (a
Slack @mention in a channel comes as ``app_mention`` and as ``message``; Slack retries an
event not acknowledged within 3 s; Socket Mode and the Discord gateway may deliver an
event again after a reconnect); the id is the message's identity
(``IncomingMessage.message_id``, e.g. ``slack:C1:1700000000.000200``), not the delivery's.
Marks live in the bookkeeping (:meth:`bot.storage.base.BookkeepingStore.mark_seen`)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from bot.logs import for_thread
from bot.protocol import IncomingMessage, Responder, message_record
from bot.service.acknowledge import clear_status
from bot.service.errors import fail
from bot.service.run_slots import SlotPromise

if TYPE_CHECKING:
    from bot.service.chat_service import ChatService

log = logging.getLogger("bot.service")  # one logger for the chat runtime: log filters name it


async def first_delivery(
    svc: ChatService, msg: IncomingMessage, out: Responder, acked: SlotPromise | None, received_at: float | None = None
) -> bool:
    """Mark ``msg`` seen and record it as a run in flight (one transaction, so a crash
    before it is answered leaves it for recovery). True for its first delivery; False for
    a duplicate (logged) or when it cannot be recorded (the user gets the apology).
    ``received_at``: its arrival (Unix seconds, :class:`bot.service.threads.Ticket`), kept in
    the record: recovery replays a thread's runs in arrival order.

    ``acked``: the run-slot promise when this delivery was acknowledged on receipt
    (:mod:`bot.service.acknowledge`); a delivery not acknowledged although its id was is
    another delivery of a message this process already has, ignored without a lookup."""
    if acked is None and msg.message_id in svc.acked:  # another delivery of it is in this process
        log.info("duplicate delivery of %s ignored", msg.message_id, extra=for_thread(msg.thread_key))
        return False
    try:
        if not await svc.store.mark_seen(
            msg.message_id,
            msg.thread_key,
            run=(msg.platform, out.reference(), message_record(msg, received_at=received_at)),
        ):
            log.info("duplicate delivery of %s ignored", msg.message_id, extra=for_thread(msg.thread_key))
            # Acknowledged on receipt, but handled before (e.g. redelivered after a restart):
            # take our status back. While another replica still runs it, the reaction is
            # that replica's too (one bot user): leave it, its next status replaces it.
            if acked is not None and not await svc.store.run_in_flight(msg.message_id):
                await clear_status(out)
            return False
    except Exception as exc:  # noqa: BLE001 - e.g. the disk is full: tell the user, keep serving
        await fail(svc, msg.thread_key, exc, out, what=f"recording {msg.message_id}")
        return False
    return True


async def forget_old(svc: ChatService) -> int:
    """Forget message ids and help-request claims older than ``dedup_retention_seconds``
    (redeliveries come within minutes). Returns the number of message ids forgotten."""
    forgotten = await svc.store.forget_seen_before(svc.dedup_retention_seconds)
    await svc.store.forget_claims_before(svc.dedup_retention_seconds)
    if forgotten:
        log.info("forgot %d message ids older than %.0f days", forgotten, svc.dedup_retention_seconds / 86400)
    return forgotten
