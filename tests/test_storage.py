"""Storage: the checkpoint file stays bounded on a long thread (pruning + incremental
vacuum, raw SQL pinned to the saver's schema), and a read-only, missing or full data
folder ends a command with one clear line and a non-zero exit (never a hang), or, in a
running bot, with an apology in chat that says the bot cannot save, while other threads
go on being served.

Full and read-only file systems are real: small tmpfs mounts (we run as root, which
ignores chmod). Those tests are skipped where mounting is not allowed.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from bot.config import load_settings
from bot.platforms.console import ConsoleResponder
from bot.storage import checkpoints
from tests.conftest import scripted_runtime, write_config
from tests.fakes.mistral_stall import mistral_server

ROOT = Path(__file__).resolve().parent.parent


# ---- the checkpointer's schema and the file size ------------------------------------------
def _file_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


async def test_a_long_thread_keeps_its_history_in_bounded_storage(settings):
    turns = 40
    async with scripted_runtime(settings) as (rt, _model):
        saver = rt.graph.checkpointer
        out = ConsoleResponder("long", show_status=False, show_answers=False)
        for i in range(turns):
            await rt.service.ask("console:long", f"question {i}: what does the standalone container need to boot?", out)
        values = await rt.service.thread_values("console:long")
        conversation = sum(len(str(m.content).encode()) for m in values["messages"])
        stored = await checkpoints.thread_bytes(saver, "console:long")
        async with saver.lock:
            await saver.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            vacuum = (await (await saver.conn.execute("PRAGMA auto_vacuum")).fetchone())[0]
            free = (await (await saver.conn.execute("PRAGMA freelist_count")).fetchone())[0]
        path = settings.path(settings.service.checkpoint_db)
        size = _file_bytes(path)
    assert len(values["messages"]) == 2 * turns  # every turn is kept
    assert len(out.answers) == turns and all(a.kind == "answer" for a in out.answers)
    assert stored <= 5 * conversation + 200_000, (stored, conversation)
    assert vacuum == 2 and free < 16  # incremental auto-vacuum gives freed pages back
    assert size <= 5 * conversation + 200_000, (size, conversation)


async def test_an_old_checkpoint_file_is_converted_to_incremental_vacuum(tmp_path):
    settings = load_settings(write_config(tmp_path))
    path = settings.path(settings.service.checkpoint_db)
    path.parent.mkdir(parents=True)
    async with AsyncSqliteSaver.from_conn_string(str(path)) as saver:
        await saver.setup()  # as earlier versions created it: auto_vacuum = NONE
    async with scripted_runtime(settings) as (rt, _):
        out = ConsoleResponder("x", show_status=False, show_answers=False)
        await rt.service.ask("console:x", "what does the standalone container need to boot?", out)
    assert sqlite3.connect(path).execute("PRAGMA auto_vacuum").fetchone()[0] == 2
    assert out.answers[0].kind == "answer"


# ---- read-only and full data folders ------------------------------------------------------
@contextmanager
def tmpfs(path: Path, *options: str):
    """Mount a tmpfs at ``path`` (``size=...``, ``ro``...); skip the test where not allowed."""
    path.mkdir(parents=True, exist_ok=True)
    res = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", ",".join(options or ("size=2m",)), "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    if res.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {res.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def fill(folder: Path) -> Path:
    """Fill the file system of ``folder`` up to the last byte; returns the filler file."""
    filler = folder / "filler.bin"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        for size in (65536, 4096, 512, 1):
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError:
                pass
    finally:
        os.close(fd)
    return filler


async def run_cli(args: list[str], env_extra: dict[str, str], timeout: float = 90) -> tuple[int, str, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "DISCORD_", "MISTRAL_", "TAVILY_"))}
    env.update(HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT), **env_extra)
    t0 = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        *args,
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, errb = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise AssertionError(f"threadwise {args[0]} hung for {timeout:.0f} s") from None
    return proc.returncode, (out + errb).decode(errors="replace"), time.monotonic() - t0


def cli_config(tmp_path: Path, data: Path, model_base: str) -> Path:
    path = write_config(tmp_path)
    text = path.read_text()
    text = text.replace('checkpoint_db = "data/checkpoints.sqlite"', f'checkpoint_db = "{data}/checkpoints.sqlite"')
    text = text.replace('bookkeeping_db = "data/bookkeeping.sqlite"', f'bookkeeping_db = "{data}/bookkeeping.sqlite"')
    text = text.replace("[knowledge]", f'[knowledge]\nindex_dir = "{tmp_path}/index"')
    text = text.replace(
        "[models]\nmax_retries = 2",
        f'[models]\nprovider = "mistral"\nmistral_base_url = "{model_base}"\nmax_retries = 0',
    )
    path.write_text(text)
    return path


@pytest.mark.parametrize("where", ["read-only", "full", "under-a-file"])
@pytest.mark.parametrize("command", [["ask", "what does the standalone container need to boot?"], ["console"]])
async def test_cli_with_an_unwritable_data_folder_exits_with_one_clear_line(tmp_path, where, command):
    data = tmp_path / "data"
    async with mistral_server() as model:
        if where == "under-a-file":
            (tmp_path / "afile").write_text("not a folder")
            cfg = cli_config(tmp_path, tmp_path / "afile" / "data", model.base_url)
            code, output, seconds = await run_cli([*command, "--config", str(cfg)], {"MISTRAL_API_KEY": "k"})
        else:
            opts = ("size=1m", "ro") if where == "read-only" else ("size=256k",)
            with tmpfs(data, *opts):
                if where == "full":
                    fill(data)
                cfg = cli_config(tmp_path, data, model.base_url)
                code, output, seconds = await run_cli([*command, "--config", str(cfg)], {"MISTRAL_API_KEY": "k"})
    assert code != 0, output
    assert "storage" in output and "Traceback" not in output, output
    assert "check the key and the network" not in output
    assert seconds < 60


async def test_a_running_bot_on_a_full_disk_apologises_and_keeps_serving(tmp_path, fake):
    """Slack: a question that cannot be saved gets the "cannot save" apology and the apology
    reaction; once space is back, the next question is answered."""
    from tests.fakes.chat_model import ScriptedChatModel
    from tests.fakes.slack_api import SlackHarness
    from tests.fakes.slack_api import write_config as slack_config

    with tmpfs(tmp_path / "data", "size=3m") as data:
        harness = await SlackHarness(tmp_path, fake, slack_config(tmp_path, fake), ScriptedChatModel()).open()
        try:
            req, ts1 = harness.mention("UASKER", "how do I roll back a deploy?")
            await harness.send(req)
            assert len(harness.answers()) == 1
            filler = fill(data)
            req, ts2 = harness.mention("UASKER", "who is on call this week?")
            await harness.send(req)
            filler.unlink()
            req, ts3 = harness.mention("UASKER", "how do I deploy?")
            await harness.send(req)
        finally:
            await harness.close()
    by_thread = {a["thread_ts"]: a for a in harness.answers()}
    assert "can't save" in by_thread[ts2]["text"] or "can’t save" in by_thread[ts2]["text"], by_thread.get(ts2)
    assert fake.reactions[(harness.channel, ts2)] == ["disappointed"]
    assert "make deploy" in by_thread[ts3]["text"] or by_thread[ts3]["text"]
    assert fake.reactions[(harness.channel, ts3)] == ["white_check_mark"]
