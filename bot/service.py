"""ChatService: the platform-neutral chat runtime.

One :class:`~bot.protocol.IncomingMessage` in -> dedup -> (empty question | admin
command | reply to a pending help request | new graph run) -> statuses, answer, apology
or help request out through the adapter's :class:`~bot.protocol.Responder`.

Guarantees (failure-modes.md):
- a message id is handled once, persisted across restarts (:class:`bot.store.Bookkeeping`);
- messages of one thread run in order (one asyncio lock per thread key), different
  threads run concurrently (capped by ``service.max_concurrent_runs``);
- a thread with a pending interrupt is resumed (``Command(resume=...)``), never restarted;
  a help request resumes exactly once (per-thread lock + atomic claim in the store +
  interrupt id check); no human in time -> the apology;
- any failure of a run ends in the apology and the apology reaction, never a traceback.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, AsyncIterator, Callable

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.types import Command

from bot.chat.text import REPLY_SYNTAX
from bot.protocol import Answer, HelpRequest, HumanAction, IncomingMessage, PostError, Responder, Source, Status
from bot.store import Bookkeeping

log = logging.getLogger(__name__)

NODE_STATUS: dict[str, Status] = {
    "rewrite_kb": Status.SEARCHING,
    "retrieve": Status.SEARCHING,
    "rewrite_web": Status.WEB,
    "web_search": Status.WEB,
    "generate": Status.WRITING,
    "direct": Status.WRITING,
}
_OUTCOME_KIND = {"answer": "answer", "direct": "direct", "human": "human", "apology": "apology"}
_REPLY_RE = re.compile(r"^\s*(?:(answer|retry)\s*:\s*(.*)|(dismiss)\s*[:.!]?\s*)$", re.I | re.S)


def parse_human_reply(text: str) -> tuple[HumanAction, str] | None:
    """Parse an expert's text reply to a help request.

    ``answer: ...`` / ``retry: ...`` (with the colon) or ``dismiss`` alone
    (case-insensitive). Returns
    ``(action, text)``, or None for any other text (chatter such as "let me check" must
    not become the answer).
    """
    m = _REPLY_RE.match(text)
    if not m:
        return None
    if m.group(3):
        return HumanAction.DISMISS, ""
    return HumanAction(m.group(1).lower()), m.group(2).strip()


REPLY_HINT = f"This thread is waiting for an expert. Reply with {REPLY_SYNTAX}."


class _NullResponder:
    """Used when a timed-out help request's platform is not running: logs only."""

    async def set_status(self, status: Status) -> None: ...
    async def post_answer(self, answer: Answer) -> None:
        log.info("no adapter to post a %s answer", answer.kind)
    async def post_help_request(self, request: HelpRequest) -> None: ...
    async def post_notice(self, text: str) -> None: ...
    async def update_progress(self, text: str, *, final: bool = False) -> None: ...
    async def notify_private(self, text: str) -> None: ...
    def reference(self) -> dict[str, Any]:
        return {}


@dataclass
class TurnResult:
    """What one run of the graph ended with (for the CLI and eval)."""

    thread_key: str
    answer: Answer | None
    help_request: HelpRequest | None
    values: dict[str, Any]
    seconds: float


class ChatService:
    """Platform-neutral chat runtime over a compiled graph with a checkpointer.

    Args:
        graph: the compiled adaptive RAG graph (with an AsyncSqliteSaver).
        store: bookkeeping (dedup, help requests, audit).
        admin: the admin command handler (:class:`bot.admin.AdminCommands`).
        help_timeout_seconds: a help request unanswered this long ends in the apology.
        max_concurrent_runs: graph runs in flight across all threads.
        recursion_limit: LangGraph recursion limit (budgets end loops long before it).
        empty_question_reply: reply to a message with no text (costs no LLM call).
        keep_checkpoints: checkpoints kept per thread after each run (older ones pruned).
        max_question_characters: longer messages get a polite refusal (they would not fit
            the model's context window).
        dedup_retention_seconds: handled message ids older than this are forgotten by
            :meth:`recover` (redeliveries come within minutes).
    """

    def __init__(self, graph: Any, store: Bookkeeping, admin: Any, *, help_timeout_seconds: float = 3600.0,
                 max_concurrent_runs: int = 8, recursion_limit: int = 60,
                 empty_question_reply: str = "What would you like to know?", keep_checkpoints: int = 20,
                 max_question_characters: int = 4000, dedup_retention_seconds: float = 7 * 86400):
        self.graph = graph
        self.store = store
        self.admin_commands = admin
        self.help_timeout_seconds = help_timeout_seconds
        self.recursion_limit = recursion_limit
        self.empty_question_reply = empty_question_reply
        self.keep_checkpoints = keep_checkpoints
        self.max_question_characters = max_question_characters
        self.dedup_retention_seconds = dedup_retention_seconds
        self._runs = asyncio.Semaphore(max_concurrent_runs)
        self._locks: dict[str, asyncio.Lock] = {}
        self._lock_users: dict[str, int] = {}
        self._factories: dict[str, Callable[[dict[str, Any]], Responder]] = {}
        self._timers: dict[str, asyncio.Task] = {}

    # ---- wiring ------------------------------------------------------------------
    def register_platform(self, platform: str, factory: Callable[[dict[str, Any]], Responder]) -> None:
        """Let the service rebuild a responder from ``Responder.reference()`` (after a restart)."""
        self._factories[platform] = factory

    def _responder_from(self, platform: str, reference: dict[str, Any], fallback: Responder | None) -> Responder:
        factory = self._factories.get(platform)
        if factory and reference:
            try:
                return factory(reference)
            except Exception:  # noqa: BLE001
                log.exception("cannot rebuild a %s responder", platform)
        return fallback or _NullResponder()

    @asynccontextmanager
    async def _thread(self, key: str) -> AsyncIterator[None]:
        lock = self._locks.setdefault(key, asyncio.Lock())
        self._lock_users[key] = self._lock_users.get(key, 0) + 1
        try:
            async with lock:
                yield
        finally:
            self._lock_users[key] -= 1
            if not self._lock_users[key]:
                self._locks.pop(key, None)
                self._lock_users.pop(key, None)

    def _cfg(self, key: str) -> dict[str, Any]:
        return {"configurable": {"thread_id": key}, "recursion_limit": self.recursion_limit}

    # ---- queries -----------------------------------------------------------------
    async def pending_interrupt(self, thread_key: str) -> Any | None:
        """The pending LangGraph interrupt of a thread (with ``.id`` and ``.value``), or None."""
        state = await self.graph.aget_state(self._cfg(thread_key))
        return state.interrupts[0] if state.interrupts else None

    async def knows_thread(self, thread_key: str) -> bool:
        """True if the bot already took part in this thread: a checkpoint exists, or it
        handled a message there (e.g. replied to a bare mention)."""
        if await self.graph.checkpointer.aget_tuple(self._cfg(thread_key)) is not None:
            return True
        return await self.store.has_thread(thread_key)

    async def thread_keys(self, prefix: str = "") -> list[str]:
        """Saved thread keys starting with ``prefix`` (from the checkpoint file)."""
        saver = self.graph.checkpointer
        conn = getattr(saver, "conn", None)
        if conn is None:
            return []
        async with saver.lock:
            rows = await (await conn.execute(
                "SELECT DISTINCT thread_id FROM checkpoints WHERE thread_id LIKE ? ORDER BY thread_id",
                (prefix.replace("%", "") + "%",))).fetchall()
        return [r[0] for r in rows]

    async def thread_values(self, thread_key: str) -> dict[str, Any]:
        """The saved state of a thread ({} if none)."""
        return dict((await self.graph.aget_state(self._cfg(thread_key))).values or {})

    # ---- entry points ------------------------------------------------------------
    async def handle(self, msg: IncomingMessage, out: Responder) -> TurnResult | None:
        """Handle one user message (see the module docstring). Never raises.

        Returns the run's :class:`TurnResult`, or None when no run happened (duplicate,
        empty or too long message, admin command, refused or non-command reply)."""
        try:
            if not await self.store.mark_seen(msg.message_id, msg.thread_key):
                log.info("[%s] duplicate delivery of %s ignored", msg.thread_key, msg.message_id)
                return None
            return await self._dispatch(msg, out)
        except Exception as exc:  # noqa: BLE001 - nothing may crash the process
            log.error("[%s] handling %s failed: %s: %s", msg.thread_key, msg.message_id, type(exc).__name__, exc)
            log.debug("traceback", exc_info=True)
            return None

    async def ask(self, thread_key: str, text: str, out: Responder, platform: str = "console") -> TurnResult | None:
        """One message from the local user (CLI ``ask``, eval): no dedup; the local user is
        admin and expert. Same checks as :meth:`handle` otherwise."""
        msg = IncomingMessage(platform=platform, thread_key=thread_key, message_id="", author_id="console",
                              author_name="console", text=text, is_admin=True, is_expert=True)
        return await self._dispatch(msg, out)

    async def _dispatch(self, msg: IncomingMessage, out: Responder) -> TurnResult | None:
        text = msg.text.strip()
        if not text:
            log.info("[%s] empty question from %s", msg.thread_key, msg.author_id)
            await out.post_notice(self.empty_question_reply)
            return None
        if len(text) > self.max_question_characters:
            log.info("[%s] question of %d characters refused", msg.thread_key, len(text))
            await out.post_notice(
                f"That message is too long for me ({len(text):,} characters; the limit is "
                f"{self.max_question_characters:,}). Please shorten it or ask about one part at a time.")
            return None
        command = self.admin_commands.parse(text)
        if command:
            await self.admin(command, actor_id=msg.author_id, is_admin=msg.is_admin, out=out)
            return None
        async with self._thread(msg.thread_key):
            pending = await self.pending_interrupt(msg.thread_key)
            if pending is not None:
                if not msg.is_expert:
                    log.info("[%s] non-expert %s replied to a help request", msg.thread_key, msg.author_id)
                    await out.notify_private(
                        "This thread is waiting for an expert's answer; only the people named in the help "
                        "request can resume it. Your message was not sent to the bot.")
                    return None
                parsed = parse_human_reply(text)
                if parsed is None:
                    await out.notify_private(REPLY_HINT)
                    return None
                return await self._resume_locked(msg.thread_key, parsed[0], parsed[1],
                                                 msg.author_name or msg.author_id, out, interrupt_id=None)
            log.info("[%s] question from %s (%d chars)", msg.thread_key, msg.author_id, len(text))
            async with self._runs:
                return await self._run(msg.thread_key, {"messages": [HumanMessage(text)]}, out, platform=msg.platform)

    async def seed_history(self, thread_key: str, history: list[dict[str, str]]) -> None:
        """Write earlier turns (``[{"role": "user"|"assistant", "content": str}]``) into a
        thread, as if they had been asked (eval follow-ups)."""
        msgs = [HumanMessage(h["content"]) if h["role"] == "user" else AIMessage(h["content"]) for h in history]
        if msgs:
            await self.graph.aupdate_state(self._cfg(thread_key), {"messages": msgs}, as_node="finish")

    async def resume(self, thread_key: str, action: HumanAction, text: str, *, actor_id: str, actor_name: str,
                     is_expert: bool, out: Responder, interrupt_id: str | None = None) -> bool:
        """Resume a paused thread from a button or modal.

        Returns False (after telling the actor privately) when the actor is not an
        expert, nothing is pending (already resumed), or ``interrupt_id`` names an
        older help request. Never raises.
        """
        try:
            if not is_expert:
                log.info("[%s] resume refused for non-expert %s", thread_key, actor_id)
                await out.notify_private("Only the experts named in this help request can answer it.")
                return False
            async with self._thread(thread_key):
                result = await self._resume_locked(thread_key, HumanAction(action), text, actor_name or actor_id, out,
                                                   interrupt_id=interrupt_id)
                return result is not None
        except Exception:  # noqa: BLE001
            log.exception("[%s] resume failed", thread_key)
            return False

    async def admin(self, command: str, *, actor_id: str, is_admin: bool, out: Responder) -> None:
        """Run an admin command (``reindex``, ``status``, ``help``). Never raises."""
        try:
            await self.admin_commands.run(command, actor_id=actor_id, is_admin=is_admin, out=out)
        except Exception:  # noqa: BLE001
            log.exception("admin command %s failed", command)
            await out.post_notice(f"Sorry, `{command}` failed; the logs have the details.")

    async def recover(self) -> int:
        """Re-arm the timeouts of help requests left open by an earlier process and prune
        old message ids. Call after the platforms are registered. Returns how many help
        requests were re-armed."""
        forgotten = await self.store.forget_seen_before(self.dedup_retention_seconds)
        if forgotten:
            log.info("forgot %d message ids older than %.0f days", forgotten, self.dedup_retention_seconds / 86400)
        rows = await self.store.open_help_requests()
        for row in rows:
            self._arm_timeout(row["thread_key"], max(0.0, row["deadline"] - time.time()))
        if rows:
            log.info("re-armed %d open help requests", len(rows))
        return len(rows)

    async def close(self) -> None:
        for t in self._timers.values():
            t.cancel()
        self._timers.clear()

    # ---- internals ---------------------------------------------------------------
    async def _resume_locked(self, thread_key: str, action: HumanAction, text: str, by: str, out: Responder,
                             interrupt_id: str | None) -> TurnResult | None:
        pending = await self.pending_interrupt(thread_key)
        if pending is None or (interrupt_id and pending.id != interrupt_id):
            log.info("[%s] %s by %s ignored: no matching help request pending", thread_key, action.value, by)
            await out.notify_private("This help request has already been handled.")
            return None
        if action == HumanAction.ANSWER and not text:
            await out.notify_private("Please include the answer, e.g. `answer: the setting is X`.")
            return None
        claim = await self.store.claim_help_request(thread_key, by)
        target = self._responder_from(claim["platform"], claim["reference"], out) if claim else out
        timer = self._timers.pop(thread_key, None)
        if timer and timer is not asyncio.current_task():
            timer.cancel()
        log.info("[%s] help request resumed by %s: %s", thread_key, by, action.value)
        resume = {"action": action.value, "text": text, "by": by}
        async with self._runs:
            return await self._run(thread_key, Command(resume=resume), target,
                                   platform=claim["platform"] if claim else "console", is_resume=True)

    async def _run(self, thread_key: str, graph_input: Any, out: Responder, *, platform: str,
                   is_resume: bool = False) -> TurnResult:
        t0 = time.perf_counter()
        cfg = self._cfg(thread_key)
        if not is_resume:
            await out.set_status(Status.RECEIVED)
        last: Status | None = None
        try:
            async for mode, chunk in self.graph.astream(graph_input, cfg, stream_mode=["tasks", "updates"]):
                if mode == "tasks" and "result" not in chunk:
                    status = NODE_STATUS.get(chunk.get("name", ""))
                    if status and status != last:
                        last = status
                        await out.set_status(status)
            state = await self.graph.aget_state(cfg)
        except Exception as exc:  # noqa: BLE001 - the user gets an apology, never a traceback
            log.error("[%s] graph run failed: %s: %s", thread_key, type(exc).__name__, str(exc)[:300])
            log.debug("traceback", exc_info=True)
            answer = Answer(text=self.admin_commands.apology, kind="apology")
            await out.post_answer(answer)
            await out.set_status(Status.APOLOGY)
            return TurnResult(thread_key, answer, None, {}, time.perf_counter() - t0)
        values = dict(state.values or {})
        if state.interrupts:
            intr = state.interrupts[0]
            payload = intr.value if isinstance(intr.value, dict) else {}
            request = HelpRequest(
                thread_key=thread_key, question=str(payload.get("question", "")),
                reason=str(payload.get("reason", "")), attempts=list(payload.get("attempts", [])),
                timeout_seconds=self.help_timeout_seconds, interrupt_id=intr.id,
            )
            try:
                await out.post_help_request(request)
            except PostError as exc:  # done/waiting only when posted (another branch refines this)
                log.error("[%s] help request not posted: %s", thread_key, exc)
                await out.set_status(Status.APOLOGY)
                return TurnResult(thread_key, None, request, values, time.perf_counter() - t0)
            await out.set_status(Status.WAITING_HUMAN)
            # the reference is taken after posting, so it names the help message and the current reaction
            await self.store.open_help_request(thread_key, platform, out.reference(), request.question,
                                               self.help_timeout_seconds)
            self._arm_timeout(thread_key, self.help_timeout_seconds)
            log.info("[%s] paused for a human after %s", thread_key, "->".join(values.get("path", [])))
            return TurnResult(thread_key, None, request, values, time.perf_counter() - t0)
        outcome = values.get("outcome") or "answer"
        answer = Answer(
            text=values.get("generation", ""),
            sources=[Source(s.get("title", ""), s.get("location", "")) for s in values.get("sources", [])],
            route=list(values.get("path", [])), kind=_OUTCOME_KIND.get(outcome, "answer"),
            answered_by=values.get("answered_by", ""),
        )
        try:
            await out.post_answer(answer)
        except PostError as exc:  # done only when posted (another branch refines this)
            log.error("[%s] answer not posted: %s", thread_key, exc)
            await out.set_status(Status.APOLOGY)
            return TurnResult(thread_key, answer, None, values, time.perf_counter() - t0)
        await out.set_status(Status.APOLOGY if answer.kind == "apology" else Status.DONE)
        seconds = time.perf_counter() - t0
        log.info("[%s] %s in %.1fs, %d LLM calls, path %s", thread_key, answer.kind, seconds,
                 values.get("llm_calls", 0), "->".join(answer.route))
        await self._prune(thread_key)
        return TurnResult(thread_key, answer, None, values, seconds)

    def _arm_timeout(self, thread_key: str, delay: float) -> None:
        old = self._timers.pop(thread_key, None)
        if old:
            old.cancel()

        async def fire() -> None:
            await asyncio.sleep(delay)
            log.info("[%s] no human answered in time", thread_key)
            async with self._thread(thread_key):
                await self._resume_locked(thread_key, HumanAction.DISMISS, "", "timeout", _NullResponder(),
                                          interrupt_id=None)

        self._timers[thread_key] = asyncio.create_task(fire(), name=f"help-timeout:{thread_key}")

    async def _prune(self, thread_key: str) -> None:
        """Keep only the newest checkpoints of a thread so a long thread's file stays bounded."""
        saver = self.graph.checkpointer
        conn = getattr(saver, "conn", None)
        if conn is None or not hasattr(saver, "lock"):
            return
        keep = self.keep_checkpoints
        try:
            async with saver.lock:
                await conn.execute(
                    "DELETE FROM writes WHERE thread_id = ? AND checkpoint_id NOT IN (SELECT checkpoint_id FROM "
                    "checkpoints WHERE thread_id = ? ORDER BY checkpoint_id DESC LIMIT ?)", (thread_key, thread_key, keep))
                await conn.execute(
                    "DELETE FROM checkpoints WHERE thread_id = ? AND checkpoint_id NOT IN (SELECT checkpoint_id FROM "
                    "checkpoints WHERE thread_id = ? ORDER BY checkpoint_id DESC LIMIT ?)", (thread_key, thread_key, keep))
                await conn.commit()
        except Exception:  # noqa: BLE001 - pruning is best effort
            log.warning("[%s] checkpoint pruning failed", thread_key, exc_info=True)
