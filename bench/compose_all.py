"""Compose the offline answers of every tuning corpus from its cached first pass, and compare
with a saved run: the check that a composer change holds across corpora (leave-one-corpus-out
style: the means rise and no corpus loses more than one question on facts or on the first fact
in 300 characters).

Retrieval and grading are the graph's first pass as in ``bench/answer_shape.py``, cached per
corpus by ``bench/fit_lead.py``'s :func:`kept_rows` (run once with the indexes built); composing
all the corpora again takes seconds. ``--misses`` lists every kb / follow-up row where the
expected page was kept but a fact is missing from the answer, or the first fact comes after
300 characters, with the expected fact's line on the page (to sort the misses by kind).

Usage:
    export THREADWISE_EXTRA_CORPORA=/work/corpora:/work/heldout5/corpora:/work/heldout6/corpora
    OMP_NUM_THREADS=1 PYTHONPATH=. \
        python bench/compose_all.py --cache DIR [--only NAME ...] [--json OUT] [--against OLD.json] [--misses]
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from bench.extra_corpora import corpus_folder  # noqa: E402
from bench.fit_lead import TUNING, compose_rows, kept_rows, rows_cache  # noqa: E402
from bot.config import load_settings  # noqa: E402
from graphs import extractive as ex  # noqa: E402
from graphs.models import build_embeddings  # noqa: E402

HERE = Path(__file__).resolve().parent
KEYS = ("facts_found", "first_fact_within_300", "median_answer_chars")


# Docusaurus-style container kinds that are admonitions (a ``:::python`` container is a language variant)
COLON_KINDS = ("note", "tip", "info", "warning", "danger", "caution", "important", "success", "hint", "attention")
ADMONITION = re.compile(
    r"^\s*(?::{3,}\s*(?:"
    + "|".join(sorted(COLON_KINDS))
    + r")\b|\.\. (?:note|warning|important|tip|caution|seealso|attention|danger|hint|admonition)::"
    r"|\{%\s*hint|<(?:Info|Warning|Note|Tip|Callout|Check|Danger)\b|>\s*\*\*(?:Note|Warning|Important|Tip)"
    r"|!!!|\?\?\?|>\s*\[!)",
    re.I,
)


def raw_context(corpus: str, location: str, fact: str) -> str:
    """'admonition' when ``fact`` sits in an admonition block of the page's source file
    (the block's opening marker above it, no heading between), else ''."""
    path = corpus_folder(corpus) / location
    try:
        lines = path.read_text(errors="replace").split("\n")
    except OSError:
        return ""
    for i, line in enumerate(lines):
        if fact.lower() in line.lower():
            for back in range(i, max(-1, i - 15), -1):
                if lines[back].lstrip().startswith("#"):
                    break
                if ADMONITION.match(lines[back]):
                    return "admonition"
            return ""
    return ""


def fact_kind(brain: ex.Extractive, row: dict, fact: str, corpus: str) -> str:
    """Where ``fact`` is among the row's kept documents, as the composer sees them: the unit holding
    it (code block or table, table row, heading, list item, sentence), its rank among the scored
    units (the composer's score plus the rank weight) and whether its page's source has it in an
    admonition; 'not in kept text' when no kept document holds it."""
    docs = row["kept"]
    units = brain.doc_units(docs, short_items=True)
    headings = brain._headings(docs, units)
    scored = brain.score_units(row["qs"], units, headings)
    order = sorted(scored, key=lambda sc: -(sc.score + ex.DOC_PRIOR / (1 + sc.unit.doc)))
    for rank, sc in enumerate(order):
        u = sc.unit
        if fact.lower() in u.text.lower():
            what = (
                ("table" if u.text.lstrip().startswith("|") else "code")
                if u.code
                else "heading"
                if u.heading
                else "row"
                if u.row >= 0
                else "item"
                if u.list >= 0
                else "sentence"
            )
            loc = docs[u.doc].get("location", "")
            where = "expected page" if loc in row["sources"] else "other page"
            adm = raw_context(corpus, loc, fact)
            return f"{what} rank {rank} doc {u.doc} ({where}){' ' + adm if adm else ''}"
    text = "\n".join(d.get("text", "") for d in docs).lower()
    return "in kept text, in no unit" if fact.lower() in text else "not in kept text"


def kind_of(brain: ex.Extractive, row: dict, fact: str, answer: str, corpus: str) -> str:
    """The kind of a fact missing from ``answer`` or coming after its 300th character: where it
    is (on no kept page, in another section of a kept page, in a heading, in a table row, code
    block, list item or sentence, in an admonition) and, for a unit the composer saw, how far
    down its ranking it was. Reads the kept documents and the expected pages' source files
    (never the index: no index is opened, so none is rebuilt)."""
    at = answer.lower().find(fact.lower())
    where = fact_kind(brain, row, fact, corpus)
    if where == "not in kept text":
        kept = {d["location"] for d in row["kept"]}
        heading = re.compile(r"^#+ .*" + re.escape(fact.lower()), re.M)
        for src in row["sources"]:
            raw = corpus_folder(corpus) / src
            text = raw.read_text(errors="replace").lower() if raw.exists() else ""
            if heading.search(text):
                return "only in a heading"
            if fact.lower() in text:
                return "another section of a kept page" if src in kept else "its page not kept"
        return "on no expected page as written"
    m = re.match(r"(\w+) rank (\d+) doc \d+ \((\w+) page\)( admonition)?", where)
    if not m:
        return where
    what, rank, _, adm = m.groups()
    unit = {"row": "table row", "code": "code/YAML block", "table": "table", "item": "list item"}.get(what, what)
    unit += " in an admonition" if adm else ""
    if at >= 0:
        return f"late: {unit}, ranked {'top 3' if int(rank) <= 3 else 'below 3'}"
    return f"missing: {unit}, ranked {'top 3' if int(rank) <= 3 else '4-10' if int(rank) <= 10 else 'below 10'}"


def misses(brain: ex.Extractive, corpus: str, rows: list[dict], composed: list[dict]) -> list[str]:
    """A report line per row with the expected page kept and a fact missing or late."""
    out = []
    for r, c in zip(rows, composed, strict=True):
        if not c["answer"] or not r["facts"] or not any(d["location"] in r["sources"] for d in r["kept"]):
            continue
        missing = [f for f in r["facts"] if f.lower() not in c["answer"].lower()]
        late = c["first_fact_at"] is None or c["first_fact_at"] >= 300
        if not missing and not late:
            continue
        kept = [d["location"] for d in r["kept"]]
        at = {f: c["answer"].lower().find(f.lower()) for f in r["facts"]}
        out.append(
            f"--- {r['id']} missing {missing} first@{c['first_fact_at']}{' LATE' if late else ''} "
            f"expected {r['sources']} kept {kept}\n"
            f"Q: {r['qs'][0]}\n"
            + "".join(f"fact {f!r} at {at[f]}: {fact_kind(brain, r, f, corpus)}\n" for f in r["facts"])
            + f"ANSWER:\n{c['answer']}\n"
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default=str(HERE.parent / "config.toml"))
    ap.add_argument("--cache", default="/tmp/threadwise-bench")
    ap.add_argument("--only", nargs="*", default=[], help="corpus names (default: all of fit_lead.TUNING)")
    ap.add_argument("--json", default="", help="write per-corpus totals and rows here")
    ap.add_argument("--against", default="", help="a --json of an earlier run: rows won and lost per corpus")
    ap.add_argument(
        "--retrieve",
        action="store_true",
        help="retrieve a corpus whose first pass is not cached (opens its index: builds it when the code's "
        "chunking differs from the index's); without it such a corpus is skipped",
    )
    ap.add_argument("--misses", action="store_true", help="print the rows with a fact missing or late")
    ap.add_argument("--kinds", default="", help="write the kinds of the facts missing or late, per corpus, here")
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
    old = json.loads(Path(args.against).read_text()) if args.against else {}
    report: dict[str, dict] = {}
    kinds: dict[str, dict[str, int]] = {}
    for name, corpus, ev in TUNING:
        if args.only and name not in args.only:
            continue
        if not args.retrieve and not rows_cache(corpus, ev, cache).exists():
            print(f"{name:12} skipped: no cached first pass in {cache} (--retrieve)", flush=True)
            continue
        rows = kept_rows(corpus, ev, args.config, cache)
        got = compose_rows(brain, rows, ())
        report[name] = {**{k: got[k] for k in KEYS}, "rows": got["rows"]}
        line = f"{name:12} " + " ".join(f"{k} {got[k]}" for k in KEYS)
        if name in old:
            before = {r["id"]: r for r in old[name]["rows"]}
            gained = lost = g300 = l300 = 0
            for r in got["rows"]:
                b = before.get(r["id"])
                if b is None or r["facts_found"] is None:
                    continue
                gained += r["facts_found"] > b["facts_found"]
                lost += r["facts_found"] < b["facts_found"]
                now = r["first_fact_at"] is not None and r["first_fact_at"] < 300
                then = b["first_fact_at"] is not None and b["first_fact_at"] < 300
                g300 += now and not then
                l300 += then and not now
            was = " ".join(str(old[name][k]) for k in KEYS)
            line += f" | was {was} facts +{gained}/-{lost} first300 +{g300}/-{l300}"
        print(line, flush=True)
        if args.misses:
            print("\n".join(misses(brain, corpus, rows, got["rows"])))
        if args.kinds:
            counts: dict[str, int] = {}
            for r, c in zip(rows, got["rows"], strict=True):
                if not c["answer"] or not r["facts"]:
                    continue
                found = {f: c["answer"].lower().find(f.lower()) for f in r["facts"]}
                first = min((f for f in r["facts"] if found[f] >= 0), key=lambda f: found[f], default=None)
                for f in r["facts"]:
                    if found[f] < 0 or (f == first and found[f] >= 300):
                        k = kind_of(brain, r, f, c["answer"], corpus)
                        counts[k] = counts.get(k, 0) + 1
            kinds[name] = counts
    names = list(report)
    if names:
        print(
            "mean "
            + " ".join(f"{k} {sum(report[n][k] for n in names) / len(names):.3f}" for k in KEYS)
            + (
                " | was " + " ".join(f"{sum(old[n][k] for n in names) / len(names):.3f}" for k in KEYS)
                if all(n in old for n in names)
                else ""
            )
        )
    vec_cache.write_bytes(pickle.dumps(dict(embedder._cache)))
    if args.kinds:
        Path(args.kinds).write_text(json.dumps(kinds, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
