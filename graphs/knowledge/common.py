"""Types shared by the knowledge-base modules."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ProgressFn = Callable[[str, int, int], None]  # (phase, done, total)


class KnowledgeBaseError(RuntimeError):
    """The index is missing or unreadable, a source folder does not exist, or an index
    build failed (the message says which)."""


class EmbeddingRefusedError(KnowledgeBaseError):
    """The embeddings API refused a request that cannot be made smaller (one chunk)."""


class ReindexBusyError(KnowledgeBaseError):
    """Another process (or thread) holds the reindex lock of this index folder.

    Attributes:
        pid: the process id written by the holder (0 if unknown).
    """

    def __init__(self, pid: int):
        self.pid = pid
        super().__init__(f"another reindex is running (pid {pid or 'unknown'}); try again when it has finished")


class NothingIndexedError(KnowledgeBaseError):
    """A sync read its sources and has nothing to serve: every source synced failed and the
    index holds none of their documents from before (a first sync), or the sources hold no
    text. The command failed (exit code 1), as when one source of several fails; it is no
    configuration error.

    Attributes:
        reports: each source's report (``FAILED: <why>`` for the failed ones), as a sync
            that published a generation gives them.
    """

    def __init__(self, message: str, reports: list[SourceReport]):
        super().__init__(message)
        self.reports = reports


@dataclass(frozen=True)
class Chunk:
    """One indexed piece of a source file.

    Attributes:
        file: path relative to its source folder (what users and the eval see).
        title: heading path, e.g. ``"Deploy > Standalone container"`` ('' if none); the
            front matter ``title:`` is its first element.
        text: chunk text (at most ``chunk_size`` characters unless one line of code or a
            table row is longer), code and tables byte for byte.
        file_hash: the document's version (sha256 of a file's bytes, a blob id, a page's hash).
        source: the name of the source the document came from.
        url: the address an answer cites ('' when there is none: ``file`` is shown).
        access: its document's access list (``Document.access``; None: everyone).
    """

    file: str
    title: str
    text: str
    file_hash: str
    source: str = ""
    url: str = ""
    access: tuple[str, ...] | None = None


@dataclass
class SourceReport:
    """What one sync did to one source.

    Attributes:
        name, kind: the source.
        ok: False when the source as a whole failed (``error`` says why; its last good
            documents stayed in the index).
        added, updated, removed, unchanged: documents.
        renamed: documents found under another name with the same content (moved; not
            counted as added and removed).
        problems: one line per document that could not be read (kept as it was if it had
            been indexed before).
        skipped: documents left out on purpose (not a supported format, robots.txt).
        skipped_examples: the first few of them, ``"what (why)"``.
        documents, chunks: what the index holds for the source afterwards.
        seconds: the source's share of the sync.
        synced: False when the source was not asked to sync (its documents were carried over).
    """

    name: str
    kind: str
    ok: bool = True
    error: str = ""
    added: int = 0
    updated: int = 0
    removed: int = 0
    renamed: int = 0
    unchanged: int = 0
    problems: list[str] = field(default_factory=list)
    skipped: int = 0
    skipped_examples: list[str] = field(default_factory=list)
    documents: int = 0
    chunks: int = 0
    seconds: float = 0.0
    synced: bool = True

    def summary(self) -> str:
        """One line: ``"handbook: 3 added, 1 updated, 0 removed, 40 unchanged; 2 problems (41 documents,
        380 chunks, 0.4 s)"`` or ``"handbook: FAILED: <why> (kept 41 documents, 380 chunks)"``."""
        kept = f"{_count(self.documents, 'document')}, {_count(self.chunks, 'chunk')}"
        if not self.ok:
            return f"{self.name}: FAILED: {self.error} (kept {kept})"
        extra = f"; {_count(len(self.problems), 'problem')}" if self.problems else ""
        if self.skipped:
            more = ", …" if self.skipped > len(self.skipped_examples) else ""
            named = f": {', '.join(self.skipped_examples)}{more}" if self.skipped_examples else ""
            extra += f"; {self.skipped} skipped{named}"
        moved = f", {self.renamed} renamed" if self.renamed else ""
        return (
            f"{self.name}: {self.added} added, {self.updated} updated, {self.removed} removed{moved}, "
            f"{self.unchanged} unchanged{extra} ({kept}, {self.seconds:.1f} s)"
        )


def _count(n: int, noun: str) -> str:
    """``"1 document"``, ``"2 documents"``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


@dataclass
class IndexStats:
    """Result of a reindex: counts and wall time (seconds)."""

    files: int = 0
    chunks: int = 0
    embedded_chunks: int = 0
    reused_chunks: int = 0
    seconds: float = 0.0
    generation: str = ""
    changed_files: list[str] = field(default_factory=list)
    sources: list[SourceReport] = field(default_factory=list)

    @property
    def failed(self) -> list[SourceReport]:
        """The sources that failed as a whole in this sync."""
        return [r for r in self.sources if not r.ok]

    @property
    def documents(self) -> int:
        """Documents in the index, summed over the sources (a page two sources list counts
        twice: each source holds it); ``files`` when there are no source reports."""
        return sum(r.documents for r in self.sources) if self.sources else self.files

    def summary(self) -> str:
        """``"161 documents into 2885 chunks (2885 embedded, 0 reused) in 140.2 s"``: what the
        CLI and the admin command report (seconds with one decimal, never in exponent form)."""
        return (
            f"{_count(self.documents, 'document')} into {_count(self.chunks, 'chunk')} ({self.embedded_chunks} "
            f"embedded, {self.reused_chunks} reused) in {self.seconds:.1f} s"
        )


def fsync_path(path: Path) -> None:
    """Flush a file or a folder (its entries) to disk: ``os.fsync`` of a read-only descriptor.

    Raises:
        OSError: the path cannot be opened or synced.
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def display_name(name: str) -> str:
    """``name`` as it may be shown and stored: bytes that are not UTF-8 (a Latin-1 name from a
    zip or a Windows share, which Python holds as lone surrogates) as ``\\xff``, and control
    characters (a newline in a name) as ``\\n``/``\\x1b``, so one odd name can neither break the
    index's UTF-8 text nor split a line of a citation list."""
    if any(0xD800 <= ord(c) <= 0xDFFF for c in name):
        try:
            name = name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        except UnicodeEncodeError:  # a surrogate no decoder of bytes makes: its code point
            name = name.encode("utf-8", "backslashreplace").decode("utf-8")
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), name)


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def valid_text(text: str) -> str:
    """``text`` as UTF-8 can store it: lone surrogates (bytes a decoder let through) become
    U+FFFD, so one bad document cannot stop the index from being written."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
