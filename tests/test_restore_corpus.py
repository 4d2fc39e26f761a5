"""The benchmark corpora fetched from other projects live outside the repository: each is
named by a manifest (bench/corpora/<name>.files) that bench/restore_corpus.py restores
byte for byte from a git directory of its repository, and found through one setting,
THREADWISE_EXTRA_CORPORA (bench/extra_corpora.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bench.extra_corpora import ENV, corpora_roots, corpus_folder, find_corpus

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "bench" / "restore_corpus.py"
MANIFESTS = sorted((ROOT / "bench" / "corpora").glob("*.files"))


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def restore(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True, timeout=120, cwd=ROOT
    )


@pytest.fixture
def docs_repo(tmp_path: Path) -> tuple[Path, str, Path]:
    """A git repository of two pages and a licence, its commit, and a manifest naming the
    pages below docs/ (paths below it kept) and the licence beside them."""
    repo = tmp_path / "upstream"
    (repo / "docs" / "guide").mkdir(parents=True)
    (repo / "docs" / "index.md").write_text("# Widgets\n\nWidgets are made on Tuesdays.\n")
    (repo / "docs" / "guide" / "setup.md").write_text("# Setup\n\nRun `widget init` once.\n")
    (repo / "LICENSE").write_text("Do what you like.\n")
    (repo / "src.py").write_text("print('not copied')\n")
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "pages")
    commit = git(repo, "rev-parse", "HEAD")
    paths = {"LICENSE": "LICENSE", "docs/guide/setup.md": "guide/setup.md", "docs/index.md": "index.md"}
    rows = [(git(repo, "rev-parse", f"HEAD:{remote}"), remote, local) for remote, local in paths.items()]
    (repo / "docs" / "index.md").write_text("# Widgets\n\nChanged after the recorded commit.\n")
    git(repo, "commit", "-qam", "later")
    manifest = tmp_path / "widgets.files"
    manifest.write_text(
        "# widgets: three files\nrepository https://example.com/widgets\n"
        f"commit {commit}\n" + "".join(f"{b}\t{r}\t{x}\n" for b, r, x in rows)
    )
    return repo, commit, manifest


def test_a_corpus_is_restored_from_the_recorded_commit_and_checked(docs_repo, tmp_path):
    repo, _, manifest = docs_repo
    done = restore(repo, manifest, "--into", tmp_path / "corpora")
    assert done.returncode == 0, done.stdout + done.stderr
    corpus = tmp_path / "corpora" / "widgets"
    assert (corpus / "index.md").read_text() == "# Widgets\n\nWidgets are made on Tuesdays.\n"  # the commit's page
    assert sorted(p.relative_to(corpus).as_posix() for p in corpus.rglob("*") if p.is_file()) == [
        "LICENSE",
        "guide/setup.md",
        "index.md",
    ]
    # the git directory of a snapshot (no work tree) works as a clone does
    bare = tmp_path / "bare.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(repo), str(bare)], check=True)
    assert restore(bare, manifest, "--into", tmp_path / "again").returncode == 0
    checked = restore("--check", manifest, "--into", tmp_path / "corpora")
    assert checked.returncode == 0 and "0 problems" in checked.stdout, checked.stdout


def test_a_changed_missing_or_extra_file_fails(docs_repo, tmp_path):
    repo, commit, manifest = docs_repo
    wrong = tmp_path / "wrong.files"
    wrong.write_text(
        "".join(
            "0" * 40 + line[40:] if line.endswith("\tindex.md\n") else line.replace("docs/guide/", "docs/gone/")
            for line in manifest.read_text().splitlines(keepends=True)
        )
    )
    failed = restore(repo, wrong, "--into", tmp_path / "corpora")
    assert failed.returncode == 1
    assert "docs/gone/setup.md: not in commit" in failed.stdout and "the manifest says" in failed.stdout
    assert restore(repo, manifest, "--into", tmp_path / "corpora").returncode == 0
    corpus = tmp_path / "corpora" / "widgets"
    (corpus / "index.md").write_text("edited\n")
    (corpus / "notes.md").write_text("mine\n")
    checked = restore("--check", manifest, "--into", tmp_path / "corpora")
    assert checked.returncode == 1
    assert "index.md: differs" in checked.stdout and "notes.md: not in the manifest" in checked.stdout
    # a commit the git directory does not hold, or no destination, is a usage error
    other = tmp_path / "other.files"
    other.write_text(manifest.read_text().replace(commit, "1" * 40))
    assert restore(repo, other, "--into", tmp_path / "x").returncode == 2
    bad = tmp_path / "bad.files"
    bad.write_text(manifest.read_text() + "0" * 40 + "\tLICENSE\t../../outside.md\n")
    assert restore(repo, bad, "--into", tmp_path / "x").returncode == 2


def test_every_committed_manifest_names_its_commit_and_its_files():
    from bench.restore_corpus import read_manifest

    assert len(MANIFESTS) >= 9
    readme = (ROOT / "bench" / "corpora" / "README.md").read_text()
    for path in MANIFESTS:
        manifest = read_manifest(path)
        assert manifest.files and manifest.commit in readme, path.name  # the provenance names the same commit
        assert f"`{manifest.name}/`" in readme


@pytest.mark.parametrize("manifest", MANIFESTS, ids=lambda p: p.stem)
def test_the_corpora_here_match_their_manifests(manifest):
    folder = find_corpus(manifest.stem)
    if folder is None:
        pytest.skip(f"{manifest.stem} is not here: set {ENV} to the folder of corpora to check it")
    checked = restore("--check", manifest, "--into", folder.parent)
    assert checked.returncode == 0, checked.stdout


def test_one_setting_names_the_folders_of_corpora(tmp_path):
    (tmp_path / "a" / "httpx-docs").mkdir(parents=True)
    (tmp_path / "b" / "hugo-docs").mkdir(parents=True)
    env = {ENV: f"{tmp_path / 'a'}:{tmp_path / 'b'}:"}
    assert corpora_roots(env) == [tmp_path / "a", tmp_path / "b"] and corpora_roots({}) == []
    assert find_corpus("hugo-docs", env) == tmp_path / "b" / "hugo-docs"
    assert find_corpus("cargo-book", env) is None
    assert corpus_folder("httpx-docs", env) == tmp_path / "a" / "httpx-docs"  # a name, as the bench scripts take it
    assert corpus_folder(tmp_path / "b" / "hugo-docs", {}) == tmp_path / "b" / "hugo-docs"  # or a path
    with pytest.raises(FileNotFoundError, match="restore_corpus.py GIT_DIR bench/corpora/cargo-book.files"):
        corpus_folder("cargo-book", env)
