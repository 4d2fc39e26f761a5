"""The bookkeeping (:class:`bot.storage.base.BookkeepingStore`) in its own SQLite file, never
the checkpoint file (two writers on one SQLite file lock each other): seen message ids
(deduplication across restarts), runs in flight (found again after a crash,
:mod:`bot.service.recovery`), claims on help requests (exactly one human reply resumes a
paused run), open help requests (timeouts after a restart), the admin audit log, and
answer feedback (every posted answer, and one 👍/👎 vote per user per answer).

One aiosqlite connection per process, opened by :meth:`SqliteBookkeeping.open`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from pathlib import Path
from typing import Any

import aiosqlite

_SCHEMA = """
CREATE TABLE IF NOT EXISTS seen_messages (
    message_id TEXT PRIMARY KEY, thread_key TEXT NOT NULL, seen_at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS seen_by_thread ON seen_messages (thread_key);
CREATE TABLE IF NOT EXISTS help_requests (
    thread_key TEXT PRIMARY KEY, platform TEXT NOT NULL, reference TEXT NOT NULL,
    question TEXT NOT NULL, deadline REAL NOT NULL, created_at REAL NOT NULL,
    status TEXT NOT NULL, resolved_by TEXT NOT NULL DEFAULT '', interrupt_id TEXT NOT NULL DEFAULT '');
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY, thread_key TEXT NOT NULL, platform TEXT NOT NULL, reference TEXT NOT NULL,
    message TEXT NOT NULL DEFAULT '{}', input TEXT NOT NULL DEFAULT '{}', checkpoint_before TEXT NOT NULL DEFAULT '',
    started_at REAL NOT NULL, stage TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS claims (
    interrupt_id TEXT PRIMARY KEY, thread_key TEXT NOT NULL, claimed_by TEXT NOT NULL, at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS answers (
    answer_id TEXT PRIMARY KEY, thread_key TEXT NOT NULL, platform TEXT NOT NULL, channel TEXT NOT NULL DEFAULT '',
    question TEXT NOT NULL, answer TEXT NOT NULL, kind TEXT NOT NULL, route TEXT NOT NULL DEFAULT '',
    sources TEXT NOT NULL DEFAULT '[]', path TEXT NOT NULL DEFAULT '[]', at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS votes (
    answer_id TEXT NOT NULL, user_id TEXT NOT NULL, vote INTEGER NOT NULL, reason TEXT NOT NULL DEFAULT '',
    at REAL NOT NULL, PRIMARY KEY (answer_id, user_id));
CREATE TABLE IF NOT EXISTS audit (
    at REAL NOT NULL, actor TEXT NOT NULL, command TEXT NOT NULL, allowed INTEGER NOT NULL, detail TEXT NOT NULL);
"""


class SqliteBookkeeping:
    """The bookkeeping persisted in ``path`` (SQLite, WAL). One process: ``shared`` is
    False, so runs need no leases and threads no lock beyond the service's own (the
    variant for replicas: :class:`bot.storage.postgres.PostgresBookkeeping`)."""

    shared = False

    def __init__(self, conn: aiosqlite.Connection):
        self._conn = conn
        self._lock = asyncio.Lock()  # statements that must commit together

    @classmethod
    async def open(cls, path: str | Path) -> SqliteBookkeeping:
        """Open (and create) the bookkeeping database at ``path``."""
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        conn = await aiosqlite.connect(str(path))
        try:
            await conn.execute("PRAGMA journal_mode=WAL")
            # no fsync per commit (it serialised the dedup marks of a burst); in WAL
            # mode a killed process still loses nothing committed, only a power loss might
            await conn.execute("PRAGMA synchronous=NORMAL")
            await conn.executescript(_SCHEMA)
            cols = [r[1] for r in await (await conn.execute("PRAGMA table_info(help_requests)")).fetchall()]
            if "interrupt_id" not in cols:  # files written before interrupt ids were recorded
                await conn.execute("ALTER TABLE help_requests ADD COLUMN interrupt_id TEXT NOT NULL DEFAULT ''")
            await conn.commit()
        except BaseException:
            await conn.close()  # else its worker thread keeps the process alive after the error
            raise
        return cls(conn)

    async def close(self) -> None:
        await self._conn.close()

    async def mark_seen(
        self, message_id: str, thread_key: str, run: tuple[str, dict[str, Any], dict[str, Any]] | None = None
    ) -> bool:
        """:meth:`bot.storage.base.Deliveries.mark_seen`."""
        async with self._lock:
            cur = await self._conn.execute(
                "INSERT OR IGNORE INTO seen_messages (message_id, thread_key, seen_at) VALUES (?, ?, ?)",
                (message_id, thread_key, time.time()),
            )
            first = cur.rowcount == 1
            if first and run is not None:
                platform, reference, message = run
                await self._conn.execute(
                    "INSERT OR REPLACE INTO runs (run_id, thread_key, platform, reference, message, started_at, stage)"
                    " VALUES (?, ?, ?, ?, ?, ?, 'queued')",
                    (message_id, thread_key, platform, json.dumps(reference), json.dumps(message), time.time()),
                )
            await self._conn.commit()
        return first

    async def thread_of(self, message_id: str) -> str | None:
        """:meth:`bot.storage.base.Deliveries.thread_of`."""
        row = await (
            await self._conn.execute("SELECT thread_key FROM seen_messages WHERE message_id = ?", (message_id,))
        ).fetchone()
        return str(row[0]) if row else None

    async def has_thread(self, thread_key: str) -> bool:
        """:meth:`bot.storage.base.Deliveries.has_thread`."""
        row = await (
            await self._conn.execute("SELECT 1 FROM seen_messages WHERE thread_key = ? LIMIT 1", (thread_key,))
        ).fetchone()
        return row is not None

    async def recent_message_ids(self, seconds: float, limit: int) -> list[str]:
        """:meth:`bot.storage.base.Deliveries.recent_message_ids`."""
        rows = await (
            await self._conn.execute(
                "SELECT message_id FROM (SELECT message_id, seen_at FROM seen_messages WHERE seen_at >= ?"
                " ORDER BY seen_at DESC LIMIT ?) ORDER BY seen_at",
                (time.time() - seconds, int(limit)),
            )
        ).fetchall()
        return [str(r[0]) for r in rows]

    async def forget_message(self, message_id: str) -> None:
        """Forget one handled message id (see :meth:`bot.storage.base.Deliveries.forget_message`)."""
        await self._conn.execute("DELETE FROM seen_messages WHERE message_id = ?", (message_id,))
        await self._conn.commit()

    async def forget_seen_before(self, seconds: float) -> int:
        """:meth:`bot.storage.base.Deliveries.forget_seen_before`."""
        cur = await self._conn.execute("DELETE FROM seen_messages WHERE seen_at < ?", (time.time() - seconds,))
        await self._conn.commit()
        return cur.rowcount

    async def open_help_request(
        self,
        thread_key: str,
        platform: str,
        reference: dict[str, Any],
        question: str,
        timeout_seconds: float,
        interrupt_id: str = "",
    ) -> float:
        """:meth:`bot.storage.base.HelpDesk.open_help_request`."""
        deadline = time.time() + timeout_seconds
        await self._conn.execute(
            "INSERT OR REPLACE INTO help_requests (thread_key, platform, reference, question, deadline, created_at,"
            " status, interrupt_id) VALUES (?, ?, ?, ?, ?, ?, 'open', ?)",
            (thread_key, platform, json.dumps(reference), question, deadline, time.time(), interrupt_id),
        )
        await self._conn.commit()
        return deadline

    async def claim_help_request(self, thread_key: str, by: str) -> dict[str, Any] | None:
        """:meth:`bot.storage.base.HelpDesk.claim_help_request`."""
        row = await (
            await self._conn.execute(
                "SELECT platform, reference, question FROM help_requests WHERE thread_key = ? AND status = 'open'",
                (thread_key,),
            )
        ).fetchone()
        if row is None:
            return None
        cur = await self._conn.execute(
            "UPDATE help_requests SET status = 'resolved', resolved_by = ? WHERE thread_key = ? AND status = 'open'",
            (by, thread_key),
        )
        await self._conn.commit()
        if cur.rowcount != 1:
            return None
        return {"platform": row[0], "reference": json.loads(row[1]), "question": row[2]}

    async def open_help_requests(self) -> list[dict[str, Any]]:
        """:meth:`bot.storage.base.HelpDesk.open_help_requests`."""
        rows = await (
            await self._conn.execute(
                "SELECT thread_key, platform, reference, deadline, interrupt_id FROM help_requests"
                " WHERE status = 'open'"
            )
        ).fetchall()
        return [
            {
                "thread_key": r[0],
                "platform": r[1],
                "reference": json.loads(r[2]),
                "deadline": r[3],
                "interrupt_id": r[4],
            }
            for r in rows
        ]

    # ---- runs in flight (crash recovery) ------------------------------------------
    async def run_started(
        self,
        run_id: str,
        thread_key: str,
        platform: str,
        reference: dict[str, Any],
        graph_input: dict[str, Any],
        checkpoint_before: str,
    ) -> bool:
        """:meth:`bot.storage.base.RunLedger.run_started` (a queued message's row is updated);
        always True: one process owns every run."""
        await self._conn.execute(
            "INSERT INTO runs (run_id, thread_key, platform, reference, input, checkpoint_before, started_at, stage)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, 'running')"
            " ON CONFLICT(run_id) DO UPDATE SET thread_key = excluded.thread_key, platform = excluded.platform,"
            " reference = excluded.reference, input = excluded.input,"
            " checkpoint_before = excluded.checkpoint_before, started_at = excluded.started_at, stage = 'running'",
            (
                run_id,
                thread_key,
                platform,
                json.dumps(reference),
                json.dumps(graph_input),
                checkpoint_before,
                time.time(),
            ),
        )
        await self._conn.commit()
        return True

    async def update_run(
        self, run_id: str, *, reference: dict[str, Any] | None = None, stage: str | None = None
    ) -> None:
        """Refresh a run's responder reference (the reaction now shown) and/or its stage
        (``running`` -> ``posted``: the answer is out, only the final reaction is left)."""
        if reference is not None:
            await self._conn.execute("UPDATE runs SET reference = ? WHERE run_id = ?", (json.dumps(reference), run_id))
        if stage is not None:
            await self._conn.execute("UPDATE runs SET stage = ? WHERE run_id = ?", (stage, run_id))
        await self._conn.commit()

    async def finish_run(self, run_id: str) -> None:
        """:meth:`bot.storage.base.RunLedger.finish_run`."""
        await self._conn.execute("DELETE FROM runs WHERE run_id = ?", (run_id,))
        await self._conn.commit()

    async def unfinished_runs(self) -> list[dict[str, Any]]:
        """Runs queued or started and never finished (the process died), oldest first:
        run_id, thread_key, platform, reference, message, input, checkpoint_before,
        started_at, stage (``queued`` | ``running`` | ``posting`` | ``posted``)."""
        rows = await (
            await self._conn.execute(
                "SELECT run_id, thread_key, platform, reference, message, input, checkpoint_before, started_at, stage"
                " FROM runs ORDER BY started_at"
            )
        ).fetchall()
        return [
            {
                "run_id": r[0],
                "thread_key": r[1],
                "platform": r[2],
                "reference": json.loads(r[3]),
                "message": json.loads(r[4]),
                "input": json.loads(r[5]),
                "checkpoint_before": r[6],
                "started_at": r[7],
                "stage": r[8],
            }
            for r in rows
        ]

    async def run_in_flight(self, run_id: str) -> bool:
        """:meth:`bot.storage.base.RunLedger.run_in_flight`."""
        row = await (await self._conn.execute("SELECT 1 FROM runs WHERE run_id = ?", (run_id,))).fetchone()
        return row is not None

    async def renew_leases(self) -> int:
        """No leases in a file of one process (see :class:`bot.storage.postgres.PostgresBookkeeping`)."""
        return 0

    async def may_post(self, run_id: str) -> bool:
        """One process owns every run: always True."""
        return True

    async def holds(self, run_id: str) -> bool:
        """One process owns every run: always True (replicas: False once another replica
        took the run over, :meth:`bot.storage.postgres.PostgresBookkeeping.holds`)."""
        return True

    async def wait_turn(self, run_id: str, thread_key: str) -> None:
        """One process: the service's per-thread lock already keeps the order."""

    @contextlib.asynccontextmanager
    async def exclusive(self, name: str) -> Any:
        """One process: always granted (the index folder's own lock guards a reindex)."""
        yield True

    async def index_generation(self, name: str = "knowledge") -> str:
        """One process: the index folder's ``CURRENT`` is the only record ("")."""
        return ""

    async def set_index_generation(self, generation: str, name: str = "knowledge") -> None:
        """One process: nothing to record beyond the index folder."""

    def thread_lock(self, thread_key: str) -> Any:
        """One process: nothing beyond the service's per-thread asyncio lock."""
        return contextlib.nullcontext()

    # ---- claims on help requests ---------------------------------------------------
    async def claim_interrupt(self, interrupt_id: str, thread_key: str, by: str) -> bool:
        """Atomically claim the right to resume the interrupt ``interrupt_id``: True for
        the first caller only (across tasks and processes sharing this file)."""
        cur = await self._conn.execute(
            "INSERT OR IGNORE INTO claims (interrupt_id, thread_key, claimed_by, at) VALUES (?, ?, ?, ?)",
            (interrupt_id, thread_key, by, time.time()),
        )
        await self._conn.commit()
        return cur.rowcount == 1

    async def forget_claims_before(self, seconds: float) -> int:
        """Drop claims older than ``seconds`` (their interrupts were resumed long ago)."""
        cur = await self._conn.execute("DELETE FROM claims WHERE at < ?", (time.time() - seconds,))
        await self._conn.commit()
        return cur.rowcount

    async def audit(self, actor: str, command: str, allowed: bool, detail: str = "") -> None:
        """:meth:`bot.storage.base.AuditLog.audit`."""
        await self._conn.execute(
            "INSERT INTO audit (at, actor, command, allowed, detail) VALUES (?, ?, ?, ?, ?)",
            (time.time(), actor, command, int(allowed), detail),
        )
        await self._conn.commit()

    async def audit_rows(self) -> list[tuple]:
        cur = await self._conn.execute("SELECT actor, command, allowed, detail FROM audit ORDER BY at")
        rows = await cur.fetchall()
        return [tuple(r) for r in rows]

    # ---- answer feedback ---------------------------------------------------------------
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
        """:meth:`bot.storage.base.Feedback.record_answer`."""
        await self._conn.execute(
            "INSERT OR REPLACE INTO answers (answer_id, thread_key, platform, channel, question, answer, kind, route,"
            " sources, path, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
        await self._conn.commit()

    async def answer_record(self, answer_id: str) -> dict[str, Any] | None:
        """:meth:`bot.storage.base.Feedback.answer_record`."""
        row = await (
            await self._conn.execute(
                "SELECT answer_id, thread_key, platform, channel, question, answer, kind, route, sources, path, at"
                " FROM answers WHERE answer_id = ?",
                (answer_id,),
            )
        ).fetchone()
        return _answer_row(row) if row else None

    async def record_vote(self, answer_id: str, user_id: str, vote: int, reason: str | None = None) -> bool:
        """:meth:`bot.storage.base.Feedback.record_vote`."""
        if vote not in (1, -1):
            raise ValueError(f"a vote is +1 or -1, not {vote!r}")
        if await self.answer_record(answer_id) is None:
            return False
        await self._conn.execute(
            "INSERT INTO votes (answer_id, user_id, vote, reason, at) VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT(answer_id, user_id) DO UPDATE SET vote = excluded.vote, at = excluded.at,"
            " reason = CASE WHEN ? THEN excluded.reason WHEN excluded.vote > 0 THEN '' ELSE votes.reason END",
            (answer_id, user_id, vote, reason or "", time.time(), reason is not None),
        )
        await self._conn.commit()
        return True

    async def vote_of(self, answer_id: str, user_id: str) -> dict[str, Any] | None:
        """:meth:`bot.storage.base.Feedback.vote_of`."""
        row = await (
            await self._conn.execute(
                "SELECT vote, reason FROM votes WHERE answer_id = ? AND user_id = ?", (answer_id, user_id)
            )
        ).fetchone()
        return {"vote": row[0], "reason": row[1]} if row else None

    async def feedback_rows(self) -> list[dict[str, Any]]:
        """:meth:`bot.storage.base.Feedback.feedback_rows`."""
        rows = await (
            await self._conn.execute(
                "SELECT a.answer_id, a.thread_key, a.platform, a.channel, a.question, a.answer, a.kind, a.route,"
                " a.sources, a.path, a.at, v.user_id, v.vote, v.reason, v.at FROM votes v JOIN answers a"
                " ON a.answer_id = v.answer_id ORDER BY v.at"
            )
        ).fetchall()
        return [
            {**_answer_row(r[:11]), "user_id": r[11], "vote": r[12], "reason": r[13], "voted_at": r[14]} for r in rows
        ]


def _answer_row(r: Any) -> dict[str, Any]:
    return {
        "answer_id": r[0],
        "thread_key": r[1],
        "platform": r[2],
        "channel": r[3],
        "question": r[4],
        "answer": r[5],
        "kind": r[6],
        "route": r[7],
        "sources": json.loads(r[8]),
        "path": json.loads(r[9]),
        "at": r[10],
    }
