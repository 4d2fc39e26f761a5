"""``threadwise learned list|forget ID``: the experts' answers the bot saved as knowledge."""

from __future__ import annotations

import argparse
import json
import sys

from bot.cli.output import out
from bot.config import Settings


def add_parsers(
    sub: argparse._SubParsersAction, common: argparse.ArgumentParser, source: argparse.ArgumentParser
) -> None:
    """Add ``learned`` to the command parser ``sub``."""
    lr = sub.add_parser("learned", parents=[common], help="list or remove what the bot learned from experts")
    lr.add_argument("action", choices=["list", "forget"], nargs="?", default="list")
    lr.add_argument("id", type=int, nargs="?", help="the entry to forget")
    lr.add_argument("--json", action="store_true", help="list as JSON lines")
    lr.set_defaults(handler=cmd_learned)


async def cmd_learned(args: argparse.Namespace, settings: Settings) -> int:
    """``threadwise learned list|forget ID``: the experts' answers saved as knowledge, where the
    backend keeps them (the SQLite file, or the database every replica shares); exit code 1
    when the entry to forget does not exist, 2 when its number is missing."""
    if args.action == "forget" and args.id is None:
        out.err.print("Usage: threadwise learned forget ID (the number `threadwise learned list` shows)", markup=False)
        return 2
    from bot.storage import open_learned  # the storage and graphs libraries load only here

    async with open_learned(settings) as store:
        if args.action == "forget":
            if not store.forget(args.id):
                out.err.print(f"There is no learned entry {args.id}.", markup=False)
                return 1
            out.console.print(f"Learned entry {args.id} removed.", markup=False)
            return 0
        entries = store.entries()
    if args.json:
        sys.stdout.write("".join(json.dumps(e.as_dict(), ensure_ascii=False) + "\n" for e in entries))
        return 0
    if not entries:
        out.console.print("No learned entries yet.", markup=False)
    for e in entries:
        out.console.print(
            f"{e.id}: {e.question or '(no question)'}\n    -> {' '.join(e.answer.split())}\n"
            f"    ({e.citation}{'; ' + e.permalink if e.permalink else ''})"
            # where it is used: threads that search all of these (none kept: anywhere, as before)
            + (f"\n    learned on: {', '.join(e.sources)}" if e.sources else ""),
            markup=False,
            highlight=False,
        )
    return 0
