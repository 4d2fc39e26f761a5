"""The PostgreSQL backend: any number of replicas on one database (docs/deploy.md).

LangGraph's ``AsyncPostgresSaver`` and :class:`PostgresBookkeeping` over psycopg_pool
``AsyncConnectionPool`` s. The DSN comes only from the environment
(``THREADWISE_DATABASE_URL``). The schema is created and upgraded at start
(:mod:`bot.storage.postgres.migrations`; also ``threadwise db upgrade``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from bot.storage.base import Storage
from bot.storage.postgres import migrations
from bot.storage.postgres.bookkeeping import PostgresBookkeeping

__all__ = [
    "PostgresBookkeeping",
    "check_reachable",
    "describe_dsn",
    "new_replica_id",
    "open_postgres",
    "open_postgres_learned",
    "upgrade_schema",
]

log = logging.getLogger(__name__)


def describe_dsn(url: str) -> str:
    """``host:port/dbname`` of a DSN, without user or password (for messages and logs)."""
    from bot.storage.postgres.pools import describe_dsn as describe

    return describe(url)


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

    The replica's connections never exceed ``[storage] max_connections``
    (:class:`~bot.storage.postgres.pools.ConnectionBudget`), and it does not start when that
    budget does not fit the server beside the running replicas
    (:func:`~bot.storage.postgres.pools.check_capacity`).

    Raises:
        DatabaseError: the URL is wrong or the database cannot be reached within
            ``connect_timeout_seconds`` (one line naming the cause), or the budget does not fit.
    """
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    from bot.storage.postgres import pools
    from bot.storage.postgres.learned import PostgresLearnedStore

    st = settings.storage
    timeout = st.connect_timeout_seconds
    budget = pools.ConnectionBudget.of(st.max_connections)
    replica_id = new_replica_id()
    app = pools.application_name(budget, replica_id)
    conn = await pools.probe(url, app, timeout)  # a wrong URL or a full server: one line, before any pool
    try:
        figures = await pools.check_capacity(conn, budget, url)
    finally:
        await conn.close()
    async with AsyncExitStack() as stack:
        queries = await pools.open_pool(url, size=budget.queries, app_name=app, timeout=timeout, name="queries")
        stack.push_async_callback(queries.close)
        locks = await pools.open_pool(url, size=budget.thread_locks, app_name=app, timeout=timeout, name="locks")
        stack.push_async_callback(locks.close)
        saver = AsyncPostgresSaver(conn=queries)  # type: ignore[arg-type]
        before, after = await upgrade_schema(queries, saver)
        if before != after:
            log.info("database %s: schema %d -> %d", describe_dsn(url), before, after)
        learned_pool = await asyncio.to_thread(
            pools.open_sync_pool, url, size=budget.learned, app_name=app, timeout=timeout, name="learned"
        )
        stack.push_async_callback(asyncio.to_thread, learned_pool.close)
        store = PostgresBookkeeping(
            queries,
            locks,
            lease_seconds=st.lease_seconds,
            recovery_interval_seconds=st.recovery_interval_seconds,
            replica_id=replica_id,
            heal=[queries, locks, learned_pool],
        )
        log.info(
            "storage: PostgreSQL %s, replica %s: at most %d connections (%d queries, %d thread locks, %d learned;"
            " %d replicas running beside it)",
            describe_dsn(url),
            replica_id,
            budget.total,
            budget.queries,
            budget.thread_locks,
            budget.learned,
            figures["replicas"],
        )
        yield Storage(
            "postgres",
            store,
            saver,
            PostgresLearnedStore(learned_pool),
            {"queries": queries, "thread_locks": locks, "learned": learned_pool},
        )


@asynccontextmanager
async def open_postgres_learned(settings: Any, url: str) -> AsyncIterator[Any]:
    """Only the learned entries in the database (``threadwise learned``), the schema upgraded
    first; two connections, named like a replica's with a budget of 2.

    Raises:
        DatabaseError: the database cannot be used (one line naming why).
    """
    from bot.storage.postgres import pools
    from bot.storage.postgres.learned import PostgresLearnedStore

    timeout = settings.storage.connect_timeout_seconds
    app = f"{pools.APP_PREFIX}2/{new_replica_id()}-learned"[:63]
    conn = await pools.probe(url, app, timeout)
    try:
        await migrations.upgrade(conn)
    finally:
        await conn.close()
    pool = await asyncio.to_thread(pools.open_sync_pool, url, size=2, app_name=app, timeout=timeout, name="learned")
    try:
        yield PostgresLearnedStore(pool)
    finally:
        await asyncio.to_thread(pool.close)


def check_reachable(url: str, timeout: float) -> None:
    """Connect to ``url`` once and hang up (a command's check before its slow start).

    Raises:
        DatabaseError: the connection cannot be made (one line naming why).
    """
    from bot.storage.postgres import pools

    asyncio.run(_check_reachable(url, timeout, pools))


async def _check_reachable(url: str, timeout: float, pools: Any) -> None:
    conn = await pools.probe(url, "threadwise-cli", timeout)
    await conn.close()


def new_replica_id() -> str:
    """``host-pid-random``: this process's name in ``runs.owner`` and its connections' ``application_name``."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
