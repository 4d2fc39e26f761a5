"""``threadwise config show-defaults``: config.toml at its defaults, each key with its description.

Needs no (valid) config.toml: it is how one is written. :func:`bot.cli.main.main` runs it
before loading the settings.
"""

from __future__ import annotations

import argparse
import sys

from bot.config_template import render_defaults


def add_parsers(
    sub: argparse._SubParsersAction, common: argparse.ArgumentParser, source: argparse.ArgumentParser
) -> None:
    """Add ``config`` to the command parser ``sub``."""
    cf = sub.add_parser(
        "config", parents=[common], help="config.toml: show-defaults prints every key with its default and description"
    )
    cf.add_argument(
        "action",
        choices=["show-defaults"],
        help="show-defaults: config.toml at its defaults (`threadwise config show-defaults > config.toml`)",
    )
    cf.set_defaults(handler=cmd_config, needs_settings=False)


def cmd_config(args: argparse.Namespace) -> int:
    """Print config.toml at its defaults on stdout."""
    sys.stdout.write(render_defaults())
    return 0
