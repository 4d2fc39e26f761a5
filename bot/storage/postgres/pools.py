"""Connections to PostgreSQL: one budget per replica, pools that heal after an outage, and a
wrong THREADWISE_DATABASE_URL named in one line.

**The budget.** ``[storage] max_connections`` caps every connection one replica opens, split
by :class:`ConnectionBudget` among its pools. Each connection carries the
``application_name`` ``threadwise/<budget>/<replica id>`` (:func:`application_name`), so the
server itself tells which replicas run and what each may open: at start
:func:`check_capacity` adds the budgets of the running replicas, the other clients'
connections and the reserved slots to this replica's budget, and refuses to start when the
sum exceeds the server's ``max_connections`` (one line naming the setting), instead of
failing later, mid-question, with "too many clients".

**Healing.** psycopg_pool replaces a broken connection in the background, retrying with an
exponential backoff that has no ceiling below ``reconnect_timeout`` (5 minutes): after an
outage of a minute, the replacement's next try may be a minute away while the pool counts the
slot as taken, so questions wait for it and end in ``PoolTimeout``. And the idle connections
the server cut stay in the pool until a checkout finds them one by one, each failed check
followed by a backoff pause, so the first question after the outage spends its whole timeout
discarding dead connections. :class:`HealingPool` caps the backoff at a second and, when a
checkout finds one dead connection, checks all the idle ones at once
(``AsyncConnectionPool.check()``), so the next checkout gets a fresh connection. The
psycopg_pool behaviour is in ``psycopg_pool/pool_async.py`` (``_add_connection``,
``getconn``); the test is ``tests/test_postgres_outage.py``.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection, Connection
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool, ConnectionPool
from psycopg_pool.base import AttemptWithBackoff

from bot.failures import DatabaseError

log = logging.getLogger(__name__)

#: ``application_name`` prefix of every connection of a replica (and of nothing else).
APP_PREFIX = "threadwise/"

#: Longest pause between two attempts to replace a lost connection, in seconds.
MAX_RETRY_DELAY = 1.0


@dataclass(frozen=True)
class ConnectionBudget:
    """How one replica's ``[storage] max_connections`` is shared among its pools.

    Attributes:
        total: the setting; never exceeded (the pools' ``max_size`` add up to it).
        learned: the learned entries' pool (searched from the graph's worker threads).
        queries: checkpoints and bookkeeping statements (each held for milliseconds).
        thread_locks: one connection per thread whose graph runs, holding its advisory lock:
            at most this many threads run at once on the replica.
    """

    total: int
    learned: int
    queries: int
    thread_locks: int

    @classmethod
    def of(cls, total: int) -> ConnectionBudget:
        """Split ``total`` (at least 6): 2 for the learned entries, a third of the rest (at
        least 2) for queries, the others for thread locks."""
        if total < 6:
            raise ValueError(f"a replica needs at least 6 connections, not {total}")
        learned = 2
        queries = max(2, (total - learned) // 3)
        return cls(total, learned, queries, total - learned - queries)


def application_name(budget: ConnectionBudget, replica_id: str) -> str:
    """``threadwise/<total>/<replica id>``, cut to PostgreSQL's 63 bytes."""
    return f"{APP_PREFIX}{budget.total}/{replica_id}".encode()[:63].decode("utf-8", "ignore")


def describe_dsn(url: str) -> str:
    """``host:port/dbname`` of a DSN, without user or password (for messages and logs)."""
    try:
        from psycopg.conninfo import conninfo_to_dict

        d = conninfo_to_dict(url)
        return f"{d.get('host', 'localhost')}:{d.get('port', 5432)}/{d.get('dbname', '')}"
    except Exception:  # noqa: BLE001
        return "(unparsable THREADWISE_DATABASE_URL)"


def explain_connect_error(exc: BaseException, url: str, timeout: float) -> str:
    """One line naming why a connection to ``url`` failed: a malformed URL, an unknown host,
    a closed port, no answer in time, a missing database, a refused login, or (otherwise)
    the server's own first line. Never contains the password."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        parts = conninfo_to_dict(url)
    except Exception as parse_error:  # noqa: BLE001
        first = str(parse_error).splitlines()[0] if str(parse_error) else type(parse_error).__name__
        return f"THREADWISE_DATABASE_URL is not a PostgreSQL URL ({first}); expected postgresql://user@host:5432/dbname"
    host, port, db = parts.get("host", "localhost"), parts.get("port", 5432), parts.get("dbname", "")
    text = str(exc)
    low = text.lower()
    where = f"{host}:{port}"
    if "resolve host" in low or "translate host name" in low or "name or service not known" in low:
        return f"THREADWISE_DATABASE_URL names host {host!r}, which does not resolve (unknown host)"
    if "connection refused" in low:
        return (
            f"nothing accepts connections at {where} (connection refused): is PostgreSQL running there, on that port?"
        )
    if "timeout expired" in low or isinstance(exc, TimeoutError):
        return f"no answer from {where} within {timeout:g} s (connect timeout): a firewall, or the wrong host?"
    if "does not exist" in low and "database" in low:
        return f'database "{db}" does not exist on {where}: create it (createdb {db}) or fix THREADWISE_DATABASE_URL'
    if "authentication failed" in low or "pg_hba.conf" in low or ("role" in low and "does not exist" in low):
        line = next((x for x in text.splitlines() if "FATAL" in x or "failed" in x), text.splitlines()[0])
        return f"the server at {where} refused the login: {line.strip()}"
    if "not currently accepting connections" in low:
        return f'database "{db}" on {where} is not accepting connections right now'
    first = text.splitlines()[0] if text else type(exc).__name__
    return f"cannot connect to {where}/{db}: {type(exc).__name__}: {first}"


class _CappedBackoff(AttemptWithBackoff):
    """psycopg_pool's reconnection backoff, at most :data:`MAX_RETRY_DELAY` between tries."""

    def update_delay(self, now: float) -> None:
        super().update_delay(now)
        self.delay = min(self.delay, MAX_RETRY_DELAY)


def _connection_kwargs(app_name: str, timeout: float) -> dict[str, Any]:
    # autocommit, no prepared statements and dict rows: what AsyncPostgresSaver needs
    return {
        "autocommit": True,
        "prepare_threshold": 0,
        "row_factory": dict_row,
        "connect_timeout": max(1, int(timeout)),
        "application_name": app_name,
    }


class HealingPool(AsyncConnectionPool):
    """An ``AsyncConnectionPool`` that recovers from an outage before the next question (see
    the module docstring): capped reconnection backoff, and one dead connection found at
    checkout makes the pool check all its idle ones."""

    def __init__(self, conninfo: str, **kwargs: Any) -> None:
        self._purging: asyncio.Task[None] | None = None
        super().__init__(conninfo, check=self._check, **kwargs)

    async def _check(self, conn: AsyncConnection[Any]) -> None:
        try:
            await AsyncConnectionPool.check_connection(conn)
        except Exception:
            if self._purging is None or self._purging.done():
                self._purging = asyncio.create_task(self.check(), name=f"{self.name}: check idle connections")
            raise

    async def _add_connection(self, attempt: AttemptWithBackoff | None, growing: bool = False) -> None:
        await super()._add_connection(attempt or _CappedBackoff(timeout=self.reconnect_timeout), growing)

    async def close(self, timeout: float = 5.0) -> None:
        if self._purging is not None:
            self._purging.cancel()
        await super().close(timeout)


class HealingSyncPool(ConnectionPool):
    """:class:`HealingPool` for threads (the learned entries are read from worker threads)."""

    def __init__(self, conninfo: str, **kwargs: Any) -> None:
        self._purging = False
        super().__init__(conninfo, check=self._check, **kwargs)

    def _check(self, conn: Connection[Any]) -> None:
        try:
            ConnectionPool.check_connection(conn)
        except Exception:
            if not self._purging:
                self._purging = True
                try:
                    self.check()
                finally:
                    self._purging = False
            raise

    def _add_connection(self, attempt: AttemptWithBackoff | None, growing: bool = False) -> None:
        super()._add_connection(attempt or _CappedBackoff(timeout=self.reconnect_timeout), growing)


async def probe(url: str, app_name: str, timeout: float) -> AsyncConnection[Any]:
    """One connection to ``url`` (the caller closes it).

    Raises:
        DatabaseError: it cannot be made; the message names why
            (:func:`explain_connect_error`).
    """
    try:
        return await asyncio.wait_for(
            AsyncConnection.connect(url, **_connection_kwargs(app_name, timeout)), timeout=timeout + 1
        )
    except Exception as exc:  # noqa: BLE001 - psycopg.Error, ProgrammingError of a bad URL, timeouts
        raise DatabaseError(explain_connect_error(exc, url, timeout)) from exc


async def check_capacity(conn: AsyncConnection[Any], budget: ConnectionBudget, url: str) -> dict[str, int]:
    """Refuse to start a replica whose budget does not fit the server beside the others.

    Needed: this budget + the budgets of the replicas connected now (from their
    ``application_name``) + the other clients' connections + the slots reserved for
    superusers ``<= max_connections``.

    Returns:
        The figures: ``max_connections``, ``reserved``, ``replicas``, ``claimed``, ``others``.

    Raises:
        DatabaseError: it does not fit (one line naming ``[storage] max_connections``).
    """
    row = await (
        await conn.execute(
            "SELECT current_setting('max_connections')::int AS max_connections,"
            " current_setting('superuser_reserved_connections')::int"
            " + COALESCE(NULLIF(current_setting('reserved_connections', true), '')::int, 0) AS reserved,"
            " (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'"
            "  AND pid <> pg_backend_pid() AND COALESCE(application_name, '') NOT LIKE %s) AS others,"
            " (SELECT COALESCE(array_agg(DISTINCT application_name), '{}') FROM pg_stat_activity"
            "  WHERE application_name LIKE %s AND pid <> pg_backend_pid()) AS names",
            (APP_PREFIX + "%", APP_PREFIX + "%"),
        )
    ).fetchone()
    assert row is not None  # one row, always
    claimed = 0
    for name in row["names"]:
        try:
            claimed += int(name.split("/")[1])
        except (IndexError, ValueError):
            continue
    figures = {
        "max_connections": int(row["max_connections"]),
        "reserved": int(row["reserved"]),
        "replicas": len(row["names"]),
        "claimed": claimed,
        "others": int(row["others"]),
    }
    free = figures["max_connections"] - figures["reserved"] - claimed - figures["others"]
    if budget.total > free:
        raise DatabaseError(
            f"[storage] max_connections = {budget.total} does not fit the server at {describe_dsn(url)}: it allows "
            f"{figures['max_connections']} connections ({figures['reserved']} reserved), {len(row['names'])} running "
            f"replicas may use {claimed} and other clients use {figures['others']}, leaving {max(0, free)}; lower "
            "[storage] max_connections or raise the server's max_connections"
        )
    return figures


async def open_pool(url: str, *, size: int, app_name: str, timeout: float, name: str) -> HealingPool:
    """A :class:`HealingPool` of at most ``size`` connections, one opened now.

    Raises:
        DatabaseError: the database cannot be reached within ``timeout`` seconds.
    """
    pool = HealingPool(
        url,
        min_size=1,
        max_size=size,
        open=False,
        name=name,
        timeout=timeout,
        kwargs=_connection_kwargs(app_name, timeout),
    )
    try:
        await pool.open(wait=True, timeout=timeout)
    except Exception as exc:
        await pool.close()
        raise DatabaseError(explain_connect_error(exc, url, timeout)) from exc
    return pool


def open_sync_pool(url: str, *, size: int, app_name: str, timeout: float, name: str) -> HealingSyncPool:
    """:func:`open_pool` for threads (call it from a worker thread: it blocks).

    Raises:
        DatabaseError: the database cannot be reached within ``timeout`` seconds.
    """
    pool = HealingSyncPool(
        url,
        min_size=1,
        max_size=size,
        open=False,
        name=name,
        timeout=timeout,
        kwargs=_connection_kwargs(app_name, timeout),
    )
    try:
        pool.open(wait=True, timeout=timeout)
    except Exception as exc:
        pool.close()
        raise DatabaseError(explain_connect_error(exc, url, timeout)) from exc
    return pool
