"""``threadwise feedback``: summarise the 👍/👎 votes, or export the voted answers as eval JSONL."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bot.cli.output import out
from bot.config import Settings
from bot.vote_report import export_rows, format_summary, summarise


def add_parsers(
    sub: argparse._SubParsersAction, common: argparse.ArgumentParser, source: argparse.ArgumentParser
) -> None:
    """Add ``feedback`` to the command parser ``sub``."""
    f = sub.add_parser("feedback", parents=[common], help="summarise the 👍/👎 votes on answers")
    f.add_argument("--json", metavar="PATH", help="export the voted answers as eval-shaped JSONL ('-': stdout)")
    f.set_defaults(handler=cmd_feedback)


async def cmd_feedback(args: argparse.Namespace, settings: Settings) -> int:
    """Summarise the 👍/👎 votes (or export them as eval-shaped JSONL with ``--json``)."""
    # the storage libraries (aiosqlite, langgraph, psycopg) load only here
    from bot.storage.sqlite import SqliteBookkeeping

    path = settings.path(settings.service.bookkeeping_db)
    if settings.storage.backend == "postgres":  # replicas: the votes are in the database
        from bot.storage import open_storage

        async with open_storage(settings) as storage:
            rows = await storage.bookkeeping.feedback_rows()
    elif not path.exists():
        rows = []
    else:
        store = await SqliteBookkeeping.open(path)
        try:
            rows = await store.feedback_rows()
        finally:
            await store.close()
    if args.json:
        text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in export_rows(rows))
        if args.json == "-":
            sys.stdout.write(text)
        else:
            Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            Path(args.json).write_text(text, encoding="utf-8")
            out.console.print(f"wrote {len(export_rows(rows))} answers to {args.json}", markup=False)
        return 0
    out.console.print(format_summary(summarise(rows)), markup=False, highlight=False)
    return 0
