"""The knowledge base and its sources as the settings describe them.

Apart from :mod:`bot.runtime` so that the commands that only read or sync the index
(``threadwise sources``, ``sync``, ``reindex``) do not load the graph, the chat models and
their libraries (LangGraph, LangChain's models, llama.cpp): ``threadwise sources`` starts in
well under a second instead of about two.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from bot.config import Settings

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings

    from graphs.knowledge import KnowledgeBase
    from graphs.knowledge.connectors import Connector


def source_connectors(settings: Settings, index_dir: Path) -> list[Connector]:
    """The ``[[sources]]`` entries as connectors (paths relative to the config file; Git
    clones kept under ``index_dir``/repos)."""
    from graphs.knowledge.connectors import FilesConnector, GitConnector, WebConnector

    out: list[Connector] = []
    for s in settings.sources:
        if s.type == "files":
            out.append(
                FilesConnector(
                    s.name,
                    [str(settings.path(p)) for p in s.path],
                    s.patterns,
                    web_url=s.web_url,
                    max_file_bytes=s.max_file_bytes,
                )
            )
        elif s.type == "web":
            out.append(
                WebConnector(
                    s.name,
                    s.url,
                    max_depth=s.max_depth,
                    max_pages=s.max_pages,
                    prefix=s.prefix,
                    timeout_seconds=s.timeout_seconds,
                    max_page_bytes=s.max_page_bytes,
                )
            )
        else:
            local = s.repo if "://" in s.repo or "@" in s.repo.split("/")[0] else str(settings.path(s.repo))
            out.append(
                GitConnector(
                    s.name,
                    local,
                    s.branch,
                    s.paths,
                    cache_dir=index_dir / "repos",
                    web_url=s.web_url,
                    max_file_bytes=s.max_file_bytes,
                )
            )
    return out


def configured_names(settings: Settings, folders: Sequence[str]) -> list[str] | None:
    """The names config.toml's knowledge base indexes ``folders`` (the command line's
    ``--source``) under, when each is a configured ``files`` source of that one folder (a
    ``[knowledge] sources`` entry, a ``[[sources]]`` entry of one path) whose patterns read the
    same files a ``--source`` folder reads: that index answers, instead of a second one that
    reads and embeds the same files again. None when one of them is not indexed so."""
    from graphs.file_formats import FILE_PATTERNS
    from graphs.knowledge.sources import list_files

    configured: dict[str, tuple[str, list[str]]] = {}  # real folder -> (its source's name, patterns)
    for src in settings.legacy_sources():
        name = str(settings.path(src))
        configured.setdefault(os.path.realpath(name), (name, list(settings.knowledge.patterns)))
    for s in settings.sources:
        paths = [s.path] if isinstance(s.path, str) else list(s.path)
        if s.type == "files" and len(paths) == 1:
            configured.setdefault(os.path.realpath(settings.path(paths[0])), (s.name, list(s.patterns)))
    names: list[str] = []
    for folder in folders:
        real = os.path.realpath(Path(folder).expanduser())
        if real not in configured or not os.path.isdir(real):
            return None
        name, patterns = configured[real]
        try:
            same = [f[2] for f in list_files([real], patterns)] == [f[2] for f in list_files([real], FILE_PATTERNS)]
        except Exception:  # noqa: BLE001 - a folder that cannot be listed is read as --source reads it
            return None
        if not same:  # config.toml reads fewer of its files (Markdown only): the folder needs its own index
            return None
        names.append(name)
    return list(dict.fromkeys(names)) or None


def enclosing_sources(settings: Settings, folders: Sequence[str]) -> list[tuple[str, str]]:
    """The ``--source`` folders that lie inside a folder config.toml indexes (a ``[knowledge]
    sources`` entry or a ``files`` source of one path) without being that folder: ``(folder as
    given, the configured folder as config.toml writes it)`` each. Such a folder is not answered
    from config.toml's index (:func:`configured_names` reuses a configured folder, not a part of
    one): it gets an index of its own, kept apart, which the command says."""
    configured: list[tuple[str, str]] = []  # (real path, as written)
    for src in settings.legacy_sources():
        configured.append((os.path.realpath(settings.path(src)), str(src)))
    for s in settings.sources:
        paths = [s.path] if isinstance(s.path, str) else list(s.path)
        if s.type == "files" and len(paths) == 1:
            configured.append((os.path.realpath(settings.path(paths[0])), str(paths[0])))
    found: list[tuple[str, str]] = []
    for folder in folders:
        real = os.path.realpath(Path(folder).expanduser())
        inside = [written for root, written in configured if real != root and real.startswith(root + os.sep)]
        if inside:
            found.append((folder, inside[0]))
    return found


def build_knowledge_base(
    settings: Settings, embeddings: Embeddings | None, embedder_id: str, sources: Sequence[str] | None = None
) -> KnowledgeBase:
    """The knowledge base from ``[knowledge]`` and ``[[sources]]`` (``sources``, the
    command line's ``--source``, replaces both: each is a ``files`` source named by the path
    as given, reading every format a ``[[sources]]`` files source reads)."""
    from graphs.knowledge import KnowledgeBase
    from graphs.knowledge.connectors import FilesConnector

    k = settings.knowledge
    index_dir = settings.path(k.index_dir)
    if sources:  # other sources get their own index, so the configured one is not replaced
        import hashlib

        tag = hashlib.sha256("\n".join(str(Path(s).resolve()) for s in sources).encode()).hexdigest()[:10]
        index_dir = index_dir.parent / f"{index_dir.name}-{tag}"
        connectors: list[Connector] = [FilesConnector(s, [s]) for s in dict.fromkeys(map(str, sources))]
    else:
        connectors = source_connectors(settings, index_dir)
    return KnowledgeBase(
        index_dir,
        [] if sources else [str(settings.path(s)) for s in settings.legacy_sources()],
        k.patterns,
        embeddings=embeddings,
        embedder_id=embedder_id,
        chunk_size=k.chunk_size,
        chunk_overlap=k.chunk_overlap,
        candidates=k.candidates,
        rrf_k=k.rrf_k,
        max_chunks_per_file=k.max_chunks_per_file,
        keep_generations=k.keep_generations,
        ann_min_chunks=k.ann_min_chunks,
        batch_size=k.embedding_batch_size,
        batch_tokens=k.embedding_batch_tokens,
        embedding_concurrency=k.embedding_concurrency,
        connectors=connectors,
    )
