"""The ``threadwise`` command line, one module per command group (:mod:`bot.cli.parser` lists them).

Heavy libraries (langgraph, the model and embedding libraries, slack-bolt, discord.py,
psycopg) are imported inside the commands that need them, so ``--help``, ``config`` and
argument errors answer at once and a Ctrl-C during start-up stays one line.
"""

from bot.cli.main import main

__all__ = ["main"]
