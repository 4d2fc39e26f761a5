"""Keyword ranking of one index generation in memory: FTS5's ``bm25()``, computed from postings.

Why: ``SELECT rowid FROM fts WHERE fts MATCH '"a" OR "b" ...' ORDER BY bm25(fts)``
calls FTS5's ``bm25()`` once per matching row, and a chat question's OR query of common
words ("graph", "state", "node") matches most chunks: ~2 ms of CPU per query variant on a
2,885-chunk index, the largest single item of a graph worker's profile under load. The same
scores computed from postings held as numpy arrays take a few microseconds per term.

The postings are read once per generation from the FTS5 index itself (the ``fts5vocab``
``instance`` table), so the tokens, Porter stems and token counts are SQLite's own; they
are saved beside the index (``keyword.npz``) when a generation is written and rebuilt from
the index when an older generation has none.

Scores are FTS5's ``bm25()`` (https://sqlite.org/fts5.html#the_bm25_function, ``fts5_aux.c``
``fts5Bm25Function``), with its constants k1 = 1.2, b = 0.75: for each phrase of the query

    idf * f * (k1 + 1) / (f + k1 * (1 - b + b * D / avgdl))

where f = sum over columns of (column weight x occurrences of the phrase in that column),
D = tokens in the row (all columns), avgdl = mean tokens per row, and
idf = ln((N - n + 0.5) / (n + 0.5)) with N rows and n rows holding the phrase (1e-6 when not
positive). A phrase of one token is scored from the postings; a phrase of several tokens
(an identifier such as ``create_react_agent``, whose ``_`` FTS5 treats as a separator) is
asked of FTS5 alone, where its ``bm25()`` is that phrase's term exactly.
"""

from __future__ import annotations

import math
import sqlite3
import threading
from array import array
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np

K1 = 1.2
"""FTS5 ``bm25()``'s k1 (term-frequency saturation)."""
B = 0.75
"""FTS5 ``bm25()``'s b (length normalisation)."""
COLUMNS = ("text", "title", "file")
"""The FTS5 table's columns, in order."""
COLUMN_WEIGHTS = (1.0, 2.0, 2.0)
"""Weights of :data:`COLUMNS` in the score (the title and the file path count twice)."""

POSTINGS_FILE = "keyword.npz"
"""The postings' file in a generation folder."""


def _term(raw: bytes) -> str:
    """An FTS5 token as text. FTS5 cuts a token at 32,768 bytes, possibly inside a UTF-8
    character, which SQLite then cannot return as text: the bytes are read as they are and
    undecodable ones kept as surrogate escapes, the same way on the index and the query side."""
    return raw.decode("utf-8", "surrogateescape")


class KeywordPostings:
    """Term -> (rows, weighted frequency) of one FTS5 table, with each row's length.

    Args:
        terms: FTS5 tokens (Porter stems, see :func:`_term`); a term's position is its id.
        indptr: ``len(terms) + 1`` offsets into ``rows`` / ``freqs`` (CSR by term).
        rows: rowids holding each term, ascending per term (int32).
        freqs: the column-weighted occurrence count f of the term in each of those rows.
        lengths: tokens per rowid (index 0 unused), float64.
        count: rows in the table (N).
        generation: the index generation (folder name) the postings were read from.
    """

    def __init__(
        self,
        terms: list[str],
        indptr: np.ndarray,
        rows: np.ndarray,
        freqs: np.ndarray,
        lengths: np.ndarray,
        count: int,
        generation: str = "",
    ) -> None:
        self.terms = terms
        self.index = {t: i for i, t in enumerate(terms)}
        self.indptr, self.rows, self.freqs = indptr, rows, freqs
        self.lengths = lengths
        self.count = int(count)
        self.generation = generation
        avgdl = float(lengths.sum()) / self.count if self.count else 1.0
        # the row-dependent part of the denominator, once per row, in fts5Bm25Function's order
        self.norm = K1 * (1 - B + B * lengths / (avgdl or 1.0))
        self._saturation: dict[int, float] = {}
        self._dense: OrderedDict[int, np.ndarray | None] = OrderedDict()
        self._dense_lock = threading.Lock()

    @classmethod
    def from_fts(cls, conn: sqlite3.Connection, table: str = "fts", generation: str = "") -> KeywordPostings:
        """Read the postings of FTS5 table ``table`` on ``conn`` (its ``fts5vocab`` instance
        view, made in the connection's temp schema; works on a read-only connection).

        The view yields one row per token occurrence; they are streamed into arrays, not
        held as a list of rows (2,885 chunks, 266,000 occurrences: ~0.3 s, a reindex's peak
        memory +26 MB; a list of rows cost +200 MB)."""
        view = f"temp.{table}_instance_{threading.get_ident()}"
        conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {view} USING fts5vocab(main, {table}, instance)")
        weight_of = dict(zip(COLUMNS, COLUMN_WEIGHTS, strict=True))
        ids: dict[str, int] = {}
        term_ids, docs, weights = array("i"), array("q"), array("d")
        try:
            for term, doc, col in conn.execute(f"SELECT CAST(term AS BLOB), doc, col FROM {view}"):
                term_ids.append(ids.setdefault(_term(term), len(ids)))
                docs.append(doc)
                weights.append(weight_of[col])
        finally:
            conn.execute(f"DROP TABLE IF EXISTS {view}")
        count = conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        terms = list(ids)
        if not terms:
            return cls(
                [],
                np.zeros(1, np.int64),
                np.zeros(0, np.int32),
                np.zeros(0, np.float64),
                np.zeros(1, np.float64),
                count,
                generation,
            )
        doc_arr = np.frombuffer(docs, dtype=np.int64)
        term_arr = np.frombuffer(term_ids, dtype=np.int32).astype(np.int64)
        max_doc = int(doc_arr.max())
        lengths = np.bincount(doc_arr, minlength=max_doc + 1).astype(np.float64)
        # one entry per (term, row), weighted counts summed
        key = term_arr * (max_doc + 1) + doc_arr
        uniq, inverse = np.unique(key, return_inverse=True)
        freqs = np.bincount(inverse, weights=np.frombuffer(weights, dtype=np.float64))
        term_of, rows = np.divmod(uniq, max_doc + 1)
        indptr = np.zeros(len(terms) + 1, dtype=np.int64)
        np.cumsum(np.bincount(term_of, minlength=len(terms)), out=indptr[1:])
        return cls(terms, indptr, rows.astype(np.int32), freqs, lengths, count, generation)

    def save(self, path: Path) -> None:
        """Write the postings to ``path`` (an ``.npz`` file; the terms as one UTF-8 text, one
        per line: FTS5 tokens hold no line breaks)."""
        blob = "\n".join(self.terms).encode("utf-8", "surrogateescape")
        with open(path, "wb") as f:
            np.savez(
                f,
                terms=np.frombuffer(blob, dtype=np.uint8),
                indptr=self.indptr,
                rows=self.rows,
                freqs=self.freqs,
                lengths=self.lengths,
                count=np.array(self.count),
                generation=np.frombuffer(self.generation.encode(), dtype=np.uint8),
            )

    @classmethod
    def load(cls, path: Path, generation: str, count: int, max_rowid: int | None = None) -> KeywordPostings:
        """Read postings written by :meth:`save` for ``generation`` of ``count`` rows whose
        rowids go up to ``max_rowid`` (``count`` when None: no gaps).

        Raises:
            OSError, ValueError, KeyError, zipfile.BadZipFile: the file is missing, not such
                postings, or not consistent with itself, its generation or its row count.
        """
        with np.load(path, allow_pickle=False) as z:
            text = z["terms"].tobytes().decode("utf-8", "surrogateescape")
            postings = cls(
                text.split("\n") if text else [],
                z["indptr"],
                z["rows"],
                z["freqs"],
                z["lengths"],
                int(z["count"]),
                z["generation"].tobytes().decode(),
            )
        postings.check(generation, count, max_rowid)
        return postings

    def check(self, generation: str, count: int, max_rowid: int | None = None) -> None:
        """Raise ValueError unless these postings belong to ``generation`` of ``count`` rows
        (rowids up to ``max_rowid``, default ``count``) and their arrays agree (shapes,
        offsets, row numbers, finite positive frequencies)."""
        top = count if max_rowid is None else max_rowid
        ind, rows, freqs, lengths = self.indptr, self.rows, self.freqs, self.lengths
        problems = [
            (self.generation != generation, f"written for {self.generation!r}"),
            (self.count != count, f"{self.count} rows, the index has {count}"),
            (any(a.ndim != 1 for a in (ind, rows, freqs, lengths)), "arrays are not flat"),
            (len(ind) != len(self.terms) + 1 or len(self.index) != len(self.terms), "offsets do not match the terms"),
            (
                len(rows) != len(freqs)
                or int(ind[0]) != 0
                or int(ind[-1]) != len(rows)
                or bool(np.any(np.diff(ind) < 0)),
                "offsets do not match the postings",
            ),
            (len(rows) > 0 and (int(rows.min()) < 1 or int(rows.max()) >= len(lengths)), "row numbers out of range"),
            (len(lengths) < 1 or len(lengths) - 1 > top, "row lengths do not match the index"),
            (not bool(np.all(np.isfinite(freqs)) and np.all(freqs > 0)), "frequencies are not positive numbers"),
        ]
        failed = [what for bad, what in problems if bad]
        if failed:
            raise ValueError("keyword postings do not match the index: " + "; ".join(failed))

    def merged(self, removed: np.ndarray, new: KeywordPostings, count: int, generation: str) -> KeywordPostings:
        """These postings without the rows ``removed``, plus ``new`` (the postings of rows
        added after every row here, read from an FTS5 table of those rows alone), for an
        index now holding ``count`` rows: what :meth:`from_fts` would read from the edited
        index, without reading the unchanged rows again.

        Rows keep ascending order per term: the kept rows of a term come first (they were
        ascending), then the new ones (higher rowids, ascending)."""
        keep = ~np.isin(self.rows, removed) if len(removed) else np.ones(len(self.rows), dtype=bool)
        old_terms = np.repeat(np.arange(len(self.terms), dtype=np.int64), np.diff(self.indptr))
        index = dict(self.index)
        terms = list(self.terms)
        for t in new.terms:
            if t not in index:
                index[t] = len(terms)
                terms.append(t)
        remap = np.array([index[t] for t in new.terms], dtype=np.int64)
        new_terms = np.repeat(remap, np.diff(new.indptr)) if len(new.terms) else np.zeros(0, np.int64)
        all_terms = np.concatenate([old_terms[keep], new_terms])
        order = np.argsort(all_terms, kind="stable")
        rows = np.concatenate([self.rows[keep], new.rows.astype(self.rows.dtype)])[order]
        freqs = np.concatenate([self.freqs[keep], new.freqs])[order]
        indptr = np.zeros(len(terms) + 1, dtype=np.int64)
        np.cumsum(np.bincount(all_terms, minlength=len(terms)), out=indptr[1:])
        size = max(len(self.lengths), len(new.lengths))
        lengths = np.zeros(size, dtype=np.float64)
        lengths[: len(self.lengths)] = self.lengths
        if len(removed):
            lengths[removed[removed < size]] = 0.0
        lengths[: len(new.lengths)] += new.lengths  # the new rows are all beyond the old ones
        # a term all of whose rows left stays in the vocabulary with no postings (FTS5 keeps none)
        return KeywordPostings(terms, indptr, rows, freqs, lengths, count, generation)

    def idf(self, n: int) -> float:
        """FTS5's idf of a term held by ``n`` rows: ln((N - n + 0.5) / (n + 0.5)), 1e-6 when
        not positive."""
        idf = math.log((self.count - n + 0.5) / (n + 0.5))
        return idf if idf > 0.0 else 1e-6

    def saturation(self, term: int) -> float:
        """The largest ``f (k1 + 1) / (f + norm)`` over the rows of term id ``term`` (its
        score without idf), computed as bm25 computes it: no row's term can exceed
        ``idf x`` this. Computed once per term and kept."""
        got = self._saturation.get(term)
        if got is None:
            start, end = int(self.indptr[term]), int(self.indptr[term + 1])
            f = self.freqs[start:end]
            got = float(np.max((f * (K1 + 1.0)) / (f + self.norm[self.rows[start:end]]))) if end > start else 0.0
            self._saturation[term] = got
        return got

    DENSE_SHARE = 8
    """A term held by at least 1/8 of the rows has its frequencies kept by row as well
    (:meth:`dense_freqs`)."""
    DENSE_TERMS = 64
    """Most terms whose frequencies are kept by row (2 bytes a row each: 128 MB at 1M rows)."""

    def dense_freqs(self, term: int) -> np.ndarray | None:
        """The weighted frequency of term id ``term`` in every row (uint16 indexed by rowid, 0
        where absent) when the term is held by at least 1/:data:`DENSE_SHARE` of the rows:
        looking rows up in it costs one read each, where finding them in the term's row list
        costs a binary search each. None for rarer terms, or frequencies that are not small
        whole numbers. Made on first use, the :data:`DENSE_TERMS` last used kept."""
        n = int(self.indptr[term + 1] - self.indptr[term])
        if n * self.DENSE_SHARE < len(self.lengths):
            return None
        with self._dense_lock:
            if term in self._dense:
                self._dense.move_to_end(term)
                return self._dense[term]
        start, end = int(self.indptr[term]), int(self.indptr[term + 1])
        f = self.freqs[start:end]
        dense = None
        if bool(np.all((f == np.floor(f)) & (f <= np.iinfo(np.uint16).max))):
            dense = np.zeros(len(self.lengths), dtype=np.uint16)
            dense[self.rows[start:end]] = f
        with self._dense_lock:
            self._dense[term] = dense
            while len(self._dense) > self.DENSE_TERMS:
                self._dense.popitem(last=False)
        return dense


class QueryTokenizer:
    """Splits query phrases into FTS5 tokens with the index's own tokenizer (an in-memory
    FTS5 table), so a phrase's stems are exactly those in the postings. Thread-safe; each
    phrase is tokenized once (LRU of 65,536 phrases).

    Args:
        tokenize: the FTS5 ``tokenize`` option of the index (e.g. ``porter unicode61``).
    """

    def __init__(self, tokenize: str) -> None:
        self._conn = sqlite3.connect(":memory:", check_same_thread=False)
        self._conn.execute(f"CREATE VIRTUAL TABLE q USING fts5(x, tokenize='{tokenize}')")
        self._conn.execute("CREATE VIRTUAL TABLE qv USING fts5vocab(q, instance)")
        self._lock = threading.Lock()
        self.tokens = lru_cache(maxsize=65536)(self._tokens)

    def _tokens(self, phrase: str) -> tuple[str, ...]:
        with self._lock:
            self._conn.execute("INSERT INTO q (rowid, x) VALUES (1, ?)", (phrase,))
            try:
                got = self._conn.execute("SELECT CAST(term AS BLOB) FROM qv ORDER BY offset").fetchall()
            finally:
                self._conn.execute("DELETE FROM q")
        return tuple(_term(t) for (t,) in got)


PhraseScores = Callable[[str], Iterable[tuple[int, float]]]
"""``phrase -> [(rowid, bm25)]`` for one phrase, from FTS5 itself."""

_MARGIN = 1e-9
"""Relative margin of the pruning test: partial sums added in another order than the final
scores may differ in their last bits; a row is dropped only when its bound is below the
threshold by more than that, so ties at the boundary are always scored."""


class _Term:
    """One phrase of a query: its rows (ascending) and what it adds to each, with the
    largest of those (the bound MaxScore prunes with)."""

    def __init__(
        self,
        rows: np.ndarray,
        bound: float,
        contribution: Callable[[np.ndarray], np.ndarray],
        lookup: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]] | None = None,
    ) -> None:
        self.rows = rows
        self.bound = bound
        self.contribution = contribution  # positions in ``rows`` -> the values added there
        self.lookup = lookup  # rowids -> (which hold the term, the values added to those)


def _token_term(postings: KeywordPostings, token: str) -> _Term | None:
    i = postings.index.get(token)
    if i is None:
        return None
    start, end = int(postings.indptr[i]), int(postings.indptr[i + 1])
    if end == start:
        return None
    rows, freqs = postings.rows[start:end], postings.freqs[start:end]
    idf = postings.idf(end - start)
    norm = postings.norm

    def contribution(at: np.ndarray) -> np.ndarray:
        # the same operations in the same order as fts5Bm25Function (fts5_aux.c), so equal
        # scores stay equal and ties keep FTS5's row order: idf * (num / denom)
        f = freqs[at]
        return idf * ((f * (K1 + 1.0)) / (f + norm[rows[at]]))

    lookup = None
    dense = postings.dense_freqs(i)
    if dense is not None:

        def lookup(candidates: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            held = dense[candidates]
            ok = held > 0
            f = held[ok].astype(np.float64)  # the same whole numbers as ``freqs``
            return ok, idf * ((f * (K1 + 1.0)) / (f + norm[candidates[ok]]))

    return _Term(rows, idf * postings.saturation(i), contribution, lookup)


def _phrase_term(found: Iterable[tuple[int, float]], size: int) -> _Term | None:
    pairs = sorted((int(r), float(v)) for r, v in found if 0 <= int(r) < size)  # a row beyond has no token
    if not pairs:
        return None
    rows = np.array([r for r, _ in pairs], dtype=np.int64)
    values = np.array([v for _, v in pairs], dtype=np.float64)
    # FTS5's bm25() is the negated score: ``score - value`` is what FTS5's sum adds
    return _Term(rows, float(np.max(-values)), lambda at: -values[at])


def rank(
    postings: KeywordPostings,
    tokenizer: QueryTokenizer,
    phrases: Sequence[str],
    limit: int,
    phrase_scores: PhraseScores | None = None,
) -> list[int]:
    """Rowids matching any of ``phrases`` (OR), best bm25 first, at most ``limit``; ties in
    rowid order. The result is what scoring every matching row gives.

    Not every matching row is scored: MaxScore pruning (Turtle & Flood, "Query evaluation:
    strategies and optimizations", 1995). The phrases are read in order of the most each can
    add to a row (rare words first); once the phrases left could add less, together, than
    the ``limit``-th best score seen so far, no row they alone hold can be returned, so
    their (long) row lists are not read: only the rows still able to reach that score are
    looked up in them. Then those rows are scored as FTS5 scores them, phrase by phrase in
    query order, so equal scores stay equal to the last bit.

    Args:
        postings: the generation's postings.
        tokenizer: the index's tokenizer.
        phrases: the query's phrases, each counted once in order, as FTS5 counts an OR query's
            phrases (two phrases with the same stem both count).
        limit: most rowids returned.
        phrase_scores: for a phrase of several tokens, ``phrase -> [(rowid, bm25)]`` from
            FTS5 (``bm25()`` is negative, better is lower); None skips such phrases.
    """
    size = len(postings.lengths) if len(postings.lengths) else 1
    query: list[_Term] = []
    for phrase in phrases:
        tokens = tokenizer.tokens(phrase)
        term = None
        if len(tokens) == 1:
            term = _token_term(postings, tokens[0])
        elif len(tokens) > 1 and phrase_scores is not None:
            term = _phrase_term(phrase_scores(phrase), size)
        if term is not None:
            query.append(term)
    if not query or limit <= 0:
        return []
    # read the phrases with the highest bound first; stop when the rest cannot reach the cut
    order = sorted(range(len(query)), key=lambda i: -query[i].bound)
    rest = [0.0] * (len(order) + 1)
    for j in range(len(order) - 1, -1, -1):
        rest[j] = rest[j + 1] + query[order[j]].bound
    partial = np.zeros(size, dtype=np.float64)
    seen = np.zeros(size, dtype=bool)
    candidates: np.ndarray | None = None
    for j, i in enumerate(order):
        term = query[i]
        partial[term.rows] += term.contribution(np.arange(len(term.rows)))
        seen[term.rows] = True
        left = rest[j + 1]
        if left == 0.0 or left >= rest[0] - left:  # nothing left, or the cut cannot be above it yet
            continue
        rows = np.flatnonzero(seen)
        if len(rows) < limit:
            continue
        values = partial[rows]
        cut = float(np.partition(values, len(values) - limit)[len(values) - limit]) * (1.0 - _MARGIN)
        if left < cut:
            # the rows the rest cannot lift to the cut are out, and so is every row not yet seen
            candidates = rows[values + left * (1.0 + _MARGIN) >= cut]
            break
    if candidates is None:
        candidates = np.flatnonzero(seen)
    return _top(query, candidates, limit)


def _top(query: list[_Term], candidates: np.ndarray, limit: int) -> list[int]:
    """The best ``limit`` of ``candidates`` (rowids, ascending), each scored by every phrase
    in query order; ties in rowid order."""
    scores = np.zeros(len(candidates), dtype=np.float64)
    for term in query:
        if term.lookup is not None and len(term.rows) > len(candidates):
            ok, values = term.lookup(candidates)
            scores[ok] += values
        elif len(term.rows) <= len(candidates):
            at = np.searchsorted(candidates, term.rows)
            ok = at < len(candidates)
            ok[ok] = candidates[at[ok]] == term.rows[ok]
            scores[at[ok]] += term.contribution(np.flatnonzero(ok))
        else:
            at = np.searchsorted(term.rows, candidates)
            ok = at < len(term.rows)
            ok[ok] = term.rows[at[ok]] == candidates[ok]
            scores[ok] += term.contribution(at[ok])
    if not len(candidates):
        return []
    values = -scores
    found = candidates
    if len(found) > 4 * limit:
        # only rows scoring at least the limit-th best can be returned: sort those alone (ties
        # at the boundary included, so the stable order is the full sort's)
        cut = np.partition(values, limit - 1)[limit - 1]
        near = np.flatnonzero(values <= cut)
        found, values = found[near], values[near]
    order = np.argsort(values, kind="stable")[:limit]
    return [int(r) for r in found[order]]
