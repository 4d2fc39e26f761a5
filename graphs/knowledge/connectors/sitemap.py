"""Sitemaps for the web source: the page addresses a ``sitemap.xml`` (or a sitemap index) lists.

Limits are the protocol's (https://www.sitemaps.org/protocol.html, "Sitemap file location"
and "Using Sitemap index files"): a sitemap or sitemap index holds at most 50,000 entries
and 50 MB (52,428,800 bytes) uncompressed; a gzipped one (``sitemap.xml.gz``, recognised by
its bytes, whatever its name or type) is decompressed up to that size and no further. On
top of those, one sync reads each sitemap once (an index listing itself, or two listing
each other, cost one request each), at most :data:`MAX_SITEMAP_FILES` sitemap files, an
index at most :data:`MAX_INDEX_DEPTH` levels deep, and stops reading once it has enough
pages for ``max_pages``. Only ``<loc>`` entries directly under ``<url>`` or ``<sitemap>``
count (an image sitemap's ``<image:loc>`` is not a page). Junk XML within the size limit
(millions of empty or nested elements) is refused early: elements at most
:data:`MAX_ELEMENT_DEPTH` deep, at most :data:`MAX_ENTRY_ELEMENTS` in one entry, one parse
at most :data:`MAX_PARSE_SECONDS`, all the sitemaps of a sync at most
:data:`MAX_SITEMAPS_SECONDS`. Plain-text sitemaps are not read.
"""

from __future__ import annotations

import io
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import cast
from xml.etree import ElementTree

from graphs.knowledge.connectors.fetch import Fetcher, PageError, gunzip, resolve

MAX_SITEMAP_BYTES = 52_428_800
"""Largest sitemap, uncompressed (sitemaps.org: 50 MB, 52,428,800 bytes)."""
MAX_SITEMAP_ENTRIES = 50_000
"""Most addresses read from one sitemap or sitemap index (sitemaps.org: 50,000)."""
MAX_SITEMAP_FILES = 100
"""Most sitemap files read per sync (an index of indexes cannot make a sync endless)."""
MAX_INDEX_DEPTH = 3
"""Levels of sitemap indexes followed below the first sitemap (the protocol itself allows one)."""
MAX_ELEMENT_DEPTH = 12
"""Deepest element nesting read (``<urlset><url><loc>`` is 3 deep; image, video and news
extensions reach 5): deeper is not a sitemap."""
MAX_ENTRY_ELEMENTS = 10_000
"""Most elements inside one ``<url>`` or ``<sitemap>`` (an image sitemap may list 1,000
images of a page, a few elements each): more is not a sitemap, and the elements of one
entry are held until it closes."""
MAX_PARSE_SECONDS = 10.0
"""Longest one sitemap's parse may take (50,000 entries parse in about a second)."""
MAX_SITEMAPS_SECONDS = 300.0
"""Longest the sitemaps of one sync may take together, fetching and parsing (the sync
holds its lock meanwhile); the sitemaps not read by then are one problem line."""

_TOO_LARGE = f"larger than {MAX_SITEMAP_BYTES / 2**20:g} MB uncompressed (the sitemaps.org limit)"


class SitemapError(PageError):
    """A sitemap cannot be read. ``gone`` says the server answered 404 or 410."""

    def __init__(self, message: str, gone: bool = False) -> None:
        super().__init__(message)
        self.gone = gone


def parse(body: bytes, seconds: float = MAX_PARSE_SECONDS) -> tuple[bool, list[str], bool]:
    """Read one sitemap's bytes (gzip or not), in at most ``seconds``.

    Returns:
        ``(is_index, addresses as written, cut)``: ``cut`` when it listed more than
        :data:`MAX_SITEMAP_ENTRIES` (only the first ones are returned).

    Raises:
        SitemapError: not XML, not a sitemap (elements deeper than :data:`MAX_ELEMENT_DEPTH`,
            an entry of over :data:`MAX_ENTRY_ELEMENTS` elements), over
            :data:`MAX_SITEMAP_BYTES` uncompressed, or not read in ``seconds``.
    """
    deadline = time.monotonic() + seconds
    if body[:2] == b"\x1f\x8b":
        try:
            body = gunzip(body, MAX_SITEMAP_BYTES, _TOO_LARGE)
        except PageError as exc:
            raise SitemapError(str(exc)) from exc
    parser: ElementTree.XMLPullParser[ElementTree.Element] = ElementTree.XMLPullParser(events=("start", "end"))
    root: ElementTree.Element | None = None
    is_index = False
    locs: list[str] = []
    depth = 0
    entries = 0
    in_entry = 0  # elements read inside the current <url> or <sitemap>
    stream = io.BytesIO(body)
    try:
        # 64 KB at a time: a piece of junk XML (empty elements) makes at most ~10,000 events
        # between two looks at the clock
        while chunk := stream.read(1 << 16):
            if time.monotonic() > deadline:
                raise SitemapError(f"not read in {seconds:g} s (junk XML?)")
            parser.feed(chunk)
            for item in parser.read_events():
                # ("start" | "end", element): the only events asked for
                event, el = cast(tuple[str, ElementTree.Element], item)
                name = el.tag.rsplit("}", 1)[-1]
                if event == "start":
                    depth += 1
                    if depth > MAX_ELEMENT_DEPTH:
                        raise SitemapError(f"not a sitemap (elements nested over {MAX_ELEMENT_DEPTH} deep)")
                    if depth > 2:
                        in_entry += 1
                        if in_entry > MAX_ENTRY_ELEMENTS:
                            raise SitemapError(f"not a sitemap (an entry of over {MAX_ENTRY_ELEMENTS:,} elements)")
                    if root is None:
                        root, is_index = el, name == "sitemapindex"
                        if name not in ("urlset", "sitemapindex"):
                            raise SitemapError(f"not a sitemap (its root element is <{name}>)")
                    continue
                depth -= 1
                if depth == 2 and name == "loc":  # <urlset><url><loc>
                    locs.append((el.text or "").strip())
                    if len(locs) > MAX_SITEMAP_ENTRIES:
                        return is_index, locs[:MAX_SITEMAP_ENTRIES], True
                elif depth == 1 and root is not None:
                    root.clear()  # a <url> read: its elements are not needed any more
                    in_entry = 0
                    entries += 1  # with or without a <loc>: the protocol's 50,000 counts entries
                    if entries > MAX_SITEMAP_ENTRIES:
                        return is_index, [loc for loc in locs if loc][:MAX_SITEMAP_ENTRIES], True
        parser.close()
    except ElementTree.ParseError as exc:
        raise SitemapError(f"not XML ({exc})") from exc
    if root is None:
        raise SitemapError("empty")
    return is_index, [loc for loc in locs if loc], False


def read_sitemaps(
    fetcher: Fetcher,
    start: str,
    *,
    in_scope: Callable[[str], bool],
    enough: int,
    last: Mapping[str, Sequence[str]],
    problem: Callable[[str, str], None],
) -> tuple[list[str], dict[str, list[str]]]:
    """The pages listed by the sitemap ``start`` and the sitemaps it leads to.

    Args:
        fetcher: reads the sitemaps (its scope says which are on the site).
        start: the first sitemap's address.
        in_scope: which page addresses to keep.
        enough: stop reading sitemaps once this many pages are listed (``max_pages``).
        last: ``{sitemap address: its pages}`` from the last sync; a sitemap below
            ``start`` that cannot be read now (500, too slow) lists them again.
        problem: called ``(address, why)`` for each sitemap below ``start`` that cannot be
            read or was cut.

    Returns:
        ``(pages, {sitemap address: its pages})``: each page once, in sitemap order.

    Raises:
        SitemapError: ``start`` itself cannot be read.
    """
    pages: dict[str, None] = {}
    files: dict[str, list[str]] = {}
    queue = deque([(start, 0)])
    queued = {start}
    read = 0
    deadline = time.monotonic() + MAX_SITEMAPS_SECONDS
    while queue and len(pages) < enough:
        url, depth = queue.popleft()
        if read == MAX_SITEMAP_FILES:
            problem(url, f"not read: {MAX_SITEMAP_FILES} sitemaps read this sync already ({len(queue) + 1} left)")
            _keep_unread(files, pages, last, fetcher, in_scope)
            break
        left = deadline - time.monotonic()
        if left <= 0:
            problem(
                url,
                f"not read: the sitemaps of this sync took {MAX_SITEMAPS_SECONDS:g} s already ({len(queue) + 1} left)",
            )
            _keep_unread(files, pages, last, fetcher, in_scope)
            break
        read += 1
        try:
            resp = fetcher.get(url, limit=MAX_SITEMAP_BYTES, too_large=_TOO_LARGE)
            if resp.status != 200:
                raise SitemapError(f"HTTP {resp.status}", gone=resp.status in (404, 410))
            is_index, locs, cut = parse(resp.body, min(MAX_PARSE_SECONDS, max(left, 0.1)))
        except PageError as exc:
            if url == start and isinstance(exc, SitemapError):
                raise
            if url == start:
                raise SitemapError(str(exc)) from exc
            kept = [] if getattr(exc, "gone", False) else list(last.get(url) or [])
            problem(url, f"{exc}" + (f" (its {len(kept)} pages of the last sync kept)" if kept else ""))
            listed = [k for k in (fetcher.scope.key(u) for u in kept) if k and in_scope(k)]
            files[url] = listed
            pages.update(dict.fromkeys(listed))
            continue
        if cut:
            problem(url, f"lists over {MAX_SITEMAP_ENTRIES:,} addresses: the first {MAX_SITEMAP_ENTRIES:,} read")
        keyed = [fetcher.scope.key(u) if (u := resolve(url, loc)) else None for loc in locs]
        if is_index:
            for child in keyed:
                if child and child not in queued and depth < MAX_INDEX_DEPTH:
                    queued.add(child)
                    queue.append((child, depth + 1))
            continue
        listed = [k for k in dict.fromkeys(keyed) if k and in_scope(k)]
        files[url] = listed
        pages.update(dict.fromkeys(listed))
    return list(pages), files


def _keep_unread(
    files: dict[str, list[str]],
    pages: dict[str, None],
    last: Mapping[str, Sequence[str]],
    fetcher: Fetcher,
    in_scope: Callable[[str], bool],
) -> None:
    """The sitemaps of the last sync not read at this one (a limit stopped the reading): their
    pages are listed again, so stopping early removes nothing."""
    for url, listed in last.items():
        if url not in files:
            kept = [k for k in (fetcher.scope.key(u) for u in listed) if k and in_scope(k)]
            files[url] = kept
            pages.update(dict.fromkeys(kept))
