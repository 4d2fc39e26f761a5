"""Bot bookkeeping in its own SQLite file (never the checkpoint file, platform-notes.md):
seen message ids (deduplication across restarts), open help requests (exactly-once
resume, timeouts after a restart) and the admin audit log.

One aiosqlite connection per process, opened by :meth:`Bookkeeping.open`.
"""

from __future__ import annotations

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
    status TEXT NOT NULL, resolved_by TEXT NOT NULL DEFAULT '');
CREATE TABLE IF NOT EXISTS audit (
    at REAL NOT NULL, actor TEXT NOT NULL, command TEXT NOT NULL, allowed INTEGER NOT NULL, detail TEXT NOT NULL);
"""


class Bookkeeping:
    """Dedup, help requests and audit, persisted in ``path`` (SQLite, WAL)."""

    def __init__(self, conn: aiosqlite.Connection):
        self._conn = conn

    @classmethod
    async def open(cls, path: str | Path) -> "Bookkeeping":
        """Open (and create) the bookkeeping database at ``path``."""
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        conn = await aiosqlite.connect(str(path))
        await conn.execute("PRAGMA journal_mode=WAL")
        await conn.executescript(_SCHEMA)
        await conn.commit()
        return cls(conn)

    async def close(self) -> None:
        await self._conn.close()

    async def mark_seen(self, message_id: str, thread_key: str) -> bool:
        """Record a message id; True the first time, False for any repeated delivery."""
        cur = await self._conn.execute(
            "INSERT OR IGNORE INTO seen_messages (message_id, thread_key, seen_at) VALUES (?, ?, ?)",
            (message_id, thread_key, time.time()),
        )
        await self._conn.commit()
        return cur.rowcount == 1

    async def thread_of(self, message_id: str) -> str | None:
        """The thread key a handled message id was recorded with, or None."""
        row = await (await self._conn.execute(
            "SELECT thread_key FROM seen_messages WHERE message_id = ?", (message_id,))).fetchone()
        return str(row[0]) if row else None

    async def has_thread(self, thread_key: str) -> bool:
        """True if a message of this thread was handled before."""
        row = await (await self._conn.execute(
            "SELECT 1 FROM seen_messages WHERE thread_key = ? LIMIT 1", (thread_key,))).fetchone()
        return row is not None

    async def forget_seen_before(self, seconds: float) -> int:
        """Drop seen ids older than ``seconds`` (redeliveries come within minutes)."""
        cur = await self._conn.execute("DELETE FROM seen_messages WHERE seen_at < ?", (time.time() - seconds,))
        await self._conn.commit()
        return cur.rowcount

    async def open_help_request(self, thread_key: str, platform: str, reference: dict[str, Any],
                                question: str, timeout_seconds: float) -> float:
        """Record an open help request; returns its deadline (epoch seconds)."""
        deadline = time.time() + timeout_seconds
        await self._conn.execute(
            "INSERT OR REPLACE INTO help_requests (thread_key, platform, reference, question, deadline, created_at, status)"
            " VALUES (?, ?, ?, ?, ?, ?, 'open')",
            (thread_key, platform, json.dumps(reference), question, deadline, time.time()),
        )
        await self._conn.commit()
        return deadline

    async def claim_help_request(self, thread_key: str, by: str) -> dict[str, Any] | None:
        """Atomically move an open help request to resolved. Returns it (with its
        ``reference``) to the first caller only; None if there is none open."""
        row = await (await self._conn.execute(
            "SELECT platform, reference, question FROM help_requests WHERE thread_key = ? AND status = 'open'",
            (thread_key,))).fetchone()
        if row is None:
            return None
        cur = await self._conn.execute(
            "UPDATE help_requests SET status = 'resolved', resolved_by = ? WHERE thread_key = ? AND status = 'open'",
            (by, thread_key))
        await self._conn.commit()
        if cur.rowcount != 1:
            return None
        return {"platform": row[0], "reference": json.loads(row[1]), "question": row[2]}

    async def reopen_help_request(self, thread_key: str) -> None:
        """Undo a claim whose resume failed, so a human can try again."""
        await self._conn.execute("UPDATE help_requests SET status = 'open' WHERE thread_key = ?", (thread_key,))
        await self._conn.commit()

    async def open_help_requests(self) -> list[dict[str, Any]]:
        """All open help requests: thread_key, platform, reference, deadline."""
        rows = await (await self._conn.execute(
            "SELECT thread_key, platform, reference, deadline FROM help_requests WHERE status = 'open'")).fetchall()
        return [{"thread_key": r[0], "platform": r[1], "reference": json.loads(r[2]), "deadline": r[3]} for r in rows]

    async def audit(self, actor: str, command: str, allowed: bool, detail: str = "") -> None:
        """Append an admin command to the audit log."""
        await self._conn.execute("INSERT INTO audit (at, actor, command, allowed, detail) VALUES (?, ?, ?, ?, ?)",
                                 (time.time(), actor, command, int(allowed), detail))
        await self._conn.commit()

    async def audit_rows(self) -> list[tuple]:
        return list(await (await self._conn.execute("SELECT actor, command, allowed, detail FROM audit ORDER BY at")).fetchall())
