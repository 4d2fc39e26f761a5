"""Search at scale without the sync: a synthetic generation of N chunks written directly
through the index's writer, then searched as a running bot searches it.

    nice -n 10 .venv/bin/python bench/bench_search.py --chunks 100000     # -> bench/results/search-100000.json
    nice -n 10 .venv/bin/python bench/bench_search.py --chunks 1000000    # the issue's 1M chunks

Chunks are the sections of bench/bench_sources.py's Zipf documents (10 per document, the
same words, titles and paths), so keyword search meets the same posting lists. Vectors
come from a seeded generator with the structure of text embeddings (each chunk near its
document's other chunks, documents near others of their topic: 1,000 topics), 384 floats;
queries embed as a perturbed vector of a chunk named in the question, so the nearest
neighbours are meaningful (the sync bench's hash vectors have no neighbours to find).

Phases, each in its own process (``--phase``) so each peak RSS is its own:

1. ``build``: the generation (chunk table, FTS5, keyword postings, vectors.npy) through
   ``index.write_generation``, then the HNSW graph (``ann.write``), each timed; published as
   the live generation of ``WORK/index``. Kept and reused by later runs (``--rebuild``).
2. ``search``: open it as ``KnowledgeBase`` does and run ``--queries`` searches (two query
   variants each, keyword + dense, fused with RRF; query embedding costs nothing here, the
   sync bench's server adds ~20 ms); p50/p95 of the whole ``KnowledgeBase.search`` (wall
   and CPU time: on a shared machine the CPU time is the steadier figure) and of
   its parts timed inside it (keyword and dense per variant; the rest: query tokenizing
   misses, fusion, reading the chunks); RSS after opening and after the searches.
3. ``quality``: recall@10 and @40 of the graph's dense ranking against the exact scan, and
   the pruned keyword ranking checked against scoring every matching row (with its time).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_sources import TOPICS, document, zipf_words  # noqa: E402

DIM = 384
SECTIONS = 10
EMBEDDER = "bench:synthetic"


def vectors(rows: int, seed: int = 0) -> np.ndarray:
    """Unit vectors of chunk rowids 1..rows: topic (1,000) + document + chunk noise."""
    rng = np.random.default_rng(seed)
    topics = rng.standard_normal((1000, DIM)).astype(np.float32)
    out = np.empty((rows, DIM), np.float32)
    step = 50_000
    for lo in range(0, rows, step):
        n = min(step, rows - lo)
        doc = np.arange(lo, lo + n) // SECTIONS
        v = topics[(doc * 7919) % len(topics)] * 0.8
        # a document's own direction, the same for its chunks whatever the batch
        ud, inv = np.unique(doc, return_inverse=True)
        own = np.stack([np.random.default_rng((seed, int(d))).standard_normal(DIM) for d in ud]).astype(np.float32)
        v += own[inv] * 0.9
        v += rng.standard_normal((n, DIM)).astype(np.float32) * 0.7
        out[lo : lo + n] = v / np.linalg.norm(v, axis=1, keepdims=True)
    return out


def chunks(docs: int):
    from graphs.knowledge.common import Chunk

    for i in range(docs):
        text = document(i, SECTIONS)
        parts = text.split("\n## ")
        h1 = parts[0].strip().lstrip("# ").strip()
        for part in parts[1:]:
            heading, _, body = part.partition("\n")
            file = f"d{i % 100:02d}/doc{i}.md"
            yield Chunk(file, f"{h1} > {heading.strip()}", body.strip(), "sha", "corpus", "")


def questions(docs: int, count: int) -> list[tuple[list[str], int]]:
    """bench_sources.py's questions: (two variants, the document the first names)."""
    rng = random.Random(11)
    out = []
    for q in range(count):
        i = rng.randrange(docs)
        topic = TOPICS[i % len(TOPICS)]
        s = rng.randrange(SECTIONS)
        question = f"how does {topic} handle term{i}x{s} and {' '.join(zipf_words(rng, 3))}?"
        out.append(([question, f"{topic} {' '.join(zipf_words(rng, 4))} query {q}"], i * SECTIONS + s))
    return out


class SyntheticEmbeddings:
    """Query vectors near the chunk a question names (its row, perturbed by the text's hash):
    what a real embedder gives a question about that chunk. Free: no server."""

    embedder_id = EMBEDDER

    def __init__(self, table: np.ndarray, rows: dict[str, int]) -> None:
        self.table, self.rows = table, rows

    def embed_query(self, text: str) -> list[float]:
        seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
        rng = np.random.default_rng(seed)
        row = self.rows.get(text, int(rng.integers(len(self.table))))
        v = self.table[row] + rng.standard_normal(DIM).astype(np.float32) * 0.04
        return (v / np.linalg.norm(v)).tolist()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self.embed_query(t) for t in texts]


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def build(args: argparse.Namespace) -> dict:
    from graphs.knowledge import ann
    from graphs.knowledge import index as idx

    index_dir = Path(args.work) / "index"
    shutil.rmtree(index_dir, ignore_errors=True)
    index_dir.mkdir(parents=True)
    docs = args.chunks // SECTIONS
    t0 = time.perf_counter()
    rows = list(chunks(docs))
    matrix = vectors(len(rows))
    made = time.perf_counter() - t0
    name = idx.new_generation_name()
    tmp = index_dir / (name + ".tmp")
    tmp.mkdir()
    manifest = {"chunks": len(rows), "embedder": EMBEDDER, "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ")}
    t0 = time.perf_counter()
    idx.write_generation(tmp, rows, matrix, manifest, ann_min_rows=10**12)  # the graph is timed apart
    written = time.perf_counter() - t0
    del rows, matrix
    t0 = time.perf_counter()
    count = ann.write(tmp, min_rows=0)
    graph = time.perf_counter() - t0
    idx.publish(index_dir, tmp, name)
    sizes = {p.name: round(p.stat().st_size / 2**20) for p in (index_dir / name).iterdir()}
    return {
        "phase": "build",
        "chunks": args.chunks,
        "generate_seconds": round(made, 1),
        "write_seconds": round(written, 1),
        "graph_seconds": round(graph, 1),
        "graph_vectors": count,
        "file_mb": sizes,
        "peak_rss_mb": round(peak_mb()),
    }


def pct(values: list[float]) -> dict:
    values = sorted(values)
    return {
        "p50_ms": round(statistics.median(values), 2),
        "p95_ms": round(values[max(0, int(len(values) * 0.95) - 1)], 2),
    }


def knowledge_base(args: argparse.Namespace, qs: list[tuple[list[str], int]]):
    from graphs.knowledge import KnowledgeBase

    # the rows the questions name, read from the generation (then unmapped: not the server's memory)
    from graphs.knowledge import index as idx

    name, _ = idx.read_current(Path(args.work) / "index")
    mapped = np.load(Path(args.work) / "index" / str(name) / "vectors.npy", mmap_mode="r")
    wanted = sorted({row for _, row in qs})
    table = np.asarray(mapped[wanted], dtype=np.float32)
    del mapped
    rows = {v[0]: wanted.index(row) for v, row in qs}
    emb = SyntheticEmbeddings(table, rows)
    from langchain_core.embeddings import Embeddings

    class Emb(SyntheticEmbeddings, Embeddings):
        pass

    kb = KnowledgeBase(Path(args.work) / "index", embeddings=Emb(emb.table, emb.rows), embedder_id=EMBEDDER)
    return kb, emb


def search(args: argparse.Namespace) -> dict:
    qs = questions(args.chunks // SECTIONS, args.queries)
    # the query vectors are made before the index is opened, so the RSS is the serving process's
    from graphs.knowledge import index as idx

    qv = {}
    kb, emb = knowledge_base(args, qs)
    for variants, _ in qs:
        for v in variants:
            qv[v] = np.asarray(emb.embed_query(v), dtype=np.float32)
    emb.table = None
    kb.embeddings.table = None  # type: ignore[union-attr]
    kb._queries = lambda texts: np.stack([qv[t] for t in texts])  # noqa: SLF001 - embedding costs nothing here
    import gc

    gc.collect()
    base = rss_mb()
    t0 = time.perf_counter()
    snap = kb.snapshot
    assert snap is not None
    opened = time.perf_counter() - t0
    after_open = rss_mb()
    keyword, dense, rest, whole, cpu = [], [], [], [], []
    # the components timed inside each search (wrapped on the snapshot), as the bot meets them
    timed = {"keyword": keyword, "dense": dense}

    def clock(name, fn):
        def run(*a, **kw):
            t = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                timed[name].append((time.perf_counter() - t) * 1000)

        return run

    snap.keyword = clock("keyword", snap.keyword)
    snap.dense = clock("dense", snap.dense)
    for variants, _ in qs:
        k0, d0 = len(keyword), len(dense)
        t, c = time.perf_counter(), time.process_time()
        docs = kb.search(variants, k=5)
        whole.append((time.perf_counter() - t) * 1000)
        cpu.append((time.process_time() - c) * 1000)
        rest.append(whole[-1] - sum(keyword[k0:]) - sum(dense[d0:]))
        assert docs
    return {
        "phase": "search",
        "chunks": snap.count,
        "graph": snap.ann is not None,
        "queries": len(qs),
        "open_seconds": round(opened, 2),
        "search": pct(whole),
        "search_cpu": pct(cpu),
        "keyword_per_variant": pct(keyword),
        "dense_per_variant": pct(dense),
        "rest_per_search": pct(rest),
        "rss_mb_before_open": round(base),
        "rss_mb_after_open": round(after_open),
        "rss_mb_after_searches": round(rss_mb()),
        "serving_rss_mb": round(rss_mb() - base),
        "peak_rss_mb": round(peak_mb()),
        "index_module": idx.__name__,
    }


def rank_all(postings, tokenizer, phrases, limit, phrase_scores) -> list[int]:
    """Every matching row scored (the ranking before pruning), the reference."""
    from graphs.knowledge import bm25

    scores = np.zeros(len(postings.lengths), dtype=np.float64)
    hit = np.zeros(len(scores), dtype=bool)
    for phrase in phrases:
        tokens = tokenizer.tokens(phrase)
        if len(tokens) == 1:
            i = postings.index.get(tokens[0])
            if i is None:
                continue
            start, end = postings.indptr[i], postings.indptr[i + 1]
            rows, f = postings.rows[start:end], postings.freqs[start:end]
            idf = postings.idf(end - start)
            scores[rows] += idf * ((f * (bm25.K1 + 1.0)) / (f + postings.norm[rows]))
            hit[rows] = True
        elif len(tokens) > 1:
            for rowid, value in phrase_scores(phrase):
                scores[rowid] -= value
                hit[rowid] = True
    found = np.flatnonzero(hit)
    order = np.argsort(-scores[found], kind="stable")[:limit]
    return [int(r) for r in found[order]]


def quality(args: argparse.Namespace) -> dict:
    from graphs.knowledge import bm25
    from graphs.knowledge import index as idx

    qs = questions(args.chunks // SECTIONS, args.recall_queries)
    kb, emb = knowledge_base(args, qs)
    snap = kb.snapshot
    assert snap is not None and snap.vectors is not None
    r10, r40, exact_ms = [], [], []
    for variants, _ in qs:
        for v in variants:
            q = np.asarray(emb.embed_query(v), dtype=np.float32)
            got = snap.dense(q, 40)
            t = time.perf_counter()
            sims = np.asarray(snap.vectors) @ q
            truth = np.argsort(-sims)[:40] + 1
            exact_ms.append((time.perf_counter() - t) * 1000)
            r10.append(len(set(got[:10]) & set(truth[:10].tolist())) / 10)
            r40.append(len(set(got) & set(truth.tolist())) / 40)
    same, full_ms, pruned_ms = 0, [], []
    for variants, _ in qs:
        for v in variants:
            phrases = idx.keyword_phrases(v)
            t = time.perf_counter()
            a = bm25.rank(snap.postings, idx.query_tokenizer(), phrases, 40, snap._phrase_scores)  # noqa: SLF001
            pruned_ms.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            b = rank_all(snap.postings, idx.query_tokenizer(), phrases, 40, snap._phrase_scores)  # noqa: SLF001
            full_ms.append((time.perf_counter() - t) * 1000)
            same += a == b
    return {
        "phase": "quality",
        "variants": len(r10),
        "graph": snap.ann is not None,
        "recall_at_10": round(float(np.mean(r10)), 4),
        "recall_at_40": round(float(np.mean(r40)), 4),
        "exact_scan_per_variant": pct(exact_ms),
        "keyword_same_as_full_scoring": f"{same} of {len(r10)}",
        "keyword_pruned_per_variant": pct(pruned_ms),
        "keyword_full_per_variant": pct(full_ms),
        "postings": int(len(snap.postings.rows)),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--chunks", type=int, default=100_000)
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--recall-queries", type=int, default=50)
    p.add_argument("--work", default="")
    p.add_argument("--rebuild", action="store_true", help="write the generation again even if kept")
    p.add_argument("--phase", choices=["build", "search", "quality"], help=argparse.SUPPRESS)
    p.add_argument("--out", default="")
    args = p.parse_args()
    args.work = args.work or f"/tmp/threadwise-bench-search-{args.chunks}"
    if args.phase:
        print(json.dumps({"build": build, "search": search, "quality": quality}[args.phase](args)))
        return
    results = {"chunks": args.chunks, "load_average_start": os.getloadavg()}
    kept = (Path(args.work) / "index" / "CURRENT").exists() and not args.rebuild
    for ph in ([] if kept else ["build"]) + ["search", "quality"]:
        cmd = [sys.executable, __file__, "--phase", ph, "--chunks", str(args.chunks), "--work", args.work]
        cmd += ["--queries", str(args.queries), "--recall-queries", str(args.recall_queries)]
        out = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
        if out.returncode:
            sys.exit(f"phase {ph} failed: {out.stderr[-2000:]}")
        results[ph] = json.loads(out.stdout.strip().splitlines()[-1])
        results[ph]["load_average_end"] = os.getloadavg()
        print(json.dumps(results[ph]), flush=True)
    out_path = Path(args.out or ROOT / "bench" / "results" / f"search-{args.chunks}.json")
    out_path.write_text(json.dumps(results, indent=1) + "\n")
    print(f"-> {out_path}")


if __name__ == "__main__":
    main()
