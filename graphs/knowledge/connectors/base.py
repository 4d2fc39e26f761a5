"""What every knowledge source yields: :class:`Document`, and the :class:`Connector` contract.

A connector lists its documents and reads only those whose version changed since the last
sync (:meth:`Connector.scan`): the caller hands it the versions it indexed before, and the
connector answers with the new or changed documents, the ids it keeps as they were, and
its own cursor for next time (a commit, HTTP validators). An id it neither returns nor
keeps has left the source and leaves the index.

The new or changed documents come as a stream (:attr:`Listing.changed` may be a one-pass
iterator that reads each document as it is asked for), so a first sync of 100,000 documents
never holds every document's text at once; what the scan learns on the way (kept ids,
problems, its cursor) is complete once the stream has been consumed.

Bad input in one document (a corrupt PDF, a page answering 500, a 200 MB file) costs that
document only: one log line and one entry in :attr:`Listing.problems`; a document that was
indexed before and cannot be read now is kept as it was (its id goes to ``kept``). A
failure of the whole source (a repository that needs credentials, an unreachable start
page) raises :class:`SourceError`; the sync then keeps the source's last good documents.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from graphs.knowledge.common import KnowledgeBaseError

log = logging.getLogger(__name__)


class SourceError(KnowledgeBaseError):
    """The whole source cannot be read now (the message names the source and the cause)."""


@dataclass(frozen=True)
class Document:
    """One document of a source, converted to Markdown.

    Attributes:
        id: stable within its source: the path relative to the source folder or inside
            the repository, or the canonical URL of a web page. Chunks carry it as their
            ``file``; it is what a search restricted to a file matches.
        title: the document's title ('' when it has none: the heading path is used).
        text: Markdown (headings, tables and code kept).
        url: the address an answer cites (a web page, a file on a Git host, a docs site);
            '' when there is none (the id is shown instead).
        version: changes whenever the content may have changed: a blob id, an ETag, a
            Last-Modified date, the sha256 of the bytes.
        access: who may see the document; ``None`` means everyone who can ask the bot. Left
            for the connectors that know their permissions.
    """

    id: str
    title: str
    text: str
    url: str = ""
    version: str = ""
    access: tuple[str, ...] | None = None


SKIPPED_EXAMPLES = 3
"""Skipped documents named in a sync report: enough to see what kind was left out, one line."""


@dataclass
class Listing:
    """What one scan of a source found.

    Attributes:
        changed: new documents and documents whose version changed: a list, or a one-pass
            iterator reading them as they are asked for; the attributes below are complete
            only once it has been consumed (an error of the whole source may be raised from it).
        kept: ids indexed before that stay as they were (unchanged, or unreadable this time).
        state: the connector's cursor, handed back to the next scan (JSON-serialisable).
        problems: one line per document that could not be read (also logged).
        skipped: documents that were not indexed on purpose (not text, excluded by robots.txt).
        skipped_examples: the first few of them, ``"what (why)"`` (:meth:`skip`).
    """

    changed: Iterable[Document] = field(default_factory=list)
    kept: set[str] = field(default_factory=set)
    state: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    skipped: int = 0
    skipped_examples: list[str] = field(default_factory=list)

    def skip(self, source: str, what: str, why: str) -> None:
        """Count a document of ``source`` left out on purpose, and name it: a debug log line
        (``-v``; a folder may hold thousands of images), the first few in the sync report."""
        log.debug("source %s: %s skipped: %s", source, what, why)
        self.skipped += 1
        if len(self.skipped_examples) < SKIPPED_EXAMPLES:
            self.skipped_examples.append(f"{what} ({why})")

    def problem(self, source: str, what: str, why: str) -> None:
        """Record (and log, one line) a document of ``source`` that could not be read."""
        line = f"{what}: {why}"
        log.warning("source %s: %s", source, line)
        self.problems.append(line)


ScanProgress = Callable[[int, int], None]
"""``progress(done, total)`` while a connector scans (total 0 when not known yet)."""


class Connector(Protocol):
    """A knowledge source: a folder of files, a website, a Git repository.

    Attributes:
        name: the ``[[sources]]`` entry's name.
        kind: ``"files"``, ``"web"`` or ``"git"``.
        readers: the formats it reads and the version of their conversion
            (:data:`graphs.knowledge.convert.FILE_READERS`); when it differs from the one the
            index recorded at the last sync, every document is read again.
    """

    name: str
    kind: str
    readers: str

    def scan(self, known: Mapping[str, str], state: Mapping[str, Any], progress: ScanProgress | None = None) -> Listing:
        """List the source and read what changed.

        Args:
            known: ``{document id: version}`` as indexed by the last good sync (empty at first).
            state: the ``Listing.state`` of the last good sync (empty at first).
            progress: called as documents are looked at.

        Raises:
            SourceError: the source as a whole cannot be read.
        """
        ...

    def describe(self) -> str:
        """One line saying where the documents come from (shown by ``threadwise sources``)."""
        ...
