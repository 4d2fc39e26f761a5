"""A burst of questions at one ``python -m bot run`` on the default SQLite storage with graph
worker processes (the chat process and every worker write the one checkpoint file): shared
by tests/test_sqlite_soak.py and bench/bench_sqlite_soak.py.

Slack HTTP mode with the fake Slack server and a Mistral-shaped model (answers name the
question they answer). ``questions`` messages over ``threads`` threads: each thread's first
message is a mention, the next ones follow up in the thread, all delivered at once (a
thread's messages then queue in order).
"""

from __future__ import annotations

import asyncio
import re
import statistics
import time
from pathlib import Path
from typing import Any

import aiohttp

from tests.fakes.replicas import Replica, add_users, model_server, replies_in
from tests.fakes.slack_api import BOT_USER_ID, FakeSlackAPI, SlackEvents, all_text

CHANNEL = "C0GENERAL"
LOCKED = re.compile(r"database is locked|database table is locked|SQLITE_BUSY", re.I)


async def soak(
    root: Path,
    *,
    questions: int,
    threads: int,
    workers: int,
    delay: float = 0.0,
    timeout: float = 600,
    service: str = "",
) -> dict[str, Any]:
    """Run the burst; returns the figures (see the keys) and the log's offending lines.
    ``service``: more ``[service]`` lines (e.g. ``checkpoint_durability = "async"``).

    Raises:
        TimeoutError: not every question was answered within ``timeout`` seconds.
    """
    fake = await FakeSlackAPI().start()
    add_users(fake)
    events = SlackEvents()
    try:
        async with model_server(delay=delay) as model:
            replica = Replica(
                root, fake, model, "", name="soak", service=f"graph_workers = {workers}\n{service}"
            )  # "" = SQLite, the default
            try:
                async with aiohttp.ClientSession() as session:
                    await replica.wait_ready(session)
                    roots = [fake.next_ts() for _ in range(threads)]
                    sent: dict[str, float] = {}
                    per_thread: dict[str, list[str]] = {r: [] for r in roots}
                    deliveries = []
                    t0 = time.perf_counter()
                    for i in range(questions):
                        thread = roots[i % threads]
                        first = not per_thread[thread]
                        ts = thread if first else fake.next_ts()
                        n = len(per_thread[thread]) + 1
                        per_thread[thread].append(ts)
                        text = f"<@{BOT_USER_ID}> qtok-{i % threads}-{n} how do I roll back?"
                        ev = events.message(
                            user="UASKER",
                            channel=CHANNEL,
                            ts=ts,
                            thread_ts=None if first else thread,
                            text=text,
                            kind="app_mention",
                        )
                        sent[ts] = time.perf_counter()
                        deliveries.append(replica.deliver(session, events.event(ev, event_id=f"E{i}")))
                    statuses = await asyncio.gather(*deliveries)
                    expected = {r: len(per_thread[r]) for r in roots}
                    done_at: dict[str, float] = {}
                    while len(done_at) < threads:
                        for r in roots:
                            if r not in done_at and len(replies_in(fake, r)) >= expected[r]:
                                done_at[r] = time.perf_counter()
                        if time.perf_counter() - t0 > timeout:
                            raise TimeoutError(f"{len(done_at)}/{threads} threads answered: {replica.text()[-2000:]}")
                        await asyncio.sleep(0.05)
                    seconds = time.perf_counter() - t0
                    await asyncio.sleep(0.5)
            finally:
                log = await replica.stop()
        replies = {r: replies_in(fake, r) for r in roots}
        answered = len({t for ps in replies.values() for p in ps for t in re.findall(r"qtok-\d+-\d+", all_text(p))})
        apologies = sum("Sorry" in all_text(p) for ps in replies.values() for p in ps)
        latencies = sorted(done_at[r] - sent[r] for r in roots)
        return {
            "questions": questions,
            "threads": threads,
            "graph_workers": workers,
            "model_delay_s": delay,
            "http_statuses": sorted(set(statuses)),
            "seconds": round(seconds, 2),
            "questions_per_s": round(questions / seconds, 2),
            "thread_p50_s": round(statistics.median(latencies), 2),
            "thread_max_s": round(latencies[-1], 2),
            "replies": sum(len(ps) for ps in replies.values()),
            "answered": answered,
            "apologies": apologies,
            "locked_lines": [line for line in log.splitlines() if LOCKED.search(line)][:5],
            "errors": sorted({line[:200] for line in log.splitlines() if " ERROR " in line or "Traceback" in line})[:5],
            "workers_ready": re.findall(r"graph workers ready: (\d+) processes", log)[:1],
        }
    finally:
        await fake.stop()
