"""Open the configured backend (``[storage] backend``) for the process lifetime."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from bot.failures import DatabaseError
from bot.storage.base import Storage

DATABASE_URL_ENV = "THREADWISE_DATABASE_URL"


def database_url(env: dict[str, str] | None = None) -> str:
    """The PostgreSQL DSN from ``THREADWISE_DATABASE_URL`` (the variable, the ``.env`` file or a
    secret file: :meth:`bot.config.Secrets.from_env`), or from ``env`` when given.

    Raises:
        DatabaseError: it is not set (one line saying what to do).
    """
    from bot.config import Secrets

    url = Secrets.from_env(env).database_url
    if not url:
        raise DatabaseError(
            f'[storage] backend = "postgres" needs {DATABASE_URL_ENV} in the environment '
            "(e.g. postgresql://threadwise@db:5432/threadwise); it is never read from config.toml"
        )
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
