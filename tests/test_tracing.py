"""Tracing (LangSmith or any LangChain tracer): each graph run is one trace named
``threadwise`` with the platform, the thread key and the message id, and its model calls
are child runs carrying the same metadata. Observed through a LangChain callback handler
given to the service's runs, as a tracer receives them, and through a local LangSmith
endpoint receiving a real process's traces; no network."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler

from bot.platforms.console import ConsoleResponder
from bot.protocol import IncomingMessage
from tests.conftest import scripted_runtime
from tests.fakes import write_platform_config
from tests.fakes.langsmith_api import langsmith_server
from tests.fakes.mistral_stall import mistral_server, models_section
from tests.fakes.slack_api import KB_FILES

ROOT = Path(__file__).resolve().parent.parent


class Recorder(BaseCallbackHandler):
    """What a tracer sees: the root chain runs and the chat-model runs."""

    run_inline = True

    def __init__(self) -> None:
        self.roots: list[dict[str, Any]] = []
        self.model_runs: list[dict[str, Any]] = []

    def on_chain_start(
        self,
        serialized: Any,
        inputs: Any,
        *,
        run_id: Any,
        parent_run_id: Any = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kw: Any,
    ) -> None:
        if parent_run_id is None:
            self.roots.append({"name": kw.get("name"), "tags": tags or [], "metadata": metadata or {}})

    def on_chat_model_start(
        self,
        serialized: Any,
        messages: Any,
        *,
        run_id: Any,
        parent_run_id: Any = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kw: Any,
    ) -> None:
        self.model_runs.append({"tags": tags or [], "metadata": metadata or {}, "parent": parent_run_id})


async def test_graph_runs_carry_run_name_tags_and_metadata(settings):
    recorder = Recorder()
    key = "slack:T1:C1:1712.5"
    async with scripted_runtime(settings) as (rt, model):
        rt.service.observer.callbacks.append(recorder)
        out = ConsoleResponder(key, show_status=False, show_answers=False)
        msg = IncomingMessage(
            platform="slack",
            thread_key=key,
            message_id="slack:C1:1712.5",
            author_id="U1",
            author_name="Una",
            text="How do I deploy?",
            channel="C1",
        )
        result = await rt.service.handle(msg, out)
    assert result is not None and result.answer is not None and result.answer.kind == "answer"
    assert len(recorder.roots) == 1
    root = recorder.roots[0]
    assert root["name"] == "threadwise"
    assert {"platform:slack", "kind:question"} <= set(root["tags"])
    assert {k: root["metadata"].get(k) for k in ("thread_key", "platform", "message_id", "kind")} == {
        "thread_key": key,
        "platform": "slack",
        "message_id": "slack:C1:1712.5",
        "kind": "question",
    }
    # every model call of the run is a child run with the run's metadata and tags
    assert len(recorder.model_runs) == len(model.calls) > 0
    for run in recorder.model_runs:
        assert run["parent"] is not None
        assert run["metadata"]["thread_key"] == key and run["metadata"]["message_id"] == "slack:C1:1712.5"
        assert "platform:slack" in run["tags"]


async def test_a_resumed_run_is_traced_as_a_resume(settings):
    recorder = Recorder()
    key = "console:review"
    script = {"grade_answer": ['{"grounded": false, "useful": false}']}  # no answer passes: ask the experts
    async with scripted_runtime(settings, script) as (rt, _):
        rt.service.observer.callbacks.append(recorder)
        out = ConsoleResponder(key, show_status=False, show_answers=False)
        paused = await rt.service.ask(key, "How do I deploy?", out)
        assert paused is not None and paused.help_request is not None
        resumed = await rt.service.ask(key, "answer: run make deploy", out)
    assert resumed is not None and resumed.answer is not None and resumed.answer.kind == "human"
    assert [r["metadata"]["kind"] for r in recorder.roots] == ["question", "resume"]
    assert all(r["metadata"]["thread_key"] == key and r["metadata"]["platform"] == "console" for r in recorder.roots)


async def test_langsmith_receives_the_traces_of_a_real_process(tmp_path):
    """The README's recipe: LANGSMITH_TRACING, LANGSMITH_API_KEY, LANGSMITH_PROJECT (and
    LANGSMITH_ENDPOINT, here a local fake) and nothing else: ``python -m threadwise ask``
    sends one trace named ``threadwise`` to the project, with the thread key as metadata,
    and the model calls as its descendants."""
    async with mistral_server() as model, langsmith_server() as langsmith:
        cfg = write_platform_config(tmp_path, KB_FILES, models_section(model))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LANGSMITH_", "LANGCHAIN_"))}
        env.update(
            PYTHONPATH=str(ROOT),
            MISTRAL_API_KEY="k",
            LANGSMITH_TRACING="true",
            LANGSMITH_API_KEY="lsv2-test",
            LANGSMITH_PROJECT="threadwise-test",
            LANGSMITH_ENDPOINT=langsmith.base_url,
        )
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "threadwise",
            "ask",
            "how do I roll back a deploy?",
            "--thread",
            "traced",
            "--config",
            str(cfg),
            env=env,
            cwd=tmp_path,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate(), 180)
        assert proc.returncode == 0, err.decode()[-2000:]
        assert "make rollback" in out.decode()
    roots = langsmith.roots()
    assert [r["name"] for r in roots] == ["threadwise"]
    root = roots[0]
    assert root["session_name"] == "threadwise-test"
    assert {"platform:console", "kind:question"} <= set(root["tags"])
    meta = langsmith.metadata(root)
    assert (meta["thread_key"], meta["platform"], meta["kind"]) == ("console:traced", "console", "question")
    model_runs = [r for r in langsmith.runs.values() if r.get("run_type") == "llm"]
    # the start-up check of the model (TASK: check) is not a question: no trace of its own
    questions = [r for r in model.requests if not r["messages"][0]["content"].startswith("TASK: check")]
    assert len(model_runs) == len(questions) == len(model.requests) - 1 > 0
    assert all(
        r["trace_id"] == root["id"] and langsmith.metadata(r)["thread_key"] == "console:traced" for r in model_runs
    )
