"""A Mistral-shaped chat server that validates requests the way the real API does and can
be scripted to misbehave (empty replies, broken tool calls, replies cut at max_tokens,
429 with Retry-After, slow replies).

Validation (HTTP 400 with Mistral's wording, as seen from the real API): an assistant
message needs content or tool calls; tool calls need valid JSON arguments and one
result each, right after the call; a tool result needs its call; a system message
comes first only; two messages of one role do not follow each other; the last message
is a user's or a tool result; a user message is not empty.

Replies: ``script[task]`` is a list (consumed in order, the last repeats) of a string
(the content) or a dict with any of ``content``, ``tool_calls``, ``finish_reason``,
``status`` + ``headers`` (an HTTP error), ``delay`` (seconds before answering). Content
longer than ``max_tokens * CHARS_PER_TOKEN`` is cut there with ``finish_reason``
``length``, as a real model does.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from aiohttp import web

from graphs import prompts

CHARS_PER_TOKEN = 4


def validation_error(messages: list[dict[str, Any]]) -> str | None:
    """Why the real Mistral API would refuse ``messages`` with HTTP 400 (None: accepted)."""
    if not messages:
        return "messages must not be empty"
    pending: set[str] = set()
    prev = ""
    for i, m in enumerate(messages):
        role = m.get("role")
        content = m.get("content")
        text = (
            content
            if isinstance(content, str)
            else "".join(str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in (content or []))
        )
        if role not in {"system", "user", "assistant", "tool"}:
            return f"Unknown role {role!r}"
        if pending and role != "tool":
            return "Not the same number of function calls and responses"
        if role == "system" and i != 0:
            return f"Unexpected role 'system' after role '{prev}'"
        if role in {"user", "assistant"} and role == prev:
            return f"Unexpected role '{role}' after role '{prev}'"
        if role == "user" and not (text or "").strip():
            return "User message content must not be empty"
        if role == "assistant":
            calls = m.get("tool_calls") or []
            if not (text or "").strip() and not calls:
                return "Assistant message must have either content or tool_calls"
            for c in calls:
                try:
                    args = json.loads(c["function"]["arguments"])
                except (KeyError, TypeError, ValueError):
                    return "Tool call arguments must be a JSON object"
                if not isinstance(args, dict):
                    return "Tool call arguments must be a JSON object"
                pending.add(c.get("id", ""))
        if role == "tool":
            if m.get("tool_call_id") not in pending:
                return "Tool message without a matching tool call"
            pending.discard(m.get("tool_call_id"))
        prev = role
    if pending:
        return "Not the same number of function calls and responses"
    if messages[-1]["role"] not in {"user", "tool"}:
        return (
            f"Expected last role User or Tool (or Assistant with prefix True) for serving"
            f" but got {messages[-1]['role']}"
        )
    return None


class FakeMistral:
    """POST /v1/chat/completions, answering by the TASK line of the system prompt.

    Attributes:
        script: task -> list of replies (see the module docstring).
        requests: every request body, in order (also the refused ones).
        times: ``time.monotonic()`` of every request.
        refused: ``(task, reason)`` of every request refused with 400 by validation.
    """

    def __init__(self, script: dict[str, list[Any]] | None = None, capacity: int | None = None) -> None:
        self.script = script or {}
        self.capacity = capacity  # more requests than this at once: 429 with Retry-After 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.rate_limited = 0
        self.requests: list[dict[str, Any]] = []
        self.times: list[float] = []
        self.refused: list[tuple[str, str]] = []
        self._positions: dict[str, int] = {}

    def tasks(self) -> list[str]:
        """The task of every request, in order."""
        return [task_of(r) for r in self.requests]

    def bodies(self, task: str) -> list[dict[str, Any]]:
        """The request bodies of one task."""
        return [r for r in self.requests if task_of(r) == task]

    @staticmethod
    def default(task: str, last: str) -> str:
        if task == "route":
            q = last.rsplit("New message:", 1)[-1].strip()
            return json.dumps({"question": q, "route": "vectorstore", "query": q[:200]})
        if task == "rewrite":
            return json.dumps({"query": "container requirements"})
        if task == "grade_documents":
            ids = re.findall(r"^\[(\d+)\]", last, re.M)
            return json.dumps(
                {"documents": [{"id": int(i), "relevant": i == "1", "facts": "REDIS_URI"} for i in ids], "feedback": ""}
            )
        if task == "generate":
            return "It needs REDIS_URI and DATABASE_URI [1]."
        if task == "grade_answer":
            return json.dumps({"grounded": True, "useful": True, "feedback": ""})
        if task == "direct":
            return "Hello! Ask me about the docs."
        if task == "check":  # `threadwise models check` and the start of `threadwise run`
            return json.dumps({"ok": True})
        return "ok"

    def _next(self, task: str) -> Any:
        entries = self.script.get(task)
        if not entries:
            return None
        pos = self._positions.get(task, 0)
        self._positions[task] = pos + 1
        return entries[min(pos, len(entries) - 1)]

    async def chat(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append(body)
        self.times.append(time.monotonic())
        task = task_of(body)
        if self.capacity is not None and self.in_flight >= self.capacity:
            self.rate_limited += 1
            return web.json_response(
                {"object": "error", "message": "rate limited"}, status=429, headers={"Retry-After": "0"}
            )
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            return await self._answer(body, task)
        finally:
            self.in_flight -= 1

    async def _answer(self, body: dict[str, Any], task: str) -> web.Response:
        problem = validation_error(body.get("messages") or [])
        if problem:
            self.refused.append((task, problem))
            return web.json_response(
                {"object": "error", "message": problem, "type": "invalid_request_message_order", "code": "3230"},
                status=400,
            )
        entry = self._next(task)
        reply: dict[str, Any] = entry if isinstance(entry, dict) else {"content": entry}
        if reply.get("delay"):
            await asyncio.sleep(reply["delay"])
        if reply.get("status"):
            return web.json_response(
                {"object": "error", "message": "scripted error"},
                status=reply["status"],
                headers=reply.get("headers") or {},
            )
        content = reply.get("content")
        if content is None and "tool_calls" not in reply:
            content = self.default(task, str(body["messages"][-1].get("content") or ""))
        content = content or ""
        finish = reply.get("finish_reason", "stop")
        limit = (body.get("max_tokens") or 10**6) * CHARS_PER_TOKEN
        if len(content) > limit:
            content, finish = content[:limit], "length"
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if reply.get("tool_calls"):
            message["tool_calls"] = reply["tool_calls"]
            finish = reply.get("finish_reason", "tool_calls")
        return web.json_response(
            {
                "id": f"cmpl-{len(self.requests)}",
                "object": "chat.completion",
                "model": body.get("model", "m"),
                "created": 0,
                "choices": [{"index": 0, "finish_reason": finish, "message": message}],
                "usage": {
                    "prompt_tokens": 10,
                    "completion_tokens": max(1, len(content) // CHARS_PER_TOKEN),
                    "total_tokens": 20,
                },
            }
        )


class HeldEmbeddings:
    """A Mistral-shaped ``POST /v1/embeddings`` that holds requests until ``release`` is
    set, so a reindex stays in progress for as long as a test needs. ``hold`` picks the
    requests to hold by their input texts (None: every request); the others are answered
    at once (e.g. a question's query embedding during a held reindex). ``arrived`` is set
    when a held request arrives."""

    def __init__(self, hold: Callable[[list[str]], bool] | None = None) -> None:
        self.hold = hold
        self.arrived = asyncio.Event()
        self.release = asyncio.Event()

    async def embeddings(self, request: web.Request) -> web.Response:
        body = await request.json()
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        if self.hold is None or self.hold(texts):
            self.arrived.set()
            await self.release.wait()
        data = [
            {"object": "embedding", "index": i, "embedding": [1.0, float(len(t) % 5), 0.5]} for i, t in enumerate(texts)
        ]
        return web.json_response(
            {
                "id": "e",
                "object": "list",
                "model": body["model"],
                "data": data,
                "usage": {"prompt_tokens": 1, "total_tokens": 1},
            }
        )


def task_of(body: dict[str, Any]) -> str:
    """The TASK of a request (first line of its system message)."""
    system = next((m.get("content") or "" for m in body.get("messages", []) if m.get("role") == "system"), "")
    return prompts.task_of(system if isinstance(system, str) else "")


@asynccontextmanager
async def mistral_server(
    script: dict[str, list[Any]] | None = None, capacity: int | None = None
) -> AsyncIterator[tuple[FakeMistral, str]]:
    """Serve a :class:`FakeMistral` on 127.0.0.1; yields ``(fake, base_url)`` where
    ``base_url`` ends in ``/v1`` (the value of ``models.mistral_base_url``). ``capacity``:
    requests beyond this many at once get 429 (Retry-After 0)."""
    from tests.conftest import serve

    fake = FakeMistral(script, capacity)
    async with serve({"/v1/chat/completions": fake.chat}) as base:
        yield fake, f"{base}/v1"


def mistral_config(base_url: str, extra: str = "") -> str:
    """The ``[models]`` lines that point the product at the fake (append to a test config)."""
    return f'provider = "mistral"\nmistral_base_url = "{base_url}"\n{extra}'


@asynccontextmanager
async def mistral_runtime(
    tmp_path: Any,
    script: dict[str, list[Any]] | None = None,
    models: str = "",
    sections: str = "",
    tavily_key: str = "",
) -> AsyncIterator[tuple[Any, FakeMistral]]:
    """A real runtime (graph, SQLite, keyword index over the test knowledge base) whose
    chat model is ChatMistralAI talking to a :class:`FakeMistral`. ``models`` adds
    ``[models]`` lines, ``sections`` whole TOML sections (``[graph]``, ``[web]`` ...)."""
    from bot.config import Secrets, load_settings
    from bot.runtime import open_runtime
    from tests.conftest import write_config

    async with mistral_server(script) as (fake, base):
        settings = load_settings(write_config(tmp_path, extra=mistral_config(base, models) + "\n" + sections))
        secrets = Secrets(mistral_api_key="test-key", tavily_api_key=tavily_key)
        async with open_runtime(settings, secrets, embeddings=None) as rt:
            yield rt, fake
