"""Finish the runs an earlier process left unfinished (a crash, ``kill -9``, power loss).

Every user message is recorded in the bookkeeping as a run in flight together with its
dedup mark (one transaction, :meth:`bot.service.dedup.Dedup.first_delivery`); the record is
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
run's fence (:mod:`bot.storage.postgres`) then lets exactly one of the two post it.

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
from typing import Any

from langchain_core.messages import HumanMessage
from langgraph.types import Command

from bot.failures import describe_failure
from bot.logs import for_thread, with_log_context
from bot.protocol import Status, message_from_record
from bot.service.conversations import Conversations
from bot.service.dedup import Dedup
from bot.service.dispatch import Dispatcher
from bot.service.help_desk import HelpDesk
from bot.service.responders import Responders
from bot.service.run_records import best_effort
from bot.service.run_slots import RunSlots
from bot.service.runs import Runs
from bot.service.thread_locks import ThreadLocks, Ticket
from bot.storage import BookkeepingStore, SharedBookkeepingStore
from graphs.knowledge import KnowledgeBase

log = logging.getLogger("bot.recovery")  # the name it has always logged under: log filters name it

#: A thread's runs to recover, in arrival order, and the thread's place in its queue.
Places = dict[str, tuple[list[dict[str, Any]], Ticket]]


def arrival(row: dict[str, Any]) -> float:
    """When a run's message arrived (Unix seconds): the ``received_at`` its record holds
    (:class:`bot.service.thread_locks.Ticket`), else when it was recorded or started."""
    received = (row.get("message") or {}).get("received_at")
    return float(received if received is not None else row.get("started_at") or 0.0)


def _input_of(record: dict[str, Any]) -> Any:
    if "question" in record:
        return {"messages": [HumanMessage(str(record["question"]))]}
    if "resume" in record:
        return Command(resume=record["resume"])  # a ResumeValue: the graph checks it
    return None


class Recovery:
    """Finishes unfinished runs at start and, with replicas, watches the others.

    Args:
        store: the bookkeeping (unfinished runs, leases, the index generation).
        conversations: the threads (their saved state). locks: one message of a thread at a time.
        slots: the run slots. responders: a run's responder, rebuilt from its reference.
        runs: runs and reports the graph. dispatcher: a message queued and never started.
        help_desk: the timers of open help requests. dedup: old message ids forgotten at start.
        knowledge: the knowledge base, whose index generation another replica may swap (None: not watched).
        resume_window_seconds: ``[service] resume_window_seconds``: older runs get the apology.
    """

    def __init__(
        self,
        *,
        store: BookkeepingStore,
        conversations: Conversations,
        locks: ThreadLocks,
        slots: RunSlots,
        responders: Responders,
        runs: Runs,
        dispatcher: Dispatcher,
        help_desk: HelpDesk,
        dedup: Dedup,
        knowledge: KnowledgeBase | None,
        resume_window_seconds: float,
    ) -> None:
        self._store = store
        self._conversations = conversations
        self._locks = locks
        self._slots = slots
        self._responders = responders
        self._runs = runs
        self._dispatcher = dispatcher
        self._help_desk = help_desk
        self._dedup = dedup
        self._knowledge = knowledge
        self.resume_window_seconds = resume_window_seconds
        self._task: asyncio.Task[Any] | None = None  # runs left unfinished, being finished
        self._watch: asyncio.Task[None] | None = None  # replicas: leases and takeovers

    async def start(self) -> int:
        """Re-arm the timeouts of help requests left open, prune old message ids and claims,
        and finish the runs an earlier process left unfinished in the background (see
        :meth:`bot.service.ChatService.recover`). Returns how many help requests were re-armed."""
        await self._dedup.forget_old()
        armed = await self._help_desk.rearm()
        if armed:
            log.info("re-armed %d open help requests", armed)
        runs = await self._store.unfinished_runs()
        if runs:
            log.info("%d runs were left unfinished by the last process: recovering them", len(runs))
            places = self.queue_places(runs)  # before any new message of those threads
            self._task = asyncio.create_task(self.recover_runs(places), name="recover-runs")
        if self._store.shared and self._watch is None:
            self._watch = asyncio.create_task(self.watch(), name="replica-watch")
        return armed

    def busy(self) -> bool:
        """True while a recovery is in flight."""
        return self._task is not None and not self._task.done()

    async def close(self) -> None:
        """Stop the replica watch and a recovery in flight."""
        for task in (self._watch, self._task):
            if task is not None and not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)

    def queue_places(self, runs: list[dict[str, Any]]) -> Places:
        """Group ``runs`` by thread, each thread's in arrival order, and take each thread's place
        in its queue now, by the first run's arrival (ahead of every message received after it,
        also of one already waiting: runs taken over from a dead replica come later), so
        messages that arrive after a restart wait for the ones left unanswered."""
        by_thread: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for row in sorted(runs, key=arrival):
            by_thread[row["thread_key"]].append(row)
        return {key: (rows, self._locks.ticket(key, received_at=arrival(rows[0]))) for key, rows in by_thread.items()}

    async def recover_runs(self, places: Places) -> None:
        """Finish the runs of :meth:`queue_places` (rows of the bookkeeping's ``unfinished_runs``):
        threads in parallel, each thread's runs in the order they arrived, holding the thread
        from its place in the queue until they are done. Never raises."""

        async def one_thread(key: str, rows: list[dict[str, Any]], ticket: Ticket) -> None:
            # replicas: the thread's runs that arrived earlier elsewhere (or taken over in another
            # batch, which needs the thread) go first; waited for before holding the thread
            await self._store.wait_turn(rows[0]["run_id"], key)
            async with self._locks.hold(key, ticket):
                for row in rows:
                    try:
                        await self.recover_run(row)
                    except asyncio.CancelledError:
                        raise
                    except Exception as exc:  # noqa: BLE001 - one broken record must not stop the others
                        log.error(
                            "recovery of %s failed: %s",
                            row["run_id"],
                            describe_failure(exc),
                            extra=for_thread(row["thread_key"]),
                        )
                        await best_effort(self._store.finish_run(row["run_id"]), row["thread_key"])

        await asyncio.gather(*(one_thread(key, rows, ticket) for key, (rows, ticket) in places.items()))

    @with_log_context(thread_key="row.thread_key", platform="row.platform")
    async def recover_run(self, row: dict[str, Any]) -> None:
        """Finish one unfinished run (see the module docstring for the decision)."""
        key, run_id, stage = row["thread_key"], row["run_id"], row["stage"]
        out = await self._responders.when_ready(row["platform"], row["reference"])
        if out is None:
            log.warning(
                "recovery: %s belongs to %s, which does not run in this process; left for it",
                run_id,
                row["platform"],
                extra=for_thread(key),
            )
            return
        age = time.time() - float(row["started_at"])
        stale = age > self.resume_window_seconds
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
                    await self._runs.apologise(key, run_id, out)
                else:
                    await self._store.finish_run(run_id)
                return
            log.info("recovery: handling %s (queued %.0fs ago, never started)", run_id, age, extra=for_thread(key))
            await self._dispatcher.guarded(message_from_record(message), out, run_id=run_id)
            return
        async with self._locks.hold(key):
            state = await self._conversations.state(key)
            latest = str((state.config or {}).get("configurable", {}).get("checkpoint_id") or "")
            if stage == "posted":
                kind = (state.values or {}).get("outcome") or "answer"
                log.info("recovery: %s was posted; setting the final reaction", run_id, extra=for_thread(key))
                await out.set_status(Status.APOLOGY if kind == "apology" else Status.DONE)
                await self._store.finish_run(run_id)
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
                    self.resume_window_seconds,
                    extra=for_thread(key),
                )
                await self._runs.apologise(key, run_id, out)
                return
            record = row.get("input") or {}
            platform = row["platform"]
            async with self._slots:
                if latest == row.get("checkpoint_before", ""):
                    graph_input = _input_of(record)
                    if graph_input is None:
                        await self._runs.apologise(key, run_id, out)
                        return
                    log.info("recovery: %s saved no step: starting it again", run_id, extra=for_thread(key))
                    await self._runs.run(
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
                    await self._runs.run(
                        key, None, out, platform=platform, run_id=run_id, record=record, is_resume=True
                    )
                else:
                    log.info("recovery: %s ended before it was reported: reporting it", run_id, extra=for_thread(key))
                    await self._runs.report(key, state, out, platform=platform, run_id=run_id, t0=time.perf_counter())

    async def watch(self) -> None:
        """Replicas on one database (``store.shared``): every ``lease_seconds / 3`` renew this
        replica's leases (and finish what failed while the database was away); every
        ``recovery_interval_seconds`` take over the runs whose replica died (their lease
        expired; the database gives each to one replica) and arm a timer for every open help
        request this replica has none for (the claim row makes the timeout fire once).
        Runs until cancelled; a database outage is logged once per outage and retried. After
        an outage every lease has expired: no run is taken over for two lease periods, so the
        live replicas first renew their leases and finish what they answered meanwhile."""
        store = self._store
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
                await self._dedup.retry_forgets()  # messages whose turn failed while it was away
                if down:
                    log.info("database reachable again")
                    down = False
                    next_scan = loop.time() + 2 * store.lease_seconds
                if loop.time() >= next_scan:
                    next_scan = loop.time() + store.recovery_interval_seconds
                    runs = await store.unfinished_runs()
                    if runs:
                        log.info("%d runs of other replicas (lease expired) taken over: recovering them", len(runs))
                        previous = self._task
                        self._task = asyncio.create_task(
                            _after(previous, self.recover_runs(self.queue_places(runs))), name="recover-runs"
                        )
                    index_seen = await self._pick_up_index(index_seen)
                    await self._help_desk.rearm(missing_only=True)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - the database is away: try again next round
                if not down:
                    log.error("replica watch: %s (retrying)", describe_failure(exc))
                down = True

    async def _pick_up_index(self, seen: str) -> str:
        """Load the index generation recorded in the database by another replica's reindex
        (from the shared index folder); warn once if this replica cannot see it there (its
        index folder is not the shared one). Returns the generation handled."""
        generation = await self._store.index_generation()
        knowledge = self._knowledge
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


async def _after(previous: asyncio.Task[Any] | None, coro: Any) -> None:
    """Run ``coro`` alongside the recovery still in flight (``busy()`` sees both)."""
    await asyncio.gather(*([previous] if previous is not None else []), coro, return_exceptions=True)
