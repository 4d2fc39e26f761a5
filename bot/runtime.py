"""Assemble the running product from settings: models, knowledge base, web search,
graph, checkpointer, bookkeeping and the ChatService. One factory each, so moving to
shared infrastructure (Postgres checkpointer, a vector server) is a change here only.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import logging
import re
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from langchain_core.embeddings import Embeddings
from langchain_core.language_models.chat_models import BaseChatModel

from bot.admin import AdminCommands
from bot.chat.channels import run_scope
from bot.config import Secrets, Settings
from bot.knowledge import build_knowledge_base, configured_names
from bot.metrics import TurnObserver
from bot.monitoring import PlatformHealth
from bot.service import ChatService
from bot.service.graph_pool import GraphPool, GraphWorkerGone, default_workers
from bot.storage import BookkeepingStore, open_storage
from bot.storage.sqlite import open_learned
from bot.sync import SourceSync
from graphs.adaptive_rag import RAGGraph, build_graph
from graphs.knowledge import KnowledgeBase, ProgressFn
from graphs.learned import LearnedStore
from graphs.models import (
    ModelCaller,
    ModelUnavailableError,
    UnavailableChatModel,
    build_chat_model,
    build_embeddings,
    close_chat_model,
    model_kind,
    model_name,
    resolve_chat_spec,
)
from graphs.nodes import GraphDeps
from graphs.settings import GraphConfig
from graphs.web import WebSearch

log = logging.getLogger(__name__)


@dataclass
class Runtime:
    """Everything a front end needs: ``service`` to talk to, plus its parts."""

    settings: Settings
    secrets: Secrets
    service: ChatService
    knowledge: KnowledgeBase
    graph: RAGGraph
    chat_model: BaseChatModel
    web: WebSearch | None
    admin: AdminCommands  # the admin commands (reindex, status, learned ...)
    bookkeeping: BookkeepingStore  # audit log, answers and votes (``threadwise feedback``)
    learned: LearnedStore | None  # the experts' answers kept as knowledge
    health: PlatformHealth = field(default_factory=PlatformHealth)  # connected or not, per platform
    sync: SourceSync | None = None  # knowledge source syncs (bot.sync)


def build_web_search(settings: Settings, secrets: Secrets) -> WebSearch | None:
    """Tavily web search when ``[web] enabled`` and TAVILY_API_KEY is set, else None."""
    w = settings.web
    if not (w.enabled and secrets.tavily_api_key):
        return None
    return WebSearch(
        secrets.tavily_api_key,
        w.api_base_url,
        w.max_results,
        w.search_depth,
        w.timeout_seconds,
        settings.graph.max_document_characters,
    )


def json_mode_for(model: BaseChatModel) -> str:
    """``llamacpp`` (the in-process offline model), ``hosted`` (a model behind an API) or
    ``none`` (a model object of unknown kind, e.g. a test's): :func:`graphs.models.model_kind`."""
    return model_kind(model)


def resolve_graders(graders: str, model: BaseChatModel) -> str:
    """``auto`` -> ``lexical`` for the offline llama.cpp model (too small to judge), else ``llm``."""
    if graders == "auto":
        return "lexical" if json_mode_for(model) == "llamacpp" else "llm"
    return graders


#: ``"auto"`` concurrency per kind of model: (LLM calls, graph runs). One llama.cpp context
#: runs one call at a time; a hosted API takes many (its 429s shrink the call limit, see
#: :class:`graphs.models.AdaptiveLimit`), so a fixed small cap would be the bottleneck.
#: Runs: 128 per process that runs the graph (the chat process, or each graph worker), so a
#: burst of questions does not wait in waves of a few dozen runs.
#: Calls: 64, shared out between graph workers: a larger first burst against an API that takes
#: few calls at once failed some calls after their retries before the window had shrunk
#: (tests/test_model_retry.py).
AUTO_CONCURRENCY = {"llamacpp": (1, 8), "hosted": (64, 128)}


def resolve_concurrency(calls: int | str, runs: int | str, model: BaseChatModel, workers: int = 0) -> tuple[int, int]:
    """``[models] max_concurrent_calls`` and ``[service] max_concurrent_runs`` with ``"auto"``
    replaced by :data:`AUTO_CONCURRENCY` for ``model``; ``workers`` graph worker processes
    (0: the graph runs in this process) each take the auto number of runs."""
    auto = AUTO_CONCURRENCY["llamacpp" if json_mode_for(model) == "llamacpp" else "hosted"]
    return ((auto[0] if calls == "auto" else int(calls)), (auto[1] * max(1, workers) if runs == "auto" else int(runs)))


def resolve_graph_workers(workers: int | str, model: BaseChatModel, backend: str, *, given_model: bool = False) -> int:
    """``[service] graph_workers`` as a number: ``"auto"`` = one per CPU core when there are
    two or more (:func:`bot.service.graph_pool.default_workers`) with a hosted model on the
    SQLite backend, else 0. 0 when the chat model was handed in (a test's scripted model): a worker
    builds its model from the settings; 0 on PostgreSQL (a worker writes the SQLite checkpoint file)."""
    if given_model:
        if workers not in (0, "auto"):
            log.warning("[service] graph_workers = %s ignored: the chat model was given in-process", workers)
        return 0
    if workers == "auto":
        hosted = json_mode_for(model) not in ("llamacpp", "none")
        return default_workers() if hosted and backend == "sqlite" else 0
    if int(workers) and backend != "sqlite":  # a worker opens the SQLite checkpoint file (bot.graph_worker)
        log.warning(
            "[service] graph_workers = %s ignored: graph workers share the SQLite checkpoint file; with "
            '[storage] backend = "%s" run more replicas instead (docs/deploy.md)',
            workers,
            backend,
        )
        return 0
    return int(workers)


async def start_graph_pool(
    settings: Settings, observer: TurnObserver, workers: int, max_calls: int, sources: Sequence[str] | None
) -> GraphPool | None:
    """Start ``workers`` graph worker processes; their LLM-call cap is ``max_calls`` shared out
    (rounded up); ``observer`` counts their LLM calls. None when they cannot start: one error
    line, and the graph runs in this process."""
    init = {
        "settings": settings,
        "sources": list(sources) if sources else None,
        "max_calls": max(1, -(-max_calls // workers)),
        "log_level": logging.getLevelName(logging.getLogger().getEffectiveLevel()),
        "log_format": settings.logging.format,
    }
    pool = GraphPool(workers, init, settings.service.event_loop, on_llm_requests=observer.llm_requests)
    try:
        await pool.start()
    except GraphWorkerGone as exc:
        log.error("%s; the graph runs in the chat process", exc)
        return None
    return pool


def resolve_composer(composer: str, model: BaseChatModel) -> str:
    """``auto`` -> ``extractive`` for the offline llama.cpp model (too small to write answers), else ``llm``."""
    if composer == "auto":
        return "extractive" if json_mode_for(model) == "llamacpp" else "llm"
    return composer


def graph_config(
    settings: Settings, model: BaseChatModel, *, degraded: bool = False, sources: Sequence[str] | None = None
) -> GraphConfig:
    """What the graph runs with: ``[graph]`` as loaded, its ``"auto"`` graders and composer
    resolved for ``model`` (lexical and extractive when the chat model is ``degraded``), plus
    ``[knowledge] k`` and ``description`` (a description of ``sources`` when they override
    config.toml's) and ``[service] apology``."""
    g = settings.graph
    return GraphConfig.of(
        g,
        k=settings.knowledge.k,
        apology=settings.service.apology,
        kb_description=(
            describe_sources(sources) if sources and not settings.knowledge.description else settings.kb_description()
        ),
        graders="lexical" if degraded else resolve_graders(g.graders, model),
        composer="extractive" if degraded else resolve_composer(g.composer, model),
    )


def describe_sources(sources: Sequence[str]) -> str:
    """What sources given on the command line hold, in a few words, for the greeting and the
    router when config.toml's ``[knowledge] description`` was left at its default: the title of
    each folder's front page (``index.md``, ``README.md``, ``_index.md``: front matter ``title``
    or first heading), else the folder's name."""
    from graphs.knowledge.sources import front_matter_title

    names = []
    for src in sources:
        path = Path(src)
        title = ""
        for name in ("index.md", "README.md", "_index.md", "index.mdx", "readme.md"):
            page = path / name
            if path.is_dir() and page.is_file():
                try:
                    head, body = front_matter_title(page.read_text(encoding="utf-8", errors="replace")[:20000])
                except OSError:
                    continue
                body = re.sub(r"^[ \t]*(```|~~~).*?^[ \t]*\1[ \t]*$", "", body, flags=re.S | re.M)  # not code
                heading = re.search(r"^#[ \t]+(.+?)[ \t#]*$", body, re.M)
                title = head or (heading.group(1).strip() if heading else "")
                if title:
                    break
        names.append(
            f"{title} ({path.name})"
            if title and title.lower() != path.name.lower()
            else (title or path.name or str(src))
        )
    return "the documentation in " + ", ".join(names)


DEGRADED_NOTE = "the chat model is unavailable, so this quotes the documents (an admin can see why in the log)"


def _chat_model(settings: Settings, secrets: Secrets, given: BaseChatModel | None) -> tuple[BaseChatModel, str]:
    """The chat model, and why it is unavailable ("" when it works).

    When the offline model was chosen by default (``provider = "auto"``, no ``chat_model``
    and no provider's key in the environment) and cannot run (its backend died in its self-check, or the offline
    extra is not installed), the bot keeps serving: one error line in the log, and the
    graph answers extractively with no model call. A model the operator chose explicitly
    must work: its failure is raised (the CLI exits 2).

    Raises:
        ModelUnavailableError: the explicitly configured model cannot be built.
    """
    if given is not None:
        return given, ""
    m = settings.models
    spec = resolve_chat_spec(m, secrets.mistral_api_key)
    try:
        return build_chat_model(m, secrets.mistral_api_key, spec=spec), ""
    except ModelUnavailableError as exc:
        if not spec.by_default:
            raise
        log.error("%s; answering with the documents' own sentences until it is fixed", exc)
        return UnavailableChatModel(reason=str(exc)), str(exc)


async def check_chat_model(settings: Settings, secrets: Secrets, model: BaseChatModel) -> None:
    """Call a chat model behind an API once, within ``[models] request_timeout_seconds``
    (the call ``threadwise models check`` makes, as text). A busy or slow provider (429,
    5xx, timeout) is logged and start-up goes on; the in-process offline model is not called
    (its backend was checked when it was built).

    Raises:
        ModelUnavailableError: one line ``Configuration error: chat model NAME: CAUSE`` when a
            wrong key, base URL or model name means no question could be answered.
    """
    from graphs.models import model_kind
    from graphs.models.check import probe_chat

    if model_kind(model) != "hosted":
        return
    from langsmith import tracing_context

    spec = resolve_chat_spec(settings.models, secrets.mistral_api_key)
    with tracing_context(enabled=False):  # a start-up check, not a question: no trace of its own
        probe = await probe_chat(
            model, timeout=settings.models.request_timeout_seconds, structured=False, base_url=spec.base_url
        )
    if probe.ok:
        log.info("chat model %s answered in %.2f s", probe.name, probe.seconds)
    elif probe.fatal:
        raise ModelUnavailableError(f"Configuration error: chat model {probe.name}: {probe.detail}")
    else:
        log.warning("chat model %s did not answer the start-up check (%s): starting anyway", probe.name, probe.detail)


async def graph_deps(
    settings: Settings,
    secrets: Secrets,
    model: BaseChatModel,
    knowledge: KnowledgeBase,
    max_calls: int,
    *,
    degraded: str = "",
    sources: Sequence[str] | None = None,
    learned: LearnedStore | None = None,
) -> GraphDeps:
    """What the graph's nodes use: the model caller (at most ``max_calls`` LLM calls in flight),
    ``knowledge``, web search, the learned entries and the graph's settings. Built the same way
    by the chat process and by every graph worker (:mod:`bot.graph_worker`). ``learned``: the
    storage backend's (:attr:`bot.storage.Storage.learned`); None: the SQLite file of
    ``[learning] index_db`` (a graph worker beside the SQLite backend).

    Raises:
        StorageError: the learned entries' file cannot be opened.
    """
    m = settings.models
    if learned is None:
        learned = await open_learned(settings)
    return GraphDeps(
        caller=ModelCaller(
            model,
            m.structured_output,
            max_calls,
            m.max_retries,
            m.request_timeout_seconds,
            max_retry_wait=m.max_retry_wait_seconds,
            max_tokens=m.max_tokens,
        ),
        knowledge=knowledge,
        web=build_web_search(settings, secrets),
        learned=learned,
        config=graph_config(settings, model, degraded=bool(degraded), sources=sources),
    )


#: The collector's thresholds for the long-lived process (:func:`gc.set_threshold`; Python's
#: default is 700, 10, 10): a young collection every 20,000 net allocations instead of 700.
GC_THRESHOLDS = (20_000, 20, 10)


def freeze_startup_objects() -> None:
    """Tune the garbage collector for the long-lived process, once it is ready.

    Every object alive now (the imported libraries, settings, index and graph: ~165,000
    objects) moves to the collector's permanent generation (:func:`gc.freeze`), so the
    full collections a burst of questions triggers no longer walk them (nothing is
    collected first: the few objects already garbage are kept, a cost of kilobytes); and
    young collections run every 20,000 allocations (:data:`GC_THRESHOLDS`), not every 700.

    Both cut the collector's own CPU time under load. py-spy counts that time in whichever frame allocated
    (``BaseMessage.__init__``, ``dataclasses.replace``)."""
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


@asynccontextmanager
async def open_runtime(
    settings: Settings,
    secrets: Secrets,
    *,
    chat_model: BaseChatModel | None = None,
    embeddings: Embeddings | None | Literal["config"] = "config",
    sources: Sequence[str] | None = None,
    build_index: bool = True,
    progress: ProgressFn | None = None,
    graph_workers: bool = False,
    sync_schedule: bool = False,
    observer: TurnObserver | None = None,
    check_model: bool = False,
) -> AsyncIterator[Runtime]:
    """Open everything for the process lifetime; close it on exit.

    Args:
        settings, secrets: from :func:`bot.config.load_settings` and ``Secrets.from_env()``.
        chat_model: overrides the configured model (tests pass a ScriptedChatModel).
        embeddings: ``"config"`` (build from settings), or an Embeddings, or None.
        sources: knowledge sources overriding config.toml's (``--source``).
        build_index: build the index on start if missing or built from other sources.
        progress: progress callback for that first build (``(phase, done, total)``).
        graph_workers: run the graph in worker processes as ``[service] graph_workers`` says
            (``threadwise run``, a long-lived server); False: in this process (``ask``,
            ``console``, ``eval``: one question at a time gains nothing from them).
        sync_schedule: sync the ``[[sources]]`` that have a ``schedule`` in the background
            (``threadwise run``), one sync at a time across replicas (:mod:`bot.sync`).
        observer: the service's metrics (:class:`bot.metrics.PrometheusMetrics`); None: none kept.
        check_model: call a hosted chat model once (:func:`check_chat_model`) before the index
            build and the graph workers, so a wrong key, base URL or model name stops at once.

    Raises:
        ModelUnavailableError: the configured model cannot be built, or (``check_model``) a
            wrong key, base URL or model name means it cannot answer.
        NothingIndexedError: no knowledge source could be read and there is no index to
            answer from (the command failed: exit code 1).
        KnowledgeBaseError: the index folder cannot be locked or read.
    """
    from bot.config import export_model_keys

    export_model_keys()  # provider keys from .env or secret files, where the providers' clients look
    m = settings.models
    model, degraded = _chat_model(settings, secrets, chat_model)
    if check_model and chat_model is None:
        try:
            await check_chat_model(settings, secrets, model)
        except BaseException:
            await close_chat_model(model)
            raise
    if isinstance(embeddings, str):  # "config"
        emb, emb_id = build_embeddings(settings.knowledge.embeddings, m, secrets.mistral_api_key)
    else:
        emb, emb_id = embeddings, (f"custom:{type(embeddings).__name__}" if embeddings is not None else "none")
    # --source folders config.toml's index holds already are answered from it (those sources
    # only), not read and embedded again into an index of their own
    only = configured_names(settings, sources) if sources else None
    sources = None if only else sources
    knowledge = build_knowledge_base(settings, emb, emb_id, sources)
    # --source folders are read again every time: a user asking about a folder expects its
    # files as they are now, and an unchanged folder costs a listing (stat per file)
    if build_index and (sources or only or knowledge.needs_rebuild()):
        # --source folders: all of them; else what the index lacks (none: sources no longer configured go)
        syncing = (
            knowledge.sources
            if sources
            else list(dict.fromkeys([*(only or []), *knowledge.pending_sources()])) or ["no source (dropping old ones)"]
        )
        log.info("syncing the knowledge index from %s", ", ".join(syncing))
        # a failed build (embeddings API, another reindex running) is logged and shown by
        # `status`; the bot starts with the last good generation, or keyword-only
        # (embedding must not block the loop)
        await asyncio.to_thread(knowledge.ensure_index, progress, bool(sources), only or ())
    max_calls, _ = resolve_concurrency(m.max_concurrent_calls, settings.service.max_concurrent_runs, model)
    s = settings.service
    async with open_storage(settings, secrets.database_url or None) as storage:
        saver, store = storage.checkpointer, storage.bookkeeping
        deps = await graph_deps(
            settings, secrets, model, knowledge, max_calls, degraded=degraded, sources=sources, learned=storage.learned
        )
        web, learned = deps.web, deps.learned
        graph = build_graph(deps, checkpointer=saver)
        workers = (
            resolve_graph_workers(s.graph_workers, model, storage.backend, given_model=chat_model is not None)
            if graph_workers
            else 0
        )
        _, max_runs = resolve_concurrency(m.max_concurrent_calls, s.max_concurrent_runs, model, workers)
        provider = "scripted/test" if chat_model else model_name(model)
        if degraded:
            provider = f"unavailable, answers quote the documents ({degraded})"
        sync = SourceSync(
            knowledge,
            store,
            {} if sources else {src.name: p for src in settings.sources if (p := src.schedule_seconds)},
        )
        admin = AdminCommands(
            knowledge,
            store,
            kb_description=settings.kb_description(),
            describe={"Chat model": provider, "Web search": "on (Tavily)" if web else "off"},
            learned=learned,
            sync=sync,
            source_names=None if sources else settings.source_names,
        )
        observer = observer or TurnObserver()
        pool = await start_graph_pool(settings, observer, workers, max_calls, sources) if workers else None
        service = ChatService(
            graph,
            store,
            admin,
            settings,
            max_concurrent_runs=max_runs,
            knowledge=knowledge,
            learned=learned,
            scope_for=functools.partial(run_scope, settings, restrict_sources=not sources, only=only),
            answer_note=DEGRADED_NOTE if degraded else "",
            observer=observer,
            graph_pool=pool,
        )
        await service.remember_recent_messages()  # a redelivery after a restart is not acknowledged again
        stats = knowledge.stats()
        log.info(
            "runtime ready: model=%s web=%s index=%d files, %d chunks (%s, embeddings %s)%s storage=%s",
            provider,
            bool(web),
            stats["files"],
            stats["chunks"],
            stats.get("generation") or "no generation",
            stats.get("embedder") or "none",
            f" last build failed: {stats['last_error']}" if stats.get("last_error") else "",
            storage.backend,
        )
        stop_sync = asyncio.Event()
        scheduled = asyncio.create_task(sync.run_schedule(stop_sync), name="sync-schedule") if sync_schedule else None
        try:
            yield Runtime(settings, secrets, service, knowledge, graph, model, web, admin, store, learned, sync=sync)
        finally:
            if scheduled is not None:
                stop_sync.set()
                scheduled.cancel()  # a sync in its worker thread finishes and publishes on its own
                await asyncio.gather(scheduled, return_exceptions=True)
            await service.close()
            if pool is not None:
                await pool.close()
            await close_chat_model(model)
