"""Structured output: asking a chat model for JSON of a pydantic schema by the best method
its provider supports, and reading the reply.

Methods, best first per provider (:attr:`graphs.models.providers.Provider.structured`):

- ``json_schema``: the API constrains the reply to the schema (OpenAI, vLLM, Ollama,
  Mistral, Gemini);
- ``function_calling``: a forced tool call whose arguments are the object (Anthropic,
  Bedrock, and any server with tools);
- ``json_mode``: any JSON object; the schema is in the prompt;
- ``prompt``: no API support: the prompt asks for JSON (a model of unknown kind);
- ``llamacpp``: the offline model's grammar-constrained JSON with the schema.

LangChain's ``with_structured_output(..., include_raw=True)`` builds the request for each
method; the reply is validated here with pydantic whatever the method (the one place
structured output is judged). A server that refuses a method (HTTP 400/422 naming the
response format or tools, as llama-cpp-python's server does for ``json_schema``) makes the
caller step down to the next method for good (:class:`MethodLadder`).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from pydantic import BaseModel, ValidationError

from graphs.models.errors import RetryableError
from graphs.models.limits import status_of
from graphs.models.messages import content_text, extract_json

log = logging.getLogger("graphs.models")

METHODS = ("json_schema", "function_calling", "json_mode", "prompt", "llamacpp")

#: Words in a 400/422 error that show the server refused the structured-output method
#: itself (not the messages).
#: ... and in a 500 that is really the server's validation of the request.
_VALIDATION_WORDS = ("response_format", "json_schema", "tool_choice", "'tools'")
_METHOD_WORDS = (
    "response_format",
    "json_schema",
    "json schema",
    "tool",
    "function",
    "format",
    "schema",
    "not supported",
    "unsupported",
)


class MethodLadder:
    """The structured-output methods still to try for one model, best first.

    Args:
        methods: the provider's methods, best first (``("prompt",)`` at least).
        where: what to name in the log line when stepping down (``openai:qwen at http://...``).
    """

    def __init__(self, methods: tuple[str, ...] | list[str], where: str = "the chat model"):
        self.methods = list(methods) or ["prompt"]
        self.where = where

    @property
    def current(self) -> str:
        return self.methods[0]

    def step_down(self, why: str) -> bool:
        """Drop the current method (the server refused it); False when none is left."""
        if len(self.methods) <= 1:
            return False
        old = self.methods.pop(0)
        log.warning(
            "%s refused structured output by %s (%s): using %s from now on", self.where, old, why[:200], self.methods[0]
        )
        return True


def refused_method(exc: BaseException) -> bool:
    """True when ``exc`` is a server's refusal of the structured-output method (HTTP 400,
    404, 422 or 501 whose text names the response format, the schema or tools; a 500 that
    names the request's ``response_format`` or tools, as llama-cpp-python's server reports
    its request validation), or LangChain saying the model class has no such method
    (``NotImplementedError``)."""
    while isinstance(exc, RetryableError) and exc.__cause__ is not None:
        exc = exc.__cause__
    if isinstance(exc, NotImplementedError):
        return True
    status = status_of(exc)
    body = getattr(getattr(exc, "response", None), "text", "") or ""
    text = f"{exc} {body}".lower()
    if status in (400, 404, 422, 501):
        return any(word in text for word in _METHOD_WORDS)
    return status == 500 and any(word in text for word in _VALIDATION_WORDS)


def schema_dict(schema: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema sent to the provider (pydantic's, with its title as the tool or
    format name and its docstring as the description)."""
    out = schema.model_json_schema()
    out.setdefault("title", schema.__name__)
    out.setdefault("description", (schema.__doc__ or schema.__name__).strip().splitlines()[0])
    return out


def bind_structured(model: Any, schema: type[BaseModel], method: str) -> Any:
    """The runnable that asks ``model`` for ``schema`` by ``method``: it returns an
    ``AIMessage`` (``prompt``, ``llamacpp``) or LangChain's ``{"raw", "parsed",
    "parsing_error"}`` (the other methods; the schema goes as a JSON schema dict, so every
    provider's parser hands back plain JSON, validated in :func:`read_structured`).

    Raises:
        NotImplementedError: the model class has no such method.
    """
    if method == "prompt":
        return model
    if method == "llamacpp":
        return model.bind(response_format={"type": "json_object", "schema": schema.model_json_schema()})
    return model.with_structured_output(schema_dict(schema), method=method, include_raw=True)


def read_structured(output: Any, schema: type[BaseModel]) -> tuple[AIMessage | None, BaseModel | None, str]:
    """``(raw reply, value, error)`` of one structured call's ``output``: ``value`` is the
    validated ``schema`` object, or None with ``error`` saying why (one line)."""
    if isinstance(output, dict):
        raw = output.get("raw")
        parsed = output.get("parsed")
        if parsed is None:
            parsed = _tool_arguments(raw)
        if parsed is None:
            error = output.get("parsing_error")
            text = content_text(getattr(raw, "content", "")) if raw is not None else ""
            if text.strip():
                return raw, *_validate_text(text, schema)
            return raw, None, _one_line(error) if error else "the reply held no JSON object"
        if isinstance(parsed, BaseModel):
            parsed = parsed.model_dump()
        try:
            return raw, schema.model_validate(parsed), ""
        except ValidationError as exc:
            return raw, None, _one_line(exc)
    raw = output if isinstance(output, AIMessage) else None
    return raw, *_validate_text(content_text(getattr(output, "content", "")), schema)


def raw_text(raw: BaseMessage | None) -> str:
    """What the model said, for the retry prompt: its text, or its tool call's arguments."""
    if raw is None:
        return ""
    text = content_text(raw.content).strip()
    if text:
        return text
    calls = getattr(raw, "tool_calls", None) or []
    if calls:
        return json.dumps(calls[0].get("args") or {})
    bad = getattr(raw, "invalid_tool_calls", None) or []
    return str(bad[0].get("args") or "") if bad else ""


def _tool_arguments(raw: Any) -> dict[str, Any] | None:
    calls = getattr(raw, "tool_calls", None) or []
    return calls[0].get("args") if calls and isinstance(calls[0].get("args"), dict) else None


def _validate_text(text: str, schema: type[BaseModel]) -> tuple[BaseModel | None, str]:
    try:
        return schema.model_validate_json(extract_json(text)), ""
    except (ValidationError, ValueError) as exc:
        return None, _one_line(exc)


def _one_line(exc: Any) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0][:300]
