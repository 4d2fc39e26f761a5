"""``threadwise reindex``: rebuild the knowledge index (once for all replicas on PostgreSQL)."""

from __future__ import annotations

import argparse
import asyncio

from bot.cli.output import ProgressBar, out
from bot.config import Secrets, Settings


def add_parsers(
    sub: argparse._SubParsersAction, common: argparse.ArgumentParser, source: argparse.ArgumentParser
) -> None:
    """Add ``reindex`` to the command parser ``sub``."""
    sub.add_parser("reindex", parents=[common, source], help="rebuild the knowledge index").set_defaults(
        handler=cmd_reindex
    )


async def cmd_reindex(args: argparse.Namespace, settings: Settings) -> int:
    """Build a new index generation from the sources and make it the current one; exit code 1
    when another replica is reindexing."""
    # the embedding model and the index libraries (torch, onnxruntime) load only here
    from bot.admin import REINDEX_LOCK
    from bot.runtime import build_knowledge_base
    from bot.storage import open_storage
    from graphs.models import build_embeddings

    secrets = Secrets.from_env()
    emb, emb_id = build_embeddings(settings.knowledge.embeddings, settings.models, secrets.mistral_api_key)
    kb = build_knowledge_base(settings, emb, emb_id, args.source)
    if settings.storage.backend == "postgres" and not args.source:  # replicas: once, and recorded for all
        async with open_storage(settings) as storage, storage.bookkeeping.exclusive(REINDEX_LOCK) as ours:
            if not ours:
                out.err.print("A reindex is already running on a replica; try again when it is done.", markup=False)
                return 1
            with ProgressBar() as bar:
                stats = await asyncio.to_thread(kb.reindex, bar)
            await storage.bookkeeping.set_index_generation(stats.generation)
    else:
        with ProgressBar() as bar:
            stats = await asyncio.to_thread(kb.reindex, bar)
    out.console.print(f"Indexed {stats.summary()} -> {kb.index_dir / stats.generation}")
    return 0
