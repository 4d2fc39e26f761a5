"""Git sources and the names a repository can hold, through real git repositories and the real
``threadwise sync``: every file name (bytes that are not UTF-8, a newline, a tab, quotes, a
leading dash, spaces, ``#``, ``?``) is read or reported on its own and cited at the address of
its real bytes; a file that cannot be read is reported at every sync, not only at the one that
found it; ``{branch}`` is the remote's default branch when none is configured."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from pathlib import Path

from tests.conftest import write_config
from tests.fakes.bot_process import threadwise

ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@x",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@x",
    "PATH": "/usr/bin:/bin:/usr/local/bin",
}

# name as git holds it -> (id stored and cited, its link's path)
NAMES: dict[bytes, tuple[str, str]] = {
    b"docs/caf\xe9.md": ("docs/caf\\xe9.md", "docs/caf%E9.md"),
    b"docs/line\nbreak.md": ("docs/line\\nbreak.md", "docs/line%0Abreak.md"),
    b"docs/tab\there.md": ("docs/tab\\there.md", "docs/tab%09here.md"),
    b"docs/\"quoted\" 'name'.md": ("docs/\"quoted\" 'name'.md", "docs/%22quoted%22%20%27name%27.md"),
    b"docs/-dash.md": ("docs/-dash.md", "docs/-dash.md"),
    b"docs/on call #1?.md": ("docs/on call #1?.md", "docs/on%20call%20%231%3F.md"),
    b"docs/\xc3\xbcber.md": ("docs/über.md", "docs/%C3%BCber.md"),
}


def git(repo: Path, *args: str | bytes) -> bytes:
    env = {**ENV, "HOME": str(repo.parent)}
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True).stdout


def live_chunks(root: Path) -> list[tuple[str, str, str, str]]:
    """``(source, file, url, text)`` of every chunk of the live generation under ``root/data``."""
    [index] = [p for p in (root / "data").iterdir() if p.name.startswith("index")]
    live = (index / "CURRENT").read_text().strip()
    with sqlite3.connect(index / live / "chunks.sqlite") as db:
        return db.execute("SELECT source, file, url, text FROM chunks").fetchall()


def test_every_name_git_can_hold_is_read_on_its_own_and_a_bad_file_is_reported_at_every_sync(tmp_path):
    repo = tmp_path / "upstream"
    (repo / "docs").mkdir(parents=True)
    git(repo, "init", "-q", "-b", "trunk")  # not "main": {branch} must be the remote's own default
    git(repo, "config", "core.quotepath", "true")
    for i, raw in enumerate(NAMES):
        with open(os.fsencode(repo) + b"/" + raw, "wb") as f:
            f.write(f"# Note {i}\n\nThe marmot code {i} is kappa{i}.\n".encode())
    (repo / "docs" / "postgres.md").write_text("# Postgres\n\nVacuum the walrus table weekly.\n")
    (repo / "docs" / "blob.md").write_bytes(bytes(range(256)) * 8)  # binary named .md: a problem
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "odd names")
    assert len(git(repo, "ls-files", "-z").split(b"\0")) == len(NAMES) + 3  # all committed (and a final '')

    cfg = write_config(tmp_path, extra='\n[graph]\ncomposer = "extractive"\ngraders = "lexical"\n')
    kept = [line for line in cfg.read_text().splitlines() if not line.startswith("sources = ")]
    web_url = "https://git.example/ops/runbooks/-/blob/{branch}/{path}?c={commit}"
    cfg.write_text(
        "\n".join(kept)
        + f'\n[[sources]]\nname = "runbooks"\ntype = "git"\nrepo = {json.dumps(str(repo))}\n'
        + f'paths = ["docs/"]\nweb_url = "{web_url}"\n'
    )
    commit = git(repo, "rev-parse", "HEAD").decode().strip()

    first = threadwise("sync", "--config", str(cfg), cwd=tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr[-3000:]
    assert f"• runbooks: {len(NAMES) + 1} added, 0 updated, 0 removed, 0 unchanged; 1 problem" in first.stdout, (
        first.stdout
    )
    assert "surrogates" not in first.stdout + first.stderr
    cited = {file: url for source, file, url, _ in live_chunks(tmp_path) if source == "runbooks"}
    expected = {
        shown: f"https://git.example/ops/runbooks/-/blob/trunk/{link}?c={commit}" for shown, link in NAMES.values()
    }
    expected["docs/postgres.md"] = f"https://git.example/ops/runbooks/-/blob/trunk/docs/postgres.md?c={commit}"
    assert cited == expected

    # the same commit again: nothing read, and the binary file is still reported
    for _ in range(2):
        again = threadwise("sync", "--config", str(cfg), cwd=tmp_path)
        assert again.returncode == 0, again.stdout + again.stderr[-3000:]
        assert "• runbooks: 0 added, 0 updated, 0 removed, 8 unchanged; 1 problem" in again.stdout, again.stdout
        listed = threadwise("sources", "--json", "--config", str(cfg), cwd=tmp_path)
        assert "docs/blob.md" in listed.stdout, listed.stdout

    # one more odd name and a change in the same push: both arrive, nothing else is read again
    with open(os.fsencode(repo) + b"/docs/na\xefve\x01.md", "wb") as f:
        f.write(b"# Naive\n\nThe ibex gate opens at nine.\n")
    (repo / "docs" / "postgres.md").write_text("# Postgres\n\nVacuum the walrus table daily.\n")
    (repo / "docs" / "blob.md").unlink()
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "more")
    third = threadwise("sync", "--config", str(cfg), cwd=tmp_path)
    assert third.returncode == 0, third.stdout + third.stderr[-3000:]
    assert "• runbooks: 1 added, 1 updated, 0 removed, 7 unchanged (" in third.stdout, third.stdout
    chunks = live_chunks(tmp_path)
    assert any(f == "docs/na\\xefve\\x01.md" and "ibex gate" in t for _, f, _, t in chunks)
    [(url, text)] = [(u, t) for _, f, u, t in chunks if f == "docs/postgres.md"]
    assert "daily" in text and url.startswith("https://git.example/ops/runbooks/-/blob/trunk/docs/postgres.md?c="), url

    # the remote renames its default branch: every link follows, nothing else changes
    git(repo, "branch", "-m", "trunk", "main")
    renamed = threadwise("sync", "--config", str(cfg), cwd=tmp_path)
    assert renamed.returncode == 0, renamed.stdout + renamed.stderr[-3000:]
    assert "• runbooks: 0 added, 9 updated, 0 removed, 0 unchanged (" in renamed.stdout, renamed.stdout
    urls = {f: u for s, f, u, _ in live_chunks(tmp_path) if s == "runbooks"}
    assert len(urls) == 9 and all(
        u.startswith("https://git.example/ops/runbooks/-/blob/main/docs/") for u in urls.values()
    )
