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
and the variants fused by reciprocal rank as the SQLite store does (:func:`graphs.learned.search_entries`).

Calls are synchronous (the graph calls them from worker threads) over a small psycopg pool.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from graphs import terms
from graphs.knowledge.index import keyword_phrases
from graphs.learned import ENTRY_COLUMNS, LearnedEntry, entry_values, search_entries, sources_column


class PostgresLearnedStore:
    """Learned entries in table ``learned_entries`` (schema migrations 5 and 6).

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
        sources: Collection[str] = (),
    ) -> LearnedEntry:
        """:meth:`graphs.learned.LearnedStore.add`.

        Raises:
            psycopg.Error, psycopg_pool.PoolTimeout: the database cannot be reached.
        """
        question, answer, at = entry_values(question, answer, answered_at)
        searchable = f"{terms.index_text(question)} {terms.index_text(answer)}"
        with self._pool.connection() as conn:
            row = conn.execute(
                "INSERT INTO learned_entries (question, answer, answered_by, answered_at, thread_key, permalink,"
                " platform, channel, sources, search) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s,"
                " to_tsvector('english', %s)) RETURNING id",
                (
                    question,
                    answer,
                    answered_by,
                    at,
                    thread_key,
                    permalink,
                    platform,
                    channel,
                    sources_column(sources),
                    searchable,
                ),
            ).fetchone()
        kept = tuple(sorted(set(sources)))
        entry_id = int(row["id"])
        return LearnedEntry(entry_id, question, answer, answered_by, at, thread_key, permalink, platform, channel, kept)

    def forget(self, entry_id: int) -> bool:
        """:meth:`graphs.learned.LearnedStore.forget`, for every replica."""
        with self._pool.connection() as conn:
            row = conn.execute("DELETE FROM learned_entries WHERE id = %s RETURNING id", (int(entry_id),)).fetchone()
        return row is not None

    def get(self, entry_id: int) -> LearnedEntry | None:
        """:meth:`graphs.learned.LearnedStore.get`."""
        with self._pool.connection() as conn:
            row = conn.execute(
                f"SELECT {ENTRY_COLUMNS} FROM learned_entries WHERE id = %s", (int(entry_id),)
            ).fetchone()
        return LearnedEntry.from_row(row) if row else None

    def entries(self) -> list[LearnedEntry]:
        """:meth:`graphs.learned.LearnedStore.entries`."""
        with self._pool.connection() as conn:
            rows = conn.execute(f"SELECT {ENTRY_COLUMNS} FROM learned_entries ORDER BY id").fetchall()
        return [LearnedEntry.from_row(r) for r in rows]

    def search(self, queries: Sequence[str | tuple[str, float]], k: int) -> list[LearnedEntry]:
        """:meth:`graphs.learned.LearnedStore.search`: full text search per query variant, fused
        (:func:`graphs.learned.search_entries`; see the module docstring)."""
        with self._pool.connection() as conn:

            def rank(text: str) -> list[int] | None:
                phrases = keyword_phrases(text)
                if not phrases:
                    return None
                tsquery = " || ".join(["plainto_tsquery('english', %s)"] * len(phrases))
                rows = conn.execute(
                    f"SELECT id FROM learned_entries, ({'SELECT ' + tsquery} AS q) AS query WHERE search @@ q"
                    " ORDER BY ts_rank_cd(search, q) DESC, id LIMIT %s",
                    (*phrases, self.candidates),
                ).fetchall()
                return [int(r["id"]) for r in rows]

            def fetch(ids: list[int]) -> list[LearnedEntry]:
                rows = conn.execute(
                    f"SELECT {ENTRY_COLUMNS} FROM learned_entries WHERE id = ANY(%s)", (ids,)
                ).fetchall()
                return [LearnedEntry.from_row(r) for r in rows]

            return search_entries(queries, k, rank, fetch)
