"""Sitemaps for the web source: the page addresses a ``sitemap.xml`` (or a sitemap index) lists.

Limits are the protocol's (https://www.sitemaps.org/protocol.html, "Sitemap file location"
and "Using Sitemap index files"): a sitemap or sitemap index holds at most 50,000 entries
and 50 MB (52,428,800 bytes) uncompressed; a gzipped one (``sitemap.xml.gz``, recognised by
its bytes, whatever its name or type) is decompressed up to that size and no further. On
top of those, one sync reads each sitemap once (an index listing itself, or two listing
each other, cost one request each), at most :data:`MAX_SITEMAP_FILES` sitemap files, an
index at most :data:`MAX_INDEX_DEPTH` levels deep, and stops reading once it has enough
pages for ``max_pages``. Only ``<loc>`` entries directly under ``<url>`` or ``<sitemap>``
count (an image sitemap's ``<image:loc>`` is not a page). Plain-text sitemaps are not read.
"""

from __future__ import annotations

import io
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import cast
from urllib.parse import urljoin
from xml.etree import ElementTree

from graphs.knowledge.connectors.fetch import Fetcher, PageError, gunzip, normalise

MAX_SITEMAP_BYTES = 52_428_800
"""Largest sitemap, uncompressed (sitemaps.org: 50 MB, 52,428,800 bytes)."""
MAX_SITEMAP_ENTRIES = 50_000
"""Most addresses read from one sitemap or sitemap index (sitemaps.org: 50,000)."""
MAX_SITEMAP_FILES = 100
"""Most sitemap files read per sync (an index of indexes cannot make a sync endless)."""
MAX_INDEX_DEPTH = 3
"""Levels of sitemap indexes followed below the first sitemap (the protocol itself allows one)."""

_TOO_LARGE = f"larger than {MAX_SITEMAP_BYTES / 2**20:g} MB uncompressed (the sitemaps.org limit)"


class SitemapError(PageError):
    """A sitemap cannot be read. ``gone`` says the server answered 404 or 410."""

    def __init__(self, message: str, gone: bool = False) -> None:
        super().__init__(message)
        self.gone = gone


def parse(body: bytes) -> tuple[bool, list[str], bool]:
    """Read one sitemap's bytes (gzip or not).

    Returns:
        ``(is_index, addresses as written, cut)``: ``cut`` when it listed more than
        :data:`MAX_SITEMAP_ENTRIES` (only the first ones are returned).

    Raises:
        SitemapError: not XML, not a sitemap, or over :data:`MAX_SITEMAP_BYTES` uncompressed.
    """
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
    stream = io.BytesIO(body)
    try:
        while chunk := stream.read(1 << 20):
            parser.feed(chunk)
            for item in parser.read_events():
                # ("start" | "end", element): the only events asked for
                event, el = cast(tuple[str, ElementTree.Element], item)
                name = el.tag.rsplit("}", 1)[-1]
                if event == "start":
                    depth += 1
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
    while queue and len(pages) < enough:
        url, depth = queue.popleft()
        if read == MAX_SITEMAP_FILES:
            problem(url, f"not read: {MAX_SITEMAP_FILES} sitemaps read this sync already ({len(queue) + 1} left)")
            break
        read += 1
        try:
            resp = fetcher.get(url, limit=MAX_SITEMAP_BYTES, too_large=_TOO_LARGE)
            if resp.status != 200:
                raise SitemapError(f"HTTP {resp.status}", gone=resp.status in (404, 410))
            is_index, locs, cut = parse(resp.body)
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
        keyed = [fetcher.scope.key(normalise(urljoin(url, loc))) for loc in locs]
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
