"""A sync of some sources never publishes an index without the others, ``threadwise sources``
says when a source is not in the index, and a source that keeps failing does not make every
``threadwise ask`` sync the others: through the real process, real folders and config files."""

from __future__ import annotations

import json
import time
from pathlib import Path

from tests.fakes.bot_process import threadwise
from tests.test_sources_safety import files_config


def facts(root: Path) -> None:
    """Three folders, one fact each."""
    for name, text in [
        ("handbook", "# Leave\n\nAsk your manager before booking the okapi leave.\n"),
        ("runbooks", "# Redis\n\nRestart the quetzal Redis with the blue lever.\n"),
        ("policies", "# Travel\n\nThe daily narwhal allowance is 45 euros.\n"),
    ]:
        (root / name).mkdir()
        (root / name / f"{name}.md").write_text(text)


def listed(cfg: Path, root: Path) -> dict[str, dict]:
    result = threadwise("sources", "--json", "--config", str(cfg), cwd=root)
    assert result.returncode == 0, result.stderr[-2000:]
    return {row["name"]: row for row in map(json.loads, result.stdout.splitlines())}


def test_a_named_sync_brings_in_the_sources_the_index_lacks_instead_of_publishing_without_them(tmp_path):
    facts(tmp_path)
    other = tmp_path / "other.toml"
    other.write_text(files_config(tmp_path, "runbooks").read_text())
    team = files_config(tmp_path, "handbook", "runbooks")
    assert threadwise("sync", "--config", str(team), cwd=tmp_path).returncode == 0
    # another config.toml on the same data folder (the shipped one, a colleague's): its sync
    # drops the sources it does not configure
    team.write_text(team.read_text() + '\n[[sources]]\nname = "policies"\ntype = "files"\npath = ["policies"]\n')
    assert threadwise("sync", "--config", str(other), cwd=tmp_path).returncode == 0

    rows = listed(team, tmp_path)
    assert rows["handbook"]["documents"] == 0 and rows["handbook"]["indexed"] == "no", rows
    assert rows["policies"]["indexed"] == "no" and rows["runbooks"]["indexed"] == "yes", rows
    piped = threadwise("sources", "--config", str(team), cwd=tmp_path).stdout
    handbook = next(line for line in piped.splitlines() if line.startswith("• handbook"))
    assert "0 documents, 0 chunks" in handbook and "NOT IN THE INDEX (`threadwise sync handbook`" in handbook, piped
    assert "• runbooks (files): 1 document, 1 chunk, last sync" in piped, piped

    # a sync of one source: the one the index lacks is read too, the one it holds is carried over
    synced = threadwise("sync", "policies", "--config", str(team), cwd=tmp_path)
    assert synced.returncode == 0, synced.stderr[-2000:]
    assert "• handbook: 1 added" in synced.stdout and "• policies: 1 added" in synced.stdout, synced.stdout
    assert "• runbooks" not in synced.stdout, synced.stdout
    rows = listed(team, tmp_path)
    assert {n: (r["documents"], r["indexed"]) for n, r in rows.items()} == {
        "handbook": (1, "yes"),
        "runbooks": (1, "yes"),
        "policies": (1, "yes"),
    }, rows
    answer = threadwise("ask", "--json", "How do I book the okapi leave?", "--config", str(team), cwd=tmp_path)
    assert json.loads(answer.stdout)["sources"] == ["handbook.md"], answer.stdout + answer.stderr[-2000:]

    # a file renamed with its content unchanged is reported as renamed, not added and removed
    (tmp_path / "handbook" / "handbook.md").rename(tmp_path / "handbook" / "leave.md")
    synced = threadwise("sync", "handbook", "--config", str(team), cwd=tmp_path)
    assert "• handbook: 0 added, 0 updated, 0 removed, 1 renamed, 0 unchanged (1 document, 1 chunk" in synced.stdout
    assert synced.stdout.startswith("Indexed 3 documents into 3 chunks"), synced.stdout


def test_a_source_that_keeps_failing_is_retried_alone_and_at_most_every_ten_minutes(tmp_path):
    facts(tmp_path)
    cfg = files_config(tmp_path, "handbook")
    cfg.write_text(cfg.read_text() + f'\n[[sources]]\nname = "wiki"\ntype = "git"\nrepo = "{tmp_path / "gone"}"\n')
    assert threadwise("sync", "--config", str(cfg), cwd=tmp_path).returncode == 1  # wiki failed
    assert listed(cfg, tmp_path)["wiki"]["indexed"] == "no"

    question = ("-v", "ask", "How do I book the okapi leave?", "--config", str(cfg))
    asked = threadwise(*question, cwd=tmp_path)
    assert asked.returncode == 0, asked.stderr[-2000:]
    assert "syncing the knowledge index" not in asked.stderr, asked.stderr[-3000:]
    assert "source wiki is not in the index as configured and its last sync failed at" in asked.stderr, asked.stderr[
        -3000:
    ]

    # ten minutes later (the failure's time moved back in the status file): wiki alone is tried
    status = tmp_path / "data" / "index" / "sources.json"
    data = json.loads(status.read_text())
    data["wiki"]["last_sync"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 601))
    status.write_text(json.dumps(data))
    (tmp_path / "handbook" / "handbook.md").write_text("# Leave\n\nAsk your lead before booking the okapi leave.\n")
    asked = threadwise(*question, cwd=tmp_path)
    assert asked.returncode == 0, asked.stderr[-2000:]
    assert "syncing the knowledge index from wiki\n" in asked.stderr, asked.stderr[-3000:]
    assert "source wiki failed: repository not found" in asked.stderr, asked.stderr[-3000:]
    # -v shows where it failed (the README promises tracebacks with -v)
    assert "source wiki failed here:\nTraceback (most recent call last):" in asked.stderr, asked.stderr[-3000:]
    # handbook was not read again: its edit waits for its own sync
    assert "Ask your manager" in json.loads(threadwise("ask", "--json", *question[2:], cwd=tmp_path).stdout)["answer"]


def test_a_sitemap_source_is_described_without_a_crawl_depth(tmp_path):
    """Links are not followed from a sitemap: ``sources`` gives no depth for it, a site has one."""
    cfg = files_config(tmp_path)
    cfg.write_text(
        cfg.read_text()
        + '\n[[sources]]\nname = "map"\ntype = "web"\nurl = "http://127.0.0.1:9/sitemap.xml"\n'
        + '\n[[sources]]\nname = "site"\ntype = "web"\nurl = "http://127.0.0.1:9/docs/"\n'
    )
    rows = listed(cfg, tmp_path)
    assert rows["map"]["where"] == "http://127.0.0.1:9/sitemap.xml (sitemap, at most 500 pages)", rows
    assert rows["site"]["where"] == "http://127.0.0.1:9/docs/ (depth 3, at most 500 pages)", rows
