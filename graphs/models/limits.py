"""Transport policy of model calls, for every provider: which failures are transient,
how long to wait before a retry (the server's ``Retry-After``, else exponential backoff
with jitter), and how many calls may be in flight (:class:`AdaptiveLimit`, an AIMD
window that follows the server's 429s)."""

from __future__ import annotations

import asyncio
import email.utils
import logging
import math
import time
from collections import deque
from typing import Any

from tenacity import wait_exponential_jitter

log = logging.getLogger("graphs.models")

#: Exception class names of transient transport failures, across the provider SDKs:
#: httpx's (Mistral, Ollama), the openai and anthropic SDKs' (``APIConnectionError``,
#: ``APITimeoutError``), aiohttp's.
TRANSIENT_ERRORS = frozenset(
    {
        "ConnectError",
        "ReadTimeout",
        "ConnectTimeout",
        "RemoteProtocolError",
        "ReadError",
        "PoolTimeout",
        "WriteError",
        "WriteTimeout",
        "APIConnectionError",
        "APITimeoutError",
        "ServerDisconnectedError",
        "ClientConnectorError",
        "ClientOSError",
        # langchain-core's provider-neutral errors (the integrations raise subclasses)
        "ModelConnectionError",
        "ModelTimeoutError",
    }
)


def error_names(exc: BaseException) -> set[str]:
    """The class names of ``exc``'s type and its bases: the integrations wrap the SDKs'
    errors in subclasses (langchain-openai's ``OpenAIConnectionError`` is an
    ``APIConnectionError`` and a ``ModelConnectionError``), and the SDKs are optional."""
    return {cls.__name__ for cls in type(exc).__mro__}


def status_of(exc: BaseException) -> int | None:
    """The HTTP status behind a provider error: ``exc.response.status_code`` (httpx, openai,
    anthropic) or ``exc.status_code`` (ollama's ``ResponseError``); None for other errors."""
    status = getattr(getattr(exc, "response", None), "status_code", None)
    if status is None:
        status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


def is_retryable(exc: BaseException) -> bool:
    """429, 5xx, timeouts and connection errors are retried; other errors are not."""
    status = status_of(exc)
    if status is not None:
        return status == 429 or status >= 500
    return isinstance(exc, (TimeoutError, ConnectionError)) or bool(error_names(exc) & TRANSIENT_ERRORS)


def is_rate_limited(exc: BaseException) -> bool:
    """True when the server refused the call for load: HTTP 429 (or 503 with Retry-After)."""
    status = status_of(exc)
    if status == 429:
        return True
    headers = getattr(getattr(exc, "response", None), "headers", None)
    return status == 503 and headers is not None and bool(headers.get("retry-after"))


class AdaptiveLimit:
    """Calls in flight, capped by an AIMD window that follows what the server accepts.

    The window starts at ``maximum``. A call refused with 429 halves it, once per round:
    refusals of calls that were sent before the last halving do not halve it again (they
    were sent under the old window, as TCP congestion control counts one loss per window);
    each successful call adds ``1 / window`` (about +1 per window of successes), an eighth
    of that while the window is within one call of where the last refusal happened (probing
    slowly where the server said no), up to ``maximum``; never below ``minimum``. Waiters
    are served first come, first served.

    Args:
        maximum: the configured cap (``[models] max_concurrent_calls``), >= 1.
        minimum: the smallest window, >= 1.
    """

    def __init__(self, maximum: int, minimum: int = 1) -> None:
        self.maximum = max(1, int(maximum))
        self.minimum = max(1, min(int(minimum), self.maximum))
        self.window = float(self.maximum)
        self.in_flight = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._last_cut = -math.inf
        self._refused_at = math.inf  # the window when the server last said no

    async def acquire(self) -> float:
        """Wait for a free slot; returns the time it was granted (``time.monotonic()``), to pass
        to :meth:`rate_limited`. Cancellation-safe: a slot granted to a cancelled waiter is given back."""
        if not self._waiters and self.in_flight < int(self.window):
            self.in_flight += 1
            return time.monotonic()
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release()  # granted just before the cancellation
            else:
                try:
                    self._waiters.remove(waiter)
                except ValueError:
                    pass
            raise
        return time.monotonic()

    def release(self) -> None:
        """Give a slot back."""
        self.in_flight -= 1
        self._wake()

    def _wake(self) -> None:
        while self._waiters and self.in_flight < int(self.window):
            waiter = self._waiters.popleft()
            if not waiter.done():
                self.in_flight += 1
                waiter.set_result(None)

    def succeeded(self) -> None:
        """A call was accepted: widen the window a little."""
        if self.window < self.maximum:
            step = 1.0 / self.window if self.window + 1 < self._refused_at else 1.0 / (8 * self.window)
            self.window = min(float(self.maximum), self.window + step)
            self._wake()

    def rate_limited(self, sent_at: float) -> None:
        """A call sent at ``sent_at`` (from :meth:`acquire`) was refused for load (429):
        halve the window, unless it was sent before the last halving."""
        if sent_at <= self._last_cut or self.window <= self.minimum:
            return
        self._last_cut = time.monotonic()
        self._refused_at = self.window
        self.window = max(float(self.minimum), self.window / 2)
        log.warning(
            "model API rate limited: at most %d calls in flight for now (of %d)", int(self.window), self.maximum
        )


def retry_after_seconds(exc: BaseException | None, now: float | None = None) -> float | None:
    """Seconds the server asked us to wait before retrying, from the ``Retry-After`` header
    of the HTTP response behind ``exc`` (or its causes): delay-seconds or an HTTP date
    (RFC 9110 section 10.2.3). None when there is no such header or it cannot be read."""
    seen = 0
    while exc is not None and seen < 5:
        headers = getattr(getattr(exc, "response", None), "headers", None)
        value = headers.get("retry-after") if headers is not None else None
        if value:
            value = str(value).strip()
            try:
                return max(0.0, float(value))
            except ValueError:
                pass
            try:
                when = email.utils.parsedate_to_datetime(value)
            except (TypeError, ValueError, IndexError):
                return None
            if when is None:
                return None
            return max(0.0, when.timestamp() - (time.time() if now is None else now))
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return None


class RetryWait:
    """tenacity wait strategy: the server's ``Retry-After`` when it sent one, else exponential
    backoff with jitter (1 s, 2 s, 4 s ... plus up to 1 s); never more than ``cap`` seconds."""

    def __init__(self, cap: float):
        self.cap = cap
        self.backoff = wait_exponential_jitter(initial=1, max=max(cap, 0.0))

    def __call__(self, retry_state: Any) -> float:
        outcome = retry_state.outcome
        asked = retry_after_seconds(outcome.exception()) if outcome is not None and outcome.failed else None
        wait = asked if asked is not None else self.backoff(retry_state)
        return min(max(wait, 0.0), self.cap)


def log_retry(retry_state: Any) -> None:
    """One log line per retry of a model call: the error and the wait."""
    exc = retry_state.outcome.exception() if retry_state.outcome is not None else None
    log.warning(
        "model call failed (%s), retry %d in %.1f s",
        str(exc)[:200],
        retry_state.attempt_number,
        retry_state.next_action.sleep if retry_state.next_action else 0.0,
    )
