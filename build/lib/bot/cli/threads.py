"""``threadwise threads``: list the saved conversations and their checkpoint counts."""

from __future__ import annotations

import argparse

from bot.cli.output import out
from bot.config import Settings


def add_parsers(
    sub: argparse._SubParsersAction, common: argparse.ArgumentParser, source: argparse.ArgumentParser
) -> None:
    """Add ``threads`` to the command parser ``sub``."""
    sub.add_parser("threads", parents=[common], help="list saved threads").set_defaults(handler=cmd_threads)


def cmd_threads(args: argparse.Namespace, settings: Settings) -> int:
    """Print one line per saved thread: its key and number of checkpoints."""
    # the checkpoint libraries (langgraph, psycopg) load only here
    from bot.storage.checkpoints import list_threads

    rows = list_threads(settings)
    if not rows:
        out.console.print("(no threads yet)")
        return 0
    for thread, n in rows:
        out.console.print(f"{thread}  ({n} checkpoints)", markup=False)
    return 0
