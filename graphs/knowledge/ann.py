"""Approximate nearest-neighbour search over one index generation's vectors (usearch HNSW).

Why: the exact dense ranking is a scan of every vector (a matrix-vector product over the
whole ``vectors.npy``): its time and the memory it touches grow with the index, about half a
second per query variant at a million chunks. An HNSW graph (Malkov & Yashunin, "Efficient
and robust approximate nearest neighbor search using Hierarchical Navigable Small World
graphs", 2016) finds the nearest vectors in a few hundred distance computations whatever the
size; the candidates it returns are then ranked again by their exact float32 cosine, so the
order of what it finds is the exact scan's.

Library: usearch (https://github.com/unum-cloud/usearch): wheels for every platform (no
compiler at install), an index file that is memory-mapped rather than read (``view``), so a
generation opens at once and its pages are shared by every process serving it, removal of
single keys (an edit of a generation removes and adds rows instead of rebuilding), and int8
vectors inside the graph (a quarter of the float32 size). Its distance kernels (the
``numkong`` package) pick the CPU's instruction set at run time, so one wheel runs on any
x86-64 CPU (tests/test_packaging.py checks that no AVX-512 code sits outside a variant named
for the CPU that has it). faiss-cpu's HNSW has no removal and its IVF indexes found fewer
true neighbours at the same speed; hnswlib has no wheels (bench/README.md has the figures).

Files in a generation folder (beside ``vectors.npy``, whose rows they index)::

    vectors.usearch        the HNSW graph with int8 copies of the vectors; key = chunk rowid
    vectors.usearch.json   {"rows": rows of vectors.npy, "dim": ..., "count": keys in the graph}

A generation without them (fewer vectors than ``min_rows``, or written before they existed)
is searched exactly; :func:`edit` gives the next generation a graph.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

ANN_FILE = "vectors.usearch"
"""The HNSW graph's file in a generation folder."""
META_FILE = "vectors.usearch.json"
"""What the graph was built from: ``rows`` and ``dim`` of ``vectors.npy`` and ``count`` of keys."""
VECTORS_FILE = "vectors.npy"

MIN_ROWS = 20_000
"""Default of ``[knowledge] ann_min_chunks``: below this many vectors the exact scan is used
(a few milliseconds there, and exact)."""

CONNECTIVITY = 16
"""Graph edges per node (HNSW's M): 16 gives recall@10 above 0.95 on the bench's vectors."""
EXPANSION_ADD = 128
"""Candidate list length while inserting (efConstruction)."""
EXPANSION_SEARCH = 512
"""Candidate list length while searching (ef): at a million vectors 128 found 0.81 of the
exact top 10 on the bench's vectors, 256 0.95, 512 0.97, each search still ~1-2 ms."""
CANDIDATES = 100
"""Fewest neighbours asked of the graph per query, ranked again exactly by the caller."""
DTYPE = "i8"
"""Scalar type of the vectors inside the graph: int8 (unit vectors scaled by 127)."""

_BATCH = 65_536
"""Rows of ``vectors.npy`` read at a time while building (~100 MB of float32 at 384 dimensions)."""


def _usearch() -> Any:
    """usearch's ``Index`` class, imported after onnxruntime when onnxruntime is installed.

    usearch's compiled module carries its own C++ runtime: once it is loaded, importing
    onnxruntime (the local embedder, and markitdown through magika) crashes the process with
    a segmentation fault (usearch 2.26, onnxruntime 1.32, measured:
    ``python -c "import usearch.compiled; import onnxruntime"``). In the other order both
    work, so onnxruntime is loaded first, here, the one place usearch is imported."""
    if importlib.util.find_spec("onnxruntime") is not None:
        import onnxruntime  # noqa: F401 - before usearch, see above

    from usearch.index import Index

    return Index


def _index(dim: int):
    Index = _usearch()

    return Index(
        ndim=dim,
        metric="ip",
        dtype=DTYPE,
        connectivity=CONNECTIVITY,
        expansion_add=EXPANSION_ADD,
        expansion_search=EXPANSION_SEARCH,
    )


def _vectors(directory: Path) -> np.ndarray | None:
    path = directory / VECTORS_FILE
    if not path.exists():
        return None
    vectors = np.load(path, mmap_mode="r")
    return vectors if vectors.ndim == 2 and vectors.shape[1] > 0 else None


def _live(vectors: np.ndarray, start: int = 0) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """``(rowids, float32 rows)`` of the non-zero rows from row ``start`` on, in batches
    (a zero row is a removed chunk, or a gap)."""
    for lo in range(start, len(vectors), _BATCH):
        batch = np.ascontiguousarray(vectors[lo : lo + _BATCH], dtype=np.float32)
        keep = np.flatnonzero(np.any(batch != 0, axis=1))
        if len(keep):
            yield (keep + lo + 1).astype(np.uint64), batch[keep]


def _save(directory: Path, index, vectors: np.ndarray) -> int:
    path, meta = directory / ANN_FILE, directory / META_FILE
    index.save(str(path))
    count = len(index)
    meta.write_text(json.dumps({"rows": int(vectors.shape[0]), "dim": int(vectors.shape[1]), "count": count}))
    for p in (path, meta):
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    return count


def _threads() -> int:
    return max(1, len(os.sched_getaffinity(0)))


def write(directory: Path, min_rows: int = MIN_ROWS) -> int:
    """Build the graph of ``directory/vectors.npy`` (complete, float32, row i = rowid i+1,
    zero rows skipped) and save it beside it, when it holds at least ``min_rows`` non-zero rows.

    Returns:
        Vectors in the graph written (0: none written, too few vectors or no ``vectors.npy``).
    """
    vectors = _vectors(directory)
    if vectors is None or len(vectors) < max(min_rows, 1):
        return 0
    index = _index(int(vectors.shape[1]))
    threads = _threads()
    for keys, rows in _live(vectors):
        index.add(keys, rows, threads=threads)
    if len(index) < max(min_rows, 1):
        return 0
    return _save(directory, index, vectors)


def edit(directory: Path, old_directory: Path, gone: Sequence[int] | np.ndarray, min_rows: int = MIN_ROWS) -> int:
    """Give ``directory`` (a generation written as an edit of ``old_directory``) its graph:
    the old generation's graph without the rowids ``gone``, plus the non-zero rows of
    ``directory/vectors.npy`` beyond the old ``vectors.npy``'s rows. The cost grows with the
    change and one copy of the graph file. Without a usable old graph (none, damaged, or
    another dimension) the graph is built whole (:func:`write`).

    Returns:
        Vectors in the graph written (0: none written).
    """
    vectors = _vectors(directory)
    if vectors is None:
        return 0
    old = _read(old_directory, view=False)
    if old is None or old[1]["dim"] != vectors.shape[1] or old[1]["rows"] > len(vectors):
        return write(directory, min_rows)
    index, meta = old
    gone = np.asarray(gone, dtype=np.uint64)
    if len(gone):
        index.remove(gone)
    threads = _threads()
    for keys, rows in _live(vectors, start=int(meta["rows"])):
        index.add(keys, rows, threads=threads)
    if len(index) < max(min_rows, 1):
        return 0
    return _save(directory, index, vectors)


def _read(directory: Path, view: bool) -> tuple[Any, dict] | None:
    """``(usearch index, meta)`` of a generation's graph if it is there and consistent with
    its ``vectors.npy``; None when absent; None and a warning when unreadable."""
    path, meta_path = directory / ANN_FILE, directory / META_FILE
    if not path.exists():
        return None
    try:
        Index = _usearch()
        meta = json.loads(meta_path.read_text())
        vectors = _vectors(directory)
        if vectors is None or [meta["rows"], meta["dim"]] != list(vectors.shape):
            raise ValueError(f"built for {meta['rows']} x {meta['dim']} vectors, vectors.npy has another shape")
        index = Index.restore(str(path), view=view, expansion_search=EXPANSION_SEARCH)
        if index is None:
            raise ValueError("not a usearch index")
        if index.ndim != meta["dim"] or len(index) != meta["count"]:
            raise ValueError(f"holds {len(index)} x {index.ndim} vectors, {meta_path.name} says {meta['count']}")
        return index, meta
    except Exception as exc:  # noqa: BLE001 - a damaged graph: the exact scan serves the same vectors
        log.warning(
            "index generation %s: %s is unusable (%s: %s): exact vector search",
            directory.name,
            ANN_FILE,
            type(exc).__name__,
            str(exc)[:200],
        )
        return None


class AnnIndex:
    """One generation's graph, memory-mapped read-only (thread-safe searches).

    Use :meth:`open`; :meth:`search` returns candidate rowids to rank exactly.
    """

    def __init__(self, index, meta: dict) -> None:
        self._index = index
        self.rows = int(meta["rows"])
        self.dim = int(meta["dim"])
        self.count = int(meta["count"])

    @classmethod
    def open(cls, directory: Path) -> AnnIndex | None:
        """The graph of generation ``directory``; None without one (or a damaged one: logged)."""
        got = _read(directory, view=True)
        return cls(*got) if got is not None else None

    def search(self, query: np.ndarray, count: int) -> np.ndarray:
        """Rowids (int64) of about the ``count`` vectors nearest to ``query`` by inner
        product (approximate: HNSW), in no guaranteed order; removed rows never appear."""
        if count <= 0 or self.count == 0:
            return np.zeros(0, np.int64)
        found = self._index.search(np.asarray(query, dtype=np.float32), count, threads=1)
        return np.asarray(found.keys, dtype=np.int64)

    def close(self) -> None:
        self._index.reset()
