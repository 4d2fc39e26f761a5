"""``type = "git"``: files of one branch of a Git repository (https URL, ssh URL or local path).

The repository is kept as a bare clone in the index folder's ``repos/`` and fetched at each
sync with the ``git`` program (no credentials are asked for: ``GIT_TERMINAL_PROMPT=0`` and
ssh in batch mode, so a repository that needs them fails at once with git's own reason). A
sync compares the branch's tree with the last one by blob id: only added and changed files
are read (``git cat-file --batch``, one blob at a time), a deleted file leaves the index, a
renamed one moves (its old path goes, its new path comes), and an unchanged commit costs one
``fetch``.

A server that stops answering cannot hold a sync: git over HTTP gives up after
:data:`LOW_SPEED_SECONDS` below :data:`LOW_SPEED_BYTES` a second, ssh after about a minute
without an answer, and every git command has a deadline (:data:`GIT_TIMEOUT_SECONDS`) after
which git and the helpers it started (``git-remote-https``, ``ssh``), all run in a process
group of their own, are killed together.
"""

from __future__ import annotations

import fnmatch
import hashlib
import logging
import os
import posixpath
import re
import signal
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from graphs.file_formats import FILE_PATTERNS, SUPPORTED_SUFFIXES
from graphs.knowledge.common import display_name
from graphs.knowledge.connectors.base import Document, Listing, ScanProgress, SourceError
from graphs.knowledge.convert import FILE_READERS, ConversionError, convert

log = logging.getLogger(__name__)

GIT_TIMEOUT_SECONDS = 600.0
"""The longest one git command (a clone, a fetch, a listing) may take, in seconds: a first
clone of a large repository over a slow link takes minutes; a server that stops answering is
given up on sooner, by the two limits below."""
LOW_SPEED_BYTES = 1000
LOW_SPEED_SECONDS = 60
"""git over HTTP(S) gives up when fewer than :data:`LOW_SPEED_BYTES` a second arrive for this
many seconds (git's ``GIT_HTTP_LOW_SPEED_LIMIT``/``GIT_HTTP_LOW_SPEED_TIME``, also counting a
server that accepts the connection and never answers; set either in the environment to
change it). A server building a large pack keeps the connection alive meanwhile (git sends
a keep-alive every 5 s), so only a silent one is cut."""
SSH_COMMAND = "ssh -o BatchMode=yes -o ConnectTimeout=30 -o ServerAliveInterval=15 -o ServerAliveCountMax=4"
"""ssh never asks for a password, and gives up on a host that does not answer in 30 s or stops
answering for a minute (4 keep-alives 15 s apart)."""


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
    return re.compile(f"^{out}$", re.S)  # re.S: a name may hold a newline


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
        max_file_bytes: larger files are skipped with one log line, before they are read (their
            size comes from the tree listing).
        timeout_seconds: the longest one git command may take (:data:`GIT_TIMEOUT_SECONDS`).
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
        timeout_seconds: float = GIT_TIMEOUT_SECONDS,
    ):
        self.name = name
        self.repo = repo
        self.timeout_seconds = timeout_seconds
        self.branch = branch
        self.paths = list(paths)
        self.web_url = web_url
        self.max_file_bytes = max_file_bytes
        tag = hashlib.sha256(f"{repo}\n{branch}".encode()).hexdigest()[:10]
        self.clone_dir = Path(cache_dir) / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', name)}-{tag}.git"
        self._patterns = self._compile(self.paths)
        self._branch_name = branch  # the default branch's name once a fetch has asked the remote

    def describe(self) -> str:
        paths = " " + ", ".join(self.paths) if self.paths else ""
        return f"{redact(self.repo)} ({self.branch or 'default branch'}){paths}"

    @staticmethod
    def normal_path(path: str) -> str:
        """A ``paths`` entry as it is matched: relative to the repository's root, ``.`` and
        ``..`` steps resolved, a folder's trailing ``/`` kept, and a dot-directory kept as it
        is (``./.github/`` is ``.github/``, ``/docs`` is ``docs``); '' for the whole tree."""
        raw = path.strip()
        rel = posixpath.normpath(raw.lstrip("/")) if raw.lstrip("/") else "."
        if rel == ".":
            return ""
        return rel + "/" if raw.endswith("/") else rel

    @classmethod
    def _compile(cls, paths: Sequence[str]) -> list[re.Pattern[str]]:
        """The regexes of ``paths`` (:meth:`normal_path` first): a folder (a trailing ``/``) is
        everything below it; a glob as :func:`glob_regex` says; a path without wildcards is
        the folder of that name (``docs``, ``.github``) or the file (``docs/intro.md``, and
        a name alone, ``README.md``, in any folder, as a glob of it would be)."""
        if not paths:
            return [glob_regex(p) for p in FILE_PATTERNS]
        out = []
        for p in map(cls.normal_path, paths):
            folder = p.rstrip("/")
            below = f"^{re.escape(folder)}/.+$" if folder else "^.+$"
            if not folder or p.endswith("/"):
                out.append(re.compile(below, re.S))
            elif any(ch in p for ch in "*?["):
                out.append(glob_regex(p))
            else:
                out.append(re.compile(f"{below}|{glob_regex(p).pattern}", re.S))
        return out

    def wanted(self, path: str) -> bool:
        """``path`` (inside the repository) is one of ``paths`` and of a supported format."""
        suffix = os.path.splitext(path)[1].lower()
        return suffix in SUPPORTED_SUFFIXES and any(p.match(path) for p in self._patterns)

    def url_of(self, path: str | bytes, commit: str) -> str:
        """The address cited for ``path`` at ``commit`` ('' without a ``web_url``).

        Args:
            path: the file's path in the repository as git holds it (bytes: a name that is not
                UTF-8 is percent-encoded byte for byte, ``caf\\xe9.md`` as ``caf%E9.md``, the
                address a Git host serves it at), or as text (bytes that are not UTF-8 held as
                lone surrogates, as ``surrogateescape`` decodes them).
            commit: the commit id the file was read at.
        """
        if not self.web_url:
            return ""
        raw = path if isinstance(path, bytes) else path.encode("utf-8", "surrogateescape")
        branch = quote(self._branch_name or self.branch or "HEAD", safe="")
        return self.web_url.format(path=quote(raw, safe="/"), branch=branch, commit=commit)

    # ---- git -----------------------------------------------------------------------
    def _env(self) -> dict[str, str]:
        return {
            **os.environ,
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_ASKPASS": "",
            "SSH_ASKPASS": "",
            "GIT_SSH_COMMAND": os.environ.get("GIT_SSH_COMMAND", SSH_COMMAND),
            "GIT_HTTP_LOW_SPEED_LIMIT": os.environ.get("GIT_HTTP_LOW_SPEED_LIMIT", str(LOW_SPEED_BYTES)),
            "GIT_HTTP_LOW_SPEED_TIME": os.environ.get("GIT_HTTP_LOW_SPEED_TIME", str(LOW_SPEED_SECONDS)),
            "LC_ALL": "C",
        }

    def _start(self, args: Sequence[str], cwd: Path | None, stdin: int) -> subprocess.Popen[bytes]:
        """``git ARGS`` started in a session (and process group) of its own, so that it and every
        helper it starts can be killed together (:func:`_kill`).

        Raises:
            SourceError: git is not installed.
        """
        try:
            return subprocess.Popen(
                ["git", *args],
                stdin=stdin,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=cwd,
                env=self._env(),
                start_new_session=True,
            )
        except FileNotFoundError as exc:
            raise SourceError(f"source {self.name}: the git program is not installed") from exc

    def _git(self, *args: str, input: bytes | None = None, cwd: Path | None = None) -> bytes:
        """Run ``git ARGS`` to its end within ``timeout_seconds``; its standard output.

        Raises:
            SourceError: git is not installed, failed (git's own ``fatal:`` line), or was still
                running at the deadline (it and its helpers are then killed).
        """
        proc = self._start(args, cwd, subprocess.PIPE if input is not None else subprocess.DEVNULL)
        try:
            stdout, stderr = proc.communicate(input, timeout=self.timeout_seconds)
        except subprocess.TimeoutExpired:
            _kill(proc)
            raise SourceError(
                f"source {self.name}: git {args[0]} {redact(self.repo)} was stopped after "
                f"{self.timeout_seconds:.0f} s (the longest a git command may take; is the server answering?)"
            ) from None
        except BaseException:  # interrupted (Ctrl-C): git must not outlive the sync
            _kill(proc)
            raise
        if proc.returncode != 0:
            lines = [ln.strip() for ln in stderr.decode("utf-8", "replace").splitlines() if ln.strip()]
            last = lines[-1] if lines else f"exit {proc.returncode}"
            why = next((ln for ln in lines if ln.startswith("fatal:")), last)
            if "terminal prompts disabled" in why or "Authentication failed" in why or "Permission denied" in why:
                why += " (the repository needs credentials: use a URL or ssh key that git can use unattended)"
            raise SourceError(f"source {self.name}: git {args[0]} {redact(self.repo)} failed: {redact(why)}")
        return stdout

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
            if not self.branch:  # a bare clone's HEAD names the remote's default branch
                self._branch_name = self._head_branch()
            return self._git("rev-parse", "--verify", ref + "^{commit}", cwd=self.clone_dir).decode().strip()
        spec = (
            f"+refs/heads/{self.branch}:refs/heads/{self.branch}" if self.branch else "+HEAD:refs/remotes/origin/HEAD"
        )
        self._git("fetch", "--quiet", "--no-tags", "--prune", "--", repo, spec, cwd=self.clone_dir)
        if not self.branch and "{branch}" in self.web_url:
            # a fetch of HEAD brings its commit, not its name; the remote may have renamed it
            self._branch_name = self._remote_default_branch(repo) or self._head_branch()
        ref = f"refs/heads/{self.branch}" if self.branch else "refs/remotes/origin/HEAD"
        return self._git("rev-parse", "--verify", ref + "^{commit}", cwd=self.clone_dir).decode().strip()

    def _head_branch(self) -> str:
        """The branch the clone's HEAD names (the remote's default branch when it was cloned);
        '' when HEAD names none."""
        try:
            ref = self._git("symbolic-ref", "--quiet", "HEAD", cwd=self.clone_dir).decode("utf-8", "replace").strip()
        except SourceError:
            return ""
        return ref.removeprefix("refs/heads/") if ref.startswith("refs/heads/") else ""

    def _remote_default_branch(self, repo: str) -> str:
        """The branch the remote's HEAD names (``git ls-remote --symref``: one more connection,
        made only when ``web_url`` cites ``{branch}``); '' when the remote does not say."""
        try:
            out = self._git("ls-remote", "--symref", "--", repo, "HEAD").decode("utf-8", "replace")
        except SourceError as exc:
            log.debug("%s", exc)
            return ""
        for line in out.splitlines():
            target, _, name = line.partition("\t")
            if name == "HEAD" and target.startswith("ref: refs/heads/"):
                return target.removeprefix("ref: refs/heads/")
        return ""

    def _tree(self, commit: str, out: Listing) -> dict[str, tuple[str, int, bytes]]:
        """``{id: (blob id, size, path)}`` of the commit's regular files that :meth:`wanted`
        keeps. ``path`` is the name as git holds it (bytes, from ``ls-tree -z``: a name with a
        newline, a tab, a quote or bytes that are not UTF-8 arrives whole); ``id`` is that name
        as the index stores and cites it (:func:`display_name`: non-UTF-8 bytes as ``\\xe9``,
        control characters as ``\\n``). Two names that read the same once escaped: the first
        is read, the other is a problem in ``out``."""
        found: dict[str, tuple[str, int, bytes]] = {}
        raw = self._git("ls-tree", "-r", "-l", "-z", "--full-tree", commit, cwd=self.clone_dir)
        for entry in raw.split(b"\0"):
            if not entry:
                continue
            meta, _, path_b = entry.partition(b"\t")
            fields = meta.split()
            if len(fields) != 4:
                continue
            mode, kind, sha, size = fields
            if kind != b"blob" or mode == b"120000":  # symlinks are not documents
                continue
            path = path_b.decode("utf-8", "surrogateescape")
            if not self.wanted(path):
                continue
            doc_id = display_name(path)
            if doc_id in found:
                out.problem(self.name, doc_id, "not read: another file's name reads the same once escaped")
                continue
            found[doc_id] = (sha.decode("ascii"), int(size) if size.isdigit() else 0, path_b)
        return found

    def scan(self, known: Mapping[str, str], state: Mapping[str, Any], progress: ScanProgress | None = None) -> Listing:
        """See :meth:`graphs.knowledge.connectors.base.Connector.scan` (``state``: ``{"commit":
        id, "paths": [...], "problems": [ids that could not be read], "branch": the name cited}``).

        An unchanged commit costs one fetch, unless files could not be read at the last sync:
        then the tree is listed again and those files are tried (and reported) again, so a file
        that is still unreadable is never forgotten by ``threadwise sources``.

        Raises:
            SourceError: git cannot clone or fetch (not found, needs credentials, offline).
        """
        commit = self._fetch()
        out = Listing(state={"commit": commit})
        # the paths as matched: a sync before paths were normalised read "./.github/" as
        # "github/", and its commit alone must not keep what that found
        paths = [self.normal_path(p) for p in self.paths]
        out.state["paths"] = paths
        same = state.get("commit") == commit and state.get("paths") == paths
        # the links cite the branch's name: when it changed (the remote renamed its default
        # branch; an index from before the name was asked for cited "HEAD"), every file is
        # read again for its new link (its chunks' vectors are reused: the text is the same)
        branch = self._branch_name or self.branch or "HEAD"
        relink = "{branch}" in self.web_url and state.get("branch", self.branch or "HEAD") != branch
        out.state["branch"] = branch
        unchanged: Mapping[str, str] = {} if relink else known
        if same and unchanged and not state.get("problems"):
            out.kept = set(known)
            return out
        tree = self._tree(commit, out)
        problems: list[str] = [p.split(": ", 1)[0] for p in out.problems]
        out.state["problems"] = problems  # filled while the documents are read
        todo: list[str] = []
        for doc_id, (sha, size, _) in tree.items():
            if unchanged.get(doc_id) == sha:
                out.kept.add(doc_id)
            elif size > self.max_file_bytes:
                out.problem(
                    self.name,
                    doc_id,
                    f"{size / 1e6:.0f} MB is over the {self.max_file_bytes / 1e6:.0f} MB limit (max_file_bytes)",
                )
                problems.append(doc_id)
                if doc_id in known:
                    out.kept.add(doc_id)
            else:
                todo.append(doc_id)
        out.changed = self._read(todo, tree, known, commit, out, progress)
        return out

    def _read(
        self,
        todo: list[str],
        tree: dict[str, tuple[str, int, bytes]],
        known: Mapping[str, str],
        commit: str,
        out: Listing,
        progress: ScanProgress | None,
    ) -> Iterator[Document]:
        """The documents at ``todo`` (ids of ``tree``), read one blob at a time
        (:class:`_CatFile`); fills ``out`` (and its state's ``problems``) on the way."""
        if not todo:
            return
        problems: list[str] = out.state["problems"]
        blobs = _CatFile(self)
        try:
            for done, doc_id in enumerate(todo, start=1):
                if progress is not None and (done % 200 == 0 or done == len(todo)):
                    progress(done, len(todo))
                sha, _, path = tree[doc_id]
                data = blobs.read(sha)
                if data is None:
                    out.problem(self.name, doc_id, "blob missing from the clone")
                    problems.append(doc_id)
                    continue
                try:
                    doc = convert(data, doc_id)
                except ConversionError as exc:
                    out.problem(self.name, doc_id, str(exc))
                    problems.append(doc_id)
                    if doc_id in known:
                        out.kept.add(doc_id)
                    continue
                del data  # the bytes are not held while the document is split and embedded
                yield Document(id=doc_id, title=doc.title, text=doc.text, url=self.url_of(path, commit), version=sha)
        finally:
            blobs.close()


class _CatFile:
    """One ``git cat-file --batch`` of a connector's clone, asked for one blob at a time, so that
    a sync holds one file's bytes at once (not a batch of them: 200 files of 50 MB were 10 GB).

    Raises (from :meth:`read`):
        SourceError: git is not installed, or ``cat-file`` stopped answering.
    """

    def __init__(self, connector: GitConnector):
        self.connector = connector
        self.proc = connector._start(["cat-file", "--batch"], connector.clone_dir, subprocess.PIPE)

    def read(self, sha: str) -> bytes | None:
        """The content of the blob ``sha``; None when the clone does not hold it."""
        stdin, stdout = self.proc.stdin, self.proc.stdout
        assert stdin is not None and stdout is not None
        try:
            stdin.write(sha.encode("ascii") + b"\n")
            stdin.flush()
            header = stdout.readline().split()
            if len(header) == 2 and header[1] == b"missing":
                return None
            if len(header) != 3 or not header[2].isdigit():
                raise OSError("no answer")
            size = int(header[2])
            data = stdout.read(size)
            if len(data) != size or stdout.read(1) != b"\n":
                raise OSError("it ended halfway through a file")
        except OSError as exc:
            c = self.connector
            raise SourceError(f"source {c.name}: git cat-file {redact(c.repo)} failed: {exc}") from None
        return data

    def close(self) -> None:
        """End the process (it and its group: :func:`_kill`)."""
        _kill(self.proc)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """End ``proc`` and every process of its group (git's helpers: ``git-remote-https``,
    ``ssh``), then reap it and close its pipes. ``proc`` leads its own group (started with
    ``start_new_session``), so no other process is touched."""
    if proc.returncode is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    try:
        proc.communicate(timeout=10)
    except (subprocess.TimeoutExpired, ValueError, OSError):
        pass  # a helper that left the group holds a pipe: not waited for
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        if pipe is not None and not pipe.closed:
            pipe.close()
