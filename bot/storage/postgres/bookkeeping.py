"""The bookkeeping (:class:`bot.storage.base.BookkeepingStore`) in PostgreSQL, shared by replicas.

Same methods, same meaning; what changes is who else is looking:

- **Exactly once** is enforced by the database: a message id is marked seen with
  ``INSERT ... ON CONFLICT DO NOTHING RETURNING``, a help request is claimed with
  ``INSERT`` into ``claims`` (primary key = interrupt id) and resolved with
  ``UPDATE ... WHERE status = 'open' RETURNING``. A redelivery reaching another replica,
  or two replicas' help-request timers, therefore act once.
- **One thread at a time** on all replicas: :meth:`thread_lock` holds a session advisory
  lock keyed by a hash of the thread key (``pg_advisory_lock(hashtextextended(key, 0))``)
  while the graph runs for that thread; :meth:`wait_turn` lets a message wait until the
  thread's earlier messages (by arrival in the database, ``runs.seq``) are done, so the
  answers come in order even when two replicas get a thread's messages.
- **Runs left by a dead replica** are taken over: each run in flight has an ``owner`` (the
  replica id) and a ``lease_expires``; a replica renews its leases every
  ``lease_seconds / 3`` (:meth:`renew_leases`), and :meth:`unfinished_runs` takes the runs
  whose lease expired (``UPDATE ... WHERE lease_expires < now() ... FOR UPDATE SKIP LOCKED
  RETURNING``): one replica gets each. :func:`bot.service.recovery.watch` calls both periodically.
- **Fencing**: a lease can expire while its replica is alive (its event loop busy, its
  connections cut, the process stopped), and the replica that takes the run over runs it
  again. So every acquisition of a run (queued on receipt by :meth:`mark_seen`, started by
  :meth:`run_started`, taken over by :meth:`unfinished_runs`) gets the row's next
  ``fence`` number, kept in memory by the replica that acquired it, and every write about
  the run names it: :meth:`may_post` marks the run ``posting`` with
  ``UPDATE ... WHERE owner = me AND fence = mine RETURNING``, so of a replica and the one
  that took its run over exactly one posts (the other drops its result with one log line),
  also when the winner already finished and deleted the run; :meth:`run_started` refuses a
  run that is no longer ours (the graph is not run), and :meth:`update_run` and
  :meth:`finish_run` leave a run of another replica alone. Fencing is the technique of
  Kleppmann, *Designing Data-Intensive Applications* (2017), ch. 8, "Fencing tokens".
  What it cannot cover: a replica stopped *during* the platform call that posts (after
  ``posting`` was recorded) for longer than a lease; its run is then treated as not
  posted by the replica that takes it over (nothing lost; the answer may show twice).
- A bookkeeping write that fails while the database is away (``finish_run``) is retried by
  :meth:`renew_leases` once it is back; until then the run's lease is kept, so no other
  replica answers it a second time.

Times the bot compares itself (``seen_at``, ``deadline``) are epoch seconds as in SQLite;
leases use the database clock (``now()``), so replicas' clocks need not agree.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from bot.logs import for_thread

#: A run's arrival (Unix seconds) in SQL: its message's ``received_at``, else ``started_at``.
_ARRIVAL = "COALESCE((NULLIF({t}.message, '')::jsonb->>'received_at')::float8, {t}.started_at)"

log = logging.getLogger(__name__)

_RUN_COLUMNS = (
    "run_id, thread_key, platform, reference, message, input, checkpoint_before, started_at, stage, seq, fence"
)


#: The fence of a run this replica lost to another (real fences are >= 1; rows of schema 3 have 0).
_LOST = -1

_ANSWER_COLUMNS = "answer_id, thread_key, platform, channel, question, answer, kind, route, sources, path, at"


def _answer_row(r: dict[str, Any]) -> dict[str, Any]:
    return {
        "answer_id": r["answer_id"],
        "thread_key": r["thread_key"],
        "platform": r["platform"],
        "channel": r["channel"],
        "question": r["question"],
        "answer": r["answer"],
        "kind": r["kind"],
        "route": r["route"],
        "sources": json.loads(r["sources"]),
        "path": json.loads(r["path"]),
        "at": r["at"],
    }


def _run_row(r: dict[str, Any]) -> dict[str, Any]:
    return {
        "run_id": r["run_id"],
        "thread_key": r["thread_key"],
        "platform": r["platform"],
        "reference": json.loads(r["reference"]),
        "message": json.loads(r["message"]),
        "input": json.loads(r["input"]),
        "checkpoint_before": r["checkpoint_before"],
        "started_at": r["started_at"],
        "stage": r["stage"],
        "seq": r["seq"],
    }


class PostgresBookkeeping:
    """Bookkeeping in PostgreSQL (see the module docstring).

    Args:
        pool: a psycopg_pool ``AsyncConnectionPool`` with ``dict_row`` connections in
            autocommit (the one the checkpointer uses).
        lock_pool: a second pool whose connections hold per-thread advisory locks while a
            thread's graph runs (kept apart so waiting threads cannot starve the checkpointer).
        lease_seconds: a run not renewed for this long is taken over by another replica.
        recovery_interval_seconds: how often :func:`bot.service.recovery.watch` looks for such runs.
        replica_id: this process's name in ``runs.owner`` (default: host-pid-random).
        heal: the pools whose idle connections are checked (dead ones replaced) when the
            database is reachable again after an outage (default: ``pool`` and ``lock_pool``).
    """

    shared = True

    def __init__(
        self,
        pool: Any,
        lock_pool: Any,
        *,
        lease_seconds: float = 15.0,
        recovery_interval_seconds: float = 5.0,
        replica_id: str = "",
        turn_wait_seconds: float | None = None,
        lock_slots: int | None = None,
        heal: list[Any] | None = None,
    ) -> None:
        import os
        import socket

        self._heal = list(heal or [pool, lock_pool])
        self._outage = False  # the last renew_leases failed: the pools are checked when it works again
        self._pool = pool
        self._lock_pool = lock_pool
        self.lease_seconds = float(lease_seconds)
        self.recovery_interval_seconds = float(recovery_interval_seconds)
        self.replica_id = replica_id or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        # a thread's earlier run whose replica died is taken over within about this long
        self.turn_wait_seconds = (
            turn_wait_seconds
            if turn_wait_seconds is not None
            else 2 * self.lease_seconds + 2 * self.recovery_interval_seconds
        )
        # one lock-pool connection per thread lock: threads beyond the pool's size wait here, for as
        # long as it takes (like the per-thread asyncio lock), not in the pool (whose timeout means
        # "the database cannot be reached")
        self._lock_slots = asyncio.Semaphore(lock_slots or int(getattr(lock_pool, "max_size", 10)))
        self._active: set[str] = set()  # runs in flight here: their leases are renewed
        # run id -> the fence this replica holds (kept until finish_run, also for a run lost to
        # another replica, so that may_post knows it was ours)
        self._fences: dict[str, int] = {}
        self._unfinished: set[str] = set()  # finish_run failed (database away): retried by renew_leases

    async def close(self) -> None:
        """Nothing to close: the pools belong to :func:`bot.storage.open_storage`."""

    async def _exec(self, sql: str, params: tuple = ()) -> Any:
        async with self._pool.connection() as conn:
            return await conn.execute(sql, params)

    async def _one(self, sql: str, params: tuple = ()) -> dict[str, Any] | None:
        async with self._pool.connection() as conn:
            return await (await conn.execute(sql, params)).fetchone()

    async def _all(self, sql: str, params: tuple = ()) -> list[dict[str, Any]]:
        async with self._pool.connection() as conn:
            return list(await (await conn.execute(sql, params)).fetchall())

    def _lease(self) -> str:
        return f"now() + make_interval(secs => {self.lease_seconds!r})"

    # ---- seen messages -------------------------------------------------------------
    async def mark_seen(
        self, message_id: str, thread_key: str, run: tuple[str, dict[str, Any], dict[str, Any]] | None = None
    ) -> bool:
        """Record a message id; True for the first delivery on any replica, False after.
        With ``run`` the message is queued as a run in flight owned by this replica, in the
        same transaction (see :meth:`bot.storage.base.BookkeepingStore.mark_seen`)."""
        async with self._pool.connection() as conn, conn.transaction():
            row = await (
                await conn.execute(
                    "INSERT INTO seen_messages (message_id, thread_key, seen_at) VALUES (%s, %s, %s)"
                    " ON CONFLICT DO NOTHING RETURNING message_id",
                    (message_id, thread_key, time.time()),
                )
            ).fetchone()
            first = row is not None
            if first and run is not None:
                platform, reference, message = run
                fence = (
                    await (
                        await conn.execute(
                            "INSERT INTO runs (run_id, thread_key, platform, reference, message, started_at, stage,"
                            " owner, lease_expires, fence)"
                            f" VALUES (%s, %s, %s, %s, %s, %s, 'queued', %s, {self._lease()}, 1)"
                            " ON CONFLICT (run_id) DO UPDATE SET thread_key = excluded.thread_key, platform ="
                            " excluded.platform, reference = excluded.reference, message = excluded.message,"
                            " started_at = excluded.started_at, stage = 'queued', owner = excluded.owner,"
                            " lease_expires = excluded.lease_expires, fence = runs.fence + 1 RETURNING fence",
                            (
                                message_id,
                                thread_key,
                                platform,
                                json.dumps(reference),
                                json.dumps(message),
                                time.time(),
                                self.replica_id,
                            ),
                        )
                    ).fetchone()
                )["fence"]
        if first and run is not None:
            self._fences[message_id] = fence
            self._active.add(message_id)
        return first

    async def thread_of(self, message_id: str) -> str | None:
        row = await self._one("SELECT thread_key FROM seen_messages WHERE message_id = %s", (message_id,))
        return str(row["thread_key"]) if row else None

    async def has_thread(self, thread_key: str) -> bool:
        return (
            await self._one("SELECT 1 AS x FROM seen_messages WHERE thread_key = %s LIMIT 1", (thread_key,)) is not None
        )

    async def recent_message_ids(self, seconds: float, limit: int) -> list[str]:
        rows = await self._all(
            "SELECT message_id FROM (SELECT message_id, seen_at FROM seen_messages WHERE seen_at >= %s"
            " ORDER BY seen_at DESC LIMIT %s) AS r ORDER BY seen_at",
            (time.time() - seconds, int(limit)),
        )
        return [str(r["message_id"]) for r in rows]

    async def forget_message(self, message_id: str) -> None:
        """Forget one handled message id (see :meth:`bot.storage.base.Deliveries.forget_message`)."""
        await self._exec("DELETE FROM seen_messages WHERE message_id = %s", (message_id,))

    async def forget_seen_before(self, seconds: float) -> int:
        cur = await self._exec("DELETE FROM seen_messages WHERE seen_at < %s", (time.time() - seconds,))
        return max(0, cur.rowcount)

    # ---- help requests ---------------------------------------------------------------
    async def open_help_request(
        self,
        thread_key: str,
        platform: str,
        reference: dict[str, Any],
        question: str,
        timeout_seconds: float,
        interrupt_id: str = "",
    ) -> float:
        deadline = time.time() + timeout_seconds
        await self._exec(
            "INSERT INTO help_requests (thread_key, platform, reference, question, deadline, created_at, status,"
            " interrupt_id) VALUES (%s, %s, %s, %s, %s, %s, 'open', %s) ON CONFLICT (thread_key) DO UPDATE SET"
            " platform = excluded.platform, reference = excluded.reference, question = excluded.question,"
            " deadline = excluded.deadline, created_at = excluded.created_at, status = 'open', resolved_by = '',"
            " interrupt_id = excluded.interrupt_id",
            (thread_key, platform, json.dumps(reference), question, deadline, time.time(), interrupt_id),
        )
        return deadline

    async def claim_help_request(self, thread_key: str, by: str) -> dict[str, Any] | None:
        row = await self._one(
            "UPDATE help_requests SET status = 'resolved', resolved_by = %s WHERE thread_key = %s AND status = 'open'"
            " RETURNING platform, reference, question",
            (by, thread_key),
        )
        if row is None:
            return None
        return {"platform": row["platform"], "reference": json.loads(row["reference"]), "question": row["question"]}

    async def open_help_requests(self) -> list[dict[str, Any]]:
        rows = await self._all(
            "SELECT thread_key, platform, reference, deadline, interrupt_id FROM help_requests WHERE status = 'open'"
        )
        return [
            {
                "thread_key": r["thread_key"],
                "platform": r["platform"],
                "reference": json.loads(r["reference"]),
                "deadline": r["deadline"],
                "interrupt_id": r["interrupt_id"],
            }
            for r in rows
        ]

    # ---- runs in flight ----------------------------------------------------------------
    async def run_started(
        self,
        run_id: str,
        thread_key: str,
        platform: str,
        reference: dict[str, Any],
        graph_input: dict[str, Any],
        checkpoint_before: str,
    ) -> bool:
        """See :meth:`bot.storage.base.BookkeepingStore.run_started`. A run this replica holds (queued
        here, or taken over) is updated under its fence; any other run id (a resume, a
        help-request timeout, ``ask``) gets a new row leased to this replica.

        Returns:
            False when the run is no longer this replica's (another one took it over, or
            finished it): the caller must not run it.
        """
        fence = self._fences.get(run_id)
        values = (thread_key, platform, json.dumps(reference), json.dumps(graph_input), checkpoint_before, time.time())
        if fence is not None:
            row = await self._one(
                "UPDATE runs SET thread_key = %s, platform = %s, reference = %s, input = %s, checkpoint_before = %s,"
                f" started_at = %s, stage = 'running', lease_expires = {self._lease()}"
                " WHERE run_id = %s AND owner = %s AND fence = %s RETURNING fence",
                (*values, run_id, self.replica_id, fence),
            )
        else:
            row = await self._one(
                "INSERT INTO runs (run_id, thread_key, platform, reference, input, checkpoint_before, started_at,"
                f" stage, owner, lease_expires, fence) VALUES (%s, %s, %s, %s, %s, %s, %s, 'running', %s,"
                f" {self._lease()}, 1) ON CONFLICT (run_id) DO NOTHING RETURNING fence",
                (run_id, *values, self.replica_id),
            )
        if row is None:
            self._lost(run_id)
            return False
        self._fences[run_id] = int(row["fence"])
        self._active.add(run_id)
        return True

    def _lost(self, run_id: str) -> None:
        """Another replica took ``run_id`` over: stop renewing it and remember it as lost
        (until :meth:`finish_run`), so that :meth:`may_post` says no. One log line per run."""
        if self._fences.get(run_id) != _LOST:
            log.warning(
                "%s was taken over by another replica (this one's lease had expired): its result is dropped here",
                run_id,
            )
        self._fences[run_id] = _LOST
        self._active.discard(run_id)

    def _mine(self, run_id: str) -> tuple[str, tuple]:
        """The WHERE clause naming ``run_id`` as this replica's, under its fence, and its parameters."""
        return "run_id = %s AND owner = %s AND fence = %s", (run_id, self.replica_id, self._fences.get(run_id, _LOST))

    async def update_run(
        self, run_id: str, *, reference: dict[str, Any] | None = None, stage: str | None = None
    ) -> None:
        """See :meth:`bot.storage.base.BookkeepingStore.update_run`; only while the run is this replica's."""
        if run_id not in self._fences or (reference is None and stage is None):
            return
        sets = [("reference = %s", json.dumps(reference))] if reference is not None else []
        sets += [("stage = %s", stage)] if stage is not None else []
        where, params = self._mine(run_id)
        await self._exec(
            f"UPDATE runs SET {', '.join(c for c, _ in sets)} WHERE {where}", (*(v for _, v in sets), *params)
        )

    async def finish_run(self, run_id: str) -> None:
        """Forget a run that ended. If the database is away the run is remembered and
        deleted by :meth:`renew_leases` later (its lease is renewed until then). A run
        another replica took over is left alone (it is that one's to finish).

        Raises:
            psycopg.Error: the delete failed now (it will be retried).
        """
        try:
            if run_id in self._fences:
                where, params = self._mine(run_id)
                await self._exec(f"DELETE FROM runs WHERE {where}", params)
            else:
                await self._exec("DELETE FROM runs WHERE run_id = %s AND owner = %s", (run_id, self.replica_id))
        except Exception:
            self._unfinished.add(run_id)
            raise
        self._unfinished.discard(run_id)
        self._active.discard(run_id)
        self._fences.pop(run_id, None)

    async def run_in_flight(self, run_id: str) -> bool:
        """:meth:`bot.storage.base.RunLedger.run_in_flight`, over every replica's runs."""
        return await self._one("SELECT 1 AS one FROM runs WHERE run_id = %s", (run_id,)) is not None

    async def unfinished_runs(self) -> list[dict[str, Any]]:
        """Take over the runs whose lease expired (their replica died or stalled, or an
        older schema left them), oldest first; each is leased to this replica under the
        row's next fence and returned to it only (the replica it was taken from can no
        longer post it: :meth:`may_post`). The runs this replica itself holds are not
        taken again. Rows as :meth:`bot.storage.base.BookkeepingStore.unfinished_runs` (plus ``seq``)."""
        rows = await self._all(
            f"UPDATE runs SET owner = %s, fence = fence + 1, lease_expires = {self._lease()} WHERE run_id IN"
            " (SELECT run_id FROM runs WHERE lease_expires < now() AND NOT (owner = %s AND run_id = ANY(%s))"
            f" ORDER BY seq FOR UPDATE SKIP LOCKED) RETURNING {_RUN_COLUMNS}",
            (self.replica_id, self.replica_id, list(self._fences)),
        )
        runs = sorted((_run_row(r) for r in rows), key=lambda r: r["seq"])
        for r in rows:
            self._fences[r["run_id"]] = int(r["fence"])
        self._active.update(r["run_id"] for r in runs)
        return runs

    async def may_post(self, run_id: str) -> bool:
        """Just before a run's answer, apology or help request is posted: True if this
        replica still holds the run under its fence; the same statement marks it
        ``posting`` and extends its lease (so nobody takes it while the post is under way).
        False, after one log line, if another replica took it over (whether or not that
        one has finished it since): the caller drops its result. A run without a row of
        this replica (``ask``) may post. If the database cannot say (one retry on a fresh
        connection), post: a rare double reply beats a lost one.
        """
        if run_id not in self._fences:
            return True
        if self._fences[run_id] == _LOST:
            return False
        where, params = self._mine(run_id)
        sql = f"UPDATE runs SET stage = 'posting', lease_expires = {self._lease()} WHERE {where} RETURNING fence"
        try:
            try:
                row = await self._one(sql, params)
            except Exception:  # noqa: BLE001 - e.g. a connection cut under us: once more on another one
                await asyncio.sleep(0.1)
                row = await self._one(sql, params)
        except Exception as exc:  # noqa: BLE001
            log.warning("%s: cannot check the run's owner (%s): posting", run_id, type(exc).__name__)
            return True
        if row is not None:
            return True
        self._lost(run_id)
        return False

    async def holds(self, run_id: str) -> bool:
        """Before a step others see but that is not the answer (a status reaction): True
        while this replica holds ``run_id`` under its fence (its lease is extended, as by
        :meth:`renew_leases`), or has no row of it (``ask``); False once another replica
        took it over. Not atomic with the step (a status is cosmetic; :meth:`may_post` is
        the atomic check). If the database cannot say: True."""
        fence = self._fences.get(run_id)
        if fence is None:
            return True
        if fence == _LOST:
            return False
        where, params = self._mine(run_id)
        try:
            row = await self._one(
                f"UPDATE runs SET lease_expires = {self._lease()} WHERE {where} RETURNING fence", params
            )
        except Exception:  # noqa: BLE001
            return True
        if row is None and self._fences.get(run_id) == fence:  # (not finished meanwhile)
            self._lost(run_id)
            return False
        return True

    async def renew_leases(self) -> int:
        """Delete the runs whose :meth:`finish_run` failed, then extend the leases of this
        replica's runs in flight (each under its fence; a run taken over meanwhile is
        forgotten here, with one log line). Returns how many leases were renewed.

        The first call that succeeds after a failed one (the database is back) also checks
        every idle connection of the pools and replaces the dead ones, so the next question
        gets a live connection at once instead of finding the dead ones one by one.

        Raises:
            psycopg.Error: the database cannot be reached (call again later).
        """
        try:
            renewed = await self._renew()
        except Exception:
            self._outage = True
            raise
        if self._outage:
            self._outage = False
            await self.heal()
        return renewed

    async def heal(self) -> None:
        """Check every idle connection of the pools, replacing the ones the server cut
        (``check()`` of psycopg_pool; a sync pool's in a worker thread). Best effort."""
        for pool in self._heal:
            try:
                if asyncio.iscoroutinefunction(pool.check):
                    await pool.check()
                else:
                    await asyncio.to_thread(pool.check)
            except Exception as exc:  # noqa: BLE001 - the next checkout finds it out again
                log.warning("pool %s: checking connections failed: %s", getattr(pool, "name", "?"), exc)

    async def _renew(self) -> int:
        for run_id in list(self._unfinished):
            await self.finish_run(run_id)
        held = [(run_id, self._fences.get(run_id, 0)) for run_id in self._active]
        if not held:
            await self._exec("SELECT 1")  # a heartbeat all the same: the watch notices an outage
            return 0
        rows = await self._all(
            f"UPDATE runs r SET lease_expires = {self._lease()} FROM unnest(%s::text[], %s::bigint[]) AS f(run_id,"
            " fence) WHERE r.run_id = f.run_id AND r.fence = f.fence AND r.owner = %s RETURNING r.run_id",
            ([h[0] for h in held], [h[1] for h in held], self.replica_id),
        )
        renewed = {r["run_id"] for r in rows}
        for run_id, _ in held:
            if run_id not in renewed and run_id in self._active:  # (not finished meanwhile)
                self._lost(run_id)
        return len(renewed)

    async def wait_turn(self, run_id: str, thread_key: str) -> None:
        """Wait until the runs of ``thread_key`` that arrived before ``run_id`` (on any replica)
        are finished, at most :attr:`turn_wait_seconds` (then go ahead: an earlier run that
        nobody can finish must not block the thread for ever). Arrival is the message's
        ``received_at`` in its record (its replica's thread queue order,
        :mod:`bot.service.thread_locks`), else ``started_at``; ties by ``seq``. Records are written
        as soon as each message can be, so their ``seq`` order is not the arrival order: one
        replica's queue order and this wait must agree, or they wait for each other."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.turn_wait_seconds
        delay = 0.02
        while True:
            row = await self._one(
                "SELECT count(*) AS n FROM runs r, runs me WHERE me.run_id = %s AND r.thread_key = %s"
                f" AND ({_ARRIVAL.format(t='r')}, r.seq) < ({_ARRIVAL.format(t='me')}, me.seq)",
                (run_id, thread_key),
            )
            if not row or not row["n"]:
                return
            if loop.time() > deadline:
                log.warning(
                    "%s: %d earlier runs of the thread are still unfinished; going ahead",
                    run_id,
                    row["n"],
                    extra=for_thread(thread_key),
                )
                return
            await asyncio.sleep(delay)
            delay = min(0.25, delay * 2)

    @asynccontextmanager
    async def thread_lock(self, thread_key: str) -> AsyncIterator[None]:
        """Hold the thread's advisory lock (all replicas) while the body runs.

        Raises:
            psycopg.Error, psycopg_pool.PoolTimeout: the database cannot be reached.
        """
        async with self._lock_slots, self._lock_pool.connection() as conn:
            await conn.execute("SELECT pg_advisory_lock(hashtextextended(%s, 0))", (f"thread:{thread_key}",))
            try:
                yield
            finally:
                try:
                    await asyncio.shield(
                        conn.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", (f"thread:{thread_key}",))
                    )
                except Exception as exc:  # noqa: BLE001 - the connection died: so did its lock
                    log.warning(
                        "thread lock release failed (%s): the connection is dropped",
                        type(exc).__name__,
                        extra=for_thread(thread_key),
                    )
                    await conn.close()

    @asynccontextmanager
    async def exclusive(self, name: str) -> AsyncIterator[bool]:
        """:meth:`bot.storage.base.Coordination.exclusive` as a PostgreSQL advisory lock (across
        replicas), held on a connection of one of the thread-lock slots."""
        async with self._lock_slots, self._lock_pool.connection() as conn:
            row = await (
                await conn.execute("SELECT pg_try_advisory_lock(hashtextextended(%s, 0)) AS ok", (name,))
            ).fetchone()
            try:
                yield bool(row["ok"])
            finally:
                if row["ok"]:
                    try:
                        await conn.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", (name,))
                    except Exception:  # noqa: BLE001
                        await conn.close()

    # ---- the index generation -------------------------------------------------------------
    async def index_generation(self, name: str = "knowledge") -> str:
        """:meth:`bot.storage.base.Coordination.index_generation`, shared by every replica."""
        row = await self._one("SELECT generation FROM index_state WHERE name = %s", (name,))
        return str(row["generation"]) if row else ""

    async def set_index_generation(self, generation: str, name: str = "knowledge") -> None:
        """:meth:`bot.storage.base.Coordination.set_index_generation`: the other replicas pick it up."""
        await self._exec(
            "INSERT INTO index_state (name, generation, updated_by) VALUES (%s, %s, %s) ON CONFLICT (name) DO UPDATE"
            " SET generation = excluded.generation, updated_at = now(), updated_by = excluded.updated_by",
            (name, generation, self.replica_id),
        )

    # ---- answer feedback (see bot.storage.base.BookkeepingStore for the contracts) -----------------------
    async def record_answer(
        self,
        answer_id: str,
        *,
        thread_key: str,
        platform: str,
        channel: str,
        question: str,
        answer: str,
        kind: str,
        route: str,
        sources: list[dict[str, str]],
        path: list[str],
    ) -> None:
        await self._exec(
            "INSERT INTO answers (answer_id, thread_key, platform, channel, question, answer, kind, route, sources,"
            " path, at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (answer_id) DO UPDATE SET"
            " thread_key = excluded.thread_key, platform = excluded.platform, channel = excluded.channel,"
            " question = excluded.question, answer = excluded.answer, kind = excluded.kind, route = excluded.route,"
            " sources = excluded.sources, path = excluded.path, at = excluded.at",
            (
                answer_id,
                thread_key,
                platform,
                channel,
                question,
                answer,
                kind,
                route,
                json.dumps(sources),
                json.dumps(path),
                time.time(),
            ),
        )

    async def answer_record(self, answer_id: str) -> dict[str, Any] | None:
        row = await self._one(f"SELECT {_ANSWER_COLUMNS} FROM answers WHERE answer_id = %s", (answer_id,))
        return _answer_row(row) if row else None

    async def record_vote(self, answer_id: str, user_id: str, vote: int, reason: str | None = None) -> bool:
        if vote not in (1, -1):
            raise ValueError(f"a vote is +1 or -1, not {vote!r}")
        if await self.answer_record(answer_id) is None:
            return False
        await self._exec(
            "INSERT INTO votes (answer_id, user_id, vote, reason, at) VALUES (%s, %s, %s, %s, %s)"
            " ON CONFLICT (answer_id, user_id) DO UPDATE SET vote = excluded.vote, at = excluded.at,"
            " reason = CASE WHEN %s THEN excluded.reason WHEN excluded.vote > 0 THEN '' ELSE votes.reason END",
            (answer_id, user_id, vote, reason or "", time.time(), reason is not None),
        )
        return True

    async def vote_of(self, answer_id: str, user_id: str) -> dict[str, Any] | None:
        row = await self._one(
            "SELECT vote, reason FROM votes WHERE answer_id = %s AND user_id = %s", (answer_id, user_id)
        )
        return {"vote": row["vote"], "reason": row["reason"]} if row else None

    async def feedback_rows(self) -> list[dict[str, Any]]:
        rows = await self._all(
            "SELECT a.answer_id, a.thread_key, a.platform, a.channel, a.question, a.answer, a.kind, a.route,"
            " a.sources, a.path, a.at, v.user_id, v.vote, v.reason, v.at AS voted_at FROM votes v JOIN answers a"
            " ON a.answer_id = v.answer_id ORDER BY v.at"
        )
        return [
            {
                **_answer_row(r),
                "user_id": r["user_id"],
                "vote": r["vote"],
                "reason": r["reason"],
                "voted_at": r["voted_at"],
            }
            for r in rows
        ]

    # ---- claims and audit -------------------------------------------------------------------
    async def claim_interrupt(self, interrupt_id: str, thread_key: str, by: str) -> bool:
        """True for the first caller on any replica (``INSERT ... ON CONFLICT DO NOTHING``)."""
        row = await self._one(
            "INSERT INTO claims (interrupt_id, thread_key, claimed_by, at) VALUES (%s, %s, %s, %s)"
            " ON CONFLICT DO NOTHING RETURNING interrupt_id",
            (interrupt_id, thread_key, by, time.time()),
        )
        return row is not None

    async def forget_claims_before(self, seconds: float) -> int:
        cur = await self._exec("DELETE FROM claims WHERE at < %s", (time.time() - seconds,))
        return max(0, cur.rowcount)

    async def audit(self, actor: str, command: str, allowed: bool, detail: str = "") -> None:
        await self._exec(
            "INSERT INTO audit (at, actor, command, allowed, detail) VALUES (%s, %s, %s, %s, %s)",
            (time.time(), actor, command, bool(allowed), detail),
        )

    async def audit_rows(self) -> list[tuple]:
        rows = await self._all("SELECT actor, command, allowed, detail FROM audit ORDER BY at")
        return [(r["actor"], r["command"], int(r["allowed"]), r["detail"]) for r in rows]
