"""Reindex across processes: one `threadwise reindex` at a time per
index folder (others refused, naming the holder's pid), every swap leaves a complete
generation and manifest, and a running KnowledgeBase picks up a generation another
process published. Real processes: `python -m bot reindex --config ...`."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest

from graphs.knowledge import IndexStats, KnowledgeBase, ReindexBusyError
from tests.conftest import serve, write_config
from tests.fakes.mistral_api import HeldEmbeddings

ROOT = Path(__file__).resolve().parent.parent


async def run_cli(config: Path, *args: str, env: dict[str, str] | None = None) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        "reindex",
        "--config",
        str(config),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=str(ROOT),
        env={**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "COLUMNS": "200", **(env or {})},
    )


async def finish(proc: asyncio.subprocess.Process, timeout: float = 240) -> tuple[int, str]:
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    return proc.returncode, (out + err).decode()


def assert_complete(index: Path) -> str:
    """CURRENT names a generation folder holding a manifest, a chunk table and no .tmp."""
    name = (index / "CURRENT").read_text().strip()
    gen = index / name
    manifest = json.loads((gen / "manifest.json").read_text())
    assert manifest["chunks"] > 0 and (gen / "chunks.sqlite").stat().st_size > 0
    assert not list(index.glob("*.tmp"))
    return name


async def test_a_second_reindex_is_refused_while_one_runs(tmp_path):
    fake = HeldEmbeddings()
    async with serve({"/v1/embeddings": fake.embeddings}) as base:
        config = write_config(tmp_path)
        config.write_text(
            config.read_text()
            .replace('embeddings = "none"', 'embeddings = "mistral"')
            .replace("[models]", f'[models]\nmistral_base_url = "{base}/v1"')
        )
        env = {"MISTRAL_API_KEY": "test-key"}
        first = await run_cli(config, env=env)
        await asyncio.wait_for(fake.arrived.wait(), 120)  # the first reindex holds the lock, embedding
        rc, text = await finish(await run_cli(config, env=env))
        assert rc == 2 and f"another reindex is running (pid {first.pid})" in text
        # the same lock guards reindexes in this process (a running bot's admin command)
        kb = KnowledgeBase(tmp_path / "data" / "index", [tmp_path / "kb"])
        try:
            kb.reindex()
            raise AssertionError("reindex was not refused")
        except ReindexBusyError as exc:
            assert exc.pid == first.pid
        assert "another reindex is running" in kb.stats()["last_error"]
        fake.release.set()
        rc, text = await finish(first)
    assert rc == 0, text
    assert "Indexed 3 documents" in text
    assert_complete(tmp_path / "data" / "index")


def big_corpus(root: Path, files: int = 400) -> Path:
    src = root / "big"
    for i in range(files):
        p = src / f"d{i % 10}" / f"page{i}.md"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(
            f"# Page {i}\n\n"
            + "\n\n".join(
                f"## Part {j}\n\nSection {j} of page {i} explains setting_{i}_{j} in some detail. " * 3
                for j in range(6)
            )
        )
    return src


async def test_five_reindexes_at_once_leave_a_complete_index_that_a_running_reader_sees(tmp_path):
    config = write_config(tmp_path, sources=[big_corpus(tmp_path)])
    index = tmp_path / "data" / "index"
    rc, text = await finish(await run_cli(config))
    assert rc == 0, text
    reader = KnowledgeBase(index, [tmp_path / "big"])  # a running bot's knowledge base
    before = reader.stats()["generation"]
    assert reader.search(["setting_7_3"], 1)[0]["location"] == "d7/page7.md"

    # a change to publish (a sync that finds nothing changed keeps the live generation)
    (tmp_path / "big" / "d1" / "page1.md").write_text("# Page 1\n\nRewritten: setting_1_0 moved.\n")
    procs = [await run_cli(config) for _ in range(5)]
    results = [await finish(p) for p in procs]
    for rc, text in results:
        assert rc == 0 or (rc == 2 and "another reindex is running (pid " in text), text
    assert any(rc == 0 for rc, _ in results)
    live = assert_complete(index)
    assert reader.stats()["generation"] == live != before  # picked up without a restart
    assert reader.search(["setting_7_3"], 1)[0]["location"] == "d7/page7.md"
    assert len([p for p in index.glob("gen-*") if p.is_dir()]) <= 2  # keep_generations


async def test_a_running_knowledge_base_serves_a_generation_written_by_another_process(tmp_path):
    config = write_config(tmp_path)
    index = tmp_path / "data" / "index"
    rc, text = await finish(await run_cli(config))
    assert rc == 0, text
    bot_kb = KnowledgeBase(index, [tmp_path / "kb"])
    assert bot_kb.search(["zeppelin mooring mast"], 3) == []
    (tmp_path / "kb" / "airships.md").write_text("# Airships\n\nThe zeppelin ties up at a mooring mast.\n")
    rc, text = await finish(await run_cli(config))
    assert rc == 0, text
    hits = bot_kb.search(["zeppelin mooring mast"], 3)
    assert hits and hits[0]["location"] == "airships.md"
    assert bot_kb.stats()["files"] == 4


async def test_a_killed_reindex_leaves_the_live_index_and_no_lock(tmp_path):
    fake = HeldEmbeddings()
    async with serve({"/v1/embeddings": fake.embeddings}) as base:
        config = write_config(tmp_path)
        rc, text = await finish(await run_cli(config))  # a keyword-only generation is live
        assert rc == 0, text
        index = tmp_path / "data" / "index"
        live = assert_complete(index)
        config.write_text(
            config.read_text()
            .replace('embeddings = "none"', 'embeddings = "mistral"')
            .replace("[models]", f'[models]\nmistral_base_url = "{base}/v1"')
        )
        doomed = await run_cli(config, env={"MISTRAL_API_KEY": "test-key"})
        await asyncio.wait_for(fake.arrived.wait(), 120)
        # the next generation is being written (streamed, under its .tmp name); the live one serves
        assert (index / "CURRENT").read_text() == live
        doomed.kill()  # SIGKILL mid-build: the kernel releases its lock
        await doomed.wait()
        fake.release.set()
        reader = KnowledgeBase(index, [tmp_path / "kb"])
        assert reader.stats()["generation"] == live
        rc, text = await finish(await run_cli(config, env={"MISTRAL_API_KEY": "test-key"}))
    assert rc == 0, text
    assert assert_complete(index) != live
    assert reader.stats()["embedder"] == "mistral:mistral-embed"


@pytest.mark.parametrize(
    "seconds, shown", [(0.04, "in 0.0 s"), (3.26, "in 3.3 s"), (140.25, "in 140.2 s"), (1234.0, "in 1234.0 s")]
)
def test_the_reindex_summary_gives_seconds_plainly(seconds, shown):
    """What `threadwise reindex` and the admin command report: seconds with one decimal at
    any size (a 140 s reindex was shown as "1.4e+02 s")."""
    text = IndexStats(files=161, chunks=2885, embedded_chunks=2885, seconds=seconds).summary()
    assert text == f"161 documents into 2885 chunks (2885 embedded, 0 reused) {shown}"
