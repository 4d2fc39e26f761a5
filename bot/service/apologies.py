"""What a failure becomes in chat: one log line and the apology (the storage apology when
the bot cannot save), never a traceback.

The words are settings (``[service] apology``, ``[service] storage_apology``, and with
PostgreSQL ``[storage] database_apology``); :mod:`bot.failures` says what kind of failure
an exception is.
"""

from __future__ import annotations

import logging

from bot.failures import describe_failure, failure_kind
from bot.logs import for_thread
from bot.protocol import Answer, Responder, Status
from bot.storage import RunLedger

log = logging.getLogger("bot.service")


class Apologies:
    """The apologies and how a failed turn ends.

    Args:
        apology: ``[service] apology``: no answer could be given (also the graph's own).
        storage_apology: the apology when saving failed (disk full or read-only, the
            database away).
        store: the bookkeeping (``may_post``: another replica may have taken the run over).
    """

    def __init__(self, apology: str, storage_apology: str, store: RunLedger) -> None:
        self.apology = apology
        self.storage_apology = storage_apology
        self._store = store

    def text_for(self, exc: BaseException) -> str:
        """The apology for a turn that failed with ``exc``: the storage apology when saving
        failed, else the configured one."""
        return self.storage_apology if failure_kind(exc) == "storage" else self.apology

    async def fail(self, thread_key: str, exc: BaseException, out: Responder, *, what: str, run_id: str = "") -> None:
        """A turn failed outside the graph: one log line, the (storage) apology, the apology
        status; nothing more when another replica took the run ``run_id`` over (it answers)."""
        log.error("%s failed: %s", what, describe_failure(exc), extra=for_thread(thread_key))
        log.debug("traceback", exc_info=exc)
        try:
            if run_id and not await self._store.may_post(run_id):
                return
        except Exception as store_exc:  # noqa: BLE001 - the store is away too: this process apologises
            log.warning(
                "run %s: ownership not checked: %s", run_id, describe_failure(store_exc), extra=for_thread(thread_key)
            )
        try:
            await out.post_answer(Answer(text=self.text_for(exc), kind="apology"))
        except Exception as post_exc:  # noqa: BLE001
            log.error(
                "the apology could not be posted either: %s", describe_failure(post_exc), extra=for_thread(thread_key)
            )
        try:
            await out.set_status(Status.APOLOGY)
        except Exception:  # noqa: BLE001
            pass
