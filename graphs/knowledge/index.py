"""The index on disk: generations, the ``CURRENT`` pointer, the reindex lock, and reading.

Layout (``knowledge.index_dir``, separate from the checkpoint file)::

    index_dir/
      CURRENT                 name of the live generation (replaced atomically)
      reindex.lock            flock()ed by the one process building a generation; holds its pid
      gen-<timestamp>-<pid>-<n>/
        chunks.sqlite         chunk table (document, heading path, text, source, URL, access list,
                              text hash) + FTS5 keyword index (BM25 ranking)
        keyword.npz           the FTS5 index's postings, for ranking in memory (graphs/knowledge/bm25.py)
        vectors.npy           float32 unit vectors, row i = chunk rowid i+1 (optional)
        vectors.usearch(.json) the vectors' HNSW graph, for large indexes (graphs/knowledge/ann.py)
        manifest.json         sources, per-file sha256, chunking and embedding ids, counts

A generation is written under ``<name>.tmp``, synced, renamed, and only then named in
``CURRENT`` (written to ``CURRENT.tmp``, synced, ``os.replace``d): whoever reads
``CURRENT`` finds a complete generation with its manifest. Generations are written by
:class:`graphs.knowledge.writer.GenerationWriter` (batch by batch, in bounded memory).
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import shutil
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from graphs import terms
from graphs.knowledge import ann, bm25
from graphs.knowledge.common import Chunk, KnowledgeBaseError, ReindexBusyError, fsync_path
from graphs.knowledge.writer import FORMAT, FTS_TOKENIZER, GenerationWriter, access_of

__all__ = ["FORMAT", "FTS_TOKENIZER"]  # re-exported: the format and tokenizer are the writer's


_MAX_QUERY_TERMS = 64


log = logging.getLogger(__name__)

_BM25 = f"bm25(fts, {', '.join(str(w) for w in bm25.COLUMN_WEIGHTS)})"
"""FTS5's ranking function with the column weights of :data:`bm25.COLUMN_WEIGHTS`."""


def keyword_phrases(text: str) -> list[str]:
    """The phrases of free chat text in any script as a keyword query: the distinct content
    terms of :func:`graphs.terms.content_terms` (identifiers also by their ``_`` parts), at
    most 64, without double quotes."""
    out: dict[str, None] = {}
    for t in terms.content_terms(text):
        out.setdefault(t, None)
        if "_" in t:
            for part in t.split("_"):
                if len(part) > 1 and part not in terms.STOPWORDS:
                    out.setdefault(part, None)
    phrases = (t.replace('"', "") for t in list(out)[:_MAX_QUERY_TERMS])
    return [p for p in phrases if p]


def keyword_query(text: str) -> str:
    """Turn free chat text in any script into an FTS5 query: :func:`keyword_phrases` OR-ed
    and each quoted, so punctuation and FTS operators in user text cannot break the query."""
    return " OR ".join(f'"{p}"' for p in keyword_phrases(text))


_TOKENIZER: bm25.QueryTokenizer | None = None
_TOKENIZER_LOCK = threading.Lock()


def query_tokenizer() -> bm25.QueryTokenizer:
    """The process's :class:`bm25.QueryTokenizer` for :data:`FTS_TOKENIZER` (made once)."""
    global _TOKENIZER
    with _TOKENIZER_LOCK:
        if _TOKENIZER is None:
            _TOKENIZER = bm25.QueryTokenizer(FTS_TOKENIZER)
        return _TOKENIZER


class IndexSnapshot:
    """One immutable generation of the index, opened read-only.

    Raises:
        KnowledgeBaseError: the generation folder or its manifest is missing or unreadable.
    """

    def __init__(self, directory: Path):
        self.directory = directory
        try:
            self.manifest = json.loads((directory / "manifest.json").read_text())
            self._conn = sqlite3.connect(
                f"file:{directory / 'chunks.sqlite'}?mode=ro", uri=True, check_same_thread=False
            )
            vec_path = directory / "vectors.npy"
            # mapped, not read: a generation opens at once whatever its size, and the pages are
            # the page cache's, shared by every process serving the same generation
            self.vectors = np.load(vec_path, mmap_mode="r") if vec_path.exists() else None
            self.count = int(self.manifest.get("chunks", 0))
            self.max_rowid = int(self.manifest.get("max_rowid", self.count))
            self.postings = self._postings()
        except (OSError, ValueError, KeyError, sqlite3.Error) as exc:
            raise KnowledgeBaseError(f"index generation {directory.name} is unreadable: {exc}") from exc
        # the approximate index of large generations; None: the exact scan serves (small, or
        # written before the graph existed, or its graph is damaged)
        self.ann = ann.AnnIndex.open(directory) if self.vectors is not None else None
        self._live: np.ndarray | None = None
        self._lock = threading.Lock()

    def _postings(self) -> bm25.KeywordPostings:
        """The generation's keyword postings: its ``keyword.npz``, or read from its FTS5
        index (generations written before the file existed)."""
        path = self.directory / bm25.POSTINGS_FILE
        name = self.directory.name
        if path.exists():
            try:
                return bm25.KeywordPostings.load(path, name, self.count, self.max_rowid)
            except Exception as exc:  # noqa: BLE001 - a damaged file: the FTS5 index holds the same
                log.warning(
                    "index generation %s: %s is unreadable (%s: %s): reading the keyword index instead",
                    name,
                    bm25.POSTINGS_FILE,
                    type(exc).__name__,
                    str(exc)[:200],
                )
        return bm25.KeywordPostings.from_fts(self._conn, generation=name)

    def close(self) -> None:
        self._conn.close()
        if self.ann is not None:
            self.ann.close()

    def keyword(self, query: str, limit: int) -> list[int]:
        """Chunk rowids ranked by FTS5's bm25() (best first), any of the query's phrases
        matching; columns weighted text 1, title 2, file 2 (:mod:`graphs.knowledge.bm25`,
        which computes the same scores from postings in memory)."""
        phrases = keyword_phrases(query)
        if not phrases:
            return []
        return bm25.rank(self.postings, query_tokenizer(), phrases, limit, self._phrase_scores)

    def feedback_words(self, rowids: Sequence[int], exclude: set[str], limit: int) -> list[str]:
        """Words to add to a keyword query from the chunks ``rowids`` (a first search's best):
        pseudo-relevance feedback, after RM3 (Abdul-Jaleel et al., "UMass at TREC 2004").
        Each chunk votes for each of its distinct content words of three characters or more
        that are not numbers (:func:`graphs.terms.content_terms`) with 1 / its count of such
        words; a vote is worth the word's idf in this generation (:meth:`bm25.KeywordPostings.idf`),
        so the words the passages share and the rest of the corpus lacks come first. Words in
        ``exclude`` (the query's own phrases, :func:`keyword_phrases`) and words that are not
        one token of the index are left out.

        Args:
            rowids: chunk rowids, best first (ties between words go to the one seen first).
            exclude: phrases already in the query.
            limit: most words returned.

        Returns:
            Up to ``limit`` words, best first.
        """
        tokenizer = query_tokenizer()
        index, indptr = self.postings.index, self.postings.indptr
        texts = self.chunks(list(rowids))
        score: dict[str, float] = {}
        for r in rowids:
            if r not in texts:
                continue
            found = [w for w in terms.content_terms(texts[r][2]) if len(w) > 2 and not w.isdigit()]
            for w in found:
                if w in exclude:
                    continue
                tokens = tokenizer.tokens(w)
                if len(tokens) != 1 or tokens[0] not in index:
                    continue
                i = index[tokens[0]]
                idf = self.postings.idf(int(indptr[i + 1] - indptr[i]))
                score[w] = score.get(w, 0.0) + (1 / len(found)) * idf
        return sorted(score, key=lambda w: -score[w])[:limit]

    def keyword_fts(self, query: str, limit: int) -> list[int]:
        """:meth:`keyword` asked of FTS5 itself (``ORDER BY bm25()``): the reference the
        in-memory ranking is tested against; ~2 ms per query on 2,885 chunks."""
        q = keyword_query(query)
        if not q:
            return []
        with self._lock:
            rows = self._conn.execute(
                f"SELECT rowid FROM fts WHERE fts MATCH ? ORDER BY {_BM25} LIMIT ?",
                (q, limit),
            ).fetchall()
        return [r[0] for r in rows]

    def _phrase_scores(self, phrase: str) -> list[tuple[int, float]]:
        """``[(rowid, bm25)]`` of the rows holding the multi-token ``phrase`` (FTS5's own score
        of a one-phrase query is that phrase's term of the sum)."""
        with self._lock:
            return self._conn.execute(f"SELECT rowid, {_BM25} FROM fts WHERE fts MATCH ?", (f'"{phrase}"',)).fetchall()

    def dense(self, query_vector: np.ndarray, limit: int) -> list[int]:
        """Chunk rowids ranked by cosine similarity to ``query_vector`` (best first, equal
        similarities by rowid); rows of removed chunks (zero vectors) never appear.

        With the generation's graph (:mod:`graphs.knowledge.ann`) the candidates are its
        approximate nearest neighbours, ranked by their exact similarity; without it every
        vector is scanned."""
        if (
            self.vectors is None
            or not len(self.vectors)
            or self.vectors.shape[1] != query_vector.shape[-1]
            or limit <= 0
        ):
            return []
        q = np.asarray(query_vector, dtype=np.float32)
        if self.ann is not None:
            rows = self.ann.search(q, max(2 * limit, ann.CANDIDATES))
            rows = rows[(rows >= 1) & (rows <= len(self.vectors))]
            candidates = self.vectors[np.sort(rows) - 1]
            sims = candidates @ q
            live = np.any(candidates != 0, axis=1)
            rows, sims = np.sort(rows)[live], sims[live]
        else:
            sims = self.vectors @ q
            rows = np.flatnonzero(self._live_rows()) + 1
            sims = sims[rows - 1]
            if len(sims) > limit:  # the best ``limit`` found in linear time, then sorted
                best = np.sort(np.argpartition(-sims, limit - 1)[:limit])
                rows, sims = rows[best], sims[best]
        top = np.argsort(-sims, kind="stable")[:limit]  # rows ascend: ties stay in rowid order
        return [int(r) for r in rows[top]]

    def _live_rows(self) -> np.ndarray:
        """Which rows of :attr:`vectors` hold a chunk (non-zero), read once per generation."""
        if self._live is None:
            assert self.vectors is not None
            step = 65536
            self._live = np.concatenate(
                [np.any(self.vectors[lo : lo + step] != 0, axis=1) for lo in range(0, len(self.vectors), step)]
            )
        return self._live

    def dense_many(self, query_vectors: np.ndarray | Sequence[np.ndarray], limit: int) -> list[list[int]]:
        """:meth:`dense` of each query vector. One matrix-vector product each: one product
        of the matrix with all the query vectors at once (BLAS gemm with a few columns) is
        slower than separate matrix-vector products."""
        return [self.dense(np.asarray(v), limit) for v in np.atleast_2d(np.asarray(query_vectors))]

    def file_chunks(self, file: str, source: str | None = None) -> list[tuple[Chunk, np.ndarray | None]]:
        """Every chunk of document ``file`` (of ``source`` when given) in order, with its
        vector (None without a dense index)."""
        sql = f"SELECT rowid, title, text, file_hash, {self._extra}, {self._access} FROM chunks WHERE file = ?"
        args: list[str] = [file]
        if source is not None and self.has_sources:
            sql, args = sql + " AND source = ?", [file, source]
        with self._lock:
            rows = self._conn.execute(sql + " ORDER BY rowid", args).fetchall()
        return [
            (
                Chunk(file=file, title=title, text=text, file_hash=h, source=src, url=url, access=access_of(acc)),
                self.vectors[rowid - 1] if self.vectors is not None else None,
            )
            for rowid, title, text, h, src, url, acc in rows
        ]

    def file_chunk_ids(self, file: str, source: str | None = None) -> list[int]:
        """The rowids of :meth:`file_chunks`, in the same order (a chunk's Doc id is ``file#rowid``)."""
        sql, args = "SELECT rowid FROM chunks WHERE file = ?", [file]
        if source is not None and self.has_sources:
            sql, args = sql + " AND source = ?", [file, source]
        with self._lock:
            return [int(r) for (r,) in self._conn.execute(sql + " ORDER BY rowid", args).fetchall()]

    def chunks(self, rowids: Sequence[int]) -> dict[int, tuple[str, str, str, str, str]]:
        """``rowid -> (file, title, text, source, url)`` for the given rowids."""
        if not rowids:
            return {}
        marks = ",".join("?" * len(rowids))
        with self._lock:
            rows = self._conn.execute(
                f"SELECT rowid, file, title, text, {self._extra} FROM chunks WHERE rowid IN ({marks})", list(rowids)
            ).fetchall()
        return {r[0]: (r[1], r[2], r[3], r[4], r[5]) for r in rows}

    def all_chunks(self) -> list[tuple[int, Chunk]]:
        """Every ``(rowid, chunk)`` of the generation in rowid order."""
        return list(self.iter_chunks())

    def iter_chunks(self, source: str | None = None, batch: int = 2048) -> Iterator[tuple[int, Chunk]]:
        """``(rowid, chunk)`` of the generation (of ``source`` only, when given) in rowid
        order, read ``batch`` rows at a time on a connection of its own (a generation of any
        size is carried into the next one without holding it in memory)."""
        conn = sqlite3.connect(f"file:{self.directory / 'chunks.sqlite'}?mode=ro", uri=True)
        try:
            sql = f"SELECT rowid, file, title, text, file_hash, {self._extra}, {self._access} FROM chunks"
            args: list[str] = []
            if source is not None and self.has_sources:
                sql, args = sql + " WHERE source = ?", [source]
            cur = conn.execute(sql + " ORDER BY rowid", args)
            while rows := cur.fetchmany(batch):
                for r in rows:
                    yield r[0], Chunk(r[1], r[2], r[3], r[4], r[5], r[6], access_of(r[7]))
        finally:
            conn.close()

    @property
    def has_sources(self) -> bool:
        """The chunk table names each chunk's source and URL (generations of format 2)."""
        return int(self.manifest.get("format", 1)) >= 2

    @property
    def has_access(self) -> bool:
        """The chunk table holds each chunk's access list and text hash (format 3)."""
        return int(self.manifest.get("format", 1)) >= 3

    @property
    def _extra(self) -> str:
        return "source, url" if self.has_sources else "'', ''"

    @property
    def _access(self) -> str:
        return "access" if self.has_access else "NULL"


def write_generation(
    directory: Path,
    chunks: Sequence[Chunk],
    matrix: np.ndarray | None,
    manifest: dict,
    ann_min_rows: int = ann.MIN_ROWS,
) -> dict:
    """Write a complete generation of ``chunks`` (with ``matrix``, their vectors, or None)
    into ``directory`` (an empty folder) and sync it, with at least ``ann_min_rows`` vectors
    also their graph (:func:`ann.write`); one batch of a
    :class:`~graphs.knowledge.writer.GenerationWriter`. Returns the manifest written."""
    writer = GenerationWriter(directory, vectors=matrix is not None, ann_min_rows=ann_min_rows)
    try:
        writer.append(chunks, matrix)
        return writer.finish(manifest)
    finally:
        writer.close()


def write_delta(
    directory: Path,
    old: IndexSnapshot,
    remove: set[tuple[str, str]],
    chunks: Sequence[Chunk],
    matrix: np.ndarray | None,
    manifest: dict,
    ann_min_rows: int = ann.MIN_ROWS,
) -> dict:
    """Write a generation into ``directory`` (an empty folder) as ``old`` minus the chunks of
    the documents in ``remove`` plus ``chunks``, without re-reading the rest (an edit by a
    :class:`~graphs.knowledge.writer.GenerationWriter` with ``base=old``): its cost grows with
    the change and with one copy of the files, not with re-tokenizing every chunk.

    Args:
        remove: ``(source, document id)`` pairs whose chunks go.
        chunks: the new chunks, appended in order.
        matrix: their vectors (``len(chunks)`` rows) when ``old`` has vectors, else None.
        manifest: the new manifest; ``max_rowid``, ``chunks`` and ``source_chunks`` are set here.
        ann_min_rows: fewest vectors given a graph (:func:`ann.edit`: the old one edited).

    Returns:
        The manifest written.
    """
    writer = GenerationWriter(
        directory, vectors=old.vectors is not None and matrix is not None, base=old, ann_min_rows=ann_min_rows
    )
    try:
        writer.append(chunks, matrix)
        writer.remove(remove)
        return writer.finish(manifest)
    finally:
        writer.close()


def new_generation_name() -> str:
    """A generation folder name that sorts by creation time and is unique across processes."""
    return f"gen-{time.strftime('%Y%m%d-%H%M%S')}-{time.time_ns() % 1_000_000_000:09d}-{os.getpid()}"


def publish(index_dir: Path, tmp: Path, name: str) -> Path:
    """Rename the finished ``tmp`` generation to ``name`` and point ``CURRENT`` at it
    (atomic ``os.replace`` of a synced file). Returns the generation's folder."""
    final = index_dir / name
    tmp.rename(final)
    pointer = index_dir / "CURRENT.tmp"
    with open(pointer, "w") as f:
        f.write(name)
        f.flush()
        os.fsync(f.fileno())
    os.replace(pointer, index_dir / "CURRENT")
    fsync_path(index_dir)
    return final


def read_current(index_dir: Path) -> tuple[str | None, tuple[int, int] | None]:
    """``(generation name, (inode, mtime_ns) of CURRENT)``; ``(None, None)`` if none."""
    current = index_dir / "CURRENT"
    try:
        st = current.stat()
        name = current.read_text().strip()
    except FileNotFoundError:
        return None, None
    return (name or None), (st.st_ino, st.st_mtime_ns)


def current_stamp(index_dir: Path) -> tuple[int, int] | None:
    """``(inode, mtime_ns)`` of ``CURRENT`` (one stat call), None if it does not exist."""
    try:
        st = (index_dir / "CURRENT").stat()
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_mtime_ns


def prune(index_dir: Path, keep: set[str], keep_generations: int) -> None:
    """Delete generations beyond the newest ``keep_generations`` (never those in
    ``keep``) and leftover ``.tmp`` folders. Call only while holding the reindex lock."""
    gens = sorted(p for p in index_dir.glob("gen-*") if p.is_dir())
    names = [p.name for p in gens if not p.name.endswith(".tmp")]
    survivors = set(names[-keep_generations:]) | keep
    for p in gens:
        if p.name not in survivors:
            shutil.rmtree(p, ignore_errors=True)


class ReindexLock:
    """An exclusive, non-blocking ``flock`` on ``index_dir/reindex.lock``, across processes
    (and across threads of one process: each acquisition opens its own file description).

    The kernel releases it when its holder exits, so a crashed reindex never leaves the
    index locked. The holder writes its pid into the file for the refusal message.

    Raises:
        ReindexBusyError: on enter, when another holder has it.
    """

    def __init__(self, index_dir: Path):
        self.path = index_dir / "reindex.lock"
        self._fd: int | None = None

    def __enter__(self) -> ReindexLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise ReindexBusyError(self.holder()) from None
            raise KnowledgeBaseError(f"cannot lock {self.path}: {exc}") from exc
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._fd = fd
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def holder(self) -> int:
        """The pid written by the current holder (0 if unreadable)."""
        try:
            return int(self.path.read_text().strip() or 0)
        except (OSError, ValueError):
            return 0


def open_generation(index_dir: Path, name: str) -> IndexSnapshot:
    """Open generation ``name`` of ``index_dir``.

    Raises:
        KnowledgeBaseError: it is missing or incomplete.
    """
    gen = index_dir / name
    if not (gen / "manifest.json").exists():
        raise KnowledgeBaseError(f"index generation {name} named in {index_dir / 'CURRENT'} is missing or incomplete")
    return IndexSnapshot(gen)
