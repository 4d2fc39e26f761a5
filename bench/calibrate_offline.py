"""Calibrate and check the extractive offline path on an eval set, no chat model involved.

For every row of the eval set it runs the offline pieces the graph uses
(:mod:`graphs.offline_router`, :mod:`graphs.extractive`) and reports, on the whole set
and on its two halves (odd / even rows: thresholds picked on one half are scored on the
other, so nothing is tuned to single questions):

- route accuracy on kb / followup / direct rows for a grid of router margins;
- recall@1 / @5 of the first search, plain hybrid search vs. reranked;
- document relevance: for a grid of thresholds, answerable rows (kb, followup) that keep
  a document of an expected file vs. unanswerable rows (web: no page holds the answer)
  that keep none;
- facts found in the composed answers.

Usage: PYTHONPATH=. .venv/bin/python bench/calibrate_offline.py [--corpus DIR] [--eval FILE]
Writes bench/results/calibration.json.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from bench.extra_corpora import corpus_argument  # noqa: E402
from bench.offline_rows import mean, open_offline, queries_for, read_rows, search_queries_for  # noqa: E402
from graphs import extractive as ex  # noqa: E402
from graphs.offline_router import OfflineRouter  # noqa: E402

HERE = Path(__file__).resolve().parent


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--corpus",
        default=str(HERE.parent.parent / "shared/corpus/langgraph-docs"),
        type=corpus_argument,
        help="a folder, or the name of a corpus in a folder of THREADWISE_EXTRA_CORPORA",
    )
    ap.add_argument("--eval", default=str(HERE.parent.parent / "shared/eval/dev.jsonl"))
    ap.add_argument("--config", default=str(HERE.parent / "config.toml"))
    ap.add_argument("--cache", default="", help="pickle file caching text vectors between runs")
    args = ap.parse_args()
    rows = read_rows(args.eval)
    settings, kb, embedder = open_offline(args.config, args.corpus)
    cache = Path(args.cache) if args.cache else None
    if cache and cache.exists():  # vectors of earlier runs (same model): fast re-runs while calibrating
        embedder._cache.update(pickle.loads(cache.read_bytes()))
    brain = ex.Extractive(embedder, kb)
    router = OfflineRouter(embedder, kb)
    k = settings.knowledge.k

    per_row = []
    for n, row in enumerate(rows):
        qs = queries_for(row, settings)
        t = time.perf_counter()
        plain = kb.search(qs, k)
        sq = search_queries_for(row, settings)
        cands = kb.search(sq, k * 4)
        cos, title = brain.rerank_features([q if isinstance(q, str) else q[0] for q in sq], cands)
        docs = brain.retrieve(sq, k)
        reranked = docs
        grades = brain.grade(qs, docs)
        sig = router.signals(row["question"])
        route = router.decide(sig, bool(row.get("history")))
        per_row.append(
            {
                "id": row["id"],
                "kind": row["kind"],
                "half": n % 2,
                "expected_route": row["expected_route"],
                "sources": row.get("sources") or [],
                "facts": row.get("answer_facts") or [],
                "plain": [d["location"] for d in plain],
                "reranked": [d["location"] for d in reranked],
                "grades": grades,
                "cands": [d["location"] for d in cands],
                "cos": cos,
                "title": title,
                "signals": sig.__dict__,
                "history": bool(row.get("history")),
                "route": route,
                "docs": docs,
                "qs": qs,
                "seconds": time.perf_counter() - t,
            }
        )
        print(f"{row['id']} {time.perf_counter() - t:.1f}s", file=sys.stderr)

    if cache:
        cache.write_bytes(pickle.dumps(dict(embedder._cache)))
    report: dict = {"questions": len(rows)}
    # ---- retrieval
    for name in ("plain", "reranked"):
        for half in (0, 1, None):
            rs = [r for r in per_row if r["kind"] in ("kb", "followup") and (half is None or r["half"] == half)]
            report[f"recall_{name}_{'all' if half is None else 'half' + str(half)}"] = {
                "r1": mean([float(bool(r[name]) and r[name][0] in r["sources"]) for r in rs]),
                "r5": mean([float(any(x in r["sources"] for x in r[name][:5])) for r in rs]),
            }

    def rerank_recall(rs: list[dict], prior: float, tw: float) -> tuple[float, float]:
        r1, r5 = [], []
        for r in rs:
            order = np.argsort(-ex.Extractive.rerank_scores(r["cos"], r["title"], prior, tw), kind="stable")
            locs = list(dict.fromkeys(r["cands"][i] for i in order))[:5]
            r1.append(float(bool(locs) and locs[0] in r["sources"]))
            r5.append(float(any(x in r["sources"] for x in locs)))
        return mean(r1) or 0.0, mean(r5) or 0.0

    report["rerank"] = {}
    kbrows = [r for r in per_row if r["kind"] in ("kb", "followup")]
    pgrid = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.75, 1.0, 2.0, 100.0]
    tgrid = [0.0, 0.05, 0.1, 0.2, 0.3]
    for half in (0, 1):
        train = [r for r in kbrows if r["half"] == half]
        test = [r for r in kbrows if r["half"] != half]
        best = max(((p, t) for p in pgrid for t in tgrid), key=lambda pt: sum(rerank_recall(train, *pt)))
        report["rerank"][f"fit_half{half}"] = {
            "prior": best[0],
            "title": best[1],
            "train": rerank_recall(train, *best),
            "test": rerank_recall(test, *best),
        }
    report["rerank"]["grid_all"] = {f"{p},{t}": rerank_recall(kbrows, p, t) for p in pgrid for t in tgrid}

    # ---- routing
    def route_acc(rs: list[dict], margin: float, cur: float) -> float | None:
        router.margin, router.current_margin = margin, cur
        ok = []
        for r in rs:
            if r["expected_route"] == "websearch":
                continue
            s = ex_signals(r["signals"])
            route = decide(router, s, r["history"])
            ok.append(float(route == r["expected_route"]))
        return mean(ok)

    grid = [round(x * 0.02, 2) for x in range(-5, 11)]
    report["routing"] = {}
    for half in (0, 1):
        train = [r for r in per_row if r["half"] == half]
        test = [r for r in per_row if r["half"] != half]
        best = max(((m, c) for m in grid for c in grid), key=lambda mc: (route_acc(train, *mc), -abs(mc[0] - 0.05)))
        report["routing"][f"fit_half{half}"] = {
            "margin": best[0],
            "current_margin": best[1],
            "train": route_acc(train, *best),
            "test": route_acc(test, *best),
        }
    report["routing"]["grid_all"] = {f"{m},{c}": route_acc(per_row, m, c) for m in grid for c in grid[::2]}

    # ---- relevance threshold
    def grade_acc(rs: list[dict], th: float, hi: float | None = None) -> dict:
        ans = [r for r in rs if r["kind"] in ("kb", "followup")]
        una = [r for r in rs if r["kind"] == "web"]

        def t(r: dict) -> float:
            return hi if hi is not None and r["route"] == "websearch" else th

        keep_expected = [
            float(
                any(g >= t(r) and d["location"] in r["sources"] for g, d in zip(r["grades"], r["docs"], strict=False))
            )
            for r in ans
        ]
        keep_any = [float(any(g >= t(r) for g in r["grades"])) for r in ans]
        reject_una = [float(all(g < t(r) for g in r["grades"])) for r in una]
        return {
            "answerable_kept_expected": mean(keep_expected),
            "answerable_kept_any": mean(keep_any),
            "unanswerable_rejected": mean(reject_una),
            "balanced": mean([mean(keep_any) or 0.0, mean(reject_una) or 0.0]),
        }

    ths = [round(0.3 + 0.02 * i, 2) for i in range(30)]
    report["relevance"] = {}
    for half in (0, 1):
        train = [r for r in per_row if r["half"] == half]
        test = [r for r in per_row if r["half"] != half]
        best = max(ths, key=lambda t: (grade_acc(train, t)["balanced"], -t))
        report["relevance"][f"fit_half{half}"] = {
            "threshold": best,
            "train": grade_acc(train, best),
            "test": grade_acc(test, best),
        }
    report["relevance"]["grid_all"] = {str(t): grade_acc(per_row, t) for t in ths}
    # route-aware: the threshold for questions the router took for current events (hi) and
    # for the others (lo); unanswerable rows are the web rows
    report["relevance_route_aware"] = {}
    for half in (0, 1):
        train = [r for r in per_row if r["half"] == half]
        test = [r for r in per_row if r["half"] != half]
        best = max(
            ((lo, hi) for lo in ths for hi in ths if hi >= lo),
            key=lambda lh: (grade_acc(train, *lh)["balanced"], lh[0], lh[1]),
        )
        report["relevance_route_aware"][f"fit_half{half}"] = {
            "lo": best[0],
            "hi": best[1],
            "train": grade_acc(train, *best),
            "test": grade_acc(test, *best),
        }
    report["relevance_route_aware"]["configured"] = {
        "lo": brain.relevance_threshold,
        "hi": brain.current_relevance_threshold,
        **{
            f"half{h}": grade_acc(
                [r for r in per_row if r["half"] == h], brain.relevance_threshold, brain.current_relevance_threshold
            )
            for h in (0, 1)
        },
    }
    report["row_grades"] = {r["id"]: [round(g, 3) for g in r["grades"]] for r in per_row}
    # ---- composing (with the configured threshold)
    facts = []
    for r in per_row:
        if r["kind"] not in ("kb", "followup") or not r["facts"]:
            continue
        th = brain.current_relevance_threshold if r["route"] == "websearch" else brain.relevance_threshold
        kept = [d for g, d in zip(r["grades"], r["docs"], strict=False) if g >= th]
        answer = brain.compose(r["qs"], kept) if kept else ""
        found = sum(f.lower() in answer.lower() for f in r["facts"]) / len(r["facts"])
        facts.append(found)
        r["answer"] = answer
    report["facts_found_kb"] = mean(facts)
    # answer shape: facts found and answer length per half for a small grid of (character
    # budget, quoted sentences, following sentences, preceding sentences); each half picks
    # its best shape, scored on the other half
    report["compose"] = {}
    budget = ex.MAX_ANSWER_CHARACTERS
    for mc in (2400, 3000):
        ex.MAX_ANSWER_CHARACTERS = mc
        for ms in (6, 8, 10):
            for nb in (1, 2):
                for bf in (0, 1):
                    per_half: dict = {}
                    for half in (0, 1):
                        f, size = [], []
                        for r in per_row:
                            if r["kind"] not in ("kb", "followup") or not r["facts"] or r["half"] != half:
                                continue
                            th = (
                                brain.current_relevance_threshold
                                if r["route"] == "websearch"
                                else brain.relevance_threshold
                            )
                            kept = [d for g, d in zip(r["grades"], r["docs"], strict=False) if g >= th]
                            a = brain.compose(r["qs"], kept, max_sentences=ms, neighbours=nb, before=bf) if kept else ""
                            f.append(sum(x.lower() in a.lower() for x in r["facts"]) / len(r["facts"]))
                            size.append(len(a))
                        per_half[f"half{half}"] = {"facts": mean(f), "median_chars": sorted(size)[len(size) // 2]}
                    report["compose"][f"{mc},{ms},{nb},{bf}"] = per_half
    ex.MAX_ANSWER_CHARACTERS = budget
    grid = report["compose"]
    report["compose_cross"] = {}
    for fit, test in (("half0", "half1"), ("half1", "half0")):
        # ties go to the shorter answers (the first in grid order)
        best = max(grid, key=lambda key: (grid[key][fit]["facts"], -grid[key][fit]["median_chars"]))
        report["compose_cross"][f"fit_{fit}"] = {
            "shape": best,
            "train": grid[best][fit]["facts"],
            "test": grid[best][test]["facts"],
        }
    report["recall_misses"] = {
        name: [
            r["id"]
            for r in per_row
            if r["kind"] in ("kb", "followup") and not any(x in r["sources"] for x in r[name][:5])
        ]
        for name in ("plain", "reranked")
    }
    report["median_seconds"] = sorted(r["seconds"] for r in per_row)[len(per_row) // 2]
    out = HERE / "results" / "calibration.json"
    out.write_text(json.dumps(report, indent=1))
    (HERE / "results" / "calibration-answers.json").write_text(
        json.dumps([{"id": r["id"], "facts": r["facts"], "answer": r.get("answer", "")} for r in per_row], indent=1)
    )
    summary = {k: v for k, v in report.items() if k not in ("row_grades",)}
    summary["routing"] = {k: v for k, v in report["routing"].items() if k != "grid_all"}
    summary["relevance"] = {k: v for k, v in report["relevance"].items() if k != "grid_all"}
    summary["relevance_route_aware"] = report["relevance_route_aware"]
    summary["rerank"] = {k: v for k, v in report["rerank"].items() if k != "grid_all"}
    print(json.dumps(summary, indent=1))


def ex_signals(d: dict):
    from graphs.offline_router import RouteSignals

    return RouteSignals(**d)


def decide(router: OfflineRouter, s, has_history: bool) -> str:
    """The router's decision from precomputed signals (same rules as OfflineRouter.route)."""
    return router.decide(s, has_history)


if __name__ == "__main__":
    main()
