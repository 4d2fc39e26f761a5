"""``type = "git"``: files of one branch of a Git repository (https URL, ssh URL or local path).

The repository is kept as a bare clone in the index folder's ``repos/`` and fetched at each
sync with the ``git`` program (no credentials are asked for: ``GIT_TERMINAL_PROMPT=0`` and
ssh in batch mode, so a repository that needs them fails at once with git's own reason). A
sync compares the branch's tree with the last one by blob id: only added and changed files
are read (``git cat-file --batch``), a deleted file leaves the index, a renamed one moves
(its old path goes, its new path comes), and an unchanged commit costs one ``fetch``.
"""

from __future__ import annotations

import fnmatch
import hashlib
import logging
import os
import re
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from graphs.file_formats import FILE_PATTERNS, SUPPORTED_SUFFIXES
from graphs.knowledge.connectors.base import Document, Listing, ScanProgress, SourceError
from graphs.knowledge.convert import FILE_READERS, ConversionError, convert

log = logging.getLogger(__name__)

GIT_TIMEOUT_SECONDS = 600.0


def redact(url: str) -> str:
    """``url`` without a user name or password (they never reach a log line)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if parts.username or parts.password:
        host = parts.hostname or ""
        return urlunsplit((parts.scheme, host + (f":{parts.port}" if parts.port else ""), parts.path, parts.query, ""))
    return url


def glob_regex(pattern: str) -> re.Pattern[str]:
    """A path glob as a regex: ``**/`` any folders (or none), ``*`` and ``?`` within one
    name, ``[...]`` a set; a pattern without ``/`` matches the name in any folder."""
    if "/" not in pattern:
        pattern = "**/" + pattern
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        else:
            j = pattern.find("]", i) if pattern[i] == "[" else -1
            if j > i:
                out, i = out + fnmatch.translate(pattern[i : j + 1])[4:-3], j + 1
            else:
                out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(f"^{out}$")


class GitConnector:
    """Documents from one branch of a Git repository.

    Args:
        name: the source's name.
        repo: an https/ssh URL or a local path of a repository.
        branch: the branch read ('' = the remote's default branch).
        paths: folders or globs inside the repository (``docs/``, ``**/*.md``); empty = all
            files of :data:`graphs.file_formats.FILE_PATTERNS`.
        cache_dir: where the bare clone is kept.
        web_url: a template of the address to cite, with ``{path}``, ``{branch}`` and
            ``{commit}``, e.g. ``https://github.com/org/repo/blob/{branch}/{path}``.
        max_file_bytes: larger files are skipped with one log line.
    """

    kind = "git"
    readers = FILE_READERS

    def __init__(
        self,
        name: str,
        repo: str,
        branch: str = "",
        paths: Sequence[str] = (),
        *,
        cache_dir: Path,
        web_url: str = "",
        max_file_bytes: int = 50_000_000,
    ):
        self.name = name
        self.repo = repo
        self.branch = branch
        self.paths = list(paths)
        self.web_url = web_url
        self.max_file_bytes = max_file_bytes
        tag = hashlib.sha256(f"{repo}\n{branch}".encode()).hexdigest()[:10]
        self.clone_dir = Path(cache_dir) / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', name)}-{tag}.git"
        self._patterns = self._compile(self.paths)

    def describe(self) -> str:
        paths = " " + ", ".join(self.paths) if self.paths else ""
        return f"{redact(self.repo)} ({self.branch or 'default branch'}){paths}"

    @staticmethod
    def _compile(paths: Sequence[str]) -> list[re.Pattern[str]]:
        if not paths:
            return [glob_regex(p) for p in FILE_PATTERNS]
        out = []
        for p in paths:
            p = p.strip().lstrip("./") if p.strip().startswith("./") else p.strip().lstrip("/")
            if not p or p.endswith("/") or not any(ch in p for ch in "*?[") and "." not in p.rsplit("/", 1)[-1]:
                folder = p.rstrip("/")
                out.append(re.compile(f"^{re.escape(folder)}/.+$" if folder else "^.+$"))  # a folder: all below
            else:
                out.append(glob_regex(p))
        return out

    def wanted(self, path: str) -> bool:
        """``path`` (inside the repository) is one of ``paths`` and of a supported format."""
        suffix = os.path.splitext(path)[1].lower()
        return suffix in SUPPORTED_SUFFIXES and any(p.match(path) for p in self._patterns)

    def url_of(self, path: str, commit: str) -> str:
        """The address cited for ``path`` at ``commit`` ('' without a ``web_url``)."""
        if not self.web_url:
            return ""
        return self.web_url.format(path=quote(path), branch=quote(self.branch or "HEAD"), commit=commit)

    # ---- git -----------------------------------------------------------------------
    def _git(self, *args: str, input: bytes | None = None, cwd: Path | None = None) -> bytes:
        env = {
            **os.environ,
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_ASKPASS": "",
            "SSH_ASKPASS": "",
            "GIT_SSH_COMMAND": os.environ.get("GIT_SSH_COMMAND", "ssh -o BatchMode=yes"),
            "LC_ALL": "C",
        }
        try:
            done = subprocess.run(
                ["git", *args],
                input=input,
                cwd=cwd,
                env=env,
                capture_output=True,
                timeout=GIT_TIMEOUT_SECONDS,
                check=False,
            )
        except FileNotFoundError as exc:
            raise SourceError(f"source {self.name}: the git program is not installed") from exc
        except subprocess.TimeoutExpired as exc:
            raise SourceError(f"source {self.name}: git {args[0]} took over {GIT_TIMEOUT_SECONDS:.0f} s") from exc
        if done.returncode != 0:
            lines = [ln.strip() for ln in done.stderr.decode("utf-8", "replace").splitlines() if ln.strip()]
            last = lines[-1] if lines else f"exit {done.returncode}"
            why = next((ln for ln in lines if ln.startswith("fatal:")), last)
            if "terminal prompts disabled" in why or "Authentication failed" in why or "Permission denied" in why:
                why += " (the repository needs credentials: use a URL or ssh key that git can use unattended)"
            raise SourceError(f"source {self.name}: git {args[0]} {redact(self.repo)} failed: {redact(why)}")
        return done.stdout

    def _fetch(self) -> str:
        """Clone or fetch; return the commit id of the branch."""
        repo = self.repo
        if not re.match(r"^[a-z][a-z0-9+.-]*://|^[^/]+@[^/]+:", repo):
            local = Path(repo).expanduser()
            if not local.exists():
                raise SourceError(f"source {self.name}: repository not found: {repo}")
            repo = str(local.resolve())
        ref = self.branch or "HEAD"
        if not (self.clone_dir / "HEAD").exists():
            self.clone_dir.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.clone_dir.with_suffix(".tmp")
            if tmp.exists():
                import shutil

                shutil.rmtree(tmp)
            args = ["clone", "--bare", "--quiet", "--no-tags", "--single-branch"]
            if self.branch:
                args += ["--branch", self.branch]
            self._git(*args, "--", repo, str(tmp))
            tmp.rename(self.clone_dir)
            return self._git("rev-parse", "--verify", ref + "^{commit}", cwd=self.clone_dir).decode().strip()
        spec = (
            f"+refs/heads/{self.branch}:refs/heads/{self.branch}" if self.branch else "+HEAD:refs/remotes/origin/HEAD"
        )
        self._git("fetch", "--quiet", "--no-tags", "--prune", "--", repo, spec, cwd=self.clone_dir)
        ref = f"refs/heads/{self.branch}" if self.branch else "refs/remotes/origin/HEAD"
        return self._git("rev-parse", "--verify", ref + "^{commit}", cwd=self.clone_dir).decode().strip()

    def _tree(self, commit: str) -> dict[str, tuple[str, int]]:
        """``{path: (blob id, size)}`` of the commit's regular files."""
        out: dict[str, tuple[str, int]] = {}
        raw = self._git("ls-tree", "-r", "-l", "-z", "--full-tree", commit, cwd=self.clone_dir)
        for entry in raw.split(b"\0"):
            if not entry:
                continue
            meta, _, path_b = entry.partition(b"\t")
            mode, kind, sha, size = meta.split()
            if kind != b"blob" or mode == b"120000":  # symlinks are not documents
                continue
            path = path_b.decode("utf-8", "surrogateescape")
            out[path] = (sha.decode(), int(size) if size.isdigit() else 0)
        return out

    def _blobs(self, shas: list[str]) -> dict[str, bytes]:
        """The contents of ``shas`` in one ``git cat-file --batch``."""
        if not shas:
            return {}
        raw = self._git("cat-file", "--batch", input=("\n".join(shas) + "\n").encode(), cwd=self.clone_dir)
        out: dict[str, bytes] = {}
        pos = 0
        while pos < len(raw):
            nl = raw.index(b"\n", pos)
            header = raw[pos:nl].split()
            pos = nl + 1
            if len(header) < 3:  # "<sha> missing"
                continue
            size = int(header[2])
            out[header[0].decode()] = raw[pos : pos + size]
            pos += size + 1
        return out

    def scan(self, known: Mapping[str, str], state: Mapping[str, Any], progress: ScanProgress | None = None) -> Listing:
        """See :meth:`graphs.knowledge.connectors.base.Connector.scan` (``state``: ``{"commit": id}``).

        Raises:
            SourceError: git cannot clone or fetch (not found, needs credentials, offline).
        """
        commit = self._fetch()
        out = Listing(state={"commit": commit})
        if state.get("commit") == commit and known and state.get("paths") == self.paths:
            out.kept = set(known)
            out.state["paths"] = self.paths
            return out
        tree = {p: v for p, v in self._tree(commit).items() if self.wanted(p)}
        out.state["paths"] = self.paths
        todo: list[str] = []
        for path, (sha, size) in tree.items():
            if known.get(path) == sha:
                out.kept.add(path)
            elif size > self.max_file_bytes:
                out.problem(
                    self.name,
                    path,
                    f"{size / 1e6:.0f} MB is over the {self.max_file_bytes / 1e6:.0f} MB limit (max_file_bytes)",
                )
                if path in known:
                    out.kept.add(path)
            else:
                todo.append(path)
        out.changed = self._read(todo, tree, known, commit, out, progress)
        return out

    def _read(
        self,
        todo: list[str],
        tree: dict[str, tuple[str, int]],
        known: Mapping[str, str],
        commit: str,
        out: Listing,
        progress: ScanProgress | None,
    ) -> Iterator[Document]:
        """The documents at ``todo``, read 200 blobs at a time; fills ``out`` on the way."""
        for start in range(0, len(todo), 200):
            batch = todo[start : start + 200]
            blobs = self._blobs([tree[p][0] for p in batch])
            for path in batch:
                sha = tree[path][0]
                data = blobs.get(sha)
                if data is None:
                    out.problem(self.name, path, "blob missing from the clone")
                    continue
                try:
                    doc = convert(data, path)
                except ConversionError as exc:
                    out.problem(self.name, path, str(exc))
                    if path in known:
                        out.kept.add(path)
                    continue
                yield Document(id=path, title=doc.title, text=doc.text, url=self.url_of(path, commit), version=sha)
            if progress is not None:
                progress(min(start + 200, len(todo)), len(todo))
