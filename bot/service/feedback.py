"""Feedback on posted answers: votes are saved (one per user and answer, the latest
counts) and a 👎'd answer may go to the experts (a help request in its thread,
:meth:`Feedback.escalate`). Every answer is recorded with the id its 👍/👎 controls carry
when it is posted (:class:`bot.service.runs.Runs`)."""

from __future__ import annotations

import logging
import uuid
from typing import Any

from bot import storage
from bot.failures import describe_failure
from bot.logs import for_thread
from bot.protocol import Responder, clean_text
from bot.service.conversations import Conversations
from bot.service.run_slots import RunSlots
from bot.service.runs import Runs
from bot.service.thread_locks import ThreadLocks
from graphs.adaptive_rag import ask_experts

log = logging.getLogger("bot.service")


class Feedback:
    """Votes on answers, and asking the experts about a 👎'd one.

    Args:
        store: the bookkeeping (answers, votes).
        conversations: the threads (a pending interrupt; the graph asked to pause).
        locks: one message of a thread at a time. slots: the run slots.
        runs: runs the graph to its help request.
        human_review: ``[graph] human_review``: a 👎 may ask the experts.
    """

    def __init__(
        self,
        store: storage.Feedback,
        conversations: Conversations,
        locks: ThreadLocks,
        slots: RunSlots,
        runs: Runs,
        *,
        human_review: bool,
    ) -> None:
        self._store = store
        self._conversations = conversations
        self._locks = locks
        self._slots = slots
        self._runs = runs
        self.human_review = human_review

    async def answer(self, answer_id: str) -> dict[str, Any] | None:
        """The record of a posted answer (``thread_key``, ``platform``, ``channel``,
        ``question``...), None when unknown or unreadable (logged). Never raises."""
        try:
            return await self._store.answer_record(answer_id)
        except Exception as exc:  # noqa: BLE001
            log.warning("answer %s not read: %s", answer_id, describe_failure(exc))
            return None

    async def vote(self, answer_id: str, user_id: str, vote: int, reason: str | None = None) -> bool:
        """Record a vote (see :meth:`bot.service.ChatService.vote`). Never raises."""
        try:
            ok = await self._store.record_vote(answer_id, user_id, vote, clean_text(reason) if reason else reason)
        except Exception as exc:  # noqa: BLE001
            log.warning("vote on %s by %s not recorded: %s", answer_id, user_id, describe_failure(exc))
            return False
        log.info("vote %+d on answer %s by %s%s", vote, answer_id, user_id, "" if ok else " ignored: unknown answer")
        return ok

    async def escalate(self, answer_id: str, *, actor_id: str, actor_name: str, out: Responder) -> bool:
        """Send a 👎'd answer to the experts (see :meth:`bot.service.ChatService.escalate`). Never raises."""
        rec: dict[str, Any] | None = None
        try:
            rec = await self._store.answer_record(answer_id)
            if rec is None or not self.human_review:
                await out.notify_private(
                    "Sorry, I can't ask the experts about that answer."
                    if rec is not None
                    else "I can't find that answer any more."
                )
                return False
            key = rec["thread_key"]
            vote = await self._store.vote_of(answer_id, actor_id)
            reason = vote["reason"] if vote else ""
            note = f"{actor_name or 'a teammate'} marked the answer as wrong" + (f": {reason}" if reason else "")
            async with self._locks.hold(key):
                if await self._conversations.pending_interrupt(key) is not None:
                    await out.notify_private("This thread is already waiting for an expert.")
                    return False
                await ask_experts(
                    self._conversations.graph, self._conversations.run_config(key), rec["question"], clean_text(note)
                )
                log.info("answer %s sent to the experts by %s", answer_id, actor_name, extra=for_thread(key))
                async with self._slots:
                    result = await self._runs.run(
                        key,
                        None,
                        out,
                        platform=rec["platform"],
                        is_resume=True,
                        run_id=f"escalate:{answer_id}:{uuid.uuid4().hex[:8]}",
                        record={"channel": rec["channel"]},
                    )
            return result.help_request is not None
        except Exception as exc:  # noqa: BLE001
            log.error(
                "asking the experts about %s failed: %s",
                answer_id,
                describe_failure(exc),
                extra=for_thread(rec["thread_key"] if rec else ""),
            )
            await out.notify_private("Sorry, I couldn't ask the experts (see the logs).")
            return False
