"""The index writer alone at scale: a generation of N synthetic chunks written batch by batch
(chunk rows, FTS5 rows, vectors, keyword postings), then an edit of it with 1 % of the
documents replaced, each in its own process so its peak RSS (``ru_maxrss``) is its own.

    .venv/bin/python bench/bench_writer.py --chunks 1000000 --work /tmp/bench-writer

No connector, no embedding server (random unit vectors) and no nearest-neighbour graph: what
:class:`graphs.knowledge.writer.GenerationWriter` costs by itself, to tell it apart from the
rest of a sync (``bench/bench_sources.py``). The chunks are the sections of
``bench_sources.document`` (10 per document, ~900 characters).
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

NO_GRAPH = 10**12
"""ann_min_rows that no generation reaches: the graph is not this bench's subject."""


def chunks_of(doc: int, version: int = 0):
    from bench_sources import document

    from graphs.knowledge.common import Chunk

    text = document(doc, 10, version)
    file = f"d{doc % 100:02d}/doc{doc}.md"
    parts = text.split("\n## ")[1:]
    return [Chunk(file, p.split("\n", 1)[0], p.split("\n", 1)[1].strip(), f"v{version}", "corpus") for p in parts]


def vectors(n: int, rng: np.random.Generator, dim: int) -> np.ndarray:
    v = rng.standard_normal((n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def peak_mb() -> int:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


def phase_full(work: Path, docs: int, dim: int, batch: int) -> dict:
    from graphs.knowledge import index as idx
    from graphs.knowledge.writer import GenerationWriter

    index = work / "index"
    shutil.rmtree(index, ignore_errors=True)
    index.mkdir(parents=True)
    gen = idx.new_generation_name()
    tmp = index / (gen + ".tmp")
    tmp.mkdir()
    rng = np.random.default_rng(1)
    t0 = time.perf_counter()
    w = GenerationWriter(tmp, vectors=True, ann_min_rows=NO_GRAPH)
    pending = []
    for d in range(docs):
        pending += chunks_of(d)
        if len(pending) >= batch:
            w.append(pending, vectors(len(pending), rng, dim))
            pending = []
    w.append(pending, vectors(len(pending), rng, dim))
    appended = time.perf_counter() - t0
    manifest = w.finish({"docs": {"corpus": {}}, "sources": ["corpus"]})
    idx.publish(index, tmp, gen)
    return {
        "phase": "full",
        "chunks": manifest["chunks"],
        "seconds": round(time.perf_counter() - t0, 1),
        "append_seconds": round(appended, 1),
        "finish_seconds": round(time.perf_counter() - t0 - appended, 1),
        "peak_rss_mb": peak_mb(),
        "files_mb": {p.name: round(p.stat().st_size / 1e6) for p in (index / gen).iterdir()},
    }


def phase_edit(work: Path, docs: int, dim: int) -> dict:
    from graphs.knowledge import index as idx
    from graphs.knowledge.writer import GenerationWriter

    index = work / "index"
    t0 = time.perf_counter()
    name, _ = idx.read_current(index)
    old = idx.open_generation(index, name)
    opened = time.perf_counter() - t0
    changed = random.Random(7).sample(range(docs), max(1, docs // 100))
    gen = idx.new_generation_name()
    tmp = index / (gen + ".tmp")
    tmp.mkdir()
    t1 = time.perf_counter()
    w = GenerationWriter(tmp, vectors=True, base=old, ann_min_rows=NO_GRAPH)
    w.prepare()
    rng = np.random.default_rng(2)
    new = [c for d in changed for c in chunks_of(d, version=int(time.time()))]
    w.append(new, vectors(len(new), rng, dim))
    w.remove({("corpus", f"d{d % 100:02d}/doc{d}.md") for d in changed})
    manifest = w.finish({"docs": {"corpus": {}}, "sources": ["corpus"]})
    written = time.perf_counter() - t1
    idx.publish(index, tmp, gen)
    idx.prune(index, keep={gen}, keep_generations=1)
    t2 = time.perf_counter()
    idx.open_generation(index, gen)
    return {
        "phase": "edit",
        "documents_changed": len(changed),
        "chunks": manifest["chunks"],
        "open_seconds": round(opened, 1),
        "edit_seconds": round(written, 1),
        "reopen_seconds": round(time.perf_counter() - t2, 1),
        "peak_rss_mb": peak_mb(),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--chunks", type=int, default=100_000, help="about 10 per document")
    p.add_argument("--dim", type=int, default=384)
    p.add_argument("--batch", type=int, default=2048, help="chunks per append")
    p.add_argument("--work", default="/tmp/bench-writer")
    p.add_argument("--phase", default="", help=argparse.SUPPRESS)
    p.add_argument("--phases", default="full,edit")
    args = p.parse_args()
    docs = max(1, args.chunks // 10)
    work = Path(args.work)
    if args.phase == "full":
        print(json.dumps(phase_full(work, docs, args.dim, args.batch)))
        return
    if args.phase == "edit":
        print(json.dumps(phase_edit(work, docs, args.dim)))
        return
    for name in args.phases.split(","):
        cmd = [sys.executable, __file__, "--phase", name, "--chunks", str(args.chunks), "--work", str(work)]
        cmd += ["--dim", str(args.dim), "--batch", str(args.batch)]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"phase {name} failed:\n{done.stderr[-3000:]}")
        print(done.stdout.strip().splitlines()[-1], flush=True)


if __name__ == "__main__":
    main()
