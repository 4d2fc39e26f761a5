"""Dense search of large generations through an approximate nearest-neighbour graph
(graphs/knowledge/ann.py): it finds what the exact scan finds, never a removed chunk, is
carried through incremental edits, and a generation without it (or with a damaged one) is
still searched, exactly."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import numpy as np
import pytest

from graphs.knowledge import ann
from graphs.knowledge import index as idx
from graphs.knowledge.common import Chunk

DIM = 48


def _vectors(n: int, seed: int = 0) -> np.ndarray:
    """Unit vectors with the structure of text embeddings: chunks of a document near each
    other, documents of a topic nearer than others."""
    rng = np.random.default_rng(seed)
    topics = rng.standard_normal((40, DIM))
    docs = rng.standard_normal((n // 10 + 1, DIM))
    doc = np.arange(n) // 10
    v = topics[doc % 40] * 0.8 + docs[doc] * 0.9 + rng.standard_normal((n, DIM)) * 0.7
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def _chunks(n: int, start: int = 0, tag: str = "") -> list[Chunk]:
    return [
        Chunk(f"doc{(start + i) // 10}.md", f"Doc {(start + i) // 10}", f"chunk {start + i} {tag}", "h", "s", "")
        for i in range(n)
    ]


def _generation(root: Path, n: int, min_rows: int = 0, seed: int = 0) -> idx.IndexSnapshot:
    gen = root / f"gen-{seed}-{n}"
    gen.mkdir(parents=True)
    idx.write_generation(gen, _chunks(n), _vectors(n, seed), {"chunks": n}, ann_min_rows=min_rows)
    return idx.IndexSnapshot(gen)


def _queries(vectors: np.ndarray, count: int, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    q = vectors[rng.integers(0, len(vectors), count)] + rng.standard_normal((count, vectors.shape[1])) * 0.1
    return (q / np.linalg.norm(q, axis=1, keepdims=True)).astype(np.float32)


def _exact(vectors: np.ndarray, q: np.ndarray, k: int) -> list[int]:
    live = np.flatnonzero(np.any(vectors != 0, axis=1))
    sims = vectors[live] @ q
    return [int(r) + 1 for r in live[np.argsort(-sims, kind="stable")[:k]]]


def test_the_graph_finds_what_the_exact_scan_finds(tmp_path):
    snap = _generation(tmp_path, 6000)
    try:
        assert snap.ann is not None and (snap.directory / ann.ANN_FILE).exists()
        vectors = np.asarray(snap.vectors)
        recall = []
        for q in _queries(vectors, 60):
            got = snap.dense(q, 10)
            truth = _exact(vectors, q, 10)
            recall.append(len(set(got) & set(truth)) / 10)
            # what it finds is ranked by the exact similarity
            sims = [float(vectors[r - 1] @ q) for r in got]
            assert sims == sorted(sims, reverse=True)
        assert np.mean(recall) >= 0.95
    finally:
        snap.close()


def test_a_small_index_is_scanned_exactly(tmp_path):
    snap = _generation(tmp_path, 500, min_rows=1000)
    try:
        assert snap.ann is None and not (snap.directory / ann.ANN_FILE).exists()
        vectors = np.asarray(snap.vectors)
        for q in _queries(vectors, 10):
            assert snap.dense(q, 40) == _exact(vectors, q, 40)
    finally:
        snap.close()


def _delta(old: idx.IndexSnapshot, root: Path, drop_docs: range, add: int, min_rows: int = 0) -> idx.IndexSnapshot:
    gen = root / f"{old.directory.name}-edit"
    gen.mkdir()
    remove = {("s", f"doc{d}.md") for d in drop_docs}
    new = _vectors(add, seed=7)
    manifest = idx.write_delta(gen, old, remove, _chunks(add, start=10**6, tag="new"), new, {}, ann_min_rows=min_rows)
    assert manifest["chunks"] == old.count - 10 * len(drop_docs) + add
    return idx.IndexSnapshot(gen)


def test_an_edit_removes_and_adds_rows_in_the_graph(tmp_path):
    """Removed chunks never come back, even for a query equal to their vector; added chunks
    are found; the edited generation's graph holds exactly its chunks."""
    old = _generation(tmp_path, 3000)
    new = _delta(old, tmp_path, range(0, 300, 3), add=200)
    try:
        assert new.ann is not None and new.ann.count == new.count
        removed = {d * 10 + j + 1 for d in range(0, 300, 3) for j in range(10)}
        old_vectors = np.asarray(old.vectors)
        for rowid in list(removed)[:50]:
            got = new.dense(old_vectors[rowid - 1], 40)
            assert got and not set(got) & removed
        vectors = np.asarray(new.vectors)
        for i in range(3000, 3200, 20):  # a new chunk's own vector finds it first
            assert new.dense(vectors[i], 5)[0] == i + 1
        hits = [new.dense(q, 10) for q in _queries(vectors, 40)]
        truth = [_exact(vectors, q, 10) for q in _queries(vectors, 40)]
        assert np.mean([len(set(a) & set(b)) / 10 for a, b in zip(hits, truth, strict=True)]) >= 0.95
    finally:
        old.close()
        new.close()


def test_a_generation_without_the_graph_is_searched_exactly_and_gets_one_at_its_next_edit(tmp_path):
    old = _generation(tmp_path, 3000)
    for name in (ann.ANN_FILE, ann.META_FILE):  # as written before the graph existed
        (old.directory / name).unlink()
    old.close()
    old = idx.IndexSnapshot(old.directory)
    new = None
    try:
        assert old.ann is None
        vectors = np.asarray(old.vectors)
        for q in _queries(vectors, 10):
            assert old.dense(q, 40) == _exact(vectors, q, 40)
        new = _delta(old, tmp_path, range(5), add=20)
        assert new.ann is not None and new.ann.count == 3000 - 50 + 20
    finally:
        old.close()
        if new is not None:
            new.close()


def test_removed_rows_are_never_returned_by_the_exact_scan(tmp_path):
    old = _generation(tmp_path, 300, min_rows=10**6)
    new = _delta(old, tmp_path, range(25), add=0, min_rows=10**6)  # 250 of 300 chunks gone
    try:
        assert new.ann is None
        got = new.dense(np.asarray(old.vectors)[0], 100)
        assert sorted(got) == list(range(251, 301))
    finally:
        old.close()
        new.close()


@pytest.mark.parametrize("damage", ["garbage", "truncated", "other vectors"])
def test_a_damaged_graph_falls_back_to_the_exact_scan(tmp_path, caplog, damage):
    snap = _generation(tmp_path, 2000)
    copy = tmp_path / "copy"
    shutil.copytree(snap.directory, copy)
    snap.close()
    path = copy / ann.ANN_FILE
    if damage == "garbage":
        path.write_bytes(b"not a graph" * 100)
    elif damage == "truncated":
        path.write_bytes(path.read_bytes()[:4096])
    else:  # a graph of another generation's vectors
        np.save(copy / "vectors.npy", _vectors(2100, seed=3))
    caplog.set_level(logging.WARNING)
    damaged = idx.IndexSnapshot(copy)
    try:
        assert damaged.ann is None
        assert any(ann.ANN_FILE in r.getMessage() for r in caplog.records)
        vectors = np.asarray(damaged.vectors)
        for q in _queries(vectors, 5):
            assert damaged.dense(q, 40) == _exact(vectors, q, 40)
    finally:
        damaged.close()


def test_a_process_that_searched_the_graph_can_then_load_onnxruntime():
    """The serving process opens the graph (usearch) and later loads the local embedder or a
    document converter (onnxruntime, also under markitdown): with usearch loaded first that
    import crashed the whole process (a segmentation fault), so it runs in a child here."""
    import subprocess
    import sys

    pytest.importorskip("onnxruntime")
    script = (
        "import numpy as np\n"
        "from graphs.knowledge import ann\n"
        "index = ann._index(8)\n"
        "index.add(np.arange(4), np.eye(4, 8, dtype=np.int8) * 127)\n"
        "import onnxruntime\n"
        "print(len(index), onnxruntime.get_device())\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.split()[0] == "4", done.stdout
