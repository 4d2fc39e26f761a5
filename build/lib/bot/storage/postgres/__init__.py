"""The PostgreSQL backend: any number of replicas on one database (docs/deploy.md).

LangGraph's ``AsyncPostgresSaver`` and :class:`PostgresBookkeeping` over psycopg_pool
``AsyncConnectionPool`` s. The DSN comes only from the environment
(``THREADWISE_DATABASE_URL``). The schema is created and upgraded at start
(:mod:`bot.storage.postgres.migrations`; also ``threadwise db upgrade``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from bot.failures import DatabaseError
from bot.storage.base import Storage
from bot.storage.postgres import migrations
from bot.storage.postgres.bookkeeping import PostgresBookkeeping

__all__ = ["PostgresBookkeeping", "describe_dsn", "open_postgres", "upgrade_schema"]

log = logging.getLogger(__name__)


def describe_dsn(url: str) -> str:
    """``host:port/dbname`` of a DSN, without user or password (for messages and logs)."""
    try:
        from psycopg.conninfo import conninfo_to_dict

        d = conninfo_to_dict(url)
        return f"{d.get('host', 'localhost')}:{d.get('port', 5432)}/{d.get('dbname', '')}"
    except Exception:  # noqa: BLE001
        return "(unparsable THREADWISE_DATABASE_URL)"


async def _pool(url: str, *, max_size: int, timeout: float, name: str) -> Any:
    from psycopg.rows import dict_row
    from psycopg_pool import AsyncConnectionPool

    pool = AsyncConnectionPool(
        url,
        min_size=1,
        max_size=max_size,
        open=False,
        name=name,
        timeout=timeout,
        # what AsyncPostgresSaver needs; a connection cut by the server is found at checkout and replaced
        kwargs={
            "autocommit": True,
            "prepare_threshold": 0,
            "row_factory": dict_row,
            "connect_timeout": max(1, int(timeout)),
        },
        check=AsyncConnectionPool.check_connection,
    )
    try:
        await pool.open(wait=True, timeout=timeout)
    except Exception as exc:
        await pool.close()
        raise DatabaseError(
            f"cannot reach the database at {describe_dsn(url)}: {type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else ''}"
        ) from exc
    return pool


async def upgrade_schema(pool: Any, checkpointer: Any) -> tuple[int, int]:
    """Create or upgrade the bookkeeping schema and the checkpointer's tables (each once,
    under advisory locks, so replicas may start together). Returns the bookkeeping
    schema's ``(version before, version after)``."""
    async with pool.connection() as conn:
        versions = await migrations.upgrade(conn)
    # The saver's own migrations run CREATE INDEX CONCURRENTLY, which waits for every open
    # transaction, a blocked pg_advisory_lock() of another replica included: so replicas
    # poll pg_try_advisory_lock (each try a short transaction) instead of blocking.
    async with pool.connection() as conn:
        while not (
            await (
                await conn.execute("SELECT pg_try_advisory_lock(%s) AS ok", (migrations.SCHEMA_LOCK + 1,))
            ).fetchone()
        )["ok"]:
            await asyncio.sleep(0.1)
        try:
            await checkpointer.setup()
        finally:
            await conn.execute("SELECT pg_advisory_unlock(%s)", (migrations.SCHEMA_LOCK + 1,))
    return versions


@asynccontextmanager
async def open_postgres(settings: Any, url: str) -> AsyncIterator[Storage]:
    """Open the pools, upgrade the schema and build the PostgreSQL backend for the process lifetime.

    Raises:
        DatabaseError: the database cannot be reached within ``connect_timeout_seconds``.
    """
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    from bot.storage.sqlite import open_learned

    st = settings.storage
    pool = await _pool(url, max_size=st.pool_max_size, timeout=st.connect_timeout_seconds, name="threadwise")
    try:
        runs = settings.service.max_concurrent_runs  # an int, or "auto" (at most 32 runs: bot.runtime)
        runs = runs if isinstance(runs, int) else 32
        lock_pool = await _pool(
            url, max_size=max(st.pool_max_size, runs + 2), timeout=st.connect_timeout_seconds, name="threadwise-locks"
        )
        try:
            saver = AsyncPostgresSaver(conn=pool)
            before, after = await upgrade_schema(pool, saver)
            if before != after:
                log.info("database %s: schema %d -> %d", describe_dsn(url), before, after)
            store = PostgresBookkeeping(
                pool, lock_pool, lease_seconds=st.lease_seconds, recovery_interval_seconds=st.recovery_interval_seconds
            )
            log.info("storage: PostgreSQL %s, replica %s", describe_dsn(url), store.replica_id)
            yield Storage(
                "postgres", store, saver, await open_learned(settings), {"queries": pool, "thread_locks": lock_pool}
            )
        finally:
            await lock_pool.close()
    finally:
        await pool.close()
