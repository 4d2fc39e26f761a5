"""Deduplication of deliveries (Slack, Discord, any platform): a message id is handled
once, also across restarts and replicas. Platforms deliver a message more than once (a
Slack @mention in a channel comes as ``app_mention`` and as ``message``; Slack retries an
event not acknowledged within 3 s; Socket Mode and the Discord gateway may deliver an
event again after a reconnect); the id is the message's identity
(``IncomingMessage.message_id``, e.g. ``slack:C1:1700000000.000200``), not the delivery's.

A message counts as handled once it was answered, apologised for by the graph, or asked
about (a help request): a turn that *failed* (the database away, a full disk) forgets the
message again (:meth:`Dedup.forget`), so the platform's redelivery is answered.
Marks live in the bookkeeping (``mark_seen``, ``forget_message``).
"""

from __future__ import annotations

import logging

from bot.failures import describe_failure
from bot.logs import for_thread
from bot.protocol import IncomingMessage, Responder, message_record
from bot.service.acknowledgements import Acknowledgements, clear_status
from bot.service.apologies import Apologies
from bot.service.run_slots import SlotPromise
from bot.storage import BookkeepingStore

log = logging.getLogger("bot.service")


class Dedup:
    """Marks messages seen, and forgets them again when their turn failed.

    Args:
        store: the bookkeeping (``mark_seen`` with the run record, ``run_in_flight``,
            ``forget_message``, ``forget_seen_before``, ``forget_claims_before``).
        acks: the acknowledgements (ids this process already has).
        apologies: a message that cannot be recorded gets the (storage) apology.
        retention_seconds: ``[service] dedup_retention_days`` in seconds: handled message ids
            older than this are forgotten at start (redeliveries come within minutes).
    """

    def __init__(
        self, store: BookkeepingStore, acks: Acknowledgements, apologies: Apologies, *, retention_seconds: float
    ) -> None:
        self._store = store
        self._acks = acks
        self._apologies = apologies
        self.retention_seconds = retention_seconds
        # ids whose turn failed while the store could not be written (the database away):
        # forgotten as soon as it can be (a redelivery, or the replicas' watch)
        self._to_forget: set[str] = set()

    async def first_delivery(
        self, msg: IncomingMessage, out: Responder, acked: SlotPromise | None, received_at: float | None = None
    ) -> bool:
        """Mark ``msg`` seen and record it as a run in flight (one transaction, so a crash
        before it is answered leaves it for recovery). True for its first delivery; False for
        a duplicate (logged) or when it cannot be recorded (the user gets the apology, and
        the message is not marked: its redelivery is handled).
        ``received_at``: its arrival (Unix seconds, :class:`bot.service.thread_locks.Ticket`), kept
        in the record: recovery replays a thread's runs in arrival order.

        ``acked``: the run-slot promise when this delivery was acknowledged on receipt; a
        delivery not acknowledged although its id was is another delivery of a message this
        process already has, ignored without a lookup."""
        if acked is None and self._acks.seen(msg.message_id):  # another delivery of it is in this process
            log.info("duplicate delivery of %s ignored", msg.message_id, extra=for_thread(msg.thread_key))
            return False
        if msg.message_id in self._to_forget:  # its turn failed with the store away: forget it first
            await self.retry_forgets()
        try:
            if not await self._store.mark_seen(
                msg.message_id,
                msg.thread_key,
                run=(msg.platform, out.reference(), message_record(msg, received_at=received_at)),
            ):
                log.info("duplicate delivery of %s ignored", msg.message_id, extra=for_thread(msg.thread_key))
                # Acknowledged on receipt, but handled before (e.g. redelivered after a restart):
                # take our status back. While another replica still runs it, the reaction is
                # that replica's too (one bot user): leave it, its next status replaces it.
                if acked is not None and not await self._store.run_in_flight(msg.message_id):
                    await clear_status(out)
                return False
        except Exception as exc:  # noqa: BLE001 - e.g. the disk is full: tell the user, keep serving
            await self._apologies.fail(msg.thread_key, exc, out, what=f"recording {msg.message_id}")
            await self.forget(msg)
            return False
        return True

    async def forget(self, msg: IncomingMessage) -> None:
        """The turn of ``msg`` failed: forget that it was seen (in memory and in the store),
        so a redelivery is handled like a first delivery. When the store cannot be written
        now (the database away) the id is forgotten later: before its redelivery is looked
        up, or by :meth:`retry_forgets`."""
        if not msg.message_id:
            return
        self._acks.forget(msg.message_id)
        try:
            await self._store.forget_message(msg.message_id)
        except Exception as exc:  # noqa: BLE001 - the store is away: forgotten when it is back
            log.warning(
                "%s not forgotten yet: %s", msg.message_id, describe_failure(exc), extra=for_thread(msg.thread_key)
            )
            self._to_forget.add(msg.message_id)

    async def retry_forgets(self) -> int:
        """Forget the ids :meth:`forget` could not (the store is back). Returns how many are
        left. Never raises."""
        for message_id in sorted(self._to_forget):
            try:
                await self._store.forget_message(message_id)
            except Exception as exc:  # noqa: BLE001 - still away: next time
                log.warning("%s not forgotten yet: %s", message_id, describe_failure(exc))
                break
            self._to_forget.discard(message_id)
        return len(self._to_forget)

    async def forget_old(self) -> int:
        """Forget message ids and help-request claims older than :attr:`retention_seconds`.
        Returns the number of message ids forgotten."""
        forgotten = await self._store.forget_seen_before(self.retention_seconds)
        await self._store.forget_claims_before(self.retention_seconds)
        if forgotten:
            log.info("forgot %d message ids older than %.0f days", forgotten, self.retention_seconds / 86400)
        return forgotten
