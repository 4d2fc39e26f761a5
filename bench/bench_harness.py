"""What the load benchmark runs against, all on 127.0.0.1: the real ``threadwise run``
process in Slack HTTP mode, a Mistral-shaped chat server with a fixed delay per call, and
readings of the bot process from /proc.

- :class:`BotProcess` writes a config.toml (Slack HTTP mode pointed at a
  :class:`tests.fakes.slack_api.FakeSlackAPI`, Mistral pointed at :class:`FakeLLM`,
  keyword-only retrieval over a corpus folder), starts ``python -m bot run --config CFG``
  and reads its CPU time (``/proc/PID/stat``) and memory (``/proc/PID/status``).
- :class:`FakeLLM` answers ``POST /v1/chat/completions`` like Mistral after ``delay``
  seconds, with a valid reply for each task (the ``TASK:`` line of the system prompt, see
  graphs/prompts.py), and records every call's start and end (calls in flight).
- :class:`SlackTracker` reads the fake Slack's call record incrementally: first reaction,
  answer post and resting reaction of each question.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.fakes.bot_process import child_pids  # noqa: E402
from tests.fakes.slack_api import BOT_TOKEN, SIGNING_SECRET, FakeSlackAPI  # noqa: E402

DEFAULT_CORPUS = ROOT.parent / "shared" / "corpus" / "langgraph-docs"
DEFAULT_EVAL = ROOT.parent / "shared" / "eval" / "dev.jsonl"
RESULTS = ROOT / "bench" / "results"
CLK_TCK = os.sysconf("SC_CLK_TCK")
RESTING = {"white_check_mark", "disappointed", "raising_hand"}


# ---- small statistics ----------------------------------------------------------------
def percentile(values: list[float], q: float) -> float | None:
    """The ``q`` quantile (0..1) of ``values`` by linear interpolation; None when empty."""
    if not values:
        return None
    xs = sorted(values)
    pos = (len(xs) - 1) * q
    lo, hi = int(pos), min(int(pos) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def median_of(values: list[Any]) -> Any:
    """Median of the numbers in ``values`` (None entries skipped); None when none."""
    xs = [v for v in values if isinstance(v, (int, float))]
    return statistics.median(xs) if xs else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def git_label() -> dict[str, str]:
    """Commit, branch and a dirty flag of the checkout the bench runs from."""

    def git(*args: str) -> str:
        try:
            return subprocess.run(
                ["git", "-C", str(ROOT), *args], capture_output=True, text=True, timeout=10
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    dirty = bool(git("status", "--porcelain", "--untracked-files=no", "--", "bot", "graphs"))
    return {
        "commit": git("rev-parse", "--short", "HEAD"),
        "branch": git("rev-parse", "--abbrev-ref", "HEAD"),
        "dirty": str(dirty).lower(),
    }


def load_questions(path: Path, kinds: tuple[str, ...] = ("kb",)) -> list[str]:
    """Question texts of the eval file (JSONL, one object with ``kind`` and ``question`` a line)."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [r["question"] for r in rows if r.get("kind") in kinds]


# ---- the Mistral-shaped chat server ------------------------------------------------------
_GENERATE_REPLY = (
    "Set it in `langgraph.json` and restart the server [1]. The setting is read once at start-up, so a "
    "running deployment keeps the old value until it restarts [1]. For a local run, `langgraph dev` picks "
    "the change up on the next reload [2].\n\n- check the logs for the new value\n- then retry the request [2]"
)


def _task(messages: list[dict[str, Any]]) -> str:
    system = next((str(m.get("content") or "") for m in messages if m.get("role") == "system"), "")
    first = system.lstrip().split("\n", 1)[0]
    return first[len("TASK:") :].strip() if first.startswith("TASK:") else ""


def _content_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):  # content parts
        return "\n".join(str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in content)
    return str(content or "")


def reply_for(task: str, messages: list[dict[str, Any]]) -> str:
    """A valid reply for each graph task (shapes of tests.fakes.chat_model.ScriptedChatModel.default_reply):
    route to the knowledge base, every document relevant, a cited answer, grounded and useful."""
    users = [_content_text(m) for m in messages if m.get("role") == "user"]
    last = users[-1] if users else ""
    if task == "route":
        question = last.rsplit("New message:", 1)[-1].strip()[:500] or "question"
        return json.dumps({"question": question, "route": "vectorstore", "query": question})
    if task == "grade_documents":
        everything = "\n".join(_content_text(m) for m in messages)
        ids = sorted({int(i) for i in re.findall(r"^\[(\d+)\]", everything, re.M)}) or [1]
        return json.dumps(
            {
                "documents": [{"id": i, "relevant": True, "facts": "set it in langgraph.json"} for i in ids],
                "feedback": "",
            }
        )
    if task == "generate":
        return _GENERATE_REPLY
    if task == "grade_answer":
        return json.dumps({"grounded": True, "useful": True, "feedback": ""})
    if task == "rewrite":
        return json.dumps({"query": "langgraph configuration setting"})
    if task == "direct":
        return "Hello! Ask me anything about the docs."
    return "ok"


class FakeLLM:
    """Mistral's ``POST /v1/chat/completions`` after ``delay`` seconds per call.

    ``events`` holds ``(monotonic time, +1|-1)`` at each call's start and end (calls in
    flight), ``tasks`` the task of each call in arrival order.
    """

    def __init__(self, delay: float = 0.1) -> None:
        self.delay = delay
        self.events: list[tuple[float, int]] = []
        self.tasks: list[tuple[float, str]] = []
        self.in_flight = 0
        self.base_url = ""
        self._runner: web.AppRunner | None = None

    async def start(self) -> FakeLLM:
        app = web.Application(client_max_size=32 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._chat)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.base_url = f"http://127.0.0.1:{port}/v1"
        return self

    async def stop(self) -> None:
        if self._runner:
            await self._runner.cleanup()

    async def _chat(self, request: web.Request) -> web.Response:
        now = time.monotonic()
        self.in_flight += 1
        self.events.append((now, +1))
        try:
            body = await request.json()
            messages = body.get("messages") or []
            task = _task(messages)
            self.tasks.append((now, task))
            await asyncio.sleep(self.delay)
            content = reply_for(task, messages)
            return web.json_response(
                {
                    "id": f"cmpl-{len(self.tasks)}",
                    "object": "chat.completion",
                    "model": body.get("model", "m"),
                    "created": int(time.time()),
                    "choices": [
                        {
                            "index": 0,
                            "finish_reason": "stop",
                            "message": {"role": "assistant", "content": content, "tool_calls": None},
                        }
                    ],
                    "usage": {"prompt_tokens": 100, "completion_tokens": 50, "total_tokens": 150},
                }
            )
        finally:
            self.in_flight -= 1
            self.events.append((time.monotonic(), -1))

    def window(self, start: float, end: float) -> dict[str, Any]:
        """Calls in flight between ``start`` and ``end`` (monotonic): max, time-weighted mean
        over the window and over the time with at least one call, and calls by task."""
        level, peak, area, busy = 0, 0, 0.0, 0.0
        last = start
        for t, delta in sorted(self.events):
            if t < start:
                level += delta
                continue
            if t > end:
                break
            area += level * (t - last)
            busy += (t - last) if level > 0 else 0.0
            last = t
            level += delta
            peak = max(peak, level)
        area += level * (end - last)
        busy += (end - last) if level > 0 else 0.0
        span = max(end - start, 1e-9)
        by_task: dict[str, int] = {}
        for t, task in self.tasks:
            if start <= t <= end:
                by_task[task or "?"] = by_task.get(task or "?", 0) + 1
        return {
            "max": peak,
            "mean": round(area / span, 2),
            "mean_while_busy": round(area / busy, 2) if busy else 0.0,
            "calls": sum(by_task.values()),
            "calls_by_task": by_task,
        }


# ---- what the fake Slack saw, per question ------------------------------------------------
@dataclass
class Question:
    """One question sent to the bot: its message ts (the thread root) and what happened."""

    ts: str
    user: str
    text: str
    sent: float = 0.0  # monotonic, just before the first event was posted
    acks: list[float] = field(default_factory=list)  # seconds per event delivery
    statuses: list[int] = field(default_factory=list)
    first_reaction: float | None = None  # monotonic arrival of the first reactions.add
    answer: float | None = None  # first chat.postMessage in the thread
    resting: float | None = None  # reactions.add of done / apology / waiting for a human
    resting_name: str = ""

    @property
    def done(self) -> bool:
        return self.answer is not None and self.resting is not None


class SlackTracker:
    """Reads ``fake.calls`` from where it left off and fills in each :class:`Question`."""

    def __init__(self, fake: FakeSlackAPI, channel: str) -> None:
        self.fake, self.channel = fake, channel
        self.by_ts: dict[str, Question] = {}
        self._seen = 0

    def add(self, q: Question) -> None:
        self.by_ts[q.ts] = q

    def update(self) -> None:
        calls = self.fake.calls
        while self._seen < len(calls):
            c = calls[self._seen]
            self._seen += 1
            if not c.ok:
                continue
            if c.method == "reactions.add":
                q = self.by_ts.get(str(c.args.get("timestamp", "")))
                if q is None:
                    continue
                if q.first_reaction is None:
                    q.first_reaction = c.at
                if c.args.get("name") in RESTING and q.resting is None:
                    q.resting, q.resting_name = c.at, str(c.args.get("name"))
            elif c.method == "chat.postMessage":
                q = self.by_ts.get(str(c.args.get("thread_ts", "")))
                if q is not None and q.answer is None:
                    q.answer = c.at


# ---- the bot process ------------------------------------------------------------------
def proc_cpu_seconds(pid: int, thread: int | None = None) -> float:
    """User + system CPU seconds of process ``pid`` (all its threads), from /proc/PID/stat;
    with ``thread``, of that thread only (/proc/PID/task/TID/stat: ``thread=pid`` is the main
    thread, which runs the event loop)."""
    path = Path(f"/proc/{pid}/stat") if thread is None else Path(f"/proc/{pid}/task/{thread}/stat")
    fields = path.read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime (fields 14, 15 of proc(5))


def proc_memory_mb(pid: int) -> dict[str, float]:
    """``VmRSS`` (now) and ``VmHWM`` (peak) of process ``pid`` in MB, from /proc/PID/status."""
    out: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = round(int(value.split()[0]) / 1024, 1)
    return out


def write_bench_config(
    folder: Path,
    *,
    slack_api: str,
    llm_base_url: str,
    port: int,
    corpus: Path,
    embeddings: str = "none",
    index_dir: Path | None = None,
) -> Path:
    """A config.toml for the bench under ``folder`` (data files in ``folder/data``).

    Only what the bench must set is written; every other setting (concurrency caps,
    budgets, log level) keeps the product's default, so a change of default shows up.
    ``BENCH_SET`` in the environment overrides settings for an A/B run: ``;``-separated
    ``section.key=TOML value`` items, e.g. ``service.event_loop="asyncio";slack.reactions.change_interval_seconds=0``.
    """
    data = folder / "data"
    path = folder / "config.toml"
    path.write_text(
        f"""
[models]
provider = "mistral"
mistral_base_url = "{llm_base_url}"

[knowledge]
sources = ["{corpus}"]
index_dir = "{index_dir or data / "index"}"
embeddings = "{embeddings}"
description = "the LangGraph documentation: building, running and deploying LangGraph agents"

[web]
enabled = false

[service]
data_dir = "{data}"
checkpoint_db = "{data}/checkpoints.sqlite"
bookkeeping_db = "{data}/bookkeeping.sqlite"

[slack]
mode = "http"
http_host = "127.0.0.1"
http_port = {port}
api_base_url = "{slack_api}"
experts = ["UEXPERT", "SEXPERTS"]
admins = ["UADMIN"]
""",
        encoding="utf-8",
    )
    overrides = [item.strip() for item in os.environ.get("BENCH_SET", "").split(";") if item.strip()]
    if overrides:
        path.write_text(with_overrides(path.read_text(encoding="utf-8"), overrides), encoding="utf-8")
    return path


def with_overrides(text: str, overrides: list[str]) -> str:
    """``text`` (TOML) with each ``section.key=value`` set: the line goes under ``[section]``
    (a new table at the end when the text has none)."""
    lines = text.splitlines()
    for item in overrides:
        dotted, _, value = item.partition("=")
        section, _, key = dotted.strip().rpartition(".")
        header = f"[{section}]"
        if header in lines:
            lines.insert(lines.index(header) + 1, f"{key} = {value.strip()}")
        else:
            lines += ["", header, f"{key} = {value.strip()}"]
    return "\n".join(lines) + "\n"


def bot_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a bot process: this checkout first on PYTHONPATH, fake tokens only."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "DISCORD_", "MISTRAL_", "TAVILY_"))}
    env.update(
        SLACK_BOT_TOKEN=BOT_TOKEN,
        SLACK_SIGNING_SECRET=SIGNING_SECRET,
        MISTRAL_API_KEY="bench-key",
        HF_HUB_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
        PYTHONPATH=str(ROOT),
    )
    env.update(extra or {})
    return env


class BotProcess:
    """``python -m bot run --config CFG`` (Slack HTTP mode) in a subprocess; log in ``folder``."""

    def __init__(self, folder: Path, fake: FakeSlackAPI, llm: FakeLLM, corpus: Path) -> None:
        self.port = free_port()
        self.folder = folder
        self.config = write_bench_config(
            folder, slack_api=fake.base_url, llm_base_url=llm.base_url, port=self.port, corpus=corpus
        )
        self.log = folder / "threadwise.log"
        self.url = f"http://127.0.0.1:{self.port}"
        self.started = time.monotonic()
        self._log_file = self.log.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bot", "run", "--config", str(self.config)],
            cwd=ROOT,
            env=bot_env(),
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
        )
        self.pid = self.proc.pid

    async def wait_ready(self, session: aiohttp.ClientSession, timeout: float = 300) -> float:
        """Wait for ``/healthz``; returns seconds since start.

        Raises:
            RuntimeError: the process exited (with the end of its log).
            TimeoutError: not ready within ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"threadwise run exited ({self.proc.returncode}):\n{self.tail()}")
            try:
                async with session.get(self.url + "/healthz", timeout=aiohttp.ClientTimeout(total=5)) as resp:
                    if resp.status == 200:
                        return time.monotonic() - self.started
            except (TimeoutError, aiohttp.ClientError):
                pass
            await asyncio.sleep(0.2)
        raise TimeoutError(f"threadwise run not ready in {timeout}s:\n{self.tail()}")

    def children(self) -> list[int]:
        """Process ids of the bot's child processes (its graph workers, ``[service] graph_workers``)."""
        return child_pids(self.pid)

    def cpu_seconds(self) -> float:
        """CPU seconds of the bot: its process and its graph worker processes."""
        total = proc_cpu_seconds(self.pid)
        for child in self.children():
            try:
                total += proc_cpu_seconds(child)
            except OSError:  # exited meanwhile
                pass
        return total

    def loop_cpu_seconds(self) -> float:
        """CPU seconds of the bot's main thread: its event loop (the executor threads that run
        keyword search and SQLite calls are the rest of :meth:`cpu_seconds`)."""
        return proc_cpu_seconds(self.pid, self.pid)

    def memory_mb(self) -> dict[str, float]:
        """The bot process's ``VmRSS``/``VmHWM`` (MB), and ``rss_all``/``peak_all`` with its graph workers."""
        own = proc_memory_mb(self.pid)
        out = {**own, "rss_all": own.get("VmRSS", 0.0), "peak_all": own.get("VmHWM", 0.0)}
        for child in self.children():
            try:
                mem = proc_memory_mb(child)
            except OSError:
                continue
            out["rss_all"] = round(out["rss_all"] + mem.get("VmRSS", 0.0), 1)
            out["peak_all"] = round(out["peak_all"] + mem.get("VmHWM", 0.0), 1)
        return out

    def tail(self, chars: int = 3000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def stop(self, timeout: float = 30) -> int | None:
        """SIGTERM (graceful: answers in flight finish), then SIGKILL after ``timeout`` s."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log_file.close()
        return self.proc.returncode
