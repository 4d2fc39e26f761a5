"""Types shared by the knowledge-base modules."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

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


@dataclass(frozen=True)
class Chunk:
    """One indexed piece of a source file.

    Attributes:
        file: path relative to its source folder (what users and the eval see).
        title: heading path, e.g. ``"Deploy > Standalone container"`` ('' if none); the
            front matter ``title:`` is its first element.
        text: chunk text (at most ``chunk_size`` characters unless one line of code or a
            table row is longer), code and tables byte for byte.
        file_hash: sha256 of the whole file's bytes.
    """

    file: str
    title: str
    text: str
    file_hash: str


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

    def summary(self) -> str:
        """``"161 files into 2885 chunks (2885 embedded, 0 reused) in 140.2 s"``: what the CLI
        and the admin command report (seconds with one decimal, never in exponent form)."""
        return (
            f"{self.files} files into {self.chunks} chunks ({self.embedded_chunks} embedded, "
            f"{self.reused_chunks} reused) in {self.seconds:.1f} s"
        )
