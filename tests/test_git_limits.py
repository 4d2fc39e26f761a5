"""A git source under the faults of the outside world, through real git, real repositories and
real servers: a server that accepts the connection and never answers cannot hold a sync nor
leave git's helpers running; a repository of large files is read one file at a time, and a
file over the source's limit is never read; ``paths`` such as ``./.github/`` name the
dot-directory."""

from __future__ import annotations

import socket
import threading
import time
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from graphs.knowledge import KnowledgeBase
from graphs.knowledge.connectors import FilesConnector, GitConnector
from tests.conftest import write_config
from tests.fakes.bot_process import threadwise
from tests.test_sources import git


@contextmanager
def silent_server() -> Iterator[int]:
    """A TCP server on 127.0.0.1 that accepts every connection and never sends a byte; its port."""
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        server.close()


def processes_naming(text: str) -> list[str]:
    """The command lines of the running processes that hold ``text`` (from /proc)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
            state = next(ln for ln in (proc / "status").read_text().splitlines() if ln.startswith("State:"))
        except (OSError, StopIteration):
            continue
        if text in cmdline and "Z" not in state.split()[1]:  # a zombie is dead already
            found.append(f"{proc.name}: {cmdline}")
    return found


def test_a_git_server_that_never_answers_stops_at_the_deadline_and_leaves_no_git_process(tmp_path):
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.md").write_text("# Notes\n\nThe yak shaving budget is small.\n")
    with silent_server() as port:
        url = f"http://127.0.0.1:{port}/team/handbook.git"
        conn = GitConnector("handbook", url, "main", cache_dir=tmp_path / "clones", timeout_seconds=3)
        kb = KnowledgeBase(tmp_path / "index", connectors=[conn, FilesConnector("notes", [tmp_path / "notes"])])
        t0 = time.monotonic()
        stats = kb.reindex()
        took = time.monotonic() - t0
        assert took < 15, took  # 3 s for git, the rest for the index
        [failed] = stats.failed
        assert failed.name == "handbook", failed
        assert failed.error == (
            f"git clone {url} was stopped after 3 s (the longest a git command may take; is the server answering?)"
        ), failed.error
        time.sleep(0.3)
        assert processes_naming(str(port)) == []  # git-remote-http was killed with git
    assert kb.search(["yak shaving"], k=1)[0]["source"] == "notes"


def test_a_silent_git_server_fails_its_sync_in_one_line_through_the_cli(tmp_path):
    """git's own low-speed limit (``GIT_HTTP_LOW_SPEED_TIME``, 60 s by default; the user's
    value is honoured) ends the clone; the sync says why in one line and the other sources sync."""
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.md").write_text("# Notes\n\nThe yak shaving budget is small.\n")
    cfg = write_config(tmp_path, extra='\n[graph]\ncomposer = "extractive"\ngraders = "lexical"\n')
    kept = [line for line in cfg.read_text().splitlines() if not line.startswith("sources = ")]
    with silent_server() as port:
        url = f"http://127.0.0.1:{port}/team/handbook.git"
        cfg.write_text(
            "\n".join(kept)
            + f'\n[[sources]]\nname = "handbook"\ntype = "git"\nrepo = "{url}"\n'
            + '\n[[sources]]\nname = "notes"\ntype = "files"\npath = "notes"\n'
        )
        t0 = time.monotonic()
        result = threadwise(
            "sync", "--config", str(cfg), cwd=tmp_path, env={"GIT_HTTP_LOW_SPEED_TIME": "2"}, timeout=120
        )
        took = time.monotonic() - t0
        time.sleep(0.3)
        assert processes_naming(str(port)) == []
    assert result.returncode == 1, result.stdout + result.stderr[-2000:]
    [line] = [ln for ln in result.stdout.splitlines() if ln.startswith("• handbook:")]
    assert line.startswith(f"• handbook: FAILED: git clone {url} failed: fatal: unable to access"), line
    assert "Operation too slow" in line, line
    assert "• notes: 1 added" in result.stdout, result.stdout
    assert took < 60, took
    assert "Traceback" not in result.stderr


def test_a_repository_of_large_files_is_read_one_file_at_a_time_and_a_file_over_the_limit_is_never_read(
    tmp_path,
):
    repo = tmp_path / "upstream"
    (repo / "logs").mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    line = b"The heron rota is posted on Mondays; page the duty engineer for gaps.\n"
    for i in range(12):  # 12 files of 3 MB: 36 MB, one batch of the old reader
        (repo / "logs" / f"week{i:02}.txt").write_bytes(f"# Week {i}\n\n".encode() + line * 42_000)
    (repo / "logs" / "huge.txt").write_bytes(line * 120_000)  # 8.4 MB: over the 5 MB limit below
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "logs")
    conn = GitConnector("logs", str(repo), "main", cache_dir=tmp_path / "clones", max_file_bytes=5_000_000)
    listing = conn.scan({}, {})
    tracemalloc.start()
    ids = []
    for doc in listing.changed:  # as the index takes them: one document at a time
        ids.append(doc.id)
        del doc
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert sorted(ids) == [f"logs/week{i:02}.txt" for i in range(12)]
    assert listing.problems == ["logs/huge.txt: 8 MB is over the 5 MB limit (max_file_bytes)"], listing.problems
    # one file's bytes and its text (3 MB each) at a time, not 12 files' (36 MB), nor the 8.4 MB one
    assert peak < 16_000_000, peak
    assert processes_naming(str(conn.clone_dir)) == []  # cat-file ended with the reading


def make_dot_repo(root: Path) -> Path:
    repo = root / "upstream"
    (repo / ".github" / "workflows").mkdir(parents=True)
    (repo / "github").mkdir()
    (repo / "docs").mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / ".github" / "CONTRIBUTING.md").write_text("# Contributing\n\nOpen a pull request to the kiwi branch.\n")
    (repo / ".github" / "workflows" / "README.md").write_text("# Workflows\n\nThe lynx job deploys on tags.\n")
    (repo / "github" / "other.md").write_text("# Not this\n\nA folder named github without the dot.\n")
    (repo / "docs" / "intro.md").write_text("# Intro\n\nThe dingo service answers on port 7000.\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "dot dirs")
    return repo


def test_git_paths_with_a_leading_dot_slash_keep_their_dot_directory(tmp_path):
    repo = make_dot_repo(tmp_path)
    for paths, expected in [
        (["./.github/"], {".github/CONTRIBUTING.md", ".github/workflows/README.md"}),
        ([".github/"], {".github/CONTRIBUTING.md", ".github/workflows/README.md"}),
        (["./.github"], {".github/CONTRIBUTING.md", ".github/workflows/README.md"}),
        (["./.github/**/*.md"], {".github/CONTRIBUTING.md", ".github/workflows/README.md"}),
        (["./.github/workflows/*.md", "./docs"], {".github/workflows/README.md", "docs/intro.md"}),
        (["/docs/", "./github/"], {"docs/intro.md", "github/other.md"}),
        (["./"], {".github/CONTRIBUTING.md", ".github/workflows/README.md", "github/other.md", "docs/intro.md"}),
    ]:
        conn = GitConnector("repo", str(repo), "main", paths, cache_dir=tmp_path / "clones")
        listing = conn.scan({}, {})
        assert {d.id for d in listing.changed} == expected, paths


def test_a_files_source_pattern_with_a_leading_dot_slash_reads_the_dot_directory(tmp_path):
    repo = make_dot_repo(tmp_path)
    conn = FilesConnector("repo", [repo], ["./.github/**/*.md"])
    assert {d.id for d in conn.scan({}, {}).changed} == {".github/CONTRIBUTING.md", ".github/workflows/README.md"}
    conn = FilesConnector("repo", [repo / "./.github/"], ["**/*.md"])
    assert {d.id for d in conn.scan({}, {}).changed} == {"CONTRIBUTING.md", "workflows/README.md"}


def test_a_sync_after_the_paths_fix_reads_the_dot_directory_at_the_same_commit(tmp_path):
    """An index synced when ``./.github/`` was read as ``github/`` records the commit; the next
    sync at the same commit reads the dot-directory (its paths are recorded as matched)."""
    repo = make_dot_repo(tmp_path)
    conn = GitConnector("repo", str(repo), "main", ["./.github/", "docs/"], cache_dir=tmp_path / "clones")
    commit = git(repo, "rev-parse", "HEAD").strip()
    old_state = {"commit": commit, "paths": ["./.github/", "docs/"]}  # what the older release stored
    listing = conn.scan({"docs/intro.md": "x"}, old_state)
    assert {d.id for d in listing.changed} == {
        ".github/CONTRIBUTING.md",
        ".github/workflows/README.md",
        "docs/intro.md",
    }
    assert listing.state["paths"] == [".github/", "docs/"]


def test_a_dot_directory_in_paths_is_synced_through_the_cli(tmp_path):
    repo = make_dot_repo(tmp_path)
    cfg = write_config(tmp_path, extra='\n[graph]\ncomposer = "extractive"\ngraders = "lexical"\n')
    kept = [line for line in cfg.read_text().splitlines() if not line.startswith("sources = ")]
    cfg.write_text(
        "\n".join(kept) + f'\n[[sources]]\nname = "repo"\ntype = "git"\nrepo = "{repo}"\npaths = ["./.github/"]\n'
    )
    result = threadwise("sync", "--config", str(cfg), cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "• repo: 2 added, 0 updated, 0 removed, 0 unchanged" in result.stdout, result.stdout
