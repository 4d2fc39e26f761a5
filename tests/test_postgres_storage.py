"""The PostgreSQL backend beyond the shared contract (tests/test_storage_conformance.py runs
that against SQLite and PostgreSQL alike): the schema is created and upgraded by the program
(an old version-1 schema made by hand included), a runtime answers and prunes on it, a
reindex runs once across replicas, late writes of a replica whose run was taken over leave
the other's row alone, and the config refuses postgres without THREADWISE_DATABASE_URL in
one line."""

from __future__ import annotations

import asyncio
import json  # noqa: F401
import re
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from bot.config import Secrets, load_settings
from bot.storage import open_storage
from bot.storage.postgres import migrations
from bot.storage.postgres.checkpoints import SAVER_SCHEMA
from tests.conftest import scripted_runtime, write_config
from tests.fakes.postgres import pg_database  # noqa: F401 - fixture

ROOT = Path(__file__).resolve().parent.parent


def pg_settings(tmp_path: Path, extra: str = ""):
    return load_settings(
        write_config(
            tmp_path, '[storage]\nbackend = "postgres"\nlease_seconds = 1\nrecovery_interval_seconds = 0.5\n' + extra
        )
    )


V1 = migrations.MIGRATIONS[0]


async def test_an_old_version_1_schema_is_upgraded_and_its_runs_taken_over(tmp_path, pg_database):
    name, url = pg_database
    with psycopg.connect(url, autocommit=True) as conn:  # version 1, as an older Threadwise left it
        conn.execute(
            "CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
        )
        for statement in filter(str.strip, V1.split(";")):
            conn.execute(statement)
        conn.execute("INSERT INTO schema_version (version) VALUES (1)")
        conn.execute("INSERT INTO seen_messages VALUES ('slack:C1:1.0', 'slack:C1:1.0', extract(epoch from now()))")
        conn.execute(
            "INSERT INTO runs (run_id, thread_key, platform, reference, started_at, stage) VALUES"
            " ('slack:C1:1.0', 'slack:C1:1.0', 'slack', '{}', extract(epoch from now()), 'queued')"
        )
    settings = pg_settings(tmp_path)
    async with open_storage(settings, url) as storage:
        store = storage.bookkeeping
        assert await store.mark_seen("slack:C1:1.0", "slack:C1:1.0") is False  # kept across the upgrade
        runs = await store.unfinished_runs()  # no lease yet: taken over at once
        assert [r["run_id"] for r in runs] == ["slack:C1:1.0"]
        assert await store.unfinished_runs() == []  # and only once
    with psycopg.connect(url) as conn:
        assert [r[0] for r in conn.execute("SELECT version FROM schema_version ORDER BY version")] == list(
            range(1, migrations.LATEST + 1)
        )
        cols = {
            r[0] for r in conn.execute("SELECT column_name FROM information_schema.columns WHERE table_name = 'runs'")
        }
        assert {"seq", "owner", "lease_expires"} <= cols
        for table, columns in SAVER_SCHEMA.items():  # the saver tables the checkpoint SQL expects
            have = {
                r[0]
                for r in conn.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_name = %s", (table,)
                )
            }
            assert set(columns) <= have, (table, set(columns) - have)


async def test_learned_entries_of_a_version_5_schema_are_kept_and_new_ones_keep_their_knowledge(tmp_path, pg_database):
    """Version 5 had no column for the knowledge an entry was learned under: its entries are kept
    (with none, used where they were), and a new entry keeps the sources its thread searched."""
    name, url = pg_database
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
        )
        for version, migration in enumerate(migrations.MIGRATIONS[:5], start=1):
            for statement in filter(str.strip, migration.split(";")):
                conn.execute(statement)
            conn.execute("INSERT INTO schema_version (version) VALUES (%s)", (version,))
        conn.execute(
            "INSERT INTO learned_entries (question, answer, answered_by, answered_at, search) VALUES"
            " ('who approves a hotfix?', 'The on-call lead.', 'Erik', 1780000000, to_tsvector('english', 'hotfix'))"
        )
    async with open_storage(pg_settings(tmp_path), url) as storage:
        (old,) = storage.learned.entries()
        assert (old.question, old.answer, old.sources) == ("who approves a hotfix?", "The on-call lead.", ())
        new = await asyncio.to_thread(
            storage.learned.add, "does it need a GPU?", "No, CPU only.", "Gita", sources=["/docs/b", "/docs/a"]
        )
        assert new.sources == ("/docs/a", "/docs/b") and storage.learned.get(new.id) == new
        assert [e.sources for e in storage.learned.search(["hotfix", "GPU"], 4)] in (
            [(), new.sources],
            [new.sources, ()],
        )


def test_db_upgrade_command_and_a_missing_database_url(tmp_path, pg_database):
    name, url = pg_database
    config = write_config(tmp_path, '[storage]\nbackend = "postgres"\n')
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    run = lambda *a, **kw: subprocess.run(  # noqa: E731
        [sys.executable, "-m", "bot", *a, "--config", str(config)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        **kw,
    )
    missing = run("db", "upgrade", env=env)
    assert missing.returncode == 2
    lines = [x for x in missing.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and "THREADWISE_DATABASE_URL" in lines[0], missing.stderr
    before = run("db", "status", env={**env, "THREADWISE_DATABASE_URL": url})
    assert before.returncode == 1 and "schema version 0" in before.stdout
    assert len((before.stdout + before.stderr).strip().splitlines()) == 1  # one line, as docs/deploy.md shows
    up = run("db", "upgrade", env={**env, "THREADWISE_DATABASE_URL": url})
    assert up.returncode == 0, up.stderr
    after = run("db", "status", env={**env, "THREADWISE_DATABASE_URL": url})
    assert after.returncode == 0 and f"schema version {migrations.LATEST}" in after.stdout
    threads = run("threads", env={**env, "THREADWISE_DATABASE_URL": url})
    assert threads.returncode == 0 and "no threads yet" in threads.stdout


BAD_URLS = {
    "closed port": ("postgresql://postgres@127.0.0.1:1/test", "nothing accepts connections at 127.0.0.1:1"),
    "unknown host": ("postgresql://postgres@no-such-host.invalid:5432/test", "host 'no-such-host.invalid'"),
    "missing database": ("postgresql://postgres@127.0.0.1:5432/tw_missing_db", 'database "tw_missing_db" does not'),
    "garbage": ("garbage", "THREADWISE_DATABASE_URL is not a PostgreSQL URL"),
    "unknown user": ("postgresql://nobody@127.0.0.1:5432/test", "refused the login"),
}


@pytest.mark.parametrize("kind", list(BAD_URLS))
def test_a_bad_database_url_is_named_in_one_line_with_exit_code_2(tmp_path, kind):
    """Each kind of wrong THREADWISE_DATABASE_URL, through the real CLI: `db status` and `ask`
    stop with exit code 2 and one line naming the cause (never advice about data folders)."""
    url, cause = BAD_URLS[kind]
    config = write_config(tmp_path, '[storage]\nbackend = "postgres"\nconnect_timeout_seconds = 3\n')
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "THREADWISE_DATABASE_URL": url}
    for command in (["db", "status"], ["ask", "how do I deploy?"]):
        proc = subprocess.run(
            [sys.executable, "-m", "bot", *command, "--config", str(config)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
        lines = [x for x in proc.stderr.splitlines() if x.strip()]
        assert proc.returncode == 2, (command, proc.stderr)
        assert len(lines) == 1 and cause in lines[0], (command, proc.stderr)
        assert "data_dir" not in proc.stderr and "postgres@" not in lines[0].split(":", 1)[1]


@pytest.mark.parametrize("keep", [1, 3])
async def test_postgres_runtime_answers_and_prunes(tmp_path, pg_database, keep):
    name, url = pg_database
    settings = pg_settings(tmp_path)
    settings = settings.model_copy(
        update={
            "service": settings.service.model_copy(
                update={"keep_checkpoints_per_thread": keep, "checkpoint_durability": "async"}
            )
        }
    )  # a checkpoint per step
    async with scripted_runtime(settings, secrets=Secrets(database_url=url)) as (rt, _):
        from bot.platforms.console import ConsoleResponder
        from bot.terminal import make_console

        out = ConsoleResponder("t", make_console(stderr=True), show_status=False, show_answers=False)
        for q in ("how do I deploy?", "and roll back?"):
            result = await rt.service.ask("console:pg", q, out)
            assert result and result.answer and result.answer.kind != "apology", result
        from bot.storage.postgres import checkpoints as pg_checkpoints

        counts = await pg_checkpoints.thread_counts(rt.graph.checkpointer, "console:pg")
        assert counts["checkpoints"] == keep  # pruned to keep_checkpoints_per_thread
        with psycopg.connect(url) as conn:  # the deleted checkpoints' writes went with them
            assert (
                conn.execute(
                    "SELECT count(*) FROM checkpoint_writes w WHERE NOT EXISTS (SELECT 1 FROM checkpoints"
                    " c WHERE c.thread_id = w.thread_id AND c.checkpoint_ns = w.checkpoint_ns AND"
                    " c.checkpoint_id = w.checkpoint_id)"
                ).fetchone()[0]
                == 0
            )
        values = await rt.service.thread_values("console:pg")
        assert len(values["messages"]) == 4
        assert await rt.service.thread_keys("console:") == ["console:pg"]


class Notes:
    """A responder that keeps what an admin command said (the console's, minus the terminal)."""

    def __init__(self) -> None:
        self.progress: list[str] = []

    async def update_progress(self, text: str, *, final: bool = False) -> None:
        self.progress.append(text)

    async def post_notice(self, text: str) -> None:
        self.progress.append(text)

    async def notify_private(self, text: str) -> None:
        self.progress.append(text)


async def test_a_reindex_runs_once_across_replicas_and_every_replica_picks_it_up(tmp_path, pg_database):
    """Two runtimes on one database and one (shared) index folder: a reindex while another
    replica holds the reindex lock is refused; the reindex that runs records its generation
    in the database, and the other replica's watch loads it."""
    name, url = pg_database
    settings = pg_settings(tmp_path)
    secrets = Secrets(database_url=url)
    async with (
        scripted_runtime(settings, secrets=secrets) as (a, _),
        scripted_runtime(settings, secrets=secrets) as (b, _),
    ):
        await b.service.recover()  # starts b's replica watch
        first = a.knowledge.stats()["generation"]
        async with b.bookkeeping.exclusive("threadwise:reindex") as held:
            assert held
            busy = Notes()
            await a.service.admin("reindex", actor_id="UADMIN", is_admin=True, out=busy)
        assert busy.progress[-1] == "A reindex is already running on another replica."
        assert a.knowledge.stats()["generation"] == first and await a.bookkeeping.index_generation() == ""
        # a change to publish (a sync that finds nothing changed keeps the live generation)
        (tmp_path / "kb" / "auth.md").write_text("# Authentication\n\nStudio needs a token now.\n")
        done = Notes()
        await a.service.admin("reindex", actor_id="UADMIN", is_admin=True, out=done)
        assert done.progress[-1].startswith("Reindex done"), done.progress
        generation = a.knowledge.stats()["generation"]
        assert generation != first and await b.bookkeeping.index_generation() == generation
        for _ in range(50):
            if b.knowledge.stats()["generation"] == generation:
                break
            await asyncio.sleep(0.1)
        assert b.knowledge.stats()["generation"] == generation


@pytest.mark.parametrize(
    "toml, problem",
    [
        ('[storage]\nbackend = "mysql"\n', "storage.backend: Input should be 'sqlite' or 'postgres'"),
        ("[storage]\nlease_seconds = 0\n", "storage.lease_seconds"),
        ('[storage]\ndatabase_url = "postgresql://x"\n', "storage.database_url: unknown key"),  # never from the file
        ("[discord]\nshard_id = 1\n", "discord.shard_id and discord.shard_count go together"),
        ("[discord]\nshard_id = 3\nshard_count = 3\n", "discord.shard_id = 3 must be below discord.shard_count = 3"),
    ],
)
def test_storage_and_shard_settings_are_validated(tmp_path, toml, problem):
    from bot.config import ConfigError

    path = tmp_path / "config.toml"
    path.write_text(toml)
    with pytest.raises(ConfigError, match=re.escape(problem)):
        load_settings(path)


async def test_discord_client_gets_the_shard_settings(tmp_path):
    from bot.platforms.discord.app import build_discord_bot

    for shards, expected in (("shard_id = 1\nshard_count = 3\n", (1, 3)), ("", (None, None))):
        root = tmp_path / (shards[:10].strip() or "plain").replace(" ", "")
        root.mkdir()
        settings = load_settings(write_config(root, "[discord]\n" + shards))
        async with scripted_runtime(settings) as (rt, _):
            bot = build_discord_bot(rt)
            assert (bot.shard_id, bot.shard_count) == expected


def test_database_errors_are_storage_failures():
    from bot.failures import describe_failure, failure_kind

    with pytest.raises(psycopg.OperationalError) as info:
        psycopg.connect("postgresql://postgres@127.0.0.1:1/none", connect_timeout=2)
    assert failure_kind(info.value) == "storage"
    assert describe_failure(info.value).startswith("storage: OperationalError")


async def test_a_run_taken_over_and_finished_by_another_replica_is_not_posted_by_its_first(tmp_path, pg_database):
    """Fencing: replica a's run m1 is taken over by b (a's lease expired while a was alive)
    and b answers and finishes it. a, waking up, may not start, show or post m1 (no row is
    left to say so: a's fence does); its help-request run and b's own runs are untouched."""
    _, url = pg_database
    settings = pg_settings(tmp_path)
    run = ("slack", {"channel": "C1"}, {"text": "q"})
    async with open_storage(settings, url) as a, open_storage(settings, url) as b:
        A, B = a.bookkeeping, b.bookkeeping
        assert await A.mark_seen("m1", "t1", run=run)
        assert await A.run_started("m1", "t1", "slack", {"channel": "C1"}, {"question": "q"}, "")
        for _ in range(4):  # a is stopped: its lease (1 s) expires
            await asyncio.sleep(0.4)
            await B.renew_leases()
        assert [r["run_id"] for r in await B.unfinished_runs()] == ["m1"]
        assert await B.unfinished_runs() == []  # b does not take its own run again
        assert await B.run_started("m1", "t1", "slack", {"channel": "C1"}, {"question": "q"}, "")
        assert await B.may_post("m1") is True
        await B.update_run("m1", stage="posted")
        await B.finish_run("m1")
        # a wakes up: nothing of m1 is its any more
        assert await A.renew_leases() == 0
        assert await A.may_post("m1") is False
        assert await A.holds("m1") is False
        assert await A.run_started("m1", "t1", "slack", {"channel": "C1"}, {"question": "q"}, "") is False
        await A.finish_run("m1")
        # a taken-over run still in flight at b: a's late writes leave b's row as b left it
        assert await A.mark_seen("m2", "t2", run=run)
        for _ in range(4):
            await asyncio.sleep(0.4)
            await B.renew_leases()
        assert [r["run_id"] for r in await B.unfinished_runs()] == ["m2"]
        await A.update_run("m2", stage="posted", reference={"channel": "stale"})
        assert await A.may_post("m2") is False and await A.holds("m2") is False
        await A.finish_run("m2")
        async with b.pools["queries"].connection() as conn:
            row = await (await conn.execute("SELECT owner, stage, reference FROM runs WHERE run_id = 'm2'")).fetchone()
        assert row["owner"] == B.replica_id and row["stage"] == "queued" and "stale" not in row["reference"]
        assert await B.holds("m2") is True and await B.may_post("m2") is True
        # a run with no row yet (a resume) is a's own; the same id started by b meanwhile is not
        assert await A.run_started("resume:i1", "t3", "slack", {}, {"resume": {}}, "")
        assert await B.run_started("resume:i1", "t3", "slack", {}, {"resume": {}}, "") is False
        assert await A.may_post("resume:i1") is True


def test_graph_workers_are_not_started_beside_the_postgres_backend(caplog):
    """A graph worker writes the SQLite checkpoint file: on PostgreSQL its checkpoints would
    miss the database the replicas share, so a configured number is refused with one warning."""
    from bot.runtime import resolve_graph_workers
    from tests.fakes.chat_model import ScriptedChatModel

    model = ScriptedChatModel(script={})
    assert resolve_graph_workers(3, model, "postgres") == 0
    assert "graph_workers = 3 ignored" in caplog.text
    assert resolve_graph_workers(3, model, "sqlite") == 3
