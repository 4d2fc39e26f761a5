"""Which link addresses a document keeps: one rule for the crawler, the HTML conversion and
the Markdown cleaning.

A page may link to an address no reader can follow: 70,000 characters of
``http://x/aaaa…`` (a generator's bug, or a page made to flood an index), an address that is
no address (``http://[::1``, a port that is not a number), or the content itself (a
``data:`` URI holding megabytes of base64, ``javascript:``). Kept in a document's text, one
such address becomes dozens of chunks of junk that crowd real text out of searches and
answers. The crawler does not follow them (:func:`graphs.knowledge.connectors.fetch.resolve`,
:data:`MAX_URL_CHARS`); the conversion of HTML (:mod:`graphs.knowledge.convert`) and the
cleaning of Markdown (:func:`graphs.markdown_links.drop_unusable_targets`, called by
:func:`graphs.knowledge.sources.clean_markdown`) drop them by :func:`usable_address` and
:func:`drop_long_addresses`: a link keeps its text, an image its alt text, and an address
standing as words (an autolink, a bare address) goes.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

MAX_URL_CHARS = 8_190
"""Longest address fetched, followed or kept in a document: Apache's default request line
limit (``LimitRequestLine``, https://httpd.apache.org/docs/2.4/mod/core.html#limitrequestline);
a longer address no server is likely to answer (httpx refuses those over 65,536), and as text
it is junk."""

_CONTENT_OR_SCRIPT = re.compile(r"[ \t\n]*(?:data|javascript|vbscript):", re.I)


def usable_address(url: str) -> bool:
    """``url`` is an address a reader can follow: not empty, at most :data:`MAX_URL_CHARS`
    characters, read by :func:`urllib.parse.urlsplit` (a bracketed host closed, a port that is
    a number), and not the content itself (``data:``) or a script (``javascript:``,
    ``vbscript:``). Relative addresses (``../a.md``, ``#part``) and ``mailto:`` are addresses."""
    url = url.strip()
    if not url or len(url) > MAX_URL_CHARS or _CONTENT_OR_SCRIPT.match(url):
        return False
    try:
        urlsplit(url).port  # noqa: B018 - reading it checks it: "http://h:x/" raises ValueError
    except ValueError:
        return False
    return True


# a run of text without white space longer than any address kept (found from its start only:
# one try per run, so a page of long runs costs linear time)
_LONG_RUN = re.compile(rf"(?<!\S)\S{{{MAX_URL_CHARS + 1},}}")
# where an address standing as words starts: a scheme (``https:``, ``data:``) or ``www.``,
# not inside a word
_ADDRESS_START = re.compile(r"(?<![A-Za-z0-9+.-])(?:[A-Za-z][A-Za-z0-9+.-]{1,31}:|www\.)")
# where it ends: white space, or a quote or angle bracket (an HTML attribute's value)
_ADDRESS_END = re.compile(r"[\s\"'<>`]")


def drop_long_addresses(text: str) -> str:
    """``text`` without the addresses over :data:`MAX_URL_CHARS` that stand in it as words:
    a bare ``https://x/aaaa…``, ``www.…`` or ``data:image/png;base64,…`` (also as an HTML
    attribute's value: ``<img src="data:…">`` keeps ``src=""``). Shorter addresses and long
    runs that are no address (a hash, a word of a language without spaces) stay. Linear time."""
    if len(text) <= MAX_URL_CHARS:
        return text
    cuts: list[tuple[int, int]] = []
    for run in _LONG_RUN.finditer(text):
        at, end = run.start(), run.end()
        while (m := _ADDRESS_START.search(text, at, end)) is not None:
            stop = _ADDRESS_END.search(text, m.end(), end)
            start, at = m.start(), stop.start() if stop else end
            if at - start <= MAX_URL_CHARS:
                continue
            cut = len(text[start:at].rstrip(".,;:!?"))  # the sentence's punctuation stays
            if text[start - 1 : start] == "(" and text[start + cut - 1] == ")":
                start -= 1  # "(https://x/aaaa…)" goes whole, not leaving "()"
            cuts.append((start, m.start() + cut))
    if not cuts:
        return text
    out, last = [], 0
    for start, end in cuts:
        out.append(text[last:start])
        last = end
    out.append(text[last:])
    return "".join(out)
