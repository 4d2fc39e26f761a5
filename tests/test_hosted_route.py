"""A hosted chat model routes a present-tense question about the documented product ("which
version is currently supported?") to the knowledge base, as the offline router does: the route
prompt says so, and a model that still picks the web for it is corrected. Through the real
`threadwise ask` process against a local OpenAI-compatible server and a local Tavily server (the
HTTP boundary, tests/fakes/model_apis.py and tests/conftest.py)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest

from graphs import signals
from tests.fakes.model_apis import model_api, models_config

ROOT = Path(__file__).resolve().parent.parent


def websearch(question: str) -> str:
    """The route a model that reads "currently" as news writes."""
    return json.dumps({"question": question, "route": "websearch", "query": question})


async def ask(folder: Path, question: str) -> dict:
    """``threadwise ask --json QUESTION`` in ``folder`` as a child process (the fakes answer on
    this test's event loop meanwhile)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MISTRAL_", "SLACK_", "DISCORD_"))}
    env.update(OPENAI_API_KEY="sk-test", TAVILY_API_KEY="tvly-test", HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT))
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        "ask",
        "--config",
        "config.toml",
        "--json",
        question,
        cwd=folder,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 300)
    assert proc.returncode == 0, err.decode()[-3000:]
    return json.loads(out)


@pytest.mark.parametrize(
    "question, documents",
    [
        ("which version of teambot is currently supported?", True),
        ("what's the latest config format?", True),
        ("is the API down right now?", False),
        ("any news today about the outage?", False),
        ("what's the current price of the pro plan?", False),
    ],
)
def test_present_tense_questions_about_the_documents_are_told_from_questions_about_now(question, documents):
    assert signals.asks_what_documents_state(question) == documents


@pytest.mark.slow
async def test_a_currently_question_about_the_product_is_answered_from_the_documents(tmp_path, tavily):
    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "versions.md").write_text(
        "# Versions\n\nTeambot 4.2 is currently supported. Version 3 gets security fixes until June.\n"
    )
    now = "is the teambot API down right now?"
    script = {"route": [websearch("which version of teambot is currently supported?"), websearch(now)]}
    async with model_api("openai", script) as (fake, base):
        (tmp_path / "config.toml").write_text(
            f'[knowledge]\nsources = ["kb"]\nembeddings = "none"\n'
            f'[web]\napi_base_url = "{tavily.base_url}"\n'
            '[service]\ncheckpoint_db = "data/checkpoints.sqlite"\nbookkeeping_db = "data/bookkeeping.sqlite"\n'
            f"[models]\n{models_config('openai', base)}"
        )
        answer = await ask(tmp_path, "which version of teambot is currently supported?")
        # the route prompt the model read says such a question is the knowledge base's
        system = fake.system_of(fake.bodies("route")[0])
        assert "which version is currently supported?" in system and "vectorstore" in system
        assert answer["sources"] == ["versions.md"], answer
        assert "retrieve" in answer["path"] and "web_search" not in answer["path"], answer
        assert tavily.requests == []
        # a question about the present moment still goes to the web
        live = await ask(tmp_path, now)
    assert "web_search" in live["path"], live
    assert len(tavily.requests) == 1


@pytest.mark.slow
async def test_a_hosted_model_that_greets_a_reworded_learned_question_is_overruled(tmp_path, monkeypatch):
    """The chat model routes "wifi password pls" as small talk; an expert answered "what is the
    guest wifi password in the office?" before: the knowledge base (and the entry) answers it."""
    from bot.config import Secrets, load_settings
    from bot.platforms.console import ConsoleResponder
    from bot.runtime import open_runtime
    from tests.fakes.model_apis import KEYS

    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "office.md").write_text("# Office\n\nThe office opens at 8 am and closes at 7 pm.\n")
    direct = json.dumps({"question": "wifi password pls", "route": "direct", "query": ""})
    for name, value in KEYS["openai"].items():
        monkeypatch.setenv(name, value)
    async with model_api("openai", {"route": [direct]}) as (fake, base):
        (tmp_path / "config.toml").write_text(
            f'[knowledge]\nsources = ["{tmp_path / "kb"}"]\nembeddings = "local"\n[web]\nenabled = false\n'
            f'[service]\ncheckpoint_db = "{tmp_path}/cp.sqlite"\nbookkeeping_db = "{tmp_path}/bk.sqlite"\n'
            f'[learning]\nindex_db = "{tmp_path}/learned.sqlite"\n'
            f"[models]\n{models_config('openai', base)}"
        )
        settings = load_settings(tmp_path / "config.toml")
        async with open_runtime(settings, Secrets()) as rt:
            assert rt.learned is not None
            rt.learned.add("what is the guest wifi password in the office?", "It is on the fridge door.", "Ana")
            out = ConsoleResponder("w", show_status=False, show_answers=False)
            result = await rt.service.ask("console:w", "wifi password pls", out)
    assert result is not None and result.values["route"] == "vectorstore", result.values.get("path")
    assert "retrieve" in result.values["path"] and "direct" not in result.values["path"]
    assert "direct" not in fake.tasks()
