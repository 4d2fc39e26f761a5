"""The SQLite backend: one process (and its graph workers) on local files.

The checkpoints in one file (LangGraph's ``AsyncSqliteSaver``), the bookkeeping in another
(:class:`SqliteBookkeeping`), the learned entries in a third
(:class:`graphs.learned.SqliteLearnedStore`): two connections writing one SQLite file lock
each other, so nothing else shares the checkpoint file. Every file is in WAL mode with a
busy timeout, so graph worker processes may write the checkpoint file beside the chat process.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from bot.failures import StorageError
from bot.storage.base import Storage
from bot.storage.sqlite import checkpoints
from bot.storage.sqlite.bookkeeping import SqliteBookkeeping
from graphs.learned import SqliteLearnedStore

__all__ = ["SqliteBookkeeping", "open_learned", "open_sqlite", "opened"]


async def opened(path: Path, opening: Any) -> Any:
    """Await ``opening`` (opening a SQLite file); a failure becomes a StorageError naming ``path``."""
    try:
        return await opening
    except (OSError, sqlite3.Error) as exc:
        raise StorageError(f"cannot open {path}: {exc}") from exc


async def open_learned(settings: Any) -> SqliteLearnedStore:
    """The learned entries' file of ``[learning] index_db``.

    Raises:
        StorageError: the file cannot be opened (the message names it).
    """
    path = settings.path(settings.learning.index_db)
    return await opened(path, asyncio.to_thread(SqliteLearnedStore, path))


@asynccontextmanager
async def open_sqlite(settings: Any) -> AsyncIterator[Storage]:
    """Open the files of ``[service]`` (created when missing) for the process lifetime.

    Raises:
        StorageError: a file cannot be opened or written (the message names it).
    """
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    s = settings.service
    cp_path = settings.path(s.checkpoint_db)
    cp_path.parent.mkdir(parents=True, exist_ok=True)
    learned = await open_learned(settings)
    store = await opened(settings.path(s.bookkeeping_db), SqliteBookkeeping.open(settings.path(s.bookkeeping_db)))
    try:
        async with AsyncSqliteSaver.from_conn_string(str(cp_path)) as saver:
            await checkpoints.prepare(saver)
            # a read-only or full data folder fails here, at start, not in a run
            await opened(cp_path, saver.setup())
            yield Storage("sqlite", store, saver, learned, {})
    finally:
        await store.close()
