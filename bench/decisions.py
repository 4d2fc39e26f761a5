"""The offline decisions on every tuning set, first pass: the route the router takes, and whether
the grader answers or asks the experts, as the graph decides them (:func:`graphs.offline.route_message`'s
rules, :func:`graphs.graders.relevance_grades`), on the cached retrieval of ``bench/answer_shape.py``.

Per set it counts: kb + follow-up rows answered, sent to the experts (help requests, and those with
an expected page in the top 5) and routed away from the documents (direct, or to the web when the
knowledge base then fails the current-events bar); greeting / general-knowledge rows routed
``direct`` and current-events rows routed ``websearch``. ``--before`` adds the same with the
router's word vetoes off (:meth:`graphs.offline_router.OfflineRouter.vetoed`) and sentences graded
without their section heading's words (:data:`graphs.extractive.GRADE_HEADING_WORDS`), to see what
they move. ``--offtopic FILE`` asks the questions of a JSON-lines file of ``{"corpus", "question"}``
rows (questions no page of that corpus answers, bench/offtopic.jsonl: the corpus is a set's
name or a folder of this repository) and counts those answered with quotes.

Usage:
    OMP_NUM_THREADS=1 THREADWISE_EXTRA_CORPORA=/work/corpora:/work/heldout5/corpora:/work/heldout6/corpora \\
        PYTHONPATH=. python bench/decisions.py --cache DIR [--only NAME ...] [--before] [--offtopic FILE] [--json OUT]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from bench.answer_shape import retrieval  # noqa: E402
from bench.extra_corpora import corpus_folder  # noqa: E402
from bench.fit_lead import TUNING  # noqa: E402
from bench.offline_rows import open_offline, read_rows, row_state  # noqa: E402
from graphs import extractive as ex  # noqa: E402
from graphs.graders import documents_define, relevance_grades  # noqa: E402
from graphs.offline import as_general_knowledge, follows_thread  # noqa: E402
from graphs.offline_router import OfflineRouter, RouteSignals  # noqa: E402

HERE = Path(__file__).resolve().parent
# the sixth pair, tuning since 2026-12-04 (until bench/fit_lead.py's TUNING lists it)
SIXTH = [
    ("darktable", "darktable-docs", str(HERE / "eval/darktable-docs-heldout6.jsonl")),
    ("jupiterone", "jupiterone-policies", str(HERE / "eval/jupiterone-policies-heldout6.jsonl")),
]


def sets() -> list[tuple[str, str, str]]:
    """``(name, corpus, eval file)`` of every tuning set."""
    names = {name for name, _, _ in TUNING}
    return list(TUNING) + [s for s in SIXTH if s[0] not in names]


def unvetoed(s: RouteSignals) -> RouteSignals:
    """``s`` with the router's word vetoes off (every class may win on its embedding)."""
    return dataclasses.replace(s, chat_words=True, own_setup=False, lookup=False, timely=True)


def outcome(brain: ex.Extractive, route: str, r: dict, before: bool = False) -> str:
    """What the first pass of a row ends in: ``direct``, ``answer`` or ``help`` (``before``: graded
    without the section heading's words, :data:`graphs.extractive.GRADE_HEADING_WORDS`)."""
    if route == "direct":
        return "direct"
    current = route == "websearch"  # offline: no web search, the knowledge base is searched with the higher bar
    saved = ex.GRADE_HEADING_WORDS
    ex.GRADE_HEADING_WORDS = saved and not before
    try:
        grades = relevance_grades(brain, r["qs"], r["question"], r["docs"], current, current)
    finally:
        ex.GRADE_HEADING_WORDS = saved
    return "answer" if any(g.relevant for g in grades.documents) else "help"


def decide_set(name: str, corpus: str, eval_file: str, config: str, cache: str, before: bool) -> dict:
    """The decisions on one set (see the module docstring)."""
    per_row, brain, router, settings = retrieval(str(corpus_folder(corpus)), eval_file, config, cache)
    rows = {row["id"]: row for row in read_rows(eval_file)}
    limit = settings.graph.history_messages
    out: dict = {"set": name, "rows": []}
    for r in per_row:
        row = rows[r["id"]]
        state = row_state(row)
        sig = router.signals(row["question"])
        follow_up = follows_thread(state, limit, router, sig)  # type: ignore[arg-type]
        routes = {"after": router.decide(sig, follow_up)}
        if (
            routes["after"] == "direct"
            and as_general_knowledge(sig)
            and documents_define(brain, row["question"], r["docs"])
        ):
            routes["after"] = "vectorstore"  # the route step's check (graphs.offline.route_message)
        if before:
            routes["before"] = router.decide(unvetoed(sig), follow_up)
        item = {"id": r["id"], "kind": r["kind"], "question": row["question"]}
        top5 = any(x in r["sources"] for x in r["retrieved"][:5])
        for when, route in routes.items():
            item[f"route_{when}"] = route
            kb_row = r["kind"] in ("kb", "followup")
            item[f"outcome_{when}"] = outcome(brain, route, r, when == "before") if kb_row else ""
            if (
                when == "after"
                and item[f"outcome_{when}"] == "help"
                and not follow_up
                and not (route == "websearch" and sig.asks_for_now)  # "needs current information"
                and router.off_topic(sig)
            ):
                item[f"outcome_{when}"] = "polite"  # the graph's give-up step (graphs.nodes.Nodes.off_topic)
            item[f"help_top5_{when}"] = item[f"outcome_{when}"] == "help" and top5
        out["rows"].append(item)
    for when in routes:
        kb = [x for x in out["rows"] if x["kind"] in ("kb", "followup")]
        out[when] = {
            "kb_followup": len(kb),
            "answered": sum(x[f"outcome_{when}"] == "answer" for x in kb),
            "help": sum(x[f"outcome_{when}"] == "help" for x in kb),
            "polite": sum(x[f"outcome_{when}"] == "polite" for x in kb),
            "help_page_top5": sum(x[f"help_top5_{when}"] for x in kb),
            "kb_direct": sum(x[f"outcome_{when}"] == "direct" for x in kb),
            "kb_websearch": sum(x[f"route_{when}"] == "websearch" for x in kb),
            "direct_kept": sum(x[f"route_{when}"] == "direct" for x in out["rows"] if x["kind"] == "direct"),
            "direct_rows": sum(x["kind"] == "direct" for x in out["rows"]),
            "web_kept": sum(x[f"route_{when}"] == "websearch" for x in out["rows"] if x["kind"] == "web"),
            "web_rows": sum(x["kind"] == "web" for x in out["rows"]),
        }
    return out


def offtopic(path: str, config: str, before: bool) -> dict:
    """Each question of ``path`` asked on its corpus as the graph's first pass does (routed, searched,
    graded): how many are answered with quotes, per corpus."""
    rows = read_rows(path)
    report: dict = {}
    named = {name: corpus for name, corpus, _ in sets()}
    for corpus in dict.fromkeys(r["corpus"] for r in rows):
        folder = corpus_folder(named[corpus]) if corpus in named else HERE.parent / corpus
        settings, kb, embedder = open_offline(config, folder)
        brain = ex.Extractive(embedder, kb)
        router = OfflineRouter(embedder, kb, extractive=brain)
        answered: dict[str, list[str]] = {"after": [], "before": []}
        polite: list[str] = []  # not answered, and the polite reply rather than the experts
        asked = [r for r in rows if r["corpus"] == corpus]
        for r in asked:
            q = r["question"]
            sig = router.signals(q)
            docs = brain.retrieve([q], settings.knowledge.k)
            item = {"qs": [q], "question": q, "docs": docs}
            for when in ("after", "before") if before else ("after",):
                route = router.decide(sig if when == "after" else unvetoed(sig))
                if (
                    when == "after"
                    and route == "direct"
                    and as_general_knowledge(sig)
                    and documents_define(brain, q, docs)
                ):
                    route = "vectorstore"
                decided = outcome(brain, route, item, when == "before")
                if decided == "answer":
                    answered[when].append(q)
                elif when == "after" and (
                    decided == "direct" or (router.off_topic(sig) and not (route == "websearch" and sig.asks_for_now))
                ):
                    polite.append(q)
        report[corpus] = {
            "asked": len(asked),
            **{f"answered_{k}": v for k, v in answered.items() if v or k == "after"},
            "polite_after": polite,
        }
        print(corpus, json.dumps({k: len(v) if isinstance(v, list) else v for k, v in report[corpus].items()}))
    return report


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default=str(HERE.parent / "config.toml"))
    ap.add_argument("--cache", default="/tmp/threadwise-bench")
    ap.add_argument("--only", nargs="*", default=[], help="set names (default: every tuning set)")
    ap.add_argument("--before", action="store_true", help="also decide with the router's word vetoes off")
    ap.add_argument("--offtopic", default="", help="a JSON-lines file of off-topic {corpus, question} rows")
    ap.add_argument("--json", default="", help="write the rows and counts here")
    args = ap.parse_args()
    report: dict = {"sets": []}
    if not args.offtopic or args.only:
        for name, corpus, eval_file in sets():
            if args.only and name not in args.only:
                continue
            res = decide_set(name, corpus, eval_file, args.config, args.cache, args.before)
            report["sets"].append(res)
            print(name, json.dumps({k: v for k, v in res.items() if k in ("before", "after")}), flush=True)
    if args.offtopic:
        report["offtopic"] = offtopic(args.offtopic, args.config, args.before)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
