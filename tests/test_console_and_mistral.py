"""The console adapter as a user drives it, and the Mistral backend against a local
Mistral-shaped HTTP server (chat completions + embeddings)."""

from __future__ import annotations

import io
import json
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from rich.console import Console

from bot.config import Secrets, load_settings
from bot.platforms.console import run_console
from bot.runtime import open_runtime
from graphs import prompts
from tests.conftest import scripted_runtime, serve, write_config

NONE_RELEVANT = json.dumps({"documents": [{"id": 1, "relevant": False}], "feedback": "nothing"})


async def test_console_session_threads_help_request_and_resume(settings):
    relevant = json.dumps({"documents": [{"id": 1, "relevant": True, "facts": "disable_studio_auth"}]})
    script = {"grade_documents": [NONE_RELEVANT, NONE_RELEVANT, relevant]}
    lines = (
        "\n".join(
            [
                "what does the standalone container need to boot?",  # pauses for a human (nothing relevant)
                "answer: set REDIS_URI and DATABASE_URI",  # my reply resumes it
                "/thread other",
                "   ",  # empty: a short reply, no LLM call
                "how do I lock down studio auth?",
                "what does [/graph] mean?",  # rich markup in user text is shown, not parsed
                "/help",
                "/threads",
                "/quit",
                "never read",
            ]
        )
        + "\n"
    )
    screen = io.StringIO()
    async with scripted_runtime(settings, script) as (rt, model):
        await run_console(rt, thread="main", stdin=io.StringIO(lines), console=Console(file=screen, width=200))
        main = await rt.service.thread_values("console:main")
        other = await rt.service.thread_values("console:other")
    text = screen.getvalue()
    assert "help needed (main)" in text
    assert "set REDIS_URI and DATABASE_URI" in text and "answered by you" in text
    assert "… searching the knowledge base" in text and "… done" in text
    assert "What would you like to know?" in text
    assert "[1] auth.md" in text
    assert "main, other" in text
    assert "what does [/graph] mean?" in text
    assert "Commands: /thread NAME" in text
    assert "never read" not in text
    assert [m.type for m in main["messages"]] == ["human", "ai"]
    assert [m.content for m in other["messages"] if m.type == "human"] == [
        "how do I lock down studio auth?",
        "what does [/graph] mean?",
    ]


# ---- Mistral-shaped server ---------------------------------------------------------------
class FakeMistral:
    """POST /v1/chat/completions and /v1/embeddings, answering by the prompt's TASK line."""

    def __init__(self) -> None:
        self.chat_requests: list[dict[str, Any]] = []
        self.embedding_requests = 0
        self.fail_first_with: int | None = None

    async def chat(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.chat_requests.append(body)
        if self.fail_first_with:
            status, self.fail_first_with = self.fail_first_with, None
            return web.json_response({"message": "rate limited"}, status=status, headers={"Retry-After": "0"})
        system = next((m["content"] for m in body["messages"] if m["role"] == "system"), "")
        task = prompts.task_of(system)
        last = body["messages"][-1]["content"]
        content = {
            "route": json.dumps(
                {
                    "question": "What does the container need?",
                    "route": "vectorstore",
                    "query": "container REDIS_URI DATABASE_URI",
                }
            ),
            "grade_documents": json.dumps(
                {
                    "documents": [
                        {"id": int(i), "relevant": i == "1", "facts": "REDIS_URI, DATABASE_URI"}
                        for i in re.findall(r"^\[(\d+)\]", last, re.M)
                    ]
                }
            ),
            "generate": "It needs REDIS_URI and DATABASE_URI [1].",
            "grade_answer": json.dumps({"grounded": True, "useful": True, "feedback": ""}),
        }.get(task, "ok")
        return web.json_response(
            {
                "id": "cmpl-1",
                "object": "chat.completion",
                "model": body["model"],
                "created": 0,
                "choices": [
                    {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}
                ],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
            }
        )

    async def embeddings(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.embedding_requests += 1
        data = [
            {"object": "embedding", "index": i, "embedding": [float(len(t) % 7), 1.0, float("redis" in t.lower())]}
            for i, t in enumerate(body["input"])
        ]
        return web.json_response(
            {
                "id": "e1",
                "object": "list",
                "model": body["model"],
                "data": data,
                "usage": {"prompt_tokens": 1, "total_tokens": 1},
            }
        )


@pytest.fixture
async def mistral() -> AsyncIterator[tuple[FakeMistral, str]]:
    fake = FakeMistral()
    async with serve({"/v1/chat/completions": fake.chat, "/v1/embeddings": fake.embeddings}) as base_url:
        yield fake, f"{base_url}/v1"


async def test_mistral_backend_end_to_end(tmp_path, mistral):
    fake, base = mistral
    path = write_config(tmp_path)
    path.write_text(
        path.read_text()
        .replace('embeddings = "none"', 'embeddings = "auto"')
        .replace("[models]", f'[models]\nmistral_base_url = "{base}"')
    )
    settings = load_settings(path)
    fake.fail_first_with = 429
    async with open_runtime(settings, Secrets(mistral_api_key="test-key")) as rt:
        from bot.platforms.console import ConsoleResponder

        out = ConsoleResponder("m", show_status=False)
        result = await rt.service.ask("console:m", "what does the container need to boot?", out)
        client = rt.chat_model.async_client
        assert not client.is_closed
    assert client.is_closed  # the model's connections are closed with the runtime (no unclosed session)
    assert out.answers[0].text == "It needs REDIS_URI and DATABASE_URI [1]."
    assert out.answers[0].sources[0].location == "deploy/container.md"
    assert result.values["llm_calls"] == 4
    assert fake.embedding_requests >= 2  # index build + query
    # the 429 was retried; structured calls asked for JSON of the schema (Mistral's best method)
    assert len(fake.chat_requests) == 5
    assert fake.chat_requests[1]["response_format"]["type"] == "json_schema"
    assert fake.chat_requests[1]["response_format"]["json_schema"]["name"] == "RouteDecision"
    assert all(r["model"] == "mistral-small-latest" for r in fake.chat_requests)
