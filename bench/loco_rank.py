"""Ranking settings chosen by leave-one-corpus-out: the offline search and rerank replayed on
saved candidates, every setting chosen on all corpora but one and scored on that one.

Two steps:

``collect`` (one corpus and eval set a run; needs the index, builds it on first use): for each
kb and follow-up row, the graph's own search variants (:func:`bench.offline_rows.search_queries_for`),
each variant's keyword and dense ranking (top ``--depth`` chunk rowids), extra rankings that
candidate ideas add (keyword rankings with other column weights, pseudo-relevance feedback),
and for every chunk in any ranking: its page and section, its cosine with each variant, its
page's chunk cosines with the message (mean, best, best 2 / 3), whether the page is short
enough to be answered whole, and whether it is an expected page. It also runs
``Extractive.retrieve`` as the graph does and saves its pages, so the replay can be checked
against the real path (``loco --check``). Output: a pickle a corpus.

``loco`` (all the pickles): replays ``KnowledgeBase.search`` (weighted RRF, ``max(6k, 30)``
fused rows, at most ``max_chunks_per_file`` chunks a page, ``k x 4`` candidates) and
``Extractive.retrieve`` (rerank, one document per section, a short page once) for each
setting of a grid, and for each corpus chooses the setting with the best mean of
(recall@1 + recall@5) over the other corpora (each corpus weighs the same), scoring it on the
left-out one. Reports per corpus and the mean: now, LOCO, and the setting chosen on all.
``--fit`` adds a pairwise logistic reranker over the candidates' features, fitted the same
way (on the other corpora, scored on the left-out one).

Usage:
    OMP_NUM_THREADS=1 PYTHONPATH=. python bench/loco_rank.py collect --corpus httpx-docs \\
        --eval bench/eval/httpx.jsonl --out /tmp/loco/httpx.pkl
    export THREADWISE_EXTRA_CORPORA=/work/corpora:/work/heldout5/corpora:/work/heldout6/corpora
    OMP_NUM_THREADS=1 PYTHONPATH=. \\
        python bench/loco_rank.py collect-all --out-dir /tmp/loco   # every tuning set not yet collected
    PYTHONPATH=. python bench/loco_rank.py loco /tmp/loco/*.pkl [--check] [--fit] [--json FILE]
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import pickle
import re
import sys
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

K = 5  # [knowledge] k
PER_RESULT = 4  # Extractive.retrieve's candidates_per_result
CANDIDATES = 40  # [knowledge] candidates
MAX_PER_FILE = 2  # [knowledge] max_chunks_per_file
RRF_K = 20  # [knowledge] rrf_k
RRF_GRID = (5, 10, 15, 20, 30, 40, 60)  # the RRF constants tried (feedback rankings collected for each)
PRIOR = 0.75  # extractive.RERANK_PRIOR_WEIGHT
PAGE_WEIGHT = 0.3  # extractive.RERANK_PAGE_WEIGHT
COLUMN_VARIANTS = ((1.0, 1.0, 1.0), (1.0, 4.0, 4.0), (1.0, 4.0, 1.0), (1.0, 1.0, 4.0), (1.0, 8.0, 2.0))


# ---- collect ------------------------------------------------------------------------------
def collect(args: argparse.Namespace) -> None:
    from bench.offline_rows import open_offline, read_rows, row_state, search_queries_for
    from graphs import extractive as ex
    from graphs import signals
    from graphs.knowledge import bm25
    from graphs.knowledge.index import keyword_phrases, query_tokenizer
    from graphs.knowledge.kb import FEEDBACK_CHUNKS, FEEDBACK_WORDS
    from graphs.offline_router import OfflineRouter

    settings, kb, embedder = open_offline(args.config, args.corpus)
    brain = ex.Extractive(embedder, kb)
    router = OfflineRouter(embedder, kb, extractive=brain)
    snap = kb.snapshot
    assert snap is not None and snap.vectors is not None
    vectors = np.asarray(snap.vectors, dtype=np.float32)
    tok = query_tokenizer()
    alt_postings = {}
    saved = bm25.COLUMN_WEIGHTS
    try:
        for w in COLUMN_VARIANTS:
            bm25.COLUMN_WEIGHTS = w
            alt_postings[w] = bm25.KeywordPostings.from_fts(snap._conn, generation=f"alt{w}")
    finally:
        bm25.COLUMN_WEIGHTS = saved
    meta: dict[int, tuple] = {}
    pages: dict[tuple, dict] = {}

    def chunk_meta(rowids: list[int]) -> None:
        todo = [r for r in rowids if r not in meta]
        for r, (file, title, text, source, _url) in snap.chunks(todo).items():
            meta[r] = (file, title, source, text)

    def page_of(file: str, source: str | None) -> dict:
        key = (file, source)
        if key not in pages:
            chunks = snap.file_chunks(file, source)
            rows = [
                int(r) for (r,) in snap._conn.execute("SELECT rowid FROM chunks WHERE file = ? ORDER BY rowid", [file])
            ]
            pages[key] = {
                "rows": rows,
                "short": len({c.title for c, _ in chunks}) > 1
                and sum(len(c.text) for c, _ in chunks) <= ex.PAGE_CHARACTERS,
            }
        return pages[key]

    out_rows = []
    for row in read_rows(args.eval):
        if row["kind"] not in ("kb", "followup"):
            continue
        state = row_state(row, settings, router)
        questions = search_queries_for(row, settings, state)
        weighted: dict[str, float] = {}
        for q in questions:
            text, weight = (q, 1.0) if isinstance(q, str) else (q[0], float(q[1]))
            if text.strip():
                weighted[text.strip()] = max(weight, weighted.get(text.strip(), 0.0))
        texts = list(weighted)
        rankings: list[tuple[str, float, list[int]]] = []
        for t in texts:
            rankings.append(("kw", weighted[t], snap.keyword(t, args.depth)))
        qv = kb._queries(texts)
        for t, v in zip(texts, qv, strict=True):
            rankings.append(("dense", weighted[t], snap.dense(np.asarray(v), args.depth)))
        for w, post in alt_postings.items():
            for t in texts:
                rankings.append(
                    (f"kw{w}", weighted[t], bm25.rank(post, tok, keyword_phrases(t), args.depth, snap._phrase_scores))
                )
        # pseudo-relevance feedback from the first pass (KnowledgeBase.search's own words), once for
        # each RRF constant of the grid: the first pass, hence the words, depends on it
        exclude = {p for t in texts for p in keyword_phrases(t)}
        for rrf_k in sorted({RRF_K, *RRF_GRID}):
            scores: dict[int, float] = {}
            for kind, w, rk in rankings:
                if kind in ("kw", "dense"):
                    for i, cid in enumerate(rk[:CANDIDATES], start=1):
                        scores[cid] = scores.get(cid, 0.0) + w / (rrf_k + i)
            first_k = sorted(scores, key=lambda c: -scores[c])[:FEEDBACK_CHUNKS]
            words = snap.feedback_words(first_k, exclude, FEEDBACK_WORDS)
            ranking = snap.keyword(f"{texts[0]} {' '.join(words)}", args.depth)
            rankings.append((f"prf_kw@{rrf_k}", 1.0, ranking))
            if rrf_k == RRF_K:
                first, expansion = first_k, words
                rankings.append(("prf_kw", 1.0, ranking))
        centroid = vectors[[c - 1 for c in first]].mean(axis=0)
        rq = np.asarray(qv[0], dtype=np.float32) + 0.5 * centroid
        rankings.append(("prf_dense", 1.0, snap.dense(rq / np.linalg.norm(rq), args.depth)))
        pool = list(dict.fromkeys(c for _, _, rk in rankings for c in rk))
        chunk_meta(pool)
        pool = [c for c in pool if c in meta]
        qvec = np.asarray(brain.question_vectors(texts), dtype=np.float32)
        cos = vectors[[c - 1 for c in pool]] @ qvec.T  # chunk x variant
        q_set: set[str] = set()
        for t in texts:
            q_set |= signals.terms(t)
        feats = []
        row_pages: dict[str, dict] = {}
        for c, cv in zip(pool, cos, strict=True):
            file, title, source, text = meta[c]
            pg = page_of(file, source)
            feats.append(
                {
                    "rowid": c,
                    "file": file,
                    "title": title,
                    "source": source,
                    "cos": cv.tolist(),
                    "title_share": ex.lexical_share(q_set, f"{re.sub(r'[/_.-]+', ' ', file)} {title}"),
                    "chars": len(text),
                }
            )
            key = f"{file}\x00{source}"
            if key not in row_pages:
                pv = vectors[[r - 1 for r in pg["rows"]]] @ qvec[0]
                top = np.sort(pv)[::-1]
                row_pages[key] = {
                    "short": pg["short"],
                    "mean": float(pv.mean()),
                    "max": float(top[0]),
                    "top2": float(top[:2].mean()),
                    "top3": float(top[:3].mean()),
                    "n": len(pv),
                }
        real = [d["location"] for d in brain.retrieve(questions, settings.knowledge.k)]
        out_rows.append(
            {
                "id": row["id"],
                "kind": row["kind"],
                "sources": row.get("sources") or [],
                "texts": texts,
                "rankings": rankings,
                "pool": feats,
                "pages": row_pages,
                "real": real,
                "expansion": expansion,
            }
        )
        print(row["id"], real[:3], file=sys.stderr, flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_bytes(pickle.dumps({"corpus": str(args.corpus), "eval": args.eval, "rows": out_rows}))


def collect_all(args: argparse.Namespace) -> None:
    """:func:`collect` for each set of ``bench.fit_lead.TUNING`` (or of ``--only``) without a pickle
    ``OUT_DIR/NAME.pkl`` yet, one after the other."""
    from bench.extra_corpora import corpus_folder
    from bench.fit_lead import TUNING  # the tuning sets, named once

    for name, corpus, eval_file in TUNING:
        out = Path(args.out_dir) / f"{name}.pkl"
        if (args.only and name not in args.only) or out.exists():
            continue
        print(f"== {name}", file=sys.stderr, flush=True)
        collect(argparse.Namespace(**{**vars(args), "corpus": corpus_folder(corpus), "eval": eval_file, "out": out}))


# ---- BM25F: each field length-normalised on its own ---------------------------------------
BM25F_VARIANTS = {
    "f122": ((1.0, 2.0, 2.0), (0.75, 0.75, 0.75)),
    "f133": ((1.0, 3.0, 3.0), (0.75, 0.5, 0.5)),
    "f152": ((1.0, 5.0, 2.0), (0.75, 0.3, 0.3)),
    "f125": ((1.0, 2.0, 5.0), (0.75, 0.3, 0.3)),
    "f111": ((1.0, 1.0, 1.0), (0.75, 0.75, 0.75)),
}


def bm25f(args: argparse.Namespace) -> None:
    """Add BM25F rankings (:data:`BM25F_VARIANTS`: column weights and per-column b for text,
    title, file) of each row's variants to a collected pickle; chunks outside the row's saved
    pool are left out of them (counted)."""
    from bench.offline_rows import open_offline
    from graphs.knowledge import bm25
    from graphs.knowledge.index import keyword_phrases, query_tokenizer

    d = pickle.loads(Path(args.pickle).read_bytes())
    _settings, kb, _emb = open_offline(args.config, d["corpus"])
    snap = kb.snapshot
    conn = snap._conn
    conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.fi USING fts5vocab(main, fts, instance)")
    ids: dict[str, int] = {}
    t_ids, docs, cols = [], [], []
    col_of = {c: i for i, c in enumerate(bm25.COLUMNS)}
    for term, doc, col in conn.execute("SELECT CAST(term AS BLOB), doc, col FROM temp.fi"):
        t_ids.append(ids.setdefault(bm25._term(term), len(ids)))
        docs.append(doc)
        cols.append(col_of[col])
    t_arr, d_arr, c_arr = np.array(t_ids), np.array(docs), np.array(cols)
    n_doc = int(d_arr.max()) + 1
    lengths = np.zeros((3, n_doc))
    np.add.at(lengths, (c_arr, d_arr), 1.0)
    live = lengths.sum(axis=0) > 0
    avg = lengths[:, live].mean(axis=1)
    count = int(live.sum())
    by_term: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    order = np.argsort(t_arr, kind="stable")
    t_s, d_s, c_s = t_arr[order], d_arr[order], c_arr[order]
    bounds = np.flatnonzero(np.diff(t_s)) + 1
    for lo, hi in zip(np.r_[0, bounds], np.r_[bounds, len(t_s)], strict=True):
        by_term[int(t_s[lo])] = (d_s[lo:hi], c_s[lo:hi])
    tok = query_tokenizer()
    dropped = kept = 0
    for r in d["rows"]:
        in_pool = {f["rowid"] for f in r["pool"]}
        r["rankings"] = [x for x in r["rankings"] if not x[0].startswith("bm25f")]
        weight_of = dict(r["rankings"][i][:2] for i in range(len(r["texts"])))  # noqa: F841
        for name, (w, b) in BM25F_VARIANTS.items():
            norm = np.array([1 - b[c] + b[c] * lengths[c] / (avg[c] or 1.0) for c in range(3)])
            for t, (_kind, wt, _rk) in zip(r["texts"], r["rankings"], strict=False):
                toks = list(dict.fromkeys(x for p in keyword_phrases(t) for x in tok.tokens(p)))
                score = np.zeros(n_doc)
                for x in toks:
                    if x not in ids or ids[x] not in by_term:
                        continue
                    dd, cc = by_term[ids[x]]
                    tf = np.zeros(n_doc)
                    np.add.at(tf, dd, np.array(w)[cc] / norm[cc, dd])
                    df = len(np.unique(dd))
                    idf = math.log((count - df + 0.5) / (df + 0.5))
                    idf = idf if idf > 0 else 1e-6
                    score += idf * tf * (bm25.K1 + 1) / (tf + bm25.K1)
                top = [int(i) for i in np.argsort(-score, kind="stable")[: args.depth] if score[i] > 0]
                dropped += sum(1 for i in top[:CANDIDATES] if i not in in_pool)
                kept += sum(1 for i in top[:CANDIDATES] if i in in_pool)
                r["rankings"].append((f"bm25{name}", wt, [i for i in top if i in in_pool]))
    print(
        f"{args.pickle}: {dropped} of {dropped + kept} BM25F top-{CANDIDATES} chunks outside the pool", file=sys.stderr
    )
    Path(args.pickle).write_bytes(pickle.dumps(d))


def titles(args: argparse.Namespace) -> None:
    """Add to a collected pickle, per pool chunk, the cosine of the message with its page's
    name as the embedder reads it (file path words and the page's first heading), and with
    its section's name (path words and heading path) without the text."""
    from bench.offline_rows import open_offline

    d = pickle.loads(Path(args.pickle).read_bytes())
    _settings, kb, emb = open_offline(args.config, d["corpus"])
    snap = kb.snapshot
    first: dict[str, str] = {}
    for r in d["rows"]:
        for f in r["pool"]:
            if f["file"] not in first:
                chunks = snap.file_chunks(f["file"], f["source"])
                first[f["file"]] = chunks[0][0].title if chunks else ""

    def words(file: str) -> str:
        return re.sub(r"[/_.\-]+", " ", file.rsplit(".", 1)[0])

    names = {f: f"{words(f)}\n{first[f].split(' > ')[0]}" for f in first}
    files = list(names)
    fv = emb([names[f] for f in files])
    at = {f: i for i, f in enumerate(files)}
    for r in d["rows"]:
        qv = emb([r["texts"][0]])[0]
        sec = list({f"{words(f['file'])}\n{f['title']}" for f in r["pool"]})
        sv = dict(zip(sec, emb(sec) @ qv, strict=True)) if sec else {}
        for f in r["pool"]:
            f["page_name_cos"] = float(fv[at[f["file"]]] @ qv)
            f["section_name_cos"] = float(sv[f"{words(f['file'])}\n{f['title']}"])
    Path(args.pickle).write_bytes(pickle.dumps(d))


def use(args: argparse.Namespace) -> None:
    """Add to a collected pickle the multilingual encoder's ranking of each row's message
    (:class:`graphs.knowledge.crosslingual.CrossLingualIndex`, the one questions in other
    languages use) as ranking ``use``, and each pool chunk's encoder cosine (``use_cos``);
    chunks of its ranking outside the pool are left out (counted)."""
    from bench.offline_rows import open_offline
    from graphs.knowledge.crosslingual import CrossLingualIndex, load_encoder

    d = pickle.loads(Path(args.pickle).read_bytes())
    _settings, kb, _emb = open_offline(args.config, d["corpus"])
    encoder = load_encoder()
    assert encoder is not None
    cross = CrossLingualIndex(encoder, kb.snapshot)
    outside = inside = 0
    for r in d["rows"]:
        rowids, scores = cross.chunk_scores(cross.query_vectors([r["texts"][0]]))
        at = {int(x): float(v) for x, v in zip(rowids, scores, strict=True)}
        top = [int(rowids[i]) for i in np.argsort(-scores, kind="stable")[: args.depth]]
        pool = {f["rowid"] for f in r["pool"]}
        outside += sum(1 for x in top[:CANDIDATES] if x not in pool)
        inside += sum(1 for x in top[:CANDIDATES] if x in pool)
        r["rankings"] = [x for x in r["rankings"] if x[0] != "use"] + [("use", 1.0, [x for x in top if x in pool])]
        for f in r["pool"]:
            f["use_cos"] = at.get(f["rowid"], 0.0)
    print(
        f"{args.pickle}: {outside} of {outside + inside} encoder top-{CANDIDATES} chunks outside the pool",
        file=sys.stderr,
    )
    Path(args.pickle).write_bytes(pickle.dumps(d))


def pagecos(args: argparse.Namespace) -> None:
    """Add to a collected pickle every pool page's chunk cosines with the message (sorted,
    best first), for page aggregates other than the saved ones."""
    from bench.offline_rows import open_offline

    d = pickle.loads(Path(args.pickle).read_bytes())
    _settings, kb, emb = open_offline(args.config, d["corpus"])
    snap = kb.snapshot
    vectors = np.asarray(snap.vectors, dtype=np.float32)
    rows_of: dict[str, list[int]] = {}
    for r in d["rows"]:
        qv = np.asarray(emb([r["texts"][0]])[0], dtype=np.float32)
        for key, pg in r["pages"].items():
            file = key.split("\x00")[0]
            if file not in rows_of:
                rows_of[file] = [
                    int(x)
                    for (x,) in snap._conn.execute("SELECT rowid FROM chunks WHERE file = ? ORDER BY rowid", [file])
                ]
            pg["cos"] = np.sort(vectors[[x - 1 for x in rows_of[file]]] @ qv)[::-1].astype(np.float32)
            assert abs(float(pg["cos"].mean()) - pg["mean"]) < 1e-4, (key, float(pg["cos"].mean()), pg["mean"])
    Path(args.pickle).write_bytes(pickle.dumps(d))


def units(args: argparse.Namespace) -> None:
    """Write beside a collected pickle (``NAME.units.pkl``) the sentence-level scores of each
    row's reranked candidates at the present settings: per chunk, the graders' score of its
    best prose unit (:meth:`graphs.extractive.Extractive.grade` of the chunk alone: best
    sentence cosine plus the lexical share) over all the search variants, and over the
    message alone."""
    from bench.offline_rows import open_offline
    from graphs import extractive as ex

    d = pickle.loads(Path(args.pickle).read_bytes())
    _settings, kb, emb = open_offline(args.config, d["corpus"])
    brain = ex.Extractive(emb, kb)
    snap = kb.snapshot
    out: dict[str, dict[int, tuple[float, float]]] = {}
    for r in d["rows"]:
        row = Row(r)
        cands = row.candidates(DEFAULT)
        rowids = [row.pool[i]["rowid"] for i in cands]
        texts = snap.chunks(rowids)
        docs = [{"text": texts[x][2], "location": texts[x][0], "title": texts[x][1]} for x in rowids]
        grades = brain.grade(r["texts"], docs)
        best = brain.grade(r["texts"][:1], docs)
        out[r["id"]] = {x: (float(g), float(b)) for x, g, b in zip(rowids, grades, best, strict=True)}
        print(r["id"], file=sys.stderr, flush=True)
    Path(args.pickle).with_suffix(".units").write_bytes(pickle.dumps(out))
    del snap


IDENT = re.compile(
    r"(?<![\w.-])[A-Z]{1,6}-?\d{2,}(?![\w-])"  # a code: PH-500, E0425
    r"|\b[A-Za-z]\w*(?:[_.][A-Za-z0-9]\w*)+\b"  # snake_case, dotted.names, file.ext
    r"|\b[a-z]+[A-Z]\w*\b|\b[A-Z][a-z]+[A-Z]\w*\b"  # camelCase, PascalCase
    r"|\b[A-Z]{3,}\b"  # COMMANDS, ACRONYMS
    r"|(?<![\w.])\d{3,}(?![\w.])"  # a status or port number: 429, 5433
)
"""A word of a message that names one thing exactly (an identifier, a code, a number of 3+ digits)."""


def identifiers(text: str) -> list[str]:
    """The distinct :data:`IDENT` words of ``text`` (in order)."""
    return list(dict.fromkeys(m.group(0) for m in IDENT.finditer(text)))


def holds(ident: str, flat: str) -> bool:
    """``ident`` is a whole word of ``flat`` (lower-cased text), a code also without its hyphen."""
    x = ident.lower()
    if re.search(rf"(?<![\w]){re.escape(x)}(?![\w])", flat):
        return True
    m = re.fullmatch(r"([a-z]{1,6})-?(\d{2,})", x)
    return bool(m and re.search(rf"(?<!\w){m[1]}[\s_-]?{m[2]}(?!\w)", flat))


def pair_share(q: list[str], text: list[str], window: int = 3) -> float:
    """Share of the message's adjacent content-term pairs (stemmed) that stand within ``window``
    words of each other, in either order, in ``text`` (a phrase of the question found as a phrase)."""
    pairs = [(a, b) for a, b in zip(q, q[1:], strict=False) if a != b]
    if not pairs:
        return 0.0
    at: dict[str, list[int]] = {}
    for i, w in enumerate(text):
        at.setdefault(w, []).append(i)
    hit = 0
    for a, b in pairs:
        if a in at and b in at and any(abs(i - j) <= window for i in at[a] for j in at[b]):
            hit += 1
    return hit / len(pairs)


def textfeats(args: argparse.Namespace) -> None:
    """Add to a collected pickle, per pool chunk, features read from its text: ``ident`` /
    ``ident_page`` the share of the message's :func:`identifiers` the chunk / its page holds,
    ``code`` the same for codes only (:func:`graphs.signals.codes`), ``pairs`` :func:`pair_share`
    of the message in the chunk's heading path and text, ``head_idf`` / ``head_last_idf`` the
    idf-weighted share of the message's index tokens in the chunk's heading path / last heading."""
    from bench.offline_rows import open_offline
    from graphs import signals, terms
    from graphs.knowledge.index import query_tokenizer

    def stems(text: str) -> list[str]:
        out = []
        for w in terms.content_terms(text):
            for suffix in ("ing", "es", "ed", "s"):
                if len(w) > len(suffix) + 3 and w.endswith(suffix):
                    w = w[: -len(suffix)]
                    break
            out.append(w)
        return out

    d = pickle.loads(Path(args.pickle).read_bytes())
    _settings, kb, _emb = open_offline(args.config, d["corpus"])
    snap = kb.snapshot
    tok = query_tokenizer()
    index, indptr = snap.postings.index, snap.postings.indptr

    def idf_tokens(text: str) -> dict[str, float]:
        out: dict[str, float] = {}
        for w in terms.content_terms(text):
            for t in tok.tokens(w):
                if t in index:
                    out[t] = snap.postings.idf(int(indptr[index[t] + 1] - indptr[index[t]]))
        return out

    page_text: dict[str, str] = {}
    for r in d["rows"]:
        msg = r["texts"][0]
        ids, codes = identifiers(msg), signals.codes(msg)
        q_stems = stems(msg)
        q_idf = idf_tokens(msg)
        total = sum(q_idf.values()) or 1.0
        texts = snap.chunks([f["rowid"] for f in r["pool"]])
        for f in r["pool"]:
            file, title, text = texts[f["rowid"]][:3]
            flat = f"{title}\n{text}".lower()
            if file not in page_text:
                chunks = snap.file_chunks(file, f["source"])
                page_text[file] = "\n".join(f"{c.title}\n{c.text}" for c, _ in chunks).lower()
            f["ident"] = sum(holds(x, flat) for x in ids) / len(ids) if ids else 0.0
            f["ident_page"] = sum(holds(x, page_text[file]) for x in ids) / len(ids) if ids else 0.0
            f["code"] = sum(holds(x, flat) for x in codes) / len(codes) if codes else 0.0
            f["pairs"] = pair_share(q_stems, stems(f"{title}\n{text}"))
            head = {t for w in terms.content_terms(title) for t in tok.tokens(w)}
            last = {t for w in terms.content_terms(title.split(" > ")[-1]) for t in tok.tokens(w)}
            f["head_idf"] = sum(v for t, v in q_idf.items() if t in head) / total
            f["head_last_idf"] = sum(v for t, v in q_idf.items() if t in last) / total
    Path(args.pickle).write_bytes(pickle.dumps(d))


OVERVIEW = re.compile(r"(^|/)(_?index|readme|overview|introduction|intro)\.[a-z]+$", re.IGNORECASE)
"""A page that gives an overview of its folder (the kind of page that names every topic once)."""


def aggregate(cos: np.ndarray, how: str) -> float:
    """A page's evidence from its chunk cosines (best first): ``topsqrt`` the mean of the best
    ceil(sqrt(n)), ``topNN`` the mean of the best NN percent (at least one)."""
    n = len(cos)
    if how == "topsqrt":
        k = math.ceil(math.sqrt(n))
    elif how == "toplog":
        k = 1 + int(math.log2(n))
    else:
        k = max(1, math.ceil(n * int(how[3:]) / 100))
    return float(cos[:k].mean())


# ---- replay ------------------------------------------------------------------------------
DEFAULT: dict = {
    "rrf_k": RRF_K,
    "dense": 1.0,  # dense rankings' weight against the keyword ones
    "kw": "kw",  # which keyword rankings (column weights)
    "prf_kw": 0.25,  # extractive.FEEDBACK_WEIGHT
    "prf_dense": 0.0,
    "prior": PRIOR,
    "page": PAGE_WEIGHT,
    "agg": "mean",
    "cos": 1.0,
    "title": 0.0,
    "per_result": PER_RESULT,
    "cos_of": "max",  # cosine over the variants (max) or of the message only (msg)
    "per_file": MAX_PER_FILE,
    "page_max": 0.2,  # weight of the page's best chunk cosine, besides ``agg``'s (RERANK_PAGE_BEST_SHARE x page)
    "overview": 0.0,  # subtracted from a chunk of an index / README / overview page
    "page_name": 0.0,  # weight of the cosine with the page's name (path words, first heading)
    "section_name": 0.0,  # weight of the cosine with the section's name (path words, heading path)
    "use": 0.0,  # weight of the multilingual encoder's ranking in the fusion
    "use_cos": 0.0,  # weight of the multilingual encoder's cosine in the rerank
    "grade_all": 0.0,  # weight of the chunk's best sentence score (the graders'), all variants
    "grade_msg": 0.0,  # the same, the message alone
    "ident": 0.0,  # weight of the share of the message's identifiers the chunk holds (``textfeats``)
    "ident_page": 0.0,  # the same, anywhere on the chunk's page
    "code": 0.0,  # the same, codes only (PH-500)
    "pairs": 0.0,  # weight of the share of the message's adjacent term pairs found near each other
    "head_idf": 0.0,  # weight of the idf share of the message's tokens in the heading path
    "head_last_idf": 0.0,  # the same, the last heading only
}
TEXT_FEATURES = ("ident", "ident_page", "code", "pairs", "head_idf", "head_last_idf")


class Row:
    """One saved row, prepared for fast replays: pool features as arrays."""

    def __init__(self, r: dict):
        self.id = r["id"]
        self.sources = set(r["sources"])
        self.real = r["real"]
        self.pool = r["pool"]
        self.index = {f["rowid"]: i for i, f in enumerate(self.pool)}
        self.rankings = r["rankings"]
        self.prf_by_k = any(kind.startswith("prf_kw@") for kind, _w, _rk in self.rankings)
        n = len(self.pool)
        self.file = [f["file"] for f in self.pool]
        self.title = [f["title"] for f in self.pool]
        self.cos_max = np.array([max(f["cos"]) for f in self.pool], dtype=np.float32)
        self.cos_msg = np.array([f["cos"][0] for f in self.pool], dtype=np.float32)
        self.title_share = np.array([f["title_share"] for f in self.pool], dtype=np.float32)
        self.page_name = np.array([f.get("page_name_cos", 0.0) for f in self.pool], dtype=np.float32)
        self.section_name = np.array([f.get("section_name_cos", 0.0) for f in self.pool], dtype=np.float32)
        self.use_cos = np.array([f.get("use_cos", 0.0) for f in self.pool], dtype=np.float32)
        self.text = {a: np.array([f.get(a, 0.0) for f in self.pool], dtype=np.float32) for a in TEXT_FEATURES}
        pg = [r["pages"][f"{f['file']}\x00{f['source']}"] for f in self.pool]
        self.page = {
            a: np.array([p.get(a, 0.0) for p in pg], dtype=np.float32) for a in ("mean", "max", "top2", "top3")
        }
        if all("cos" in p for p in pg):
            for how in ("topsqrt", "toplog", "top25", "top50", "top75"):
                self.page[how] = np.array([aggregate(p["cos"], how) for p in pg], dtype=np.float32)
        self.page_n = np.array([p.get("n", 1) for p in pg], dtype=np.float32)
        self.short = [p["short"] for p in pg]
        self.overview = np.array([bool(OVERVIEW.search(f["file"])) for f in self.pool], dtype=np.float32)
        self.rel = np.array([f["file"] in self.sources for f in self.pool], dtype=bool)
        self.n = n
        # the best reciprocal rank of each pool chunk in the keyword and in the dense rankings
        self.kw_rr = np.zeros(n, dtype=np.float32)
        self.dense_rr = np.zeros(n, dtype=np.float32)
        for kind, _w, rk in self.rankings:
            arr = self.kw_rr if kind == "kw" else self.dense_rr if kind == "dense" else None
            if arr is None:
                continue
            for i, cid in enumerate(rk[:CANDIDATES], start=1):
                if cid in self.index:
                    arr[self.index[cid]] = max(arr[self.index[cid]], 1.0 / (RRF_K + i) * RRF_K)

    def fused(self, s: dict) -> list[int]:
        """Pool positions in the order of KnowledgeBase.search's fusion (ties: first seen)."""
        scores: dict[int, float] = {}
        for kind, w, rk in self.rankings:
            if kind == "kw" and s["kw"] == "kw" or kind == s["kw"]:
                weight = w
            elif kind == "dense":
                weight = w * s["dense"]
            elif kind in ("prf_dense", "use"):
                weight = s[kind]
            elif kind == "prf_kw" and not self.prf_by_k or kind == f"prf_kw@{s['rrf_k']}":
                weight = s["prf_kw"]
            else:
                continue
            if weight <= 0:
                continue
            for i, cid in enumerate(rk[:CANDIDATES], start=1):
                scores[cid] = scores.get(cid, 0.0) + weight / (s["rrf_k"] + i)
        ordered = sorted(scores, key=lambda c: -scores[c])
        return [self.index[c] for c in ordered if c in self.index]

    def candidates(self, s: dict) -> list[int]:
        k = K * s["per_result"]
        per_file: Counter[str] = Counter()
        out = []
        for i in self.fused(s)[: max(k * 6, 30)]:
            if per_file[self.file[i]] >= s["per_file"]:
                continue
            per_file[self.file[i]] += 1
            out.append(i)
            if len(out) >= k:
                break
        return out

    def features(self, s: dict, cands: list[int]) -> np.ndarray:
        """Per candidate: prior term, cosine, page aggregates, title share, log page size."""
        c = np.array(cands)
        ranks = np.arange(1, len(c) + 1, dtype=np.float32)
        cos = self.cos_max if s["cos_of"] == "max" else self.cos_msg
        return np.stack(
            [
                11.0 / (10.0 + ranks),
                cos[c],
                self.cos_msg[c],
                self.page["mean"][c],
                self.page["max"][c],
                self.page["top3"][c],
                self.title_share[c],
                np.log1p(self.page_n[c]),
                self.kw_rr[c],
                self.dense_rr[c],
            ],
            axis=1,
        )

    def pages_out(self, s: dict, weights: np.ndarray | None = None) -> list[str]:
        cands = self.candidates(s)
        if not cands:
            return []
        c = np.array(cands)
        if weights is not None:
            score = self.features(s, cands) @ weights
        else:
            ranks = np.arange(1, len(c) + 1, dtype=np.float32)
            cos = self.cos_max if s["cos_of"] == "max" else self.cos_msg
            score = (
                s["prior"] * 11.0 / (10.0 + ranks)
                + s["cos"] * cos[c]
                + s["title"] * self.title_share[c]
                + s["page"] * self.page[s["agg"]][c]
                + s["page_max"] * self.page["max"][c]
                + s["page_name"] * self.page_name[c]
                + s["section_name"] * self.section_name[c]
                + s["use_cos"] * self.use_cos[c]
                + s["grade_all"] * self.grade_all[c]
                + s["grade_msg"] * self.grade_msg[c]
                - s["overview"] * self.overview[c]
            )
            for a in TEXT_FEATURES:
                if s[a]:
                    score = score + s[a] * self.text[a][c]
        order = c[np.argsort(-score, kind="stable")] if len(c) > 1 else c
        out: list[str] = []
        seen: set = set()
        for i in order:
            key = (self.file[i], self.title[i])
            page = (self.file[i], None)
            if key in seen or page in seen:
                continue
            seen.add(page if self.short[i] else key)
            out.append(self.file[i])
            if len(out) >= K:
                break
        return out

    def hits(self, s: dict, weights: np.ndarray | None = None) -> tuple[int, int]:
        got = self.pages_out(s, weights)
        return int(bool(got) and got[0] in self.sources), int(any(g in self.sources for g in got[:K]))


def load(paths: list[str]) -> dict[str, list[Row]]:
    out = {}
    for p in paths:
        d = pickle.loads(Path(p).read_bytes())
        side = Path(p).with_suffix(".units")
        graded = pickle.loads(side.read_bytes()) if side.exists() else {}
        rows = [Row(r) for r in d["rows"]]
        for row in rows:
            g = graded.get(row.id, {})
            row.grade_all = np.array([g.get(f["rowid"], (0.0, 0.0))[0] for f in row.pool], dtype=np.float32)
            row.grade_msg = np.array([g.get(f["rowid"], (0.0, 0.0))[1] for f in row.pool], dtype=np.float32)
        out[Path(p).stem] = rows
    return out


def score(rows: list[Row], s: dict, weights: np.ndarray | None = None) -> tuple[int, int]:
    h = [r.hits(s, weights) for r in rows]
    return sum(a for a, _ in h), sum(b for _, b in h)


IDEAS = {
    "RRF constant": ["rrf_k"],
    "dense weight in the fusion": ["dense"],
    "RRF constant and dense weight": ["rrf_k+dense"],
    "keyword field weights (FTS5 columns, BM25F)": ["kw"],
    "pseudo-relevance feedback, keyword (RM3-like)": ["prf_kw"],
    "pseudo-relevance feedback, dense (Rocchio)": ["prf_dense"],
    "pseudo-relevance feedback, both": ["prf_kw+prf_dense"],
    "rank prior weight": ["prior"],
    "page evidence weight": ["page"],
    "page evidence aggregate": ["agg", "agg+page"],
    "page's best chunk besides the mean": ["page_max"],
    "page's best chunk besides the mean, 0.1-0.4": ["page_max", "page_max_wide"],
    "title share": ["title"],
    "candidates reranked": ["per_result"],
    "chunks per page among the candidates": ["per_file"],
    "cosine of the message only": ["cos_of"],
    "cosine with the page's name": ["page_name"],
    "index / README / overview pages lowered": ["overview"],
    "cosine with the section's name": ["section_name"],
    "multilingual encoder's ranking in the fusion": ["use"],
    "multilingual encoder's cosine in the rerank": ["use_cos"],
    "multilingual encoder, both": ["use", "use_cos", "use+use_cos"],
    "keyword feedback with the page's best chunk": ["prf_kw", "prf_kw+page_max"],
    "keyword feedback with the RRF constant": ["prf_kw", "prf_kw+rrf_k"],
    "keyword feedback with the rank prior": ["prf_kw", "prf_kw+prior"],
    "keyword feedback with the page evidence weight": ["prf_kw", "prf_kw+page"],
    "page's best chunk with the RRF constant": ["page_max", "rrf_k", "page_max+rrf_k"],
    "page's best chunk with the page evidence weight": ["page_max", "page", "page_max+page"],
    "best sentence score (graders'), all variants": ["grade_all"],
    "identifiers the chunk holds": ["ident"],
    "identifiers the page holds": ["ident_page"],
    "codes the chunk holds": ["code"],
    "question's word pairs near each other": ["pairs"],
    "idf share in the heading path": ["head_idf"],
    "idf share in the last heading": ["head_last_idf"],
    "best sentence score (graders'), the message": ["grade_msg"],
}
"""Each idea: the grid axes (:func:`grid`'s tags) whose settings it chooses among (with now)."""


def grid() -> list[dict]:
    """The settings tried, one idea at a time around the present ones (and a few joint ones);
    each tagged with its axis in ``_axis``."""
    out = [dict(DEFAULT, _axis="now")]
    axes = {
        "rrf_k": list(RRF_GRID),
        "dense": [0.5, 0.75, 1.5, 2.0],
        "kw": ["kw" + str(w) for w in COLUMN_VARIANTS] + ["bm25" + n for n in BM25F_VARIANTS],
        "prf_kw": [0.0, 0.25, 0.5, 1.0],
        "prf_dense": [0.25, 0.5, 1.0],
        "prior": [0.5, 0.6, 0.9, 1.0],
        "page": [0.0, 0.15, 0.45, 0.6],
        "agg": ["max", "top2", "top3", "topsqrt", "toplog", "top25", "top50", "top75"],
        "title": [0.05, 0.1],
        "per_result": [3, 6, 8],
        "cos_of": ["msg"],
        "per_file": [1, 3],
        "page_max": [0.0, 0.1, 0.2],
        "page_max_wide": [0.15, 0.3, 0.4],
        "page_name": [0.1, 0.2, 0.3, 0.5],
        "overview": [0.05, 0.1, 0.2],
        "section_name": [0.1, 0.2, 0.3, 0.5],
        "use": [0.25, 0.5, 1.0, 2.0],
        "use_cos": [0.1, 0.2, 0.3, 0.5, 1.0],
        "grade_all": [0.1, 0.2, 0.3, 0.5, 1.0],
        "grade_msg": [0.1, 0.2, 0.3, 0.5, 1.0],
        "ident": [0.05, 0.1, 0.2, 0.3, 0.5],
        "ident_page": [0.05, 0.1, 0.2, 0.3],
        "code": [0.1, 0.3, 1.0],
        "pairs": [0.05, 0.1, 0.2, 0.3],
        "head_idf": [0.05, 0.1, 0.2, 0.3],
        "head_last_idf": [0.05, 0.1, 0.2, 0.3],
    }
    for extra in ({"page_max": 0.1}, {"page_max": 0.2}, {"rrf_k": 15}, {"rrf_k": 10}, {"prior": 0.9}, {"page": 0.45}):
        for pk in (0.25, 0.5):
            out.append({**DEFAULT, "prf_kw": pk, **extra, "_axis": "prf_kw+" + next(iter(extra))})
    for u, uc in itertools.product([0.5, 1.0], [0.2, 0.5]):
        out.append({**DEFAULT, "use": u, "use_cos": uc, "_axis": "use+use_cos"})
    for a, vals in axes.items():
        for v in vals:
            out.append({**DEFAULT, a.removesuffix("_wide"): v, "_axis": a})
    for agg, pw in itertools.product(["top2", "top3", "max", "topsqrt", "toplog", "top25", "top50"], [0.15, 0.45, 0.6]):
        out.append({**DEFAULT, "agg": agg, "page": pw, "_axis": "agg+page"})
    for pk, pd in itertools.product([0.25, 0.5], [0.25, 0.5]):
        out.append({**DEFAULT, "prf_kw": pk, "prf_dense": pd, "_axis": "prf_kw+prf_dense"})
    for rk, dw in itertools.product([10, 30, 60], [0.75, 1.5]):
        out.append({**DEFAULT, "rrf_k": rk, "dense": dw, "_axis": "rrf_k+dense"})
    for pm, rk in itertools.product([0.0, 0.1, 0.2, 0.3], [10, 15, 20, 30]):
        out.append({**DEFAULT, "page_max": pm, "rrf_k": rk, "_axis": "page_max+rrf_k"})
    for pm, pw in itertools.product([0.0, 0.1, 0.2, 0.3], [0.15, 0.45]):
        out.append({**DEFAULT, "page_max": pm, "page": pw, "_axis": "page_max+page"})
    return out


def name(s: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in s.items() if k in DEFAULT and DEFAULT[k] != v) or "now"


def loco_select(
    data: dict[str, list[Row]],
    settings: list[dict],
    table: dict[tuple[str, int], tuple[int, int]],
    among: list[int] | None = None,
) -> dict:
    """For each corpus, the setting (of ``among``, default all; index 0, now, always a
    candidate) with the best mean (r@1 + r@5) on the others (ties: now, then the earliest),
    scored on it."""
    names = list(data)
    out = {}
    among = [0] + [j for j in (among if among is not None else range(len(settings))) if j != 0]
    for held in names:
        best, best_v = 0, -1.0
        if len(names) == 1:
            out[held] = 0
            continue
        for j in among:
            v = sum(sum(table[(c, j)]) / len(data[c]) for c in names if c != held) / (len(names) - 1)
            if v > best_v + 1e-12:
                best, best_v = j, v
        out[held] = best
    return out


def fit_pairwise(
    data: dict[str, list[Row]], s: dict, train: list[str], l2: float = 1e-3, steps: int = 400
) -> np.ndarray:
    """Weights of a linear reranker over :meth:`Row.features`, by pairwise logistic loss: for
    each row, every (expected-page chunk, other chunk) pair among its candidates should score
    the expected one higher; each corpus weighs the same, each row the same within it."""
    xs, ws = [], []
    for c in train:
        rows = data[c]
        for r in rows:
            cands = r.candidates(s)
            if not cands:
                continue
            f = r.features(s, cands)
            rel = r.rel[np.array(cands)]
            if rel.all() or not rel.any():
                continue
            d = (f[rel][:, None, :] - f[~rel][None, :, :]).reshape(-1, f.shape[1])
            xs.append(d)
            ws.append(np.full(len(d), 1.0 / (len(d) * len(rows))))
    x, w = np.vstack(xs), np.concatenate(ws)
    w /= w.sum()
    mu = np.abs(x).mean(axis=0) + 1e-9
    xn = x / mu
    beta = np.zeros(x.shape[1])
    lr = 1.0
    for _ in range(steps):  # plain gradient descent on the convex loss
        z = xn @ beta
        p = 1.0 / (1.0 + np.exp(np.clip(z, -30, 30)))
        grad = -(xn * (w * p)[:, None]).sum(axis=0) + l2 * beta
        beta -= lr * grad
    return beta / mu


def fit_listwise(
    data: dict[str, list[Row]], s: dict, train: list[str], l2: float = 1e-2, steps: int = 600
) -> np.ndarray:
    """Weights of a linear reranker over :meth:`Row.features` by a listwise loss: for each
    row, minus the log of the softmax share its expected pages' chunks get among its
    candidates; each corpus weighs the same, each row the same within it."""
    items = []
    for c in train:
        rows = data[c]
        for r in rows:
            cands = r.candidates(s)
            if not cands:
                continue
            rel = r.rel[np.array(cands)]
            if rel.all() or not rel.any():
                continue
            items.append((r.features(s, cands), rel, 1.0 / len(rows)))
    scale = np.vstack([f for f, _, _ in items]).std(axis=0) + 1e-9
    total = sum(w for _, _, w in items)
    beta = np.zeros(len(scale))
    lr = 0.5
    for _ in range(steps):
        grad = l2 * beta
        for f, rel, w in items:
            z = (f / scale) @ beta
            p = np.exp(z - z.max())
            p /= p.sum()
            q = p * rel / (p[rel].sum())  # the softmax restricted to the expected chunks
            grad -= (w / total) * ((q - p) @ (f / scale))
        beta -= lr * grad
    return beta / scale


def loco(args: argparse.Namespace) -> None:
    for kv in args.base:  # the baseline of pickles collected on other code (their saved retrieve)
        key, value = kv.split("=", 1)
        DEFAULT[key] = type(DEFAULT[key])(value)
    data = load(args.inputs)
    names = list(data)
    if args.check:
        for c, rows in data.items():
            same = sum(r.pages_out(DEFAULT) == r.real for r in rows)
            print(f"check {c}: replay = retrieve on {same} of {len(rows)} rows", flush=True)
            for r in rows:
                if r.pages_out(DEFAULT) != r.real:
                    print("   ", r.id, r.pages_out(DEFAULT), r.real)
    aggs = set.intersection(*(set(r.page) for rows in data.values() for r in rows))
    graded = all(r.grade_all.any() for rows in data.values() for r in rows[:1])  # ``units`` on every corpus
    settings = [  # aggregates need ``pagecos`` on every corpus, sentence scores ``units``
        s for s in grid() if s["agg"] in aggs and (graded or not (s["grade_all"] or s["grade_msg"]))
    ]
    table = {(c, j): score(data[c], s) for c in names for j, s in enumerate(settings)}
    n = {c: len(data[c]) for c in names}
    chosen = loco_select(data, settings, table)
    report: dict = {"corpora": {}, "settings": [name(s) for s in settings]}
    print(
        f"{'corpus':28} {'rows':>4} {'now r@1':>8} {'now r@5':>8} {'LOCO r@1':>8} {'LOCO r@5':>8}  chosen on the others"
    )
    for c in names:
        b, lo = table[(c, 0)], table[(c, chosen[c])]
        print(
            f"{c:28} {n[c]:4} {b[0] / n[c]:8.3f} {b[1] / n[c]:8.3f} {lo[0] / n[c]:8.3f} {lo[1] / n[c]:8.3f}  "
            f"{name(settings[chosen[c]])}"
        )
        report["corpora"][c] = {
            "rows": n[c],
            "now": [b[0], b[1]],
            "loco": [lo[0], lo[1]],
            "chosen": name(settings[chosen[c]]),
        }
    mean = lambda j, which: sum(table[(c, j)][which] / n[c] for c in names) / len(names)  # noqa: E731
    lm1 = sum(table[(c, chosen[c])][0] / n[c] for c in names) / len(names)
    lm5 = sum(table[(c, chosen[c])][1] / n[c] for c in names) / len(names)
    print(f"mean: now {mean(0, 0):.3f} / {mean(0, 1):.3f}, LOCO {lm1:.3f} / {lm5:.3f}")
    report["mean"] = {"now": [mean(0, 0), mean(0, 1)], "loco": [lm1, lm5]}
    print(
        "\nby idea: LOCO mean r@1 / r@5 (now "
        + f"{mean(0, 0):.3f} / {mean(0, 1):.3f}"
        + "), corpora losing rows, settings chosen"
    )
    report["ideas"] = {}
    for idea, tags in IDEAS.items():
        among = [j for j, s in enumerate(settings) if s["_axis"] in tags]
        ch = loco_select(data, settings, table, among)
        i1 = sum(table[(c, ch[c])][0] / n[c] for c in names) / len(names)
        i5 = sum(table[(c, ch[c])][1] / n[c] for c in names) / len(names)
        delta = {c: (table[(c, ch[c])][0] - table[(c, 0)][0], table[(c, ch[c])][1] - table[(c, 0)][1]) for c in names}
        lost = {c: d for c, d in delta.items() if min(d) < 0}
        won = {c: d for c, d in delta.items() if max(d) > 0}
        on_all = max([0] + among, key=lambda j: (sum(sum(table[(c, j)]) / n[c] for c in names), j == 0))
        print(
            f"  {i1:.3f} / {i5:.3f}  won {won}  lost {lost}  chosen {sorted(set(name(settings[ch[c]]) for c in names))}"
            f"  on all {len(names)}: {name(settings[on_all])}  [{idea}]"
        )
        report["ideas"][idea] = {
            "loco": [i1, i5],
            "per_corpus": {c: [table[(c, ch[c])][0], table[(c, ch[c])][1]] for c in names},
            "chosen": {c: name(settings[ch[c]]) for c in names},
            "on_all": name(settings[on_all]),
        }
    # every setting: mean on all, rows won / lost against now, worst corpus loss
    rank_all = []
    for j in range(len(settings)):
        d1 = [table[(c, j)][0] - table[(c, 0)][0] for c in names]
        d5 = [table[(c, j)][1] - table[(c, 0)][1] for c in names]
        rank_all.append((mean(j, 0) + mean(j, 1), j, d1, d5))
    rank_all.sort(reverse=True)
    print("\nsettings on all corpora (mean r@1 / r@5; rows +won/-lost r@1, r@5; worst corpus loss):")
    for _v, j, d1, d5 in rank_all[: args.top]:
        worst = min(min(a, b) for a, b in zip(d1, d5, strict=True))
        print(
            f"  {mean(j, 0):.3f} / {mean(j, 1):.3f}  r@1 +{sum(x for x in d1 if x > 0)}/{sum(x for x in d1 if x < 0)}"
            f"  r@5 +{sum(x for x in d5 if x > 0)}/{sum(x for x in d5 if x < 0)}  worst {worst}  {name(settings[j])}"
        )
    report["all"] = [
        {"setting": name(settings[j]), "r1": mean(j, 0), "r5": mean(j, 1), "d1": d1, "d5": d5}
        for _, j, d1, d5 in rank_all
    ]
    if args.fit:
        print("\npairwise logistic reranker, LOCO:")
        fit_rows = {}
        for c in names:
            fit = fit_listwise if args.fit == "listwise" else fit_pairwise
            beta = fit(data, DEFAULT, [x for x in names if x != c])
            got = score(data[c], DEFAULT, beta)
            fit_rows[c] = got
            print(
                f"  {c:28} {got[0] / n[c]:.3f} / {got[1] / n[c]:.3f}  (now {table[(c, 0)][0] / n[c]:.3f} / "
                f"{table[(c, 0)][1] / n[c]:.3f})  w {np.round(beta, 3).tolist()}"
            )
        f1 = sum(fit_rows[c][0] / n[c] for c in names) / len(names)
        f5 = sum(fit_rows[c][1] / n[c] for c in names) / len(names)
        print(f"  mean LOCO {f1:.3f} / {f5:.3f}")
        report["fit"] = {"per_corpus": fit_rows, "mean": [f1, f5]}
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect")
    from bench.extra_corpora import corpus_argument

    c.add_argument("--corpus", required=True, type=corpus_argument)
    c.add_argument("--eval", required=True)
    c.add_argument("--out", required=True)
    c.add_argument("--config", default=str(Path(__file__).resolve().parent.parent / "config.toml"))
    c.add_argument("--depth", type=int, default=100, help="chunks kept of each ranking")
    ca = sub.add_parser("collect-all")
    ca.add_argument("--out-dir", required=True)
    ca.add_argument("--only", nargs="*", default=[], help="these names of bench/fit_lead.py's TUNING only")
    ca.add_argument("--config", default=str(Path(__file__).resolve().parent.parent / "config.toml"))
    ca.add_argument("--depth", type=int, default=100, help="chunks kept of each ranking")
    f = sub.add_parser("bm25f")
    f.add_argument("pickle")
    f.add_argument("--config", default=str(Path(__file__).resolve().parent.parent / "config.toml"))
    f.add_argument("--depth", type=int, default=100)
    t = sub.add_parser("titles")
    t.add_argument("pickle")
    t.add_argument("--config", default=str(Path(__file__).resolve().parent.parent / "config.toml"))
    u = sub.add_parser("use")
    u.add_argument("pickle")
    u.add_argument("--config", default=str(Path(__file__).resolve().parent.parent / "config.toml"))
    u.add_argument("--depth", type=int, default=100)
    pc = sub.add_parser("pagecos")
    pc.add_argument("pickle")
    pc.add_argument("--config", default=str(Path(__file__).resolve().parent.parent / "config.toml"))
    un = sub.add_parser("units")
    un.add_argument("pickle")
    un.add_argument("--config", default=str(Path(__file__).resolve().parent.parent / "config.toml"))
    tf = sub.add_parser("textfeats")
    tf.add_argument("pickle")
    tf.add_argument("--config", default=str(Path(__file__).resolve().parent.parent / "config.toml"))
    lo = sub.add_parser("loco")
    lo.add_argument("inputs", nargs="+")
    lo.add_argument("--check", action="store_true", help="compare the replay with the saved retrieve")
    lo.add_argument("--fit", choices=["pairwise", "listwise"], help="also a fitted linear reranker, LOCO")
    lo.add_argument("--top", type=int, default=25)
    lo.add_argument(
        "--base",
        nargs="*",
        default=[],
        metavar="KEY=VALUE",
        help="the present settings differ: e.g. prf_kw=0 for pickles collected before the keyword feedback",
    )
    lo.add_argument("--json", default="")
    args = ap.parse_args()
    {
        "collect": collect,
        "collect-all": collect_all,
        "bm25f": bm25f,
        "titles": titles,
        "use": use,
        "pagecos": pagecos,
        "units": units,
        "textfeats": textfeats,
        "loco": loco,
    }[args.cmd](args)


if __name__ == "__main__":
    main()
