"""What went wrong, in one line: storage (disk full, read-only, missing folder), the model
or search API refusing the key, the network, or something else.

Used by the CLI (one clear line and the exit code) and by the ChatService (the apology
that says the bot cannot save right now, the log line of a failed run).
"""

from __future__ import annotations

import errno
import sqlite3
from collections.abc import Iterator

_NETWORK_ERRNOS = {
    errno.ECONNREFUSED,
    errno.ECONNRESET,
    errno.ETIMEDOUT,
    errno.EHOSTUNREACH,
    errno.ENETUNREACH,
    errno.ECONNABORTED,
    errno.EPIPE,
}
_STORAGE_ERRNOS = {
    errno.ENOSPC,
    errno.EROFS,
    errno.EACCES,
    errno.EPERM,
    errno.ENOTDIR,
    errno.ENOENT,
    errno.EISDIR,
    errno.EIO,
    errno.EDQUOT,
    errno.EFBIG,
    errno.EEXIST,
}
_STORAGE_WORDS = (
    "disk is full",
    "database or disk is full",
    "readonly database",
    "read-only",
    "unable to open",
    "disk i/o error",
    "no space left",
)


class StorageError(RuntimeError):
    """A data file could not be opened or written; the message names the file and the cause."""


class DatabaseError(StorageError):
    """The PostgreSQL database cannot be used as configured (THREADWISE_DATABASE_URL unset or
    malformed, host unknown, port closed, database missing, login refused, or the replica's
    connection budget does not fit the server); the message is one line naming the cause and
    the setting to change. Commands report it as a configuration error (exit code 2)."""


class RemoteFailure(RuntimeError):
    """A failure in another process of the bot (a graph worker, :mod:`bot.graph_worker`), as
    :func:`failure_kind` and :func:`describe_failure` saw it there: an exception's causes
    do not survive pickling, and the kind is read from them.

    Args:
        kind: ``"storage"``, ``"auth"``, ``"network"`` or ``"other"``.
        description: the one line of :func:`describe_failure`.
    """

    def __init__(self, kind: str, description: str) -> None:
        super().__init__(description)
        self.kind = kind
        self.description = description

    def __reduce__(self) -> tuple[type, tuple[str, str]]:
        return RemoteFailure, (self.kind, self.description)

    @classmethod
    def of(cls, exc: BaseException) -> RemoteFailure:
        """``exc`` described here, to be raised in another process."""
        return exc if isinstance(exc, RemoteFailure) else cls(failure_kind(exc), describe_failure(exc))


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    todo = [exc]
    while todo:
        e = todo.pop(0)
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        todo += [e.__cause__, e.__context__]  # type: ignore[list-item]
        todo += list(getattr(e, "exceptions", []) or [])  # ExceptionGroup


def _status_code(exc: BaseException) -> int | None:
    resp = getattr(exc, "response", None)
    code = getattr(resp, "status_code", None) or getattr(resp, "status", None) or getattr(exc, "status_code", None)
    if code is None:
        code = getattr(exc, "status", None)
    try:
        return int(code) if code is not None else None
    except (TypeError, ValueError):
        return None


#: Base classes of the HTTP clients' transport failures (httpx, httpcore, aiohttp): a cut
#: response body or a server that hung up is the network's fault like a refused connection.
_TRANSPORT_BASES = frozenset(
    {"TransportError", "NetworkError", "ProtocolError", "ProxyError", "ClientConnectionError", "ClientPayloadError"}
)


def failure_kind(exc: BaseException) -> str:
    """``"storage"``, ``"auth"``, ``"network"`` or ``"other"`` for an exception (its causes
    included: the first one that says more than "other" wins, storage first)."""
    for e in _chain(exc):  # outermost first: the library's own classification wins
        if isinstance(e, RemoteFailure):
            return e.kind
        kind = _kind_of(e)
        if kind != "other":
            return kind
    return "other"


def _kind_of(e: BaseException) -> str:
    name = type(e).__name__
    module = type(e).__module__ or ""
    text = str(e).lower()
    if isinstance(e, (StorageError, sqlite3.Error)) or module.startswith(("sqlite3", "aiosqlite", "psycopg")):
        return "storage"
    code = _status_code(e)
    if code in (401, 403):
        return "auth"
    if "unauthorized" in text or "invalid api key" in text:
        return "auth"
    if module.startswith(("httpx", "httpcore", "aiohttp")) and (
        "connect" in name.lower()
        or "timeout" in name.lower()
        or "network" in name.lower()
        or any(c.__name__ in _TRANSPORT_BASES for c in type(e).__mro__)
    ):
        return "network"
    if isinstance(e, (ConnectionError, TimeoutError)):
        return "network"
    if isinstance(e, OSError):
        if e.errno in _NETWORK_ERRNOS or "name or service not known" in text or "temporary failure" in text:
            return "network"
        if e.errno in _STORAGE_ERRNOS:
            return "storage"
        return "other"
    if any(w in text for w in _STORAGE_WORDS):
        return "storage"
    return "other"


def database_error(exc: BaseException) -> DatabaseError | None:
    """The :class:`DatabaseError` behind ``exc`` (itself, a cause, or one in a group), or None."""
    return next((e for e in _chain(exc) if isinstance(e, DatabaseError)), None)


def _root(exc: BaseException, kind: str) -> BaseException:
    for e in _chain(exc):
        if _kind_of(e) == kind:
            return e
    return exc


def describe_failure(exc: BaseException) -> str:
    """One line naming the real cause, e.g. ``storage: [Errno 28] No space left on device:
    'data/x.sqlite'`` or ``network: ConnectError: [Errno 111] Connection refused``.
    Never contains a traceback; messages are cut at 300 characters."""
    if isinstance(exc, RemoteFailure):
        return exc.description
    kind = failure_kind(exc)
    e = _root(exc, kind)
    msg = str(e) or repr(e)
    if isinstance(e, OSError) and e.filename and str(e.filename) not in msg:
        msg = f"{msg}: {e.filename}"
    return f"{kind}: {type(e).__name__}: {msg[:300]}"


def advice(kind: str) -> str:
    """What the user can do about a failure of ``kind`` (one sentence)."""
    return {
        "storage": "The data folder cannot be written (full, read-only or missing): free space or fix its "
        "permissions, or point [service] data_dir in config.toml elsewhere.",
        # whichever provider [models] names: `threadwise models check` says which key and URL it uses
        "auth": "An API refused its key: check the chat model's key or TAVILY_API_KEY "
        "(`threadwise models check` names the model, its key variable and base URL).",
        "network": "The model or search API could not be reached: check the network and [models] base_url "
        "(`threadwise models check` tries the model).",
    }.get(kind, "")
