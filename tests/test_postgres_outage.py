"""A replica's connections after a database outage, against the real server (never stopped:
its connections are cut with pg_terminate_backend and new ones refused with
``ALTER DATABASE ... ALLOW_CONNECTIONS false``).

- The pools heal before the next question: with several questions in flight when the
  database went away, the first question after "database reachable again" is answered,
  not met with the database apology (``PoolTimeout``).
- The replica never holds more connections than ``[storage] max_connections``, measured in
  ``pg_stat_activity`` for the real process under a burst, and a replica whose budget does
  not fit the server's ``max_connections`` beside the running ones does not start: one line
  naming the setting, exit code 2.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys

import aiohttp
import psycopg

from tests.fakes.postgres import outage, pg_database  # noqa: F401 - fixture
from tests.fakes.replicas import ROOT, add_users, model_server, replies_in, storage_section
from tests.fakes.slack_api import BOT_USER_ID, SlackEvents, all_text
from tests.test_postgres_replicas import start

CHANNEL = "C0GENERAL"


def mention(events: SlackEvents, ts: str, text: str) -> tuple[str, dict]:
    return events.event(
        events.message(user="UASKER", channel=CHANNEL, ts=ts, text=f"<@{BOT_USER_ID}> {text}", kind="app_mention"),
        event_id=f"Ev{ts}",
    )


def connections(url: str, name: str) -> dict[str, int]:
    """The connections to database ``name`` per ``application_name``."""
    admin = url.rsplit("/", 1)[0] + "/test"
    with psycopg.connect(admin, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT application_name, count(*) FROM pg_stat_activity WHERE datname = %s GROUP BY 1", (name,)
        ).fetchall()
    return {r[0]: int(r[1]) for r in rows}


async def test_the_first_question_after_an_outage_is_answered(tmp_path, fake, pg_database):
    name, url = pg_database
    add_users(fake)
    events = SlackEvents()
    async with model_server(delay=0.5) as model:
        [replica] = await start(
            tmp_path, fake, model, url, 1, storage=storage_section(lease_seconds=2, interval=0.5, connect_timeout=4)
        )
        try:
            async with aiohttp.ClientSession() as session:
                asked = []

                async def ask(i: int) -> None:
                    ts = fake.next_ts()
                    asked.append(ts)
                    assert await replica.deliver(session, mention(events, ts, f"qtok-{i}-1 how do I roll back?")) == 200

                for i in range(8):  # the pools grow: idle connections wait in them afterwards
                    await ask(i)
                await fake.wait_for(lambda: all(replies_in(fake, ts) for ts in asked), timeout=90)
                for i in range(8, 11):  # and questions are in flight when the database goes away
                    await ask(i)
                await asyncio.sleep(0.8)
                with outage(name):  # long enough for psycopg_pool's backoff to grow past 8 s
                    await asyncio.sleep(12)
                await fake.wait_for(lambda: all(replies_in(fake, ts) for ts in asked), timeout=90)
                for _ in range(200):
                    if "database reachable again" in replica.text():
                        break
                    await asyncio.sleep(0.1)
                assert "database reachable again" in replica.text(), replica.text()[-3000:]
                ts = fake.next_ts()
                assert await replica.deliver(session, mention(events, ts, "qtok-9-1 and after the outage?")) == 200
                await fake.wait_for(lambda: replies_in(fake, ts), timeout=60)
        finally:
            log = await replica.stop()
    first_after = all_text(replies_in(fake, ts)[0])
    assert "qtok-9-1" in first_after and "can't reach my database" not in first_after, (first_after, log[-4000:])
    assert "Traceback" not in log


async def test_a_replica_keeps_to_its_connection_budget_and_one_that_does_not_fit_does_not_start(
    tmp_path, fake, pg_database
):
    name, url = pg_database
    add_users(fake)
    events = SlackEvents()
    budget = 9  # 2 learned + 2 queries + 5 thread locks
    async with model_server(delay=0.3) as model:
        storage = storage_section(lease_seconds=2, interval=0.5) + f"max_connections = {budget}\n"
        [replica] = await start(tmp_path, fake, model, url, 1, storage=storage)
        try:
            async with aiohttp.ClientSession() as session:
                asked = []
                peak: dict[str, int] = {}
                for i in range(24):  # more threads at once than the replica has thread locks
                    ts = fake.next_ts()
                    asked.append(ts)
                    assert await replica.deliver(session, mention(events, ts, f"qtok-{i}-1 how do I deploy?")) == 200
                while not all(replies_in(fake, ts) for ts in asked):
                    for app, n in connections(url, name).items():
                        peak[app] = max(peak.get(app, 0), n)
                    await asyncio.sleep(0.1)
            ours = {app: n for app, n in peak.items() if app.startswith(f"threadwise/{budget}/")}
            assert len(ours) == 1 and 4 <= max(ours.values()) <= budget, peak
            print(f"peak connections of the replica: {max(ours.values())} (budget {budget})")
            for ts in asked:
                assert "qtok-" in all_text(replies_in(fake, ts)[0])
            # a second replica asking for more than the server has left is refused at start
            with psycopg.connect(url.rsplit("/", 1)[0] + "/test") as conn:
                limit = int(conn.execute("SHOW max_connections").fetchone()[0])
            config = tmp_path / "r0" / "config.toml"
            too_big = config.read_text().replace(f"max_connections = {budget}", f"max_connections = {limit - 4}")
            (tmp_path / "big.toml").write_text(too_big)
            env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
            proc = subprocess.run(
                [sys.executable, "-m", "bot", "run", "--config", str(tmp_path / "big.toml")],
                env={
                    **env,
                    "THREADWISE_DATABASE_URL": url,
                    "MISTRAL_API_KEY": "k",
                    "SLACK_BOT_TOKEN": "xoxb-1",
                    "SLACK_SIGNING_SECRET": "s",
                },
                cwd=tmp_path / "r0",
                capture_output=True,
                text=True,
                timeout=120,
            )
            lines = [x for x in proc.stderr.splitlines() if "max_connections" in x]
            assert proc.returncode == 2, proc.stderr[-3000:]
            assert len(lines) == 1 and f"[storage] max_connections = {limit - 4} does not fit" in lines[0], proc.stderr
        finally:
            await replica.stop()
