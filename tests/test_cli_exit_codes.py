"""A knowledge source that fails gives the same exit code and the same kind of report
whatever the index held before: 1 (the command failed) on a first sync into an empty data
folder as on a later one, for ``sync``, ``sync NAME``, ``reindex`` and for ``ask`` with
nothing to answer from, with one line on stderr naming the cause; 2 only for what is wrong
before any source is read (an unknown source name, a ``--source`` path that does not
exist). Each case through a real ``python -m bot`` process; the web source is a real local
HTTP server, stopped to make it fail."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.fakes.bot_process import threadwise
from tests.test_sources import serve_site
from tests.test_sources_safety import files_config
from tests.test_sources_web import put

DOWN = "cannot connect"  # what the web source's failure says


def site_config(tmp_path: Path, base: str, *folders: str) -> Path:
    """A config answering without any model, with a files source per folder and then a web source."""
    for f in folders:
        (tmp_path / f).mkdir(exist_ok=True)
        (tmp_path / f / "leave.md").write_text("# Leave\n\nAsk your manager before booking leave, said the okapi.\n")
    cfg = files_config(tmp_path, *folders)
    cfg.write_text(cfg.read_text() + f'\n[[sources]]\nname = "site"\ntype = "web"\nurl = "{base}/"\n')
    return cfg


def gone_site() -> str:
    """The address of a web site that answered once and is gone (its port closed)."""
    with serve_site() as site:
        return site.base


def failed_once(result: subprocess.CompletedProcess[str], cause: str) -> None:
    """Exit code 1, and exactly one line on stderr naming ``cause`` (no traceback)."""
    assert result.returncode == 1, (result.returncode, result.stdout, result.stderr[-2000:])
    said = [line for line in result.stderr.splitlines() if cause in line]
    assert len(said) == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]


def test_the_only_source_failing_on_a_first_sync_exits_1_like_any_failed_source(tmp_path):
    cfg = site_config(tmp_path, gone_site())
    for command in (["sync"], ["sync", "site"], ["reindex"]):
        result = threadwise(*command, "--config", str(cfg), cwd=tmp_path)
        failed_once(result, DOWN)
        # the same per-source report as any sync, after a line saying nothing was published
        lines = result.stdout.splitlines()
        assert lines[0] == "Nothing indexed:" and lines[1].startswith("• site: FAILED: start page "), lines
        assert [line for line in result.stderr.splitlines() if DOWN in line][0].startswith("site: start page ")
        assert not list((tmp_path / "data").glob("index/gen-*")), "a generation was published"


def test_a_source_failing_after_it_was_synced_exits_1_and_keeps_its_documents(tmp_path):
    with serve_site() as site:
        put(site, "/", "Otters", "<h1>Otters</h1><p>Sea otters hold hands while they sleep.</p>")
        cfg = site_config(tmp_path, site.base)
        first = threadwise("sync", "--config", str(cfg), cwd=tmp_path)
        assert first.returncode == 0, first.stdout + first.stderr[-2000:]
    for command in (["sync"], ["sync", "site"]):
        result = threadwise(*command, "--config", str(cfg), cwd=tmp_path)
        failed_once(result, DOWN)
        assert "• site: FAILED: start page " in result.stdout and "(kept 1 document, 1 chunk)" in result.stdout
    asked = threadwise("ask", "--json", "do sea otters hold hands?", "--config", str(cfg), cwd=tmp_path)
    assert asked.returncode == 0, asked.stderr[-2000:]  # answered from the last good documents
    assert "hold hands" in json.loads(asked.stdout)["answer"]


def test_one_source_of_several_failing_exits_1_on_a_first_and_on_a_later_sync(tmp_path):
    cfg = site_config(tmp_path, gone_site(), "handbook")
    for _ in range(2):  # into an empty data folder, then into the index the first one published
        result = threadwise("sync", "--config", str(cfg), cwd=tmp_path)
        failed_once(result, DOWN)
        assert "• handbook: " in result.stdout and "• site: FAILED: start page " in result.stdout, result.stdout
    named = threadwise("sync", "site", "--config", str(cfg), cwd=tmp_path)
    failed_once(named, DOWN)
    fine = threadwise("sync", "handbook", "--config", str(cfg), cwd=tmp_path)
    assert fine.returncode == 0, fine.stdout + fine.stderr[-2000:]


def test_ask_exits_1_when_no_source_can_be_read_and_2_for_a_source_path_that_does_not_exist(tmp_path):
    cfg = site_config(tmp_path, gone_site())
    asked = threadwise("ask", "leave?", "--config", str(cfg), cwd=tmp_path)
    failed_once(asked, DOWN)
    assert asked.stderr.strip().splitlines()[-1].startswith("threadwise ask failed: site: start page "), asked.stderr

    # a path naming nothing, also when it reads as a glob pattern matching no file
    for command, gone in (("ask", "nothere"), ("reindex", "nothere"), ("ask", "team [docs]"), ("ask", "empty/*.pdf")):
        missing = threadwise(command, *(["leave?"] if command == "ask" else []), "--source", gone, cwd=tmp_path)
        assert missing.returncode == 2, missing.stdout + missing.stderr[-2000:]
        assert (missing.stdout + missing.stderr).strip().splitlines() == [
            f"knowledge source not found: {gone} (a path given with --source is relative to the current folder)"
        ]
    unknown = threadwise("sync", "sight", "--config", str(cfg), cwd=tmp_path)
    assert unknown.returncode == 2 and unknown.stderr.strip().startswith("Unknown source sight"), unknown.stderr


def test_a_source_argument_that_is_no_folder_of_documents_exits_2_in_one_line_naming_it(tmp_path):
    """``--source ""`` indexed the current folder (an empty path is "."), a file was indexed alone and
    an empty folder failed after the index was opened (exit 1): each is refused before any work."""
    cfg = site_config(tmp_path, gone_site(), "handbook")
    (tmp_path / "empty").mkdir()
    (tmp_path / "pictures").mkdir()
    (tmp_path / "pictures" / "team.png").write_bytes(b"\x89PNG\r\n")  # no format a source reads
    (tmp_path / "notes.md").write_text("# Notes\n\nBook leave in the wombat portal, said the okapi.\n")
    formats = "--source DIR reads its .md, .markdown, .mdx, .txt, .text, .rst, .html, .htm, .xhtml, .pdf, .docx"
    cases = {
        "": "--source: an empty path: give the folder of documents to answer from (--source DIR)",
        "   ": "--source: an empty path: give the folder of documents to answer from (--source DIR)",
        "notes.md": "--source notes.md: a file, not a folder: give the folder of documents it is in (--source DIR)",
        "empty": f"--source empty: no document in this folder ({formats}, .pptx, .xlsx files)",
        "pictures": f"--source pictures: no document in this folder ({formats}, .pptx, .xlsx files)",
    }
    for command in (["ask", "leave?"], ["reindex"], ["console"]):
        for src, line in cases.items():
            result = threadwise(*command, "--source", src, "--config", str(cfg), cwd=tmp_path)
            assert result.returncode == 2, (command, src, result.returncode, result.stdout, result.stderr[-2000:])
            assert (result.stdout + result.stderr).strip().splitlines() == [line], (command, src, result.stderr)
    assert not list((tmp_path / "data").glob("index-*")), "an index of --source folders was opened"
    # a folder holding a document, next to them, is read
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes.md").rename(tmp_path / "notes" / "leave.md")
    asked = threadwise("ask", "--json", "how do I book leave?", "--source", "notes", "--config", str(cfg), cwd=tmp_path)
    assert asked.returncode == 0 and "wombat portal" in json.loads(asked.stdout)["answer"], asked.stderr[-2000:]


def test_an_empty_or_blank_question_exits_2_in_one_line_without_an_answer(tmp_path):
    cfg = site_config(tmp_path, gone_site(), "handbook")  # a source folder that exists
    for question in ("", "   "):
        result = threadwise("ask", question, "--config", str(cfg), cwd=tmp_path)
        assert result.returncode == 2, (result.returncode, result.stdout, result.stderr[-2000:])
        assert result.stdout == "", result.stdout  # no greeting passed off as an answer
        assert result.stderr.strip().splitlines() == [
            'threadwise ask: the question is empty (usage: threadwise ask "QUESTION")'
        ], result.stderr


def test_a_blank_source_in_the_configuration_exits_2_naming_its_key(tmp_path):
    """A blank entry of ``[knowledge] sources``, of a files source's ``path`` or of the variable that
    sets them resolved to the folder of config.toml and indexed it unnamed, exit 0 (as ``--source ""``
    did): each is a configuration error naming the key, before any index is opened."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "leave.md").write_text("# Leave\n\nBook leave in the wombat portal, said the okapi.\n")
    empty = 'an entry is empty: name a folder, a file or a glob (or leave the list empty: "[]")'
    cases = {
        '[knowledge]\nsources = [""]\n': f"Configuration error: {{cfg}}: knowledge.sources: {empty} (got [''])",
        '[knowledge]\nsources = ["docs", "  "]\n': (
            f"Configuration error: {{cfg}}: knowledge.sources: {empty} (got ['docs', '  '])"
        ),
        '[[sources]]\nname = "hb"\ntype = "files"\npath = ["docs", ""]\n': (
            'Configuration error: {cfg}: [[sources]] entry 1 (name = "hb"): path: an entry is empty '
            "(name a folder, a file or a glob)"
        ),
    }
    for n, (text, line) in enumerate(cases.items()):
        cfg = tmp_path / f"c{n}.toml"
        cfg.write_text(f'[service]\ndata_dir = "data"\n{text}')
        for command in (["ask", "leave?"], ["reindex"]):
            result = threadwise(*command, "--config", str(cfg), cwd=tmp_path)
            assert result.returncode == 2, (text, command, result.returncode, result.stderr[-2000:])
            assert result.stderr.strip().splitlines() == [line.format(cfg=cfg.name)], (text, result.stderr[-2000:])
    env = threadwise("ask", "leave?", cwd=tmp_path, env={"THREADWISE_KNOWLEDGE__SOURCES": '[""]'})
    assert env.returncode == 2 and "THREADWISE_KNOWLEDGE__SOURCES: an entry is empty" in env.stderr, env.stderr
    assert not list((tmp_path / "data").glob("index-*")), "an index was opened"
