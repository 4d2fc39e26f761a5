"""One graph run: stream it, show its progress phases as statuses, and post what it
ended with (the answer, the apology, or a help request); the final status is done,
apology or waiting, and done only when the answer was posted (:class:`PostError`).

The graph says which phase it is in (:class:`graphs.state.ProgressEvent`, LangGraph
custom stream events); :data:`PHASE_STATUS` maps phases to statuses. The runtime never
needs a node name."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, cast

from bot.failures import describe_failure
from bot.logs import for_thread, with_log_context
from bot.protocol import Answer, HelpRequest, Responder, Source, Status
from bot.service import feedback, help_requests, learning
from bot.service.errors import apology_for, best_effort, finish_run
from bot.service.graph_pool import GraphWorkerGone
from bot.storage import checkpoints
from bot.tracing import run_config
from graphs.state import Phase, ProgressEvent

if TYPE_CHECKING:
    from bot.service.chat_service import ChatService

log = logging.getLogger("bot.service")  # one logger for the chat runtime: log filters name it

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


async def show(svc: ChatService, run_id: str, out: Responder, status: Status) -> None:
    """Set a status; nothing once another replica took the run over. The run's stored
    reference is not rewritten: a responder rebuilt from it clears every status of
    :data:`bot.protocol.UNFINISHED_STATUSES` (issue 11: a bookkeeping write per status shown
    was ~13% of the CPU of a burst with the checkpoint writes)."""
    if not await svc.store.holds(run_id):
        return
    await out.set_status(status)


@with_log_context(thread_key="thread_key", platform="platform")
async def run(
    svc: ChatService,
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
    flight (with the responder reference and the reaction shown) so that a crash
    leaves a trace recovery finds. ``announced``: the caller already showed
    received (or queued). The caller holds the thread's lock and a run slot. Never raises."""
    t0 = time.perf_counter() if t0 is None else t0
    cfg = svc.run_config(thread_key)
    if svc.scope_for is not None:  # the channel's settings, for this run only
        cfg["configurable"]["scope"] = svc.scope_for(
            platform, str(record.get("channel") or ""), str(record.get("channel_name") or "")
        )
    kind = "continue" if graph_input is None else "resume" if is_resume else "question"
    cfg.update(run_config(thread_key, platform, run_id, kind, svc.observer.callbacks))
    with svc.observer.running():
        result = await _run_graph(
            svc,
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
        svc.observer.finished(platform, result.answer.kind if result.answer else "help", result.seconds)
    return result


async def _run_graph(
    svc: ChatService,
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
        before = await checkpoints.latest_checkpoint_id(svc.saver, thread_key)
        if not await svc.store.run_started(run_id, thread_key, platform, out.reference(), record, before):
            return TurnResult(thread_key, None, None, {}, time.perf_counter() - t0)  # another replica's now
        if not is_resume and graph_input is not None and not announced:
            await show(svc, run_id, out, Status.RECEIVED)
        shown: list[Status] = []
        tries = 1 + (len(svc.graph_pool.workers) if svc.graph_pool is not None else 0)
        for attempt in range(1, tries + 1):
            try:
                final = await _stream(svc, graph_input, cfg, run_id, out, shown)
                break
            except GraphWorkerGone as exc:
                # the worker process died mid-run: nothing of the run was saved ("exit"
                # durability) unless its last checkpoint was, so it runs again on another
                # worker (each may have died at once: as many tries as workers, plus one)
                if (
                    attempt == tries
                    or svc.durability != "exit"
                    or await checkpoints.latest_checkpoint_id(svc.saver, thread_key) != before
                ):
                    raise
                log.warning("%s: running the question again", exc, extra=for_thread(thread_key))
        state = finished_state(final) or await svc.graph.aget_state(cfg)
    except Exception as exc:  # noqa: BLE001 - the user gets an apology, never a traceback
        log.error("graph run failed: %s", describe_failure(exc), extra=for_thread(thread_key))
        log.debug("traceback", exc_info=True)
        answer = Answer(text=apology_for(svc, exc), kind="apology")
        await post_final(svc, thread_key, run_id, answer, out)
        return TurnResult(thread_key, answer, None, {}, time.perf_counter() - t0, error=describe_failure(exc))
    # a new thread saved one checkpoint ("exit" durability): nothing older to prune
    return await report(
        svc,
        thread_key,
        state,
        out,
        platform=platform,
        run_id=run_id,
        t0=t0,
        channel=str(record.get("channel") or ""),
        prune_older=bool(before) or svc.durability != "exit",
    )


async def _stream(
    svc: ChatService, graph_input: Any, cfg: Any, run_id: str, out: Responder, shown: list[Status]
) -> dict[str, Any] | None:
    """Stream one graph run (in this process, or on a graph worker: :mod:`bot.service.graph_pool`),
    showing each new progress status (``shown``: the statuses shown so far, appended to);
    returns the last ``values`` chunk."""
    final: dict[str, Any] | None = None
    stream = (
        svc.graph_pool.astream(graph_input, cfg, durability=svc.durability)
        if svc.graph_pool is not None
        else svc.graph.astream(graph_input, cfg, stream_mode=["custom", "values"], durability=svc.durability)
    )
    async for mode, chunk in stream:
        if mode == "values":
            final = cast(dict[str, Any], chunk)
            continue
        event = cast(ProgressEvent, chunk)  # the graph's only custom events (graphs/state.py)
        status = PHASE_STATUS.get(event.get("phase", ""))
        if status and (not shown or status != shown[-1]):
            shown.append(status)
            await show(svc, run_id, out, status)
    return final


def finished_state(values: dict[str, Any] | None) -> SimpleNamespace | None:
    """The state a run ended with, from its last ``values`` stream chunk (LangGraph emits the
    whole state after every step), shaped like the ``StateSnapshot`` :func:`report` reads;
    None when the run paused (the chunk carries ``__interrupt__``: the interrupt's id is read
    from the checkpointer) or sent no values. Saves a checkpoint read per question (issue 11)."""
    if not values or "__interrupt__" in values:
        return None
    return SimpleNamespace(values=values, interrupts=())


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


async def report(
    svc: ChatService,
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
        request = await help_requests.open_request(
            svc, thread_key, state.interrupts[0], out, platform=platform, run_id=run_id
        )
        if request is None:  # replicas: another one took this run over
            return TurnResult(thread_key, None, None, values, time.perf_counter() - t0)
        log.info("paused for a human after %s", "->".join(values.get("path", [])), extra=for_thread(thread_key))
        if prune_older:
            await prune(svc, thread_key)
        return TurnResult(thread_key, None, request, values, time.perf_counter() - t0)
    answer = answer_of(values, svc.answer_note)
    if answer.kind != "apology":
        answer = await feedback.recorded(svc, answer, values, thread_key=thread_key, platform=platform, channel=channel)
    posted = await post_final(svc, thread_key, run_id, answer, out)
    if posted and answer.kind == "human" and values.get("human_action") == "answer":
        await learning.learn(
            svc,
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
        "%s%s in %.1fs, %d LLM calls, path %s",
        answer.kind,
        "" if posted else " NOT posted",
        seconds,
        values.get("llm_calls", 0),
        "->".join(answer.path),
        extra=for_thread(thread_key),
    )
    if prune_older:
        await prune(svc, thread_key)
    return TurnResult(thread_key, answer, None, values, seconds)


async def post_final(svc: ChatService, thread_key: str, run_id: str, answer: Answer, out: Responder) -> bool:
    """Post an answer or apology and set the resting status: DONE only when a real
    answer was posted; APOLOGY for an apology or when posting failed (:class:`PostError`).
    Returns True if it was posted."""
    if not await svc.store.may_post(run_id):  # replicas: another one took this run over
        return False
    try:
        await out.post_answer(answer)
        posted = True
    except Exception as exc:  # noqa: BLE001 - PostError, or a responder that broke its contract
        log.error("%s could not be posted: %s", answer.kind, describe_failure(exc), extra=for_thread(thread_key))
        posted = False
    await best_effort(svc.store.update_run(run_id, stage="posted"), thread_key)
    await out.set_status(Status.DONE if posted and answer.kind != "apology" else Status.APOLOGY)
    await finish_run(svc, run_id, thread_key)
    return posted


async def prune(svc: ChatService, thread_key: str) -> None:
    """Keep only the newest checkpoints of a thread (they hold the messages and any
    pending interrupt) and give the freed pages back (:func:`bot.storage.checkpoints.prune`)."""
    try:
        await checkpoints.prune(svc.saver, thread_key, svc.keep_checkpoints)
    except Exception as exc:  # noqa: BLE001 - pruning is best effort
        log.warning("checkpoint pruning failed: %s", describe_failure(exc), extra=for_thread(thread_key))
