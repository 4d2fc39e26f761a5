"""The help desk: replies to help requests (the graph paused, a LangGraph interrupt
carrying a :class:`graphs.state.HelpPayload`, posted by :class:`bot.service.runs.Runs`).
Here a reply is claimed, the run resumed (``Command(resume=ResumeValue)``), or the request
expired.

A help request resumes exactly once: each reply (text or button, any platform) claims
the interrupt id pending when it arrived, atomically in the store; the loser is told
privately. No human in time -> the apology (the timeout claims too)."""

from __future__ import annotations

import logging

from langgraph.types import Command

from bot.chat.policy import HELP_REFUSAL
from bot.chat.syntax import has_words
from bot.logs import for_thread, with_log_context
from bot.protocol import HumanAction, Responder
from bot.service.apologies import Apologies
from bot.service.conversations import Conversations
from bot.service.help_timeouts import HelpTimeouts
from bot.service.responders import NullResponder, Responders
from bot.service.run_records import best_effort
from bot.service.run_slots import RunSlots
from bot.service.runs import Runs, TurnResult
from bot.service.thread_locks import ThreadLocks
from bot.storage import BookkeepingStore
from graphs.state import ResumeValue, resume_value

log = logging.getLogger("bot.service")

ALREADY_HANDLED = "This help request has already been handled."


class HelpDesk:
    """Claims replies to help requests and resumes the paused runs.

    Args:
        store: the bookkeeping (claims, open help requests).
        conversations: the threads (the pending interrupt).
        locks: one message of a thread at a time.
        slots: the run slots (a resume is a run).
        runs: runs the resumed graph.
        responders: the help request's own responder, rebuilt from its stored reference.
        timeouts: the help requests' timers (stopped by a reply).
        apologies: a failed resume ends in the apology.
    """

    def __init__(
        self,
        store: BookkeepingStore,
        conversations: Conversations,
        locks: ThreadLocks,
        slots: RunSlots,
        runs: Runs,
        responders: Responders,
        timeouts: HelpTimeouts,
        apologies: Apologies,
    ) -> None:
        self._store = store
        self._conversations = conversations
        self._locks = locks
        self._slots = slots
        self._runs = runs
        self._responders = responders
        self._timeouts = timeouts
        self._apologies = apologies

    async def claim(
        self, interrupt_id: str, key: str, by: str, parsed: tuple[HumanAction, str] | None, out: Responder
    ) -> bool:
        """Claim a help request for one reply (atomic in the store). False, after telling the
        replier privately, when another reply or the timeout claimed it first."""
        if parsed and parsed[0] == HumanAction.ANSWER and not has_words(parsed[1]):
            await out.notify_private("Please include the answer, e.g. `answer: the setting is X`.")
            return False
        if await self._store.claim_interrupt(interrupt_id, key, by):
            return True
        await self.already_handled(key, parsed[0] if parsed else HumanAction.DISMISS, by, out)
        return False

    @staticmethod
    async def already_handled(key: str, action: HumanAction, by: str, out: Responder) -> None:
        """Tell a replier privately that someone else's reply (or the timeout) won."""
        log.info("%s by %s ignored: the help request was already handled", action.value, by, extra=for_thread(key))
        await out.notify_private(ALREADY_HANDLED)

    @with_log_context(thread_key="thread_key")
    async def resume(
        self,
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
        """Resume a paused thread from a button or modal (see :meth:`bot.service.ChatService.resume`).
        Never raises."""
        try:
            if not is_expert:
                log.info("resume refused for non-expert %s", actor_id, extra=for_thread(thread_key))
                await out.notify_private(HELP_REFUSAL)
                return False
            action, by = HumanAction(action), actor_name or actor_id
            parsed = (action, text)
            if interrupt_id and not await self.claim(interrupt_id, thread_key, by, parsed, out):
                return False
            async with self._locks.hold(thread_key):
                pending = await self._conversations.pending_interrupt(thread_key)
                if pending is None or (interrupt_id and pending.id != interrupt_id):
                    await self.already_handled(thread_key, action, by, out)
                    return False
                if not interrupt_id and not await self.claim(pending.id, thread_key, by, parsed, out):
                    return False
                run_id = f"resume:{pending.id}"
                try:
                    result = await self.resume_claimed(
                        thread_key, action, text, by, out, pending.id, run_id=run_id, channel=channel
                    )
                finally:
                    await best_effort(self._store.finish_run(run_id), thread_key)
                return result is not None
        except Exception as exc:  # noqa: BLE001
            await self._apologies.fail(thread_key, exc, out, what="resume")
            return False

    async def resume_claimed(
        self,
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
        claimed = await self._store.claim_help_request(thread_key, by)
        target = self._responders.rebuild(claimed["platform"], claimed["reference"], out) if claimed else out
        self._timeouts.cancel(thread_key)
        log.info("help request resumed by %s: %s", by, action.value, extra=for_thread(thread_key))
        value: ResumeValue = resume_value({"action": HumanAction(action).value, "text": text, "by": by})
        async with self._slots:
            return await self._runs.run(
                thread_key,
                Command(resume=value),
                target,
                platform=claimed["platform"] if claimed else "console",
                is_resume=True,
                run_id=run_id,
                record={"resume": value, "interrupt_id": interrupt_id, "channel": channel},
            )

    async def expire(self, thread_key: str, interrupt_id: str = "") -> None:
        """No human answered in time: dismiss the thread's help request ``interrupt_id`` if it
        is still pending and unclaimed (the apology is posted where the request was)."""
        async with self._locks.hold(thread_key):
            pending = await self._conversations.pending_interrupt(thread_key)
            if pending is None or (interrupt_id and pending.id != interrupt_id):
                return
            if not await self._store.claim_interrupt(pending.id, thread_key, "timeout"):
                return  # a human's reply won the claim a moment ago
            await self.resume_claimed(
                thread_key,
                HumanAction.DISMISS,
                "",
                "timeout",
                NullResponder(),
                pending.id,
                run_id=f"timeout:{pending.id}",
            )

    async def rearm(self, *, missing_only: bool = False) -> int:
        """Arm the timers of the help requests open in the store (left by an earlier process,
        or, ``missing_only``, by another replica). Returns how many are open."""
        rows = await self._store.open_help_requests()
        self._timeouts.rearm(rows, missing_only=missing_only)
        return len(rows)
