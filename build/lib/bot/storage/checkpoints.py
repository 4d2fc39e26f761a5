"""Checkpoint maintenance, whichever LangGraph saver holds the threads.

LangGraph offers no API to list threads or to prune a thread's old checkpoints, so each
backend writes the few statements against its saver's schema
(:mod:`bot.storage.sqlite.checkpoints`, :mod:`bot.storage.postgres.checkpoints`, each
pinned by ``tests/test_storage_conformance.py``); this module picks the one for the saver.

Storage policy: a run's state is saved when it ends or pauses for a human
(``[service] checkpoint_durability = "exit"``, the default) or after every step too
(``"async"``); a crashed run starts again from its input, or continues from its last step
(:mod:`bot.service.recovery`). When a run ends (answer, apology or a pause for a human) only
the newest ``keep`` checkpoints of the thread are kept with their pending writes (the newest
holds the messages and, for a paused run, the interrupt).
"""

from __future__ import annotations

from typing import Any

from bot.storage.postgres import checkpoints as _pg
from bot.storage.sqlite import checkpoints as _sqlite


def _backend(saver: Any) -> Any:
    return _pg if _pg.is_postgres(saver) else _sqlite


async def prepare(saver: Any) -> None:
    """Tune the saver's storage before its tables are created (SQLite: incremental
    auto-vacuum and ``synchronous = NORMAL``; PostgreSQL: nothing). Best effort."""
    if not _pg.is_postgres(saver):
        await _sqlite.prepare(saver)


async def thread_keys(saver: Any, prefix: str = "") -> list[str]:
    """Thread ids with at least one checkpoint, starting with ``prefix``, sorted."""
    return list(await _backend(saver).thread_keys(saver, prefix))


async def prune(saver: Any, thread_key: str, keep: int) -> int:
    """Keep the newest ``keep`` checkpoints of a thread (and the writes they need); returns
    how many were deleted.

    Raises:
        sqlite3.Error, psycopg.Error: the statements failed (a full disk, the database away).
    """
    return int(await _backend(saver).prune(saver, thread_key, keep))


async def latest_checkpoint_id(saver: Any, thread_key: str) -> str:
    """The id of the newest checkpoint of a thread (root namespace), "" if none."""
    return str(await _backend(saver).latest_checkpoint_id(saver, thread_key))


async def thread_bytes(saver: Any, thread_key: str) -> int:
    """Bytes of checkpoint data stored for a thread."""
    return int(await _backend(saver).thread_bytes(saver, thread_key))


def list_threads(settings: Any) -> list[tuple[str, int]]:
    """``(thread_id, checkpoints)`` of the configured backend, read without opening the
    runtime ([] before the first start).

    Raises:
        sqlite3.Error, psycopg.Error: the file or database cannot be read.
        DatabaseError: THREADWISE_DATABASE_URL is unset.
    """
    if settings.storage.backend == "postgres":
        from bot.storage.factory import database_url

        return _pg.list_threads(database_url())
    return [(str(t), int(n)) for t, n in _sqlite.list_threads(settings.path(settings.service.checkpoint_db))]
