"""The PostgreSQL schema of the bookkeeping, created and upgraded by the program.

Numbered migrations (:data:`MIGRATIONS`, version = position + 1) are applied in order by
:func:`upgrade`, each recorded in ``schema_version``; ``threadwise db upgrade`` runs it, and so
does every start (``open_storage``). Replicas starting together are serialised by a
transaction-level advisory lock, so each migration runs once.

Never edit a migration that has shipped: add a new one.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)

#: Advisory lock key of schema upgrades (any constant bigint; hashtextextended('threadwise:schema', 0) style).
SCHEMA_LOCK = 0x7477_5343_4845_4D41  # "twSCHEMA"

MIGRATIONS: list[str] = [
    # 1: the tables of the SQLite bookkeeping (bot/storage/sqlite/bookkeeping.py), one for one
    """
    CREATE TABLE seen_messages (
        message_id TEXT PRIMARY KEY, thread_key TEXT NOT NULL, seen_at DOUBLE PRECISION NOT NULL);
    CREATE INDEX seen_by_thread ON seen_messages (thread_key);
    CREATE TABLE help_requests (
        thread_key TEXT PRIMARY KEY, platform TEXT NOT NULL, reference TEXT NOT NULL, question TEXT NOT NULL,
        deadline DOUBLE PRECISION NOT NULL, created_at DOUBLE PRECISION NOT NULL, status TEXT NOT NULL,
        resolved_by TEXT NOT NULL DEFAULT '', interrupt_id TEXT NOT NULL DEFAULT '');
    CREATE TABLE runs (
        run_id TEXT PRIMARY KEY, thread_key TEXT NOT NULL, platform TEXT NOT NULL, reference TEXT NOT NULL,
        message TEXT NOT NULL DEFAULT '{}', input TEXT NOT NULL DEFAULT '{}',
        checkpoint_before TEXT NOT NULL DEFAULT '', started_at DOUBLE PRECISION NOT NULL, stage TEXT NOT NULL);
    CREATE TABLE claims (
        interrupt_id TEXT PRIMARY KEY, thread_key TEXT NOT NULL, claimed_by TEXT NOT NULL,
        at DOUBLE PRECISION NOT NULL);
    CREATE TABLE audit (
        at DOUBLE PRECISION NOT NULL, actor TEXT NOT NULL, command TEXT NOT NULL, allowed BOOLEAN NOT NULL,
        detail TEXT NOT NULL);
    """,
    # 2: replicas: runs carry an arrival order, an owner and a lease (a run whose lease expired
    # is taken over by another replica); the index generation every replica serves
    """
    ALTER TABLE runs ADD COLUMN seq BIGSERIAL,
        ADD COLUMN owner TEXT NOT NULL DEFAULT '',
        ADD COLUMN lease_expires TIMESTAMPTZ NOT NULL DEFAULT '-infinity';
    CREATE INDEX runs_by_lease ON runs (lease_expires);
    CREATE INDEX runs_by_thread ON runs (thread_key, seq);
    CREATE TABLE index_state (
        name TEXT PRIMARY KEY, generation TEXT NOT NULL, updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        updated_by TEXT NOT NULL DEFAULT '');
    """,
    # 3: answer feedback (the SQLite bookkeeping's answers and votes tables)
    """
    CREATE TABLE answers (
        answer_id TEXT PRIMARY KEY, thread_key TEXT NOT NULL, platform TEXT NOT NULL, channel TEXT NOT NULL DEFAULT '',
        question TEXT NOT NULL, answer TEXT NOT NULL, kind TEXT NOT NULL, route TEXT NOT NULL DEFAULT '',
        sources TEXT NOT NULL DEFAULT '[]', path TEXT NOT NULL DEFAULT '[]', at DOUBLE PRECISION NOT NULL);
    CREATE TABLE votes (
        answer_id TEXT NOT NULL, user_id TEXT NOT NULL, vote INTEGER NOT NULL, reason TEXT NOT NULL DEFAULT '',
        at DOUBLE PRECISION NOT NULL, PRIMARY KEY (answer_id, user_id));
    """,
    # 4: fencing: every acquisition of a run (queued on receipt, started, taken over) gets the
    # next fence; a replica's writes about a run (its status, "posting", the delete) name the
    # fence it holds, so one whose run was taken over cannot post it (bot/storage/postgres/bookkeeping.py)
    """
    ALTER TABLE runs ADD COLUMN fence BIGINT NOT NULL DEFAULT 0;
    """,
    # 5: the learned entries, shared by every replica on any host (bot/storage/postgres/learned.py):
    # searched with full text (a tsvector of graphs.terms.index_text, english configuration)
    """
    CREATE TABLE learned_entries (
        id BIGSERIAL PRIMARY KEY, question TEXT NOT NULL, answer TEXT NOT NULL, answered_by TEXT NOT NULL,
        answered_at DOUBLE PRECISION NOT NULL, thread_key TEXT NOT NULL DEFAULT '',
        permalink TEXT NOT NULL DEFAULT '', platform TEXT NOT NULL DEFAULT '', channel TEXT NOT NULL DEFAULT '',
        search TSVECTOR NOT NULL);
    CREATE INDEX learned_entries_search ON learned_entries USING GIN (search);
    """,
    # 6: the knowledge each learned entry was learned under (graphs.learned.LearnedEntry.sources,
    # a JSON list; '' for the entries saved before, which keep working where they did)
    """
    ALTER TABLE learned_entries ADD COLUMN sources TEXT NOT NULL DEFAULT '';
    """,
]

LATEST = len(MIGRATIONS)


async def current_version(conn: Any) -> int:
    """The schema version of the database behind ``conn`` (0: none yet)."""
    cur = await conn.execute("SELECT to_regclass('schema_version') IS NOT NULL AS present")
    row = await cur.fetchone()
    present = row["present"] if isinstance(row, dict) else row[0]
    if not present:
        return 0
    cur = await conn.execute("SELECT COALESCE(MAX(version), 0) AS v FROM schema_version")
    row = await cur.fetchone()
    return int(row["v"] if isinstance(row, dict) else row[0])


async def upgrade(conn: Any) -> tuple[int, int]:
    """Apply the migrations the database lacks, in one transaction under an advisory lock.

    Args:
        conn: a psycopg ``AsyncConnection`` (autocommit or not; a transaction is opened).

    Returns:
        ``(version before, version after)``.

    Raises:
        psycopg.Error: a statement failed (nothing of the upgrade is kept), or the database
            holds a newer schema than this program knows (``RuntimeError``).
    """
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_version ("
            " version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
        )
        before = await current_version(conn)
        if before > LATEST:
            raise RuntimeError(
                f"the database schema is version {before}, newer than this program's {LATEST}: upgrade Threadwise"
            )
        for version in range(before + 1, LATEST + 1):
            for statement in filter(str.strip, MIGRATIONS[version - 1].split(";")):
                await conn.execute(statement)  # one at a time: prepared statements hold one command
            await conn.execute("INSERT INTO schema_version (version) VALUES (%s)", (version,))
            log.info("database schema upgraded to version %d", version)
    return before, LATEST
