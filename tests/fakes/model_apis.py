"""Local servers speaking the wire shapes of three chat-model APIs, scriptable to misbehave:
OpenAI's chat completions (also vLLM's, llama.cpp's, Ollama's /v1), Anthropic's Messages
API, and Ollama's native /api/chat (streamed NDJSON, as langchain-ollama asks for it).
(Mistral's is :mod:`tests.fakes.mistral_api`.)

Each answers by the graph task (the ``TASK:`` line of the system prompt) with
:meth:`FakeMistral.default <tests.fakes.mistral_api.FakeMistral.default>`'s happy-path
replies, as text, as JSON content when a response format or schema was asked for, or as a
tool call when tools were sent (``function_calling``). ``script[task]`` is a list of
replies (consumed in order, the last repeats): a string (the content) or a dict with any of

- ``content``: the text; ``status`` + ``headers``: an HTTP error (429 with Retry-After, 500);
- ``delay``: seconds before answering (a stall);
- ``cut``: the reply is cut short with the API's "ran out of tokens" stop reason;
- ``refuse``: a refusal (OpenAI ``refusal`` field, Anthropic ``stop_reason`` ``refusal``)
  or a content filter (OpenAI ``finish_reason`` ``content_filter``: ``refuse="filter"``);
- ``bad_tool_call``: a tool call whose arguments are broken (not JSON for OpenAI; the wrong
  fields for Anthropic and Ollama, whose arguments are objects);
- ``bad_json``: JSON content that is not valid JSON.

Token usage is counted as characters / 4 (input: the system prompt and every message's text,
not tool definitions or schemas; output: the reply's text or tool arguments), and
summed in ``input_tokens`` / ``output_tokens``, to compare with what the bot recorded.
Each server also checks the request the way the real API would refuse it (400), e.g.
Anthropic's alternation and tool_use/tool_result pairing; ``refused`` records those.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from aiohttp import web

from graphs import prompts
from tests.fakes.mistral_api import FakeMistral

CHARS_PER_TOKEN = 4


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for p in content:
            if isinstance(p, str):
                parts.append(p)
            elif isinstance(p, dict):
                parts.append(str(p.get("text") or p.get("content") or ""))
        return "".join(parts)
    return ""


class ScriptedAPI:
    """What the three fakes share: the script, the requests seen, capacity, token counts."""

    wire = "?"

    def __init__(self, script: dict[str, list[Any]] | None = None, unsupported: frozenset[str] = frozenset()) -> None:
        self.script = script or {}
        self.unsupported = unsupported  # request features answered with 400, as a server without them does
        self.requests: list[dict[str, Any]] = []
        self.times: list[float] = []
        self.refused: list[str] = []
        self.input_tokens = 0
        self.output_tokens = 0
        self.embedding_requests: list[dict[str, Any]] = []
        self._positions: dict[str, int] = {}

    def _next(self, task: str) -> dict[str, Any]:
        entries = self.script.get(task)
        if not entries:
            return {}
        pos = self._positions.get(task, 0)
        self._positions[task] = pos + 1
        entry = entries[min(pos, len(entries) - 1)]
        return entry if isinstance(entry, dict) else {"content": entry}

    def tasks(self) -> list[str]:
        return [self.task_of(r) for r in self.requests]

    def bodies(self, task: str) -> list[dict[str, Any]]:
        return [r for r in self.requests if self.task_of(r) == task]

    def task_of(self, body: dict[str, Any]) -> str:
        return prompts.task_of(self.system_of(body))

    def system_of(self, body: dict[str, Any]) -> str:
        return next((_text(m.get("content")) for m in body.get("messages", []) if m.get("role") == "system"), "")

    def last_text(self, body: dict[str, Any]) -> str:
        msgs = body.get("messages") or []
        return _text(msgs[-1].get("content")) if msgs else ""

    def count(self, body: dict[str, Any], reply: str) -> tuple[int, int]:
        # the system prompt is a message (OpenAI, Ollama) or the request's ``system`` field (Anthropic)
        chars = len(_text(body.get("system") or "")) + sum(
            len(_text(m.get("content"))) for m in body.get("messages", [])
        )
        usage = (max(1, chars // CHARS_PER_TOKEN), max(1, len(reply) // CHARS_PER_TOKEN))
        self.input_tokens += usage[0]
        self.output_tokens += usage[1]
        return usage

    def validation_error(self, body: dict[str, Any]) -> str | None:
        return None

    def error(self, status: int, message: str, headers: dict[str, str] | None = None) -> web.Response:
        return web.json_response({"error": {"message": message, "type": "error"}}, status=status, headers=headers)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append(body)
        self.times.append(time.monotonic())
        problem = self.validation_error(body)
        if problem:
            self.refused.append(problem)
            return self.error(400, problem)
        task = self.task_of(body)
        reply = self._next(task)
        if reply.get("delay"):
            await asyncio.sleep(reply["delay"])
        if reply.get("status"):
            return self.error(reply["status"], "scripted error", reply.get("headers"))
        content = reply.get("content")
        if content is None:
            content = FakeMistral.default(task, self.last_text(body))
        return await self.answer(request, body, reply, str(content))


def _args(content: str) -> dict[str, Any]:
    try:
        value = json.loads(content)
    except ValueError:
        return {"text": content}
    return value if isinstance(value, dict) else {"value": value}


class FakeOpenAI(ScriptedAPI):
    """POST /v1/chat/completions in OpenAI's shape (``choices``, ``finish_reason``,
    ``tool_calls`` with string arguments, ``refusal``, ``usage``)."""

    wire = "openai"

    def validation_error(self, body: dict[str, Any]) -> str | None:
        kind = (body.get("response_format") or {}).get("type")
        if kind in self.unsupported:
            return f"response_format type {kind!r} is not supported by this server"
        if body.get("tools") and "tools" in self.unsupported:
            return "tools are not supported by this server"
        pending: set[str] = set()
        for m in body.get("messages") or []:
            if m.get("role") == "tool":
                if m.get("tool_call_id") not in pending:
                    return "messages with role 'tool' must be a response to a preceding message with 'tool_calls'"
                pending.discard(m.get("tool_call_id"))
            elif pending:
                return "An assistant message with 'tool_calls' must be followed by tool messages responding to each"
            for c in m.get("tool_calls") or []:
                pending.add(c.get("id"))
        return None

    async def answer(self, request: web.Request, body: dict[str, Any], reply: dict[str, Any], content: str):
        finish = "stop"
        message: dict[str, Any] = {"role": "assistant", "content": content}
        tools = body.get("tools") or []
        if reply.get("bad_json"):
            message["content"] = '{"route": "vectorstore", "question": '
        if tools and not reply.get("refuse"):
            args = "{not json" if reply.get("bad_tool_call") else json.dumps(_args(content))
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{len(self.requests)}",
                        "type": "function",
                        "function": {"name": tools[0]["function"]["name"], "arguments": args},
                    }
                ],
            }
            finish = "tool_calls"
        if reply.get("cut"):
            message["content"] = (message.get("content") or "")[:12]
            message.pop("tool_calls", None)
            finish = "length"
        if reply.get("refuse") == "filter":
            message, finish = {"role": "assistant", "content": ""}, "content_filter"
        elif reply.get("refuse"):
            message = {"role": "assistant", "content": None, "refusal": "I can't help with that."}
        calls = message.get("tool_calls") or []
        said = message.get("content") or (calls[0]["function"]["arguments"] if calls else "")
        prompt, completion = self.count(body, said)
        return web.json_response(
            {
                "id": f"chatcmpl-{len(self.requests)}",
                "object": "chat.completion",
                "created": 0,
                "model": body.get("model", "m"),
                "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
                "usage": {
                    "prompt_tokens": prompt,
                    "completion_tokens": completion,
                    "total_tokens": prompt + completion,
                },
            }
        )

    async def embeddings(self, request: web.Request) -> web.Response:
        """POST /v1/embeddings: a small deterministic vector per input text."""
        body = await request.json()
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        self.embedding_requests.append(body)
        data = [
            {"object": "embedding", "index": i, "embedding": [1.0, float(len(str(t)) % 5), 0.5]}
            for i, t in enumerate(texts)
        ]
        return web.json_response(
            {
                "object": "list",
                "model": body.get("model", "e"),
                "data": data,
                "usage": {"prompt_tokens": 1, "total_tokens": 1},
            }
        )


class FakeAnthropic(ScriptedAPI):
    """POST /v1/messages in Anthropic's shape (``system`` apart, content blocks, ``tool_use``,
    ``stop_reason``, ``usage``), refusing (400) what the real API refuses: a system role in
    the list, a first turn that is not the user's, two turns of one role in a row, empty
    content, a tool_use without its tool_result in the next user turn."""

    wire = "anthropic"

    def system_of(self, body: dict[str, Any]) -> str:
        return _text(body.get("system") or "")

    def last_text(self, body: dict[str, Any]) -> str:
        msgs = body.get("messages") or []
        if not msgs:
            return ""
        content = msgs[-1].get("content")
        if isinstance(content, list):
            return "".join(
                _text(b.get("content")) if b.get("type") == "tool_result" else str(b.get("text", ""))
                for b in content
                if isinstance(b, dict)
            )
        return _text(content)

    def validation_error(self, body: dict[str, Any]) -> str | None:
        msgs = body.get("messages") or []
        if not msgs:
            return "messages: at least one message is required"
        if not body.get("max_tokens"):
            return "max_tokens: Field required"
        prev = ""
        pending: set[str] = set()
        for i, m in enumerate(msgs):
            role = m.get("role")
            if role not in ("user", "assistant"):
                return f"messages.{i}.role: Input should be 'user' or 'assistant'"
            if i == 0 and role != "user":
                return 'messages: first message must use the "user" role'
            if role == prev:
                return f'messages: roles must alternate between "user" and "assistant" (messages.{i})'
            content = m.get("content")
            blocks = content if isinstance(content, list) else [{"type": "text", "text": content or ""}]
            if not blocks or all(b.get("type") == "text" and not str(b.get("text", "")).strip() for b in blocks):
                return f"messages.{i}: all messages must have non-empty content"
            results = {b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"}
            if pending and results != pending:
                return f"messages.{i}: tool_use ids were found without tool_result blocks immediately after"
            pending = {b.get("id") for b in blocks if b.get("type") == "tool_use"}
            prev = role
        if pending:
            return "tool_use ids were found without tool_result blocks immediately after"
        return None

    def error(self, status: int, message: str, headers: dict[str, str] | None = None) -> web.Response:
        kind = {400: "invalid_request_error", 429: "rate_limit_error", 529: "overloaded_error"}.get(status, "api_error")
        return web.json_response(
            {"type": "error", "error": {"type": kind, "message": message}}, status=status, headers=headers
        )

    async def answer(self, request: web.Request, body: dict[str, Any], reply: dict[str, Any], content: str):
        stop = "end_turn"
        if reply.get("bad_json"):
            content = '{"route": "vectorstore", "question": '
        blocks: list[dict[str, Any]] = [{"type": "text", "text": content}]
        tools = body.get("tools") or []
        if tools and not reply.get("refuse"):
            args = {"route": 7} if reply.get("bad_tool_call") else _args(content)
            blocks = [
                {"type": "tool_use", "id": f"toolu_{len(self.requests)}", "name": tools[0]["name"], "input": args}
            ]
            stop = "tool_use"
        if reply.get("cut"):
            blocks, stop = [{"type": "text", "text": content[:12]}], "max_tokens"
        if reply.get("refuse"):
            blocks, stop = [], "refusal"
        said = "".join(b.get("text", "") if b["type"] == "text" else json.dumps(b["input"]) for b in blocks)
        prompt, completion = self.count(body, said)
        return web.json_response(
            {
                "id": f"msg_{len(self.requests)}",
                "type": "message",
                "role": "assistant",
                "model": body.get("model", "m"),
                "content": blocks,
                "stop_reason": stop,
                "stop_sequence": None,
                "usage": {"input_tokens": prompt, "output_tokens": completion},
            }
        )


class FakeOllama(ScriptedAPI):
    """POST /api/chat in Ollama's shape, streamed as NDJSON as langchain-ollama asks
    (``message`` chunks, then ``done`` with ``done_reason``, ``prompt_eval_count`` and
    ``eval_count``); tool calls carry their arguments as objects; errors are ``{"error"}``.
    Ollama has no refusal or content filter: ``refuse`` is not scripted for it."""

    wire = "ollama"

    def error(self, status: int, message: str, headers: dict[str, str] | None = None) -> web.Response:
        return web.json_response({"error": message}, status=status, headers=headers)

    async def answer(self, request: web.Request, body: dict[str, Any], reply: dict[str, Any], content: str):
        done_reason = "stop"
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if reply.get("bad_json"):
            message["content"] = '{"route": "vectorstore", "question": '
        tools = body.get("tools") or []
        if tools:
            args = {"route": 7} if reply.get("bad_tool_call") else _args(content)
            message = {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"function": {"name": tools[0]["function"]["name"], "arguments": args}}],
            }
        if reply.get("cut"):
            message, done_reason = {"role": "assistant", "content": content[:12]}, "length"
        calls = message.get("tool_calls") or []
        said = message.get("content") or (json.dumps(calls[0]["function"]["arguments"]) if calls else "")
        prompt, completion = self.count(body, said)
        model = body.get("model", "m")
        chunks = [
            {"model": model, "created_at": "2026-12-03T00:00:00Z", "message": message, "done": False},
            {
                "model": model,
                "created_at": "2026-12-03T00:00:00Z",
                "message": {"role": "assistant", "content": ""},
                "done": True,
                "done_reason": done_reason,
                "total_duration": 1,
                "load_duration": 1,
                "prompt_eval_count": prompt,
                "prompt_eval_duration": 1,
                "eval_count": completion,
                "eval_duration": 1,
            },
        ]
        if body.get("stream") is False:
            last = {**chunks[1], "message": message}
            return web.json_response(last)
        response = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
        await response.prepare(request)
        for chunk in chunks:
            await response.write((json.dumps(chunk) + "\n").encode())
        await response.write_eof()
        return response


#: wire name -> (fake class, route path, how the bot is configured: chat_model provider, base URL suffix)
WIRES = {
    "openai": (FakeOpenAI, "/v1/chat/completions", "openai", "/v1"),
    "anthropic": (FakeAnthropic, "/v1/messages", "anthropic", ""),
    "ollama": (FakeOllama, "/api/chat", "ollama", ""),
}

#: the environment each provider's client needs (a key the fake ignores)
KEYS = {"openai": {"OPENAI_API_KEY": "sk-test"}, "anthropic": {"ANTHROPIC_API_KEY": "sk-ant-test"}, "ollama": {}}


@asynccontextmanager
async def model_api(
    wire: str, script: dict[str, list[Any]] | None = None, unsupported: frozenset[str] = frozenset()
) -> AsyncIterator[tuple[Any, str]]:
    """Serve the fake of ``wire`` (``openai``, ``anthropic``, ``ollama``) on 127.0.0.1;
    yields ``(fake, base_url)`` where ``base_url`` is the value for ``[models] base_url``.
    ``unsupported``: OpenAI request features refused with 400 (``json_schema``, ``tools``...)."""
    from tests.conftest import serve

    cls, path, _, suffix = WIRES[wire]
    fake = cls(script, unsupported)
    routes = {path: fake.handle}
    if isinstance(fake, FakeOpenAI):
        routes["/v1/embeddings"] = fake.embeddings
    async with serve(routes) as base:
        yield fake, f"{base}{suffix}"


def models_config(wire: str, base_url: str, model: str = "test-model", extra: str = "") -> str:
    """The ``[models]`` lines that point the product at a fake (append to a test config)."""
    return f'chat_model = "{WIRES[wire][2]}:{model}"\nbase_url = "{base_url}"\n{extra}'
