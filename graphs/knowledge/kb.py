"""The :class:`KnowledgeBase`: hybrid search over the live generation, reindex, start-up build."""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import cast

import numpy as np
from langchain_core.embeddings import Embeddings

from graphs.knowledge import index as idx
from graphs.knowledge.common import Chunk, EmbeddingRefusedError, IndexStats, KnowledgeBaseError, ProgressFn
from graphs.knowledge.embedding import TextEmbedder, embed_texts
from graphs.knowledge.sources import discover_files
from graphs.knowledge.splitting import SPLITTER_ID, index_text, split_markdown
from graphs.knowledge.templates import TEMPLATES_ID, kind_of_file, strip_templates
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


class KnowledgeBase:
    """Hybrid (BM25 + dense) retriever over the configured sources, with atomic reindex.

    One reindex at a time per index folder, across processes (:class:`index.ReindexLock`:
    others are refused with "another reindex is running (pid N)"). Every search first
    checks ``CURRENT`` (one ``stat``) and opens a generation another process published.

    Args:
        index_dir: folder holding the index generations (created if missing).
        sources: folders, files or globs of Markdown/text (see :func:`discover_files`).
        patterns: file globs inside source folders.
        embeddings: a LangChain ``Embeddings`` or ``None`` for keyword-only search.
        embedder_id: names the embedding model; vectors are reused only for the same id.
            An ``embeddings`` object with its own ``embedder_id`` attribute (the local
            model, whose backend may fall back when it loads) overrides it.
        chunk_size, chunk_overlap: characters.
        candidates: ranked list length per query and retriever before fusion.
        rrf_k: the RRF constant (60 in the paper).
        max_chunks_per_file: at most this many chunks of one file in a result.
        keep_generations: old generations kept on disk after a swap.
        batch_size: most chunks per embedding request.
        batch_tokens: most estimated tokens per embedding request (see
            :mod:`graphs.knowledge.embedding`).
    """

    def __init__(
        self,
        index_dir: str | Path,
        sources: Sequence[str | Path],
        patterns: Sequence[str] = ("**/*.md", "**/*.txt"),
        embeddings: Embeddings | None = None,
        embedder_id: str = "none",
        chunk_size: int = 1000,
        chunk_overlap: int = 100,
        candidates: int = 40,
        rrf_k: int = 60,
        max_chunks_per_file: int = 2,
        keep_generations: int = 2,
        batch_size: int = 64,
        batch_tokens: int = 8000,
    ):
        self.index_dir = Path(index_dir)
        self.sources = [str(s) for s in sources]
        self.patterns = list(patterns)
        self.embeddings = embeddings
        self._embedder_id = embedder_id if embeddings is not None else "none"
        self.chunk_size = chunk_size
        self.chunk_overlap = chunk_overlap
        self.candidates = candidates
        self.rrf_k = rrf_k
        self.max_chunks_per_file = max_chunks_per_file
        self.keep_generations = keep_generations
        self.batch_size = batch_size
        self.batch_tokens = batch_tokens
        self.last_error: str | None = None
        self.last_error_at: str | None = None
        self._snapshot: idx.IndexSnapshot | None = None
        self._stamp: tuple[int, int] | None = None
        self._open_lock = threading.Lock()
        self._files_cache: dict[tuple[tuple[str, ...], str], frozenset[str]] = {}
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

    def needs_rebuild(self) -> bool:
        """True if there is no index or it was built from other sources or settings."""
        snap = self.snapshot
        if snap is None:
            return True
        return snap.manifest.get("sources") != self._source_ids() or self._settings_changed(snap)

    def files_of(self, sources: Sequence[str]) -> frozenset[str]:
        """The files (display paths, as in a :class:`Doc`'s ``location``) that come from
        ``sources`` and from no other configured source.

        Args:
            sources: a subset of :attr:`sources` (the same strings). A file whose display
                path also occurs in another source is left out: its chunks cannot be told
                apart, and a search restricted to ``sources`` must never return another
                source's text.

        Raises:
            KnowledgeBaseError: an entry of ``sources`` is not one of :attr:`sources`.
        """
        wanted = [str(s) for s in sources]
        unknown = [s for s in wanted if s not in self.sources]
        if unknown:
            raise KnowledgeBaseError(f"not a source of this knowledge base: {', '.join(unknown)}")
        snap = self.snapshot
        key = (tuple(sorted(wanted)), snap.directory.name if snap is not None else "")
        cached = self._files_cache.get(key)
        if cached is not None:
            return cached
        mine: set[str] = set()
        others: set[str] = set()
        for src in self.sources:
            try:
                found = {rel for _, rel in discover_files([src], self.patterns)}
            except KnowledgeBaseError:
                found = set()
            (mine if src in wanted else others).update(found)
        files = frozenset(mine - others)
        self._files_cache = {key: files}  # one entry: the live generation's
        return files

    def search(
        self, queries: Sequence[str | tuple[str, float]], k: int, sources: Sequence[str] | None = None
    ) -> list[Doc]:
        """Hybrid search.

        Args:
            queries: query variants (e.g. the standalone question, the rewritten query,
                the raw message), plain or as ``(query, weight)``; each is ranked by BM25
                and by the dense index, and all rankings are fused with weighted RRF.
                Any script works (see :mod:`graphs.terms`).
            k: number of chunks to return.
            sources: only chunks of files from these configured sources (see
                :meth:`files_of`); None searches every source.

        Returns:
            Up to ``k`` :class:`Doc` dicts, best first, at most ``max_chunks_per_file``
            per file. Dense ranking is used only when the live generation was embedded
            with this knowledge base's embedder and the query embedding succeeds (else
            keyword only).

        Raises:
            KnowledgeBaseError: no index has been built.
        """
        snap = self.snapshot
        if snap is None:
            raise KnowledgeBaseError("the knowledge base has no index yet: run `threadwise reindex`")
        weighted: dict[str, float] = {}
        for q in queries:
            text, weight = (q, 1.0) if isinstance(q, str) else (q[0], float(q[1]))
            if text.strip():
                weighted[text.strip()] = max(weight, weighted.get(text.strip(), 0.0))
        texts = list(weighted)
        rankings: list[list[int]] = [snap.keyword(q, self.candidates) for q in texts]
        weights = [weighted[q] for q in texts]
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
                rankings += [snap.dense(v, self.candidates) for v in (qv if qv is not None else [])]
                weights += weights
        scores = rrf_fuse(rankings, self.rrf_k, weights)
        ordered = sorted(scores, key=lambda cid: -scores[cid])
        allowed = self.files_of(sources) if sources is not None else None
        rows = snap.chunks(ordered if allowed is not None else ordered[: max(k * 6, 30)])
        per_file: dict[str, int] = {}
        docs: list[Doc] = []
        for cid in ordered:
            if cid not in rows:
                continue
            file, title, text = rows[cid]
            if allowed is not None and file not in allowed:
                continue
            if per_file.get(file, 0) >= self.max_chunks_per_file:
                continue
            per_file[file] = per_file.get(file, 0) + 1
            docs.append(Doc(id=f"{file}#{cid}", text=text, location=file, title=title, score=round(scores[cid], 5)))
            if len(docs) >= k:
                break
        return docs

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

    # ---- writing -------------------------------------------------------------------
    def reindex(self, progress: ProgressFn | None = None) -> IndexStats:
        """Build a new generation beside the live one and swap it in atomically.

        Unchanged files (same sha256, chunking and embedder) reuse their chunks and
        vectors from the live generation; the others are split and embedded. Holds the
        folder's reindex lock throughout; a failure leaves the live generation as it was
        and is kept in ``last_error`` (shown by ``stats()``).

        Args:
            progress: called as ``progress(phase, done, total)``; phases are
                ``"scan"``, ``"split"``, ``"embed"``, ``"write"``.

        Returns:
            :class:`IndexStats` of the new generation.

        Raises:
            ReindexBusyError: another reindex of this folder is running (any process).
            KnowledgeBaseError: a source does not exist, the sources hold no text, or the
                embeddings API refused a single chunk.
            Exception: errors of the embeddings client (network, HTTP), unchanged.
        """
        try:
            with idx.ReindexLock(self.index_dir):
                stats = self._reindex(progress or (lambda *_: None), embed=True)
        except Exception as exc:
            self.last_error = f"{type(exc).__name__}: {exc}" if not isinstance(exc, KnowledgeBaseError) else str(exc)
            self.last_error_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            raise
        self.last_error = self.last_error_at = None
        return stats

    def ensure_index(self, progress: ProgressFn | None = None) -> IndexStats | None:
        """The start-up build: reindex if :meth:`needs_rebuild`, never failing because of
        the embeddings or a concurrent reindex.

        When the build fails that way, the failure is logged in one line and kept in
        ``last_error``, and the bot starts with the last good generation; if there is
        none, a keyword-only generation is built so questions can still be answered.

        Returns:
            The stats of the generation built, or None if none was.

        Raises:
            KnowledgeBaseError: a source is missing or holds no text (a configuration
                error the user must fix).
        """
        if not self.needs_rebuild():
            return None
        try:
            return self.reindex(progress)
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
                return self._reindex(progress or (lambda *_: None), embed=False)
        except idx.ReindexBusyError as exc:
            log.warning("keyword-only index not built: %s", exc)
            return None

    def _source_ids(self) -> list[str]:
        return [str(Path(s).expanduser().resolve()) for s in self.sources]

    def _chunking_id(self) -> list:
        return [self.chunk_size, self.chunk_overlap, SPLITTER_ID, TEMPLATES_ID]

    def _settings_changed(self, snap: idx.IndexSnapshot) -> bool:
        """The chunking or the embedding model differ from the snapshot's: nothing is reusable."""
        m = snap.manifest
        return m.get("embedder") != self.embedder_id or m.get("chunking") != self._chunking_id()

    def _all_reusable(self, old: idx.IndexSnapshot | None, files: list[tuple[str, str]]) -> bool:
        """Every ``(display path, sha256)`` has vectors in ``old`` under the configured
        embedder id and chunking (nothing to embed)."""
        if (
            old is None
            or old.manifest.get("chunking") != self._chunking_id()
            or old.manifest.get("embedder") != self.embedder_id
        ):
            return False
        known = old.manifest.get("files", {})
        return all(known.get(d) == h for d, h in files)

    def _reindex(self, progress: ProgressFn, embed: bool) -> IndexStats:
        t0 = time.perf_counter()
        self.index_dir.mkdir(parents=True, exist_ok=True)
        files = discover_files(self.sources, self.patterns)
        progress("scan", len(files), len(files))
        old = self.snapshot  # re-read under the lock: another process may have published
        sources: list[tuple[str, bytes, str]] = []  # (display path, bytes, sha256)
        for abs_path, display in files:
            data = abs_path.read_bytes()
            sources.append((display, data, hashlib.sha256(data).hexdigest()))
        load = getattr(self.embeddings, "load", None) if embed else None
        if callable(load) and not self._all_reusable(old, [(d, h) for d, _, h in sources]):
            load()  # a lazily loaded model settles its backend (and embedder id) before reuse is decided
        embedder_id = self.embedder_id if embed else "none"
        reusable = (
            old is not None
            and old.manifest.get("chunking") == self._chunking_id()
            and old.manifest.get("embedder") == embedder_id
        )
        old_files: dict[str, str] = old.manifest.get("files", {}) if (old and reusable) else {}

        chunks: list[Chunk] = []
        vectors: list[np.ndarray | None] = []
        file_hashes: dict[str, str] = {}
        changed: list[str] = []
        for i, (display, data, digest) in enumerate(sources, start=1):
            file_hashes[display] = digest
            if old is not None and old_files.get(display) == digest:
                kept = old.file_chunks(display)
                chunks += [c for c, _ in kept]
                vectors += [v for _, v in kept]
            else:
                changed.append(display)
                text = strip_templates(data.decode("utf-8", errors="replace"), kind_of_file(display))
                new = split_markdown(text, display, digest, self.chunk_size, self.chunk_overlap)
                chunks += new
                vectors += [None] * len(new)
            progress("split", i, len(files))
        if not chunks:
            raise KnowledgeBaseError(f"no text found in the knowledge sources: {', '.join(self.sources)}")

        todo = [i for i, v in enumerate(vectors) if v is None]
        matrix: np.ndarray | None = None
        if embed and self.embeddings is not None:
            if todo:
                fresh = embed_texts(
                    self.embeddings,
                    [index_text(chunks[i]) for i in todo],
                    max_items=self.batch_size,
                    max_tokens=self.batch_tokens,
                    progress=lambda d, t: progress("embed", d, t),
                )
                for i, v in zip(todo, fresh, strict=True):
                    vectors[i] = v
            matrix = np.vstack(cast(list[np.ndarray], vectors)).astype(np.float32)  # every vector was filled

        gen = idx.new_generation_name()
        tmp = self.index_dir / (gen + ".tmp")
        tmp.mkdir()
        manifest = {
            "sources": self._source_ids(),
            "files": file_hashes,
            "chunks": len(chunks),
            "chunking": self._chunking_id(),
            "embedder": embedder_id,
            "embedder_backend": (getattr(self.embeddings, "backend", None) or type(self.embeddings).__name__)
            if (embed and self.embeddings is not None)
            else "none",
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        idx.write_generation(tmp, chunks, matrix, manifest)
        progress("write", 1, 1)
        idx.publish(self.index_dir, tmp, gen)
        self.snapshot  # noqa: B018 - open the generation just published
        idx.prune(
            self.index_dir, keep={gen, old.directory.name if old else gen}, keep_generations=self.keep_generations
        )
        embedded = len(todo) if (embed and self.embeddings is not None) else 0
        stats = IndexStats(
            files=len(files),
            chunks=len(chunks),
            embedded_chunks=embedded,
            reused_chunks=len(chunks) - len(todo),
            seconds=round(time.perf_counter() - t0, 2),
            generation=gen,
            changed_files=changed,
        )
        log.info(
            "reindex done: %d files, %d chunks (%d embedded, %d reused) in %.1fs -> %s",
            stats.files,
            stats.chunks,
            stats.embedded_chunks,
            stats.reused_chunks,
            stats.seconds,
            gen,
        )
        return stats
