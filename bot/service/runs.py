"""One graph run: stream it, show its progress phases as statuses, and post what it
ended with (the answer, the apology, or a help request); the final status is done,
apology or waiting, and done only when the answer was posted (:class:`PostError`).

The graph says which phase it is in (:class:`graphs.state.ProgressEvent`, LangGraph
custom stream events); :data:`PHASE_STATUS` maps phases to statuses. The runtime never
needs a node name."""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass, replace
from types import SimpleNamespace
from typing import Any, cast

from langgraph.types import Durability

from bot.failures import describe_failure
from bot.logs import for_thread, with_log_context
from bot.metrics import TurnObserver
from bot.protocol import Answer, HelpRequest, PostError, Responder, Source, Status
from bot.service.apologies import Apologies
from bot.service.conversations import Conversations
from bot.service.graph_pool import GraphPool, GraphWorkerGone
from bot.service.help_timeouts import HelpTimeouts
from bot.service.learning import Learning, ScopeFor
from bot.service.run_records import RunRecords, best_effort
from bot.storage import BookkeepingStore
from bot.tracing import run_config
from graphs.state import Phase, ProgressEvent, help_payload

log = logging.getLogger("bot.service")

#: The status shown for each progress phase the graph reports.
PHASE_STATUS: dict[Phase, Status] = {
    Phase.SEARCHING: Status.SEARCHING,
    Phase.WEB: Status.WEB,
    Phase.WRITING: Status.WRITING,
}
_OUTCOME_KINDS = ("answer", "direct", "human", "apology")  # Answer.kind; any other outcome is an answer


@dataclass
class TurnResult:
    """What one run of the graph ended with (for the CLI and eval)."""

    thread_key: str
    answer: Answer | None
    help_request: HelpRequest | None
    values: dict[str, Any]
    seconds: float
    error: str = ""  # one line (bot.failures.describe_failure) when the run failed and ended in the apology


def answer_of(values: dict[str, Any], note: str = "") -> Answer:
    """The answer a finished run's state holds (``note``: the runtime's note, shown with
    answers and direct answers only)."""
    outcome = values.get("outcome") or "answer"
    return Answer(
        text=values.get("generation", ""),
        sources=[Source(s.get("title", ""), s.get("location", "")) for s in values.get("sources", [])],
        route=values.get("answer_route") or "direct",
        drafts=int(values.get("drafts") or 0),
        path=list(values.get("path", [])),
        kind=outcome if outcome in _OUTCOME_KINDS else "answer",
        answered_by=values.get("answered_by", ""),
        note=note if outcome in ("answer", "direct") else "",
    )


def finished_state(values: dict[str, Any] | None) -> SimpleNamespace | None:
    """The state a run ended with, from its last ``values`` stream chunk (LangGraph emits the
    whole state after every step), shaped like the ``StateSnapshot`` :meth:`Runs.report` reads;
    None when the run paused (the chunk carries ``__interrupt__``: the interrupt's id is read
    from the checkpointer) or sent no values. Saves a checkpoint read per question."""
    if not values or "__interrupt__" in values:
        return None
    return SimpleNamespace(values=values, interrupts=())


class Runs:
    """Runs the graph and reports its outcome.

    Args:
        conversations: the threads (run config, checkpoints, pruning).
        store: the bookkeeping (run records, ownership among replicas, answers for feedback,
            open help requests).
        records: finishes run records once.
        apologies: the apology of a failed run.
        timeouts: a posted help request's timer.
        learning: an expert's answer is saved as a learned entry.
        observer: metrics (:class:`bot.metrics.TurnObserver`; its callbacks join every run).
        durability: ``[service] checkpoint_durability``: LangGraph's durability mode of a run.
        graph_pool: graph worker processes that run the graph; None: in this process.
        scope_for: a channel's settings for a run there (``configurable["scope"]``); None: everything.
        answer_note: shown with every answer, e.g. that the chat model is unavailable.
    """

    def __init__(
        self,
        conversations: Conversations,
        store: BookkeepingStore,
        records: RunRecords,
        apologies: Apologies,
        timeouts: HelpTimeouts,
        learning: Learning,
        observer: TurnObserver,
        *,
        durability: Durability,
        graph_pool: GraphPool | None = None,
        scope_for: ScopeFor | None = None,
        answer_note: str = "",
    ) -> None:
        self._conversations = conversations
        self._store = store
        self._records = records
        self._apologies = apologies
        self._timeouts = timeouts
        self._learning = learning
        self.observer = observer
        self.durability = durability
        self.graph_pool = graph_pool
        self._scope_for = scope_for
        self.answer_note = answer_note

    async def show(self, run_id: str, out: Responder, status: Status) -> None:
        """Set a status; nothing once another replica took the run over. The run's stored
        reference is not rewritten: a responder rebuilt from it clears every status of
        :data:`bot.protocol.UNFINISHED_STATUSES` (a bookkeeping write per status shown would
        cost more than the status)."""
        if not await self._store.holds(run_id):
            return
        await out.set_status(status)

    @with_log_context(thread_key="thread_key", platform="platform")
    async def run(
        self,
        thread_key: str,
        graph_input: Any,
        out: Responder,
        *,
        platform: str,
        run_id: str,
        record: dict[str, Any],
        is_resume: bool = False,
        t0: float | None = None,
        announced: bool = False,
    ) -> TurnResult:
        """Run the graph on ``graph_input`` (None: continue from the last checkpoint) and
        report the outcome through ``out``. The run is recorded in the store while in
        flight (with the responder reference) so that a crash leaves a trace recovery
        finds. ``announced``: the caller already showed received (or queued). The caller
        holds the thread's lock and a run slot. Never raises."""
        t0 = time.perf_counter() if t0 is None else t0
        cfg = self._conversations.run_config(thread_key)
        if self._scope_for is not None:  # the channel's settings, for this run only
            cfg["configurable"]["scope"] = self._scope_for(
                platform, str(record.get("channel") or ""), str(record.get("channel_name") or "")
            )
        kind = "continue" if graph_input is None else "resume" if is_resume else "question"
        cfg.update(run_config(thread_key, platform, run_id, kind, self.observer.callbacks))
        with self.observer.running():
            result = await self._run_graph(
                thread_key,
                graph_input,
                out,
                cfg,
                platform=platform,
                run_id=run_id,
                record=record,
                is_resume=is_resume,
                t0=t0,
                announced=announced,
            )
        if result.answer or result.help_request:  # neither: another replica took the run over
            self.observer.finished(platform, result.answer.kind if result.answer else "help", result.seconds)
        return result

    async def _run_graph(
        self,
        thread_key: str,
        graph_input: Any,
        out: Responder,
        cfg: Any,
        *,
        platform: str,
        run_id: str,
        record: dict[str, Any],
        is_resume: bool,
        t0: float,
        announced: bool,
    ) -> TurnResult:
        try:
            before = await self._conversations.latest_checkpoint_id(thread_key)
            if not await self._store.run_started(run_id, thread_key, platform, out.reference(), record, before):
                return TurnResult(thread_key, None, None, {}, time.perf_counter() - t0)  # another replica's now
            if not is_resume and graph_input is not None and not announced:
                await self.show(run_id, out, Status.RECEIVED)
            shown: list[Status] = []
            tries = 1 + (len(self.graph_pool.workers) if self.graph_pool is not None else 0)
            for attempt in range(1, tries + 1):
                try:
                    final = await self._stream(graph_input, cfg, run_id, out, shown)
                    break
                except GraphWorkerGone as exc:
                    # the worker process died mid-run: nothing of the run was saved ("exit"
                    # durability) unless its last checkpoint was, so it runs again on another
                    # worker (each may have died at once: as many tries as workers, plus one)
                    if (
                        attempt == tries
                        or self.durability != "exit"
                        or await self._conversations.latest_checkpoint_id(thread_key) != before
                    ):
                        raise
                    log.warning("%s: running the question again", exc, extra=for_thread(thread_key))
            state = finished_state(final) or await self._conversations.graph.aget_state(cfg)
        except Exception as exc:  # noqa: BLE001 - the user gets an apology, never a traceback
            log.error("graph run failed: %s", describe_failure(exc), extra=for_thread(thread_key))
            log.debug("traceback", exc_info=True)
            answer = Answer(text=self._apologies.text_for(exc), kind="apology")
            await self.post_final(thread_key, run_id, answer, out)
            return TurnResult(thread_key, answer, None, {}, time.perf_counter() - t0, error=describe_failure(exc))
        # a new thread saved one checkpoint ("exit" durability): nothing older to prune
        return await self.report(
            thread_key,
            state,
            out,
            platform=platform,
            run_id=run_id,
            t0=t0,
            channel=str(record.get("channel") or ""),
            prune_older=bool(before) or self.durability != "exit",
        )

    async def _stream(
        self, graph_input: Any, cfg: Any, run_id: str, out: Responder, shown: list[Status]
    ) -> dict[str, Any] | None:
        """Stream one graph run (in this process, or on a graph worker: :mod:`bot.service.graph_pool`),
        showing each new progress status (``shown``: the statuses shown so far, appended to);
        returns the last ``values`` chunk."""
        final: dict[str, Any] | None = None
        stream = (
            self.graph_pool.astream(graph_input, cfg, durability=self.durability)
            if self.graph_pool is not None
            else self._conversations.graph.astream(
                graph_input, cfg, stream_mode=["custom", "values"], durability=self.durability
            )
        )
        async for mode, chunk in stream:
            if mode == "values":
                final = cast(dict[str, Any], chunk)
                continue
            event = cast(ProgressEvent, chunk)  # the graph's only custom events (graphs/state.py)
            status = PHASE_STATUS.get(event.get("phase", ""))
            if status and (not shown or status != shown[-1]):
                shown.append(status)
                await self.show(run_id, out, status)
        return final

    async def report(
        self,
        thread_key: str,
        state: Any,
        out: Responder,
        *,
        platform: str,
        run_id: str,
        t0: float,
        channel: str = "",
        prune_older: bool = True,
    ) -> TurnResult:
        """Post what a finished (or paused) run ended with: the answer, the apology or the
        help request; the final status is done, apology or waiting. ``prune_older``: the
        thread may hold older checkpoints (False: the run saved the thread's only one)."""
        values = dict(state.values or {})
        if state.interrupts:
            request = await self._ask_for_help(thread_key, state.interrupts[0], out, platform=platform, run_id=run_id)
            if request is None:  # replicas: another one took this run over
                return TurnResult(thread_key, None, None, values, time.perf_counter() - t0)
            log.info("paused for a human after %s", "->".join(values.get("path", [])), extra=for_thread(thread_key))
            if prune_older:
                await self._conversations.prune(thread_key)
            return TurnResult(thread_key, None, request, values, time.perf_counter() - t0)
        answer = answer_of(values, self.answer_note)
        if answer.kind != "apology":
            answer = await self._recorded(answer, values, thread_key=thread_key, platform=platform, channel=channel)
        posted = await self.post_final(thread_key, run_id, answer, out)
        if posted and answer.kind == "human" and values.get("human_action") == "answer":
            await self._learning.learn(
                values.get("question") or "",
                answer.text,
                answer.answered_by,
                values,
                out,
                thread_key=thread_key,
                platform=platform,
                channel=channel,
            )
        seconds = time.perf_counter() - t0
        log.info(
            "%s%s in %.1fs, %d LLM calls (%d input + %d output tokens), path %s",
            answer.kind,
            "" if posted else " NOT posted",
            seconds,
            values.get("llm_calls", 0),
            values.get("input_tokens", 0),
            values.get("output_tokens", 0),
            "->".join(answer.path),
            extra=for_thread(thread_key),
        )
        if prune_older:
            await self._conversations.prune(thread_key)
        return TurnResult(thread_key, answer, None, values, seconds)

    async def _recorded(
        self, answer: Answer, values: dict[str, Any], *, thread_key: str, platform: str, channel: str
    ) -> Answer:
        """Record an answer for feedback and give it the id its 👍/👎 controls carry; when
        the record cannot be written the answer goes out without controls (logged)."""
        answer_id = uuid.uuid4().hex[:16]
        try:
            await self._store.record_answer(
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

    async def _ask_for_help(
        self, thread_key: str, intr: Any, out: Responder, *, platform: str, run_id: str
    ) -> HelpRequest | None:
        """Post the help request of the pending interrupt ``intr`` (``.id``, ``.value``: a
        :class:`~graphs.state.HelpPayload`), show waiting (apology when it could not be
        posted), record it and arm its timeout. None when another replica took the run over."""
        payload = help_payload(intr.value)
        seconds = self._timeouts.seconds
        request = HelpRequest(
            thread_key=thread_key,
            question=payload["question"],
            reason=payload["reason"],
            attempts=list(payload["attempts"]),
            timeout_seconds=seconds,
            interrupt_id=intr.id,
        )
        if not await self._store.may_post(run_id):  # replicas: another one took this run over
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
            self._store.open_help_request(
                thread_key, platform, out.reference(), request.question, seconds, interrupt_id=intr.id
            ),
            thread_key,
        )
        self._timeouts.arm(thread_key, intr.id)
        await self._records.finish(run_id, thread_key)
        return request

    async def post_final(self, thread_key: str, run_id: str, answer: Answer, out: Responder) -> bool:
        """Post an answer or apology and set the resting status: DONE only when a real
        answer was posted; APOLOGY for an apology or when posting failed (:class:`PostError`).
        Returns True if it was posted."""
        if not await self._store.may_post(run_id):  # replicas: another one took this run over
            return False
        try:
            await out.post_answer(answer)
            posted = True
        except Exception as exc:  # noqa: BLE001 - PostError, or a responder that broke its contract
            log.error("%s could not be posted: %s", answer.kind, describe_failure(exc), extra=for_thread(thread_key))
            posted = False
        await best_effort(self._store.update_run(run_id, stage="posted"), thread_key)
        await out.set_status(Status.DONE if posted and answer.kind != "apology" else Status.APOLOGY)
        await self._records.finish(run_id, thread_key)
        return posted

    async def apologise(self, thread_key: str, run_id: str, out: Responder) -> None:
        """Post the apology for a run that cannot be finished (e.g. recovered too late)."""
        await self.post_final(thread_key, run_id, Answer(text=self._apologies.apology, kind="apology"), out)
