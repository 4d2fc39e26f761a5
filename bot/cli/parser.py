"""The ``threadwise`` argument parser: global options, then one sub-command per command module.

Each module in :data:`COMMANDS` has ``add_parsers(sub, common, source)``, which adds its
sub-command(s) with ``set_defaults(handler=...)``: ``handler(args, settings)`` returns the
exit code (or a coroutine that does).
"""

from __future__ import annotations

import argparse

from bot.cli import ask, config, db, discord, evaluation, feedback, graph, learned, models, run, slack, sources, threads

#: The command modules, in the order ``threadwise --help`` lists them.
COMMANDS = (run, ask, sources, graph, evaluation, threads, feedback, learned, config, db, discord, slack, models)


def build_parser() -> argparse.ArgumentParser:
    """The parser of the whole command line (``prog`` "threadwise")."""
    p = argparse.ArgumentParser(prog="threadwise", description="Threadwise: team Q&A bot (adaptive RAG).")
    # --config and -v work before the command and after it (SUPPRESS: an option not given
    # after the command does not overwrite one given before it)
    p.add_argument("--config", help="config.toml to use (default: $THREADWISE_CONFIG or the project's)")
    p.add_argument("-v", "--verbose", action="store_true", help="log every event, with tracebacks (DEBUG)")
    p.add_argument(
        "--log-format",
        choices=["text", "json"],
        help="log lines as text or one JSON object per line (default: [logging] format)",
    )
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", default=argparse.SUPPRESS, help="config.toml to use")
    common.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        default=argparse.SUPPRESS,
        help="log every event, with tracebacks (DEBUG)",
    )
    common.add_argument(
        "--log-format",
        choices=["text", "json"],
        default=argparse.SUPPRESS,
        help="log lines as text or one JSON object per line",
    )
    source = argparse.ArgumentParser(add_help=False)
    source.add_argument(
        "--source", action="append", metavar="DIR", help="knowledge source folder instead of config.toml's (repeatable)"
    )
    sub = p.add_subparsers(dest="command", required=True)
    for module in COMMANDS:
        module.add_parsers(sub, common, source)
    return p
