"""The one way the graph calls a chat model: :class:`ModelCaller`.

Every message list is made valid for the provider's rules
(:func:`graphs.models.messages.normalize_messages`); calls in flight are capped (an
:class:`~graphs.models.limits.AdaptiveLimit` for a model behind an API, one at a time for
the in-process offline model); 429/5xx/connection errors are retried (the 429's
``Retry-After`` honoured, else exponential backoff with jitter; tenacity) within a timeout
per call; a reply cut at ``max_tokens`` is asked for again with twice the room; a refusal
or content filter raises :class:`~graphs.models.errors.ModelRefusedError` (the run ends in
the apology); structured output uses the provider's best method
(:mod:`graphs.models.structured`), validated by pydantic, retried once, then a safe default.
Token usage (LangChain's ``usage_metadata``) comes back with the call count (:class:`Calls`).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt

from graphs import prompts
from graphs.models.errors import ModelRefusedError, RetryableError
from graphs.models.limits import AdaptiveLimit, RetryWait, error_names, is_rate_limited, is_retryable, log_retry
from graphs.models.messages import content_text, cut_at_max_tokens, mark_cut_short, normalize_messages, refusal_of
from graphs.models.providers import OFFLINE, PROVIDERS, model_name, provider_of
from graphs.models.structured import MethodLadder, bind_structured, raw_text, read_structured, refused_method

log = logging.getLogger("graphs.models")
T = TypeVar("T", bound=BaseModel)

#: The openai SDK's errors for a structured reply cut at max_tokens or stopped by the
#: content filter (raised by its ``parse``, which langchain-openai uses whenever a
#: response format is set), by class name: the SDK is an optional extra.
_CUT_ERRORS = frozenset({"LengthFinishReasonError"})
#: ... and for a refusal: the SDK's content filter, langchain-core's ``ModelRefusalError``.
_FILTER_ERRORS = frozenset({"ContentFilterFinishReasonError", "ModelRefusalError"})


class Calls(int):
    """A number of LLM calls that carries their token usage: ``input_tokens`` and
    ``output_tokens`` as the provider counted them (LangChain's ``usage_metadata``; 0 when
    the provider reports none). Adds like an int, summing the tokens too, so the graph's
    ``(value, calls)`` results keep their shape."""

    input_tokens: int
    output_tokens: int

    def __new__(cls, n: int = 0, input_tokens: int = 0, output_tokens: int = 0) -> Calls:
        obj = super().__new__(cls, n)
        obj.input_tokens = int(input_tokens)
        obj.output_tokens = int(output_tokens)
        return obj

    def __add__(self, other: Any) -> Calls:
        return Calls(
            int(self) + int(other),
            self.input_tokens + int(getattr(other, "input_tokens", 0)),
            self.output_tokens + int(getattr(other, "output_tokens", 0)),
        )

    __radd__ = __add__

    def with_reply(self, reply: BaseMessage | None) -> Calls:
        """One more call, with the usage of ``reply``."""
        usage = getattr(reply, "usage_metadata", None) or {}
        return self + Calls(1, usage.get("input_tokens", 0) or 0, usage.get("output_tokens", 0) or 0)

    def __repr__(self) -> str:
        return f"Calls({int(self)}, input_tokens={self.input_tokens}, output_tokens={self.output_tokens})"


async def _in_daemon_thread(fn: Callable[..., Any], *args: Any) -> Any:
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


def structured_methods(model: BaseChatModel, configured: str = "auto") -> tuple[str, ...]:
    """The structured-output methods to use for ``model``, best first: ``configured``
    alone when it is not ``auto``; else the provider's list
    (:attr:`graphs.models.providers.Provider.structured`) and ``prompt`` as the last resort;
    ``llamacpp`` for the offline model; ``prompt`` for a model of unknown kind."""
    provider = provider_of(model)
    if provider == OFFLINE:
        return ("llamacpp",)
    if configured != "auto":
        return (configured,)
    rules = PROVIDERS.get(provider)
    return (*rules.structured, "prompt") if rules else ("prompt",)


class ModelCaller:
    """How the graph calls the chat model.

    Args:
        model: any LangChain chat model.
        json_mode: structured-output method: ``"auto"`` (the provider's best,
            :func:`structured_methods`) or one of :data:`graphs.models.structured.METHODS`;
            the older names ``"mistral"`` and ``"none"`` mean ``auto`` and ``prompt``.
        max_concurrent: cap on calls in flight in this process; for a model behind an API
            the cap of an :class:`AdaptiveLimit` (429s shrink it, successes grow it back).
        max_retries: retries of transient errors (429, 5xx, connection, timeout).
        timeout: seconds per call (a float: 0.5 is half a second).
        max_retry_wait: longest wait before a retry, in seconds: a 429's ``Retry-After``
            (seconds or an HTTP date) is honoured up to this, else exponential backoff
            with jitter up to this.
        max_tokens: the model's completion budget in tokens (default: the model's own
            ``max_tokens``, else 512). A reply cut at it is retried once with twice the room.

    Every message list is passed through :func:`normalize_messages` first (with the
    provider's rules). Calls to the in-process llama.cpp model are serialised by a thread
    lock (its context is not thread-safe).
    """

    def __init__(
        self,
        model: BaseChatModel,
        json_mode: str = "auto",
        max_concurrent: int = 4,
        max_retries: int = 3,
        timeout: float = 60.0,
        max_retry_wait: float = 30.0,
        max_tokens: int | None = None,
    ):
        self.model = model
        self.provider = provider_of(model)
        local = json_mode == "llamacpp" or self.provider == OFFLINE
        configured = {"mistral": "auto", "none": "prompt"}.get(json_mode, json_mode)
        self.methods = MethodLadder(
            ("llamacpp",) if local else structured_methods(model, configured), model_name(model)
        )
        self.first_user = PROVIDERS[self.provider].first_user if self.provider in PROVIDERS else False
        self.timeout = float(timeout)
        self.max_retries = max_retries
        budget_field = PROVIDERS[self.provider].max_tokens if self.provider in PROVIDERS else "max_tokens"
        self.max_tokens = int(
            max_tokens or getattr(model, budget_field, None) or getattr(model, "max_tokens", None) or 512
        )
        self._bindings: dict[tuple[type[BaseModel], str, bool], Any] = {}
        # one local llama.cpp call at a time: queued calls wait here, outside their timeout
        self._sem = asyncio.Semaphore(1) if local else None
        # a model behind an API: a slot per attempt (a retry's wait holds none), outside the timeout
        self.limit = AdaptiveLimit(max_concurrent)
        # A llama.cpp context is not thread-safe, and a timed-out call keeps running in its
        # worker thread: a lock held by that thread keeps a retry from running beside it.
        self._local_lock = threading.Lock() if local else None
        # the retry policy is built once; tenacity copies it per call (``wraps``)
        self._with_retries = AsyncRetrying(
            stop=stop_after_attempt(max_retries + 1),
            retry=retry_if_exception_type(RetryableError),
            wait=RetryWait(max_retry_wait),
            reraise=True,
            before_sleep=log_retry,
        ).wraps(self._once)

    @property
    def json_mode(self) -> str:
        """The structured-output method in use now."""
        return self.methods.current

    def _locked_invoke(self, runnable: Any, msgs: list[BaseMessage]) -> Any:
        assert self._local_lock is not None
        with self._local_lock:
            return runnable.invoke(msgs)

    async def _once(self, runnable: Any, msgs: list[BaseMessage]) -> Any:
        try:
            if self._local_lock is not None:
                return await asyncio.wait_for(_in_daemon_thread(self._locked_invoke, runnable, msgs), self.timeout)
            sent_at = await self.limit.acquire()
            try:
                reply = await asyncio.wait_for(runnable.ainvoke(msgs), self.timeout)
            except Exception as exc:  # noqa: BLE001 - re-raised below
                if is_rate_limited(exc):
                    self.limit.rate_limited(sent_at)
                raise
            finally:
                self.limit.release()
            self.limit.succeeded()
            return reply
        except Exception as exc:  # noqa: BLE001 - classify, then re-raise
            if is_retryable(exc) and not refused_method(exc):
                raise RetryableError(f"{type(exc).__name__}: {exc}") from exc
            raise

    async def _invoke(self, runnable: Any, messages: list[BaseMessage]) -> Any:
        msgs = normalize_messages(messages, first_user=self.first_user)
        if self._sem is None:
            return await self._with_retries(runnable, msgs)
        async with self._sem:
            return await self._with_retries(runnable, msgs)

    def _with_room(self, more_room: bool) -> Any:
        """The model, or a copy of it with twice the completion budget."""
        if not more_room:
            return self.model
        room = self.max_tokens * 2
        field = PROVIDERS[self.provider].max_tokens if self.provider in PROVIDERS else ""
        if field and field in type(self.model).model_fields:
            return self.model.model_copy(update={field: room})
        return self.model.bind(max_tokens=room)

    async def complete(self, system: str, user: str, history: Sequence[BaseMessage] = ()) -> tuple[str, Calls]:
        """One free-text completion: ``(text, calls)`` (:class:`Calls`: the LLM calls made
        and their tokens).

        A reply cut at ``max_tokens`` is asked for again with twice the room; if that is
        cut too, its open code fence is closed and it ends with ``(answer cut short)``.

        Raises:
            ModelRefusedError: the model refused, or a content filter stopped the reply.
            Exception: the model's error after the retries.
        """
        messages = [SystemMessage(system), *history, HumanMessage(user)]
        msg = await self._invoke(self.model, messages)
        calls = Calls().with_reply(msg)
        _raise_on_refusal(msg)
        if cut_at_max_tokens(msg):
            log.warning(
                "%s: the reply was cut at max_tokens (%d): asking again with %d",
                prompts.task_of(system) or "text",
                self.max_tokens,
                self.max_tokens * 2,
            )
            msg = await self._invoke(self._with_room(True), messages)
            calls = calls.with_reply(msg)
            _raise_on_refusal(msg)
            if cut_at_max_tokens(msg):
                return mark_cut_short(content_text(msg.content)), calls
        return content_text(msg.content).strip(), calls

    async def text(self, system: str, user: str, history: Sequence[BaseMessage] = ()) -> str:
        """One free-text completion (see :meth:`complete`). Raises the model's error after the retries."""
        return (await self.complete(system, user, history))[0]

    def _bound(self, schema: type[BaseModel], more_room: bool) -> Any:
        """The model bound for ``schema`` by the current method, made once per schema,
        method and budget (bindings are immutable; building one per call cost a JSON schema
        and a binding each time)."""
        key = (schema, self.methods.current, more_room)
        bound = self._bindings.get(key)
        if bound is None:
            bound = bind_structured(self._with_room(more_room), schema, self.methods.current)
            self._bindings[key] = bound
        return bound

    async def structured(self, system: str, user: str, schema: type[T], default: T) -> tuple[T, Calls]:
        """A completion parsed into ``schema`` by the provider's best method.

        Two attempts at most. A reply cut at ``max_tokens`` is not a verdict even when it
        parses: it is asked for again with twice the room. A reply that is not valid JSON
        for the schema (or has no tool call) is asked for again with the error appended. If
        the second attempt fails too, ``default`` is returned (a safe choice picked by the
        caller). A server that refuses the method itself (HTTP 400/422 about the response
        format or tools) makes the caller use the next method from then on; that attempt
        does not count.

        Returns:
            ``(value, calls)``.

        Raises:
            ModelRefusedError: the model refused, or a content filter stopped the reply.
            Exception: transport errors after the retries.
        """
        messages: list[BaseMessage] = [SystemMessage(system), HumanMessage(user)]
        task = prompts.task_of(system)
        calls = Calls()
        more_room = False
        attempt = 0
        while attempt < 2:
            try:
                runnable = self._bound(schema, more_room)
                output = await self._invoke(runnable, messages)
            except Exception as exc:  # noqa: BLE001 - a refused method steps down; others are judged below
                if refused_method(exc) and self.methods.step_down(f"{type(exc).__name__}: {exc}"):
                    calls += 1
                    continue
                names = error_names(exc)
                if names & _FILTER_ERRORS:
                    raise ModelRefusedError(
                        "content_filter" if "ContentFilterFinishReasonError" in names else "refusal"
                    ) from exc
                if names & _CUT_ERRORS:
                    log.warning("structured output for %s was cut at max_tokens (attempt %d)", task, attempt + 1)
                    calls += 1
                    attempt += 1
                    more_room = True
                    continue
                if not isinstance(exc, ValueError):  # pydantic's ValidationError is one
                    raise
                # the provider's client validated the reply itself and found it malformed
                calls += 1
                attempt += 1
                messages = messages + [
                    HumanMessage(f"That was not valid. Error: {str(exc)[:500]}\nReply with only the JSON object.")
                ]
                continue
            attempt += 1
            raw, value, error = read_structured(output, schema)
            calls = calls.with_reply(raw)
            if raw is not None:
                _raise_on_refusal(raw)
                if cut_at_max_tokens(raw):
                    log.warning("structured output for %s was cut at max_tokens (attempt %d)", task, attempt)
                    more_room = True
                    continue
            if value is not None:
                return value, calls  # type: ignore[return-value]
            log.info("structured output for %s did not parse (attempt %d): %s", task, attempt, error)
            said = raw_text(raw)
            messages = (
                messages
                + ([AIMessage(said[:2000])] if said else [])
                + [HumanMessage(f"That was not valid. Error: {error[:500]}\nReply with only the JSON object.")]
            )
        return default, calls


def _raise_on_refusal(message: Any) -> None:
    reason = refusal_of(message) if isinstance(message, BaseMessage) else None
    if reason:
        raise ModelRefusedError(reason)
