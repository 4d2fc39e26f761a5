"""Retrieval quality and cost of the knowledge base on an eval set (no LLM involved).

Measures recall@1 / recall@5 of the expected source files for the kb and followup
questions, for keyword-only (BM25) and hybrid (BM25 + local MiniLM, RRF) search, with the
query variants the retrieve node uses when the router's rewrite is not available (the raw
message, plus the previous user turn for follow-ups). Also full and incremental reindex
wall time and the peak resident memory of the process.

``--backend`` picks how the local model runs (``[models] local_embedding_backend``: torch,
onnx, onnx-int8; default the product's "auto"); results go to ``results/retrieval.json``,
or ``results/retrieval-<backend>.json`` for an explicit backend.

Usage: .venv/bin/python bench/bench_retrieval.py [--corpus DIR] [--eval FILE] [--backend B] [--skip-incremental]
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.config import ModelSettings  # noqa: E402
from graphs.knowledge import KnowledgeBase  # noqa: E402
from graphs.models import build_embeddings  # noqa: E402

HERE = Path(__file__).resolve().parent


def queries_for(row: dict) -> list[str]:
    users = [h["content"] for h in row.get("history", []) if h["role"] == "user"]
    return [row["question"]] + ([f"{users[-1]} {row['question']}"] if users else [])


def recall(kb: KnowledgeBase, rows: list[dict]) -> dict:
    r1, r5, fu, lat = [], [], [], []
    for row in rows:
        t = time.perf_counter()
        locs = [d["location"] for d in kb.search(queries_for(row), 5)]
        lat.append(time.perf_counter() - t)
        r1.append(bool(locs[:1]) and locs[0] in row["sources"])
        hit = any(loc in row["sources"] for loc in locs)
        r5.append(hit)
        if row["kind"] == "followup":
            fu.append(hit)
    return {
        "recall_at_1": round(sum(r1) / len(r1), 3),
        "recall_at_5": round(sum(r5) / len(r5), 3),
        "recall_at_5_followup": round(sum(fu) / len(fu), 3) if fu else None,
        "median_search_ms": round(statistics.median(lat) * 1000, 1),
    }


class _Done(Exception):
    """Ends the measurements early (``--skip-incremental``)."""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default=str(HERE.parent.parent / "shared/corpus/langgraph-docs"))
    ap.add_argument("--eval", default=str(HERE.parent.parent / "shared/eval/dev.jsonl"))
    ap.add_argument("--backend", choices=["auto", "torch", "onnx", "onnx-int8"], default="auto")
    ap.add_argument(
        "--max-tokens",
        type=int,
        default=None,
        help="word pieces read per text ([models] local_embedding_max_tokens; default the product's, "
        "0 = the model's own 256)",
    )
    ap.add_argument(
        "--skip-incremental", action="store_true", help="skip the one-file-changed reindex (a second full embedding)"
    )
    args = ap.parse_args()
    rows = [json.loads(line) for line in Path(args.eval).read_text().splitlines() if line.strip()]
    rows = [r for r in rows if r["kind"] in ("kb", "followup")]
    report: dict = {"questions": len(rows), "backend": args.backend, "max_tokens": args.max_tokens}
    tmp = Path(tempfile.mkdtemp(prefix="tw-bench-"))
    try:
        kb = KnowledgeBase(tmp / "bm25", [args.corpus])
        t = time.perf_counter()
        s = kb.reindex()
        report["reindex_keyword_s"] = round(time.perf_counter() - t, 1)
        report["files"], report["chunks"] = s.files, s.chunks
        report["keyword"] = recall(kb, rows)

        t = time.perf_counter()
        emb, eid = build_embeddings("local", ModelSettings(local_embedding_backend=args.backend))
        if args.max_tokens is not None:
            emb.max_tokens = args.max_tokens or None
            eid = emb.embedder_id
        emb.load()  # an ONNX export, if not cached yet, is timed here and not in the reindex
        report["embedder_load_s"] = round(time.perf_counter() - t, 1)
        report["embedder"], report["embedder_backend"] = emb.embedder_id, emb.backend
        kb = KnowledgeBase(tmp / "hybrid", [args.corpus], embeddings=emb, embedder_id=eid)
        t = time.perf_counter()
        kb.reindex()
        report["reindex_hybrid_full_s"] = round(time.perf_counter() - t, 1)
        report["hybrid"] = recall(kb, rows)

        report["hybrid_peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 0)
        if args.skip_incremental:
            raise _Done
        # incremental: copy the corpus, change one file, reindex
        corpus = tmp / "corpus"
        shutil.copytree(args.corpus, corpus)
        kb = KnowledgeBase(tmp / "incr", [corpus], embeddings=emb, embedder_id=eid)
        kb.reindex()
        first = sorted(corpus.rglob("*.md"))[0]
        first.write_text(first.read_text() + "\n\n## Added\nA new paragraph.\n")
        t = time.perf_counter()
        s = kb.reindex()
        report["reindex_hybrid_one_file_changed_s"] = round(time.perf_counter() - t, 2)
        report["reindex_one_file_embedded_chunks"] = s.embedded_chunks
        report["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 0)
    except _Done:
        pass
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(report, indent=1))
    name = (
        "retrieval"
        + ("" if args.backend == "auto" else f"-{args.backend}")
        + ("" if args.max_tokens is None else f"-max{args.max_tokens}")
    )
    out = HERE / "results" / f"{name}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
