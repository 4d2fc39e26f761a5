"""Knowledge sources at scale: a synthetic corpus through a ``files`` source, with keyword
search and a local embedding server answering at a realistic latency.

    .venv/bin/python bench/bench_sources.py --docs 10000            # -> bench/results/sources-10000.json
    .venv/bin/python bench/bench_sources.py --docs 100000 --queries 200

Each document is Markdown of ``--sections`` sections (~900 characters each, so ~one chunk
per section: 10 sections -> ~10 chunks, 100,000 documents -> ~1M chunks), drawn from a
5,000-word vocabulary plus a few rare words per section, so keyword search has realistic
posting lists. The embedding server is a separate process speaking the OpenAI-shaped
``POST /v1/embeddings`` (deterministic unit vectors of ``--dim`` floats from each text's
hash) that sleeps ``--latency-ms`` plus ``--per-text-ms`` per text in a request, like a
CPU embedding server; the knowledge base talks to it through a small LangChain
``Embeddings`` client (one request of at most 64 texts at a time, as the product sends).

Phases, each in its own process so each peak RSS is its own (``ru_maxrss``):

1. ``full``: the first sync of the whole corpus (scan, convert, split, embed, write).
2. ``unchanged``: a sync with nothing changed.
3. ``incremental``: 1 % of the documents rewritten, then a sync.
4. ``search``: open the live generation as a running bot does and run ``--queries`` hybrid
   searches (two query variants each, like the graph: keyword + dense, fused with RRF),
   each query embedded by the server; p50/p95 of ``KnowledgeBase.search`` wall time.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

WORDS = [f"w{i:04d}" for i in range(5000)]
TOPICS = ["deploy", "auth", "billing", "cache", "queue", "search", "storage", "network", "metrics", "logging"]


def zipf_words(rng: random.Random, n: int) -> list[str]:
    """``n`` words with a Zipf-like spread (a few very common, many rare), as in prose."""
    return [WORDS[min(int(rng.paretovariate(1.1)) - 1, len(WORDS) - 1)] for _ in range(n)]


def document(i: int, sections: int, version: int = 0) -> str:
    rng = random.Random(i * 1000 + version)
    topic = TOPICS[i % len(TOPICS)]
    parts = [f"# {topic.title()} guide {i}\n"]
    for s in range(sections):
        words = zipf_words(rng, 120) + [f"term{i}x{s}", f"{topic}{s}"]
        rng.shuffle(words)
        para = " ".join(words)
        parts.append(f"## Part {s} of {topic} {i}\n\n{para[:860]}.\n")
    if version:
        parts.append(f"## Changes\n\nRevision {version} of document {i}.\n")
    return "\n".join(parts)


def write_corpus(folder: Path, docs: int, sections: int) -> None:
    for i in range(docs):
        p = folder / f"d{i % 100:02d}" / f"doc{i}.md"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(document(i, sections))


# ---- the embedding server (its own process) ----------------------------------------------


def serve_embeddings(port_out: multiprocessing.Queue, dim: int, latency_ms: float, per_text_ms: float) -> None:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # one response, one segment: no 40 ms delayed-ACK stall

        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
            time.sleep((latency_ms + per_text_ms * len(texts)) / 1000)
            data = []
            for n, t in enumerate(texts):
                seed = int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "little")
                v = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
                data.append({"object": "embedding", "index": n, "embedding": (v / np.linalg.norm(v)).tolist()})
            out = json.dumps({"object": "list", "data": data, "model": "bench"}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    port_out.put(server.server_address[1])
    server.serve_forever()


class ServerEmbeddings:
    """A LangChain ``Embeddings`` over the bench server (httpx, one request at a time)."""

    embedder_id = "bench:server"

    def __init__(self, base: str) -> None:
        import httpx

        self.client = httpx.Client(base_url=base, timeout=60)

    def _embed(self, texts: list[str]) -> list[list[float]]:
        r = self.client.post("/v1/embeddings", json={"model": "bench", "input": texts})
        r.raise_for_status()
        return [d["embedding"] for d in sorted(r.json()["data"], key=lambda d: d["index"])]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self._embed(texts)

    def embed_query(self, text: str) -> list[float]:
        return self._embed([text])[0]


def knowledge_base(work: Path, base: str):
    from langchain_core.embeddings import Embeddings

    from graphs.knowledge import KnowledgeBase
    from graphs.knowledge.connectors import FilesConnector

    class Emb(ServerEmbeddings, Embeddings):
        pass

    conn = FilesConnector("corpus", [work / "corpus"], ["**/*.md"])
    return KnowledgeBase(work / "index", connectors=[conn], embeddings=Emb(base), embedder_id="bench:server")


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def phase(args: argparse.Namespace) -> dict:
    work, base = Path(args.work), args.base
    kb = knowledge_base(work, base)
    if args.phase in ("full", "unchanged", "incremental"):
        if args.phase == "incremental":
            rng, stamp = random.Random(7), int(time.time())  # new text at every run, also on a kept corpus
            changed = rng.sample(range(args.docs), max(1, args.docs // 100))
            for i in changed:
                path = work / "corpus" / f"d{i % 100:02d}" / f"doc{i}.md"
                path.write_text(document(i, args.sections, version=stamp))
        t0 = time.perf_counter()
        stats = kb.reindex()
        wall = time.perf_counter() - t0
        r = stats.sources[0]
        return {
            "phase": args.phase,
            "seconds": round(wall, 1),
            "documents": stats.files,
            "chunks": stats.chunks,
            "embedded": stats.embedded_chunks,
            "updated": r.updated,
            "added": r.added,
            "peak_rss_mb": round(peak_mb()),
        }
    # search: as a running bot, the live generation opened once, then questions
    t0 = time.perf_counter()
    kb.snapshot  # noqa: B018
    open_s = time.perf_counter() - t0
    rng = random.Random(11)
    times = []
    for q in range(args.queries):
        i = rng.randrange(args.docs)
        topic = TOPICS[i % len(TOPICS)]
        question = f"how does {topic} handle term{i}x{rng.randrange(args.sections)} and {' '.join(zipf_words(rng, 3))}?"
        variants = [question, f"{topic} {' '.join(zipf_words(rng, 4))} query {q}"]
        t = time.perf_counter()
        docs = kb.search(variants, k=5)
        times.append((time.perf_counter() - t) * 1000)
        assert docs
    times.sort()
    return {
        "phase": "search",
        "queries": len(times),
        "open_seconds": round(open_s, 1),
        "p50_ms": round(statistics.median(times), 1),
        "p95_ms": round(times[int(len(times) * 0.95) - 1], 1),
        "max_ms": round(times[-1], 1),
        "peak_rss_mb": round(peak_mb()),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--docs", type=int, default=10000)
    p.add_argument("--sections", type=int, default=10)
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--dim", type=int, default=384, help="embedding size (384: MiniLM's)")
    p.add_argument("--latency-ms", type=float, default=20.0, help="per request")
    p.add_argument("--per-text-ms", type=float, default=0.2, help="per text in a request")
    p.add_argument("--work", default="", help="folder for the corpus and index (default: a temp folder)")
    p.add_argument("--phase", default="", help=argparse.SUPPRESS)
    p.add_argument("--base", default="", help=argparse.SUPPRESS)
    p.add_argument("--keep", action="store_true", help="keep the work folder")
    p.add_argument(
        "--phases",
        default="full,unchanged,incremental,search",
        help="phases to run (a kept --work folder can skip full)",
    )
    args = p.parse_args()
    if args.phase:
        print(json.dumps(phase(args)))
        return
    import tempfile

    work = Path(args.work or tempfile.mkdtemp(prefix="bench-sources-"))
    q: multiprocessing.Queue = multiprocessing.Queue()
    server = multiprocessing.Process(
        target=serve_embeddings, args=(q, args.dim, args.latency_ms, args.per_text_ms), daemon=True
    )
    server.start()
    base = f"http://127.0.0.1:{q.get(timeout=30)}"
    results: dict = {
        "docs": args.docs,
        "sections": args.sections,
        "dim": args.dim,
        "latency_ms": args.latency_ms,
        "per_text_ms": args.per_text_ms,
        "cpus": os.cpu_count(),
        "phases": [],
    }
    try:
        t0 = time.perf_counter()
        if not (work / "corpus").exists():
            write_corpus(work / "corpus", args.docs, args.sections)
        results["corpus_seconds"] = round(time.perf_counter() - t0, 1)
        for name in args.phases.split(","):
            cmd = [
                sys.executable,
                __file__,
                "--phase",
                name,
                "--base",
                base,
                "--work",
                str(work),
                "--docs",
                str(args.docs),
                "--sections",
                str(args.sections),
                "--queries",
                str(args.queries),
            ]
            # the bot's own setting (bot/cli/main.py): idle BLAS/OpenMP threads sleep instead of spinning
            env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_WAIT_POLICY": "PASSIVE"}
            done = subprocess.run(cmd, capture_output=True, text=True, env=env)
            if done.returncode != 0:
                raise SystemExit(f"phase {name} failed:\n{done.stderr[-3000:]}")
            row = json.loads(done.stdout.strip().splitlines()[-1])
            print(json.dumps(row), flush=True)
            results["phases"].append(row)
        index_bytes = sum(f.stat().st_size for f in (work / "index").rglob("*") if f.is_file())
        results["index_mb_on_disk"] = round(index_bytes / 1e6)
    finally:
        server.terminate()
        if not args.keep and not args.work:
            shutil.rmtree(work, ignore_errors=True)
    out = ROOT / "bench" / "results" / f"sources-{args.docs}.json"
    out.write_text(json.dumps(results, indent=1))
    print(f"-> {out}")


if __name__ == "__main__":
    main()
