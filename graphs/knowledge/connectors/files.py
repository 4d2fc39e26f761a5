"""``type = "files"``: a folder, a file or a glob of Markdown/MDX/text, HTML, PDF and office files.

A file's version is ``<size>:<mtime_ns>`` first; only a file whose size or time changed is
read, hashed and (if its sha256 changed) converted again, so a sync of 100,000 unchanged files
costs 100,000 ``stat`` calls. Files over ``max_file_bytes`` are skipped with one log line.
A link leading outside its folder is never read (:func:`graphs.knowledge.sources.discover_files`).
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from graphs.file_formats import FILE_PATTERNS, SUPPORTED_SUFFIXES
from graphs.knowledge.common import KnowledgeBaseError, display_name
from graphs.knowledge.connectors.base import Document, Listing, ScanProgress, SourceError
from graphs.knowledge.convert import FILE_READERS, ConversionError, convert
from graphs.knowledge.sources import _glob_split, list_files

log = logging.getLogger(__name__)


class FilesConnector:
    """Documents from local files.

    Args:
        name: the source's name.
        paths: folders, files or globs (absolute, or relative to the working folder).
        patterns: globs inside a folder (``**/*.md``...); by default every supported format
            (:data:`graphs.file_formats.FILE_PATTERNS`).
        web_url: a template of the address to cite, with ``{path}`` (the file's path inside
            its folder, URL-quoted), ``{stem}`` (the same without its ending) and ``{folder}``
            (:meth:`folders`), e.g. ``https://docs.example.com/{folder}/{path}``; '' cites the id.
        max_file_bytes: larger files are skipped (one log line and a problem in the report).
    """

    kind = "files"
    readers = FILE_READERS

    def __init__(
        self,
        name: str,
        paths: Sequence[str | Path],
        patterns: Sequence[str] = FILE_PATTERNS,
        web_url: str = "",
        max_file_bytes: int = 50_000_000,
    ):
        self.name = name
        self.paths = [str(p) for p in paths]
        self.patterns = list(patterns)
        self.web_url = web_url
        self.max_file_bytes = max_file_bytes

    def describe(self) -> str:
        # other patterns are named: the index then sees a change of patterns as a new
        # configuration and syncs the source again at the next start
        where = ", ".join(self.paths)
        return where if tuple(self.patterns) == FILE_PATTERNS else f"{where} ({', '.join(self.patterns)})"

    def url_of(self, rel: str, folder: str = "") -> str:
        """The address cited for the file at ``rel`` ('' without a ``web_url``).

        Args:
            rel: the file's path inside its folder, with '/', as the file system holds it
                (``os.fsdecode``: bytes that are not UTF-8 as lone surrogates); those bytes are
                percent-encoded as they are (``caf%E9.md``), the address a web server
                serving the folder answers at.
            folder: ``{folder}``: the name of the folder the file was found through
                (:meth:`folders`), held the same way.
        """
        if not self.web_url:
            return ""
        stem = rel.rsplit(".", 1)[0] if "." in rel.rsplit("/", 1)[-1] else rel
        raw, raw_stem, raw_folder = (os.fsencode(x) for x in (rel, stem, folder))
        return self.web_url.format(path=quote(raw), stem=quote(raw_stem), folder=quote(raw_folder))

    def folders(self) -> dict[str, str]:
        """``{configured path: the name of its folder}``: the folder a path names (a glob's
        folder, a file's own folder), with as many parent folders as make it differ from the
        other paths' (``en/docs``, ``de/docs``; paths in one folder share it), as the file
        system holds it (``os.fsdecode``). ``{folder}`` of ``web_url``; with several paths, two
        folders may both hold a README.md, so each id starts with it (``eng/README.md``). With
        one path an id is the file's path inside its folder, as it always was, so an index
        needs nothing read again."""
        bases: dict[str, list[str]] = {}
        for src in dict.fromkeys(self.paths):
            p = Path(src).expanduser()
            if any(c in src for c in "*?["):
                base = _glob_split(str(p))[0]
            elif p.is_dir() or not (p.exists() or p.suffix):
                base = os.path.abspath(p)
            else:  # a file named by itself: its folder
                base = os.path.dirname(os.path.abspath(p))
            bases[src] = [part for part in base.split(os.sep) if part] or ["root"]
        distinct = {tuple(b) for b in bases.values()}
        out = {}
        for src, parts in bases.items():
            k = 1
            while k < len(parts) and sum(b[-k:] == tuple(parts[-k:]) for b in distinct) > 1:
                k += 1
            out[src] = "/".join(parts[-k:])
        return out

    def scan(self, known: Mapping[str, str], state: Mapping[str, Any], progress: ScanProgress | None = None) -> Listing:
        """See :meth:`graphs.knowledge.connectors.base.Connector.scan`. ``state`` maps a file's
        id to ``[size:mtime_ns, sha256, path]`` of its last read (``path``: the entry of
        ``paths`` it was found through).

        A path that matches nothing (a folder or file that is gone, a glob matching no file)
        is one problem, and the files it gave at the last sync stay in the index as they were;
        the other paths are read.

        Raises:
            SourceError: every configured path matches nothing (the message names them).
        """
        outside: list[str] = []
        found: dict[str, tuple[Path, str, str, str]] = {}
        missing: dict[str, str] = {}  # configured path: why it gives nothing
        folders = self.folders()
        several = len(folders) > 1
        for src in self.paths:
            try:
                listed = list_files([src], self.patterns, outside)
            except Exception as exc:  # noqa: BLE001 - a missing folder or unreadable glob: this path only
                missing[src] = str(exc) if isinstance(exc, KnowledgeBaseError) else f"{type(exc).__name__}: {exc}"
                continue
            for path, shown, name in listed:  # a file reached through two paths is read once, through the first
                doc_id = f"{display_name(folders[src])}/{shown}" if several else shown
                found.setdefault(str(path), (path, doc_id, src, name))
        if missing and len(missing) == len(set(self.paths)):
            raise SourceError(f"source {self.name}: {_none_found(missing)}")
        out = Listing()
        # already logged, with the link's target, by discover_files; a link indexed before leaves the index
        out.problems += [f"{rel}: not read: a link to a file outside the folder" for rel in outside]
        files = sorted(found.values(), key=lambda f: f[1])
        stamps: dict[str, list[str]] = {k: list(v) for k, v in (state.get("files") or {}).items()}
        lost: dict[str, list[str]] = {}
        if missing:
            listed_ids = {rel for _, rel, _, _ in files}
            for src, why in missing.items():
                # "<path>: not found (...)" or "<glob>: matches no file (...)", the path said once
                why = why.removeprefix(f"knowledge source not found: {src} ")
                what = "matches no file" if any(c in src for c in "*?[") else "not found"
                out.problem(self.name, display_name(src), f"{what} {why}" if why.startswith("(") else why)
            for rel in known:
                origin = stamps.get(rel, [])[2:3]
                # what the missing path gave stays (its origin unknown, from an older sync: kept too)
                if rel not in listed_ids and (not origin or origin[0] in missing):
                    out.kept.add(rel)
                    if rel in stamps:
                        lost[rel] = stamps[rel]
        out.changed = self._read(files, known, stamps, lost, out, progress)
        return out

    def _read(
        self,
        files: list[tuple[Path, str, str, str]],
        known: Mapping[str, str],
        stamps: Mapping[str, list[str]],
        lost: dict[str, list[str]],
        out: Listing,
        progress: ScanProgress | None,
    ) -> Iterator[Document]:
        """The changed documents of ``files`` (``(path, id, configured path, name inside its
        folder as the file system holds it)``), read one at a
        time; fills ``out`` on the way. ``stamps`` is the last sync's state of each id, ``lost``
        that of the ids kept for a configured path that matches nothing now."""
        new_stamps: dict[str, list[str]] = dict(lost)
        named = {Path(os.path.abspath(Path(p).expanduser())) for p in self.paths}
        folders = self.folders()
        out.state = {"files": new_stamps}
        for i, (path, rel, src, name) in enumerate(files, start=1):
            if progress is not None and (i % 500 == 0 or i == len(files)):
                progress(i, len(files))
            if path.suffix.lower() not in SUPPORTED_SUFFIXES:
                if path in named:  # a file named in the configuration is not passed over in silence
                    self._failed(
                        out,
                        known,
                        rel,
                        f"unsupported file type {path.suffix or '(no ending)'} (a files source reads "
                        f"{', '.join(p.removeprefix('**/*') for p in FILE_PATTERNS)})",
                    )
                else:
                    out.skip(self.name, rel, "not a format read")
                continue
            try:
                st = path.stat()
            except OSError as exc:
                self._failed(out, known, rel, f"cannot read ({exc.strerror or exc})")
                continue
            stamp = f"{st.st_size}:{st.st_mtime_ns}"
            previous = stamps.get(rel)
            if rel in known and previous and previous[0] == stamp:
                out.kept.add(rel)
                new_stamps[rel] = [*previous[:2], src]
                continue
            if st.st_size > self.max_file_bytes:
                self._failed(
                    out,
                    known,
                    rel,
                    f"{st.st_size / 1e6:.0f} MB is over the {self.max_file_bytes / 1e6:.0f} MB limit (max_file_bytes)",
                )
                continue
            try:
                data = path.read_bytes()
            except OSError as exc:
                self._failed(out, known, rel, f"cannot read ({exc.strerror or exc})")
                continue
            digest = hashlib.sha256(data).hexdigest()
            new_stamps[rel] = [stamp, digest, src]
            if known.get(rel) == digest:
                out.kept.add(rel)
                continue
            try:
                doc = convert(data, rel)
            except ConversionError as exc:
                new_stamps.pop(rel, None)
                self._failed(out, known, rel, str(exc))
                continue
            yield Document(id=rel, title=doc.title, text=doc.text, url=self.url_of(name, folders[src]), version=digest)

    def _failed(self, out: Listing, known: Mapping[str, str], rel: str, why: str) -> None:
        out.problem(self.name, rel, why)
        if rel in known:
            out.kept.add(rel)  # the last good text stays searchable


def _none_found(missing: Mapping[str, str]) -> str:
    """One line for configured paths that all give nothing: ``knowledge source not found: A, B
    (the hint)`` when that is what each says, else their reasons one after the other."""
    prefix = "knowledge source not found: "
    hints = {why.removeprefix(f"{prefix}{src} ") for src, why in missing.items()}
    if len(missing) > 1 and len(hints) == 1 and all(why.startswith(prefix) for why in missing.values()):
        return f"{prefix}{', '.join(map(display_name, missing))} {hints.pop()}"
    return "; ".join(missing.values())
