"""Writing one index generation in bounded memory: :class:`GenerationWriter`.

A generation (see :mod:`graphs.knowledge.index` for the layout) is written by one writer that
keeps its SQLite connection open and takes the chunks in batches: each batch's chunk rows and
FTS5 rows are inserted and its vectors appended to ``vectors.npy`` (whose header is written
again with the final row count at the end), so memory holds one batch whatever the corpus
size. At :meth:`GenerationWriter.finish` the keyword postings (``keyword.npz``) are made
without holding the index's occurrences in memory:

- a full build streams FTS5's ``fts5vocab`` *instance* view, which yields the occurrences in
  term order and, within a term, in rowid order, so the CSR arrays are written term after
  term to temporary files (a buffer of a few million occurrences at a time);
- an edit of the live generation (``base``) merges the live postings, minus the removed rows,
  with those of the new rows (read from an FTS5 table of the new rows alone), range of terms
  by range of terms.

An edit copies ``chunks.sqlite`` and the vectors of the live generation once, whatever the
number of batches; removed rows leave the chunk table and the FTS5 index (its ``delete``
command) and their vectors become zeros, so row numbers never move.
"""

from __future__ import annotations

import errno
import hashlib
import itertools
import json
import logging
import os
import shutil
import sqlite3
import struct
import threading
import zipfile
from array import array
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import BinaryIO, cast

import numpy as np

from graphs import terms
from graphs.knowledge import ann, bm25
from graphs.knowledge.common import Chunk, KnowledgeBaseError, fsync_path

log = logging.getLogger(__name__)

FORMAT = 3
"""The generation format written: 3 = chunks also carry their document's ``access`` and a
hash of their text (``text_hash``, see :func:`text_key`); 2 = chunks carry their source and
URL; 1 = neither. Older formats are read (see :class:`graphs.knowledge.index.IndexSnapshot`)."""

FTS_TOKENIZER = "porter unicode61 remove_diacritics 2"
"""SQLite FTS5 tokenizer of the keyword index. The text it sees is already
:func:`graphs.terms.index_text` (case-folded, spaceless scripts as character bigrams)."""

VECTOR_HEADER_BYTES = 128
"""``vectors.npy`` is written with a header of this fixed size (a valid ``.npy`` 1.0 header,
padded with spaces as numpy pads its own), so the final row count can be written over the
first one when the last batch is in."""

POSTINGS_STEP = 1_000_000
"""Occurrences (full build) or postings (edit) handled at a time while the keyword postings
are written: ~50 MB of working arrays."""

_COPY_BYTES = 16 << 20


def text_key(title: str, text: str) -> int:
    """A 64-bit hash (signed, as SQLite stores integers) of a chunk's heading path and text:
    the same text under another document id (a moved or renamed file) has the same key, so
    its vector is reused instead of embedded again. The vector then still carries the old
    path's words (:func:`graphs.knowledge.splitting.index_text` embeds them): a small shift in
    the dense ranking, traded for not embedding a moved document again. Collisions: with
    BLAKE2b's 64 bits, ~1 in 10^7 odds over 10^6 chunks."""
    digest = hashlib.blake2b(f"{title}\n{text}".encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "little", signed=True)


def key(c: Chunk) -> int:
    """:func:`text_key` of a chunk."""
    return text_key(c.title, c.text)


def fts_file(file: str) -> str:
    """The text the FTS5 ``file`` column holds for a document id (its path's words)."""
    return terms.index_text(file.replace("/", " ").replace("_", " ").replace(".", " ").replace("-", " "))


def fts_row(rowid: int, c: Chunk | tuple[str, str, str]) -> tuple[int, str, str, str]:
    """``(rowid, text, title, file)`` as inserted into (and deleted from) the FTS5 table;
    ``c`` a chunk or ``(file, title, text)``."""
    file, title, text = (c.file, c.title, c.text) if isinstance(c, Chunk) else c
    return rowid, terms.index_text(text), terms.index_text(title), fts_file(file)


def access_json(access: Sequence[str] | None) -> str | None:
    """A document's access list as stored in the chunk table (None: everyone)."""
    return None if access is None else json.dumps(list(access), separators=(",", ":"))


def access_of(value: str | None) -> tuple[str, ...] | None:
    """The stored access list back as a tuple (None: everyone, also for unreadable values)."""
    if value is None:
        return None
    try:
        got = json.loads(value)
    except ValueError:
        return None
    return tuple(str(x) for x in got) if isinstance(got, list) else None


def _npy_header(rows: int, dim: int) -> bytes:
    body = f"{{'descr': '<f4', 'fortran_order': False, 'shape': ({rows}, {dim}), }}"
    size = VECTOR_HEADER_BYTES - 10
    if len(body) + 1 > size:
        raise KnowledgeBaseError(f"vector shape ({rows}, {dim}) too large for the header")
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", size) + (body.ljust(size - 1) + "\n").encode("latin1")


def npy_data_offset(path: Path) -> tuple[int, tuple[int, ...]]:
    """``(byte offset of the data, shape)`` of the ``.npy`` file at ``path``."""
    with open(path, "rb") as f:
        major, _ = np.lib.format.read_magic(f)
        if major == 1:
            shape, _, _ = np.lib.format.read_array_header_1_0(f)
        else:
            shape, _, _ = np.lib.format.read_array_header_2_0(f)
        return f.tell(), shape


CREATE_CHUNKS = (
    "CREATE TABLE chunks (rowid INTEGER PRIMARY KEY, file TEXT, title TEXT, text TEXT,"
    " file_hash TEXT, source TEXT, url TEXT, access TEXT, text_hash INTEGER)"
)
CREATE_FTS = f"CREATE VIRTUAL TABLE fts USING fts5(text, title, file, content='', tokenize='{FTS_TOKENIZER}')"
INSERT_CHUNK = (
    "INSERT INTO chunks (rowid, file, title, text, file_hash, source, url, access, text_hash)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
INSERT_FTS = "INSERT INTO fts (rowid, text, title, file) VALUES (?, ?, ?, ?)"
DELETE_FTS = "INSERT INTO fts (fts, rowid, text, title, file) VALUES ('delete', ?, ?, ?, ?)"


def _tune(conn: sqlite3.Connection) -> None:
    # a generation being written is a private folder thrown away if the process dies, and is
    # fsynced as a whole at the end: no journal and no syncs per commit
    conn.execute("PRAGMA journal_mode = OFF")
    conn.execute("PRAGMA synchronous = OFF")
    conn.execute("PRAGMA cache_size = -65536")  # 64 MB of pages
    conn.execute("PRAGMA temp_store = FILE")


class GenerationWriter:
    """Writes one generation into ``directory`` (an empty folder), batch by batch.

    Usage: :meth:`append` the chunks (with their vectors) in as many batches as wanted, then
    :meth:`finish` with the manifest. With a ``base`` (the live generation) the result is an
    *edit* of it: its chunks are kept (nothing is read again) except those of the documents
    given to :meth:`remove`, and the appended rows get rowids after its last one. The copy
    of ``base``'s files is made at the first :meth:`append` or at :meth:`finish`, so a
    writer that is dropped unused costs nothing.

    Args:
        directory: an empty folder (the generation's ``.tmp`` folder).
        vectors: the generation has a dense index (every :meth:`append` brings vectors).
        base: the generation to edit (:class:`graphs.knowledge.index.IndexSnapshot`), or None
            for a generation of the appended chunks alone.
        ann_min_rows: fewest vectors given an approximate nearest-neighbour graph
            (:mod:`graphs.knowledge.ann`: written whole, or ``base``'s edited).

    Raises:
        KnowledgeBaseError: vectors of another width than the first ones, or missing.
    """

    def __init__(self, directory: Path, *, vectors: bool, base=None, ann_min_rows: int = ann.MIN_ROWS) -> None:  # noqa: ANN001 - IndexSnapshot (import cycle)
        self.directory = Path(directory)
        self.ann_min_rows = ann_min_rows
        self.base = base
        self.want_vectors = vectors
        self.dim: int | None = None
        self.next_rowid = 1
        self.count = 0
        self.per_source: dict[str, int] = {}
        self.base_top = 0  # rows up to this one belong to ``base``
        self._conn: sqlite3.Connection | None = None
        self._side: sqlite3.Connection | None = None  # an edit: FTS5 of the new rows alone
        self._vec: BinaryIO | None = None
        self._vec_rows = 0
        self._remove: set[tuple[str, str]] = set()
        self.gone: np.ndarray = np.zeros(0, np.int64)
        self._copier: threading.Thread | None = None
        self._copy_error: BaseException | None = None

    # ---- opening -------------------------------------------------------------------------
    def prepare(self) -> None:
        """Start copying ``base``'s files in the background (an edit), so the copy overlaps
        the reading and embedding of the changed documents; :meth:`append` and :meth:`finish`
        wait for it. Nothing for a writer without ``base``, or called again."""
        if self.base is None or self._copier is not None or self._conn is not None:
            return
        self._copier = threading.Thread(target=self._copy_guarded, name="generation-copy", daemon=True)
        self._copier.start()

    def _copy_guarded(self) -> None:
        try:
            self._copy_base()
        except BaseException as exc:  # noqa: BLE001 - raised again in the writing thread
            self._copy_error = exc

    def _copy_base(self) -> None:
        """Copy ``base``'s chunk table and vectors into the new generation (kernel copies)."""
        base = self.base
        assert base is not None
        shutil.copyfile(base.directory / "chunks.sqlite", self.directory / "chunks.sqlite")
        if self.want_vectors and base.vectors is not None:
            offset, shape = npy_data_offset(base.directory / "vectors.npy")
            self._open_vectors(int(shape[1]))
            with open(base.directory / "vectors.npy", "rb") as src:
                # copied as bytes, not through the memory map: the pages stay the page cache's
                _copy_range(src, self._vec, offset, int(shape[0]) * int(shape[1]) * 4)
            self._vec_rows = int(shape[0])

    def _open(self) -> sqlite3.Connection:
        if self._conn is not None:
            return self._conn
        path = self.directory / "chunks.sqlite"
        base = self.base
        if base is None:
            conn = sqlite3.connect(path)
            _tune(conn)
            conn.execute(CREATE_CHUNKS)
            conn.execute(CREATE_FTS)
            conn.commit()
        else:
            if self._copier is None:
                self._copy_base()
            else:
                self._copier.join()
                if self._copy_error is not None:
                    raise self._copy_error
            conn = sqlite3.connect(path)
            _tune(conn)
            cols = {r[1] for r in conn.execute("PRAGMA table_info(chunks)")}
            for col, kind in (("access", "TEXT"), ("text_hash", "INTEGER")):
                if col not in cols:  # an older format: its rows have no access list and no hash
                    conn.execute(f"ALTER TABLE chunks ADD COLUMN {col} {kind}")
            conn.execute("CREATE INDEX IF NOT EXISTS chunks_text ON chunks (text_hash)")
            conn.commit()
            top = int(base.manifest.get("max_rowid") or 0)
            top = max(top, int(conn.execute("SELECT coalesce(max(rowid), 0) FROM chunks").fetchone()[0]))
            if base.vectors is not None:
                top = max(top, int(base.vectors.shape[0]))
            self.base_top = top
            self.next_rowid = top + 1
            self.count = int(base.manifest.get("chunks", 0))
            self.per_source = {str(s): int(n) for s, n in base.manifest.get("source_chunks", {}).items()}
            self._side = sqlite3.connect(":memory:")
            self._side.execute(CREATE_FTS)
            self._pad_vectors(top)
        self._conn = conn
        return conn

    def _open_vectors(self, dim: int) -> None:
        self.dim = dim
        self._vec = open(self.directory / "vectors.npy", "w+b")  # noqa: SIM115 - closed in finish/close
        self._vec.write(_npy_header(0, dim))

    def _pad_vectors(self, rows: int) -> None:
        """Zero rows up to ``rows`` (rowids without a chunk)."""
        if self._vec is None or rows <= self._vec_rows:
            return
        assert self.dim is not None
        missing = (rows - self._vec_rows) * self.dim * 4
        while missing:
            n = min(missing, _COPY_BYTES)
            self._vec.write(bytes(n))
            missing -= n
        self._vec_rows = rows

    # ---- writing ---------------------------------------------------------------------------
    def append(self, chunks: Sequence[Chunk], vectors: np.ndarray | None = None) -> range:
        """Add ``chunks`` (in order) with their vectors (``len(chunks) x dim`` float32, when
        the generation has vectors). Returns their rowids."""
        conn = self._open()
        start = self.next_rowid
        rows = range(start, start + len(chunks))
        if not chunks:
            return rows
        if self.want_vectors:
            if vectors is None or len(vectors) != len(chunks):
                raise KnowledgeBaseError("a batch of chunks came without its vectors")
            vectors = np.ascontiguousarray(vectors, dtype="<f4")
            if self._vec is None:
                self._open_vectors(int(vectors.shape[1]))
                self._pad_vectors(start - 1)
            if vectors.shape[1] != self.dim:
                raise KnowledgeBaseError(f"vectors of {vectors.shape[1]} dimensions, the index has {self.dim}")
        conn.executemany(
            INSERT_CHUNK,
            (
                (i, c.file, c.title, c.text, c.file_hash, c.source, c.url, access_json(c.access), key(c))
                for i, c in zip(rows, chunks, strict=True)
            ),
        )
        fts = [fts_row(i, c) for i, c in zip(rows, chunks, strict=True)]
        conn.executemany(INSERT_FTS, fts)
        conn.commit()
        if self._side is not None:
            self._side.executemany(INSERT_FTS, fts)
        if self.want_vectors and vectors is not None and self._vec is not None:
            self._pad_vectors(start - 1)
            self._vec.write(vectors.tobytes())
            self._vec_rows = start - 1 + len(chunks)
        self.next_rowid += len(chunks)
        self.count += len(chunks)
        for c in chunks:
            self.per_source[c.source] = self.per_source.get(c.source, 0) + 1
        return rows

    def mark(self) -> int:
        """A point to go back to with :meth:`drop_since` (the next rowid)."""
        return self.next_rowid

    def drop_since(self, mark: int) -> None:
        """Take out every row appended since :meth:`mark` returned ``mark`` (a source that
        failed halfway through its documents)."""
        if self._conn is None or mark >= self.next_rowid:
            return
        conn = self._conn
        rows = conn.execute("SELECT rowid, file, title, text, source FROM chunks WHERE rowid >= ?", (mark,)).fetchall()
        fts = [fts_row(r, (f, t, x)) for r, f, t, x, _ in rows]
        conn.executemany(DELETE_FTS, fts)
        conn.execute("DELETE FROM chunks WHERE rowid >= ?", (mark,))
        conn.commit()
        if self._side is not None:
            self._side.executemany(DELETE_FTS, fts)
        for *_, source in rows:
            self.per_source[source] = self.per_source.get(source, 0) - 1
        self.count -= len(rows)
        if self._vec is not None and self.dim is not None and self._vec_rows > mark - 1:
            self._vec_rows = max(mark - 1, 0)
            self._vec.truncate(VECTOR_HEADER_BYTES + self._vec_rows * self.dim * 4)
            self._vec.seek(0, os.SEEK_END)
        self.next_rowid = mark

    def remove(self, pairs: Iterable[tuple[str, str]]) -> None:
        """The chunks of ``base`` of these ``(source, document id)`` go (applied at :meth:`finish`;
        rows appended by this writer stay)."""
        self._remove.update(pairs)

    # ---- finishing -------------------------------------------------------------------------
    def finish(self, manifest: dict) -> dict:
        """Apply the removals, write the keyword postings, the vectors' final header and
        ``manifest.json`` (with ``format``, ``chunks``, ``max_rowid``, ``source_chunks`` set
        here), and fsync every file and the folder. Returns the manifest written."""
        conn = self._open()
        name = self.directory.name.removesuffix(".tmp")
        try:
            if self.base is not None:
                self._apply_removals(conn)
            else:
                conn.execute("CREATE INDEX chunks_document ON chunks (file, source)")
                conn.execute("CREATE INDEX chunks_text ON chunks (text_hash)")
                conn.commit()
            max_rowid = self.next_rowid - 1
            postings = self.directory / bm25.POSTINGS_FILE
            if self.base is not None and self._side is not None:
                side = self.directory / "side.npz.tmp"
                added = max_rowid - self.base_top
                postings_from_fts(self._side, side, name, max_rowid, count=added)
                new = bm25.KeywordPostings.load(side, name, added, max_rowid)
                side.unlink()
                merge_postings(self.base.postings, self.gone, new, self.count, name, postings, max_rowid)
            else:
                postings_from_fts(conn, postings, name, max_rowid)
            conn.commit()
        finally:
            conn.close()
            self._conn = None
            if self._side is not None:
                self._side.close()
                self._side = None
        if self._vec is not None:
            assert self.dim is not None
            self._pad_vectors(max_rowid)
            for r in np.sort(self.gone):
                self._vec.seek(VECTOR_HEADER_BYTES + (int(r) - 1) * self.dim * 4)
                self._vec.write(bytes(self.dim * 4))
            self._vec.seek(0)
            self._vec.write(_npy_header(self._vec_rows, self.dim))
            self._vec.close()
            self._vec = None
            # vectors.npy is complete: the graph is written (or the base's edited) from it
            if self.base is None:
                ann.write(self.directory, min_rows=self.ann_min_rows)
            else:
                ann.edit(self.directory, self.base.directory, self.gone, min_rows=self.ann_min_rows)
        per_source = {k: v for k, v in self.per_source.items() if v > 0}
        manifest = {**manifest, "chunks": int(self.count), "max_rowid": int(max_rowid), "source_chunks": per_source}
        (self.directory / "manifest.json").write_text(json.dumps({"format": FORMAT, **manifest}, separators=(",", ":")))
        for file in ("chunks.sqlite", bm25.POSTINGS_FILE, "vectors.npy", "manifest.json"):
            if (self.directory / file).exists():
                fsync_path(self.directory / file)
        fsync_path(self.directory)
        return manifest

    def _apply_removals(self, conn: sqlite3.Connection) -> None:
        gone: list[int] = []
        for source, file in sorted(self._remove):
            rows = conn.execute(
                "SELECT rowid, title, text FROM chunks WHERE file = ? AND source = ? AND rowid <= ?",
                (file, source, self.base_top),
            ).fetchall()
            conn.executemany(DELETE_FTS, [fts_row(r, (file, title, text)) for r, title, text in rows])
            gone += [r for r, _, _ in rows]
            self.per_source[source] = self.per_source.get(source, 0) - len(rows)
        conn.executemany("DELETE FROM chunks WHERE rowid = ?", [(r,) for r in gone])
        conn.commit()
        self.count -= len(gone)
        self.gone = np.array(sorted(gone), dtype=np.int64)

    def close(self) -> None:
        """Drop an unfinished writer (its folder is the caller's to delete)."""
        if self._copier is not None:
            self._copier.join()
        for c in (self._conn, self._side):
            if c is not None:
                c.close()
        self._conn = self._side = None
        if self._vec is not None:
            self._vec.close()
            self._vec = None


def reusable_vectors(snapshot, keys: Sequence[int]) -> dict[int, np.ndarray]:  # noqa: ANN001 - IndexSnapshot
    """``text key -> vector`` of ``snapshot``'s chunks whose :func:`text_key` is among
    ``keys`` (empty for generations before format 3 or without vectors)."""
    if snapshot is None or snapshot.vectors is None or int(snapshot.manifest.get("format", 1)) < 3 or not keys:
        return {}
    conn = sqlite3.connect(f"file:{snapshot.directory / 'chunks.sqlite'}?mode=ro", uri=True)
    found: dict[int, int] = {}
    try:
        distinct = list(set(keys))
        for lo in range(0, len(distinct), 500):
            part = distinct[lo : lo + 500]
            marks = ",".join("?" * len(part))
            for key, rowid in conn.execute(
                f"SELECT text_hash, max(rowid) FROM chunks WHERE text_hash IN ({marks}) GROUP BY text_hash", part
            ):
                found[int(key)] = int(rowid)
    finally:
        conn.close()
    vectors = snapshot.vectors
    out: dict[int, np.ndarray] = {}
    for key, rowid in found.items():
        if rowid <= len(vectors):
            v = np.array(vectors[rowid - 1], dtype=np.float32)
            if np.any(v):  # a zeroed row is a removed chunk's
                out[key] = v
    return out


# ---- keyword postings, streamed ------------------------------------------------------------


def _copy_range(src, dst, offset: int, n: int) -> None:  # noqa: ANN001 - binary files
    """Append ``n`` bytes of ``src`` from ``offset`` to ``dst`` (in the kernel when it can)."""
    dst.flush()
    try:
        out = dst.tell()
        while n > 0:
            sent = os.copy_file_range(src.fileno(), dst.fileno(), min(n, 1 << 30), offset, out)
            if sent == 0:
                raise KnowledgeBaseError("vectors.npy is shorter than its header says")
            offset, out, n = offset + sent, out + sent, n - sent
        dst.seek(out)
    except (AttributeError, OSError) as exc:
        if isinstance(exc, OSError) and exc.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
            raise
        src.seek(offset)
        dst.seek(out)
        _copy_bytes(src, dst, n)


def _copy_bytes(src, dst, n: int) -> None:  # noqa: ANN001 - binary files
    while n > 0:
        piece = src.read(min(n, _COPY_BYTES))
        if not piece:
            raise KnowledgeBaseError("vectors.npy is shorter than its header says")
        dst.write(piece)
        n -= len(piece)


class _PostingsFiles:
    """The ``rows`` and ``freqs`` arrays of postings, written in pieces to temporary files."""

    def __init__(self, path: Path) -> None:
        self.rows_path = path.with_name(path.name + ".rows.tmp")
        self.freqs_path = path.with_name(path.name + ".freqs.tmp")
        self.rows = open(self.rows_path, "wb")  # noqa: SIM115 - closed in save
        self.freqs = open(self.freqs_path, "wb")  # noqa: SIM115
        self.n = 0

    def discard(self) -> None:
        """Close and delete the temporary files."""
        self.rows.close()
        self.freqs.close()
        self.rows_path.unlink(missing_ok=True)
        self.freqs_path.unlink(missing_ok=True)

    def add(self, rows: np.ndarray, freqs: np.ndarray) -> None:
        self.rows.write(np.ascontiguousarray(rows, dtype="<i4").tobytes())
        self.freqs.write(np.ascontiguousarray(freqs, dtype="<f8").tobytes())
        self.n += len(rows)

    def save(
        self, path: Path, terms_: list[str], indptr: np.ndarray, lengths: np.ndarray, count: int, generation: str
    ) -> None:
        """Write ``path`` as :meth:`bm25.KeywordPostings.save` writes it (same members), the big
        arrays copied from the temporary files."""
        self.rows.close()
        self.freqs.close()
        try:
            blob = "\n".join(terms_).encode("utf-8", "surrogateescape")
            parts: list[tuple[str, object]] = [
                ("terms", np.frombuffer(blob, dtype=np.uint8)),
                ("indptr", indptr.astype(np.int64)),
                ("rows", (self.rows_path, "<i4")),
                ("freqs", (self.freqs_path, "<f8")),
                ("lengths", lengths.astype(np.float64)),
                ("count", np.array(count)),
                ("generation", np.frombuffer(generation.encode(), dtype=np.uint8)),
            ]
            with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
                for member, value in parts:
                    with zf.open(member + ".npy", "w", force_zip64=True) as f:
                        if isinstance(value, np.ndarray):
                            np.lib.format.write_array(f, value, allow_pickle=False)
                            continue
                        tmp, dtype = cast(tuple[Path, str], value)
                        np.lib.format.write_array_header_1_0(
                            f, {"descr": np.dtype(dtype).str, "fortran_order": False, "shape": (self.n,)}
                        )
                        with open(tmp, "rb") as src:
                            shutil.copyfileobj(src, f, _COPY_BYTES)
        finally:
            for p in (self.rows_path, self.freqs_path):
                p.unlink(missing_ok=True)


class _OrderUnsure(Exception):
    """The fast reading of the occurrences did not come back in the order it relies on."""


def _column_case() -> str:
    """SQL numbering the FTS5 ``col`` names of an instance view as indexes of :data:`bm25.COLUMNS`."""
    whens = " ".join(f"WHEN '{c}' THEN {i}" for i, c in enumerate(bm25.COLUMNS))
    return f"CASE col {whens} END"


def postings_from_fts(
    conn: sqlite3.Connection, path: Path, generation: str, max_rowid: int, count: int | None = None
) -> None:
    """Write the keyword postings of the FTS5 table ``fts`` on ``conn`` to ``path`` (the same
    file :meth:`bm25.KeywordPostings.from_fts` + ``save`` would give) in bounded memory.

    ``fts5vocab``'s instance view yields the occurrences by term, then rowid, so each term's
    postings are complete when the next term starts. The occurrences are read range of terms
    by range of terms (:data:`POSTINGS_STEP` occurrences each, the ranges from the view's
    ``row`` counts), each range as one ``group_concat`` text parsed by numpy (a Python loop over
    the rows costs ~4x more), reduced to weighted counts per (term, row) and written out. When
    a range does not come back in that order or size (a SQLite that changed it, a term that is
    not UTF-8) the occurrences are read row by row instead.

    Args:
        count: rows of the table (default: those of the ``chunks`` table beside it).
    """
    weights = np.array(bm25.COLUMN_WEIGHTS, dtype=np.float64)
    tag = threading.get_ident()
    inst, rowv = f"temp.fts_instance_{tag}", f"temp.fts_row_{tag}"
    conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {inst} USING fts5vocab(main, fts, instance)")
    conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {rowv} USING fts5vocab(main, fts, row)")
    try:
        terms_: list[str] = []
        cnt = array("q")
        cur = conn.execute(f"SELECT CAST(term AS BLOB), cnt FROM {rowv}")
        while part := cur.fetchmany(65536):
            for t, n in part:
                terms_.append(bm25._term(t))
                cnt.append(n)
        counts = np.frombuffer(cnt, dtype=np.int64) if len(cnt) else np.zeros(0, np.int64)
        try:
            per_term, lengths = _postings_ranges(conn, inst, path, terms_, counts, weights, max_rowid)
        except _OrderUnsure as exc:
            log.info("keyword postings read row by row (%s)", exc)
            per_term, lengths = _postings_rows(conn, inst, path, len(terms_), weights, max_rowid)
    finally:
        conn.execute(f"DROP TABLE IF EXISTS {inst}")
        conn.execute(f"DROP TABLE IF EXISTS {rowv}")
    if count is None:
        count = int(conn.execute("SELECT count(*) FROM chunks").fetchone()[0])
    out = per_term.pop()
    indptr = np.zeros(len(terms_) + 1, dtype=np.int64)
    np.cumsum(np.concatenate(per_term) if per_term else np.zeros(0, np.int64), out=indptr[1:])
    out.save(path, terms_, indptr, lengths, count, generation)


def _reduce(
    out: _PostingsFiles, t: np.ndarray, d: np.ndarray, w: np.ndarray, lo: int, hi: int, lengths: np.ndarray
) -> np.ndarray:
    """Occurrences of terms ``lo..hi-1`` (term ids ``t``, rows ``d``, weights ``w``, by term
    then row) written as postings; returns the postings count of each term."""
    if len(d) and (int(d.max()) >= len(lengths) or int(d.min()) < 1):
        raise KnowledgeBaseError("the keyword index holds rows the chunk table does not")
    same_term = t[1:] == t[:-1]
    if bool(np.any(t[1:] < t[:-1])) or bool(np.any(same_term & (d[1:] < d[:-1]))):
        raise _OrderUnsure("occurrences not by term and row")
    lengths += np.bincount(d, minlength=len(lengths))[: len(lengths)]
    first = np.ones(len(d), dtype=bool)
    first[1:] = ~same_term | (d[1:] != d[:-1])
    starts = np.flatnonzero(first)
    if len(d):
        out.add(d[starts], np.add.reduceat(w, starts))
    return np.bincount(t[starts] - lo, minlength=hi - lo)[: hi - lo].astype(np.int64)


def _postings_ranges(
    conn: sqlite3.Connection,
    inst: str,
    path: Path,
    terms_: list[str],
    counts: np.ndarray,
    weights: np.ndarray,
    max_rowid: int,
) -> tuple[list, np.ndarray]:
    out = _PostingsFiles(path)
    try:
        lengths = np.zeros(max_rowid + 1, dtype=np.float64)
        per_term: list = []
        cum = np.cumsum(counts)
        ncols = len(bm25.COLUMNS)
        sql = f"SELECT group_concat(doc * {ncols} + {_column_case()}) FROM {inst} WHERE term >= ? AND term <= ?"
        a = 0
        while a < len(terms_):
            if int(counts[a]) > POSTINGS_STEP:  # a very common word: read alone, in pieces
                per_term.append(_heavy_term(conn, inst, terms_[a], int(counts[a]), out, weights, lengths))
                a += 1
                continue
            done = int(cum[a - 1]) if a else 0
            b = int(np.searchsorted(cum, done + POSTINGS_STEP, side="right"))
            b = min(max(b, a + 1), len(terms_))
            try:
                (text,) = conn.execute(sql, (terms_[a], terms_[b - 1])).fetchone()
            except (UnicodeEncodeError, sqlite3.Error) as exc:
                raise _OrderUnsure(f"{type(exc).__name__}: {exc}") from exc
            codes = np.fromstring(text, dtype=np.int64, sep=",") if text else np.zeros(0, np.int64)
            if len(codes) != int(cum[b - 1]) - done:
                raise _OrderUnsure("a range of terms came back with another number of occurrences")
            d, col = np.divmod(codes, ncols)
            t = np.repeat(np.arange(a, b, dtype=np.int64), counts[a:b])
            per_term.append(_reduce(out, t, d, weights[col], a, b, lengths))
            a = b
    except BaseException:
        out.discard()
        raise
    per_term.append(out)
    return per_term, lengths


def _heavy_term(
    conn: sqlite3.Connection,
    inst: str,
    term: str,
    count: int,
    out: _PostingsFiles,
    weights: np.ndarray,
    lengths: np.ndarray,
) -> np.ndarray:
    """The postings of one term with more than :data:`POSTINGS_STEP` occurrences (a word in
    most chunks: ~64 per chunk for the commonest word of the bench's corpus, 64 million at a
    million chunks), read :data:`POSTINGS_STEP` rows at a time, a row's weighted count carried
    over when its occurrences straddle two pieces. Returns ``[postings of the term]``."""
    ncols = len(bm25.COLUMNS)
    try:
        cur = conn.execute(f"SELECT doc * {ncols} + {_column_case()} FROM {inst} WHERE term = ?", (term,))
    except (UnicodeEncodeError, sqlite3.Error) as exc:
        raise _OrderUnsure(f"{type(exc).__name__}: {exc}") from exc
    seen = postings = 0
    carry_doc, carry_freq = -1, 0.0
    while rows := cur.fetchmany(POSTINGS_STEP):
        codes = np.fromiter(itertools.chain.from_iterable(rows), dtype=np.int64, count=len(rows))
        del rows
        seen += len(codes)
        d, col = np.divmod(codes, ncols)
        if int(d[0]) < carry_doc or bool(np.any(d[1:] < d[:-1])):
            raise _OrderUnsure("occurrences of a term not by row")
        if int(d.max()) >= len(lengths) or int(d.min()) < 1:
            raise KnowledgeBaseError("the keyword index holds rows the chunk table does not")
        lengths += np.bincount(d, minlength=len(lengths))[: len(lengths)]
        first = np.ones(len(d), dtype=bool)
        first[1:] = d[1:] != d[:-1]
        starts = np.flatnonzero(first)
        docs, freqs = d[starts], np.add.reduceat(weights[col], starts)
        if int(docs[0]) == carry_doc:
            freqs[0] += carry_freq
        elif carry_doc >= 0:
            out.add(np.array([carry_doc]), np.array([carry_freq]))
            postings += 1
        out.add(docs[:-1], freqs[:-1])
        postings += len(docs) - 1
        carry_doc, carry_freq = int(docs[-1]), float(freqs[-1])
    if carry_doc >= 0:
        out.add(np.array([carry_doc]), np.array([carry_freq]))
        postings += 1
    if seen != count:
        raise _OrderUnsure("a term came back with another number of occurrences")
    return np.array([postings], dtype=np.int64)


def _postings_rows(
    conn: sqlite3.Connection, inst: str, path: Path, nterms: int, weights: np.ndarray, max_rowid: int
) -> tuple[list, np.ndarray]:
    out = _PostingsFiles(path)
    try:
        lengths = np.zeros(max_rowid + 1, dtype=np.float64)
        per_term: list = []
        tids, docs, cols = array("q"), array("q"), array("q")
        lo = 0
        tid = -1
        last: bytes | None = None

        def flush(hi: int) -> None:
            nonlocal tids, docs, cols, lo
            t, d = np.frombuffer(tids, dtype=np.int64), np.frombuffer(docs, dtype=np.int64)
            w = weights[np.frombuffer(cols, dtype=np.int64)]
            if len(t):
                per_term.append(_reduce(out, t, d, w, lo, hi, lengths))
            lo = hi
            tids, docs, cols = array("q"), array("q"), array("q")

        for term, doc, col in conn.execute(f"SELECT CAST(term AS BLOB), doc, {_column_case()} FROM {inst}"):
            if term != last:
                if len(docs) >= POSTINGS_STEP:
                    flush(tid + 1)
                last = term
                tid += 1
            tids.append(tid)
            docs.append(doc)
            cols.append(col)
        flush(tid + 1)
        if tid + 1 != nterms:
            raise KnowledgeBaseError("the keyword index changed while its postings were read")
    except BaseException:
        out.discard()
        raise
    per_term.append(out)
    return per_term, lengths


def merge_postings(
    old: bm25.KeywordPostings,
    removed: np.ndarray,
    new: bm25.KeywordPostings,
    count: int,
    generation: str,
    path: Path,
    max_rowid: int,
) -> None:
    """Write to ``path`` the postings of ``old`` without the rows ``removed`` plus ``new``
    (rows all after ``old``'s): what :meth:`bm25.KeywordPostings.merged` gives, range of terms
    by range of terms (at most :data:`POSTINGS_STEP` postings at a time), so memory holds
    ``old`` (already loaded by the snapshot) and one range, not several copies of it."""
    n_old = len(old.terms)
    extra: dict[str, int] = {}
    remap = np.empty(len(new.terms), dtype=np.int64)
    for i, t in enumerate(new.terms):
        j = old.index.get(t)
        if j is None:
            j = extra.setdefault(t, n_old + len(extra))
        remap[i] = j
    new_t = np.repeat(remap, np.diff(new.indptr)) if len(new.terms) else np.zeros(0, np.int64)
    order = np.argsort(new_t, kind="stable")
    new_t, new_rows, new_freqs = new_t[order], np.asarray(new.rows)[order], np.asarray(new.freqs)[order]
    dead = np.zeros(len(old.lengths) + 1, dtype=bool)
    if len(removed):
        dead[removed[removed < len(dead)]] = True
    total = n_old + len(extra)
    counts = np.zeros(total, dtype=np.int64)
    out = _PostingsFiles(path)
    indptr_old = np.asarray(old.indptr)
    try:
        t0 = 0
        while t0 < total:
            if t0 < n_old:
                # terms t0..t1 hold at most POSTINGS_STEP postings (at least one term)
                t1 = int(np.searchsorted(indptr_old, indptr_old[t0] + POSTINGS_STEP, side="right")) - 1
                t1 = min(max(t1, t0 + 1), n_old)
                p0, p1 = int(indptr_old[t0]), int(indptr_old[t1])
                rows = np.asarray(old.rows[p0:p1])
                keep = ~dead[rows]
                seg_t = np.repeat(np.arange(t0, t1, dtype=np.int64), np.diff(indptr_old[t0 : t1 + 1]))[keep]
                seg_rows, seg_freqs = rows[keep], np.asarray(old.freqs[p0:p1])[keep]
            else:
                t1 = total
                seg_t = np.zeros(0, np.int64)
                seg_rows, seg_freqs = np.zeros(0, np.int32), np.zeros(0, np.float64)
            a, b = np.searchsorted(new_t, t0), np.searchsorted(new_t, t1)
            all_t = np.concatenate([seg_t, new_t[a:b]])
            o = np.argsort(all_t, kind="stable")
            out.add(np.concatenate([seg_rows, new_rows[a:b]])[o], np.concatenate([seg_freqs, new_freqs[a:b]])[o])
            counts[t0:t1] = np.bincount(all_t - t0, minlength=t1 - t0)
            t0 = t1
    except BaseException:
        out.discard()
        raise
    indptr = np.zeros(total + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    size = max(len(old.lengths), len(new.lengths), max_rowid + 1)
    lengths = np.zeros(size, dtype=np.float64)
    lengths[: len(old.lengths)] = old.lengths
    if len(removed):
        lengths[removed[removed < size]] = 0.0
    lengths[: len(new.lengths)] += new.lengths
    out.save(path, list(old.terms) + list(extra), indptr, lengths, count, generation)
