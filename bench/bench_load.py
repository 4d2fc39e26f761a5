"""Load benchmark of issue 11 ("Fast under load"), measured from outside the bot.

The real ``threadwise run`` process in Slack HTTP mode gets signed Events API requests
over HTTP (an ``app_mention`` and the ``message`` event Slack also sends for a channel
mention); every Web API call it makes lands on the fake Slack (tests/fakes/slack_api.py),
which timestamps it; the chat model is a Mistral-shaped server taking ``--llm-delay``
seconds per call; retrieval is keyword-only over the LangGraph docs corpus.

One run = one fresh bot process (fresh data folder): start, one warm-up question, then
``--singles`` questions one at a time, then each burst size at once (every question in
its own thread, from its own user). Each figure is computed per run; the summary is the
median over ``--repeats`` runs, and ratios are taken within a run.

Usage: python bench/bench_load.py [--repeats 3] [--sizes 1,50,200] [--label NAME]
Writes bench/results/load-<label>.json (key "load"); bench/bench_report.py makes the table.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import resource
import shutil
import sqlite3
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_harness import (  # noqa: E402
    DEFAULT_CORPUS,
    DEFAULT_EVAL,
    RESULTS,
    BotProcess,
    FakeLLM,
    Question,
    SlackTracker,
    git_label,
    load_questions,
    median_of,
    percentile,
)

from tests.fakes.slack_api import BOT_USER_ID, FakeSlackAPI, SlackEvents  # noqa: E402

CHANNEL = "C0BENCH"


def _ms(x: float | None) -> float | None:
    return None if x is None else round(x * 1000, 1)


def _r(x: float | None, nd: int = 3) -> float | None:
    return None if x is None else round(x, nd)


class Runner:
    """One bot process with its fakes; :meth:`phase` sends ``n`` questions at once."""

    def __init__(self, args: argparse.Namespace, folder: Path) -> None:
        self.args, self.folder = args, folder
        self.questions = itertools.cycle(load_questions(Path(args.eval)))
        self.user_ids = (f"U{i:06d}" for i in itertools.count(1))
        self.events = SlackEvents()
        self.fake: FakeSlackAPI | None = None
        self.llm: FakeLLM | None = None
        self.bot: BotProcess | None = None
        self.session: aiohttp.ClientSession | None = None
        self.tracker: SlackTracker | None = None

    async def start(self) -> dict[str, Any]:
        self.fake = await FakeSlackAPI().start()
        self.fake.usergroups["SEXPERTS"] = ["UEXPERT2"]
        for uid in ("UEXPERT", "UEXPERT2", "UADMIN"):
            self._add_user(uid)
        self.llm = await FakeLLM(self.args.llm_delay).start()
        self.tracker = SlackTracker(self.fake, CHANNEL)
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0, force_close=False), timeout=aiohttp.ClientTimeout(total=60)
        )
        self.bot = BotProcess(self.folder, self.fake, self.llm, Path(self.args.corpus))
        ready = await self.bot.wait_ready(self.session, timeout=self.args.start_timeout)
        await asyncio.sleep(1.0)
        mem = self.bot.memory_mb()
        return {
            "ready_s": round(ready, 2),
            "rss_idle_mb": mem.get("VmRSS"),
            "rss_idle_all_mb": mem.get("rss_all"),
            "cpu_start_s": round(self.bot.cpu_seconds(), 2),
        }

    def _add_user(self, uid: str) -> None:
        assert self.fake is not None
        name = f"User {uid[-4:]}"
        self.fake.users[uid] = {
            "id": uid,
            "name": uid.lower(),
            "real_name": name,
            "profile": {"display_name": name, "real_name": name},
        }

    async def _send(self, q: Question) -> None:
        assert self.session and self.bot
        kinds = ["app_mention", "message"] if self.args.events == "both" else ["app_mention"]
        requests = [
            self.events.event(
                SlackEvents.message(user=q.user, channel=CHANNEL, ts=q.ts, text=f"<@{BOT_USER_ID}> {q.text}", kind=kind)
            )
            for kind in kinds
        ]
        url = self.bot.url + "/slack/events"

        async def deliver(request: tuple[str, dict[str, str]]) -> None:
            body, headers = request
            t = time.monotonic()
            try:
                async with self.session.post(url, data=body.encode(), headers=headers) as resp:
                    await resp.read()
                    q.statuses.append(resp.status)
            except (TimeoutError, aiohttp.ClientError):
                q.statuses.append(0)
            q.acks.append(time.monotonic() - t)

        q.sent = time.monotonic()
        await asyncio.gather(*(deliver(r) for r in requests))

    async def phase(self, n: int) -> dict[str, Any]:
        """Send ``n`` questions at once (each its own thread and user); wait until each has
        its answer and resting reaction (bounded), then until Slack and the model are quiet."""
        assert self.fake and self.llm and self.bot and self.tracker
        qs = []
        for _ in range(n):
            uid = next(self.user_ids)
            self._add_user(uid)
            q = Question(ts=self.fake.next_ts(), user=uid, text=next(self.questions))
            self.tracker.add(q)
            qs.append(q)
        calls0 = len(self.fake.calls)
        cpu0, own0, loop0 = self.bot.cpu_seconds(), _own_cpu(), self.bot.loop_cpu_seconds()
        start = time.monotonic()
        await asyncio.gather(*(self._send(q) for q in qs))
        timeout = min(self.args.phase_timeout, 120 + 2 * n)
        deadline = start + timeout
        while time.monotonic() < deadline:
            self.tracker.update()
            if all(q.done for q in qs):
                break
            await asyncio.sleep(0.02)
        # let the turn finish its trailing calls (reaction removals, pruning)
        quiet_since, seen = time.monotonic(), len(self.fake.calls)
        settle_deadline = time.monotonic() + 10
        while time.monotonic() < settle_deadline:
            await asyncio.sleep(0.05)
            if len(self.fake.calls) != seen or self.llm.in_flight:
                quiet_since, seen = time.monotonic(), len(self.fake.calls)
            elif time.monotonic() - quiet_since >= 0.5:
                break
        self.tracker.update()
        cpu1, own1, loop1 = self.bot.cpu_seconds(), _own_cpu(), self.bot.loop_cpu_seconds()
        answered = [q for q in qs if q.done]  # posted in its thread and resting reaction set
        ends = [max(q.answer or 0, q.resting or 0) for q in answered]
        by_method: dict[str, int] = {}
        for c in self.fake.calls[calls0:]:
            by_method[c.method] = by_method.get(c.method, 0) + 1
        acks = [a for q in qs for a in q.acks]
        end = max(ends) if ends else time.monotonic()
        return {
            "n": n,
            "answered": len(answered),
            "resting": {name: sum(q.resting_name == name for q in qs) for name in {q.resting_name for q in qs}},
            "ack_s": acks,
            "ack_errors": sum(1 for q in qs for s in q.statuses if s != 200),
            "first_reaction_s": [q.first_reaction - q.sent for q in qs if q.first_reaction is not None],
            # answered = the later of its first post in the thread and its resting reaction
            "answer_s": [max(q.answer or 0, q.resting or 0) - q.sent for q in answered],
            "first_post_s": [q.answer - q.sent for q in qs if q.answer is not None],
            "total_s": (end - start) if len(ends) == n else None,
            "slack_calls": by_method,
            "llm": self.llm.window(start, end),
            "cpu_s": round(cpu1 - cpu0, 3),
            "loop_cpu_s": round(loop1 - loop0, 3),
            "harness_cpu_s": round(own1 - own0, 3),
            "timed_out": len(ends) < n,
        }

    async def stop(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.bot:
            try:
                mem = self.bot.memory_mb()
                out["rss_end_mb"], out["rss_peak_mb"] = mem.get("VmRSS"), mem.get("VmHWM")
                out["rss_peak_all_mb"] = mem.get("peak_all")
                out["cpu_total_s"] = round(self.bot.cpu_seconds(), 2)
            except OSError:
                pass
            out["exit_code"] = self.bot.stop()
            if self.args.keep_logs:
                out["log"] = str(self.bot.log)
            out.update(checkpoint_stats(self.folder / "data" / "checkpoints.sqlite"))
        if self.session:
            await self.session.close()
        if self.fake:
            await self.fake.stop()
        if self.llm:
            await self.llm.stop()
        return out


def _own_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def checkpoint_stats(path: Path) -> dict[str, Any]:
    """Size of the checkpoint SQLite file (with its -wal/-shm) per thread, after the process ended."""
    files = [path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")]
    size = sum(f.stat().st_size for f in files if f.exists())
    out: dict[str, Any] = {"checkpoint_bytes": size}
    if not path.exists():
        return out
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            threads, rows = conn.execute("SELECT COUNT(DISTINCT thread_id), COUNT(*) FROM checkpoints").fetchone()
        finally:
            conn.close()
        out.update(
            checkpoint_threads=threads,
            checkpoint_rows=rows,
            checkpoint_bytes_per_thread=round(size / threads) if threads else None,
        )
    except sqlite3.Error as exc:
        out["checkpoint_error"] = str(exc)
    return out


def level_stats(phases: list[dict[str, Any]]) -> dict[str, Any]:
    """Figures of one concurrency level in one run (several phases pooled, e.g. the singles)."""
    n = sum(p["n"] for p in phases)
    acks = [a for p in phases for a in p["ack_s"]]
    first = [x for p in phases for x in p["first_reaction_s"]]
    answer = [x for p in phases for x in p["answer_s"]]
    calls: dict[str, float] = {}
    for p in phases:
        for m, c in p["slack_calls"].items():
            calls[m] = calls.get(m, 0) + c
    return {
        "questions": n,
        "answered": sum(p["answered"] for p in phases),
        "timed_out": sum(1 for p in phases if p["timed_out"]),
        "ack_p50_ms": _ms(percentile(acks, 0.5)),
        "ack_p95_ms": _ms(percentile(acks, 0.95)),
        "ack_max_ms": _ms(max(acks) if acks else None),
        "acks_over_3s": sum(a > 3 for a in acks),
        "ack_errors": sum(p["ack_errors"] for p in phases),
        "first_reaction_p50_ms": _ms(percentile(first, 0.5)),
        "first_reaction_p95_ms": _ms(percentile(first, 0.95)),
        "answer_p50_s": _r(percentile(answer, 0.5)),
        "answer_p95_s": _r(percentile(answer, 0.95)),
        "first_post_p50_s": _r(percentile([x for p in phases for x in p["first_post_s"]], 0.5)),
        "total_s": _r(phases[0]["total_s"]) if len(phases) == 1 else None,
        "slack_calls_per_question": {m: round(c / n, 2) for m, c in sorted(calls.items())},
        "slack_calls_per_question_total": round(sum(calls.values()) / n, 2),
        "llm": phases[0]["llm"] if len(phases) == 1 else None,
        "llm_calls_per_question": round(sum(p["llm"]["calls"] for p in phases) / n, 2),
        "cpu_s_per_question": round(sum(p["cpu_s"] for p in phases) / n, 4),
        "loop_cpu_s_per_question": round(sum(p.get("loop_cpu_s", 0.0) for p in phases) / n, 4),
        "harness_cpu_s": round(sum(p["harness_cpu_s"] for p in phases), 2),
    }


async def one_run(args: argparse.Namespace, index: int) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix=f"tw-load-{index}-"))
    runner = Runner(args, folder)
    run: dict[str, Any] = {"repeat": index}
    try:
        run.update(await runner.start())
        print(f"[run {index}] ready in {run['ready_s']} s, RSS {run['rss_idle_mb']} MB", flush=True)
        warm = await runner.phase(1)
        run["warmup"] = {"answer_s": _r(warm["answer_s"][0] if warm["answer_s"] else None), "cpu_s": warm["cpu_s"]}
        run["rss_after_warmup_mb"] = runner.bot.memory_mb().get("VmRSS") if runner.bot else None
        levels: dict[str, Any] = {}
        for n in args.sizes:
            if n == 1:
                phases = [await runner.phase(1) for _ in range(args.singles)]
            else:
                await asyncio.sleep(1.0)
                phases = [await runner.phase(n)]
            levels[str(n)] = level_stats(phases)
            lv = levels[str(n)]
            print(
                f"[run {index}] {n:>4} at once: ack p95 {lv['ack_p95_ms']} ms, first reaction p95 "
                f"{lv['first_reaction_p95_ms']} ms, answer p50 {lv['answer_p50_s']} s, total {lv['total_s']} s, "
                f"{lv['answered']}/{lv['questions']} answered, CPU {lv['cpu_s_per_question']} s/question",
                flush=True,
            )
        run["levels"] = levels
        single = levels.get("1", {}).get("answer_p50_s")
        run["ratio_to_one"] = {
            n: _r(lv["total_s"] / single, 2) if lv.get("total_s") and single else None
            for n, lv in levels.items()
            if n != "1"
        }
    finally:
        run.update(await runner.stop())
        if run.get("exit_code") not in (0, None):
            run["log_tail"] = runner.bot.tail(2000) if runner.bot else ""
        if not args.keep_logs:
            shutil.rmtree(folder, ignore_errors=True)
    print(
        f"[run {index}] checkpoint {run.get('checkpoint_bytes_per_thread')} bytes/thread, "
        f"peak RSS {run.get('rss_peak_mb')} MB",
        flush=True,
    )
    return run


def summarise(runs: list[dict[str, Any]], sizes: list[int]) -> dict[str, Any]:
    """Medians over runs of each figure."""

    def med(get) -> Any:
        vals = []
        for r in runs:
            try:
                vals.append(get(r))
            except (KeyError, TypeError):
                pass
        m = median_of(vals)
        return round(m, 3) if isinstance(m, float) else m

    levels: dict[str, Any] = {}
    for n in map(str, sizes):
        keys = [
            "ack_p50_ms",
            "ack_p95_ms",
            "ack_max_ms",
            "acks_over_3s",
            "first_reaction_p50_ms",
            "first_reaction_p95_ms",
            "answer_p50_s",
            "answer_p95_s",
            "first_post_p50_s",
            "total_s",
            "slack_calls_per_question_total",
            "llm_calls_per_question",
            "cpu_s_per_question",
            "loop_cpu_s_per_question",
        ]
        lv = {k: med(lambda r, k=k, n=n: r["levels"][n][k]) for k in keys}
        lv["unanswered"] = sum(
            r["levels"][n]["questions"] - r["levels"][n]["answered"] for r in runs if n in r.get("levels", {})
        )
        methods = sorted({m for r in runs for m in r.get("levels", {}).get(n, {}).get("slack_calls_per_question", {})})
        lv["slack_calls_per_question"] = {
            m: med(lambda r, m=m, n=n: r["levels"][n]["slack_calls_per_question"].get(m, 0)) for m in methods
        }
        if n != "1":
            lv["llm_in_flight_max"] = med(lambda r, n=n: r["levels"][n]["llm"]["max"])
            lv["llm_in_flight_mean"] = med(lambda r, n=n: r["levels"][n]["llm"]["mean"])
            lv["llm_in_flight_mean_while_busy"] = med(lambda r, n=n: r["levels"][n]["llm"]["mean_while_busy"])
            lv["ratio_to_one"] = med(lambda r, n=n: r["ratio_to_one"][n])
        levels[n] = lv
    return {
        "levels": levels,
        "answer_one_s": levels.get("1", {}).get("answer_p50_s"),
        "cold_answer_s": med(lambda r: r["warmup"]["answer_s"]),
        "ready_s": med(lambda r: r["ready_s"]),
        "rss_idle_mb": med(lambda r: r["rss_idle_mb"]),
        "rss_after_warmup_mb": med(lambda r: r["rss_after_warmup_mb"]),
        "rss_peak_mb": med(lambda r: r["rss_peak_mb"]),
        "rss_idle_all_mb": med(lambda r: r.get("rss_idle_all_mb")),
        "rss_peak_all_mb": med(lambda r: r.get("rss_peak_all_mb")),
        "checkpoint_bytes_per_thread": med(lambda r: r["checkpoint_bytes_per_thread"]),
        "checkpoint_rows_per_thread": med(lambda r: r["checkpoint_rows"] / r["checkpoint_threads"]),
    }


def update_results(label: str, key: str, value: dict[str, Any]) -> Path:
    """Merge ``{key: value}`` into bench/results/load-<label>.json (other keys kept)."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"load-{label}.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    data.update({"label": label, **git_label(), "updated": datetime.now(UTC).isoformat(timespec="seconds"), key: value})
    path.write_text(json.dumps(data, indent=1) + "\n")
    return path


def default_label() -> str:
    """The product's version: the last commit touching bot/, graphs/, config.toml or
    pyproject.toml (+ "-dirty" with uncommitted changes in bot/ or graphs/)."""
    import subprocess

    root = Path(__file__).resolve().parent.parent
    out = (
        subprocess.run(
            [
                "git",
                "-C",
                str(root),
                "log",
                "-1",
                "--format=%h",
                "--",
                "bot",
                "graphs",
                "config.toml",
                "pyproject.toml",
            ],
            capture_output=True,
            text=True,
        ).stdout.strip()
        or "unknown"
    )
    return out + ("-dirty" if git_label()["dirty"] == "true" else "")


def common_args(ap: argparse.ArgumentParser) -> None:
    ap.add_argument(
        "--label", default=os.environ.get("BENCH_LABEL") or "", help="results name (default: product commit)"
    )
    ap.add_argument("--corpus", default=str(DEFAULT_CORPUS))
    ap.add_argument("--eval", default=str(DEFAULT_EVAL), help="JSONL whose kb questions are asked")
    ap.add_argument("--llm-delay", type=float, default=0.1, help="seconds per chat completion")
    ap.add_argument(
        "--events",
        choices=["both", "mention"],
        default="both",
        help="per question: app_mention + message (as Slack sends for a channel mention), or app_mention only",
    )
    ap.add_argument("--start-timeout", type=float, default=300)
    ap.add_argument("--phase-timeout", type=float, default=600, help="upper bound per burst, seconds")
    ap.add_argument("--keep-logs", action="store_true", help="keep the bot's data folder and log")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common_args(ap)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--sizes", default="1,50,200", help="concurrency levels, comma separated")
    ap.add_argument("--singles", type=int, default=5, help="questions one at a time for level 1")
    args = ap.parse_args()
    args.sizes = sorted({int(s) for s in args.sizes.split(",") if s.strip()})
    if 1 not in args.sizes:
        args.sizes.insert(0, 1)  # the ratio needs the single-question time
    if not (1 <= args.repeats <= 20) or max(args.sizes) > 1000:
        ap.error("--repeats 1..20, sizes up to 1000")
    label = args.label or default_label()
    t0 = time.monotonic()
    load_before = os.getloadavg()
    runs = [asyncio.run(one_run(args, i + 1)) for i in range(args.repeats)]
    result = {
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "settings": {
            "repeats": args.repeats,
            "sizes": args.sizes,
            "singles": args.singles,
            "llm_delay_s": args.llm_delay,
            "events": args.events,
            "corpus": args.corpus,
            "questions": f"{args.eval} (kind kb, cycled)",
            "overrides": os.environ.get("BENCH_SET", ""),
        },
        "machine": {
            "cpus": os.cpu_count(),
            "loadavg_before": [round(x, 2) for x in load_before],
            "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        },
        "seconds": round(time.monotonic() - t0, 1),
        "summary": summarise(runs, args.sizes),
        "runs": runs,
    }
    path = update_results(label, "load", result)
    print(json.dumps(result["summary"], indent=1))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
