"""The storage contract (bot/storage/base.py, graphs.learned.LearnedStore) as behaviour: one
suite, run against every backend: SQLite files and the real PostgreSQL server (a database of
its own, created for this session and dropped after it; tables emptied between cases).

A third backend is a package beside bot/storage/sqlite and bot/storage/postgres whose
``open_storage`` passes this file. Cases marked ``shared`` hold only for a backend that
replicas share (``BookkeepingStore.shared`` is True): leases, takeover and fencing, thread
locks and job locks across processes, the index generation every replica serves. Each case
opens the backend as a process would (``open_storage``); "two processes" are two opened
backends on the same storage: for SQLite the same files, for PostgreSQL the same database
with different local data folders.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import pytest

from bot.config import load_settings
from bot.storage import BookkeepingStore, Storage, checkpoints, open_storage
from tests.conftest import write_config

BACKENDS = ["sqlite", "postgres"]
ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/test"
LEASE = 1.0

OpenFn = Callable[[str], AbstractAsyncContextManager[Storage]]


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """A database of this test session's own on the local server, dropped at the end."""
    psycopg = pytest.importorskip("psycopg")
    try:
        admin = psycopg.connect(ADMIN_URL, autocommit=True, connect_timeout=3)
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"PostgreSQL at 127.0.0.1:5432 is unreachable ({type(exc).__name__}: {exc})")
    name = f"tw_conformance_{uuid.uuid4().hex[:10]}"
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"postgresql://postgres@127.0.0.1:5432/{name}"
    finally:
        with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _empty_tables(url: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        tables = [r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")]
        keep = {"schema_version", "checkpoint_migrations"}
        if [t for t in tables if t not in keep]:
            conn.execute("TRUNCATE " + ", ".join(f'"{t}"' for t in tables if t not in keep) + " RESTART IDENTITY")


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[OpenFn]:
    """``open(process_name)``: the backend opened as one process would open it."""
    url = ""
    if request.param == "postgres":
        url = request.getfixturevalue("pg_url")
        _empty_tables(url)

    @asynccontextmanager
    async def open_as(process: str) -> AsyncIterator[Storage]:
        # PostgreSQL: every process has its own local folder, only the database is shared
        root = tmp_path / (process if url else "shared")
        root.mkdir(exist_ok=True)
        storage_toml = (
            f'[storage]\nbackend = "postgres"\nlease_seconds = {LEASE}\nrecovery_interval_seconds = 0.5\n'
            "max_connections = 8\n"
            if url
            else ""
        )
        settings = load_settings(write_config(root, storage_toml))
        async with open_storage(settings, url or None) as storage:
            yield storage

    return open_as


def shared_only(store: BookkeepingStore) -> None:
    if not store.shared:
        pytest.skip("a behaviour of a backend shared by replicas")


RUN = ("slack", {"channel": "C1", "ts": "1.0"}, {"text": "how do I deploy?", "received_at": 1.0})


# ---- deliveries ------------------------------------------------------------------------------
async def test_a_message_is_marked_seen_once_across_processes(backend):
    async with backend("a") as a, backend("b") as b:
        A, B = a.bookkeeping, b.bookkeeping
        firsts = await asyncio.gather(*(s.mark_seen(f"m{i}", f"t{i % 2}") for i in range(6) for s in (A, B)))
        assert sum(firsts) == 6  # each id once, whichever process saw it first
        assert await B.mark_seen("m0", "t0") is False
        assert await A.thread_of("m3") == "t1" and await B.thread_of("nope") is None
        assert await B.has_thread("t0") and not await A.has_thread("t9")
        recent = await A.recent_message_ids(3600, 4)
        assert len(recent) == 4 and set(recent) <= {f"m{i}" for i in range(6)}
        assert await A.forget_seen_before(-1) == 6  # all are older than "a second from now"
        assert await B.mark_seen("m0", "t0") is True  # forgotten: a new first delivery


async def test_a_message_whose_turn_failed_is_forgotten_for_every_process(backend):
    """``forget_message``: the turn of a message failed (and said so); its redelivery, on any
    process, is a first delivery again. Other ids keep their marks; an unknown id is no error."""
    async with backend("a") as a, backend("b") as b:
        A, B = a.bookkeeping, b.bookkeeping
        assert await A.mark_seen("m1", "t1", run=RUN) and await A.mark_seen("m2", "t1")
        await A.finish_run("m1")
        await A.forget_message("m1")
        await A.forget_message("never-seen")
        assert await B.mark_seen("m1", "t1", run=RUN) is True  # the redelivery, recorded as a run again
        assert await B.run_in_flight("m1")
        assert await B.mark_seen("m2", "t1") is False
        assert await A.thread_of("m1") == "t1"


# ---- runs in flight --------------------------------------------------------------------------
async def test_a_run_is_recorded_updated_and_finished(backend):
    async with backend("a") as a:
        s = a.bookkeeping
        assert await s.mark_seen("m1", "t1", run=RUN)
        assert await s.run_in_flight("m1")
        assert await s.run_started("m1", "t1", "slack", {"channel": "C1"}, {"question": "q"}, "")
        await s.update_run("m1", reference={"channel": "C1", "reaction": "eyes"}, stage="posted")
        assert await s.may_post("m1") and await s.holds("m1")
        await s.finish_run("m1")
        assert not await s.run_in_flight("m1")
        assert await s.run_started("resume:i1", "t1", "slack", {}, {"resume": {"answer": "x"}}, "ck1")
        assert await s.run_in_flight("resume:i1")
        await s.finish_run("resume:i1")
        assert not await s.run_in_flight("resume:i1")


async def test_a_run_left_by_a_dead_process_is_recovered_once_with_its_record(backend):
    async with backend("a") as a:
        assert await a.bookkeeping.mark_seen("m1", "t1", run=RUN)
        assert await a.bookkeeping.run_started("m1", "t1", "slack", {"channel": "C1"}, {"question": "q"}, "ck0")
    # process a died (it renews nothing any more); b starts, or is a running replica
    async with backend("b") as b, backend("c") as c:
        if b.bookkeeping.shared:
            await asyncio.sleep(LEASE + 0.3)
        got = await asyncio.gather(b.bookkeeping.unfinished_runs(), c.bookkeeping.unfinished_runs())
        rows = [r for g in got for r in g]
        if not b.bookkeeping.shared:  # one process: recovery runs once, at start
            rows = got[0]
        assert len(rows) == 1, rows
        run = rows[0]
        assert (run["run_id"], run["thread_key"], run["platform"]) == ("m1", "t1", "slack")
        assert run["reference"] == {"channel": "C1"} and run["input"] == {"question": "q"}
        assert run["message"] == RUN[2] and run["checkpoint_before"] == "ck0" and run["stage"] == "running"


async def test_a_run_taken_over_is_posted_by_one_process_only(backend):
    """Fencing: a's lease expired while a was alive; b took the run over and finished it.
    a may not start, show or post it; a run that never had a row is a's own."""
    async with backend("a") as a, backend("b") as b:
        A, B = a.bookkeeping, b.bookkeeping
        shared_only(A)
        assert await A.mark_seen("m1", "t1", run=RUN)
        assert await A.run_started("m1", "t1", "slack", {"channel": "C1"}, {"question": "q"}, "")
        for _ in range(4):  # both alive: a renews its lease, nobody takes its run
            await asyncio.sleep(0.4)
            await asyncio.gather(A.renew_leases(), B.renew_leases())
        assert await B.unfinished_runs() == []
        for _ in range(4):  # a is stopped: its lease expires
            await asyncio.sleep(0.4)
            await B.renew_leases()
        assert [r["run_id"] for r in await B.unfinished_runs()] == ["m1"]
        assert await B.unfinished_runs() == []  # b does not take its own run again
        assert await B.run_started("m1", "t1", "slack", {"channel": "C1"}, {"question": "q"}, "")
        assert await B.may_post("m1") is True
        await B.finish_run("m1")
        assert await A.renew_leases() == 0
        assert await A.may_post("m1") is False and await A.holds("m1") is False
        assert await A.run_started("m1", "t1", "slack", {"channel": "C1"}, {"question": "q"}, "") is False
        await A.finish_run("m1")
        assert await A.run_started("resume:i1", "t3", "slack", {}, {"resume": {}}, "")
        assert await B.run_started("resume:i1", "t3", "slack", {}, {"resume": {}}, "") is False
        assert await A.may_post("resume:i1") is True


async def test_a_threads_later_message_waits_for_the_earlier_one_on_another_process(backend):
    async with backend("a") as a, backend("b") as b:
        A, B = a.bookkeeping, b.bookkeeping
        shared_only(A)
        assert await A.mark_seen("m1", "t", run=RUN)
        later = ("slack", {"channel": "C1"}, {"text": "and then?", "received_at": 2.0})
        assert await B.mark_seen("m2", "t", run=later)
        waiter = asyncio.create_task(B.wait_turn("m2", "t"))
        await asyncio.sleep(0.5)
        assert not waiter.done()  # m1 (on a) is not finished
        assert await B.mark_seen("m3", "other", run=later)
        await asyncio.wait_for(B.wait_turn("m3", "other"), 2)  # another thread does not wait
        await A.finish_run("m1")
        await asyncio.wait_for(waiter, 2)


# ---- coordination ----------------------------------------------------------------------------
async def test_a_thread_runs_in_one_process_at_a_time_and_a_job_lock_is_exclusive(backend):
    async with backend("a") as a, backend("b") as b:
        A, B = a.bookkeeping, b.bookkeeping
        async with A.exclusive("job") as ours:
            assert ours is True
            if A.shared:
                async with B.exclusive("job") as theirs:
                    assert theirs is False
        shared_only(A)
        async with B.exclusive("job") as theirs:  # released
            assert theirs is True
        order: list[str] = []

        async def hold(store: BookkeepingStore, tag: str) -> None:
            async with store.thread_lock("t1"):
                order.append(f"{tag}+")
                await asyncio.sleep(0.3)
                order.append(f"{tag}-")

        await asyncio.gather(hold(A, "a"), hold(B, "b"))
        assert order in (["a+", "a-", "b+", "b-"], ["b+", "b-", "a+", "a-"])


async def test_the_index_generation_is_seen_by_every_process(backend):
    async with backend("a") as a, backend("b") as b:
        shared_only(a.bookkeeping)
        assert await b.bookkeeping.index_generation() == ""
        await a.bookkeeping.set_index_generation("gen-1")
        assert await b.bookkeeping.index_generation() == "gen-1"
        assert await b.bookkeeping.index_generation("other") == ""


# ---- help desk -------------------------------------------------------------------------------
async def test_a_help_request_and_its_interrupt_are_claimed_once(backend):
    async with backend("a") as a, backend("b") as b:
        A, B = a.bookkeeping, b.bookkeeping
        deadline = await A.open_help_request("t1", "slack", {"channel": "C1"}, "q?", 60, interrupt_id="i1")
        [req] = await B.open_help_requests()
        assert req == {
            "thread_key": "t1",
            "platform": "slack",
            "reference": {"channel": "C1"},
            "deadline": pytest.approx(deadline),
            "interrupt_id": "i1",
        }
        got = await asyncio.gather(A.claim_help_request("t1", "x"), B.claim_help_request("t1", "y"))
        assert sorted(g is None for g in got) == [False, True]
        assert next(g for g in got if g) == {"platform": "slack", "reference": {"channel": "C1"}, "question": "q?"}
        assert await B.open_help_requests() == [] and await A.claim_help_request("t1", "z") is None
        await B.open_help_request("t1", "slack", {"channel": "C1"}, "again?", 60, interrupt_id="i2")  # a new one
        assert (await A.claim_help_request("t1", "x"))["question"] == "again?"
        claims = await asyncio.gather(*(s.claim_interrupt("i1", "t1", n) for s, n in ((A, "a"), (B, "b"), (A, "c"))))
        assert sum(claims) == 1
        assert await A.forget_claims_before(-1) == 1
        assert await B.claim_interrupt("i1", "t1", "b")  # forgotten: claimable again


# ---- feedback and audit ------------------------------------------------------------------------
ANSWER = dict(
    thread_key="t",
    platform="slack",
    channel="C1",
    question="q?",
    answer="a.",
    kind="answer",
    route="vectorstore",
    sources=[{"title": "Deploy", "location": "deploy.md"}],
    path=["route", "generate"],
)


async def test_votes_one_per_user_and_answer_latest_wins(backend):
    async with backend("a") as a, backend("b") as b:
        A, B = a.bookkeeping, b.bookkeeping
        assert await A.record_vote("a1", "U1", 1) is False  # unknown answer
        await A.record_answer("a1", **ANSWER)
        record = await B.answer_record("a1")
        assert record is not None and {k: record[k] for k in ANSWER} == ANSWER
        assert await B.record_vote("a1", "U1", -1, "wrong page")
        assert await A.vote_of("a1", "U1") == {"vote": -1, "reason": "wrong page"}
        assert await A.record_vote("a1", "U1", -1)  # a second click keeps the reason
        assert await B.vote_of("a1", "U1") == {"vote": -1, "reason": "wrong page"}
        assert await A.record_vote("a1", "U1", 1)  # changed their mind: the reason goes
        assert await B.vote_of("a1", "U1") == {"vote": 1, "reason": ""}
        assert await B.record_vote("a1", "U2", -1, "old")
        rows = await A.feedback_rows()
        assert [(r["user_id"], r["vote"], r["reason"], r["answer_id"], r["question"]) for r in rows] == [
            ("U1", 1, "", "a1", "q?"),
            ("U2", -1, "old", "a1", "q?"),
        ]
        assert rows[0]["sources"] == ANSWER["sources"] and rows[0]["path"] == ANSWER["path"]
        with pytest.raises(ValueError):
            await A.record_vote("a1", "U1", 0)


async def test_the_audit_log_keeps_every_command_in_order(backend):
    async with backend("a") as a, backend("b") as b:
        await a.bookkeeping.audit("U1", "reindex", True)
        await asyncio.sleep(0.01)
        await b.bookkeeping.audit("U2", "learned forget 1", False, "not an admin")
        assert await a.bookkeeping.audit_rows() == [
            ("U1", "reindex", 1, ""),
            ("U2", "learned forget 1", 0, "not an admin"),
        ]


# ---- learned entries -------------------------------------------------------------------------
async def test_a_learned_entry_saved_by_one_process_is_found_and_forgotten_by_another(backend):
    async with backend("a") as a, backend("b") as b:
        entry = await asyncio.to_thread(
            a.learned.add,
            "How do I roll back a release?",
            "Run `make rollback VERSION=x`.",
            "Erik",
            thread_key="slack:T:C1:1.0",
            permalink="https://x.slack.com/p1",
            platform="slack",
            channel="C1",
        )
        other = await asyncio.to_thread(
            a.learned.add, "デプロイの承認は誰がしますか？", "オンコールのリードです。", "Gita"
        )
        with pytest.raises(ValueError):
            a.learned.add("q", "   ", "Erik")
        found = await asyncio.to_thread(b.learned.search, ["rolling back the release", ("unrelated words", 0.5)], 4)
        assert [e.id for e in found] == [entry.id]
        assert found[0] == entry and found[0].citation.startswith("answered by Erik on ")
        assert [e.id for e in b.learned.search(["デプロイの承認"], 4)] == [other.id]  # any script
        assert b.learned.search(["completely different topic"], 4) == []
        assert [e.id for e in b.learned.entries()] == [entry.id, other.id] and b.learned.get(other.id) == other
        assert await asyncio.to_thread(b.learned.forget, entry.id) is True
        assert a.learned.search(["roll back a release"], 4) == [] and a.learned.get(entry.id) is None
        assert a.learned.forget(entry.id) is False


# ---- checkpoints -----------------------------------------------------------------------------
def _saver_schema(storage: Storage) -> dict[str, tuple[str, ...]]:
    from bot.storage.postgres import checkpoints as pg
    from bot.storage.sqlite import checkpoints as sq

    return (pg if storage.backend == "postgres" else sq).SAVER_SCHEMA


async def test_the_checkpoint_sql_is_pinned_to_the_savers_schema(backend):
    """The raw statements of bot/storage/*/checkpoints.py rely on these columns: an upgrade of
    a LangGraph saver that changes them fails here before it can break pruning."""
    async with backend("a") as a:
        saver = a.checkpointer
        for table, columns in _saver_schema(a).items():
            if a.backend == "postgres":
                async with a.pools["queries"].connection() as conn:
                    rows = await (
                        await conn.execute(
                            "SELECT column_name FROM information_schema.columns WHERE table_name = %s", (table,)
                        )
                    ).fetchall()
                assert set(columns) <= {r["column_name"] for r in rows}, table
            else:
                rows = await (await saver.conn.execute(f"PRAGMA table_info({table})")).fetchall()
                assert tuple(r[1] for r in rows) == columns, f"langgraph-checkpoint-sqlite changed table {table}"


async def test_pruning_keeps_the_newest_checkpoints_of_one_thread(backend):
    from langgraph.checkpoint.base import empty_checkpoint

    async with backend("a") as a:
        saver = a.checkpointer
        ids = {}
        for thread in ("console:x", "console:y", "slack:z"):
            config = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
            ids[thread] = []
            for step in range(5):
                cp = empty_checkpoint()
                config = await saver.aput(config, cp, {"source": "loop", "step": step, "parents": {}}, {})
                ids[thread].append(cp["id"])
        assert await checkpoints.thread_keys(saver, "console:") == ["console:x", "console:y"]
        assert await checkpoints.latest_checkpoint_id(saver, "console:x") == ids["console:x"][-1]
        before = await checkpoints.thread_bytes(saver, "console:x")
        assert await checkpoints.prune(saver, "console:x", 2) == 3
        assert await checkpoints.latest_checkpoint_id(saver, "console:x") == ids["console:x"][-1]
        kept = [
            c.config["configurable"]["checkpoint_id"]
            async for c in saver.alist({"configurable": {"thread_id": "console:x"}})
        ]
        assert kept == ids["console:x"][:-3:-1]  # the newest two, newest first
        assert await checkpoints.prune(saver, "console:x", 1) == 1
        assert await checkpoints.thread_bytes(saver, "console:x") <= before
        assert len([c async for c in saver.alist({"configurable": {"thread_id": "console:y"}})]) == 5  # untouched
        assert await checkpoints.latest_checkpoint_id(saver, "nope") == ""
