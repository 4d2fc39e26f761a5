"""Learned entries: answers the team's experts gave, kept as knowledge.

When an expert answers a help request (or adds an entry with ``remember:``), the
standalone question and the answer are saved here with who answered, when, from which
thread, and a link to it where the platform has one. Retrieval searches these entries
with the documents (their own source type ``learned``, :func:`entry_doc`), and the answer
cites them as "answered by NAME on DATE". They never override documents silently: the
generate prompt says an entry is a teammate's answer and that a conflict with a document
must be stated (:data:`graphs.prompts.LEARNED_RULE`, added to the generate prompt).

Storage is behind :class:`LearnedStore`, so every process that answers reads the same
entries: :class:`SqliteLearnedStore` here (one small SQLite file with an FTS5 index (BM25)
over the question and answer, tokenised like the knowledge index
(:func:`graphs.terms.index_text`), so any script matches), and the bot's PostgreSQL backend
one in the shared database for replicas (:mod:`bot.storage.postgres.learned`). Calls are
synchronous: the graph and the chat runtime make them from worker threads.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from graphs import signals, terms
from graphs.knowledge.index import FTS_TOKENIZER, keyword_query
from graphs.state import Doc

log = logging.getLogger(__name__)

LEARNED_PREFIX = "learned:"

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS entries (
    id INTEGER PRIMARY KEY AUTOINCREMENT, question TEXT NOT NULL, answer TEXT NOT NULL,
    answered_by TEXT NOT NULL, answered_at REAL NOT NULL, thread_key TEXT NOT NULL DEFAULT '',
    permalink TEXT NOT NULL DEFAULT '', platform TEXT NOT NULL DEFAULT '', channel TEXT NOT NULL DEFAULT '',
    sources TEXT NOT NULL DEFAULT '');
CREATE VIRTUAL TABLE IF NOT EXISTS entries_fts USING fts5(question, answer, tokenize='{FTS_TOKENIZER}');
"""


@dataclass(frozen=True)
class LearnedEntry:
    """One learned entry.

    Attributes:
        id: its number (``threadwise learned forget ID``).
        question: the standalone question ("" for a ``remember:`` without a question).
        answer: the expert's answer (Markdown).
        answered_by: display name of the expert. answered_at: epoch seconds.
        thread_key: the thread it came from. permalink: a link to that thread ("" if none).
        platform, channel: where it was answered (the channel's ``[[channels]]`` may turn
            learned entries off).
        sources: the knowledge the thread searched when it was answered (the knowledge base's
            source names, :attr:`graphs.knowledge.kb.KnowledgeBase.sources`): it is used only
            where a thread searches all of them (:func:`usable`); () for an entry saved before
            entries kept them, used wherever it was before.
    """

    id: int
    question: str
    answer: str
    answered_by: str
    answered_at: float
    thread_key: str = ""
    permalink: str = ""
    platform: str = ""
    channel: str = ""
    sources: tuple[str, ...] = ()

    @property
    def date(self) -> str:
        """The day it was answered, ``YYYY-MM-DD`` (UTC)."""
        return datetime.fromtimestamp(self.answered_at, tz=UTC).strftime("%Y-%m-%d")

    @property
    def citation(self) -> str:
        """How answers cite it: ``answered by NAME on DATE``."""
        return f"answered by {self.answered_by or 'a teammate'} on {self.date}"

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "sources": list(self.sources), "date": self.date}

    @classmethod
    def from_row(cls, row: Sequence[Any] | Mapping[str, Any]) -> LearnedEntry:
        """The entry of a stored row of :data:`ENTRY_COLUMNS` (a sequence in their order, or a
        mapping by their names), its ``sources`` as :func:`sources_column` wrote them."""
        values = dict(row) if isinstance(row, Mapping) else dict(zip(ENTRY_COLUMNS.split(", "), row, strict=True))
        raw = values.get("sources") or ""
        try:
            names = json.loads(raw) if raw else []
        except ValueError:  # written by hand: taken as no scope rather than losing the entry
            names = []
        values["sources"] = tuple(str(n) for n in names) if isinstance(names, list) else ()
        return cls(**values)


def sources_column(sources: Collection[str]) -> str:
    """How stores keep an entry's ``sources``: a JSON list, sorted ("" for none)."""
    return json.dumps(sorted(set(sources))) if sources else ""


#: a turn's filter of the learned entries it may use (:func:`usable_for`)
EntryFilter = Callable[["LearnedEntry"], bool]


def usable(entry: LearnedEntry, knowledge: Collection[str] | None, here: tuple[str, str] | None = None) -> bool:
    """Whether a turn may use ``entry``.

    Args:
        entry: the learned entry.
        knowledge: the source names the turn searches (None: not known, any).
        here: ``(platform, channel)`` of a turn in a channel restricted to some sources, which
            uses only the entries learned in it (a channel's readers must not read through the
            bot what was said elsewhere); None elsewhere.

    Returns:
        True when the entry was learned in that channel (or ``here`` is None) and under
        knowledge the turn searches too: an expert's answer about one product ("runs on CPU
        only") is no answer about the product of another folder. An entry without sources (saved
        before entries kept them) is judged by its channel only, as it was. Never for an entry
        answering a question about the present moment (:func:`graphs.signals.holds_for_now`: "is
        the API down right now?"), which the bot no longer saves but older stores may hold: what
        was true then is no answer now.
    """
    if here is not None and (entry.platform, entry.channel) != here:
        return False
    if signals.holds_for_now(entry.question):
        return False
    return not entry.sources or knowledge is None or set(entry.sources) <= set(knowledge)


def usable_for(scope: Mapping[str, Any]) -> EntryFilter:
    """The filter of :func:`usable` for a turn's scope (:func:`graphs.state.scope_of`: its
    ``knowledge``, and its ``platform`` and ``channel`` when its ``sources`` are restricted)."""
    knowledge = scope.get("knowledge")
    restricted = scope.get("sources") is not None
    here = (str(scope.get("platform") or ""), str(scope.get("channel") or "")) if restricted else None
    return lambda entry: usable(entry, knowledge, here)


def entry_doc(entry: LearnedEntry, limit: int = 1500) -> Doc:
    """A learned entry as a retrieved document: ``location`` is the thread's link (or
    ``learned:ID``), ``title`` the citation, ``kind`` ``"learned"``."""
    question = f"Question: {entry.question}\n" if entry.question else ""
    text = f"{question}Answer ({entry.citation}): {entry.answer}"[:limit]
    return Doc(
        id=f"{LEARNED_PREFIX}{entry.id}",
        text=text,
        location=entry.permalink or f"{LEARNED_PREFIX}{entry.id}",
        title=entry.citation,
        score=0.0,
        kind="learned",
    )


_ENTRY_TEXT = re.compile(r"^(?:Question: (?P<question>.*?)\n)?Answer \((?P<citation>[^)]*)\): (?P<answer>.*)$", re.S)


def entry_parts(doc: Doc) -> tuple[str, str, str] | None:
    """``(question, citation, answer)`` of a learned entry's document (:func:`entry_doc`; the
    question "" for a ``remember:`` without one), None for any other document."""
    if doc.get("kind") != "learned":
        return None
    m = _ENTRY_TEXT.match(str(doc.get("text") or ""))
    return (m["question"] or "", m["citation"], m["answer"].strip()) if m else None


def shown_entry(doc: Doc, number: int) -> str:
    """A learned entry's document as an answer reads it: the expert's answer cited ``[number]``,
    then who answered, when, and the question they answered ("" for another document)."""
    parts = entry_parts(doc)
    if parts is None:
        return ""
    question, citation, answer = parts
    asked = f", to \u201c{question}\u201d" if question else ""
    return f"{answer} [{number}]\n\n(An expert's earlier answer: {citation}{asked}.)"


#: cosine (MiniLM) of a message with a learned entry's question or answer from which the entry is
#: about the message: it is searched for and graded with the documents, and the message is never
#: taken for small talk ("wifi password pls" 0.68, "hey, wifi pass?" 0.56 and "hi, what is the wifi
#: called here?" 0.51 for "what is the guest wifi password in the office?"; "thanks!" 0.11, "hi" 0.06,
#: another subject ("how do I reindex the knowledge base?") below 0.1)
MEANING_MATCH = 0.5


class LearnedMeaning:
    """The learned entries matched to a message by meaning (embeddings of each entry's question),
    where :meth:`LearnedStore.search` matches words: a reworded question ("wifi password
    pls") finds the entry an expert answered ("what is the guest wifi password in the office?").
    Vectors are kept per entry (id, question, answer), so each entry is embedded once per process.

    Args:
        embed: texts -> unit vectors (rows), or None without embeddings
            (:class:`graphs.knowledge.embedding.TextEmbedder`).
        store: the learned entries (None: none).
    """

    def __init__(self, embed: Callable[[Sequence[str]], Any], store: LearnedStore | None) -> None:
        self.embed = embed
        self.store = store
        self._vectors: dict[tuple[int, str, str], Any] = {}
        self._last: tuple[str, Any] | None = None  # the last message and its vector
        self._lock = threading.Lock()

    def matches(self, message: str, k: int = 4, allowed: EntryFilter | None = None) -> list[tuple[LearnedEntry, float]]:
        """Up to ``k`` entries, best first, each with its cosine to ``message`` (its question's; its
        answer's for an entry without one), those at least :data:`MEANING_MATCH` only; [] without
        entries, embeddings or words. ``allowed``: the entries the turn may use (None: all).

        Raises:
            Whatever the store raises reading its entries (callers treat it as no match).
        """
        if self.store is None or not message.strip():
            return []
        entries = [e for e in self.store.entries() if allowed is None or allowed(e)]
        if not entries:
            return []
        with self._lock:  # the route step and the search ask about the same message: embed it once
            qv = self._last[1] if self._last is not None and self._last[0] == message else None
        if qv is None:
            qv = self.embed([message])
            if qv is None:
                return []
            with self._lock:
                self._last = (message, qv)
        with self._lock:
            missing = [e for e in entries if (e.id, e.question, e.answer) not in self._vectors]
            if missing:
                # the question asked, not the answer: an answer about a broad subject ("I answer
                # questions about your docs in Slack and Discord") is near every question on it
                vecs = self.embed([(e.question or e.answer)[:1000] for e in missing])
                if vecs is None:
                    return []
                for i, e in enumerate(missing):
                    self._vectors[(e.id, e.question, e.answer)] = vecs[i]
            scored = [(e, float(self._vectors[(e.id, e.question, e.answer)] @ qv[0])) for e in entries]
        scored = [(e, c) for e, c in scored if c >= MEANING_MATCH]
        return sorted(scored, key=lambda ec: -ec[1])[:k]

    def search(
        self, message: str, queries: Sequence[str | tuple[str, float]], k: int, allowed: EntryFilter | None = None
    ) -> tuple[list[LearnedEntry], list[LearnedEntry]]:
        """The learned entries for a knowledge-base search, at most ``k`` in all, as ``(about,
        sharing)``: those about ``message`` by meaning (:meth:`matches`: a reworded question finds
        its entry), best first, and the others sharing the words of ``queries``
        (:meth:`LearnedStore.search`), which are candidates beside the documents, not answers to
        put first; ([], []) without a store. ``allowed``: the entries the turn may use (None: all).

        Raises:
            Whatever the store's word search raises.
        """
        if self.store is None:
            return [], []
        try:
            meant = [e for e, _ in self.matches(message, k, allowed)]
        except Exception:  # noqa: BLE001 - the word search still finds entries
            log.warning("learned entries could not be matched by meaning", exc_info=True)
            meant = []
        seen = {e.id for e in meant}
        # more candidates than kept: those the turn may not use are left out after the search
        found = self.store.search(queries, k if allowed is None else 4 * k)
        sharing = [e for e in found if e.id not in seen and (allowed is None or allowed(e))]
        return meant[:k], sharing[: max(0, k - len(meant))]

    def best(self, message: str, allowed: EntryFilter | None = None) -> float:
        """The best cosine of ``message`` with a learned entry the turn may use (``allowed``, None:
        any; -1 when none, or it cannot be told)."""
        try:
            found = self.matches(message, 1, allowed)
        except Exception:  # noqa: BLE001 - routing goes on without the learned entries
            return -1.0
        return found[0][1] if found else -1.0


@runtime_checkable
class LearnedStore(Protocol):
    """Where the learned entries live. Every method may be called from any thread.

    An entry saved through one store object is found by :meth:`search` of every other
    object on the same storage (another process, another replica), and one removed by
    :meth:`forget` is no longer returned by any of them.
    """

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
        """Save an entry and index it; returns it with its id. ``sources``: the knowledge the
        thread searched (:attr:`LearnedEntry.sources`).

        Raises:
            ValueError: ``answer`` is empty.
        """
        ...

    def forget(self, entry_id: int) -> bool:
        """Remove an entry; False when there is none with that id."""
        ...

    def get(self, entry_id: int) -> LearnedEntry | None:
        """The entry ``entry_id``, or None."""
        ...

    def entries(self) -> list[LearnedEntry]:
        """Every entry, oldest first."""
        ...

    def search(self, queries: Sequence[str | tuple[str, float]], k: int) -> list[LearnedEntry]:
        """Entries matching the query variants, best first (at most ``k``).

        Args:
            queries: plain or ``(query, weight)``, as ``KnowledgeBase.search`` takes them.
        """
        ...


def fuse(ranked: Sequence[tuple[Sequence[int], float]], k: int) -> list[int]:
    """Reciprocal rank fusion of per-query rankings: ``(ids best first, weight)`` each;
    returns the best ``k`` ids. Score ``sum(weight / (60 + rank))`` (Cormack, Clarke and
    Buettcher, "Reciprocal Rank Fusion outperforms Condorcet and individual rank learning
    methods", SIGIR 2009; k = 60 as there)."""
    scores: dict[int, float] = {}
    for ids, weight in ranked:
        for rank, i in enumerate(ids, start=1):
            scores[i] = scores.get(i, 0.0) + weight / (60 + rank)
    return sorted(scores, key=lambda i: -scores[i])[:k]


def query_weights(queries: Sequence[str | tuple[str, float]]) -> list[tuple[str, float]]:
    """``queries`` as ``(text, weight)`` pairs (a plain string weighs 1)."""
    return [(q, 1.0) if isinstance(q, str) else (q[0], float(q[1])) for q in queries]


ENTRY_COLUMNS = "id, question, answer, answered_by, answered_at, thread_key, permalink, platform, channel, sources"
"""An entry's columns in every store, in :class:`LearnedEntry`'s order (:meth:`LearnedEntry.from_row`
makes one of a row of them)."""


def entry_values(question: str, answer: str, answered_at: float | None) -> tuple[str, str, float]:
    """What :meth:`LearnedStore.add` saves of a new entry: its question and answer stripped,
    and its time (now when ``answered_at`` is None).

    Raises:
        ValueError: ``answer`` is empty.
    """
    question, answer = question.strip(), answer.strip()
    if not answer:
        raise ValueError("a learned entry needs an answer")
    return question, answer, time.time() if answered_at is None else answered_at


def search_entries(
    queries: Sequence[str | tuple[str, float]],
    k: int,
    rank: Callable[[str], Sequence[int] | None],
    fetch: Callable[[list[int]], Sequence[LearnedEntry]],
) -> list[LearnedEntry]:
    """:meth:`LearnedStore.search` over a store's own full-text ranking: each query variant
    ranked, the rankings fused (:func:`fuse`), the best entries fetched.

    Args:
        queries: plain or ``(query, weight)``, as ``KnowledgeBase.search`` takes them.
        k: most entries returned.
        rank: one query variant's entry ids, best first (None: nothing in it to search; the
            variant is left out).
        fetch: the entries of these ids, in any order (an id removed meanwhile is missing).

    Returns:
        At most ``k`` entries, best first.
    """
    ranked = [(list(ids), weight) for text, weight in query_weights(queries) if (ids := rank(text)) is not None]
    best = fuse(ranked, k)
    if not best:
        return []
    by_id = {e.id: e for e in fetch(best)}
    return [by_id[i] for i in best if i in by_id]


class SqliteLearnedStore:
    """The learned entries in one SQLite file (see the module docstring).

    Args:
        path: the SQLite file (``[learning] index_db``); its folder is created.
        candidates: BM25 candidates per query before fusion.
    """

    def __init__(self, path: str | Path, candidates: int = 20):
        self.path = Path(path)
        self.candidates = candidates
        self._write_lock = threading.Lock()
        self._local = threading.local()  # one connection per thread, kept: a search is called per question
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as conn:
            conn.execute("PRAGMA journal_mode=WAL")  # kept by the file
            conn.executescript(_SCHEMA)
            columns = {r[1] for r in conn.execute("PRAGMA table_info(entries)")}
            if "sources" not in columns:  # a file written before entries kept their knowledge: its entries stay
                try:
                    conn.execute("ALTER TABLE entries ADD COLUMN sources TEXT NOT NULL DEFAULT ''")
                except sqlite3.OperationalError as exc:  # another process added it meanwhile
                    if "duplicate column" not in str(exc):
                        raise

    def _connect(self) -> sqlite3.Connection:
        """This thread's connection (``with`` it for a transaction), opened again when the
        file was replaced or deleted since (a kept connection would write to the deleted
        file and report success: now the missing table is the clear error it was)."""
        try:
            ino = os.stat(self.path).st_ino
        except FileNotFoundError:
            ino = None
        kept: tuple[sqlite3.Connection, int | None] | None = getattr(self._local, "conn", None)
        if kept is not None and kept[1] == ino and ino is not None:
            return kept[0]
        if kept is not None:
            kept[0].close()
        conn = sqlite3.connect(str(self.path), timeout=10)
        self._local.conn = (conn, os.stat(self.path).st_ino)
        return conn

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
        """:meth:`LearnedStore.add`.

        Raises:
            sqlite3.Error: the file cannot be written (full or read-only disk).
        """
        question, answer, at = entry_values(question, answer, answered_at)
        with self._write_lock, self._connect() as conn:
            cur = conn.execute(
                "INSERT INTO entries (question, answer, answered_by, answered_at, thread_key, permalink, platform,"
                " channel, sources) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (question, answer, answered_by, at, thread_key, permalink, platform, channel, sources_column(sources)),
            )
            entry_id = cur.lastrowid
            assert entry_id is not None  # set by the INSERT
            conn.execute(
                "INSERT INTO entries_fts (rowid, question, answer) VALUES (?, ?, ?)",
                (entry_id, terms.index_text(question), terms.index_text(answer)),
            )
        kept = tuple(sorted(set(sources)))
        return LearnedEntry(entry_id, question, answer, answered_by, at, thread_key, permalink, platform, channel, kept)

    def forget(self, entry_id: int) -> bool:
        """:meth:`LearnedStore.forget`."""
        with self._write_lock, self._connect() as conn:
            cur = conn.execute("DELETE FROM entries WHERE id = ?", (entry_id,))
            conn.execute("DELETE FROM entries_fts WHERE rowid = ?", (entry_id,))
        return cur.rowcount == 1

    def get(self, entry_id: int) -> LearnedEntry | None:
        with self._connect() as conn:
            row = conn.execute(f"SELECT {ENTRY_COLUMNS} FROM entries WHERE id = ?", (entry_id,)).fetchone()
        return LearnedEntry.from_row(row) if row else None

    def entries(self) -> list[LearnedEntry]:
        """:meth:`LearnedStore.entries`."""
        with self._connect() as conn:
            rows = conn.execute(f"SELECT {ENTRY_COLUMNS} FROM entries ORDER BY id").fetchall()
        return [LearnedEntry.from_row(r) for r in rows]

    def search(self, queries: Sequence[str | tuple[str, float]], k: int) -> list[LearnedEntry]:
        """:meth:`LearnedStore.search`: FTS5's BM25 per query variant, fused (:func:`search_entries`)."""
        with self._connect() as conn:

            def rank(text: str) -> list[int] | None:
                match = keyword_query(text)
                if not match:
                    return None
                try:
                    rows = conn.execute(
                        "SELECT rowid FROM entries_fts WHERE entries_fts MATCH ? ORDER BY bm25(entries_fts) LIMIT ?",
                        (match, self.candidates),
                    ).fetchall()
                except sqlite3.OperationalError:  # a query FTS5 cannot parse: that variant only
                    return None
                return [r[0] for r in rows]

            def fetch(ids: list[int]) -> list[LearnedEntry]:
                marks = ", ".join("?" * len(ids))
                rows = conn.execute(f"SELECT {ENTRY_COLUMNS} FROM entries WHERE id IN ({marks})", ids).fetchall()
                return [LearnedEntry.from_row(r) for r in rows]

            return search_entries(queries, k, rank, fetch)
