"""Open the configured backend (``[storage] backend``) for the process lifetime."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from bot.failures import DatabaseError
from bot.storage.base import Storage

if TYPE_CHECKING:
    from graphs.learned import LearnedStore

DATABASE_URL_ENV = "THREADWISE_DATABASE_URL"


def database_url(env: dict[str, str] | None = None) -> str:
    """The PostgreSQL DSN from ``THREADWISE_DATABASE_URL`` (the variable, the ``.env`` file or a
    secret file: :meth:`bot.config.Secrets.from_env`), or from ``env`` when given.

    Raises:
        DatabaseError: it is not set or cannot be parsed, or the driver is not installed (one
            line saying what to do).
    """
    from bot.config import Secrets

    url = Secrets.from_env(env).database_url
    if not url:
        raise DatabaseError(
            f'[storage] backend = "postgres" needs {DATABASE_URL_ENV} in the environment '
            "(e.g. postgresql://threadwise@db:5432/threadwise); it is never read from config.toml"
        )
    try:
        from psycopg.conninfo import conninfo_to_dict
    except ImportError as exc:
        raise DatabaseError(
            '[storage] backend = "postgres" needs the PostgreSQL driver: pip install "threadwise[postgres]"'
        ) from exc
    try:
        conninfo_to_dict(url)
    except Exception as exc:  # noqa: BLE001 - psycopg.ProgrammingError: the URL cannot be parsed
        from bot.storage.postgres.pools import explain_connect_error

        raise DatabaseError(explain_connect_error(exc, url, 0)) from exc
    return url


@asynccontextmanager
async def open_storage(settings: Any, url: str | None = None) -> AsyncIterator[Storage]:
    """Open the configured backend for the process lifetime (and close it on exit).

    Args:
        settings: :class:`bot.config.Settings` (``[storage]`` and the ``[service]`` paths).
        url: the PostgreSQL DSN; default :func:`database_url` (the environment).

    Raises:
        StorageError: a file cannot be opened.
        DatabaseError: THREADWISE_DATABASE_URL is missing or wrong, the database cannot be
            reached within ``storage.connect_timeout_seconds``, or the replica's connection
            budget does not fit the server.
    """
    if settings.storage.backend == "postgres":
        from bot.storage.postgres import open_postgres

        async with open_postgres(settings, url or database_url()) as storage:
            yield storage
        return
    from bot.storage.sqlite import open_sqlite

    async with open_sqlite(settings) as storage:
        yield storage


@asynccontextmanager
async def open_learned(settings: Any, url: str | None = None) -> AsyncIterator[LearnedStore]:
    """Only the learned entries of the configured backend (``threadwise learned``): the
    SQLite file of ``[learning] index_db``, or the shared database's table (with a pool of
    two connections).

    Raises:
        StorageError: the SQLite file cannot be opened.
        DatabaseError: the database cannot be used (one line naming why).
    """
    if settings.storage.backend == "postgres":
        from bot.storage.postgres import open_postgres_learned

        async with open_postgres_learned(settings, url or database_url()) as store:
            yield store
        return
    from bot.storage.sqlite import open_learned as open_sqlite_learned

    yield await open_sqlite_learned(settings)
