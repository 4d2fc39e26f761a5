"""Syncing knowledge sources: on demand (``threadwise sync``, the admin ``reindex``) and on
each source's ``schedule`` inside ``threadwise run``.

One sync runs at a time: across processes on one index folder by the folder's reindex lock
(:class:`graphs.knowledge.index.ReindexLock`), and across replicas by the bookkeeping store's
``exclusive`` lock (PostgreSQL advisory lock; a single SQLite process needs none). A sync
that finds the lock taken is skipped, not queued: the running one publishes a generation
every replica picks up.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime

from bot.storage import BookkeepingStore
from graphs.knowledge import IndexStats, KnowledgeBase, ProgressFn, ReindexBusyError

log = logging.getLogger(__name__)

SYNC_LOCK = "threadwise:reindex"
"""The bookkeeping store's cross-replica lock of a sync (and of a reindex: they are one)."""


class SyncBusy(Exception):
    """Another sync holds the lock (another replica, process or thread)."""


class SourceSync:
    """Runs syncs of a knowledge base, one at a time, and its sources' schedules.

    Args:
        knowledge: the knowledge base.
        store: the bookkeeping store (its ``exclusive`` lock and the generation record), or
            None (a command without a store: the index folder's lock alone).
        schedules: ``{source name: seconds between syncs}`` of the scheduled sources.
        clock: seconds since the epoch (tests move it).
    """

    def __init__(
        self,
        knowledge: KnowledgeBase,
        store: BookkeepingStore | None = None,
        schedules: Mapping[str, float] | None = None,
        clock: Callable[[], float] = time.time,
    ):
        self.knowledge = knowledge
        self.store = store
        self.schedules = dict(schedules or {})
        self.clock = clock
        self._running = asyncio.Lock()
        self._attempted: dict[str, float] = {}

    @property
    def running(self) -> bool:
        """A sync started by this process is running."""
        return self._running.locked()

    async def run(self, sources: Sequence[str] | None = None, progress: ProgressFn | None = None) -> IndexStats:
        """Sync ``sources`` (None: all) in a worker thread; questions keep being answered
        from the live generation meanwhile.

        Raises:
            SyncBusy: a sync is running here, in another process or on another replica.
            KnowledgeBaseError: see :meth:`KnowledgeBase.reindex`.
            Exception: the embeddings client's errors.
        """
        if self._running.locked():
            raise SyncBusy("a sync is already running")
        async with self._running:
            before = dict(self._attempted)
            for name in sources or self.knowledge.sources:
                self._attempted[name] = self.clock()
            try:
                if self.store is None:
                    return await self._sync(sources, progress)
                async with self.store.exclusive(SYNC_LOCK) as ours:
                    if not ours:
                        raise SyncBusy("a sync is already running on another replica")
                    stats = await self._sync(sources, progress)
                    await self.store.set_index_generation(stats.generation)
                    return stats
            except SyncBusy:
                self._attempted = before  # not tried: due again at the next tick
                raise

    async def _sync(self, sources: Sequence[str] | None, progress: ProgressFn | None) -> IndexStats:
        try:
            return await asyncio.to_thread(self.knowledge.reindex, progress, sources)
        except ReindexBusyError as exc:
            raise SyncBusy(str(exc)) from exc

    def due(self) -> list[str]:
        """Scheduled sources whose period has passed since their last sync (any process's,
        from the index folder's status) and since this process last tried them."""
        now = self.clock()
        status = {s["name"]: s for s in self.knowledge.source_status()}
        out = []
        for name, period in self.schedules.items():
            last = max(_epoch(status.get(name, {}).get("last_sync")), self._attempted.get(name, 0.0))
            if now - last >= period:
                out.append(name)
        return out

    async def run_schedule(self, stop: asyncio.Event, tick_seconds: float = 60.0) -> None:
        """Sync the due sources every ``tick_seconds`` until ``stop`` is set. A failure is
        logged (one line) and tried again at the source's next period; it never ends the loop."""
        if not self.schedules:
            return
        log.info("scheduled sync: %s", ", ".join(f"{n} every {_period(s)}" for n, s in self.schedules.items()))
        while not stop.is_set():
            due = self.due()
            if due and not self._running.locked():
                try:
                    stats = await self.run(due)
                    for r in stats.sources:
                        if r.synced:
                            log.info("scheduled sync %s", r.summary())
                except SyncBusy as exc:
                    log.info("scheduled sync of %s skipped: %s", ", ".join(due), exc)
                except Exception as exc:  # noqa: BLE001 - the bot keeps serving the last good generation
                    log.error(
                        "scheduled sync of %s failed: %s: %s",
                        ", ".join(due),
                        type(exc).__name__,
                        str(exc).splitlines()[0][:300] if str(exc) else "",
                    )
            try:
                await asyncio.wait_for(stop.wait(), timeout=tick_seconds)
            except TimeoutError:
                pass


def _epoch(iso: str | None) -> float:
    if not iso:
        return 0.0
    try:
        return datetime.strptime(iso, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return 0.0


def _period(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:.0f}s"


SourceAliases = Callable[[str, bool], list[str]]
"""``aliases(word, fold)``: the knowledge base's source names config.toml gives ``word``
(:meth:`bot.config.Settings.source_names`: a ``[knowledge] sources`` folder as written),
compared without case when ``fold``."""


def resolve_sources(
    wanted: Sequence[str], known: Sequence[str], aliases: SourceAliases | None = None
) -> tuple[list[str], list[str]]:
    """The knowledge base's source names that the words ``wanted`` (typed by a person: ``sync
    NAME``, chat ``reindex NAME``) mean, and the words that mean none.

    A word means a source of ``known`` (the knowledge base's names) or one ``aliases`` gives
    for it, compared exactly first; only when nothing matches exactly, without case (so
    ``runbooks`` finds ``Runbooks``, while a source ``runbooks`` beside ``Runbooks`` is
    told apart).

    Returns:
        ``(names, unknown)``: the names in ``known``'s order, each once; the words in the
        order given.
    """
    found: set[str] = set()
    unknown: list[str] = []
    for word in wanted:
        names: list[str] = []
        for fold in (False, True):
            names = [s for s in known if (s.casefold() == word.casefold() if fold else s == word)]
            names += [s for s in (aliases(word, fold) if aliases is not None else []) if s in known]
            if names:
                break
        if names:
            found.update(names)
        else:
            unknown.append(word)
    return [s for s in known if s in found], unknown


def sync_summary(stats: IndexStats) -> str:
    """The chat and terminal summary of a sync: the totals, then one line per synced source."""
    lines = [f"Sync done: {stats.summary()}."]
    lines += [f"• {r.summary()}" for r in stats.sources if r.synced]
    for r in stats.sources:
        for p in r.problems[:5]:
            lines.append(f"  – {r.name}: {p}")
        if len(r.problems) > 5:
            lines.append(f"  – {r.name}: … and {len(r.problems) - 5} more (see the log)")
    return "\n".join(lines)


def count(n: int, noun: str) -> str:
    """``"1 document"``, ``"2 documents"`` (``noun`` takes an ``s``)."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def index_note(row: dict) -> str:
    """What :func:`sources_text` adds when a source's documents are not in the live index as
    configured (``row["indexed"]``, :meth:`KnowledgeBase.source_status`), else ''."""
    if row.get("indexed") == "no":
        return f" — NOT IN THE INDEX (`threadwise sync {row['name']}` reads it)"
    if row.get("indexed") == "outdated":
        return " — indexed under another configuration or release: read again at the next sync"
    return ""


def sources_table(knowledge: KnowledgeBase, schedules: Mapping[str, float] | None = None) -> list[dict]:
    """Each source's status (:meth:`KnowledgeBase.source_status`) with its ``schedule``."""
    rows = knowledge.source_status()
    for r in rows:
        period = (schedules or {}).get(r["name"])
        r["schedule"] = _period(period) if period else ""
    return rows


def sources_text(
    knowledge: KnowledgeBase, schedules: Mapping[str, float] | None = None, names: Sequence[str] | None = None
) -> str:
    """The admin ``sources`` reply: one line per source (documents, chunks, last sync, last
    error); ``names``: those sources only (None: all)."""
    rows = [r for r in sources_table(knowledge, schedules) if names is None or r["name"] in names]
    if not rows:
        return "No knowledge sources are configured."
    lines = [f"{len(rows)} knowledge source{'s' if len(rows) != 1 else ''}:"]
    for r in rows:
        when = r["last_sync"] or "never"
        line = f"• {r['name']} ({r['kind']}): {count(r['documents'], 'document')}, {count(r['chunks'], 'chunk')}"
        line += f", last sync {when}"
        line += f", every {r['schedule']}" if r["schedule"] else ""
        line += index_note(r)
        if r["last_error"]:
            line += f" — last sync FAILED: {r['last_error']} (last success {r['last_success'] or 'never'})"
        elif r["problems"]:
            line += f" — {count(len(r['problems']), 'document')} could not be read"
        lines.append(line)
    return "\n".join(lines)
