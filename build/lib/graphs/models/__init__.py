"""Chat and embedding models for the graph, any provider LangChain knows.

- :mod:`~graphs.models.providers`: which chat model ``[models]`` names
  (``chat_model = "provider:model"``, ``base_url``; the older ``provider``) and building it
  with ``init_chat_model``; the offline llama.cpp model.
- :mod:`~graphs.models.caller`: :class:`ModelCaller`, the one way the graph calls a model
  (retries, Retry-After, the adaptive concurrency cap, cut replies, refusals, token usage).
- :mod:`~graphs.models.structured`: structured output by the provider's best method.
- :mod:`~graphs.models.messages`: message lists valid for each provider; stop reasons.
- :mod:`~graphs.models.limits`: which failures are retried, how long to wait, how many at once.
- :mod:`~graphs.models.embeddings`: the embedding model (``init_embeddings``, local MiniLM).
- :mod:`~graphs.models.check`: ``threadwise models check`` (reach both, one call each).
"""

from graphs.models.caller import Calls, ModelCaller, structured_methods
from graphs.models.embeddings import build_embeddings, embedding_choice, local_embedding_path
from graphs.models.errors import BackendCrashedError, ModelRefusedError, ModelUnavailableError, RetryableError
from graphs.models.limits import AdaptiveLimit, retry_after_seconds
from graphs.models.messages import CUT_SHORT_NOTE, cut_at_max_tokens, mark_cut_short, normalize_messages, refusal_of
from graphs.models.providers import (
    MAX_MODEL_CONNECTIONS,
    ChatSpec,
    UnavailableChatModel,
    build_chat_model,
    close_chat_model,
    default_gguf_path,
    model_kind,
    model_name,
    provider_of,
    resolve_chat_spec,
    resolve_provider,
)

__all__ = [
    "CUT_SHORT_NOTE",
    "MAX_MODEL_CONNECTIONS",
    "AdaptiveLimit",
    "BackendCrashedError",
    "Calls",
    "ChatSpec",
    "ModelCaller",
    "ModelRefusedError",
    "ModelUnavailableError",
    "RetryableError",
    "UnavailableChatModel",
    "build_chat_model",
    "build_embeddings",
    "close_chat_model",
    "cut_at_max_tokens",
    "default_gguf_path",
    "embedding_choice",
    "local_embedding_path",
    "mark_cut_short",
    "model_kind",
    "model_name",
    "normalize_messages",
    "provider_of",
    "refusal_of",
    "resolve_chat_spec",
    "resolve_provider",
    "retry_after_seconds",
    "structured_methods",
]
