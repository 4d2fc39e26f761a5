"""The queries of :mod:`bot.storage.checkpoints` for LangGraph's ``AsyncPostgresSaver``
(tables ``checkpoints``, ``checkpoint_blobs``, ``checkpoint_writes`` of
``langgraph-checkpoint-postgres``; pinned by ``tests/test_storage_conformance.py``).

Pruning with ``keep = 1`` is the saver's own ``aprune(strategy="keep_latest")`` (it keeps
the newest checkpoint with the blobs and writes it needs, in one snapshot, so what a run
saves meanwhile is untouched). With ``keep > 1`` the older checkpoints and their writes
are deleted here; blobs are then freed by the next ``keep_latest`` (none with keep > 1).
PostgreSQL gives deleted rows' space back to the table by autovacuum, no file shrinking step.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

#: Columns the statements here rely on.
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
    "checkpoint_blobs": ("thread_id", "checkpoint_ns", "channel", "version", "type", "blob"),
    "checkpoint_writes": (
        "thread_id",
        "checkpoint_ns",
        "checkpoint_id",
        "task_id",
        "idx",
        "channel",
        "type",
        "blob",
        "task_path",
    ),
}


def is_postgres(saver: Any) -> bool:
    """True for LangGraph's (Async)PostgresSaver."""
    return type(saver).__module__.startswith("langgraph.checkpoint.postgres")


@asynccontextmanager
async def _connection(saver: Any) -> AsyncIterator[Any]:
    """A connection of the saver's pool (``open_storage`` gives it one), or its connection."""
    if hasattr(saver.conn, "connection"):
        async with saver.conn.connection() as conn:
            yield conn
    else:
        yield saver.conn


async def _fetch(saver: Any, sql: str, params: tuple) -> list[dict[str, Any]]:
    from psycopg.rows import dict_row

    async with _connection(saver) as conn, conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(sql, params)
        return list(await cur.fetchall())


async def thread_keys(saver: Any, prefix: str = "") -> list[str]:
    pattern = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    rows = await _fetch(
        saver, "SELECT DISTINCT thread_id FROM checkpoints WHERE thread_id LIKE %s ORDER BY thread_id", (pattern,)
    )
    return [r["thread_id"] for r in rows]


async def prune(saver: Any, thread_key: str, keep: int) -> int:
    """Keep the newest ``keep`` checkpoints of a thread. Returns how many were deleted.

    Raises:
        psycopg.Error: the statements failed (e.g. the database went away).
    """
    keep = max(1, int(keep))
    before = await _count(saver, thread_key)
    if keep == 1:
        await saver.aprune([thread_key], strategy="keep_latest")
    else:
        async with _connection(saver) as conn, conn.transaction():
            await conn.execute(
                "WITH old AS (SELECT checkpoint_ns, checkpoint_id FROM (SELECT checkpoint_ns, checkpoint_id,"
                " row_number() OVER (PARTITION BY checkpoint_ns ORDER BY checkpoint_id DESC) AS n FROM checkpoints"
                " WHERE thread_id = %s) ranked WHERE n > %s),"
                " w AS (DELETE FROM checkpoint_writes cw USING old WHERE cw.thread_id = %s AND cw.checkpoint_ns ="
                " old.checkpoint_ns AND cw.checkpoint_id = old.checkpoint_id)"
                " DELETE FROM checkpoints c USING old WHERE c.thread_id = %s AND c.checkpoint_ns = old.checkpoint_ns"
                " AND c.checkpoint_id = old.checkpoint_id",
                (thread_key, keep, thread_key, thread_key),
            )
    return max(0, before - await _count(saver, thread_key))


async def _count(saver: Any, thread_key: str) -> int:
    rows = await _fetch(saver, "SELECT count(*) AS n FROM checkpoints WHERE thread_id = %s", (thread_key,))
    return int(rows[0]["n"])


async def latest_checkpoint_id(saver: Any, thread_key: str) -> str:
    rows = await _fetch(
        saver,
        "SELECT checkpoint_id FROM checkpoints WHERE thread_id = %s AND checkpoint_ns = ''"
        " ORDER BY checkpoint_id DESC LIMIT 1",
        (thread_key,),
    )
    return rows[0]["checkpoint_id"] if rows else ""


async def thread_bytes(saver: Any, thread_key: str) -> int:
    """Bytes stored for a thread: checkpoints and metadata (JSONB), blobs and writes."""
    rows = await _fetch(
        saver,
        "SELECT"
        " (SELECT COALESCE(SUM(pg_column_size(checkpoint) + pg_column_size(metadata)), 0) FROM"
        "  checkpoints WHERE thread_id = %s)"
        " + (SELECT COALESCE(SUM(length(blob)), 0) FROM checkpoint_blobs WHERE thread_id = %s)"
        " + (SELECT COALESCE(SUM(length(blob)), 0) FROM checkpoint_writes WHERE thread_id = %s) AS b",
        (thread_key, thread_key, thread_key),
    )
    return int(rows[0]["b"])


async def thread_counts(saver: Any, thread_key: str) -> dict[str, int]:
    """Rows a thread holds per checkpoint table (for the deploy docs and tests)."""
    out = {}
    for table in ("checkpoints", "checkpoint_blobs", "checkpoint_writes"):
        rows = await _fetch(saver, f"SELECT count(*) AS n FROM {table} WHERE thread_id = %s", (thread_key,))
        out[table] = int(rows[0]["n"])
    return out


def list_threads(url: str) -> list[tuple[str, int]]:
    """``(thread_id, checkpoints)`` in the database at ``url`` ([] before the first start).

    Raises:
        psycopg.Error: the database cannot be reached.
    """
    import psycopg

    with psycopg.connect(url, connect_timeout=10) as conn:
        row = conn.execute("SELECT to_regclass('checkpoints')").fetchone()
        if row is None or row[0] is None:
            return []
        return [
            (r[0], int(r[1]))
            for r in conn.execute("SELECT thread_id, count(*) FROM checkpoints GROUP BY thread_id ORDER BY thread_id")
        ]
