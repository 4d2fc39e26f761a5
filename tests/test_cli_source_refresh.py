"""``--source DIR`` answers from the folder as it is now, and what a sync leaves out is said
once and by name: through the real process and real files."""

from __future__ import annotations

import json
from pathlib import Path

from tests.fakes.bot_process import threadwise
from tests.test_sources_safety import files_config


def ask(tmp_path, question: str, *extra: str) -> dict:
    result = threadwise("ask", "--json", question, "--source", "src", *extra, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout)


def test_ask_with_a_source_folder_reads_edits_and_deletions_since_the_last_ask(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    files_config(tmp_path)  # config.toml in the working folder: answers without a model
    (src / "deploy.md").write_text("# Deploy\n\nRoll back a deploy within 15 minutes of the release.\n")
    (src / "roadmap.md").write_text("# Roadmap\n\nThe Falcon migration is scheduled for March 2027.\n")
    assert "15 minutes" in ask(tmp_path, "How do I roll back a deploy?")["answer"]
    assert ask(tmp_path, "When is the Falcon migration scheduled?")["sources"] == ["roadmap.md"]

    (src / "deploy.md").write_text("# Deploy\n\nRoll back a deploy within 45 minutes of the release.\n")
    (src / "roadmap.md").unlink()
    answer = ask(tmp_path, "How do I roll back a deploy?")
    assert "45 minutes" in answer["answer"] and "15 minutes" not in answer["answer"], answer
    assert "roadmap.md" not in ask(tmp_path, "When is the Falcon migration scheduled?")["sources"]

    # nothing changed: the folder is listed, nothing read, the live index stays
    unchanged = threadwise("-v", "ask", "How do I roll back a deploy?", "--source", "src", cwd=tmp_path)
    assert unchanged.returncode == 0, unchanged.stderr[-2000:]
    assert "sync: nothing changed" in unchanged.stderr, unchanged.stderr[-3000:]


def test_a_missing_source_folder_is_one_line(tmp_path):
    files_config(tmp_path)
    result = threadwise("ask", "hello?", "--source", "nothere", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    said = (result.stdout + result.stderr).strip().splitlines()
    assert len(said) == 1 and "knowledge source not found: nothere" in said[0], said
    assert not list((tmp_path / "data").glob("index-*")), "an empty index folder was left behind"


def test_a_sync_report_names_what_it_skipped(tmp_path):
    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "a.md").write_text("# A\n\nText.\n")
    (tmp_path / "kb" / "logo.png").write_bytes(b"\x89PNG\r\n")
    cfg = files_config(tmp_path, "kb")
    cfg.write_text(cfg.read_text().replace('path = ["kb"]', 'path = ["kb"]\npatterns = ["**/*"]'))
    synced = threadwise("sync", "--config", str(cfg), cwd=tmp_path)
    assert synced.returncode == 0, synced.stderr[-2000:]
    assert "kb: 1 added, 0 updated, 0 removed, 0 unchanged; 1 skipped: logo.png (not a format read)" in synced.stdout


def test_sources_added_to_the_shipped_config_replace_the_user_guide(tmp_path):
    """A team copies the shipped config.toml elsewhere and adds its own [[sources]]: only they
    are synced and searched (no user guide beside them, no failed docs/ folder), and the
    knowledge base is described by their names, not as the Threadwise user guide."""
    shipped = (Path(__file__).resolve().parent.parent / "config.toml").read_text()
    (tmp_path / "handbook").mkdir()
    (tmp_path / "handbook" / "leave.md").write_text("# Leave\n\nAsk your manager before booking leave.\n")
    cfg = tmp_path / "config.toml"
    cfg.write_text(
        shipped.replace('embeddings = "auto"', 'embeddings = "none"', 1)
        + '\n[[sources]]\nname = "handbook"\ntype = "files"\npath = "handbook"\n'
    )
    synced = threadwise("sync", "--config", str(cfg), cwd=tmp_path)
    assert synced.returncode == 0, synced.stdout + synced.stderr[-2000:]
    listed = threadwise("sources", "--json", "--config", str(cfg), cwd=tmp_path)
    assert [json.loads(line)["name"] for line in listed.stdout.splitlines()] == ["handbook"], listed.stdout
    from bot.config import load_settings

    assert load_settings(cfg).kb_description() == "the knowledge sources handbook"
