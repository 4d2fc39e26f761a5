"""The terminal consoles of the CLI and the console chat.

Every console is built here with Rich markup interpretation off: messages carry user,
document, model and exception text (``pip install 'threadwise[offline]'``, a config value
``"[sock]"``), and Rich would read ``[...]`` in them as markup and drop it. Style is
given with ``style=`` or :class:`rich.text.Text`, never with markup in the string.

In JSON log mode (``[logging] format = "json"``) the CLI's stderr console is a
:class:`JsonLinesConsole`: every line it prints is one JSON object, like the log lines.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from rich.console import Console
from rich.text import Text


class JsonLinesConsole(Console):
    """A stderr console whose every ``print`` is one JSON object (:class:`bot.logs.JsonFormatter`:
    ``time``, ``level``, ``logger`` ``"threadwise"``, ``message``). Level ERROR for text printed
    in ``style="red"`` (the CLI's error lines), INFO for the rest (status lines, advice)."""

    def print(self, *objects: Any, sep: str = " ", end: str = "\n", style: Any = None, **_: Any) -> None:
        from bot.logs import JsonFormatter

        text = sep.join(o.plain if isinstance(o, Text) else str(o) for o in objects).strip()
        if not text:
            return
        record = logging.LogRecord(
            "threadwise", logging.ERROR if style == "red" else logging.INFO, __file__, 0, text, None, None
        )
        sys.stderr.write(JsonFormatter().format(record) + "\n")
        sys.stderr.flush()


def make_console(*, stderr: bool = False, quiet: bool = False, json_lines: bool = False) -> Console:
    """A Rich console that prints text as it is: no markup, no highlighting, and no
    wrapping at the terminal width (a one-line message stays one line in a log).
    ``json_lines`` (stderr only): a :class:`JsonLinesConsole` for JSON log mode."""
    cls = JsonLinesConsole if json_lines and stderr else Console
    return cls(stderr=stderr, quiet=quiet, markup=False, highlight=False, soft_wrap=True)
