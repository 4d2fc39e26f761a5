"""The knowledge base: load sources, split into chunks, index, retrieve, atomic reindex.

Layout on disk (``knowledge.index_dir``, separate from the checkpoint file)::

    index_dir/
      CURRENT                 name of the live generation (replaced atomically)
      gen-<timestamp>/
        chunks.sqlite         chunk table + FTS5 keyword index (BM25 ranking)
        vectors.npy           float32 unit vectors, row i = chunk rowid i+1 (optional)
        manifest.json         sources, per-file sha256, chunking and embedding ids, counts

Retrieval is hybrid: SQLite FTS5's ``bm25()`` keyword ranking and cosine similarity of
dense embeddings, each over several query variants, fused with Reciprocal Rank Fusion
(Cormack, Clarke & Buettcher, SIGIR 2009: score = sum 1/(rrf_k + rank)). A reindex builds
a new generation beside the live one and swaps ``CURRENT`` with ``os.replace``; readers
keep using the old snapshot until the swap, so questions are answered meanwhile. Files
whose content, chunking and embedding model are unchanged reuse their old vectors.
"""

from __future__ import annotations

import glob
import hashlib
import json
import logging
import os
import re
import shutil
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np
from langchain_core.embeddings import Embeddings
from langchain_text_splitters import MarkdownHeaderTextSplitter, RecursiveCharacterTextSplitter

from graphs.state import Doc

log = logging.getLogger(__name__)

ProgressFn = Callable[[str, int, int], None]  # (phase, done, total)

_HEADERS = [("#", "h1"), ("##", "h2"), ("###", "h3"), ("####", "h4")]
_STOPWORDS = frozenset(
    """a an and are as at be but by can could do does did for from has have how i if in into is it
    its me my no not of on or our so that the their them then there these they this to was we
    what when where which while who why will with would you your just any some get got im ive dont
    doesnt cant wont should shall about also one all like use using used want need tbh pls please""".split()
)


@dataclass(frozen=True)
class Chunk:
    """One indexed piece of a source file.

    Attributes:
        file: path relative to its source folder (what users and the eval see).
        title: heading path, e.g. ``"Deploy > Standalone container"`` ('' if none).
        text: chunk text (at most ``chunk_size`` characters plus the heading line).
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


class KnowledgeBaseError(RuntimeError):
    """The index is missing or unreadable, or a source folder does not exist."""


def discover_files(sources: Sequence[str | Path], patterns: Sequence[str]) -> list[tuple[Path, str]]:
    """List the files to index.

    Args:
        sources: folders (every file matching ``patterns`` below them) or glob patterns
            or single files.
        patterns: glob patterns relative to a source folder, e.g. ``"**/*.md"``.

    Returns:
        ``(absolute path, display path)`` pairs, sorted; the display path is relative to
        its source folder.

    Raises:
        KnowledgeBaseError: a source matches nothing that exists.
    """
    found: dict[Path, str] = {}
    for src in sources:
        p = Path(src).expanduser()
        if p.is_dir():
            for pat in patterns:
                for f in p.glob(pat):
                    if f.is_file():
                        found.setdefault(f.resolve(), f.relative_to(p).as_posix())
        elif p.is_file():
            found.setdefault(p.resolve(), p.name)
        else:
            matches = [Path(m) for m in glob.glob(str(p), recursive=True)]
            if not matches:
                raise KnowledgeBaseError(f"knowledge source not found: {src} "
                                         "(paths in config.toml are relative to the config file's folder)")
            for f in matches:
                if f.is_file():
                    found.setdefault(f.resolve(), f.name)
    return sorted(found.items(), key=lambda kv: kv[1])


def split_markdown(text: str, file: str, file_hash: str, chunk_size: int, overlap: int) -> list[Chunk]:
    """Split one Markdown/text file into heading-aware chunks.

    Uses langchain-text-splitters: MarkdownHeaderTextSplitter (keeps the heading path,
    ignores ``#`` inside code fences) then RecursiveCharacterTextSplitter for long
    sections. ``chunk_size`` and ``overlap`` are in characters.
    """
    header_splitter = MarkdownHeaderTextSplitter(_HEADERS, strip_headers=True)
    sections = header_splitter.split_text(text) if text.strip() else []
    char_splitter = RecursiveCharacterTextSplitter.from_language(
        "markdown", chunk_size=chunk_size, chunk_overlap=min(overlap, chunk_size // 2)
    )
    chunks: list[Chunk] = []
    for sec in sections:
        title = " > ".join(sec.metadata[h] for _, h in _HEADERS if h in sec.metadata)
        for piece in char_splitter.split_text(sec.page_content):
            if piece.strip():
                chunks.append(Chunk(file=file, title=title, text=piece.strip(), file_hash=file_hash))
    return chunks


def _index_text(c: Chunk) -> str:
    """Text that is embedded: file path words, heading path, then the chunk."""
    path_words = re.sub(r"[/_.\-]+", " ", c.file.rsplit(".", 1)[0])
    return f"{path_words}\n{c.title}\n{c.text}"


def keyword_query(text: str) -> str:
    """Turn free chat text into an FTS5 query: distinct non-stopword terms OR-ed, each
    quoted (so punctuation and FTS operators in user text cannot break the query)."""
    terms: list[str] = []
    for raw in re.findall(r"[A-Za-z0-9_]+", text.lower()):
        for t in {raw, *raw.split("_")}:
            if len(t) > 1 and t not in _STOPWORDS and t not in terms:
                terms.append(t)
    return " OR ".join(f'"{t}"' for t in terms[:64])


def rrf_fuse(rankings: Iterable[Sequence[int]], rrf_k: int, weights: Sequence[float] | None = None) -> dict[int, float]:
    """Weighted Reciprocal Rank Fusion (Cormack et al., SIGIR 2009):
    ``sum(weight / (rrf_k + rank))`` over the rankings (ids best first, rank from 1)."""
    scores: dict[int, float] = {}
    for i, ranking in enumerate(rankings):
        w = weights[i] if weights else 1.0
        for rank, cid in enumerate(ranking, start=1):
            scores[cid] = scores.get(cid, 0.0) + w / (rrf_k + rank)
    return scores


class IndexSnapshot:
    """One immutable generation of the index, opened read-only."""

    def __init__(self, directory: Path):
        self.directory = directory
        self.manifest = json.loads((directory / "manifest.json").read_text())
        self._conn = sqlite3.connect(f"file:{directory / 'chunks.sqlite'}?mode=ro", uri=True, check_same_thread=False)
        self._lock = threading.Lock()
        vec_path = directory / "vectors.npy"
        self.vectors = np.load(vec_path) if vec_path.exists() else None
        self.count = int(self.manifest.get("chunks", 0))

    def close(self) -> None:
        self._conn.close()

    def keyword(self, query: str, limit: int) -> list[int]:
        """Chunk rowids ranked by FTS5 bm25() (best first). Columns weighted text 1,
        title 2, file 2."""
        q = keyword_query(query)
        if not q:
            return []
        with self._lock:
            rows = self._conn.execute(
                "SELECT rowid FROM fts WHERE fts MATCH ? ORDER BY bm25(fts, 1.0, 2.0, 2.0) LIMIT ?",
                (q, limit),
            ).fetchall()
        return [r[0] for r in rows]

    def dense(self, query_vector: np.ndarray, limit: int) -> list[int]:
        """Chunk rowids ranked by cosine similarity to ``query_vector`` (best first)."""
        if self.vectors is None or not len(self.vectors):
            return []
        sims = self.vectors @ query_vector.astype(np.float32)
        top = np.argsort(-sims)[:limit]
        return [int(i) + 1 for i in top]

    def file_chunks(self, file: str) -> list[tuple[Chunk, np.ndarray | None]]:
        """Every chunk of ``file`` in order, with its vector (None without a dense index)."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT rowid, title, text, file_hash FROM chunks WHERE file = ? ORDER BY rowid", (file,)).fetchall()
        return [(Chunk(file=file, title=title, text=text, file_hash=h),
                 self.vectors[rowid - 1] if self.vectors is not None else None) for rowid, title, text, h in rows]

    def chunks(self, rowids: Sequence[int]) -> dict[int, tuple[str, str, str]]:
        """``rowid -> (file, title, text)`` for the given rowids."""
        if not rowids:
            return {}
        marks = ",".join("?" * len(rowids))
        with self._lock:
            rows = self._conn.execute(
                f"SELECT rowid, file, title, text FROM chunks WHERE rowid IN ({marks})", list(rowids)
            ).fetchall()
        return {r[0]: (r[1], r[2], r[3]) for r in rows}


def _normalise(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return vectors / norms


class KnowledgeBase:
    """Hybrid (BM25 + dense) retriever over the configured sources, with atomic reindex.

    Args:
        index_dir: folder holding the index generations (created if missing).
        sources: folders, files or globs of Markdown/text (see :func:`discover_files`).
        patterns: file globs inside source folders.
        embeddings: a LangChain ``Embeddings`` or ``None`` for keyword-only search.
        embedder_id: names the embedding model; vectors are reused only for the same id.
        chunk_size, chunk_overlap: characters.
        candidates: ranked list length per query and retriever before fusion.
        rrf_k: the RRF constant (60 in the paper).
        max_chunks_per_file: at most this many chunks of one file in a result.
        keep_generations: old generations kept on disk after a swap.
        batch_size: chunks per embedding call.
    """

    def __init__(
        self,
        index_dir: str | Path,
        sources: Sequence[str | Path],
        patterns: Sequence[str] = ("**/*.md", "**/*.txt"),
        embeddings: Embeddings | None = None,
        embedder_id: str = "none",
        chunk_size: int = 1000,
        chunk_overlap: int = 100,
        candidates: int = 40,
        rrf_k: int = 60,
        max_chunks_per_file: int = 2,
        keep_generations: int = 2,
        batch_size: int = 64,
    ):
        self.index_dir = Path(index_dir)
        self.sources = [str(s) for s in sources]
        self.patterns = list(patterns)
        self.embeddings = embeddings
        self.embedder_id = embedder_id if embeddings is not None else "none"
        self.chunk_size = chunk_size
        self.chunk_overlap = chunk_overlap
        self.candidates = candidates
        self.rrf_k = rrf_k
        self.max_chunks_per_file = max_chunks_per_file
        self.keep_generations = keep_generations
        self.batch_size = batch_size
        self._snapshot: IndexSnapshot | None = None
        self._build_lock = threading.Lock()

    # ---- reading -------------------------------------------------------------------
    @property
    def snapshot(self) -> IndexSnapshot | None:
        """The live generation, loaded on first use (``None`` if never indexed)."""
        if self._snapshot is None:
            current = self.index_dir / "CURRENT"
            if current.exists():
                gen = self.index_dir / current.read_text().strip()
                if (gen / "manifest.json").exists():
                    self._snapshot = IndexSnapshot(gen)
        return self._snapshot

    def is_built(self) -> bool:
        return self.snapshot is not None

    def needs_rebuild(self) -> bool:
        """True if there is no index or it was built from other sources or settings."""
        snap = self.snapshot
        if snap is None:
            return True
        sources = [str(Path(s).expanduser().resolve()) for s in self.sources]
        return snap.manifest.get("sources") != sources or self._settings_changed(snap)

    def search(self, queries: Sequence[str | tuple[str, float]], k: int) -> list[Doc]:
        """Hybrid search.

        Args:
            queries: query variants (e.g. the standalone question, the rewritten query,
                the raw message), plain or as ``(query, weight)``; each is ranked by BM25
                and by the dense index, and all rankings are fused with weighted RRF.
            k: number of chunks to return.

        Returns:
            Up to ``k`` :class:`Doc` dicts, best first, at most ``max_chunks_per_file``
            per file.

        Raises:
            KnowledgeBaseError: no index has been built.
        """
        snap = self.snapshot
        if snap is None:
            raise KnowledgeBaseError("the knowledge base has no index yet: run `threadwise reindex`")
        weighted: dict[str, float] = {}
        for q in queries:
            text, weight = (q, 1.0) if isinstance(q, str) else (q[0], float(q[1]))
            if text.strip():
                weighted[text.strip()] = max(weight, weighted.get(text.strip(), 0.0))
        texts = list(weighted)
        rankings: list[list[int]] = [snap.keyword(q, self.candidates) for q in texts]
        weights = [weighted[q] for q in texts]
        if self.embeddings is not None and snap.vectors is not None and texts:
            qv = _normalise(np.asarray(self.embeddings.embed_documents(texts)))
            rankings += [snap.dense(v, self.candidates) for v in qv]
            weights += weights
        scores = rrf_fuse(rankings, self.rrf_k, weights)
        ordered = sorted(scores, key=lambda cid: -scores[cid])
        rows = snap.chunks(ordered[: max(k * 6, 30)])
        per_file: dict[str, int] = {}
        docs: list[Doc] = []
        for cid in ordered:
            if cid not in rows:
                continue
            file, title, text = rows[cid]
            if per_file.get(file, 0) >= self.max_chunks_per_file:
                continue
            per_file[file] = per_file.get(file, 0) + 1
            docs.append(Doc(id=f"{file}#{cid}", text=text, location=file, title=title, score=round(scores[cid], 5)))
            if len(docs) >= k:
                break
        return docs

    def stats(self) -> dict:
        """Counts of the live index: files, chunks, generation, built_at, embedder."""
        snap = self.snapshot
        if snap is None:
            return {"files": 0, "chunks": 0, "generation": None}
        m = snap.manifest
        return {
            "files": len(m.get("files", {})),
            "chunks": m.get("chunks", 0),
            "generation": snap.directory.name,
            "built_at": m.get("built_at"),
            "embedder": m.get("embedder"),
        }

    # ---- writing -------------------------------------------------------------------
    def reindex(self, progress: ProgressFn | None = None) -> IndexStats:
        """Build a new generation beside the live one and swap it in atomically.

        Unchanged files (same sha256, chunking and embedder) reuse their chunks and
        vectors from the live generation; the others are split and embedded.

        Args:
            progress: called as ``progress(phase, done, total)``; phases are
                ``"scan"``, ``"split"``, ``"embed"``, ``"write"``.

        Returns:
            :class:`IndexStats` of the new generation.

        Raises:
            KnowledgeBaseError: a source does not exist or the sources hold no text.
        """
        with self._build_lock:
            return self._reindex(progress or (lambda *_: None))

    def _reindex(self, progress: ProgressFn) -> IndexStats:
        t0 = time.perf_counter()
        self.index_dir.mkdir(parents=True, exist_ok=True)
        files = discover_files(self.sources, self.patterns)
        progress("scan", len(files), len(files))
        old = self.snapshot
        reusable = old is not None and not self._settings_changed(old)
        old_files: dict[str, str] = old.manifest.get("files", {}) if (old and reusable) else {}

        chunks: list[Chunk] = []
        vectors: list[np.ndarray | None] = []
        file_hashes: dict[str, str] = {}
        changed: list[str] = []
        for i, (abs_path, display) in enumerate(files, start=1):
            data = abs_path.read_bytes()
            digest = hashlib.sha256(data).hexdigest()
            file_hashes[display] = digest
            if old_files.get(display) == digest:
                kept = old.file_chunks(display)
                chunks += [c for c, _ in kept]
                vectors += [v for _, v in kept]
            else:
                changed.append(display)
                new = split_markdown(data.decode("utf-8", errors="replace"), display, digest, self.chunk_size, self.chunk_overlap)
                chunks += new
                vectors += [None] * len(new)
            progress("split", i, len(files))
        if not chunks:
            raise KnowledgeBaseError(f"no text found in the knowledge sources: {', '.join(self.sources)}")

        todo = [i for i, v in enumerate(vectors) if v is None]
        matrix: np.ndarray | None = None
        if self.embeddings is not None:
            for start in range(0, len(todo), self.batch_size):
                batch = todo[start : start + self.batch_size]
                embedded = _normalise(np.asarray(self.embeddings.embed_documents([_index_text(chunks[i]) for i in batch])))
                for i, v in zip(batch, embedded):
                    vectors[i] = v
                progress("embed", min(start + self.batch_size, len(todo)), len(todo))
            matrix = np.vstack(vectors).astype(np.float32)

        gen = f"gen-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{int(time.time_ns() % 1_000_000)}"
        tmp = self.index_dir / (gen + ".tmp")
        tmp.mkdir()
        self._write_generation(tmp, chunks, matrix, file_hashes)
        progress("write", 1, 1)
        final = self.index_dir / gen
        tmp.rename(final)
        pointer = self.index_dir / "CURRENT.tmp"
        pointer.write_text(gen)
        os.replace(pointer, self.index_dir / "CURRENT")  # the atomic swap
        self._snapshot = IndexSnapshot(final)
        self._prune(keep={gen, old.directory.name if old else gen})
        stats = IndexStats(
            files=len(files),
            chunks=len(chunks),
            embedded_chunks=len(todo) if self.embeddings is not None else 0,
            reused_chunks=len(chunks) - len(todo),
            seconds=round(time.perf_counter() - t0, 2),
            generation=gen,
            changed_files=changed,
        )
        log.info("reindex done: %d files, %d chunks (%d embedded, %d reused) in %.1fs -> %s",
                 stats.files, stats.chunks, stats.embedded_chunks, stats.reused_chunks, stats.seconds, gen)
        return stats

    def _settings_changed(self, snap: IndexSnapshot) -> bool:
        """The chunking or the embedding model differ from the snapshot's: nothing is reusable."""
        m = snap.manifest
        return m.get("embedder") != self.embedder_id or m.get("chunking") != [self.chunk_size, self.chunk_overlap]

    def _write_generation(self, directory: Path, chunks: list[Chunk], matrix: np.ndarray | None, hashes: dict[str, str]) -> None:
        conn = sqlite3.connect(directory / "chunks.sqlite")
        try:
            conn.execute("CREATE TABLE chunks (rowid INTEGER PRIMARY KEY, file TEXT, title TEXT, text TEXT, file_hash TEXT)")
            conn.execute("CREATE VIRTUAL TABLE fts USING fts5(text, title, file, tokenize='porter unicode61')")
            conn.executemany(
                "INSERT INTO chunks (rowid, file, title, text, file_hash) VALUES (?, ?, ?, ?, ?)",
                [(i, c.file, c.title, c.text, c.file_hash) for i, c in enumerate(chunks, start=1)],
            )
            conn.executemany(
                "INSERT INTO fts (rowid, text, title, file) VALUES (?, ?, ?, ?)",
                [(i, c.text, c.title, re.sub(r"[/_.\-]+", " ", c.file)) for i, c in enumerate(chunks, start=1)],
            )
            conn.commit()
        finally:
            conn.close()
        if matrix is not None:
            np.save(directory / "vectors.npy", matrix)
        manifest = {
            "sources": [str(Path(s).expanduser().resolve()) for s in self.sources],
            "files": hashes,
            "chunks": len(chunks),
            "chunking": [self.chunk_size, self.chunk_overlap],
            "embedder": self.embedder_id,
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        (directory / "manifest.json").write_text(json.dumps(manifest, indent=1))

    def _prune(self, keep: set[str]) -> None:
        gens = sorted(p for p in self.index_dir.glob("gen-*") if p.is_dir())
        names = [p.name for p in gens if not p.name.endswith(".tmp")]
        survivors = set(names[-self.keep_generations :]) | keep
        for p in gens:
            if p.name not in survivors:
                shutil.rmtree(p, ignore_errors=True)
