"""The learned entries (:class:`graphs.learned.LearnedStore`) in the shared PostgreSQL database.

Every replica, on any host, reads and writes the one table ``learned_entries``: an entry an
expert answered through one replica is searched by all of them at the next question, and
``learned forget ID`` on any replica stops every replica using it (nothing is cached).

Search is PostgreSQL's full text search (https://www.postgresql.org/docs/current/textsearch.html):
the question and answer are stored as a ``tsvector`` of the same normalised text the SQLite
store indexes (:func:`graphs.terms.index_text`: case-folded, spaceless scripts as characters
and bigrams) under the ``english`` configuration (Snowball stemming, as FTS5's porter
tokenizer of the SQLite store stems), with a GIN index. Each query variant's content terms
(:func:`graphs.knowledge.index.keyword_phrases`) are OR-ed, entries ranked by ``ts_rank_cd``,
and the variants fused by reciprocal rank as the SQLite store does (:func:`graphs.learned.fuse`).

Calls are synchronous (the graph calls them from worker threads) over a small psycopg pool.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from graphs import terms
from graphs.knowledge.index import keyword_phrases
from graphs.learned import LearnedEntry, fuse, query_weights

_COLUMNS = "id, question, answer, answered_by, answered_at, thread_key, permalink, platform, channel"


def _entry(r: dict[str, Any]) -> LearnedEntry:
    return LearnedEntry(
        int(r["id"]),
        r["question"],
        r["answer"],
        r["answered_by"],
        float(r["answered_at"]),
        r["thread_key"],
        r["permalink"],
        r["platform"],
        r["channel"],
    )


class PostgresLearnedStore:
    """Learned entries in table ``learned_entries`` (schema migration 5).

    Args:
        pool: a psycopg ``ConnectionPool`` (sync) of ``dict_row`` connections in autocommit.
        candidates: full-text candidates per query variant before fusion.
    """

    def __init__(self, pool: Any, candidates: int = 20) -> None:
        self._pool = pool
        self.candidates = candidates

    def add(
        self,
        question: str,
        answer: str,
        answered_by: str,
        *,
        thread_key: str = "",
        permalink: str = "",
        platform: str = "",
        channel: str = "",
        answered_at: float | None = None,
    ) -> LearnedEntry:
        """Save an entry and index it; returns it with its id.

        Raises:
            ValueError: ``answer`` is empty.
            psycopg.Error, psycopg_pool.PoolTimeout: the database cannot be reached.
        """
        question, answer = question.strip(), answer.strip()
        if not answer:
            raise ValueError("a learned entry needs an answer")
        at = time.time() if answered_at is None else answered_at
        searchable = f"{terms.index_text(question)} {terms.index_text(answer)}"
        with self._pool.connection() as conn:
            row = conn.execute(
                "INSERT INTO learned_entries (question, answer, answered_by, answered_at, thread_key, permalink,"
                " platform, channel, search) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, to_tsvector('english', %s))"
                " RETURNING id",
                (question, answer, answered_by, at, thread_key, permalink, platform, channel, searchable),
            ).fetchone()
        return LearnedEntry(int(row["id"]), question, answer, answered_by, at, thread_key, permalink, platform, channel)

    def forget(self, entry_id: int) -> bool:
        """Remove an entry (for every replica); False when there is none with that id."""
        with self._pool.connection() as conn:
            row = conn.execute("DELETE FROM learned_entries WHERE id = %s RETURNING id", (int(entry_id),)).fetchone()
        return row is not None

    def get(self, entry_id: int) -> LearnedEntry | None:
        """The entry ``entry_id``, or None."""
        with self._pool.connection() as conn:
            row = conn.execute(f"SELECT {_COLUMNS} FROM learned_entries WHERE id = %s", (int(entry_id),)).fetchone()
        return _entry(row) if row else None

    def entries(self) -> list[LearnedEntry]:
        """Every entry, oldest first."""
        with self._pool.connection() as conn:
            rows = conn.execute(f"SELECT {_COLUMNS} FROM learned_entries ORDER BY id").fetchall()
        return [_entry(r) for r in rows]

    def search(self, queries: Sequence[str | tuple[str, float]], k: int) -> list[LearnedEntry]:
        """Entries matching the query variants, best first (see the module docstring).

        Args:
            queries: plain or ``(query, weight)``, as ``KnowledgeBase.search`` takes them.
            k: most entries returned.
        """
        ranked: list[tuple[list[int], float]] = []
        with self._pool.connection() as conn:
            for text, weight in query_weights(queries):
                phrases = keyword_phrases(text)
                if not phrases:
                    continue
                tsquery = " || ".join(["plainto_tsquery('english', %s)"] * len(phrases))
                rows = conn.execute(
                    f"SELECT id FROM learned_entries, ({'SELECT ' + tsquery} AS q) AS query WHERE search @@ q"
                    " ORDER BY ts_rank_cd(search, q) DESC, id LIMIT %s",
                    (*phrases, self.candidates),
                ).fetchall()
                ranked.append(([int(r["id"]) for r in rows], weight))
            best = fuse(ranked, k)
            if not best:
                return []
            rows = conn.execute(f"SELECT {_COLUMNS} FROM learned_entries WHERE id = ANY(%s)", (best,)).fetchall()
        by_id = {int(r["id"]): _entry(r) for r in rows}
        return [by_id[i] for i in best if i in by_id]
