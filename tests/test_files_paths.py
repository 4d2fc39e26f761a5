"""A files source of several paths, through the real CLI and real folders: one path that is
gone (a folder, a file, a glob matching nothing) is one problem line and the others are read;
what the gone path gave before stays searchable; a source whose every path is gone fails in
one line naming them."""

from __future__ import annotations

import json
from pathlib import Path

from graphs.knowledge.connectors import FilesConnector
from graphs.knowledge.connectors.base import SourceError
from tests.conftest import write_config
from tests.fakes.bot_process import threadwise


def config(root: Path, paths: list[str]) -> Path:
    """A config answering without a model, with one files source ``team`` of ``paths``."""
    cfg = write_config(root, extra='\n[graph]\ncomposer = "extractive"\ngraders = "lexical"\n')
    kept = [line for line in cfg.read_text().splitlines() if not line.startswith("sources = ")]
    cfg.write_text("\n".join(kept) + f'\n[[sources]]\nname = "team"\ntype = "files"\npath = {json.dumps(paths)}\n')
    return cfg


def test_one_missing_path_of_a_files_source_is_one_problem_and_the_rest_is_read(tmp_path):
    (tmp_path / "handbook").mkdir()
    (tmp_path / "handbook" / "leave.md").write_text("# Leave\n\nAsk your manager before booking leave.\n")
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "travel.md").write_text("# Travel\n\nBook trains through the wombat portal.\n")
    (tmp_path / "faq.md").write_text("# FAQ\n\nThe tapir lounge opens at nine.\n")
    cfg = config(tmp_path, ["handbook", "policies/*.md", "faq.md"])
    first = threadwise("sync", "--config", str(cfg), cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-2000:]
    assert "• team: 3 added, 0 updated, 0 removed, 0 unchanged" in first.stdout, first.stdout

    # the policies are moved away, the FAQ deleted, and a path that never existed is added
    (tmp_path / "policies" / "travel.md").rename(tmp_path / "travel.md.bak")
    (tmp_path / "faq.md").unlink()
    cfg = config(tmp_path, ["handbook", "policies/*.md", "faq.md", "no-such-folder"])
    (tmp_path / "handbook" / "pay.md").write_text("# Pay\n\nSalaries arrive on the 25th, said the okapi.\n")
    second = threadwise("sync", "--config", str(cfg), cwd=tmp_path)
    assert second.returncode == 0, second.stdout + second.stderr[-2000:]
    assert "• team: 1 added, 0 updated, 0 removed, 3 unchanged" in second.stdout, second.stdout
    problems = [ln.strip() for ln in second.stdout.splitlines() if ln.strip().startswith("– team:")]
    assert problems == [
        f"– team: {tmp_path / 'policies/*.md'}: matches no file (a path in config.toml is relative to the "
        "config file's folder)",
        f"– team: {tmp_path / 'faq.md'}: not found (a path in config.toml is relative to the config file's folder)",
        f"– team: {tmp_path / 'no-such-folder'}: not found (a path in config.toml is relative to the "
        "config file's folder)",
    ], second.stdout
    asked = threadwise("ask", "--json", "how do I book trains?", "--config", str(cfg), cwd=tmp_path)
    answer = json.loads(asked.stdout)
    assert answer["sources"] == ["policies/travel.md"] and "wombat portal" in answer["answer"], answer

    # back in place: read as before, nothing lost
    (tmp_path / "travel.md.bak").rename(tmp_path / "policies" / "travel.md")
    cfg = config(tmp_path, ["handbook", "policies/*.md"])
    third = threadwise("sync", "--config", str(cfg), cwd=tmp_path)
    assert "• team: 0 added, 0 updated, 1 removed, 3 unchanged" in third.stdout, third.stdout  # faq.md left
    assert "– team:" not in third.stdout, third.stdout


def test_a_files_source_whose_every_path_is_missing_fails_in_one_line_naming_them(tmp_path):
    """At a command's start it is a configuration error (exit 2, before any source is read); at a
    running bot's later sync, the source's sync fails naming them."""
    cfg = config(tmp_path, ["gone", "also-gone/*.pdf"])
    result = threadwise("sync", "--config", str(cfg), cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr[-2000:]
    assert result.stderr.strip().splitlines() == [
        'Configuration error: config.toml: [[sources]] entry 1 (name = "team"): path: knowledge source not found: '
        f"{tmp_path / 'gone'}, {tmp_path / 'also-gone/*.pdf'} "
        "(a path in config.toml is relative to the config file's folder)"
    ], result.stderr
    conn = FilesConnector("team", [str(tmp_path / "gone"), str(tmp_path / "also-gone/*.pdf")])
    try:
        conn.scan({}, {})
    except SourceError as exc:
        assert str(exc) == f"source team: {result.stderr.strip().split(': path: ', 1)[1]}", exc
    else:
        raise AssertionError("a files source with no path found did not fail")
    # a single path: the message is the one it always was
    conn = FilesConnector("one", [tmp_path / "gone"])
    try:
        conn.scan({}, {})
    except SourceError as exc:
        assert str(exc).startswith(f"source one: knowledge source not found: {tmp_path / 'gone'} (a path"), exc
    else:
        raise AssertionError("a files source with no path found did not fail")
