"""What a failure becomes: one log line and the apology (the storage apology when the
bot cannot save), never a traceback; bookkeeping writes that fail are logged and the
turn goes on."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from bot.failures import describe_failure, failure_kind
from bot.logs import for_thread
from bot.protocol import Answer, Responder, Status

if TYPE_CHECKING:
    from bot.service.chat_service import ChatService

log = logging.getLogger("bot.service")  # one logger for the chat runtime: log filters name it


async def best_effort(coro: Any, thread_key: str) -> None:
    """Await a bookkeeping write; a failure (full disk) is logged, the turn goes on."""
    try:
        await coro
    except Exception as exc:  # noqa: BLE001
        log.warning("bookkeeping write failed: %s", describe_failure(exc), extra=for_thread(thread_key))


async def finish_run(svc: ChatService, run_id: str, thread_key: str) -> None:
    """Delete the run's in-flight record (best effort) and remember that it is done, so
    :func:`bot.service.dispatch.dispatch_guarded` does not delete it a second time."""
    try:
        await svc.store.finish_run(run_id)
    except Exception as exc:  # noqa: BLE001 - e.g. a full disk: dispatch_guarded tries again
        log.warning("bookkeeping write failed: %s", describe_failure(exc), extra=for_thread(thread_key))
        return
    svc.finished.add(run_id)
    if len(svc.finished) > 4096:  # runs not entered through dispatch_guarded
        svc.finished.clear()


def apology_for(svc: ChatService, exc: BaseException) -> str:
    """The apology for a failed turn: the storage apology when saving failed, else the
    configured one."""
    if failure_kind(exc) == "storage":
        return svc.storage_apology
    return svc.admin_commands.apology


async def fail(
    svc: ChatService, thread_key: str, exc: BaseException, out: Responder, *, what: str, run_id: str = ""
) -> None:
    """A turn failed outside the graph: one log line, the (storage) apology, the apology
    reaction; nothing more when another replica took the run ``run_id`` over (it answers)."""
    log.error("%s failed: %s", what, describe_failure(exc), extra=for_thread(thread_key))
    log.debug("traceback", exc_info=exc)
    if run_id and not await svc.store.may_post(run_id):
        return
    try:
        await out.post_answer(Answer(text=apology_for(svc, exc), kind="apology"))
    except Exception as post_exc:  # noqa: BLE001
        log.error(
            "the apology could not be posted either: %s", describe_failure(post_exc), extra=for_thread(thread_key)
        )
    try:
        await out.set_status(Status.APOLOGY)
    except Exception:  # noqa: BLE001
        pass
