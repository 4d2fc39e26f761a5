"""Measure the offline (extractive) answers on an eval set without the graph: retrieval,
document grading and the composed answer's shape, fast enough to compare answer shapes.

For every row it runs what the extractive path of the graph runs on a first pass: the
embedding router, the reranked search widened to sections (with the offline query
variants), the document grader with its thresholds, the composer. Retrieval and grades
are cached per corpus and eval file (``--cache DIR``), so a change of the composer is
measured in seconds. The official end-to-end figures come from ``threadwise eval``.

Reports recall@1/@5 (kb + follow-up rows), facts found, median answer characters, the
median position of the first expected fact and the share of answered rows with it in
the first 300 characters, help requests with the expected page retrieved, answers with
template syntax. ``--halves`` adds the same on odd / even rows. ``--negatives FILE...``
asks other corpora's questions too and counts those answered instead of sent to the experts.

Usage:
    OMP_NUM_THREADS=1 PYTHONPATH=. python bench/answer_shape.py --corpus DIR --eval FILE [--show]

``--corpus`` takes a folder, or the name of a corpus in a folder of ``THREADWISE_EXTRA_CORPORA``
(bench/extra_corpora.py: ``--corpus httpx-docs``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pickle
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from bench.extra_corpora import corpus_argument  # noqa: E402
from bench.offline_rows import (  # noqa: E402
    mean,
    open_offline,
    queries_for,
    read_rows,
    row_state,
    search_queries_for,
)
from bot.config import Settings  # noqa: E402
from bot.eval import first_fact_position, has_template_syntax  # noqa: E402
from graphs import extractive as ex  # noqa: E402
from graphs import signals  # noqa: E402
from graphs.composers import followup_focus  # noqa: E402
from graphs.knowledge.crosslingual import load_encoder  # noqa: E402
from graphs.offline_router import OfflineRouter  # noqa: E402

HERE = Path(__file__).resolve().parent
CACHE_FORMAT = 2  # 2: a row's follow-up focus is cached with its retrieval (from the one routing of the row)


def measure(rows: list[dict], brain: ex.Extractive, **shape) -> dict:
    """Compose each row's answer from its cached documents (``shape``: keyword arguments of
    :meth:`graphs.extractive.Extractive.compose`) and score it."""
    out = []
    for r in rows:
        th = brain.threshold_for(r["qs"], r["route"] == "websearch", brain.passage_match(r["qs"], r["docs"]))
        kept = [d for g, d in zip(r["grades"], r["docs"], strict=False) if g >= th]
        if r["route"] == "websearch" and signals.asks_for_now(r["question"]):
            kept = []  # the extractive graders: documents cannot tell what is true right now
        elif kept and r["route"] != "websearch" and brain.only_common_words(r["qs"], r["docs"]):
            kept = []  # the extractive graders: the pages share only the words every page holds
        focus = r.get("focus", [])
        answer = brain.compose(r["qs"], kept, focus=focus, **shape) if kept and r["route"] != "direct" else ""
        facts = r["facts"]
        found = [f for f in facts if f.lower() in answer.lower()]
        out.append(
            {
                **{k: r[k] for k in ("id", "kind", "route", "expected_route", "sources", "facts", "retrieved")},
                "answer": answer,
                "chars": len(answer),
                "facts_found": len(found) / len(facts) if facts else None,
                "first_fact_at": first_fact_position(answer, facts),
                "template": has_template_syntax(answer),
                "help": bool(r["kind"] in ("kb", "followup") and not kept),
            }
        )
    return {"rows": out, "totals": totals(out)}


def totals(out: list[dict]) -> dict:
    kb = [r for r in out if r["kind"] in ("kb", "followup")]
    answered = [r for r in kb if r["answer"]]
    with_facts = [r for r in answered if r["facts"]]
    firsts = [r["first_fact_at"] for r in with_facts if r["first_fact_at"] is not None]
    return {
        "kb_followup": len(kb),
        "recall_at_1": mean([float(bool(r["retrieved"]) and r["retrieved"][0] in r["sources"]) for r in kb]),
        "recall_at_5": mean([float(any(x in r["sources"] for x in r["retrieved"][:5])) for r in kb]),
        "facts_found": mean([r["facts_found"] for r in kb if r["facts_found"] is not None]),
        "answered": len(answered),
        "median_answer_chars": statistics.median([r["chars"] for r in answered]) if answered else None,
        "median_first_fact_at": statistics.median(firsts) if firsts else None,
        "first_fact_within_300": mean(
            [float(r["first_fact_at"] is not None and r["first_fact_at"] < 300) for r in with_facts]
        ),
        "help_page_retrieved": sum(r["help"] and any(x in r["sources"] for x in r["retrieved"][:5]) for r in kb),
        "web_answered": sum(bool(r["answer"]) for r in out if r["kind"] == "web"),
        "template_syntax": sum(r["template"] for r in out),
        "route_accuracy": mean([float(r["route"] == r["expected_route"]) for r in out]),
    }


def negatives(files: list[str], brain: ex.Extractive, router: OfflineRouter, k: int, per_file: int = 12) -> dict:
    """Ask the first ``per_file`` kb questions of each of ``files`` (other corpora's eval sets)
    as the graph's first pass does; count those answered (a document kept) instead of sent to
    the experts. Questions routed ``direct`` are not searched; a current-events question
    about the present moment is never answered from documents."""
    asked = answered = 0
    ids = []
    for f in files:
        rows = [json.loads(line) for line in Path(f).read_text().splitlines() if line.strip()]
        for row in [r for r in rows if r["kind"] == "kb"][:per_file]:
            q = row["question"]
            asked += 1
            route = router.decide(router.signals(q), False)
            if route == "direct" or (route == "websearch" and signals.asks_for_now(q)):
                continue
            docs = brain.retrieve([q], k)
            th = brain.threshold_for([q], route == "websearch", brain.passage_match([q], docs))
            passing = any(g >= th for g in brain.grade([q], docs))
            if passing and (route == "websearch" or not brain.only_common_words([q], docs)):
                answered += 1
                ids.append(row["id"])
    return {"negatives_asked": asked, "negatives_answered": answered, "answered_ids": ids}


def retrieval(
    corpus: str, eval_file: str, config: str, cache_dir: str, fresh: bool = False, cross: bool = False
) -> tuple[list[dict], ex.Extractive, OfflineRouter, Settings]:
    """Each row of ``eval_file`` routed and retrieved as the graph's first pass does it on the
    folder ``corpus`` (its question variants, route, documents and their grades, expected facts,
    follow-up focus), cached in ``cache_dir`` per corpus and eval file (``fresh``: retrieve again);
    with the extractive brain and router used."""
    rows = read_rows(eval_file)
    settings, kb, embedder = open_offline(config, corpus)
    brain = ex.Extractive(embedder, kb, cross_encoder=load_encoder() if cross else None)
    router = OfflineRouter(embedder, kb, extractive=brain)
    key = hashlib.sha256(
        f"{Path(corpus).resolve()}\n{Path(eval_file).resolve()}\n"
        f"{Path(eval_file).stat().st_mtime}\n{cross}\n{CACHE_FORMAT}".encode()
    ).hexdigest()[:12]
    cache = Path(cache_dir) / f"retrieval-{key}.pkl"
    vec_cache = Path(cache_dir) / "vectors.pkl"
    if vec_cache.exists():
        embedder._cache.update(pickle.loads(vec_cache.read_bytes()))
    if cache.exists() and not fresh:
        return pickle.loads(cache.read_bytes()), brain, router, settings
    per_row = []
    for row in rows:
        state = row_state(row, settings, router)  # routed once, as the graph's route step does
        qs = queries_for(row, settings, state)
        route = state["route"]
        docs = brain.retrieve(search_queries_for(row, settings, state), settings.knowledge.k)
        per_row.append(
            {
                "id": row["id"],
                "kind": row["kind"],
                "route": route,
                "qs": qs,
                "docs": docs,
                "grades": brain.grade(qs, docs),
                "expected_route": row["expected_route"],
                "sources": row.get("sources") or [],
                "facts": row.get("answer_facts") or [],
                "retrieved": [d["location"] for d in docs],
                "question": row["question"],
                "focus": followup_focus(state, settings.graph.history_messages),  # a follow-up's own new terms
            }
        )
        print(
            f"{row['id']} route {route} grades {[round(g, 2) for g in per_row[-1]['grades']]} "
            f"retrieved {per_row[-1]['retrieved'][:3]}",
            file=sys.stderr,
            flush=True,
        )
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_bytes(pickle.dumps(per_row))
    vec_cache.write_bytes(pickle.dumps(dict(embedder._cache)))
    return per_row, brain, router, settings


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", required=True, type=corpus_argument, help="a folder, or a corpus name")
    ap.add_argument("--eval", required=True)
    ap.add_argument("--config", default=str(HERE.parent / "config.toml"))
    ap.add_argument("--cache", default="/tmp/threadwise-bench", help="folder caching retrieval per corpus + eval")
    ap.add_argument("--fresh", action="store_true", help="retrieve again (after a retrieval change)")
    ap.add_argument("--show", action="store_true", help="print every answer")
    ap.add_argument("--halves", action="store_true", help="also report odd / even rows")
    ap.add_argument("--json", default="", help="write rows and totals here")
    ap.add_argument("--cross", action="store_true", help="with the multilingual encoder ([graph] cross_language)")
    ap.add_argument("--grid", action="store_true", help="facts / length / first fact for a grid of answer shapes")
    ap.add_argument(
        "--negatives",
        nargs="*",
        default=[],
        help="other corpora's eval files: their first 12 kb questions, which this corpus does not answer, "
        "are asked too; reports how many are answered with quotes instead of a help request",
    )
    args = ap.parse_args()
    per_row, brain, router, settings = retrieval(
        args.corpus, args.eval, args.config, args.cache, args.fresh, args.cross
    )
    embedder = brain.embedder
    vec_cache = Path(args.cache) / "vectors.pkl"
    t = time.perf_counter()
    if args.grid:
        for budget in (700,):
            for la, lb in ((1, 0), (1, 1), (2, 0), (2, 1), (3, 0), (3, 1)):
                for nb, bf in ((1, 1), (3, 1), (2, 0)):
                    tt = [
                        totals(
                            measure(
                                per_row, brain, budget=budget, neighbours=nb, before=bf, lead_after=la, lead_before=lb
                            )["rows"][h::2]
                        )
                        for h in (0, 1)
                    ]
                    print(
                        f"lead {la} {lb} support {nb} {bf}: "
                        + " | ".join(
                            f"facts {x['facts_found']} chars {x['median_answer_chars']} first300 "
                            f"{x['first_fact_within_300']}"
                            for x in tt
                        ),
                        flush=True,
                    )
        return
    if args.negatives:
        print(json.dumps(negatives(args.negatives, brain, router, settings.knowledge.k)))
    report = measure(per_row, brain)
    vec_cache.parent.mkdir(parents=True, exist_ok=True)
    vec_cache.write_bytes(pickle.dumps(dict(embedder._cache)))
    if args.show:
        for r, src in zip(report["rows"], per_row, strict=True):
            print(
                f"--- {r['id']} [{r['kind']}, route {r['route']}] facts {r['facts_found']} "
                f"first@{r['first_fact_at']} {r['chars']} chars\nQ: {src['question']}\nexpected: {r['facts']} "
                f"in {r['sources']}\nretrieved: {r['retrieved']}\n{r['answer']}\n"
            )
    print(json.dumps(report["totals"], indent=1))
    if args.halves:
        for h in (0, 1):
            print(f"half {h}:", json.dumps(totals(report["rows"][h::2])))
    print(f"composed in {time.perf_counter() - t:.1f}s", file=sys.stderr)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
