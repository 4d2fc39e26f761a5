"""A files source reads its folder and nothing else, through the real process and real files:
links out of the folder are never read, link loops do not hang a sync, and an odd file name
(not UTF-8, a newline in it) costs nothing but its own oddity."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.conftest import write_config
from tests.fakes.bot_process import threadwise


def files_config(root: Path, *folders: str) -> Path:
    """A config answering without any model, with one ``[[sources]]`` files entry per folder."""
    cfg = write_config(root, extra='\n[graph]\ncomposer = "extractive"\ngraders = "lexical"\n', sources=[root])
    entries = "".join(f'\n[[sources]]\nname = "{f}"\ntype = "files"\npath = ["{f}"]\n' for f in folders)
    # no [knowledge] sources: only the [[sources]] entries are read
    kept = [line for line in cfg.read_text().splitlines() if not line.startswith("sources = ")]
    cfg.write_text("\n".join(kept) + "\n" + entries)
    return cfg


def test_links_out_of_a_files_folder_are_never_read_and_are_counted_as_problems(tmp_path):
    kb, outside = tmp_path / "kb", tmp_path / "outside"
    kb.mkdir()
    outside.mkdir()
    (kb / "vpn.md").write_text("# VPN\n\nThe VPN gateway is called quetzal.\n")
    (outside / "secret.md").write_text("# Secret\n\nThe database root password is hunter2secret.\n")
    os.symlink("/etc/passwd", kb / "passwd.txt")  # a file link out of the folder
    os.symlink(outside, kb / "linked")  # a folder link out of the folder
    os.symlink(outside / "secret.md", kb / "secret-link.md")
    cfg = files_config(tmp_path, "kb")

    synced = threadwise("sync", "--config", str(cfg), cwd=tmp_path)
    assert synced.returncode == 0, synced.stderr[-2000:]
    assert "kb: 1 added, 0 updated, 0 removed, 0 unchanged; 3 problems" in synced.stdout, synced.stdout
    for name in ("passwd.txt", "linked", "secret-link.md"):  # one log line each, naming the link
        assert sum(name + ": not read: a link to" in line for line in synced.stderr.splitlines()) == 1, synced.stderr
    listed = json.loads(threadwise("sources", "--json", "--config", str(cfg), cwd=tmp_path).stdout.splitlines()[0])
    assert listed["documents"] == 1, listed
    assert sorted(listed["problems"]) == [
        "linked: not read: a link to a file outside the folder",
        "passwd.txt: not read: a link to a file outside the folder",
        "secret-link.md: not read: a link to a file outside the folder",
    ], listed
    for question in ("what is the database root password", "root x 0 0 bin bash daemon nologin"):
        asked = threadwise("ask", "--json", question, "--config", str(cfg), cwd=tmp_path)
        assert "hunter2secret" not in asked.stdout and "/bin/" not in asked.stdout, asked.stdout

    # the same through --source DIR: the folder is read, the links are not
    asked = threadwise("ask", "--json", "what is the database root password", "--source", "kb", cwd=tmp_path)
    assert asked.returncode == 0, asked.stderr[-2000:]
    assert "hunter2secret" not in asked.stdout, asked.stdout


def test_link_loops_in_a_folder_neither_hang_a_sync_nor_index_a_file_twice(tmp_path):
    kb = tmp_path / "kb"
    (kb / "sub").mkdir(parents=True)
    (kb / "a.md").write_text("# Loop doc\n\nloopy content about kangaroos.\n")
    (kb / "sub" / "b.md").write_text("# Wombats\n\nWombats dig burrows.\n")
    os.symlink(".", kb / "l1")  # two loops: the old walk was 2^40 paths long
    os.symlink(".", kb / "l2")
    os.symlink("..", kb / "sub" / "up")
    os.symlink("sub", kb / "also-sub")  # a folder link inside the folder: its files once, by their own path
    os.symlink("a.md", kb / "alias.md")  # a second name of one file: once
    cfg = files_config(tmp_path, "kb")
    synced = threadwise("sync", "--config", str(cfg), cwd=tmp_path, timeout=120)
    assert synced.returncode == 0, synced.stderr[-2000:]
    assert "kb: 2 added, 0 updated, 0 removed, 0 unchanged (2 documents" in synced.stdout, synced.stdout
    assert "not read" not in synced.stderr, synced.stderr  # links inside the folder are no problem


def test_a_file_name_in_no_utf8_or_with_a_newline_costs_nothing_and_other_sources_sync(tmp_path):
    (tmp_path / "kb").mkdir()
    (tmp_path / "other").mkdir()
    # a Latin-1 name from a zip or a Windows share: not UTF-8
    (tmp_path / "kb" / os.fsdecode(b"caf\xe9-wombat.md")).write_text("# Latin\n\nThe latin wombat file.\n")
    (tmp_path / "kb" / "new\nline.md").write_text("# Newline\n\nThe platypus sleeps in the newline file.\n")
    (tmp_path / "other" / "c.md").write_text("# Other\n\nThe echidna lives in the other folder.\n")
    cfg = files_config(tmp_path, "kb", "other")
    synced = threadwise("sync", "--config", str(cfg), cwd=tmp_path)
    assert synced.returncode == 0, synced.stderr[-2000:]
    assert "kb: 2 added" in synced.stdout and "other: 1 added" in synced.stdout, synced.stdout

    asked = threadwise("ask", "--json", "latin wombat file", "--config", str(cfg), cwd=tmp_path)
    assert json.loads(asked.stdout)["sources"] == ["caf\\xe9-wombat.md"], asked.stdout
    # the console's list of sources: one line per source, the newline shown as \n
    asked = threadwise("ask", "where does the platypus sleep", "--config", str(cfg), cwd=tmp_path)
    assert asked.returncode == 0, asked.stderr[-2000:]
    assert any(line.strip().startswith("[1] new\\nline.md") for line in asked.stdout.splitlines()), asked.stdout
    asked = threadwise("ask", "--json", "where does the echidna live", "--config", str(cfg), cwd=tmp_path)
    assert json.loads(asked.stdout)["sources"] == ["c.md"], asked.stdout

    # --source DIR builds its index from the same folder
    asked = threadwise("ask", "--json", "latin wombat file", "--source", "kb", cwd=tmp_path)
    assert asked.returncode == 0, asked.stderr[-2000:]
    assert json.loads(asked.stdout)["sources"][0] == "caf\\xe9-wombat.md", asked.stdout
