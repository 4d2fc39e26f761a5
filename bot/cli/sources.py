"""``threadwise sync [SOURCE...]``, ``threadwise reindex`` and ``threadwise sources``: the knowledge
sources from the terminal.

``sync`` syncs the named sources (all without a name; ``reindex`` is ``sync`` of all) with a
progress bar per source and phase, prints the totals and one line per source, and exits 1
when a source failed, whether or not the index held it before (its last good documents stay
searchable; on a first sync there are none, and nothing is indexed), when the sources hold
no text, or when another sync is running; 2 only before any source is read: an unknown
source name, a ``--source`` that is not a folder of documents, a configuration error (a
``files`` source none of whose paths exists among them). Each failure is
one line on stderr naming its cause. ``sources`` lists each source: documents, chunks, last
sync, schedule and last error (``--json`` for scripts).
"""

from __future__ import annotations

import argparse
import asyncio
import json

from bot.cli.output import ProgressBar, out
from bot.cli.session import say_own_index
from bot.config import Secrets, Settings


def add_parsers(
    sub: argparse._SubParsersAction, common: argparse.ArgumentParser, source: argparse.ArgumentParser
) -> None:
    """Add ``reindex``, ``sync`` and ``sources`` to the command parser ``sub``."""
    sub.add_parser(
        "reindex", parents=[common, source], help="sync every knowledge source into the index (see sync)"
    ).set_defaults(handler=cmd_reindex)
    s = sub.add_parser("sync", parents=[common], help="sync knowledge sources into the index (all, or those named)")
    s.add_argument("names", nargs="*", metavar="SOURCE", help="[[sources]] names (default: every source)")
    s.set_defaults(handler=cmd_sync)
    ls = sub.add_parser("sources", parents=[common], help="list the knowledge sources: documents, chunks, last sync")
    ls.add_argument("--json", action="store_true", help="one JSON object per source")
    ls.set_defaults(handler=cmd_sources)


def schedules(settings: Settings) -> dict[str, float]:
    """``{name: seconds}`` of the ``[[sources]]`` entries with a ``schedule``."""
    return {s.name: p for s in settings.sources if (p := s.schedule_seconds)}


async def cmd_reindex(args: argparse.Namespace, settings: Settings) -> int:
    """``threadwise reindex [--source DIR]``: :func:`cmd_sync` of every source."""
    return await _sync(settings, None, args.source)


async def cmd_sync(args: argparse.Namespace, settings: Settings) -> int:
    """``threadwise sync [SOURCE...]`` (see the module docstring)."""
    return await _sync(settings, list(args.names) or None, None)


async def _sync(settings: Settings, names: list[str] | None, source_dirs: list[str] | None) -> int:
    # the embedding model and the index libraries (torch, onnxruntime) load only here
    from bot.knowledge import build_knowledge_base, configured_names
    from bot.storage import open_storage
    from bot.sync import SourceSync, SyncBusy, resolve_sources, sync_summary
    from graphs.knowledge import NothingIndexedError
    from graphs.models import build_embeddings

    say_own_index(settings, source_dirs)  # a part of a configured folder gets an index of its own
    if source_dirs and (only := configured_names(settings, source_dirs)):
        # folders config.toml indexes already: those sources of its index are synced, not a second index
        names, source_dirs = only, None
    secrets = Secrets.from_env()
    emb, emb_id = build_embeddings(settings.knowledge.embeddings, settings.models, secrets.mistral_api_key)
    kb = build_knowledge_base(settings, emb, emb_id, source_dirs)
    # a name as config.toml writes it (a [knowledge] sources folder is indexed under its
    # resolved path), exactly, else without case
    unknown: list[str] = []
    if names:
        names, unknown = resolve_sources(names, kb.sources, None if source_dirs else settings.source_names)
    if unknown:
        out.err.print(
            f"Unknown source {', '.join(unknown)}: the sources are {', '.join(kb.sources) or 'none'} "
            "(`threadwise sources` lists them)",
            style="red",
            markup=False,
        )
        return 2
    try:
        if settings.storage.backend == "postgres" and not source_dirs:  # replicas: once, and recorded for all
            async with open_storage(settings) as storage:
                with ProgressBar() as bar:
                    stats = await SourceSync(kb, storage.bookkeeping).run(names, bar)
        else:
            with ProgressBar() as bar:
                stats = await asyncio.to_thread(kb.reindex, bar, names)
    except SyncBusy as exc:
        out.err.print(f"Not synced: {exc}; try again when it is done.", markup=False)
        return 1
    except NothingIndexedError as exc:  # a source failed as in any sync, with no last good documents
        report = [f"• {r.summary()}" for r in exc.reports if r.synced]
        out.console.print("\n".join(["Nothing indexed:", *report]), markup=False, highlight=False)
        out.err.print(str(exc), style="red", markup=False)
        return 1
    lines = sync_summary(stats).split("\n")
    lines[0] = f"Indexed {stats.summary()} -> {kb.index_dir / stats.generation}"
    out.console.print("\n".join(lines), markup=False, highlight=False)
    return 1 if stats.failed else 0


def cmd_sources(args: argparse.Namespace, settings: Settings) -> int:
    """``threadwise sources [--json]`` (see the module docstring).

    Every source is shown whole: a table when it fits the terminal's width, else one block per
    source; one plain line per source (the chat's ``sources`` reply) when stdout is not a
    terminal; ``--json``, one JSON object per source.
    """
    from bot.knowledge import build_knowledge_base
    from bot.sync import sources_table, sources_text

    kb = build_knowledge_base(settings, None, "none")
    if not out.console.is_terminal and not args.json:
        out.console.print(sources_text(kb, schedules(settings)), markup=False, highlight=False)
        return 0
    rows = sources_table(kb, schedules(settings))
    if args.json:
        for r in rows:
            out.console.print(json.dumps(r, ensure_ascii=False), markup=False, highlight=False, soft_wrap=True)
        return 0
    _print_sources(rows)
    return 0


def _print_sources(rows: list[dict]) -> None:
    """``rows`` (:func:`bot.sync.sources_table`) as a table when it fits the terminal whole,
    else one block per source (a long name or error is never cut)."""
    from rich.measure import Measurement
    from rich.table import Table

    from bot.sync import count

    cells = [
        {
            "source": r["name"],
            "type": r["kind"],
            "documents": str(r["documents"]),
            "chunks": str(r["chunks"]),
            "last sync": r["last_sync"] or "never",
            "schedule": r["schedule"] or "-",
            "last error": "; ".join(
                x
                for x in (
                    {"no": "not in the index", "outdated": "outdated in the index"}.get(r.get("indexed", ""), ""),
                    r["last_error"] or (f"{count(len(r['problems']), 'document')} unreadable" if r["problems"] else ""),
                )
                if x
            ),
        }
        for r in rows
    ]
    table = Table(*(cells[0] if cells else ("source", "type", "documents", "chunks", "last sync", "schedule")))
    for c in cells:
        table.add_row(*c.values())
    console = out.console
    # the table's width with no cell wrapped (rich measures within the width it is given)
    if Measurement.get(console, console.options.update_width(1_000_000), table).maximum <= console.width:
        console.print(table)
        return
    for i, c in enumerate(cells):
        if i:
            console.print()
        console.print(f"{c['source']} ({c['type']})", style="bold", markup=False)
        lines = [f"  {key}: {value}" for key, value in c.items() if key not in ("source", "type") and value]
        console.print("\n".join(lines), markup=False, highlight=False)
