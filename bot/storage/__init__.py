"""Where the bot keeps its state: one factory, two backends (``[storage] backend``).

- ``sqlite`` (default): the checkpoints in one SQLite file (``AsyncSqliteSaver``) and the
  bookkeeping in another (:class:`bot.store.Bookkeeping`), beside one process.
- ``postgres``: one PostgreSQL database shared by any number of replicas (docs/deploy.md):
  LangGraph's ``AsyncPostgresSaver`` over a psycopg_pool ``AsyncConnectionPool`` and
  :class:`bot.storage.postgres.PgBookkeeping`. The DSN comes only from the environment
  (``THREADWISE_DATABASE_URL``). The schema is created and upgraded at start
  (:mod:`bot.storage.migrations`; also ``threadwise db upgrade``).

Both bookkeeping classes have the methods of :class:`BookkeepingStore`; the service
uses nothing else.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from langgraph.checkpoint.base import BaseCheckpointSaver

from bot.failures import StorageError

log = logging.getLogger(__name__)

DATABASE_URL_ENV = "THREADWISE_DATABASE_URL"


@runtime_checkable
class BookkeepingStore(Protocol):
    """What the ChatService, recovery and admin commands need from the bookkeeping (see
    :class:`bot.store.Bookkeeping` for each method's contract). ``shared`` is True when
    other processes use the same store (replicas): then runs carry leases and recovery
    runs periodically (:func:`bot.service.recovery.watch`)."""

    shared: bool

    async def close(self) -> None: ...
    async def mark_seen(self, message_id: str, thread_key: str, run: Any = None) -> bool: ...
    async def thread_of(self, message_id: str) -> str | None: ...
    async def recent_message_ids(self, seconds: float, limit: int) -> list[str]: ...
    async def has_thread(self, thread_key: str) -> bool: ...
    async def forget_seen_before(self, seconds: float) -> int: ...
    async def open_help_request(
        self,
        thread_key: str,
        platform: str,
        reference: dict[str, Any],
        question: str,
        timeout_seconds: float,
        interrupt_id: str = "",
    ) -> float: ...
    async def claim_help_request(self, thread_key: str, by: str) -> dict[str, Any] | None: ...
    async def open_help_requests(self) -> list[dict[str, Any]]: ...
    async def run_started(
        self,
        run_id: str,
        thread_key: str,
        platform: str,
        reference: dict[str, Any],
        graph_input: dict[str, Any],
        checkpoint_before: str,
    ) -> bool: ...
    async def update_run(
        self, run_id: str, *, reference: dict[str, Any] | None = None, stage: str | None = None
    ) -> None: ...
    async def finish_run(self, run_id: str) -> None: ...
    async def run_in_flight(self, run_id: str) -> bool: ...
    async def unfinished_runs(self) -> list[dict[str, Any]]: ...
    async def renew_leases(self) -> int: ...
    async def wait_turn(self, run_id: str, thread_key: str) -> None: ...
    async def may_post(self, run_id: str) -> bool: ...
    async def holds(self, run_id: str) -> bool: ...
    def thread_lock(self, thread_key: str) -> AbstractAsyncContextManager[None]: ...
    def exclusive(self, name: str) -> AbstractAsyncContextManager[bool]: ...
    async def index_generation(self, name: str = "knowledge") -> str: ...
    async def set_index_generation(self, generation: str, name: str = "knowledge") -> None: ...
    async def claim_interrupt(self, interrupt_id: str, thread_key: str, by: str) -> bool: ...
    async def forget_claims_before(self, seconds: float) -> int: ...
    async def audit(self, actor: str, command: str, allowed: bool, detail: str = "") -> None: ...
    async def audit_rows(self) -> list[tuple]: ...
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
    ) -> None: ...
    async def answer_record(self, answer_id: str) -> dict[str, Any] | None: ...
    async def record_vote(self, answer_id: str, user_id: str, vote: int, reason: str | None = None) -> bool: ...
    async def vote_of(self, answer_id: str, user_id: str) -> dict[str, Any] | None: ...
    async def feedback_rows(self) -> list[dict[str, Any]]: ...


@runtime_checkable
class SharedBookkeepingStore(BookkeepingStore, Protocol):
    """A bookkeeping shared by replicas (``shared`` is True): runs carry leases renewed
    every ``lease_seconds / 3``; the runs of a dead replica are taken over every
    ``recovery_interval_seconds`` (:func:`bot.recovery.watch`)."""

    lease_seconds: float
    recovery_interval_seconds: float


@dataclass
class Storage:
    """An opened backend: ``bookkeeping`` and the LangGraph ``checkpointer``."""

    backend: str
    bookkeeping: BookkeepingStore
    checkpointer: BaseCheckpointSaver
    pool: Any = None  # postgres: the AsyncConnectionPool of checkpointer and bookkeeping


def database_url(env: dict[str, str] | None = None) -> str:
    """The PostgreSQL DSN from ``THREADWISE_DATABASE_URL`` (the variable, the ``.env`` file or a
    secret file: :meth:`bot.config.Secrets.from_env`), or from ``env`` when given.

    Raises:
        StorageError: it is not set (one line saying what to do).
    """
    from bot.config import Secrets

    url = Secrets.from_env(env).database_url
    if not url:
        raise StorageError(
            f'[storage] backend = "postgres" needs {DATABASE_URL_ENV} in the environment '
            "(e.g. postgresql://threadwise@db:5432/threadwise); it is never read from config.toml"
        )
    return url


def describe_dsn(url: str) -> str:
    """``host:port/dbname`` of a DSN, without user or password (for messages and logs)."""
    try:
        from psycopg.conninfo import conninfo_to_dict

        d = conninfo_to_dict(url)
        return f"{d.get('host', 'localhost')}:{d.get('port', 5432)}/{d.get('dbname', '')}"
    except Exception:  # noqa: BLE001
        return "(unparsable THREADWISE_DATABASE_URL)"


async def opened(path: Path, opening: Any) -> Any:
    """Await ``opening`` (opening a SQLite file); a failure becomes a StorageError naming ``path``."""
    try:
        return await opening
    except (OSError, sqlite3.Error) as exc:
        raise StorageError(f"cannot open {path}: {exc}") from exc


@asynccontextmanager
async def open_storage(settings: Any, url: str | None = None) -> AsyncIterator[Storage]:
    """Open the configured backend for the process lifetime (and close it on exit).

    Args:
        settings: :class:`bot.config.Settings` (``[storage]`` and ``[service]`` paths).
        url: the PostgreSQL DSN; default :func:`database_url` (the environment).

    Raises:
        StorageError: a file cannot be opened, THREADWISE_DATABASE_URL is missing, or the
            database cannot be reached within ``storage.connect_timeout_seconds``.
    """
    if settings.storage.backend == "postgres":
        async with _open_postgres(settings, url or database_url()) as storage:
            yield storage
        return
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    from bot import checkpoints
    from bot.store import Bookkeeping

    s = settings.service
    cp_path = settings.path(s.checkpoint_db)
    cp_path.parent.mkdir(parents=True, exist_ok=True)
    store = await opened(settings.path(s.bookkeeping_db), Bookkeeping.open(settings.path(s.bookkeeping_db)))
    try:
        async with AsyncSqliteSaver.from_conn_string(str(cp_path)) as saver:
            await checkpoints.prepare(saver)
            # a read-only or full data folder fails here, at start, not in a run
            await opened(cp_path, saver.setup())
            yield Storage("sqlite", store, saver)
    finally:
        await store.close()


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
        raise StorageError(
            f"cannot reach the database at {describe_dsn(url)}: {type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else ''}"
        ) from exc
    return pool


async def upgrade_schema(pool: Any, checkpointer: Any) -> tuple[int, int]:
    """Create or upgrade the bookkeeping schema and the checkpointer's tables (each once,
    under advisory locks, so replicas may start together). Returns the bookkeeping
    schema's ``(version before, version after)``."""
    from bot.storage import migrations

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
async def _open_postgres(settings: Any, url: str) -> AsyncIterator[Storage]:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    from bot.storage.postgres import PgBookkeeping

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
            store = PgBookkeeping(
                pool, lock_pool, lease_seconds=st.lease_seconds, recovery_interval_seconds=st.recovery_interval_seconds
            )
            log.info("storage: PostgreSQL %s, replica %s", describe_dsn(url), store.replica_id)
            yield Storage("postgres", store, saver, pool)
        finally:
            await lock_pool.close()
    finally:
        await pool.close()
