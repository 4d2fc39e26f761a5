"""The first status on receipt: a plain question shows received (or queued, when every
run slot is taken or promised) before any storage, checkpointer or platform lookup; its
run slot is promised at once (:mod:`bot.service.run_slots`). Message ids acknowledged lately
are remembered in memory, so a second delivery shows nothing (:mod:`bot.service.dedup`
ignores it)."""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable

from bot.failures import describe_failure
from bot.logs import for_thread
from bot.protocol import IncomingMessage, Responder, Status
from bot.service.intake import Intake, Kind
from bot.service.run_slots import RunSlots, SlotPromise
from bot.storage import Deliveries

log = logging.getLogger("bot.service")

#: Message ids remembered as acknowledged (a second delivery of one shows nothing).
ACKED_MEMORY = 4096
#: How far back :meth:`Acknowledgements.remember_recent` looks (Slack retries an event for
#: minutes; a Discord gateway resume replays recent messages).
RECENT_SECONDS = 3600.0


class Acknowledgements:
    """Messages acknowledged on receipt, and the run slots promised to them.

    Args:
        slots: the run slots (a promise is taken on receipt).
        store: the bookkeeping (``recent_message_ids``, at start).
        intake: reads whether a message is a question.
        waiting: thread key -> True while this process knows the thread waits for an expert
            (its message is then a reply, not a question).
    """

    def __init__(self, slots: RunSlots, store: Deliveries, intake: Intake, waiting: Callable[[str], bool]) -> None:
        self._slots = slots
        self._store = store
        self._intake = intake
        self._waiting = waiting
        # message id -> (responder, slot promise) until its handling takes it
        self._pending: dict[str, tuple[Responder, SlotPromise]] = {}
        self._recent: OrderedDict[str, None] = OrderedDict()  # ids acknowledged or handled lately
        self._failed: OrderedDict[str, None] = OrderedDict()  # ids whose turn failed (their apology shows)

    def plain_question(self, msg: IncomingMessage) -> bool:
        """True when ``msg`` is a new question by everything known in memory: words within
        the limit, not a command or an expert's reply syntax, in a thread this process
        does not know to be waiting for an expert."""
        return (
            bool(msg.message_id) and self._intake.kind(msg.text) is Kind.QUESTION and not self._waiting(msg.thread_key)
        )

    def seen(self, message_id: str) -> bool:
        """True when this process acknowledged or handled ``message_id`` lately."""
        return message_id in self._recent

    def _remember(self, message_id: str) -> None:
        self._recent[message_id] = None
        while len(self._recent) > ACKED_MEMORY:
            self._recent.popitem(last=False)

    def forget(self, message_id: str) -> None:
        """Forget ``message_id`` (its turn failed): a redelivery is acknowledged and handled
        again, and its first status replaces the apology's."""
        self._recent.pop(message_id, None)
        self._failed[message_id] = None
        while len(self._failed) > ACKED_MEMORY:
            self._failed.popitem(last=False)

    async def remember_recent(self) -> int:
        """Load the ids of the messages handled lately (see
        :meth:`bot.service.ChatService.remember_recent_messages`). Returns how many."""
        try:
            ids = await self._store.recent_message_ids(RECENT_SECONDS, ACKED_MEMORY)
        except Exception as exc:  # noqa: BLE001 - the dedup mark on disk still catches redeliveries
            log.warning("recent message ids not loaded: %s", describe_failure(exc))
            return 0
        for message_id in ids:
            self._remember(message_id)
        return len(ids)

    async def acknowledge(self, msg: IncomingMessage, out: Responder) -> bool:
        """Show at once that a question arrived (see :meth:`bot.service.ChatService.acknowledge`).
        Never raises."""
        if not self.plain_question(msg) or msg.message_id in self._recent:
            return False
        self._remember(msg.message_id)
        promise = self._slots.promise()
        self._pending[msg.message_id] = (out, promise)
        try:
            if msg.message_id in self._failed:
                del self._failed[msg.message_id]
                await out.may_show(Status.APOLOGY)
            await out.set_status(Status.QUEUED if promise.queued else Status.RECEIVED)
        except Exception as exc:  # noqa: BLE001 - a status is best effort; the turn goes on
            log.warning("first status not shown: %s", describe_failure(exc), extra=for_thread(msg.thread_key))
        return True

    def take(self, message_id: str, out: Responder) -> SlotPromise | None:
        """The run-slot promise made when ``out`` acknowledged ``message_id`` (now the caller's), or None."""
        ack = self._pending.get(message_id)
        if ack is None or ack[0] is not out:
            return None
        del self._pending[message_id]
        return ack[1]

    def release(self, message_id: str, out: Responder) -> None:
        """Give back the run slot promised to ``message_id`` through ``out`` (idempotent)."""
        promise = self.take(message_id, out)
        if promise is not None:
            promise.cancel()


async def clear_status(out: Responder) -> None:
    """Take the status shown on receipt off a message that turned out not to be a new
    question (best effort)."""
    try:
        await out.clear_status()
    except Exception as exc:  # noqa: BLE001
        log.warning("status not cleared: %s", describe_failure(exc))
