"""The terminal consoles of the CLI and the console chat.

Every console is built here with Rich markup interpretation off: messages carry user,
document, model and exception text (``pip install 'threadwise[offline]'``, a config value
``"[sock]"``), and Rich would read ``[...]`` in them as markup and drop it. Style is
given with ``style=`` or :class:`rich.text.Text`, never with markup in the string.
"""

from __future__ import annotations

from rich.console import Console


def make_console(*, stderr: bool = False, quiet: bool = False) -> Console:
    """A Rich console that prints text as it is: no markup, no highlighting, and no
    wrapping at the terminal width (a one-line message stays one line in a log)."""
    return Console(stderr=stderr, quiet=quiet, markup=False, highlight=False, soft_wrap=True)
