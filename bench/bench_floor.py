"""The CPU floor of one question: what the libraries alone cost, without any of our code.

Issue 11 asks for <= 10 ms of event-loop CPU per question. One Slack question answered from
the knowledge base needs, at the least, these library calls (counts as the bot makes them
for one question alone, ``bench/bench_load.py`` level 1):

- slack-bolt: two signed Events API deliveries dispatched (``app_mention`` and the
  ``message`` event Slack also sends for a channel mention), ``AsyncApp.async_dispatch``
  with signature verification, a listener that only acks;
- slack_sdk: 5 Web API calls on one shared aiohttp session (reactions.add x2,
  reactions.remove, chat.postMessage, users.info);
- langchain-mistralai: 4 ``ChatMistralAI.ainvoke`` calls with prompts of the graph's sizes
  (route ~2 k characters, grade ~6 k, generate ~6 k, grade_answer ~3 k), on its own httpx
  client (``client=default``) and on the aiohttp-backed client the bot uses
  (``client=aiohttp``);
- langgraph: one run of a 7-node graph (the path of a knowledge-base answer: start, route,
  retrieve, grade_documents, generate, grade_answer, finish), every node a no-op that
  writes one key and one custom stream event, with ``AsyncSqliteSaver`` on a file,
  ``durability="exit"``, ``stream_mode=["custom", "values"]``.

The fakes (tests/fakes/slack_api.py's FakeSlackAPI, bench_harness.FakeLLM with no delay)
run in a child process, so the CPU measured (``time.process_time`` of this process) is the
client side only. Each component runs ``--questions`` times, ``--concurrency`` at once (as
under load), and is reported as CPU milliseconds per question; the sum is the floor: no
product built on these libraries can spend less per question. Medians of ``--repeats``.

Usage: python bench/bench_floor.py [--questions 200] [--concurrency 50] [--repeats 3]
Writes bench/results/floor-<label>.json.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_harness import RESULTS, git_label  # noqa: E402

FAKES = r"""
import asyncio, json, sys
sys.path.insert(0, sys.argv[1]); sys.path.insert(0, sys.argv[1] + "/bench")
from bench_harness import FakeLLM
from tests.fakes.slack_api import FakeSlackAPI

async def main():
    slack = await FakeSlackAPI().start()
    llm = await FakeLLM(delay=0.0).start()
    print(json.dumps({"slack": f"http://127.0.0.1:{slack.port}/api/", "llm": llm.base_url}), flush=True)
    await asyncio.Event().wait()

asyncio.run(main())
"""

#: timestamps of the Web API calls, unique across repeats (the fake refuses a reaction twice)
UNIQUE = itertools.count(1)

PROMPT_CHARS = {"route": 2000, "grade": 6000, "generate": 6000, "grade_answer": 3000}


async def cpu_per_question(
    make: Callable[[int], Awaitable[Any]], questions: int, concurrency: int
) -> tuple[float, float]:
    """CPU milliseconds per question for ``make(i)`` run ``questions`` times, ``concurrency``
    at once (after 10 warm-up calls): ``(whole process, event loop thread)``."""
    for i in range(10):
        await make(i)
    sem = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with sem:
            await make(i)

    t0, l0 = time.process_time(), time.thread_time()
    await asyncio.gather(*(one(i) for i in range(questions)))
    return ((time.process_time() - t0) * 1000 / questions, (time.thread_time() - l0) * 1000 / questions)


async def measure(urls: dict[str, str], args: argparse.Namespace) -> dict[str, tuple[float, float]]:
    import aiohttp
    import httpx
    from langchain_core.messages import HumanMessage, SystemMessage
    from langchain_mistralai import ChatMistralAI
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
    from langgraph.config import get_stream_writer
    from langgraph.graph import END, START, MessagesState, StateGraph
    from slack_bolt.app.async_app import AsyncApp
    from slack_bolt.request.async_request import AsyncBoltRequest
    from slack_sdk.errors import SlackApiError
    from slack_sdk.web.async_client import AsyncWebClient

    from graphs.http_pool import model_http_client
    from tests.fakes.slack_api import BOT_TOKEN, BOT_USER_ID, SIGNING_SECRET, SlackEvents

    out: dict[str, tuple[float, float]] = {}
    session = aiohttp.ClientSession()
    slack = AsyncWebClient(token=BOT_TOKEN, base_url=urls["slack"], session=session)

    # ---- slack-bolt: two deliveries per question --------------------------------------
    app = AsyncApp(token=BOT_TOKEN, signing_secret=SIGNING_SECRET, client=slack, request_verification_enabled=True)

    @app.event("app_mention")
    async def _mention(ack: Any) -> None:
        await ack()

    @app.event("message")
    async def _message(ack: Any) -> None:
        await ack()

    events = SlackEvents()

    async def bolt(i: int) -> None:
        ts = f"1700000000.{i:06d}"
        for kind in ("app_mention", "message"):
            body, headers = events.event(
                events.message(user="U1", channel="C1", text=f"<@{BOT_USER_ID}> q {i}", ts=ts, kind=kind)
            )
            response = await app.async_dispatch(AsyncBoltRequest(body=body, headers=headers))
            assert response.status == 200, response.body

    out["bolt: 2 event deliveries"] = await cpu_per_question(bolt, args.questions, args.concurrency)

    # ---- slack_sdk: 5 Web API calls ----------------------------------------------------
    async def web(i: int) -> None:
        ts = f"1700000000.{next(UNIQUE):06d}"
        await slack.reactions_add(channel="C1", timestamp=ts, name="eyes")
        try:
            await slack.users_info(user=f"U{i}")
        except SlackApiError:  # the fake knows no user: the same request and response handling
            pass
        await slack.chat_postMessage(channel="C1", thread_ts=ts, text="an answer " * 60)
        await slack.reactions_remove(channel="C1", timestamp=ts, name="eyes")
        await slack.reactions_add(channel="C1", timestamp=ts, name="white_check_mark")

    out["slack_sdk: 5 Web API calls"] = await cpu_per_question(web, args.questions, args.concurrency)

    # ---- langchain-mistralai: 4 chat completions ----------------------------------------
    system = "You are a grader. " * 20

    def model(client: str) -> ChatMistralAI:
        chat = ChatMistralAI(
            model="mistral-small-latest", api_key="bench-key", endpoint=urls["llm"], max_retries=0, timeout=30
        )
        if client == "aiohttp":
            old = chat.async_client
            chat.async_client = model_http_client(
                base_url=old.base_url, headers=old.headers, timeout=30, connections=256
            )
        else:
            chat.async_client = httpx.AsyncClient(
                base_url=str(chat.async_client.base_url),
                headers=chat.async_client.headers,
                timeout=30,
                limits=httpx.Limits(max_keepalive_connections=256),
            )
        return chat

    for client in ("default", "aiohttp"):
        chat = model(client)

        async def llm(i: int, chat: ChatMistralAI = chat) -> None:
            for task, chars in PROMPT_CHARS.items():
                await chat.ainvoke([SystemMessage(system + task), HumanMessage(("word " * (chars // 5)) + str(i))])

        out[f"langchain-mistralai: 4 calls (client={client})"] = await cpu_per_question(
            llm, args.questions, args.concurrency
        )
        close = getattr(chat.async_client, "aclose", None)
        if close:
            await close()

    # ---- langgraph: a 7-node run with the SQLite checkpointer -----------------------------
    class State(MessagesState):
        route: str
        documents: list[str]
        generation: str
        path: list[str]

    def node(name: str) -> Callable[[State], Awaitable[dict[str, Any]]]:
        async def run(state: State) -> dict[str, Any]:
            get_stream_writer()({"phase": name})
            return {"path": [*state.get("path", []), name], name if name in State.__annotations__ else "route": name}

        return run

    names = ["start", "route", "retrieve", "grade_documents", "generate", "grade_answer", "finish"]
    g = StateGraph(State)
    for name in names:
        g.add_node(name, node(name))
    g.add_edge(START, names[0])
    for a, b in zip(names, names[1:], strict=False):
        g.add_edge(a, b)
    g.add_edge(names[-1], END)
    with tempfile.TemporaryDirectory() as tmp:
        async with AsyncSqliteSaver.from_conn_string(str(Path(tmp) / "checkpoints.sqlite")) as saver:
            graph = g.compile(checkpointer=saver)

            async def run_graph(i: int) -> None:
                cfg = {"configurable": {"thread_id": f"t{i}-{time.monotonic_ns()}"}}
                async for _ in graph.astream(
                    {"messages": [HumanMessage(f"question {i}")]},
                    cfg,
                    stream_mode=["custom", "values"],
                    durability="exit",
                ):
                    pass

            out["langgraph: 7-node run, SQLite checkpoint"] = await cpu_per_question(
                run_graph, args.questions, args.concurrency
            )
            graph = g.compile()
            out["langgraph: 7-node run, no checkpointer"] = await cpu_per_question(
                run_graph, args.questions, args.concurrency
            )
    await session.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--questions", type=int, default=200)
    ap.add_argument("--concurrency", type=int, default=50)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--label", default=os.environ.get("BENCH_LABEL") or "")
    args = ap.parse_args()
    fakes = subprocess.Popen([sys.executable, "-c", FAKES, str(ROOT)], stdout=subprocess.PIPE, text=True)
    try:
        line = fakes.stdout.readline() if fakes.stdout else ""
        if not line:
            sys.exit("bench_floor: the fakes did not start")
        urls = json.loads(line)
        runs = []
        for r in range(args.repeats):
            runs.append(asyncio.run(measure(urls, args)))
            print(
                f"[run {r + 1}] " + ", ".join(f"{k}: {v[0]:.2f}/{v[1]:.2f} ms" for k, v in runs[-1].items()), flush=True
            )
    finally:
        fakes.terminate()
        fakes.wait(10)
    summary = {
        k: {
            "process_ms": round(statistics.median(run[k][0] for run in runs), 3),
            "loop_ms": round(statistics.median(run[k][1] for run in runs), 3),
        }
        for k in runs[0]
    }
    parts = [k for k in summary if "client=default" not in k and "no checkpointer" not in k]
    summary["floor: sum (model on the aiohttp client, SQLite checkpoint)"] = {
        m: round(sum(summary[k][m] for k in parts), 3) for m in ("process_ms", "loop_ms")
    }
    label = args.label or git_label()["commit"]
    result = {
        "label": label,
        **git_label(),
        "updated": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "settings": vars(args),
        "cpu_ms_per_question": summary,
        "runs": runs,
        "load_average": os.getloadavg(),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"floor-{label}.json"
    path.write_text(json.dumps(result, indent=1) + "\n")
    print("CPU ms per question: process / event loop thread")
    for k, v in summary.items():
        print(f"{v['process_ms']:8.2f} {v['loop_ms']:8.2f}  {k}")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
