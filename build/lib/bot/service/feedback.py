"""Feedback on posted answers: every answer is recorded with an id its 👍/👎 controls
carry; votes are saved (one per user and answer); a 👎'd answer may go to the experts
(a help request in its thread, :func:`escalate`)."""

from __future__ import annotations

import logging
import uuid
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from bot.failures import describe_failure
from bot.logs import for_thread
from bot.protocol import Answer, Responder, clean_text
from bot.service import runs
from graphs.adaptive_rag import ask_experts

if TYPE_CHECKING:
    from bot.service.chat_service import ChatService

log = logging.getLogger("bot.service")  # one logger for the chat runtime: log filters name it


async def recorded(
    svc: ChatService, answer: Answer, values: dict[str, Any], *, thread_key: str, platform: str, channel: str
) -> Answer:
    """Record an answer for feedback and give it the id its 👍/👎 controls carry; when
    the record cannot be written the answer goes out without controls (logged)."""
    answer_id = uuid.uuid4().hex[:16]
    try:
        await svc.store.record_answer(
            answer_id,
            thread_key=thread_key,
            platform=platform,
            channel=channel,
            question=str(values.get("question") or ""),
            answer=answer.text,
            kind=answer.kind,
            route=str(values.get("route") or ""),
            sources=[dict(s) for s in values.get("sources", [])],
            path=list(answer.path),
        )
    except Exception as exc:  # noqa: BLE001 - feedback is bookkeeping: the answer still goes out
        log.warning("answer not recorded for feedback: %s", describe_failure(exc), extra=for_thread(thread_key))
        return answer
    return replace(answer, answer_id=answer_id)


async def vote(svc: ChatService, answer_id: str, user_id: str, vote: int, reason: str | None = None) -> bool:
    """Record a vote (see :meth:`ChatService.vote`). Never raises."""
    try:
        ok = await svc.store.record_vote(answer_id, user_id, vote, clean_text(reason) if reason else reason)
    except Exception as exc:  # noqa: BLE001
        log.warning("vote on %s by %s not recorded: %s", answer_id, user_id, describe_failure(exc))
        return False
    log.info("vote %+d on answer %s by %s%s", vote, answer_id, user_id, "" if ok else " ignored: unknown answer")
    return ok


async def escalate(svc: ChatService, answer_id: str, *, actor_id: str, actor_name: str, out: Responder) -> bool:
    """Send a 👎'd answer to the experts (see :meth:`ChatService.escalate`). Never raises."""
    rec: dict[str, Any] | None = None
    try:
        rec = await svc.store.answer_record(answer_id)
        if rec is None or not svc.human_review:
            await out.notify_private(
                "Sorry, I can't ask the experts about that answer."
                if rec is not None
                else "I can't find that answer any more."
            )
            return False
        key = rec["thread_key"]
        vote = await svc.store.vote_of(answer_id, actor_id)
        reason = vote["reason"] if vote else ""
        note = f"{actor_name or 'a teammate'} marked the answer as wrong" + (f": {reason}" if reason else "")
        async with svc.threads.hold(key):
            if await svc.pending_interrupt(key) is not None:
                await out.notify_private("This thread is already waiting for an expert.")
                return False
            await ask_experts(svc.graph, svc.run_config(key), rec["question"], clean_text(note))
            log.info("answer %s sent to the experts by %s", answer_id, actor_name, extra=for_thread(key))
            async with svc.slots:
                result = await runs.run(
                    svc,
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
