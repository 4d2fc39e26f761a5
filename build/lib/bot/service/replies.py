"""What a message in a thread says to the bot besides a question: ``remember: ...``, or an
expert's reply to a help request (its syntax is shown and parsed in one place,
:mod:`bot.chat.text`: ``REPLY_SYNTAX``, ``parse_human_reply``)."""

from __future__ import annotations

import re

from bot.chat.text import REPLY_SYNTAX

REMEMBER_RE = re.compile(r"^\s*/?remember\s*:\s*(\S.*)$", re.I | re.S)

REPLY_HINT = f"This thread is waiting for an expert. Reply with {REPLY_SYNTAX}."


def parse_remember(text: str) -> str | None:
    """The text of a ``remember: <text>`` message (also ``/remember:``), else None."""
    m = REMEMBER_RE.match(text)
    return m.group(1).strip() if m else None
