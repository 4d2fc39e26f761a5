"""Reaching the configured models: one structured call to the chat model and one embedding,
timed, each failure told in one line with its cause (``threadwise models check``; the start
of ``threadwise run`` makes the chat call too, so a wrong key, base URL or model name stops
it at once instead of at the first question)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from langchain_core.embeddings import Embeddings
from langchain_core.language_models.chat_models import BaseChatModel
from pydantic import BaseModel

from graphs.models.caller import ModelCaller
from graphs.models.errors import ModelRefusedError, ModelUnavailableError, RetryableError
from graphs.models.limits import TRANSIENT_ERRORS, error_names, status_of
from graphs.models.providers import PROVIDERS, model_name, provider_of

#: The check's system prompt (``TASK: check``: fakes and logs tell it from the graph's calls).
CHECK_SYSTEM = 'TASK: check\nReply with only this JSON object: {"ok": true}'


class Ping(BaseModel):
    """The check's structured reply."""

    ok: bool


@dataclass(frozen=True)
class Probe:
    """One model reached, or not.

    Attributes:
        part: ``chat model`` or ``embeddings``.
        name: ``provider:model``.
        ok: it answered as asked.
        seconds: how long the call took.
        detail: what it answered (the structured-output method, the vector size), or the
            cause of the failure, one line.
        fatal: the failure cannot go away by itself (a key, URL or model name is wrong).
    """

    part: str
    name: str
    ok: bool
    seconds: float
    detail: str
    fatal: bool = False

    def line(self) -> str:
        state = "ok" if self.ok else "FAILED"
        return f"{self.part} {self.name}: {state}, {self.detail} ({self.seconds:.2f} s)"


def _root(exc: BaseException) -> BaseException:
    """The provider's own error behind our retry wrapper."""
    while isinstance(exc, RetryableError) and exc.__cause__ is not None:
        exc = exc.__cause__
    return exc


def explain(exc: BaseException, name: str, base_url: str = "", key_names: tuple[str, ...] = ()) -> tuple[str, bool]:
    """``(one line naming the cause, fatal)`` for a failed call to model ``name``.

    Fatal: HTTP 401/403 (the key), 404 (the model name or base URL), 400 naming the model,
    a connection refused or a host not found (the base URL). Not fatal: 429, 5xx, timeouts
    (the provider is busy or slow: it may pass).
    """
    exc = _root(exc)
    status = status_of(exc)
    where = f" at {base_url}" if base_url else ""
    # the library's own sentence ends in a full stop ("Connection error."): dropped once
    # here, where it is followed by our ": check ..."
    text = " ".join(str(exc).split())[:200].rstrip(" .:;,")
    keys = " or ".join(key_names) or "the provider's API key"
    if isinstance(exc, ModelUnavailableError):
        return str(exc), True
    if isinstance(exc, ModelRefusedError):
        return f"{exc}", False
    if status in (401, 403):
        return f"the API key was refused (HTTP {status}){where}: check {keys}", True
    if status == 404:
        return (
            f"not found (HTTP 404){where}: check the model name {name.partition(':')[2]!r}"
            f"{' and base_url' if base_url else ''} ({text})"
        ), True
    if status == 400 and "model" in text.lower():
        return f"the model was refused (HTTP 400){where}: {text}", True
    if status is not None:
        return f"HTTP {status}{where}: {text}", status not in (408, 409, 429) and status < 500
    kind = type(exc).__name__
    names = error_names(exc)
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError)) or any("Timeout" in n for n in names):
        return f"no answer in time{where} (timeout)", False
    if isinstance(exc, ConnectionError) or names & TRANSIENT_ERRORS:
        return f"cannot connect{where or ' to the provider'}: {text or kind}: check base_url", True
    return f"{kind}: {text}", False


async def probe_chat(
    model: BaseChatModel, *, timeout: float = 30.0, structured: bool = True, base_url: str = "", method: str = "auto"
) -> Probe:
    """One call to ``model`` (a structured call when ``structured``, else a short text
    call), no retries, within ``timeout`` seconds."""
    name = model_name(model)
    provider = provider_of(model)
    keys = PROVIDERS[provider].keys if provider in PROVIDERS else ()
    caller = ModelCaller(model, method, max_concurrent=1, max_retries=0, timeout=timeout, max_tokens=64)
    started = time.perf_counter()
    try:
        if structured:
            default = Ping(ok=False)
            value, _ = await caller.structured(CHECK_SYSTEM, "Reply now.", Ping, default)
            took = time.perf_counter() - started
            if value is default:
                return Probe(
                    "chat model",
                    name,
                    False,
                    took,
                    f"answered, but not with valid JSON by {caller.json_mode} (try [models] structured_output)",
                )
            return Probe("chat model", name, True, took, f"structured output by {caller.json_mode}")
        await caller.text(CHECK_SYSTEM, "Reply now.")
        return Probe("chat model", name, True, time.perf_counter() - started, "answered")
    except Exception as exc:  # noqa: BLE001 - told in one line
        detail, fatal = explain(exc, name, base_url, keys)
        return Probe("chat model", name, False, time.perf_counter() - started, detail, fatal)


async def probe_embeddings(
    embeddings: Embeddings | None, embedder_id: str, *, timeout: float = 30.0, base_url: str = ""
) -> Probe:
    """One query embedding within ``timeout`` seconds (``none``: keyword search only, ok)."""
    if embeddings is None:
        return Probe("embeddings", embedder_id, True, 0.0, "none: keyword search only")
    started = time.perf_counter()
    provider = embedder_id.partition(":")[0]
    keys = PROVIDERS[provider].keys if provider in PROVIDERS else ()
    try:
        vector: Any = await asyncio.wait_for(asyncio.to_thread(embeddings.embed_query, "ping"), timeout)
        return Probe("embeddings", embedder_id, True, time.perf_counter() - started, f"{len(vector)} dimensions")
    except Exception as exc:  # noqa: BLE001 - told in one line
        detail, fatal = explain(exc, embedder_id, base_url, keys)
        return Probe("embeddings", embedder_id, False, time.perf_counter() - started, detail, fatal)
