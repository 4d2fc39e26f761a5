"""Logging: one line per event, as text or as one JSON object per line, with the turn's
thread key, platform and message id on every line logged inside a turn.

The fields come from a :mod:`contextvars` context (:func:`log_context`), set where a turn
starts (:meth:`bot.service.ChatService.handle`, ``ask``, resumes, recovery); asyncio copies
the context into the tasks a turn starts, so every line logged on the way (the graph, the
model caller, the adapters' responders) carries them without passing the key around. A
line logged where no turn may be set names its thread with ``extra=for_thread(key)``.

Formats (``[logging] format`` in config.toml, or ``--log-format``):

- ``text``: ``2026-01-02 03:04:05,678 INFO bot.service: [slack:T1:C1:1.2] question from U1``;
- ``json``: ``{"time": "2026-01-02T03:04:05.678Z", "level": "INFO", "logger": "bot.service",
  "message": "question from U1", "thread_key": "slack:T1:C1:1.2", "platform": "slack",
  "message_id": "slack:C1:1.2"}``, plus ``"exception"`` (the traceback) when one is logged.

Messages never hold secrets or documents (docs/architecture.md); the JSON formatter adds
no other field of the record, so whatever a library attaches to it stays out, and the
libraries' DEBUG lines (request bodies, gateway frames) are dropped even with ``-v``
(:class:`LibraryDebugFilter`).
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import json
import logging
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Literal, TypeVar

LogFormat = Literal["text", "json"]

#: The fields a turn puts on its log lines, in the order they are written.
FIELDS = ("thread_key", "platform", "message_id")

# the fields are never changed in place: a new dict is set for each context
_context: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar("threadwise_log_context", default=None)


@contextmanager
def log_context(**fields: str | None) -> Iterator[dict[str, str]]:
    """Put ``fields`` (``thread_key``, ``platform``, ``message_id``; None or "" leave a
    field as it was) on every log line written inside the ``with`` block, in this task
    and the tasks it starts. Nested blocks add to the outer one, unless they name another
    thread (then the outer fields are not this thread's). Yields the merged fields."""
    given = {k: str(v) for k, v in fields.items() if v}
    outer = _context.get() or {}
    if given.get("thread_key", outer.get("thread_key")) != outer.get("thread_key"):
        outer = {}
    merged = {**outer, **given}
    token = _context.set(merged)
    try:
        yield merged
    finally:
        _context.reset(token)


F = TypeVar("F", bound=Callable[..., Any])


def _lookup(arguments: dict[str, Any], path: str) -> str:
    name, _, rest = path.partition(".")
    value: Any = arguments.get(name)
    for part in rest.split(".") if rest else ():
        value = value.get(part) if isinstance(value, dict) else getattr(value, part, None)
    return "" if value is None else str(value)


def with_log_context(**paths: str) -> Callable[[F], F]:
    """Decorate a coroutine function so that its body runs in :func:`log_context`, the
    fields read from its arguments: ``@with_log_context(thread_key="msg.thread_key")``
    (an argument name, then attributes or dict keys). Missing values leave the field as
    the caller's context has it."""

    def decorate(fn: F) -> F:
        signature = inspect.signature(fn)

        @functools.wraps(fn)
        async def wrapper(*args: Any, **kwargs: Any) -> Any:
            bound = signature.bind_partial(*args, **kwargs)
            bound.apply_defaults()
            fields = {field: _lookup(bound.arguments, path) for field, path in paths.items()}
            with log_context(**fields):
                return await fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate


def for_thread(thread_key: str) -> dict[str, str]:
    """``extra`` naming a log line's thread where no :func:`log_context` may be set:
    ``log.info("help request timed out", extra=for_thread(key))``."""
    return {"thread_key": thread_key}


def current() -> dict[str, str]:
    """The fields of the turn being handled (``{}`` outside a turn)."""
    return dict(_context.get() or {})


class ContextFilter(logging.Filter):
    """Copies the current :func:`log_context` onto each record as attributes
    (``record.thread_key``...), unless the call gave them in ``extra``. Never drops a record."""

    def filter(self, record: logging.LogRecord) -> bool:
        ctx = _context.get() or {}
        for name in FIELDS:
            if not getattr(record, name, None):
                setattr(record, name, ctx.get(name, ""))
        return True


class TextFormatter(logging.Formatter):
    """``time LEVEL logger: [thread key] message``; the bracket only when the line has a thread."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(thread_prefix)s%(message)s")

    def formatMessage(self, record: logging.LogRecord) -> str:
        key = getattr(record, "thread_key", "")
        record.thread_prefix = f"[{key}] " if key else ""
        return super().formatMessage(record)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``time`` (UTC, ISO 8601 with milliseconds), ``level``,
    ``logger``, ``message``, the :data:`FIELDS` that are set, and ``exception`` (the
    formatted traceback) when the record carries one. Non-ASCII text is kept as is."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, str] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in FIELDS:
            value = getattr(record, name, "")
            if value:
                out[name] = str(value)
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        elif record.stack_info:
            out["exception"] = self.formatStack(record.stack_info)
        return json.dumps(out, ensure_ascii=False)


#: Our own loggers: the only ones whose DEBUG lines are written (``-v``).
OWN_LOGGERS = ("bot", "graphs", "threadwise")


class LibraryDebugFilter(logging.Filter):
    """Drops the libraries' DEBUG lines, keeps ours. With ``-v`` the libraries dump what they
    send and receive at DEBUG: slack_sdk's request bodies and Socket Mode frames, discord.py's
    gateway events and REST payloads, the model clients' request options, aiosqlite's
    statements with their parameters, so message, document and answer text. Our own DEBUG
    lines name events, never that text; the libraries' INFO and higher lines pass."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.INFO:
            return True
        name = record.name
        return any(name == own or name.startswith(own + ".") for own in OWN_LOGGERS)


def setup_logging(level: str, fmt: LogFormat = "text", stream=None) -> logging.Handler:
    """Send every log record of the process to ``stream`` (default stderr) at ``level``
    (``DEBUG``, ``INFO``...) in format ``fmt``, replacing the root logger's handlers.
    Returns the handler (tests remove it)."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.addFilter(LibraryDebugFilter())
    handler.addFilter(ContextFilter())
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    quiet_libraries(level)
    return handler


#: Libraries whose INFO lines are chatter, not events (httpx: a line per model request).
NOISY_LIBRARIES = ("httpx", "httpcore", "sentence_transformers", "urllib3", "aiosqlite", "discord.gateway")


def quiet_libraries(level: str) -> None:
    """Keep the libraries' own chatter out of the log, in every process of the bot (the chat
    process and its graph workers alike): :data:`NOISY_LIBRARIES` at WARNING; psycopg's pool
    at ERROR (a warning per reconnect attempt while the database is away: recovery says it
    once); langchain-mistralai silent below DEBUG (a full traceback per failed request: the
    model caller's error line says it once)."""
    for noisy in NOISY_LIBRARIES:
        logging.getLogger(noisy).setLevel(logging.WARNING)
    logging.getLogger("psycopg.pool").setLevel(logging.ERROR)
    logging.getLogger("langchain_mistralai").setLevel(logging.NOTSET if level == "DEBUG" else logging.CRITICAL)
