"""The :class:`KnowledgeBase`: hybrid search over the live generation, reindex, start-up build."""

from __future__ import annotations

import calendar
import dataclasses
import json
import logging
import os
import shutil
import threading
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, cast

import numpy as np

from graphs.file_formats import FILE_PATTERNS
from graphs.knowledge import index as idx
from graphs.knowledge.common import (
    Chunk,
    EmbeddingRefusedError,
    IndexStats,
    KnowledgeBaseError,
    NothingIndexedError,
    ProgressFn,
    SourceReport,
    display_name,
    valid_text,
)
from graphs.knowledge.connectors.base import Connector, Document, SourceError
from graphs.knowledge.connectors.files import FilesConnector
from graphs.knowledge.embedding import TextEmbedder, embed_texts
from graphs.knowledge.splitting import SPLITTER_ID, index_text, split_markdown
from graphs.knowledge.templates import TEMPLATES_ID
from graphs.knowledge.writer import GenerationWriter, reusable_vectors, text_key

if TYPE_CHECKING:  # not loaded to list or sync sources: LangChain and LangGraph take a second to import
    from langchain_core.embeddings import Embeddings

    from graphs.state import Doc

log = logging.getLogger(__name__)


def rrf_fuse(rankings: Iterable[Sequence[int]], rrf_k: int, weights: Sequence[float] | None = None) -> dict[int, float]:
    """Weighted Reciprocal Rank Fusion (Cormack et al., SIGIR 2009):
    ``sum(weight / (rrf_k + rank))`` over the rankings (ids best first, rank from 1)."""
    scores: dict[int, float] = {}
    for i, ranking in enumerate(rankings):
        w = weights[i] if weights else 1.0
        for rank, cid in enumerate(ranking, start=1):
            scores[cid] = scores.get(cid, 0.0) + w / (rrf_k + rank)
    return scores


FEEDBACK_CHUNKS = 3
"""Chunks of the first fused ranking whose words expand the query (``search(feedback=...)``)."""
FEEDBACK_WORDS = 10
"""Words added to the query by pseudo-relevance feedback."""

STATUS_FILE = "sources.json"
"""Per-source sync status beside the generations (last sync, last success, last error)."""


class KnowledgeBase:
    """Hybrid (BM25 + dense) retriever over the configured sources, with atomic, per-source sync.

    One sync at a time per index folder, across processes (:class:`index.ReindexLock`:
    others are refused with "another reindex is running (pid N)"). Every search first
    checks ``CURRENT`` (one ``stat``) and opens a generation another process published.

    Args:
        index_dir: folder holding the index generations (created if missing).
        sources: folders, files or globs of ``[knowledge] sources`` (each becomes a
            ``files`` source named by the path as given).
        patterns: file globs inside those folders (default: every format a ``files`` source reads).
        embeddings: a LangChain ``Embeddings`` or ``None`` for keyword-only search.
        embedder_id: names the embedding model; vectors are reused only for the same id.
            An ``embeddings`` object with its own ``embedder_id`` attribute (the local
            model, whose backend may fall back when it loads) overrides it.
        chunk_size, chunk_overlap: characters.
        candidates: ranked list length per query and retriever before fusion.
        rrf_k: the RRF constant (60 in the paper).
        max_chunks_per_file: at most this many chunks of one document in a result.
        keep_generations: old generations kept on disk after a swap.
        ann_min_chunks: generations with at least this many vectors get an approximate
            nearest-neighbour graph (:mod:`graphs.knowledge.ann`); smaller ones are scanned.
        batch_size: most chunks per embedding request.
        batch_tokens: most estimated tokens per embedding request (see
            :mod:`graphs.knowledge.embedding`).
        connectors: the ``[[sources]]`` entries as connectors (see
            :mod:`graphs.knowledge.connectors`), beside ``sources``.
        embedding_concurrency: embedding requests in flight at once during a sync.
        write_batch: chunks split, embedded and written to the new generation at a time
            (what a sync holds in memory besides the index's own structures).
    """

    def __init__(
        self,
        index_dir: str | Path,
        sources: Sequence[str | Path] = (),
        patterns: Sequence[str] = FILE_PATTERNS,
        embeddings: Embeddings | None = None,
        embedder_id: str = "none",
        chunk_size: int = 1000,
        chunk_overlap: int = 100,
        candidates: int = 40,
        rrf_k: int = 60,
        max_chunks_per_file: int = 2,
        keep_generations: int = 2,
        ann_min_chunks: int = 20_000,
        batch_size: int = 64,
        batch_tokens: int = 8000,
        connectors: Sequence[Connector] = (),
        embedding_concurrency: int = 2,
        write_batch: int = 2048,
    ):
        self.index_dir = Path(index_dir)
        self.patterns = list(patterns)
        self.connectors: dict[str, Connector] = {}
        for src in sources:
            self.connectors.setdefault(str(src), FilesConnector(str(src), [src], self.patterns))
        for conn in connectors:
            if conn.name in self.connectors:
                raise KnowledgeBaseError(f"two knowledge sources are named {conn.name!r}")
            self.connectors[conn.name] = conn
        self.sources = list(self.connectors)
        self.embeddings = embeddings
        self._embedder_id = embedder_id if embeddings is not None else "none"
        self.chunk_size = chunk_size
        self.chunk_overlap = chunk_overlap
        self.candidates = candidates
        self.rrf_k = rrf_k
        self.max_chunks_per_file = max_chunks_per_file
        self.keep_generations = keep_generations
        self.ann_min_chunks = ann_min_chunks
        self.batch_size = batch_size
        self.batch_tokens = batch_tokens
        self.embedding_concurrency = max(1, int(embedding_concurrency))
        self.write_batch = max(1, int(write_batch))
        self.last_error: str | None = None
        self.last_error_at: str | None = None
        self._snapshot: idx.IndexSnapshot | None = None
        self._stamp: tuple[int, int] | None = None
        self._open_lock = threading.Lock()
        # query vectors by text: the same question's variants, follow-ups and retries cost one embedding
        self._queries = TextEmbedder(embeddings, cache_size=4096)

    @property
    def embedder_id(self) -> str:
        """Names the vector space of the embeddings (stored in the manifest as ``embedder``):
        the embeddings' own ``embedder_id`` when they have one, else the id given."""
        own = getattr(self.embeddings, "embedder_id", None) if self.embeddings is not None else None
        return own if isinstance(own, str) and own else self._embedder_id

    # ---- reading -------------------------------------------------------------------
    @property
    def snapshot(self) -> idx.IndexSnapshot | None:
        """The live generation (``None`` if never indexed). ``CURRENT`` is checked on every
        access (one ``stat``): a generation published by another process is opened here.
        Searches already running keep the snapshot they started with."""
        stamp = idx.current_stamp(self.index_dir)
        if stamp is not None and stamp == self._stamp and self._snapshot is not None:
            return self._snapshot
        with self._open_lock:
            name, stamp = idx.read_current(self.index_dir)
            if name is None:
                return self._snapshot
            if self._snapshot is None or self._snapshot.directory.name != name:
                try:
                    snap = idx.open_generation(self.index_dir, name)
                except KnowledgeBaseError as exc:
                    log.error("cannot open the live index generation: %s", exc)
                    self._stamp = stamp  # logged once per change of CURRENT
                    return self._snapshot
                if self._snapshot is not None:
                    log.info("index generation %s is live (was %s)", name, self._snapshot.directory.name)
                self._snapshot = snap
            self._stamp = stamp
        return self._snapshot

    def is_built(self) -> bool:
        return self.snapshot is not None

    def _other_embedder(self, snap: idx.IndexSnapshot) -> None:
        """Say once per generation that its vectors come from another embedder (a replica
        configured differently, or an embedder change not yet rebuilt): its vectors are never
        compared with this embedder's query vectors, so search is keyword-only meanwhile."""
        name = snap.directory.name
        if getattr(self, "_warned_embedder", None) != name:
            self._warned_embedder = name
            log.warning(
                "index generation %s was embedded with %s, this process embeds with %s: keyword search only "
                "until it is rebuilt (replicas sharing an index need the same embedder)",
                name,
                snap.manifest.get("embedder"),
                self.embedder_id,
            )

    def needs_rebuild(self) -> bool:
        """True if a sync is due before answering: :meth:`pending_sources` names a source, or
        a source no longer configured is still in the live generation."""
        snap = self.snapshot
        return snap is None or bool(self.pending_sources(say=True)) or bool(self._unconfigured(snap))

    def pending_sources(self, say: bool = False) -> list[str]:
        """The sources a start-up sync (:meth:`ensure_index`) reads now, in configuration order.

        Every source when there is no index or it was built with other chunking or embeddings;
        else the sources the live generation lacks, or holds from another configuration or
        another release's readers (:attr:`~graphs.knowledge.connectors.base.Connector.readers`:
        an index built before office files were read has none of them). A source whose last
        sync failed is tried again only :attr:`FAILED_RETRY_SECONDS` after that failure: a
        missing repository must not cost every question a sync (``threadwise sync NAME``
        tries it at once); ``say``: log each source left out that way."""
        snap = self.snapshot
        if snap is None or self._settings_changed(snap) or not snap.has_sources:
            return list(self.sources)
        return self._due(self._unsynced(snap), say=say)

    FAILED_RETRY_SECONDS = 600.0
    """A source not in the live generation whose last sync failed is tried again by a start-up
    sync, and brought in by a sync of other sources, at most this often (10 minutes)."""

    def _due(self, names: Sequence[str], say: bool = True) -> list[str]:
        """``names`` without those whose last sync failed less than :attr:`FAILED_RETRY_SECONDS`
        ago (each left out logged when ``say``)."""
        status, now = self._read_status(), time.time()
        out = []
        for n in names:
            st = status.get(n, {})
            if st.get("last_error") and now - _epoch(st.get("last_sync")) < self.FAILED_RETRY_SECONDS:
                if not say:
                    continue
                log.info(
                    "source %s is not in the index as configured and its last sync failed at %s: tried again "
                    "%d minutes after that "
                    "(`threadwise sync %s` tries now)",
                    n,
                    st.get("last_sync"),
                    self.FAILED_RETRY_SECONDS // 60,
                    n,
                )
                continue
            out.append(n)
        return out

    def _unsynced(self, snap: idx.IndexSnapshot) -> list[str]:
        """Configured sources the live generation holds nothing about, or with another configuration."""
        m = snap.manifest
        if not snap.has_sources:
            return list(self.sources)
        seen, read_by = m.get("config", {}), m.get("readers", {})
        return [n for n in self.sources if seen.get(n) != self._config_id(n) or read_by.get(n) != self._readers(n)]

    def _unconfigured(self, snap: idx.IndexSnapshot) -> list[str]:
        """Sources the live generation holds that are no longer configured (the next sync drops them)."""
        return [n for n in snap.manifest.get("docs", {}) if n not in self.connectors] if snap.has_sources else []

    def _readers(self, name: str) -> str:
        return self.connectors[name].readers

    def _config_id(self, name: str) -> str:
        return f"{self.connectors[name].kind}:{self.connectors[name].describe()}"

    def files_of(self, sources: Sequence[str]) -> frozenset[str]:
        """The document ids of the live generation that come from ``sources``.

        Raises:
            KnowledgeBaseError: an entry of ``sources`` is not one of :attr:`sources`.
        """
        self._check_names(sources)
        snap = self.snapshot
        docs = snap.manifest.get("docs", {}) if snap is not None else {}
        return frozenset(d for s in sources for d in docs.get(str(s), {}))

    def _check_names(self, sources: Sequence[str]) -> None:
        unknown = [str(s) for s in sources if str(s) not in self.connectors]
        if unknown:
            raise KnowledgeBaseError(f"not a source of this knowledge base: {', '.join(unknown)}")

    def search(
        self,
        queries: Sequence[str | tuple[str, float]],
        k: int,
        sources: Sequence[str] | None = None,
        rankings: Sequence[tuple[Sequence[int], float]] = (),
        feedback: float = 0.0,
    ) -> list[Doc]:
        """Hybrid search.

        Args:
            queries: query variants (e.g. the standalone question, the rewritten query,
                the raw message), plain or as ``(query, weight)``; each is ranked by BM25
                and by the dense index, and all rankings are fused with weighted RRF.
                Any script works (see :mod:`graphs.terms`).
            k: number of chunks to return.
            sources: only chunks of these sources (names as in :attr:`sources`); None
                searches every source.
            rankings: more rankings to fuse, as ``(chunk rowids best first, weight)``
                (a ranking made outside, e.g. by a multilingual encoder); the same
                filters apply to their chunks.
            feedback: weight of one more keyword ranking, of the first variant expanded with
                :data:`FEEDBACK_WORDS` words of the first fused ranking's
                :data:`FEEDBACK_CHUNKS` best chunks (pseudo-relevance feedback,
                :meth:`IndexSnapshot.feedback_words`): a question worded unlike its page
                finds it through the words of the passages it did find. 0: none.

        Returns:
            Up to ``k`` :class:`Doc` dicts, best first, at most ``max_chunks_per_file``
            per document; ``location`` is the document's id, ``url`` the address to cite
            (when it has one), ``source`` its source's name. Dense ranking is used only
            when the live generation was embedded with this knowledge base's embedder and
            the query embedding succeeds (else keyword only).

        Raises:
            KnowledgeBaseError: no index has been built, or a name in ``sources`` is unknown.
        """
        snap = self.snapshot
        if snap is None:
            raise KnowledgeBaseError("the knowledge base has no index yet: run `threadwise reindex`")
        if sources is not None:
            self._check_names(sources)
        weighted: dict[str, float] = {}
        for q in queries:
            text, weight = (q, 1.0) if isinstance(q, str) else (q[0], float(q[1]))
            if text.strip():
                weighted[text.strip()] = max(weight, weighted.get(text.strip(), 0.0))
        texts = list(weighted)
        ranked: list[list[int]] = [snap.keyword(q, self.candidates) for q in texts]
        weights = [weighted[q] for q in texts]
        if self.embeddings is not None and snap.manifest.get("embedder") != self.embedder_id:
            self._other_embedder(snap)
        if (
            self.embeddings is not None
            and snap.vectors is not None
            and texts
            and snap.manifest.get("embedder") == self.embedder_id
        ):
            try:
                qv = self._queries(texts)
            except Exception as exc:  # noqa: BLE001 - a failing embeddings API degrades to keyword search
                log.warning(
                    "query embedding failed (%s: %s): keyword search only",
                    type(exc).__name__,
                    str(exc).splitlines()[0][:200] if str(exc) else "",
                )
            else:
                ranked += snap.dense_many(qv, self.candidates) if qv is not None else []
                weights += weights
        for extra, weight in rankings:  # e.g. the multilingual encoder's (graphs/knowledge/crosslingual.py)
            ranked.append(list(extra))
            weights.append(weight)
        scores = rrf_fuse(ranked, self.rrf_k, weights)
        if feedback > 0 and texts:
            exclude = {p for t in texts for p in idx.keyword_phrases(t)}
            first = sorted(scores, key=lambda cid: -scores[cid])[:FEEDBACK_CHUNKS]
            words = snap.feedback_words(first, exclude, FEEDBACK_WORDS)
            ranked.append(snap.keyword(f"{texts[0]} {' '.join(words)}", self.candidates))
            weights.append(feedback)
            scores = rrf_fuse(ranked, self.rrf_k, weights)
        ordered = sorted(scores, key=lambda cid: -scores[cid])
        allowed = {str(s) for s in sources} if sources is not None else None
        allowed_files: set[str] = set()
        if allowed is not None and not snap.has_sources:
            allowed_files = self._legacy_files(snap, allowed)
        rows = snap.chunks(ordered if allowed is not None else ordered[: max(k * 6, 30)])
        per_file: dict[tuple[str, str], int] = {}
        docs: list[Doc] = []
        for cid in ordered:
            if cid not in rows:
                continue
            file, title, text, source, url = rows[cid]
            if allowed is not None and (source not in allowed if snap.has_sources else file not in allowed_files):
                continue
            key = (source, file)
            if per_file.get(key, 0) >= self.max_chunks_per_file:
                continue
            per_file[key] = per_file.get(key, 0) + 1
            doc: Doc = {
                "id": f"{file}#{cid}",
                "text": text,
                "location": file,
                "title": title,
                "score": round(scores[cid], 5),
            }
            if url:
                doc["url"] = url
            if source:
                doc["source"] = source
            docs.append(doc)
            if len(docs) >= k:
                break
        return docs

    def _legacy_files(self, snap: idx.IndexSnapshot, allowed: set[str]) -> set[str]:
        """A generation of format 1 holds no source names: the files the allowed folders list now."""
        from graphs.knowledge.sources import discover_files

        mine: set[str] = set()
        for name in allowed:
            try:
                mine |= {rel for _, rel in discover_files([name], self.patterns)}
            except KnowledgeBaseError:
                continue
        return mine

    def stats(self) -> dict:
        """Counts of the live index: files, chunks, generation, built_at, embedder, and
        ``last_error`` (the last failed build in this process, or None)."""
        snap = self.snapshot
        out: dict = {"files": 0, "chunks": 0, "generation": None}
        if snap is not None:
            m = snap.manifest
            out = {
                "files": len(m.get("files", {})),
                "chunks": m.get("chunks", 0),
                "generation": snap.directory.name,
                "built_at": m.get("built_at"),
                "embedder": m.get("embedder"),
            }
        out["last_error"] = f"{self.last_error} (at {self.last_error_at})" if self.last_error else None
        return out

    def source_status(self) -> list[dict]:
        """One dict per configured source: ``name``, ``kind``, ``where``, ``documents``,
        ``chunks`` (in the live generation), ``last_sync`` and ``last_success`` (UTC, ISO
        8601, or None), ``last_error`` (None when the last sync worked), ``problems`` (documents
        that could not be read at the last sync), ``indexed``: ``"yes"``, ``"no"`` (the live
        generation holds none of its documents: never synced, only failed, or dropped by a sync
        with another configuration) or ``"outdated"`` (it holds documents read under another
        configuration or by another release's readers; the next sync reads it again)."""
        snap = self.snapshot
        lacking = set(self._unsynced(snap)) if snap is not None else set(self.sources)
        counts: dict[str, int] = snap.manifest.get("source_chunks", {}) if snap is not None else {}
        docs: dict[str, dict] = snap.manifest.get("docs", {}) if snap is not None else {}
        status = self._read_status()
        out = []
        for name, conn in self.connectors.items():
            st = status.get(name, {})
            out.append(
                {
                    "name": name,
                    "kind": conn.kind,
                    "where": conn.describe(),
                    "documents": len(docs.get(name, {})),
                    "chunks": int(counts.get(name, 0)),
                    "last_sync": st.get("last_sync"),
                    "last_success": st.get("last_success"),
                    "last_error": st.get("last_error"),
                    "problems": list(st.get("problems") or []),
                    "indexed": "yes" if name not in lacking else ("outdated" if docs.get(name) else "no"),
                }
            )
        return out

    def _read_status(self) -> dict[str, dict]:
        try:
            data = json.loads((self.index_dir / STATUS_FILE).read_text())
            return data if isinstance(data, dict) else {}
        except (OSError, ValueError):
            return {}

    def _write_status(self, reports: list[SourceReport]) -> None:
        """Record each synced source's outcome (call while holding the reindex lock)."""
        status = self._read_status()
        now = _now()
        for r in reports:
            if not r.synced:
                continue
            st = status.setdefault(r.name, {})
            st["last_sync"] = now
            if r.ok:
                st["last_success"] = now
                st["last_error"] = None
            else:
                st["last_error"] = r.error
            st["problems"] = r.problems[:50]
            st["report"] = r.summary()
        tmp = self.index_dir / (STATUS_FILE + ".tmp")
        tmp.write_text(json.dumps(status, indent=1))
        os.replace(tmp, self.index_dir / STATUS_FILE)

    # ---- writing -------------------------------------------------------------------
    def reindex(self, progress: ProgressFn | None = None, sources: Sequence[str] | None = None) -> IndexStats:
        """Sync the sources (all, or those named) into a new generation and swap it in atomically.

        Each source lists its documents and reads only the changed ones; unchanged documents
        keep their chunks and vectors. A source that fails as a whole keeps its last good
        documents and does not stop the others (see ``IndexStats.sources``). Holds the
        folder's reindex lock throughout; a failure leaves the live generation as it was and
        is kept in ``last_error`` (shown by ``stats()``).

        Args:
            progress: called as ``progress(phase, done, total)``; phases are
                ``"scan <source>"``, ``"split"``, ``"embed"``, ``"write"``.
            sources: names of the sources to sync (None: all); the others are carried over.

        Returns:
            :class:`IndexStats` of the new generation, with a :class:`SourceReport` per source.

        Raises:
            ReindexBusyError: another reindex of this folder is running (any process).
            NothingIndexedError: every source synced failed and the index holds nothing to
                serve, or the sources hold no text (with each source's report).
            KnowledgeBaseError: an unknown source name, or the embeddings API refused a
                single chunk.
            Exception: errors of the embeddings client (network, HTTP), unchanged.
        """
        if sources is not None:
            self._check_names(sources)
        new_folder = not self.index_dir.exists()
        try:
            with idx.ReindexLock(self.index_dir):
                try:
                    stats = self._sync(progress or (lambda *_: None), embed=True, names=sources)
                except Exception:
                    if new_folder and idx.read_current(self.index_dir)[0] is None:
                        # a first sync that published nothing (a mistyped --source folder)
                        # leaves no empty index folder behind (removed under the lock: no
                        # other sync is writing in it)
                        shutil.rmtree(self.index_dir, ignore_errors=True)
                    raise
        except Exception as exc:
            self.last_error = f"{type(exc).__name__}: {exc}" if not isinstance(exc, KnowledgeBaseError) else str(exc)
            self.last_error_at = _now()
            raise
        self.last_error = self.last_error_at = None
        return stats

    sync = reindex

    def ensure_index(
        self, progress: ProgressFn | None = None, refresh: bool = False, fresh: Sequence[str] = ()
    ) -> IndexStats | None:
        """The start-up build: sync the :meth:`pending_sources` and ``fresh`` (every source when ``refresh``),
        never failing because of the embeddings or a concurrent reindex. Sources already in
        the live generation are carried over unread, so a source that keeps failing costs a
        retry every :attr:`FAILED_RETRY_SECONDS` at most, not a sync of every source.

        Args:
            progress: see :meth:`reindex`.
            refresh: sync even a complete index, so it answers from the sources as they are
                now (only changed documents are read; an unchanged source costs a listing
                and keeps the live generation).
            fresh: sources synced so even when the index holds them (``--source`` folders
                the configured index holds), the others as without it.

        When the build fails that way, the failure is logged in one line and kept in
        ``last_error``, and the bot starts with the last good generation; if there is
        none, a keyword-only generation is built so questions can still be answered.

        Returns:
            The stats of the generation built, or None if none was.

        Raises:
            NothingIndexedError: every source failed on a first sync (a missing folder, a
                site that is down) or the sources hold no text: nothing to answer from.
            KnowledgeBaseError: the index folder cannot be locked or read.
        """
        names: list[str] | None = None  # every source
        snap = self.snapshot
        if not refresh and snap is not None and snap.has_sources and not self._settings_changed(snap):
            # only what the live generation lacks; the rest is carried over as it is
            names = self._due(self._unsynced(snap), say=False)  # said by needs_rebuild
            names += [n for n in fresh if n in self.connectors and n not in names]
            if not names and not self._unconfigured(snap):
                return None
        try:
            return self.reindex(progress, names)
        except idx.ReindexBusyError as exc:
            log.warning("index not rebuilt at start-up: %s; serving the live generation", exc)
            return None
        except EmbeddingRefusedError as exc:
            failure: Exception = exc
        except KnowledgeBaseError:
            raise
        except Exception as exc:  # noqa: BLE001 - embeddings client errors (HTTP, network)
            failure = exc
        fallback = "the last good generation" if self.snapshot is not None else "a keyword-only index"
        log.error(
            "index build failed: %s: %s; starting with %s",
            type(failure).__name__,
            str(failure).splitlines()[0][:300] if str(failure) else "",
            fallback,
        )
        if self.snapshot is not None:
            return None
        try:
            with idx.ReindexLock(self.index_dir):
                return self._sync(progress or (lambda *_: None), embed=False, names=None)
        except idx.ReindexBusyError as exc:
            log.warning("keyword-only index not built: %s", exc)
            return None

    def _chunking_id(self) -> list:
        return [self.chunk_size, self.chunk_overlap, SPLITTER_ID, TEMPLATES_ID]

    def _settings_changed(self, snap: idx.IndexSnapshot) -> bool:
        """The chunking or the embedding model differ from the snapshot's: nothing is reusable."""
        m = snap.manifest
        return m.get("embedder") != self.embedder_id or m.get("chunking") != self._chunking_id()

    def _split(self, source: str, doc: Document) -> list[Chunk]:
        chunks = split_markdown(doc.text, doc.id, doc.version, self.chunk_size, self.chunk_overlap, title=doc.title)
        return [Chunk(c.file, c.title, c.text, c.file_hash, source, doc.url, doc.access) for c in chunks]

    MAX_GAP_SHARE = 0.25
    """A generation whose removed rows (gaps left by edits, see :func:`index.write_delta`) would
    exceed this share of its rowids is written whole again, compacted."""

    def _delta_fits(self, old: idx.IndexSnapshot, embed: bool) -> bool:
        """The next generation can be written as an edit of ``old`` (:func:`index.write_delta`):
        same format, vectors present exactly when embedding, and few gaps so far."""
        has_vectors = old.vectors is not None
        wants_vectors = embed and self.embeddings is not None
        top = max(old.max_rowid, 1)
        return old.has_sources and has_vectors == wants_vectors and (top - old.count) / top < self.MAX_GAP_SHARE

    def _manifest(
        self,
        docs: dict[str, dict[str, str]],
        state: dict[str, dict],
        files: dict[str, str],
        embedder_id: str,
        embed: bool,
        readers: dict[str, str],
        configs: dict[str, str],
    ) -> dict:
        return {
            "sources": list(self.sources),
            "docs": {n: docs.get(n, {}) for n in self.connectors},
            "state": {n: state.get(n, {}) for n in self.connectors},
            "config": {n: configs[n] for n in self.connectors if n in configs},
            "readers": {n: readers[n] for n in self.connectors if n in readers},
            "files": files,
            "chunking": self._chunking_id(),
            "embedder": embedder_id,
            "embedder_backend": (getattr(self.embeddings, "backend", None) or type(self.embeddings).__name__)
            if (embed and self.embeddings is not None)
            else "none",
            "built_at": _now(),
        }

    def _publish(
        self,
        gen: str,
        tmp: Path,
        old: idx.IndexSnapshot | None,
        manifest: dict,
        reports: list[SourceReport],
        fresh: list[str],
        embedded: int,
        reused: int,
        t0: float,
    ) -> IndexStats:
        """Make the written generation live, prune old ones, record the sources' status."""
        idx.publish(self.index_dir, tmp, gen)
        self.snapshot  # noqa: B018 - open the generation just published
        idx.prune(
            self.index_dir, keep={gen, old.directory.name if old else gen}, keep_generations=self.keep_generations
        )
        per_source = manifest.get("source_chunks", {})
        for r in reports:
            r.chunks = int(per_source.get(r.name, 0))
        self._write_status(reports)
        total = int(manifest.get("chunks", 0))
        stats = IndexStats(
            files=len(manifest.get("files", {})),
            chunks=total,
            embedded_chunks=embedded,
            reused_chunks=reused,
            seconds=round(time.perf_counter() - t0, 2),
            generation=gen,
            changed_files=fresh,
            sources=reports,
        )
        log.info(
            "reindex done: %d documents, %d chunks (%d embedded, %d reused) in %.1fs -> %s",
            stats.files,
            stats.chunks,
            stats.embedded_chunks,
            stats.reused_chunks,
            stats.seconds,
            gen,
        )
        for r in reports:
            if r.synced:
                log.info("source %s", r.summary())
        return stats

    def _sync(self, progress: ProgressFn, embed: bool, names: Sequence[str] | None) -> IndexStats:
        try:
            return self._sync_once(progress, embed, names, reuse=True)
        except _EmbedderChanged:
            # the lazily loaded model settled on another vector space than the live
            # generation's: nothing embedded before is comparable, every source is read again
            log.info("the embedding model loaded as %s: every source is read and embedded again", self.embedder_id)
            return self._sync_once(progress, embed, names, reuse=False)

    def _sync_once(self, progress: ProgressFn, embed: bool, names: Sequence[str] | None, reuse: bool) -> IndexStats:
        """One sync, streamed: each source's changed documents are split, embedded and written
        into the next generation batch by batch (:class:`_Batcher`, one
        :class:`~graphs.knowledge.writer.GenerationWriter`), so memory holds a batch of
        documents whatever the corpus size. The next generation is an edit of the live one
        when it can be (:meth:`_delta_fits`), else written whole, with the chunks of unchanged
        documents carried over from the live generation with their vectors."""
        t0 = time.perf_counter()
        self.index_dir.mkdir(parents=True, exist_ok=True)
        old = self.snapshot  # re-read under the lock: another process may have published
        old_m = old.manifest if old is not None else {}
        load = getattr(self.embeddings, "load", None) if embed else None
        if callable(load) and old is not None and old_m.get("embedder") != self.embedder_id:
            load()  # a lazily loaded model settles its vector space before reuse is decided
        embedder_id_before = self.embedder_id if embed else "none"
        readable = old is not None and old.has_sources
        old_docs: dict[str, dict[str, str]] = old_m.get("docs", {}) if readable else {}
        old_state: dict[str, dict] = old_m.get("state", {}) if readable else {}
        compatible = (
            reuse
            and readable
            and old_m.get("chunking") == self._chunking_id()
            and old_m.get("embedder") == embedder_id_before
        )
        # the named sources alone, unless the live generation's chunks cannot be carried over
        # (other chunking or embedder, an older format): then every source is read again
        wanted = set(self.sources if names is None or (old is not None and not compatible) else names)
        if names is not None and wanted != set(self.sources):
            # a generation published by a sync of some sources holds every other source as the
            # live one does: one it lacks (never synced, synced under another configuration, or
            # dropped by a sync with another config.toml) is read now too, else it would be
            # published empty and stay so until the next start-up sync
            lacking = list(self.sources) if not readable else self._unsynced(cast("idx.IndexSnapshot", old))
            extra = self._due([n for n in lacking if n not in wanted])
            if extra:
                log.info("also syncing %s: not in the live index", ", ".join(extra))
                wanted |= set(extra)
        vectors_on = embed and self.embeddings is not None
        delta = old is not None and compatible and self._delta_fits(old, embed)

        gen = idx.new_generation_name()
        tmp = self.index_dir / (gen + ".tmp")
        tmp.mkdir()
        writer = GenerationWriter(
            tmp, vectors=vectors_on, base=old if delta else None, ann_min_rows=self.ann_min_chunks
        )
        batch = _Batcher(
            self, writer, old if compatible else None, progress, vectors_on, embedder_id_before if compatible else None
        )
        try:
            stats = self._stream(
                old, old_docs, old_state, compatible, readable, wanted, delta, writer, batch, progress, embed, t0
            )
        except BaseException:
            writer.close()
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        finally:
            batch.close()
        if stats.generation != gen:  # nothing changed: the live generation stays
            writer.close()
            shutil.rmtree(tmp, ignore_errors=True)
        return stats

    def _stream(
        self,
        old: idx.IndexSnapshot | None,
        old_docs: dict[str, dict[str, str]],
        old_state: dict[str, dict],
        compatible: bool,
        readable: bool,
        wanted: set[str],
        delta: bool,
        writer: GenerationWriter,
        batch: _Batcher,
        progress: ProgressFn,
        embed: bool,
        t0: float,
    ) -> IndexStats:
        old_m = old.manifest if old is not None else {}
        reports: list[SourceReport] = []
        keep: dict[str, set[str]] = {}  # source -> document ids whose old chunks are carried over
        fresh: list[str] = []
        docs: dict[str, dict[str, str]] = {}
        state: dict[str, dict] = {}
        # per source, the readers its documents were read with (kept as they were for a
        # source not synced now or failing)
        old_readers: dict[str, str] = old_m.get("readers", {}) if compatible else {}
        readers = dict(old_readers)
        # likewise the configuration each source's documents were read with: a source that
        # failed keeps its old one, so the next start-up sync still sees it as pending
        configs: dict[str, str] = dict(old_m.get("config", {})) if compatible else {}
        for name, conn in self.connectors.items():
            batch.flush()  # what the sources before queued is written: a failure below drops this source's alone
            prev = old_docs.get(name, {}) if compatible else {}
            report = SourceReport(name, conn.kind, synced=name in wanted)
            reports.append(report)
            if name not in wanted:
                keep[name], docs[name], state[name] = set(prev), dict(prev), old_state.get(name, {})
                report.documents = len(prev)
                if not delta:
                    batch.carry(old, name, keep[name])
                continue
            s0 = time.perf_counter()

            def scan_progress(done: int, total: int, _name: str = name) -> None:
                progress(f"scan {_name}", done, total)

            mark, fresh_start = writer.mark(), len(fresh)
            mine: dict[str, str] = {}  # documents read in this sync, id -> version
            failure: Exception | None = None
            listing = None
            known, cursor = prev, old_state.get(name, {}) if compatible else {}
            if prev and old_readers.get(name) != conn.readers:
                # it reads other formats now, or converts them otherwise: files it passed over
                # or converted before are read again (a text that comes out the same keeps
                # its vectors: nothing is embedded again for it)
                log.info("source %s: its readable formats or their conversion changed: every document is read", name)
                known, cursor = {}, {}
            try:
                listing = conn.scan(known, cursor, scan_progress)
                stream = iter(listing.changed)
            except Exception as exc:  # noqa: BLE001 - one source failing never stops the others
                failure = exc
            while failure is None:
                try:
                    d = next(stream)
                except StopIteration:
                    break
                except Exception as exc:  # noqa: BLE001 - the source failed halfway through its documents
                    failure = exc
                    break
                d = _storable(d)
                if d.id in mine:
                    continue  # one id twice in a listing: the first wins
                mine[d.id] = d.version
                fresh.append(d.id)
                batch.add(name, d)  # embedding or writing errors are the sync's, not the source's
            if failure is None:
                batch.flush()
            if failure is not None or listing is None:
                err = failure
                if err is not None:  # with -v: where it failed (the error line comes after the sync)
                    log.debug("source %s failed here:", name, exc_info=(type(err), err, err.__traceback__))
                why = str(err) if isinstance(err, SourceError) else f"{type(err).__name__}: {err}"
                why = why.removeprefix(f"source {name}: ")
                batch.discard()
                writer.drop_since(mark)
                del fresh[fresh_start:]
                report.ok, report.error = False, why
                keep[name], docs[name], state[name] = set(prev), dict(prev), old_state.get(name, {})
                if not compatible and readable and old_docs.get(name):
                    keep[name] = set(old_docs[name])  # carried over and embedded again below
                    docs[name] = dict(old_docs[name])
                if not delta:
                    batch.carry(old, name, keep[name])
                report.documents = len(docs[name])
                report.seconds = round(time.perf_counter() - s0, 2)
                continue
            readers[name] = conn.readers
            configs[name] = self._config_id(name)
            changed_ids = set(mine)
            kept = (listing.kept & set(prev)) - changed_ids
            keep[name] = kept
            docs[name] = {d: prev[d] for d in kept}
            docs[name].update(mine)
            state[name] = listing.state
            added = [i for i in sorted(changed_ids) if i not in prev]
            removed = set(prev) - kept - changed_ids
            # a document added with the version (content hash, blob id) of one removed: renamed
            gone: dict[str, int] = {}
            for i in removed:
                gone[prev[i]] = gone.get(prev[i], 0) + 1
            for i in added:
                if gone.get(mine[i], 0) > 0:
                    gone[mine[i]] -= 1
                    report.renamed += 1
            report.added = len(added) - report.renamed
            report.updated = len(changed_ids) - len(added)
            report.removed = len(removed) - report.renamed
            report.unchanged = len(kept)
            report.problems, report.skipped = list(listing.problems), listing.skipped
            report.skipped_examples = list(listing.skipped_examples)
            report.documents = len(docs[name])
            if not delta:
                batch.carry(old, name, kept)
            report.seconds = round(time.perf_counter() - s0, 2)
        batch.flush()
        attempted = [r for r in reports if r.synced]
        if attempted and all(not r.ok for r in attempted) and not any(docs.values()):
            self._write_status(reports)
            # the error says it all, once: no log line of each source before it
            # a source named by its path ([knowledge] sources) is named by its error already
            said = [r.error if r.name in r.error else f"{r.name}: {r.error}" for r in attempted]
            raise NothingIndexedError("; ".join(said), reports)
        for r in attempted:
            if not r.ok:
                log.error("source %s failed: %s; its last good documents stay", r.name, r.error)
        if not any(docs.values()):
            # every source read, none gave a document: the same failure whatever the index held
            # before (publishing an empty generation would answer "not about the documents")
            self._write_status(reports)
            raise NothingIndexedError(f"no text found in the knowledge sources: {', '.join(self.sources)}", reports)
        for r in attempted:
            if r.ok and not docs.get(r.name):
                log.warning("source %s gave no document%s", r.name, _why_empty(r, self.connectors[r.name]))

        if (
            old is not None
            and compatible
            and not fresh
            and not any(r.removed for r in reports)
            and old_m.get("config") == {n: configs[n] for n in self.connectors if n in configs}
            and old_m.get("readers", {}) == {n: readers[n] for n in self.connectors if n in readers}
            and set(old_docs) == set(self.connectors)
        ):
            # nothing changed: the live generation stays (a connector's cursor is not saved, so
            # the next sync compares against the same last good state, which costs a few reads)
            for r in reports:
                r.chunks = int(old_m.get("source_chunks", {}).get(r.name, 0))
            self._write_status(reports)
            log.info("sync: nothing changed; generation %s stays live", old.directory.name)
            return IndexStats(
                files=len(old_m.get("files", {})),
                chunks=int(old_m.get("chunks", 0)),
                reused_chunks=int(old_m.get("chunks", 0)),
                seconds=round(time.perf_counter() - t0, 2),
                generation=old.directory.name,
                sources=reports,
            )
        if not delta and writer.count == 0:
            self._write_status(reports)
            raise NothingIndexedError(f"no text found in the knowledge sources: {', '.join(self.sources)}", reports)
        if delta:
            assert old is not None
            # removed, updated, and from sources no longer configured: their old chunks go
            writer.remove({(n, d) for n, ids in old_docs.items() for d in ids if d not in keep.get(n, set())})
        files: dict[str, str] = {}
        for name in self.connectors:
            files.update(docs.get(name, {}))
        embedder_id = self.embedder_id if embed else "none"
        manifest = writer.finish(self._manifest(docs, state, files, embedder_id, embed, readers, configs))
        progress("write", 1, 1)
        gen = writer.directory.name.removesuffix(".tmp")
        embedded = batch.embedded
        reused = int(manifest["chunks"]) - (batch.embedded if batch.vectors_on else batch.split)
        return self._publish(gen, writer.directory, old, manifest, reports, fresh, embedded, reused, t0)


def _why_empty(report: SourceReport, conn: Connector) -> str:
    """Why a source gave no document, for its one warning line: ``" (2 skipped, 1 problem)"``,
    or the file patterns a files source read (none of its files matched them)."""
    said = [f"{report.skipped} skipped"] if report.skipped else []
    said += [f"{len(report.problems)} problem{'' if len(report.problems) == 1 else 's'}"] if report.problems else []
    if said:
        return f" ({', '.join(said)})"
    patterns = getattr(conn, "patterns", None)
    if not patterns:
        return ""
    if tuple(patterns) == FILE_PATTERNS:
        return " (none of its files is of a format it reads)"
    return f" (no file matches its patterns: {', '.join(patterns)})"


def _storable(d: Document) -> Document:
    """``d`` with fields the index can store and show whatever the connector read: a name in
    no UTF-8 or with a newline escaped (it is a citation's label), bad text replaced; otherwise
    one such document would fail the writing of every source's documents."""
    title = display_name(" ".join(d.title.split()))
    doc_id, text, url = display_name(d.id), valid_text(d.text), display_name(d.url)
    if (doc_id, title, text, url) == (d.id, d.title, d.text, d.url):
        return d
    return dataclasses.replace(d, id=doc_id, title=title, text=text, url=url)


class _EmbedderChanged(Exception):
    """The embedding model loaded into another vector space than the live generation's."""


class _Batcher:
    """Turns a stream of documents into batches of chunks for a :class:`GenerationWriter`:
    split, then vectors (reused by text from the live generation when a chunk's heading path
    and text are already there, as for a moved or renamed document; the rest embedded,
    ``embedding_concurrency`` requests at a time), then appended.

    Args:
        kb: the knowledge base (splitting and embedding settings).
        writer: the generation being written.
        reuse_from: the live generation when its vectors are comparable (same embedder and
            chunking), else None.
        progress: the sync's progress callback.
        vectors_on: the generation has vectors.
        embedder_id: the embedder id the reuse assumes (None: no reuse); a model that loads
            into another raises :class:`_EmbedderChanged`.
    """

    def __init__(
        self,
        kb: KnowledgeBase,
        writer: GenerationWriter,
        reuse_from: idx.IndexSnapshot | None,
        progress: ProgressFn,
        vectors_on: bool,
        embedder_id: str | None,
    ) -> None:
        self.kb, self.writer, self.reuse_from = kb, writer, reuse_from
        self.progress, self.vectors_on, self.embedder_id = progress, vectors_on, embedder_id
        self.pending: list[Chunk] = []
        self.carried: list[Chunk] = []
        self.carried_vectors: list[np.ndarray] = []
        self.embedded = 0  # texts sent to the embedder
        self.split = 0  # chunks of documents read in this sync
        self.written = 0
        self.loaded = False
        self._pool: ThreadPoolExecutor | None = None
        self._inflight: tuple[list[Chunk], Future[np.ndarray]] | None = None

    def add(self, source: str, doc: Document) -> None:
        """Split ``doc`` and queue its chunks; a full batch is sent to be embedded."""
        self.writer.prepare()  # an edit: the live generation's files are copied meanwhile
        chunks = self.kb._split(source, doc)
        self.pending += chunks
        self.split += len(chunks)
        if len(self.pending) >= self.kb.write_batch:
            self._send()

    def carry(self, old: idx.IndexSnapshot | None, source: str, ids: set[str]) -> None:
        """Queue the chunks of the live generation's documents ``ids`` of ``source`` (with
        their vectors when comparable, else embedded again)."""
        if old is None or not ids or not old.has_sources:
            return
        vectors = old.vectors if (self.reuse_from is not None and self.vectors_on) else None
        for rowid, c in old.iter_chunks(source):
            if c.file not in ids:
                continue
            if vectors is not None:
                self.carried.append(c)
                self.carried_vectors.append(np.array(vectors[rowid - 1], dtype=np.float32))
                if len(self.carried) >= self.kb.write_batch:
                    self._write(self.carried, np.vstack(self.carried_vectors))
                    self.carried, self.carried_vectors = [], []
            else:
                self.pending.append(c)
                if len(self.pending) >= self.kb.write_batch:
                    self._send()

    def _send(self) -> None:
        """Embed the queued chunks in the background while the previous batch is written and
        the next one read and split (one batch in flight: memory holds three at most)."""
        chunks, self.pending = self.pending, []
        if not self.vectors_on:
            self._write(chunks, None)
            return
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sync-embed")
        future = self._pool.submit(self._vectors, chunks)
        self._drain()
        self._inflight = (chunks, future)

    def _drain(self) -> None:
        """Wait for the batch in flight and write it (its embedding errors are raised here)."""
        if self._inflight is not None:
            chunks, future = self._inflight
            self._inflight = None
            self._write(chunks, future.result())

    def _write(self, chunks: list[Chunk], vectors: np.ndarray | None) -> None:
        self.writer.append(chunks, vectors)
        self.written += len(chunks)
        self.progress("write", self.written, self.written)

    def discard(self) -> None:
        """Drop what is queued or in flight (the source it came from failed)."""
        self.pending, self.carried, self.carried_vectors = [], [], []
        if self._inflight is not None:
            _, future = self._inflight
            self._inflight = None
            future.exception()  # waited for; its outcome belongs to the failed source

    def flush(self) -> None:
        """Embed and write everything queued, and wait until it is written."""
        if self.pending:
            self._send()
        self._drain()
        if self.carried:
            self._write(self.carried, np.vstack(self.carried_vectors))
            self.carried, self.carried_vectors = [], []

    def close(self) -> None:
        """Stop the background embedding (after the sync, or when it failed)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def _vectors(self, chunks: list[Chunk]) -> np.ndarray:
        keys = [text_key(c.title, c.text) for c in chunks]
        found = reusable_vectors(self.reuse_from, keys) if self.reuse_from is not None else {}
        todo: dict[int, int] = {}  # text key -> index of the first chunk with it
        for i, k in enumerate(keys):
            if k not in found:
                todo.setdefault(k, i)
        if todo:
            self._load()
            texts = [index_text(chunks[i]) for i in todo.values()]
            base = self.embedded
            got = embed_texts(
                cast("Embeddings", self.kb.embeddings),
                texts,
                max_items=self.kb.batch_size,
                max_tokens=self.kb.batch_tokens,
                concurrency=1 if getattr(self.kb.embeddings, "in_process", False) else self.kb.embedding_concurrency,
                progress=lambda d, _t: self.progress("embed", base + d, self.split),
            )
            self.embedded += len(texts)
            found.update(zip(todo, got, strict=True))
        return np.vstack([found[k] for k in keys]).astype(np.float32)

    def _load(self) -> None:
        """Load a lazily loaded model before its first use; it may settle on another vector space."""
        if self.loaded:
            return
        self.loaded = True
        load = getattr(self.kb.embeddings, "load", None)
        if callable(load):
            load()
        if self.embedder_id is not None and self.kb.embedder_id != self.embedder_id:
            raise _EmbedderChanged(self.kb.embedder_id)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _epoch(iso: str | None) -> float:
    """Seconds since the epoch of a :func:`_now` stamp (0 when missing or unreadable)."""
    if not iso:
        return 0.0
    try:
        return calendar.timegm(time.strptime(iso, "%Y-%m-%dT%H:%M:%SZ"))
    except ValueError:
        return 0.0
