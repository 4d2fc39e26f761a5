"""Help requests: the graph paused (a LangGraph interrupt carrying a
:class:`graphs.state.HelpPayload`) and asks humans. Here they are posted, claimed by
exactly one reply, resumed (``Command(resume=ResumeValue)``) and timed out.

A help request resumes exactly once: each reply (text or button, any platform) claims
the interrupt id pending when it arrived, atomically in the store; the loser is told
privately. No human in time -> the apology (the timeout claims too)."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from langgraph.types import Command

from bot.chat.policy import HELP_REFUSAL
from bot.failures import describe_failure
from bot.logs import for_thread, with_log_context
from bot.protocol import HelpRequest, HumanAction, PostError, Responder, Status
from bot.service import runs
from bot.service.errors import best_effort, fail, finish_run
from bot.service.responders import NullResponder
from graphs.state import ResumeValue, help_payload, resume_value

if TYPE_CHECKING:
    from bot.service.chat_service import ChatService
    from bot.service.runs import TurnResult

log = logging.getLogger("bot.service")  # one logger for the chat runtime: log filters name it


async def open_request(
    svc: ChatService, thread_key: str, intr: Any, out: Responder, *, platform: str, run_id: str
) -> HelpRequest | None:
    """Post the help request of the pending interrupt ``intr`` (``.id``, ``.value``: a
    :class:`~graphs.state.HelpPayload`), show waiting (apology when it could not be
    posted), record it and arm its timeout. None when another replica took the run over."""
    payload = help_payload(intr.value)
    request = HelpRequest(
        thread_key=thread_key,
        question=payload["question"],
        reason=payload["reason"],
        attempts=list(payload["attempts"]),
        timeout_seconds=svc.help_timeout_seconds,
        interrupt_id=intr.id,
    )
    if not await svc.store.may_post(run_id):  # replicas: another one took this run over
        return None
    try:
        await out.post_help_request(request)
    except PostError as exc:
        log.error("help request could not be posted: %s", exc, extra=for_thread(thread_key))
        await out.set_status(Status.APOLOGY)
    else:
        await out.set_status(Status.WAITING_HUMAN)
    # the reference is taken after posting, so it names the help message and the current reaction
    await best_effort(
        svc.store.open_help_request(
            thread_key, platform, out.reference(), request.question, svc.help_timeout_seconds, interrupt_id=intr.id
        ),
        thread_key,
    )
    arm_timeout(svc, thread_key, svc.help_timeout_seconds, intr.id)
    await finish_run(svc, run_id, thread_key)
    return request


async def claim(
    svc: ChatService, interrupt_id: str, key: str, by: str, parsed: tuple[HumanAction, str] | None, out: Responder
) -> bool:
    """Claim a help request for one reply (atomic in the store). False, after telling the
    replier privately, when another reply or the timeout claimed it first."""
    if parsed and parsed[0] == HumanAction.ANSWER and not parsed[1]:
        await out.notify_private("Please include the answer, e.g. `answer: the setting is X`.")
        return False
    if await svc.store.claim_interrupt(interrupt_id, key, by):
        return True
    await already_handled(key, parsed[0] if parsed else HumanAction.DISMISS, by, out)
    return False


async def already_handled(key: str, action: HumanAction, by: str, out: Responder) -> None:
    """Tell a replier privately that someone else's reply (or the timeout) won."""
    log.info("%s by %s ignored: the help request was already handled", action.value, by, extra=for_thread(key))
    await out.notify_private("This help request has already been handled.")


@with_log_context(thread_key="thread_key")
async def resume(
    svc: ChatService,
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
    """Resume a paused thread from a button or modal (see :meth:`ChatService.resume`). Never raises."""
    try:
        if not is_expert:
            log.info("resume refused for non-expert %s", actor_id, extra=for_thread(thread_key))
            await out.notify_private(HELP_REFUSAL)
            return False
        action, by = HumanAction(action), actor_name or actor_id
        parsed = (action, text)
        if interrupt_id and not await claim(svc, interrupt_id, thread_key, by, parsed, out):
            return False
        async with svc.threads.hold(thread_key):
            pending = await svc.pending_interrupt(thread_key)
            if pending is None or (interrupt_id and pending.id != interrupt_id):
                await already_handled(thread_key, action, by, out)
                return False
            if not interrupt_id and not await claim(svc, pending.id, thread_key, by, parsed, out):
                return False
            run_id = f"resume:{pending.id}"
            try:
                result = await resume_claimed(
                    svc, thread_key, action, text, by, out, pending.id, run_id=run_id, channel=channel
                )
            finally:
                await best_effort(svc.store.finish_run(run_id), thread_key)
            return result is not None
    except Exception as exc:  # noqa: BLE001
        await fail(svc, thread_key, exc, out, what="resume")
        return False


async def resume_claimed(
    svc: ChatService,
    thread_key: str,
    action: HumanAction,
    text: str,
    by: str,
    out: Responder,
    interrupt_id: str,
    *,
    run_id: str,
    channel: str = "",
) -> TurnResult:
    """Resume the claimed interrupt ``interrupt_id`` with a :class:`~graphs.state.ResumeValue`
    (the caller holds the thread lock). The answer goes to the help request's own thread
    (its responder rebuilt from the stored reference), else to ``out``."""
    claimed = await svc.store.claim_help_request(thread_key, by)
    target = svc.responders.rebuild(claimed["platform"], claimed["reference"], out) if claimed else out
    timer = svc.timers.pop(thread_key, None)
    if timer and timer is not asyncio.current_task():
        timer.cancel()
    log.info("help request resumed by %s: %s", by, action.value, extra=for_thread(thread_key))
    value: ResumeValue = resume_value({"action": HumanAction(action).value, "text": text, "by": by})
    async with svc.slots:
        return await runs.run(
            svc,
            thread_key,
            Command(resume=value),
            target,
            platform=claimed["platform"] if claimed else "console",
            is_resume=True,
            run_id=run_id,
            record={"resume": value, "interrupt_id": interrupt_id, "channel": channel},
        )


def arm_timeout(svc: ChatService, thread_key: str, delay: float, interrupt_id: str = "") -> None:
    """In ``delay`` seconds, dismiss the thread's help request ``interrupt_id`` if it is
    still pending and unclaimed (the apology is posted where the request was)."""
    old = svc.timers.pop(thread_key, None)
    if old:
        old.cancel()

    async def fire() -> None:
        await asyncio.sleep(delay)
        log.info("no human answered in time", extra=for_thread(thread_key))
        try:
            async with svc.threads.hold(thread_key):
                pending = await svc.pending_interrupt(thread_key)
                if pending is None or (interrupt_id and pending.id != interrupt_id):
                    return
                if not await svc.store.claim_interrupt(pending.id, thread_key, "timeout"):
                    return  # a human's reply won the claim a moment ago
                await resume_claimed(
                    svc,
                    thread_key,
                    HumanAction.DISMISS,
                    "",
                    "timeout",
                    NullResponder(),
                    pending.id,
                    run_id=f"timeout:{pending.id}",
                )
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001
            log.error("help request timeout failed: %s", describe_failure(exc), extra=for_thread(thread_key))

    svc.timers[thread_key] = asyncio.create_task(fire(), name=f"help-timeout:{thread_key}")


def rearm(svc: ChatService, rows: list[dict[str, Any]], *, missing_only: bool = False) -> None:
    """Arm the timeouts of open help requests (rows of
    :meth:`bot.storage.base.BookkeepingStore.open_help_requests`); ``missing_only``: only those with
    no live timer in this process (replicas)."""
    for row in rows:
        timer = svc.timers.get(row["thread_key"])
        if missing_only and timer is not None and not timer.done():
            continue
        arm_timeout(svc, row["thread_key"], max(0.0, row["deadline"] - time.time()), row.get("interrupt_id", ""))
