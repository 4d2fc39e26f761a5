"""Fit the lead-sentence ranker of the offline composer (``graphs/extractive.py``
``LEAD_WEIGHTS`` over ``LEAD_FEATURES``) and judge it by leave-one-corpus-out.

What is learnt: which of an answer's sentences should open it. Each answered question of the
tuning sets gives one list: the prose units the composer may lead with (not code, headings,
short step stubs or pointer sentences), each with :func:`graphs.extractive.lead_features`;
a unit is right (label 1) when the passage the composer opens with when it leads (the sentence
before it, it, the sentences after it, the block they introduce: :func:`lead_passage`) holds one
of the question's expected facts (the eval set's ``answer_facts``, case-insensitive, as
``threadwise eval`` counts facts) in its first 300 characters (``--label sentence``: the unit, or
the code block or table it introduces, holds one). Lists with no right unit, or only
right ones, teach nothing and are left out.

The model is a linear scorer ``s = w . x`` trained listwise: the softmax of the scores over a
list is fitted to the uniform distribution over its right units (the top-one probability
model of ListNet: Cao, Qin, Liu, Tsai and Li, "Learning to Rank: From Pairwise Approach to
Listwise Approach", ICML 2007; with one right unit this is the conditional logit of
McFadden 1974), cross-entropy plus an L2 penalty ``l2 x |w|^2`` on standardised
features, minimised by Newton's method (the loss is convex; its Hessian is the features'
covariance under the softmax, summed over lists). The weights are given back on the raw
features (standardisation folded in; the intercept cancels within a list).

Choice by leave-one-corpus-out: for each corpus, fit on the others and compose that corpus's
answers with the weights (``Extractive.compose(lead_weights=...)``) on its cached documents,
against the present rules (``lead_weights=()``); facts found and the first expected fact within
the first 300 characters as ``bench/answer_shape.py`` counts them. ``--write`` prints the
weights fitted on all the corpora, to paste into ``LEAD_WEIGHTS``.

Retrieval is the graph's first pass as in ``bench/answer_shape.py`` (its cache is reused and
filled: run once per corpus with the index built); this script caches each row's kept
documents in ``--cache`` (``lead-rows-<key>.pkl``) so a refit takes seconds plus composing.

Usage:
    OMP_NUM_THREADS=1 PYTHONPATH=. python bench/fit_lead.py [--cache DIR] [--l2 1.0 ...] [--label passage|sentence]
        [--json OUT] [--write]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pickle
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from bench.answer_shape import retrieval, totals  # noqa: E402
from bench.extra_corpora import corpus_folder  # noqa: E402
from bench.offline_rows import mean  # noqa: E402
from bot.config import load_settings  # noqa: E402
from bot.eval import first_fact_position  # noqa: E402
from graphs import extractive as ex  # noqa: E402
from graphs import signals  # noqa: E402
from graphs.models import build_embeddings  # noqa: E402

HERE = Path(__file__).resolve().parent
SHARED = Path("/work/shared")
# (name, corpus folder or THREADWISE_EXTRA_CORPORA name, eval set): the tuning sets
TUNING = [
    ("dev", str(SHARED / "corpus/langgraph-docs"), str(SHARED / "eval/dev.jsonl")),
    ("httpx", "httpx-docs", str(HERE / "eval/httpx.jsonl")),
    ("hugo", "hugo-docs", str(HERE / "eval/hugo.jsonl")),
    ("dxw", "dxw-playbook", str(HERE / "eval/dxw-heldout.jsonl")),
    ("sourcegraph", "sourcegraph-handbook", str(HERE / "eval/sourcegraph-handbook-heldout.jsonl")),
    ("prometheus", "prometheus-runbooks", str(HERE / "eval/prometheus-runbooks-heldout.jsonl")),
    ("cargo", "cargo-book", str(HERE / "eval/cargo-book-heldout.jsonl")),
    ("playbook", "engineering-playbook", str(HERE / "eval/engineering-playbook-heldout.jsonl")),
    ("redis", "redis-commands", str(HERE / "eval/redis-commands-heldout3.jsonl")),
    ("jellyfin", "jellyfin-docs", str(HERE / "eval/jellyfin-docs-heldout3.jsonl")),
    ("mattermost", "mattermost-handbook", str(HERE / "eval/mattermost-handbook-heldout4.jsonl")),
    ("discord", "discord-api-docs", str(HERE / "eval/discord-api-docs-heldout4.jsonl")),
    ("readthedocs", "readthedocs-docs", str(HERE / "eval/readthedocs-docs-heldout5.jsonl")),
    ("cnpg", "cloudnative-pg-docs", str(HERE / "eval/cloudnative-pg-docs-heldout5.jsonl")),
    ("darktable", "darktable-docs", str(HERE / "eval/darktable-docs-heldout6.jsonl")),
    ("jupiterone", "jupiterone-policies", str(HERE / "eval/jupiterone-policies-heldout6.jsonl")),
]


def rows_cache(corpus: str, eval_file: str, cache: Path) -> Path:
    """Where :func:`kept_rows` caches the rows of ``corpus`` and ``eval_file``."""
    folder = corpus_folder(corpus)
    key = hashlib.sha256(f"{folder.resolve()}\n{Path(eval_file).resolve()}".encode()).hexdigest()[:12]
    return cache / f"lead-rows-{key}.pkl"


def kept_rows(corpus: str, eval_file: str, config: str, cache: Path) -> list[dict]:
    """Each kb / follow-up row of ``eval_file`` with the documents the grader keeps on the
    graph's first pass (``kept``; [] for a help request), its question variants, follow-up
    focus and expected facts; cached in ``cache``."""
    path = rows_cache(corpus, eval_file, cache)
    if path.exists():
        return pickle.loads(path.read_bytes())
    per_row, brain, _, _ = retrieval(str(corpus_folder(corpus)), eval_file, config, str(cache))
    out = []
    for r in per_row:
        if r["kind"] not in ("kb", "followup"):
            continue
        th = brain.threshold_for(r["qs"], r["route"] == "websearch", brain.passage_match(r["qs"], r["docs"]))
        kept = [d for g, d in zip(r["grades"], r["docs"], strict=False) if g >= th]
        if r["route"] == "websearch" and signals.asks_for_now(r["question"]):
            kept = []
        if r["route"] == "direct":
            kept = []
        out.append({**{k: r[k] for k in ("id", "kind", "qs", "focus", "facts", "sources", "retrieved")}, "kept": kept})
    path.write_bytes(pickle.dumps(out))
    return out


def candidates(brain: ex.Extractive, row: dict, label: str = "passage") -> tuple[np.ndarray, np.ndarray]:
    """The lead candidates of ``row``'s answer: their features and labels (1: the passage it would
    open holds an expected fact in its first 300 characters; ``label`` "sentence": the sentence or
    the block it introduces holds one)."""
    docs = row["kept"]
    units = brain.doc_units(docs, short_items=True)
    headings = brain._headings(docs, units)
    cosine, under, _ = brain.unit_signals(row["qs"], units, headings)
    feats = ex.lead_features(row["qs"], units, headings, cosine, under)
    written = {u.doc for u in units if not u.code and not u.heading and u.row < 0}
    keys = {(u.doc, u.pos): u for u in units}
    facts = [f.lower() for f in row["facts"]]
    at, labels = [], []
    for i, u in enumerate(units):
        if u.code or u.heading or u.short or (u.row >= 0 and u.doc in written) or signals.is_pointer(u.text):
            continue
        at.append(i)
        if label == "sentence":  # the sentence, or the block it introduces, holds a fact
            nxt = keys.get((u.doc, u.pos + 1))
            text = f"{u.text}\n{nxt.text}" if nxt is not None and nxt.code else u.text
        else:
            text = lead_passage(units, keys, u)[:300]
        labels.append(float(any(f in text.lower() for f in facts)))
    return feats[at], np.asarray(labels)


def lead_passage(units: list[ex.Unit], keys: dict[tuple[int, int], ex.Unit], u: ex.Unit) -> str:
    """About what the answer opens with when ``u`` leads: the sentence before it in its paragraph
    (``LEAD_BEFORE``, not a pointer), ``u``, the ``LEAD_AFTER`` sentences after it up to a block,
    heading or pointer, then the block the last one introduces."""
    para = [x for x in units if x.doc == u.doc and not x.code and x.para == u.para]
    at = para.index(u) if u in para else 0
    chosen = [x for x in para[max(0, at - ex.LEAD_BEFORE) : at] if not x.heading and not signals.is_pointer(x.text)]
    chosen.append(u)
    pos = u.pos
    for _ in range(ex.LEAD_AFTER if u.row < 0 else 0):
        nxt = keys.get((u.doc, pos + 1))
        if nxt is None or nxt.code or nxt.heading or nxt.row >= 0 or signals.is_pointer(nxt.text):
            break
        chosen.append(nxt)
        pos += 1
    text = " ".join(x.text for x in chosen)
    block = keys.get((u.doc, pos + 1))
    return f"{text}\n{block.text}" if block is not None and block.code else text


def fit(lists: list[tuple[np.ndarray, np.ndarray]], l2: float, iterations: int = 50) -> np.ndarray:
    """Weights on the raw features minimising the ListNet top-one cross-entropy (uniform target
    over each list's right units) + ``l2`` x |w|^2 on standardised features (Newton's method)."""
    lists = [(x, y) for x, y in lists if 0 < y.sum() < len(y)]
    allx = np.vstack([x for x, _ in lists])
    mu, sd = allx.mean(axis=0), allx.std(axis=0)
    sd[sd < 1e-9] = 1.0
    z = [((x - mu) / sd, y / y.sum()) for x, y in lists]
    w = np.zeros(allx.shape[1])
    for _ in range(iterations):
        grad = 2 * l2 * w
        hess = 2 * l2 * np.eye(len(w))
        for x, t in z:
            s = x @ w
            p = np.exp(s - s.max())
            p /= p.sum()
            grad += x.T @ (p - t)
            mean_x = p @ x
            hess += (x * p[:, None]).T @ x - np.outer(mean_x, mean_x)
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return w / sd


def lead_hits(lists: list[tuple[np.ndarray, np.ndarray]], w: np.ndarray | None, hand: list[np.ndarray]) -> float:
    """Share of lists whose top-scored unit is right (``w`` None: the present rules' score ``hand``)."""
    hits = []
    for (x, y), h in zip(lists, hand, strict=True):
        if not y.sum():
            continue
        s = h if w is None else x @ w
        hits.append(float(y[int(np.argmax(s))] > 0))
    return float(np.mean(hits)) if hits else 0.0


def compose_rows(brain: ex.Extractive, rows: list[dict], weights: tuple[float, ...]) -> dict:
    """facts found / first fact in 300 / median length of ``rows`` composed with ``weights`` (() : the rules)."""
    out = []
    for r in rows:
        answer = brain.compose(r["qs"], r["kept"], focus=r["focus"], lead_weights=weights) if r["kept"] else ""
        found = [f for f in r["facts"] if f.lower() in answer.lower()]
        out.append(
            {
                "id": r["id"],
                "kind": r["kind"],
                "answer": answer,
                "chars": len(answer),
                "facts": r["facts"],
                "sources": r["sources"],
                "retrieved": r["retrieved"],
                "facts_found": len(found) / len(r["facts"]) if r["facts"] else None,
                "first_fact_at": first_fact_position(answer, r["facts"]),
                "template": False,
                "help": not r["kept"],
                "route": "",
                "expected_route": "",
            }
        )
    t = totals(out)
    return {"rows": out, **{k: t[k] for k in ("facts_found", "first_fact_within_300", "median_answer_chars")}}


def hand_scores(brain: ex.Extractive, row: dict, n: int) -> np.ndarray:
    """The present rules' lead score of the candidates of :func:`candidates` (same order)."""
    docs = row["kept"]
    units = brain.doc_units(docs, short_items=True)
    headings = brain._headings(docs, units)
    scored = brain.score_units(row["qs"], units, headings)
    written = {u.doc for u in units if not u.code and not u.heading and u.row < 0}
    quantity = signals.asks_for_quantity(row["qs"][0])
    yes_no = signals.asks_yes_no(row["qs"][0])
    asked = {t for q in row["qs"] for t in signals.terms(q)}
    out = []
    for sc, head in zip(scored, headings, strict=True):
        u = sc.unit
        if u.code or u.heading or u.short or (u.row >= 0 and u.doc in written) or signals.is_pointer(u.text):
            continue
        v = sc.score + ex.DOC_PRIOR / (1 + u.doc)
        v += ex.QUANTITY_BONUS if quantity and signals.states_quantity(u.text) else 0.0
        verdict = yes_no and signals.states_verdict(u.text) and asked & signals.terms(f"{head} {u.text}")
        v += ex.VERDICT_BONUS if verdict else 0.0
        out.append(v)
    assert len(out) == n
    return np.asarray(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default=str(HERE.parent / "config.toml"))
    ap.add_argument("--cache", default="/tmp/threadwise-bench")
    ap.add_argument("--l2", type=float, nargs="+", default=[1.0], help="L2 penalties on standardised weights")
    ap.add_argument("--only", nargs="*", default=[], help="corpus names to load (default: all of TUNING)")
    ap.add_argument("--json", default="", help="write the per-corpus figures here")
    ap.add_argument("--label", choices=("passage", "sentence"), default="passage", help="what makes a lead right")
    ap.add_argument("--write", action="store_true", help="print the weights fitted on all corpora")
    args = ap.parse_args()
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    settings = load_settings(args.config)
    emb, _ = build_embeddings("local", settings.models)
    embedder = ex.TextEmbedder(emb, cache_size=400_000)
    vec_cache = cache / "lead-vectors.pkl"
    if vec_cache.exists():
        embedder._cache.update(pickle.loads(vec_cache.read_bytes()))
    brain = ex.Extractive(embedder)
    sets = [t for t in TUNING if not args.only or t[0] in args.only]
    rows = {name: kept_rows(corpus, ev, args.config, cache) for name, corpus, ev in sets}
    answered = {name: [r for r in rs if r["kept"] and r["facts"]] for name, rs in rows.items()}
    features = cache / f"lead-lists-{len(ex.LEAD_FEATURES)}-{args.label}.pkl"  # features and labels, per corpus
    saved = pickle.loads(features.read_bytes()) if features.exists() else {}
    for name, rs in answered.items():
        if name not in saved:
            lst = [candidates(brain, r, args.label) for r in rs]
            saved[name] = (lst, [hand_scores(brain, r, len(x)) for r, (x, _) in zip(rs, lst, strict=True)])
            features.write_bytes(pickle.dumps(saved))
    lists = {name: saved[name][0] for name in answered}
    hand = {name: saved[name][1] for name in answered}
    vec_cache.write_bytes(pickle.dumps(dict(embedder._cache)))
    report: dict[str, dict] = {}
    for name, _, _ in sets:
        before = compose_rows(brain, rows[name], ())
        report[name] = {
            "lead_hit_rules": round(lead_hits(lists[name], None, hand[name]), 3),
            **{f"{k}_rules": before[k] for k in ("facts_found", "first_fact_within_300", "median_answer_chars")},
        }
        for l2 in args.l2:
            train = [lst for other, ls in lists.items() if other != name for lst in ls]
            w = fit(train, l2)
            after = compose_rows(brain, rows[name], tuple(float(v) for v in w))
            report[name] |= {
                f"lead_hit_l2_{l2}": round(lead_hits(lists[name], w, hand[name]), 3),
                **{f"{k}_l2_{l2}": after[k] for k in ("facts_found", "first_fact_within_300", "median_answer_chars")},
                f"rows_changed_l2_{l2}": [
                    (a["id"], b["facts_found"], a["facts_found"], b["first_fact_at"], a["first_fact_at"])
                    for b, a in zip(before["rows"], after["rows"], strict=True)
                    if b["answer"] != a["answer"]
                ],
            }
        print(name, json.dumps({k: v for k, v in report[name].items() if "rows_changed" not in k}), flush=True)
        vec_cache.write_bytes(pickle.dumps(dict(embedder._cache)))
    means = {
        k: mean([float(v[k]) for v in report.values() if v[k] is not None])
        for k in next(iter(report.values()))
        if "rows_changed" not in k
    }
    print("LOCO mean", json.dumps(means))
    if args.json:
        Path(args.json).write_text(json.dumps({"per_corpus": report, "mean": means}, indent=1))
    if args.write:
        w = fit([lst for ls in lists.values() for lst in ls], args.l2[0])
        print("LEAD_WEIGHTS = (")
        for name, v in zip(ex.LEAD_FEATURES, w, strict=True):
            print(f"    {v:.4f},  # {name}")
        print(")")


if __name__ == "__main__":
    main()
