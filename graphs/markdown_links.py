"""Markdown links read the way CommonMark reads them, for turning them into their words.

A regular expression cannot match a link's brackets and parentheses when they nest: an
address with two levels of parentheses (``https://x.test/f(a(b))``), a link around an image
(``[![build](badge.svg)](ci)``), a link text holding brackets (``[[1]](#note)``) or code
(``[`f()`](api)``), a title holding a parenthesis (``[a](u "see (b)")``). A regex that
stops early leaves the rest behind as text (``](ci)``, a stray ``)``), which then shows in
answers. :func:`plain_links` scans instead: brackets and parentheses are counted, code
spans and backslash escapes are skipped, and only a complete link is replaced; anything
that is not one stays as it was. :func:`drop_unusable_targets` scans the same way to drop the
addresses no reader can follow (:mod:`graphs.link_targets`) from a document.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from graphs.link_targets import MAX_URL_CHARS, drop_long_addresses, usable_address

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


# where a scan of an address stops or must look closer: in an address, and in an <address>
_ADDRESS_STOP = re.compile(r"[\\()\x00-\x20]")
_ANGLE_STOP = re.compile(r"[\\<>\n]")
_WHITE = re.compile(r"[\x00-\x20]")  # what ends an address that is not in <>


def _destination(text: str, i: int, reach: int = _MAX_LINK) -> tuple[int, str] | None:
    """The link destination whose ``(`` is at ``text[i]``: ``(index of its closing ")", its
    address)``. The address is in ``<>`` or has balanced parentheses, within ``reach``
    characters of ``i``; an optional title in quotes or parentheses follows it. None when it
    is not a link's destination."""
    n = min(len(text), i + reach)
    j = i + 1
    while j < n and text[j] in " \t\n":
        j += 1
    start = j
    if j < n and text[j] == "<":  # <address with (parentheses) or spaces>
        k = j + 1
        while (m := _ANGLE_STOP.search(text, k, n)) is not None and m.group() == "\\":
            k = m.start() + 2
        if m is None or m.group() != ">":
            return None
        k = m.start()
        url = text[start + 1 : k]
        j = k + 1
    else:
        depth = 0
        while (m := _ADDRESS_STOP.search(text, j, n)) is not None:  # regex-sized steps: a data: URI is megabytes
            j, c = m.start(), m.group()
            if c == "\\":
                j += 2
                continue
            if c == "(":
                depth += 1
                if depth > _MAX_DEPTH:
                    return None
            elif c == ")":
                if depth == 0:
                    break
                depth -= 1
            else:  # white space or a control character
                break
            j += 1
        else:
            j = n
        if depth or j >= n:
            return None
        url = text[start:j]
    if reach > _MAX_LINK:  # a long address: its title, which is words, within the usual bound
        n = min(len(text), j + _MAX_LINK)
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


@dataclass
class _Scan:
    """What a scan of a whole text (:func:`_targets`) knows before it looks at each link:
    ``closes``, the index of the ``]`` closing each ``[`` (:func:`_structure`), and where the
    reads of long addresses stopped (see :func:`link_at`)."""

    closes: dict[int, int]
    far: int = 0  # where the last address read past _MAX_LINK stopped (its link's end, or its run's)
    run_end: int = -1  # the end of the last run of text without white space looked up


def link_at(text: str, i: int, scan: _Scan | None = None) -> Link | None:
    """The inline link or image starting at ``text[i]`` (its ``[`` or the ``!`` before it),
    or None when no complete link starts there.

    ``scan``: a scan of the whole text, link after link in the order of the text: the ``]`` is
    looked up in ``scan.closes`` instead of scanned for, and an address running past
    :data:`_MAX_LINK` is read too, to the end of its run of text without white space, once:
    ``scan.far`` is where the last such read stopped (its link's end, or the run's when it was
    no link), and a link whose address starts before it is not read that way again;
    ``scan.run_end`` is the end of the last run looked up. Either repeated for each ``[a](`` of
    a long run would cost quadratic time."""
    start = i + 1 if text.startswith("![", i) else i
    if start >= len(text) or text[start] != "[":
        return None
    close = _bracket_end(text, start) if scan is None else scan.closes.get(start)
    if close is None or close - start >= _MAX_LINK or text[close + 1 : close + 2] != "(":
        return None
    reach = _MAX_LINK
    if scan is not None:
        if close + 1 > scan.run_end:
            white = _WHITE.search(text, close + 1)
            scan.run_end = white.start() if white else len(text)
        if scan.run_end - (close + 1) >= _MAX_LINK and close + 1 >= scan.far:
            reach, scan.far = scan.run_end - close + 1, scan.run_end
    found = _destination(text, close + 1, reach)
    if found is None:
        return None
    end, url = found
    if scan is not None and reach > _MAX_LINK:  # read up to its ")" only: the next link of the run may be long too
        scan.far = end
    return Link(end + 1, text[start + 1 : close], url, start != i)


# An address shown beside its link's words in an answer: a longer one is tracking or query state
# a reader cannot take in at a glance, so it is named, not shown (:func:`shown_address`).
SHOWN_ADDRESS_CHARS = 300


@dataclass(frozen=True)
class WebLink:
    """A link to a web or mail address, placed in its text's plain form (:func:`web_links`)."""

    words: str  # the link's words as a reader sees them, white space collapsed
    url: str  # its ``http(s)://`` or ``mailto:`` address as written
    start: int  # where its words start in the plain text
    end: int  # where they end


def web_links(text: str, limit: int = 200) -> tuple[str, list[WebLink]]:
    """``text`` (Markdown) in plain form, every link written as its words
    (:func:`plain_links`), and its inline links to ``http(s)://`` and ``mailto:`` addresses
    without spaces, each placed in that plain text, in the order of the text: two links with
    the same words and different addresses are two entries (``[wiki](a)``, later
    ``[wiki](b)``). A relative page link means nothing outside its site and an image is no
    link to follow: neither is listed. At most ``limit`` ``[`` are examined, so the cost stays
    linear in a bounded prefix of links (the rest is plain text only). Never raises."""
    plain: list[str] = []
    size = 0
    links: list[WebLink] = []
    done = 0  # text[:done] is in ``plain``
    at = text.find("[")
    tried = 0
    while at >= 0 and tried < limit:
        tried += 1
        found = link_at(text, at)
        if found is None:
            at = text.find("[", at + 1)
            continue
        url = found.url.strip()
        image = at > 0 and text[at - 1] == "!"
        web = re.match(r"(?:https?://[^\s/]+|mailto:[^\s@]+@)", url, re.I) and not re.search(r"\s", url)
        if web and not image:
            before = plain_links(text[done:at])
            words = plain_links(found.text)
            plain += [before, words]
            size += len(before)
            if " ".join(words.split()):
                links.append(WebLink(" ".join(words.split()), url, size, size + len(words)))
            size += len(words)
            done = found.end
        at = text.find("[", found.end)
    plain.append(plain_links(text[done:]))
    return "".join(plain), links


def shown_address(url: str) -> str:
    """What an answer shows for ``url`` beside its link's words: the address, or for one
    longer than :data:`SHOWN_ADDRESS_CHARS` a note naming its site and length, so the reader
    knows there is a link to open on the page rather than finding none."""
    if len(url) <= SHOWN_ADDRESS_CHARS:
        return url
    site = re.match(r"(?:https?://([^/?#\s]+)|mailto:[^@]*@([^?\s]+))", url, re.I)
    where = next((g for g in site.groups() if g), "") if site else ""
    site_words = f" on {where}" if where else ""
    return f"a {len(url):,}-character address{site_words}, too long to show here: open it on the page"


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


_MARKS = re.compile(r"\\|`|!?\[|<")  # what may start an escape, a code span, a link or an autolink
_PAIRS = re.compile(r"\\|`|\[|\]")  # what the bracket matching looks at
_SPAN = re.compile("\ue002(\\d+)\ue003")  # a code span set aside while addresses are dropped
_MAX_NESTING = 32  # links inside link texts read; deeper ones stay as written


def drop_unusable_targets(text: str) -> str:
    """``text`` (Markdown prose: the caller keeps code blocks out of it) without the addresses
    no reader can follow (:func:`graphs.link_targets.usable_address`: over
    :data:`~graphs.link_targets.MAX_URL_CHARS` characters, no address, ``data:`` or
    ``javascript:``): such a link becomes its text, such an image its alt text, such an
    autolink goes (its words are its address), and so does an address over the limit written
    as words (:func:`graphs.link_targets.drop_long_addresses`). Every other link stays as
    written; code spans and backslash escapes are left as they are. Linear time (a document
    of any shape), never raises."""
    if "[" not in text and "<" not in text and len(text) <= MAX_URL_CHARS:
        return text
    spans: list[str] = []
    kept = drop_long_addresses(_targets(text, spans, 0))
    return _SPAN.sub(lambda m: spans[int(m.group(1))], kept) if spans else kept


def _structure(text: str) -> tuple[dict[int, int], dict[int, int]]:
    """``(closes, code)``: the index of the ``]`` closing each ``[`` and the end of each code
    span by its first backtick, in one pass (escapes and code spans skipped as
    :func:`_bracket_end` skips them). Scanning from each ``[`` instead costs quadratic time on
    a text of many unclosed brackets."""
    closes: dict[int, int] = {}
    code: dict[int, int] = {}
    unclosed: dict[str, int] = {}  # a run of backticks no run of its length closes after this index
    opened: list[int] = []
    i = 0
    while (m := _PAIRS.search(text, i)) is not None:
        j, c = m.start(), m.group()
        if c == "\\":
            i = j + 2
        elif c == "`":
            run = j
            while run < len(text) and text[run] == "`":
                run += 1
            ticks = text[j:run]
            i = run if unclosed.get(ticks, len(text) + 1) <= j else _code_span_end(text, j)
            if i == run:
                unclosed.setdefault(ticks, j)
            else:
                code[j] = i
        else:
            if c == "[":
                opened.append(j)
            elif opened:
                closes[opened.pop()] = j
            i = j + 1
    return closes, code


def _targets(text: str, spans: list[str], nesting: int) -> str:
    """:func:`drop_unusable_targets`' links and autolinks; code spans are replaced by
    ``\\ue002N\\ue003`` (``spans[N]``) so that the addresses written as words around them
    are read whole."""
    closes, code = _structure(text)
    scan = _Scan(closes)
    out: list[str] = []
    i = 0
    while (m := _MARKS.search(text, i)) is not None:
        j, mark = m.start(), m.group()
        out.append(text[i:j])
        i = j + len(mark)
        if mark == "\\":
            out.append(text[j : j + 2])
            i = j + 2
        elif mark == "`":
            i = code.get(j, i)
            if i > j + 1:
                spans.append(text[j:i])
                out.append(f"\ue002{len(spans) - 1}\ue003")
            else:
                out.append(mark)
        elif mark == "<":
            auto = _AUTOLINK.match(text, j)
            if auto is None:
                out.append(mark)
            else:
                out.append(auto.group(0) if usable_address(auto.group(1)) else "")
                i = auto.end()
        else:
            found = link_at(text, j, scan)
            if found is None or nesting >= _MAX_NESTING:
                out.append(mark)
                continue
            words = _targets(found.text, spans, nesting + 1)
            if usable_address(found.url):
                after = j + len(mark) + len(found.text)  # its "]"
                out.append(f"{mark}{words}{text[after : found.end]}")
            else:
                out.append(words)
            i = found.end
    out.append(text[i:])
    return "".join(out)
