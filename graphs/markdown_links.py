"""Markdown links read the way CommonMark reads them, for turning them into their words.

A regular expression cannot match a link's brackets and parentheses when they nest: an
address with two levels of parentheses (``https://x.test/f(a(b))``), a link around an image
(``[![build](badge.svg)](ci)``), a link text holding brackets (``[[1]](#note)``) or code
(``[`f()`](api)``), a title holding a parenthesis (``[a](u "see (b)")``). A regex that
stops early leaves the rest behind as text (``](ci)``, a stray ``)``), which then shows in
answers. :func:`plain_links` scans instead: brackets and parentheses are counted, code
spans and backslash escapes are skipped, and only a complete link is replaced; anything
that is not one stays as it was.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# <https://x>, <mailto:a@b>, <a@b.example>: CommonMark autolinks (the scheme is 2-32 characters);
# not one holding "|": ``<https://x|label>`` is Slack's masked link, kept as written (shown as text)
_AUTOLINK = re.compile(r"<([A-Za-z][A-Za-z0-9+.-]{1,31}:[^\s<>|]*|[\w.!#$%&'*+/=?^`{|}~-]+@[\w-]+(?:\.[\w-]+)+)>")
_MAX_LINK = 4000  # characters one link may span (a longer "link" is prose with a stray bracket)
_MAX_DEPTH = 32  # nested parentheses in an address (CommonMark's limit)


def _code_span_end(text: str, i: int) -> int:
    """The end of the code span opening at ``text[i]`` (a backtick run), or the end of the
    run when no run of the same length closes it (then the backticks are literal)."""
    run = i
    while run < len(text) and text[run] == "`":
        run += 1
    ticks = text[i:run]
    j = run
    while True:
        j = text.find(ticks, j)
        if j < 0:
            return run
        k = j + len(ticks)
        if k < len(text) and text[k] == "`":  # a longer run does not close it
            while k < len(text) and text[k] == "`":
                k += 1
            j = k
            continue
        return k


def _bracket_end(text: str, i: int) -> int | None:
    """The index of the ``]`` that closes the ``[`` at ``text[i]`` (nested brackets, escapes
    and code spans skipped), or None."""
    depth = 0
    j = i
    limit = min(len(text), i + _MAX_LINK)
    while j < limit:
        c = text[j]
        if c == "\\":
            j += 2
            continue
        if c == "`":
            j = _code_span_end(text, j)
            continue
        if c == "[":
            depth += 1
        elif c == "]":
            depth -= 1
            if depth == 0:
                return j
        j += 1
    return None


def _destination(text: str, i: int) -> tuple[int, str] | None:
    """The link destination whose ``(`` is at ``text[i]``: ``(index of its closing ")", its
    address)``. The address is in ``<>`` or has balanced parentheses; an optional title in
    quotes or parentheses follows it. None when it is not a link's destination."""
    n = min(len(text), i + _MAX_LINK)
    j = i + 1
    while j < n and text[j] in " \t\n":
        j += 1
    start = j
    if j < n and text[j] == "<":  # <address with (parentheses) or spaces>
        k = j + 1
        while k < n and text[k] not in "<>\n":
            k += 2 if text[k] == "\\" else 1
        if k >= n or text[k] != ">":
            return None
        url = text[start + 1 : k]
        j = k + 1
    else:
        depth = 0
        while j < n:
            c = text[j]
            if c == "\\":
                j += 2
                continue
            if c in " \t\n" or ord(c) < 32:
                break
            if c == "(":
                depth += 1
                if depth > _MAX_DEPTH:
                    return None
            elif c == ")":
                if depth == 0:
                    break
                depth -= 1
            j += 1
        if depth or j >= n:
            return None
        url = text[start:j]
    while j < n and text[j] in " \t\n":
        j += 1
    if j < n and text[j] in "\"'(" and text[j - 1] in " \t\n":  # a title
        close = ")" if text[j] == "(" else text[j]
        k = j + 1
        while k < n and text[k] != close:
            k += 2 if text[k] == "\\" else 1
        if k >= n:
            return None
        j = k + 1
        while j < n and text[j] in " \t\n":
            j += 1
    return (j, url) if j < n and text[j] == ")" else None


@dataclass(frozen=True)
class Link:
    """An inline link or image as :func:`link_at` found it."""

    end: int  # the index just past its ")"
    text: str  # its text (an image's alt text) as written, nested links and code included
    url: str  # its address as written (without the <> of the <address> form)
    image: bool  # ``![alt](src)``


def link_at(text: str, i: int) -> Link | None:
    """The inline link or image starting at ``text[i]`` (its ``[`` or the ``!`` before it),
    or None when no complete link starts there."""
    start = i + 1 if text.startswith("![", i) else i
    if start >= len(text) or text[start] != "[":
        return None
    close = _bracket_end(text, start)
    if close is None or close + 1 >= len(text) or text[close + 1] != "(":
        return None
    found = _destination(text, close + 1)
    if found is None:
        return None
    end, url = found
    return Link(end + 1, text[start + 1 : close], url, start != i)


def plain_links(text: str, autolinks: bool = True) -> str:
    """``text`` (Markdown) with every inline link and image written as its words: a link as
    its text, an image as its alt text (so a badge link ``[![build](b.svg)](ci)`` reads
    ``build``), nested ones unwrapped, and (``autolinks``) an autolink ``<https://x>`` as
    its address. Code spans and backslash escapes are kept as they are, as is every
    bracket, parenthesis or ``<`` that does not make a complete link. Never raises."""
    if "[" not in text and "<" not in text:
        return text
    out: list[str] = []
    i = 0
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            out.append(text[i : i + 2])
            i += 2
        elif c == "`":
            j = _code_span_end(text, i)
            out.append(text[i:j])
            i = j
        elif c in "[!":
            found = link_at(text, i)
            if found is None:
                out.append(c)
                i += 1
            else:
                out.append(plain_links(found.text, autolinks))
                i = found.end
        elif c == "<" and autolinks and (m := _AUTOLINK.match(text, i)):
            out.append(m.group(1))
            i = m.end()
        else:
            out.append(c)
            i += 1
    return "".join(out)


def link_texts(line: str, separators: str = " \t|·•,;–-") -> list[str] | None:
    """The words of each link and image of ``line`` when the line holds nothing else (only
    ``separators`` between them), else None. A badge row or a navigation line holds only
    links; a sentence does not. Texts are unwrapped as :func:`plain_links` does."""
    texts: list[str] = []
    i = 0
    n = len(line)
    while i < n:
        if line[i] in separators:
            i += 1
            continue
        found = link_at(line, i)
        if found is None:
            return None
        texts.append(plain_links(found.text).strip())
        i = found.end
    return texts if texts else None
