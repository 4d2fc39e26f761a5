"""Settings that cannot work are refused at start by the real command line (exit code 2,
one line naming the keys); settings keep their units on the way to the clients (a
fractional request timeout works against a Mistral-shaped server)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest

from tests.conftest import write_config
from tests.fakes.mistral_api import mistral_config, mistral_server

ROOT = Path(__file__).resolve().parent.parent


async def run_cli(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        *args,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    return proc.returncode, out.decode(), err.decode()


def budgets(generations: int, kb: int, web: int, limit: int, web_enabled: bool = True) -> str:
    return (
        f"\n[graph]\nmax_generations = {generations}\nmax_kb_searches = {kb}\nmax_web_searches = {web}\n"
        f"recursion_limit = {limit}\n[web]\nenabled = {'true' if web_enabled else 'false'}\n"
    )


@pytest.mark.parametrize(
    "generations,kb,web,limit,web_enabled",
    [
        (10, 10, 10, 60, True),  # the example: 463 node runs
        (2, 2, 1, 24, True),  # the default budgets, one step short
        (3, 3, 0, 30, True),
        (1, 8, 3, 40, True),
        (4, 6, 9, 60, False),  # web off: its budget does not count, the rest still does not fit
    ],
)
async def test_budgets_beyond_the_recursion_limit_are_refused(tmp_path, generations, kb, web, limit, web_enabled):
    config = write_config(tmp_path, extra=budgets(generations, kb, web, limit, web_enabled))
    code, out, err = await run_cli("ask", "hello", "--config", str(config))
    assert code == 2
    [line] = [line for line in err.splitlines() if line.strip()]
    assert line.startswith("Configuration error")
    for key in ("graph.recursion_limit", "graph.max_generations", "graph.max_kb_searches"):
        assert key in line
    assert ("graph.max_web_searches" in line) == web_enabled
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "generations,kb,web,limit,web_enabled",
    [
        (2, 2, 1, 25, True),
        (10, 10, 10, 1000, True),
        (2, 2, 10, 18, False),  # web off: only the knowledge-base budget counts
    ],
)
async def test_budgets_within_the_recursion_limit_are_accepted(tmp_path, generations, kb, web, limit, web_enabled):
    config = write_config(tmp_path, extra=budgets(generations, kb, web, limit, web_enabled))
    code, out, err = await run_cli("threads", "--config", str(config))
    assert code == 0, err


@pytest.mark.parametrize("seconds,delay", [("0.5", 0.2), ("0.75", 0.2), ("1.5", 1.2)])
async def test_a_fractional_request_timeout_reaches_the_model(tmp_path, seconds, delay):
    direct = json.dumps({"question": "hello", "route": "direct", "query": "hello"})
    async with mistral_server({"route": [direct], "direct": [{"content": "Hello from Mistral.", "delay": delay}]}) as (
        fake,
        base,
    ):
        config = write_config(tmp_path, extra=mistral_config(base, f"request_timeout_seconds = {seconds}"))
        code, out, err = await run_cli(
            "ask", "hello", "--json", "--config", str(config), env={"MISTRAL_API_KEY": "test-key", "TAVILY_API_KEY": ""}
        )
    assert code == 0, err
    result = json.loads(out)
    assert result["answer"] == "Hello from Mistral." and result["kind"] == "direct"
    assert fake.tasks() == ["check", "route", "direct"]  # the start-up call, then the question
