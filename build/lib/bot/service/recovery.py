"""Finish the runs an earlier process left unfinished (a crash, ``kill -9``, power loss).

Every user message is recorded in the bookkeeping as a run in flight together with its
dedup mark (one transaction, :meth:`bot.storage.base.BookkeepingStore.mark_seen`); the record is
refreshed when the graph starts (input, the checkpoint id before the run, the responder
reference) and when the answer is posted (stage), not at each status shown: the rebuilt
responder clears every status a run may show (:data:`bot.protocol.UNFINISHED_STATUSES`);
it is deleted when the answer, apology or help request is out. So at start every record left
is a question that was never answered. For each (oldest first, threads in parallel,
one thread's runs in order) the service rebuilds the responder from its reference
(``ChatService.register_platform``, :mod:`bot.service.responders`) and:

=============================================  =========================================
state found                                    what happens
=============================================  =========================================
older than ``resume_window_seconds``           the apology (+ apology reaction)
queued, never started                          handled now, like a new message
the graph never saved a step of this run       the run is started again from its input
a pending next node, no interrupt              the run continues from its last checkpoint
finished / paused, not reported                its answer / help request is posted now
answer posted, final reaction missing          only the reaction is set
being posted when its replica stopped          as above (nothing lost; it may show twice)
=============================================  =========================================

Replicas (PostgreSQL): a run is taken over when its replica's lease expired, which can
happen to a replica that is alive but late (busy, cut from the database, stopped); the
run's fence (:mod:`bot.storage.postgres.bookkeeping`) then lets exactly one of the two post it.

Why start again or continue rather than apologise: the run's state is saved when it ends or
pauses (``[service] checkpoint_durability = "exit"``, the default), so a run cut off by a
crash left nothing of itself and is started again from its input (its model calls are made
again; a follow-up starts from the thread's previous turn, which holds its history); with
``"async"`` every step is saved too and the run continues from its last step, costing only
the step that was cut off. Either way the user gets the answer they asked for in the same
thread, as if the bot had been slow. After ``resume_window_seconds`` (config.toml) an
answer would arrive long after the user moved on, and documents may have changed, so an
apology asking them to ask again is the better reply.

The platform redelivering the message after the restart changes nothing: its id is
already marked seen, so only the recovery answers it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from langchain_core.messages import HumanMessage
from langgraph.types import Command

from bot.failures import describe_failure
from bot.logs import for_thread, with_log_context
from bot.protocol import Answer, Responder, Status, message_from_record
from bot.service import dispatch, help_requests, runs
from bot.service.errors import best_effort
from bot.storage import SharedBookkeepingStore

if TYPE_CHECKING:
    from bot.service.chat_service import ChatService
    from bot.service.threads import Ticket

log = logging.getLogger("bot.recovery")  # the name it has always logged under: log filters name it


def arrival(row: dict[str, Any]) -> float:
    """When a run's message arrived (Unix seconds): the ``received_at`` its record holds
    (:class:`bot.service.threads.Ticket`), else when it was recorded or started."""
    received = (row.get("message") or {}).get("received_at")
    return float(received if received is not None else row.get("started_at") or 0.0)


#: A thread's runs to recover, in arrival order, and the thread's place in its queue.
Places = dict[str, tuple[list[dict[str, Any]], "Ticket"]]


def queue_places(service: ChatService, runs: list[dict[str, Any]]) -> Places:
    """Group ``runs`` by thread, each thread's in arrival order, and take each thread's place
    in its queue now, by the first run's arrival (ahead of every message received after it,
    also of one already waiting: runs taken over from a dead replica come later), so
    messages that arrive after a restart wait for the ones left unanswered."""
    by_thread: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in sorted(runs, key=arrival):
        by_thread[row["thread_key"]].append(row)
    return {key: (rows, service.threads.ticket(key, received_at=arrival(rows[0]))) for key, rows in by_thread.items()}


async def recover_runs(service: ChatService, places: Places) -> None:
    """Finish the runs of :func:`queue_places` (rows of :meth:`bot.storage.base.BookkeepingStore.unfinished_runs`):
    threads in parallel, each thread's runs in the order they arrived, holding the thread
    from its place in the queue until they are done. Never raises."""

    async def one_thread(key: str, rows: list[dict[str, Any]], ticket: Ticket) -> None:
        # replicas: the thread's runs that arrived earlier elsewhere (or taken over in another
        # batch, which needs the thread) go first; waited for before holding the thread
        await service.store.wait_turn(rows[0]["run_id"], key)
        async with service.threads.hold(key, ticket):
            for row in rows:
                try:
                    await recover_run(service, row)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # noqa: BLE001 - one broken record must not stop the others
                    log.error(
                        "recovery of %s failed: %s",
                        row["run_id"],
                        describe_failure(exc),
                        extra=for_thread(row["thread_key"]),
                    )
                    await best_effort(service.store.finish_run(row["run_id"]), row["thread_key"])

    await asyncio.gather(*(one_thread(key, rows, ticket) for key, (rows, ticket) in places.items()))


@with_log_context(thread_key="row.thread_key", platform="row.platform")
async def recover_run(service: ChatService, row: dict[str, Any]) -> None:
    """Finish one unfinished run (see the module docstring for the decision)."""
    key, run_id, stage = row["thread_key"], row["run_id"], row["stage"]
    out = await service.responders.when_ready(row["platform"], row["reference"])
    if out is None:
        log.warning(
            "recovery: %s belongs to %s, which does not run in this process; left for it",
            run_id,
            row["platform"],
            extra=for_thread(key),
        )
        return
    age = time.time() - float(row["started_at"])
    stale = age > service.resume_window_seconds
    if stage == "queued":
        message = row.get("message") or {}
        if not message or stale:
            log.info(
                "recovery: %s queued %.0fs ago, %s",
                run_id,
                age,
                "apologising" if message else "nothing to do",
                extra=for_thread(key),
            )
            if message:
                await _apologise(service, key, run_id, out)
            else:
                await service.store.finish_run(run_id)
            return
        log.info("recovery: handling %s (queued %.0fs ago, never started)", run_id, age, extra=for_thread(key))
        await dispatch.dispatch_guarded(service, message_from_record(message), out, run_id=run_id)
        return
    async with service.threads.hold(key):
        cfg = service.run_config(key)
        state = await service.graph.aget_state(cfg)
        latest = str((state.config or {}).get("configurable", {}).get("checkpoint_id") or "")
        if stage == "posted":
            kind = (state.values or {}).get("outcome") or "answer"
            log.info("recovery: %s was posted; setting the final reaction", run_id, extra=for_thread(key))
            await out.set_status(Status.APOLOGY if kind == "apology" else Status.DONE)
            await service.store.finish_run(run_id)
            return
        if stage == "posting":
            log.warning(
                "recovery: %s was being posted when its replica stopped: posting it (it may show twice)",
                run_id,
                extra=for_thread(key),
            )
        if stale:
            log.info(
                "recovery: %s started %.0fs ago (> %.0fs): apologising",
                run_id,
                age,
                service.resume_window_seconds,
                extra=for_thread(key),
            )
            await _apologise(service, key, run_id, out)
            return
        record = row.get("input") or {}
        platform = row["platform"]
        async with service.slots:
            if latest == row.get("checkpoint_before", ""):
                graph_input = _input_of(record)
                if graph_input is None:
                    await _apologise(service, key, run_id, out)
                    return
                log.info("recovery: %s saved no step: starting it again", run_id, extra=for_thread(key))
                await runs.run(
                    service,
                    key,
                    graph_input,
                    out,
                    platform=platform,
                    run_id=run_id,
                    record=record,
                    is_resume="resume" in record,
                )
            elif (state.next or state.tasks) and not state.interrupts:
                # state.tasks without state.next: the step's tasks finished and saved their writes, but the
                # checkpoint after the step was not saved (cut off): the graph has not ended, it continues
                log.info(
                    "recovery: %s continues at %s from checkpoint %s",
                    run_id,
                    ",".join(state.next) or "its next step",
                    latest,
                    extra=for_thread(key),
                )
                await runs.run(service, key, None, out, platform=platform, run_id=run_id, record=record, is_resume=True)
            else:
                log.info("recovery: %s ended before it was reported: reporting it", run_id, extra=for_thread(key))
                await runs.report(service, key, state, out, platform=platform, run_id=run_id, t0=time.perf_counter())


def _input_of(record: dict[str, Any]) -> Any:
    if "question" in record:
        return {"messages": [HumanMessage(str(record["question"]))]}
    if "resume" in record:
        return Command(resume=record["resume"])  # a ResumeValue: the graph checks it
    return None


async def _apologise(service: ChatService, key: str, run_id: str, out: Responder) -> None:
    answer = Answer(text=service.admin_commands.apology, kind="apology")
    await runs.post_final(service, key, run_id, answer, out)


async def watch(service: ChatService) -> None:
    """Replicas on one database (``store.shared``): every ``lease_seconds / 3`` renew this
    replica's leases (and finish what failed while the database was away); every
    ``recovery_interval_seconds`` take over the runs whose replica died (their lease
    expired; the database gives each to one replica) and arm a timer for every open help
    request this replica has none for (the claim row makes the timeout fire once).
    Runs until cancelled; a database outage is logged once per outage and retried. After
    an outage every lease has expired: no run is taken over for two lease periods, so the
    live replicas first renew their leases and finish what they answered meanwhile."""
    store = service.store
    if not isinstance(store, SharedBookkeepingStore):
        raise TypeError(f"{type(store).__name__} is not shared by replicas: nothing to watch")
    loop = asyncio.get_running_loop()
    step = max(0.1, min(store.lease_seconds / 3, store.recovery_interval_seconds))
    next_scan = loop.time() + store.recovery_interval_seconds
    down = False
    index_seen = ""
    while True:
        await asyncio.sleep(step)
        try:
            await store.renew_leases()
            if down:
                log.info("database reachable again")
                down = False
                next_scan = loop.time() + 2 * store.lease_seconds
            if loop.time() >= next_scan:
                next_scan = loop.time() + store.recovery_interval_seconds
                runs = await store.unfinished_runs()
                if runs:
                    log.info("%d runs of other replicas (lease expired) taken over: recovering them", len(runs))
                    previous = service.recovery_task
                    service.recovery_task = asyncio.create_task(
                        _after(previous, _recover_taken_over(service, runs)), name="recover-runs"
                    )
                index_seen = await _pick_up_index(service, index_seen)
                help_requests.rearm(service, await store.open_help_requests(), missing_only=True)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - the database is away: try again next round
            if not down:
                log.error("replica watch: %s (retrying)", describe_failure(exc))
            down = True


async def _recover_taken_over(service: ChatService, runs: list[dict[str, Any]]) -> None:
    """:func:`recover_runs` of a dead replica's runs, their places taken when it starts."""
    await recover_runs(service, queue_places(service, runs))


async def _pick_up_index(service: ChatService, seen: str) -> str:
    """Load the index generation recorded in the database by another replica's reindex
    (from the shared index folder); warn once if this replica cannot see it there (its
    index folder is not the shared one). Returns the generation handled."""
    generation = await service.store.index_generation()
    knowledge = getattr(service.admin_commands, "knowledge", None)
    if not generation or generation == seen or knowledge is None:
        return seen
    snapshot = await asyncio.to_thread(lambda: knowledge.snapshot)  # re-reads CURRENT, opens a new generation
    live = snapshot.directory.name if snapshot is not None else ""
    if live == generation:
        log.info("index generation %s (recorded in the database) is live here", generation)
    else:
        log.warning(
            "index generation %s recorded in the database is not live in %s (it has %s): replicas must "
            "share the index folder (docs/deploy.md)",
            generation,
            knowledge.index_dir,
            live or "none",
        )
    return generation


async def _after(previous: asyncio.Task | None, coro: Any) -> None:
    """Run ``coro`` alongside the recovery still in flight (``service.busy()`` sees both)."""
    await asyncio.gather(*([previous] if previous is not None else []), coro, return_exceptions=True)
