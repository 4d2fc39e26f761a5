"""Learned entries on replicas: two hosts (each its own local data folder) on one PostgreSQL
database. An expert's answer saved on host A is used in an answer on host B; another process
(the `threadwise learned` CLI, a third folder) lists it and forgets it; after that neither
host uses it any more."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

from bot.config import Secrets, load_settings
from bot.platforms.console import ConsoleResponder
from tests.conftest import scripted_runtime, write_config
from tests.fakes.postgres import pg_database  # noqa: F401 - fixture
from tests.test_learning import learned_only

ROOT = Path(__file__).resolve().parent.parent
PG = '[storage]\nbackend = "postgres"\nmax_connections = 8\n'


def host(root: Path):
    root.mkdir()
    return load_settings(write_config(root, PG))


def shown(answer) -> str:
    return " ".join([answer.text, *(f"{s.title} {s.location}" for s in answer.sources)])


def cli(root: Path, url: str, *args: str) -> subprocess.CompletedProcess:
    config = write_config(root, PG)
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "THREADWISE_DATABASE_URL": url}
    return subprocess.run(
        [sys.executable, "-m", "bot", "learned", *args, "--config", str(config)],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


async def test_an_entry_learned_on_one_host_is_used_and_forgotten_on_another(tmp_path, pg_database):
    _, url = pg_database
    secrets = Secrets(database_url=url)
    script = {"grade_documents": learned_only}  # only learned entries are relevant: no entry, no answer
    async with (
        scripted_runtime(host(tmp_path / "host-a"), script=script, secrets=secrets) as (a, _),
        scripted_runtime(host(tmp_path / "host-b"), script=script, secrets=secrets) as (b, _),
    ):
        out = ConsoleResponder("b", show_status=False, show_answers=False)
        entry = await asyncio.to_thread(
            a.learned.add, "Who approves a hotfix?", "The on-call lead approves every hotfix.", "Erik"
        )
        await b.service.ask("console:b1", "who approves a hotfix?", out)
        assert out.answers[-1].kind == "answer" and "answered by Erik" in shown(out.answers[-1]), out.answers

        listed = await asyncio.to_thread(cli, tmp_path / "cli", url, "list", "--json")
        assert listed.returncode == 0, listed.stderr
        assert [json.loads(line)["id"] for line in listed.stdout.splitlines()] == [entry.id]
        forgot = await asyncio.to_thread(cli, tmp_path / "cli", url, "forget", str(entry.id))
        assert forgot.returncode == 0 and f"Learned entry {entry.id} removed" in forgot.stdout, forgot.stderr

        before = len(out.answers)
        await b.service.ask("console:b2", "who approves a hotfix?", out)
        assert all("answered by Erik" not in shown(x) for x in out.answers[before:])  # no answer from it
        assert a.learned.entries() == [] and b.learned.search(["hotfix approval"], 4) == []
        again = await asyncio.to_thread(cli, tmp_path / "cli", url, "forget", str(entry.id))
        assert again.returncode == 1 and f"There is no learned entry {entry.id}" in again.stderr
