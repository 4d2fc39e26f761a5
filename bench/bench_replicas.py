"""Replicas on PostgreSQL: throughput of 1 vs 3 ``python -m bot run`` processes (Slack HTTP
mode, the fake Slack server, a Mistral-shaped model answering every call after a fixed
delay), and PostgreSQL vs SQLite for one process.

    python bench/bench_replicas.py                       # 60 questions, 100 ms per model call
    python bench/bench_replicas.py --questions 120 --delay 0.1 --json bench/results/replicas.json

A question takes 4 model calls (route, grade documents, generate, grade answer). Each run
sends every question (one new thread each) round-robin to the replicas (as a load
balancer would; ``--redeliver`` also sends each again to the next replica), and measures the
time until every question has its one answer in the fake Slack; it then reports questions per second, the p50/p95
latency from delivery to answer, duplicates (must be 0), and what the database holds per
thread. Needs PostgreSQL on 127.0.0.1:5432 (a database ``tw_bench_<random>`` is created
and dropped).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import aiohttp  # noqa: E402
import psycopg  # noqa: E402

from tests.fakes.postgres import ADMIN_URL, url_of  # noqa: E402
from tests.fakes.replicas import Replica, add_users, model_server, replies_in, storage_section  # noqa: E402
from tests.fakes.slack_api import BOT_USER_ID, FakeSlackAPI, SlackEvents  # noqa: E402


async def scenario(
    label: str, *, replicas: int, backend: str, questions: int, delay: float, service: str, redeliver: bool = False
) -> dict:
    db = f"tw_bench_{uuid.uuid4().hex[:8]}"
    url = url_of(db) if backend == "postgres" else ""
    if url:
        with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{db}"')
    fake = await FakeSlackAPI().start()
    add_users(fake)
    events = SlackEvents()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            async with model_server(delay=delay) as model:
                procs = [
                    Replica(
                        Path(tmp),
                        fake,
                        model,
                        url,
                        name=f"r{i}",
                        service=service,
                        storage=storage_section(backend=backend, lease_seconds=15, interval=5),
                    )
                    for i in range(replicas)
                ]
                try:
                    async with aiohttp.ClientSession() as session:
                        await asyncio.gather(*(p.wait_ready(session) for p in procs))
                        sent: dict[str, float] = {}
                        t0 = time.perf_counter()
                        deliveries = []
                        for i in range(questions):
                            ts = fake.next_ts()
                            ev = events.message(
                                user="UASKER",
                                channel="C0GENERAL",
                                ts=ts,
                                kind="app_mention",
                                text=f"<@{BOT_USER_ID}> qtok-{i}-1 how do I roll back?",
                            )
                            sent[ts] = time.perf_counter()
                            deliveries.append(procs[i % replicas].deliver(session, events.event(ev, event_id=f"E{i}")))
                            if redeliver:  # Slack's retry, reaching another replica
                                deliveries.append(
                                    procs[(i + 1) % replicas].deliver(
                                        session, events.event(ev, event_id=f"E{i}", retry_num=1)
                                    )
                                )
                        await asyncio.gather(*deliveries)
                        done: dict[str, float] = {}
                        while len(done) < questions:
                            for ts in sent:
                                if ts not in done and replies_in(fake, ts):
                                    done[ts] = time.perf_counter()
                            if time.perf_counter() - t0 > 600:
                                raise TimeoutError(f"{label}: {len(done)}/{questions} answered")
                            await asyncio.sleep(0.02)
                        seconds = time.perf_counter() - t0
                        await asyncio.sleep(1.0)
                finally:
                    logs_each = [await p.stop() for p in procs]
                    logs = "\n".join(logs_each)
        latencies = sorted(done[ts] - sent[ts] for ts in sent)
        duplicates = sum(len(replies_in(fake, ts)) - 1 for ts in sent)
        from tests.fakes.slack_api import all_text

        answered = sum(1 for ts in sent if any("qtok-" in all_text(p) for p in replies_in(fake, ts)))
        import re

        per_replica = [len(re.findall(r"\] answer in", log)) for log in logs_each]
        errors = sorted({line.split(": ", 2)[-1][:160] for line in logs.splitlines() if " ERROR " in line})
        per_thread = _per_thread(url, next(iter(sent))) if url else {}
        return {
            "label": label,
            "replicas": replicas,
            "backend": backend,
            "questions": questions,
            "model_delay_s": delay,
            "redeliver": redeliver,
            "seconds": round(seconds, 2),
            "questions_per_s": round(questions / seconds, 2),
            "p50_s": round(statistics.median(latencies), 2),
            "p95_s": round(latencies[int(0.95 * (len(latencies) - 1))], 2),
            "duplicates": duplicates,
            "answered": answered,
            "answers_per_replica": per_replica,
            "errors": errors[:5],
            "per_thread": per_thread,
        }
    finally:
        await fake.stop()
        if url:
            with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')


def _per_thread(url: str, ts: str) -> dict:
    """Rows and bytes one answered thread leaves in the database."""
    key = f"slack:T0TEAM:C0GENERAL:{ts}"
    with psycopg.connect(url) as conn:
        q = lambda sql: conn.execute(sql, (key,)).fetchone()[0]  # noqa: E731
        return {
            "checkpoints": q("SELECT count(*) FROM checkpoints WHERE thread_id = %s"),
            "checkpoint_blobs": q("SELECT count(*) FROM checkpoint_blobs WHERE thread_id = %s"),
            "checkpoint_writes": q("SELECT count(*) FROM checkpoint_writes WHERE thread_id = %s"),
            "bytes": conn.execute(
                "SELECT (SELECT COALESCE(SUM(pg_column_size(checkpoint) + pg_column_size(metadata)), 0) FROM"
                " checkpoints WHERE thread_id = %(k)s) + (SELECT COALESCE(SUM(length(blob)), 0) FROM checkpoint_blobs"
                " WHERE thread_id = %(k)s) + (SELECT COALESCE(SUM(length(blob)), 0) FROM checkpoint_writes"
                " WHERE thread_id = %(k)s)",
                {"k": key},
            ).fetchone()[0],
            "seen_messages": q("SELECT count(*) FROM seen_messages WHERE thread_key = %s"),
            "runs": q("SELECT count(*) FROM runs WHERE thread_key = %s"),
            "help_requests": q("SELECT count(*) FROM help_requests WHERE thread_key = %s"),
            "claims": q("SELECT count(*) FROM claims WHERE thread_key = %s"),
        }


async def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--questions", type=int, default=60)
    p.add_argument("--delay", type=float, default=0.1, help="seconds per model call")
    p.add_argument("--redeliver", action="store_true", help="also deliver every event again to the next replica")
    p.add_argument("--json", help="write the results here")
    args = p.parse_args()
    service = "max_concurrent_runs = 8"
    runs = [
        ("sqlite, 1 process", 1, "sqlite"),
        ("postgres, 1 replica", 1, "postgres"),
        ("postgres, 3 replicas", 3, "postgres"),
    ]
    results = []
    for label, n, backend in runs:
        r = await scenario(
            label,
            replicas=n,
            backend=backend,
            questions=args.questions,
            delay=args.delay,
            service=service,
            redeliver=args.redeliver,
        )
        results.append(r)
        print(
            f"{label:22s} {r['questions']} questions in {r['seconds']:6.2f} s = {r['questions_per_s']:5.2f} q/s,"
            f" p50 {r['p50_s']:.2f} s, p95 {r['p95_s']:.2f} s, answers {r['answered']} {r['answers_per_replica']},"
            f" duplicates {r['duplicates']}",
            flush=True,
        )
        for e in r["errors"]:
            print("   error:", e)
    one, three = results[1], results[2]
    print(f"3 replicas / 1 replica (postgres): {three['questions_per_s'] / one['questions_per_s']:.2f}x")
    print(f"postgres / sqlite, one process:    {one['questions_per_s'] / results[0]['questions_per_s']:.2f}x")
    print("per thread in PostgreSQL:", json.dumps(three["per_thread"]))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
