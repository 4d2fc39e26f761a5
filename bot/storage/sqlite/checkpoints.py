"""Raw SQL against LangGraph's SQLite checkpointer, in one place.

LangGraph offers no API to list threads, prune old checkpoints or reclaim space, so the
few statements we need are written here against the schema of
``langgraph-checkpoint-sqlite`` (tables ``checkpoints`` and ``writes``, see
:data:`SAVER_SCHEMA`). ``tests/test_storage_conformance.py`` pins that schema: an upgrade of the
saver that changes it fails that test before it can break pruning.

Pruning gives the freed pages back to the file system (``auto_vacuum = INCREMENTAL`` +
``PRAGMA incremental_vacuum``).

All async functions take the ``AsyncSqliteSaver`` and use its connection under its lock.
"""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

#: Columns of the saver's tables that the statements here rely on (pinned by a test).
SAVER_SCHEMA: dict[str, tuple[str, ...]] = {
    "checkpoints": (
        "thread_id",
        "checkpoint_ns",
        "checkpoint_id",
        "parent_checkpoint_id",
        "type",
        "checkpoint",
        "metadata",
    ),
    "writes": (
        "thread_id",
        "checkpoint_ns",
        "checkpoint_id",
        "task_id",
        "task_path",
        "idx",
        "channel",
        "type",
        "value",
    ),
}


#: How long a write to the checkpoint file waits for another process's write, in milliseconds.
BUSY_TIMEOUT_MS = 30_000


def _conn(saver: Any) -> Any | None:
    conn = getattr(saver, "conn", None)
    return conn if conn is not None and hasattr(saver, "lock") else None


async def prepare(saver: Any) -> None:
    """Turn on incremental auto-vacuum for the checkpoint file (before the saver creates
    its tables; an existing file without it is rewritten once with VACUUM), and
    ``synchronous = NORMAL`` and a busy timeout of :data:`BUSY_TIMEOUT_MS` for its connection.
    Best effort: a failure (e.g. a full disk) is logged and the file is used as it is.

    ``synchronous = NORMAL`` in WAL mode (the saver's) commits without an fsync per
    transaction: a killed process loses nothing committed (the WAL is in the OS's hands),
    a power loss may lose the last steps, and recovery then continues from an earlier
    checkpoint (https://www.sqlite.org/pragma.html#pragma_synchronous). Every
    graph step may write checkpoints, and an fsync per commit serialises the runs.
    """
    conn = _conn(saver)
    if conn is None:
        return
    try:
        async with saver.lock:
            await conn.execute("PRAGMA synchronous = NORMAL")
            # graph worker processes write this file too: a writer waits for the lock instead of
            # failing with "database is locked" (sqlite3's default wait is 5 s; a burst can queue longer)
            await conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            mode = (await (await conn.execute("PRAGMA auto_vacuum")).fetchone())[0]
            if mode == 2:
                return
            await conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
            pages = (await (await conn.execute("PRAGMA page_count")).fetchone())[0]
            if pages > 0:  # existing tables: the mode only takes effect after a VACUUM
                await conn.commit()
                await conn.execute("VACUUM")
                log.info("checkpoint file rewritten with incremental auto-vacuum (%d pages)", pages)
    except Exception as exc:  # noqa: BLE001 - space reclaiming is best effort
        log.warning("checkpoint file: cannot enable auto-vacuum: %s: %s", type(exc).__name__, exc)


async def thread_keys(saver: Any, prefix: str = "") -> list[str]:
    """:func:`bot.storage.checkpoints.thread_keys`."""
    conn = _conn(saver)
    if conn is None:
        return []
    pattern = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    async with saver.lock:
        rows = await (
            await conn.execute(
                "SELECT DISTINCT thread_id FROM checkpoints WHERE thread_id LIKE ? ESCAPE '\\' ORDER BY thread_id",
                (pattern,),
            )
        ).fetchall()
    return [r[0] for r in rows]


async def prune(saver: Any, thread_key: str, keep: int) -> int:
    """Delete all but the newest ``keep`` checkpoints of a thread (per namespace) and the
    pending writes of the deleted ones, then give free pages back. Returns the number of
    checkpoints deleted.

    Raises:
        sqlite3.Error: the statements failed (e.g. the disk is full).
    """
    conn = _conn(saver)
    if conn is None:
        return 0
    keep = max(1, int(keep))
    async with saver.lock:
        await conn.execute(
            "DELETE FROM writes WHERE thread_id = ? AND checkpoint_id NOT IN (SELECT checkpoint_id FROM checkpoints"
            " c WHERE c.thread_id = writes.thread_id AND c.checkpoint_ns = writes.checkpoint_ns"
            " ORDER BY c.checkpoint_id DESC LIMIT ?)",
            (thread_key, keep),
        )
        cur = await conn.execute(
            "DELETE FROM checkpoints WHERE thread_id = ? AND checkpoint_id NOT IN (SELECT c.checkpoint_id FROM"
            " checkpoints c WHERE c.thread_id = checkpoints.thread_id AND c.checkpoint_ns = checkpoints.checkpoint_ns"
            " ORDER BY c.checkpoint_id DESC LIMIT ?)",
            (thread_key, keep),
        )
        deleted = cur.rowcount
        await conn.commit()
        if deleted:
            await conn.commit()
            # executescript steps the pragma to the end; execute() would free a single page
            await conn.executescript("PRAGMA incremental_vacuum;")
    return max(0, deleted)


async def latest_checkpoint_id(saver: Any, thread_key: str) -> str:
    """:func:`bot.storage.checkpoints.latest_checkpoint_id`."""
    conn = _conn(saver)
    if conn is None:
        return ""
    async with saver.lock:
        row = await (
            await conn.execute(
                "SELECT checkpoint_id FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = '' "
                "ORDER BY checkpoint_id DESC LIMIT 1",
                (thread_key,),
            )
        ).fetchone()
    return row[0] if row else ""


async def thread_bytes(saver: Any, thread_key: str) -> int:
    """Bytes of checkpoint data stored for a thread (checkpoints + metadata + writes)."""
    conn = _conn(saver)
    if conn is None:
        return 0
    async with saver.lock:
        a = (
            await (
                await conn.execute(
                    "SELECT COALESCE(SUM(LENGTH(checkpoint) + LENGTH(metadata)), 0) FROM checkpoints"
                    " WHERE thread_id = ?",
                    (thread_key,),
                )
            ).fetchone()
        )[0]
        b = (
            await (
                await conn.execute(
                    "SELECT COALESCE(SUM(LENGTH(value)), 0) FROM writes WHERE thread_id = ?", (thread_key,)
                )
            ).fetchone()
        )[0]
    return int(a) + int(b)


def list_threads(path: str | Path) -> list[tuple[str, int]]:
    """``(thread_id, checkpoints)`` of a checkpoint file, opened read-only ([] if missing).

    Raises:
        sqlite3.Error: the file is not a checkpoint database or cannot be read.
    """
    path = Path(path)
    if not path.exists():
        return []
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        has = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'checkpoints'").fetchone()
        if not has:
            return []
        return conn.execute(
            "SELECT thread_id, COUNT(*) FROM checkpoints GROUP BY thread_id ORDER BY thread_id"
        ).fetchall()
    finally:
        conn.close()
