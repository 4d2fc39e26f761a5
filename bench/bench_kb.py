"""Reindex time and search latency of the knowledge base (issue 11, "Fast under load").

Reindex is timed from outside: ``python -m bot reindex --config CFG`` as a subprocess
(wall time, so interpreter start and imports count), on a fresh index folder ("full") and
again on the same folder with nothing changed ("unchanged"); the CLI's own figure (the
``in S s`` of its last line) is kept too. Search latency is ``KnowledgeBase.search`` (built
as the bot builds it, :func:`bot.runtime.build_knowledge_base`) over every question of the
eval file, one query each, top ``[knowledge] k``, after one warm-up pass.

Keyword only (``[knowledge] embeddings = "none"``) by default; ``--embeddings`` does the
same with local MiniLM embeddings (minutes on a shared 2-core machine) and hybrid search.

``--max-tokens N`` sets ``[models] local_embedding_max_tokens`` (0: the model's own, 256).
``--backend`` picks ``[models] local_embedding_backend`` (torch, onnx, onnx-int8; default the
product's "auto"). Peak RSS: of the reindex subprocesses (``RUSAGE_CHILDREN``) and of this
process after the search passes (the model loaded for queries).

Usage: python bench/bench_kb.py [--embeddings] [--backend B] [--repeats 3] [--label NAME]
Writes key "kb" (or "kb_embeddings") of bench/results/load-<label>.json.
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_harness import ROOT, bot_env, median_of, percentile, write_bench_config  # noqa: E402
from bench_load import common_args, default_label, update_results  # noqa: E402

_INDEXED = re.compile(r"Indexed (\d+) documents? into (\d+) chunks? \((\d+) embedded, (\d+) reused\) in ([\d.]+) s")


def reindex(config: Path, timeout: float) -> dict[str, Any]:
    """Run ``python -m bot reindex --config CFG``; wall seconds and the CLI's own figures.

    Raises:
        RuntimeError: the command failed (its output attached).
    """
    env = bot_env({"COLUMNS": "300"})
    env.pop("MISTRAL_API_KEY", None)  # embeddings are chosen by the config, not by a key
    t = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "bot", "reindex", "--config", str(config)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    wall = time.monotonic() - t
    text = " ".join((proc.stdout + proc.stderr).split())
    m = _INDEXED.search(text)
    if proc.returncode != 0 or not m:
        raise RuntimeError(f"reindex failed ({proc.returncode}): {text[-2000:]}")
    files, chunks, embedded, reused, seconds = m.groups()
    return {
        "wall_s": round(wall, 2),
        "cli_s": float(seconds),
        "files": int(files),
        "chunks": int(chunks),
        "embedded": int(embedded),
        "reused": int(reused),
    }


def search_latency(config: Path, questions: list[str]) -> dict[str, Any]:
    """p50/p95 of one ``KnowledgeBase.search([question], k)`` over ``questions`` (ms): ``cold_*``
    the first pass (every query new to the process), the others a second pass (repeated queries)."""
    from bot.config import load_settings
    from bot.runtime import build_knowledge_base
    from graphs.models import build_embeddings

    settings = load_settings(config)
    emb, emb_id = build_embeddings(settings.knowledge.embeddings, settings.models)
    kb = build_knowledge_base(settings, emb, emb_id)
    k = settings.knowledge.k
    cold = []
    for q in questions:  # warm-up: caches, first embedding call; timed as "cold" (each query new)
        t = time.perf_counter()
        kb.search([q], k)
        cold.append((time.perf_counter() - t) * 1000)
    cold = cold[1:] or cold  # the very first call loads the model
    lat = []
    for q in questions:
        t = time.perf_counter()
        kb.search([q], k)
        lat.append((time.perf_counter() - t) * 1000)
    return {
        "queries": len(lat),
        "p50_ms": round(percentile(lat, 0.5), 2),
        "p95_ms": round(percentile(lat, 0.95), 2),
        "max_ms": round(max(lat), 2),
        "cold_p50_ms": round(percentile(cold, 0.5), 2),
        "cold_p95_ms": round(percentile(cold, 0.95), 2),
        "embedder": kb.embedder_id,
        "backend": getattr(emb, "backend", None),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common_args(ap)
    ap.add_argument("--embeddings", action="store_true", help="local MiniLM embeddings and hybrid search (slow)")
    ap.add_argument("--repeats", type=int, default=0, help="default 3 keyword-only, 1 with embeddings")
    ap.add_argument("--reindex-timeout", type=float, default=1800)
    ap.add_argument(
        "--backend",
        choices=["auto", "torch", "onnx", "onnx-int8"],
        default="auto",
        help="[models] local_embedding_backend (with --embeddings)",
    )
    ap.add_argument(
        "--max-tokens",
        type=int,
        default=0,
        help="[models] local_embedding_max_tokens (with --embeddings; 0 = the model's own)",
    )
    args = ap.parse_args()
    kind = "local" if args.embeddings else "none"
    repeats = args.repeats or (1 if args.embeddings else 3)
    if not 1 <= repeats <= 10:
        ap.error("--repeats 1..10")
    label = args.label or default_label()
    rows = [json.loads(line) for line in Path(args.eval).read_text().splitlines() if line.strip()]
    questions = [r["question"] for r in rows]
    folder = Path(tempfile.mkdtemp(prefix="tw-kb-"))
    runs: list[dict[str, Any]] = []
    try:
        for i in range(repeats):
            sub = folder / f"r{i}"
            sub.mkdir()
            cfg = write_bench_config(
                sub,
                slack_api="http://127.0.0.1:9/api/",
                llm_base_url="http://127.0.0.1:9/v1",
                port=9,
                corpus=Path(args.corpus),
                embeddings=kind,
            )
            backend = (
                f'[models]\nlocal_embedding_backend = "{args.backend}"\n'
                f"local_embedding_max_tokens = {args.max_tokens}\n"
            )
            cfg.write_text(cfg.read_text().replace("[models]\n", backend, 1))
            full = reindex(cfg, args.reindex_timeout)
            unchanged = reindex(cfg, args.reindex_timeout)
            run = {"full": full, "unchanged": unchanged}
            runs.append(run)
            print(
                f"[{kind}] full {full['wall_s']} s (cli {full['cli_s']} s, {full['chunks']} chunks, "
                f"{full['embedded']} embedded), unchanged {unchanged['wall_s']} s (cli {unchanged['cli_s']} s)",
                flush=True,
            )
            if i == repeats - 1:
                try:
                    run["search"] = search_latency(cfg, questions)
                except Exception as exc:  # noqa: BLE001 - keep the reindex figures
                    run["search"] = {"error": f"{type(exc).__name__}: {exc}"}
                print(f"[{kind}] search {run['search']}", flush=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    summary = {
        "embeddings": kind,
        "backend": args.backend,
        "max_tokens": args.max_tokens,
        "reindex_peak_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024,
        "reindex_full_s": median_of([r["full"]["wall_s"] for r in runs]),
        "reindex_full_cli_s": median_of([r["full"]["cli_s"] for r in runs]),
        "reindex_unchanged_s": median_of([r["unchanged"]["wall_s"] for r in runs]),
        "reindex_unchanged_cli_s": median_of([r["unchanged"]["cli_s"] for r in runs]),
        "files": runs[-1]["full"]["files"],
        "chunks": runs[-1]["full"]["chunks"],
        "search": runs[-1]["search"],
    }
    path = update_results(
        label,
        "kb_embeddings" if args.embeddings else "kb",
        {"summary": summary, "runs": runs, "repeats": repeats, "corpus": args.corpus},
    )
    print(json.dumps(summary, indent=1))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
