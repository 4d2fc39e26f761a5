"""What follows an answer's text on every platform: its numbered sources and the route note.

:func:`footer` decides *what* is shown (numbering like the answer's ``[n]`` citations, a
title only when it says more than the location, whether a source is a link, the route
note from :attr:`bot.protocol.Answer.route_note`); each platform only decides *how* (Slack
mrkdwn links and a context block, Discord masked links and ``-#`` subtext, plain lines in
the console), with :func:`render` and its own line format.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from bot.protocol import Answer

SOURCES_HEADING = "Sources"


@dataclass(frozen=True)
class SourceLine:
    """One source as the answer cites it.

    Attributes:
        number: 1 for the answer's ``[1]``.
        location: a URL or a file path.
        title: the source's title when it is not just the location ("" otherwise).
        is_url: ``location`` is a web address (shown as a link).
    """

    number: int
    location: str
    title: str
    is_url: bool

    @property
    def label(self) -> str:
        """The title, else the location."""
        return self.title or self.location


@dataclass(frozen=True)
class Footer:
    """The sources and the route note of an answer (``note`` "" when there is none)."""

    sources: list[SourceLine]
    note: str


def footer(answer: Answer) -> Footer:
    """The parts shown after an answer's text (see :class:`Footer`)."""
    lines = []
    for number, src in enumerate(answer.sources, 1):
        title = src.title.strip()
        lines.append(SourceLine(number, src.location, "" if title == src.location else title, src.is_url))
    return Footer(lines, answer.route_note)


def render(answer: Answer, line: Callable[[SourceLine], str], heading: Callable[[str], str]) -> list[str]:
    """The sources block as lines: ``heading(SOURCES_HEADING)`` then ``line(source)`` for each
    source; ``[]`` when the answer has no sources (the route note is the caller's)."""
    sources = footer(answer).sources
    return [heading(SOURCES_HEADING), *map(line, sources)] if sources else []
