"""Restore a benchmark corpus from its public repository, or check a restored one.

The corpora of ``bench/corpora/README.md`` are pages of other projects and are not kept in
this repository; ``bench/corpora/<name>.files`` records, for each page, its git blob hash,
its path in the repository at the recorded commit and its path in the corpus folder. Given a
git directory of that repository holding the commit (a ``git clone``, or a snapshot such as
the library's ``fetch`` gives), this copies the listed files out of that commit and checks
each against its blob hash. Only the listed files are copied; nothing is built or run.

Usage::

    python bench/restore_corpus.py GIT_DIR bench/corpora/httpx-docs.files [--into FOLDER]
    python bench/restore_corpus.py --check bench/corpora/httpx-docs.files [--into FOLDER]

The corpus goes to ``FOLDER/<name>`` (``<name>`` from the manifest's file name); FOLDER is
``--into``, else the first folder of ``THREADWISE_EXTRA_CORPORA`` (bench/extra_corpora.py).
``--check`` reads an existing corpus folder instead and compares every file with the manifest.

Manifest format (UTF-8 text): ``#`` comment lines, a ``repository URL`` line, a ``commit SHA``
line, then one line a file, tab-separated: ``BLOB<TAB>PATH IN THE REPOSITORY<TAB>PATH IN THE
CORPUS FOLDER``.

Exit status: 0 when every file is restored (or matches), 1 when a file is missing from the
commit or differs from its hash (each one printed), 2 on a usage error (no manifest, no git
directory, the commit not in it, no destination).
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.extra_corpora import ENV, corpora_roots  # noqa: E402


@dataclass(frozen=True)
class Manifest:
    """One corpus' manifest: where its pages come from and each page's blob and paths."""

    name: str
    repository: str
    commit: str
    files: list[tuple[str, str, str]]  # (blob sha1, path in the repository, path in the corpus folder)


def blob_hash(data: bytes) -> str:
    """The git blob hash of ``data`` (what ``git hash-object`` prints)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def read_manifest(path: Path) -> Manifest:
    """Parse a ``.files`` manifest (format in the module docstring).

    Raises:
        ValueError: a line of no known form, a missing ``repository`` or ``commit`` line, or a
            corpus path that is absolute or climbs out of the corpus folder.
    """
    repository = commit = ""
    files: list[tuple[str, str, str]] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        if line.startswith("repository "):
            repository = line.split(" ", 1)[1].strip()
        elif line.startswith("commit "):
            commit = line.split(" ", 1)[1].strip()
        else:
            parts = line.split("\t")
            local = PurePosixPath(parts[-1]) if len(parts) == 3 else None
            if local is None or len(parts[0]) != 40 or local.is_absolute() or ".." in local.parts:
                raise ValueError(f"{path}:{number}: not 'BLOB<TAB>REPOSITORY PATH<TAB>CORPUS PATH': {line!r}")
            files.append((parts[0], parts[1], parts[2]))
    if not repository or len(commit) != 40:
        raise ValueError(f"{path}: needs a 'repository URL' line and a 'commit SHA' line of 40 hex digits")
    return Manifest(path.name.removesuffix(".files"), repository, commit, files)


def git_dir(path: Path) -> Path:
    """The git directory of ``path``: ``path/.git`` of a clone with a work tree, else ``path``."""
    return path / ".git" if (path / ".git").exists() else path


def read_blobs(repo: Path, commit: str, paths: list[str]) -> dict[str, bytes | None]:
    """The bytes of each of ``paths`` at ``commit`` in the git directory ``repo`` (None: not
    there), read with one ``git cat-file --batch``."""
    names = "".join(f"{commit}:{p}\n" for p in paths).encode()
    out = subprocess.run(
        ["git", f"--git-dir={repo}", "cat-file", "--batch"], input=names, capture_output=True, check=True
    ).stdout
    found: dict[str, bytes | None] = {}
    at = 0
    for p in paths:
        end = out.index(b"\n", at)
        header = out[at:end].split()
        if len(header) == 3 and header[1] == b"blob":
            size = int(header[2])
            found[p] = out[end + 1 : end + 1 + size]
            at = end + 1 + size + 1
        else:  # "<name> missing", or a tree
            found[p] = None
            at = end + 1
    return found


def restore(manifest: Manifest, repo: Path, dest: Path) -> list[str]:
    """Copy the manifest's files out of ``manifest.commit`` in ``repo`` into ``dest``.

    Returns:
        The problems (a file missing from the commit, or whose bytes differ from its blob
        hash); such files are not written. Empty when every file is restored.
    """
    blobs = read_blobs(repo, manifest.commit, [r for _, r, _ in manifest.files])
    problems = []
    for blob, remote, local in manifest.files:
        data = blobs[remote]
        if data is None:
            problems.append(f"{remote}: not in commit {manifest.commit}")
        elif blob_hash(data) != blob:
            problems.append(f"{remote}: blob {blob_hash(data)}, the manifest says {blob}")
        else:
            target = dest / local
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
    return problems


def check(manifest: Manifest, folder: Path) -> list[str]:
    """Compare the corpus ``folder`` with the manifest: the problems (a listed file missing or
    differing from its blob hash, a file the manifest does not list); empty when it matches."""
    listed = {local: blob for blob, _, local in manifest.files}
    problems = []
    for local, blob in listed.items():
        path = folder / local
        if not path.is_file():
            problems.append(f"{local}: missing")
        elif blob_hash(path.read_bytes()) != blob:
            problems.append(f"{local}: differs from blob {blob}")
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        if path.relative_to(folder).as_posix() not in listed:
            problems.append(f"{path.relative_to(folder).as_posix()}: not in the manifest")
    return problems


def main(argv: list[str] | None = None) -> int:
    """Run on the command line; see the module docstring."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("git_dir", nargs="?", help="a git directory (or clone) of the corpus' repository")
    ap.add_argument("manifest", help="bench/corpora/<name>.files")
    ap.add_argument("--into", default="", help=f"the folder of corpora (default: the first folder of {ENV})")
    ap.add_argument("--check", action="store_true", help="check an existing corpus folder, read no git directory")
    args = ap.parse_args(argv)
    try:
        manifest = read_manifest(Path(args.manifest))
    except (OSError, ValueError) as e:
        print(f"restore_corpus: {e}", file=sys.stderr)
        return 2
    roots = [Path(args.into)] if args.into else corpora_roots()
    if not roots:
        print(f"restore_corpus: no destination: give --into FOLDER or set {ENV}", file=sys.stderr)
        return 2
    dest = roots[0] / manifest.name
    if args.check:
        if args.git_dir:
            print("restore_corpus: --check reads no git directory", file=sys.stderr)
            return 2
        problems = check(manifest, dest)
    else:
        if not args.git_dir:
            print("restore_corpus: give the git directory of " + manifest.repository, file=sys.stderr)
            return 2
        repo = git_dir(Path(args.git_dir))
        has = subprocess.run(
            ["git", f"--git-dir={repo}", "cat-file", "-e", f"{manifest.commit}^{{commit}}"], capture_output=True
        )
        if has.returncode != 0:
            print(
                f"restore_corpus: commit {manifest.commit} is not in {repo} (a clone of {manifest.repository} "
                "holding it is needed)",
                file=sys.stderr,
            )
            return 2
        problems = restore(manifest, repo, dest)
    for line in problems:
        print(f"  {line}")
    done = "checked" if args.check else "restored"
    print(f"{manifest.name}: {len(manifest.files)} files {done} in {dest}, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
