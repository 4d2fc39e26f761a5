"""The terminal consoles of the CLI and the console chat.

Every console is built here to print text as it is: messages carry user, document, model
and exception text (``pip install 'threadwise[offline]'``, a config value ``"[sock]"``), so

- Rich markup is off: Rich would read ``[bold]`` or ``[link=...]`` in them as markup (and
  drop it, or make a link); style is given with ``style=`` or :class:`rich.text.Text`, never
  with markup in the string;
- emoji codes are off: Rich would show a document's ``:x:`` as ❌;
- control characters are removed from every string printed (:func:`terminal_text`): an
  escape sequence in a document could otherwise colour the terminal, move its cursor, or
  hide a link behind words (OSC 8).

In JSON log mode (``[logging] format = "json"``) the CLI's stderr console is a
:class:`JsonLinesConsole`: every line it prints is one JSON object, like the log lines.
"""

from __future__ import annotations

import logging
import re
import sys
from typing import Any

from rich.console import Console
from rich.text import Text

# C0 and C1 control characters but tab and newline: ESC starts every terminal escape sequence
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def terminal_text(text: str) -> str:
    """``text`` without control characters (tab and newline kept), for a terminal."""
    return _CONTROL.sub("", text)


class PlainConsole(Console):
    """A Rich console that removes control characters from every string it renders
    (:func:`terminal_text`); :class:`rich.text.Text` built from outside text is cleaned by
    its maker."""

    def render_str(self, text: str, *args: Any, **kwargs: Any) -> Text:
        return super().render_str(terminal_text(text), *args, **kwargs)


class JsonLinesConsole(PlainConsole):
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
    """A Rich console that prints text as it is: no markup, no emoji codes, no highlighting,
    no control characters, and no wrapping at the terminal width (a one-line message stays
    one line in a log). ``json_lines`` (stderr only): a :class:`JsonLinesConsole` for JSON
    log mode."""
    cls = JsonLinesConsole if json_lines and stderr else PlainConsole
    return cls(stderr=stderr, quiet=quiet, markup=False, emoji=False, highlight=False, soft_wrap=True)
