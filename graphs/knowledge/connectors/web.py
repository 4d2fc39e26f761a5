"""``type = "web"``: a website from a start page or a ``sitemap.xml``.

The crawl stays on the start URL's host and port (``http`` and ``https`` of it are one site:
after a redirect to ``https`` the whole site is read over ``https``) and below ``prefix``
when one is set, honours ``robots.txt`` (the standard library's parser, user agent
``Threadwise``) for every address and every redirect hop, stops at ``max_depth`` links from
the start and at ``max_pages`` pages, follows at most 5 redirects per page (a loop is a
problem of that page), reads each page's ``<link rel="canonical">`` (two addresses of one
page are one document; tracking parameters such as ``utm_source`` are dropped from every
address), skips what is not HTML, and cuts a page that is larger than ``max_page_bytes`` or
takes longer than ``timeout_seconds`` from connection to last byte (a page that never ends,
a server sending its headers one byte a second): :mod:`.fetch`. Sitemaps: :mod:`.sitemap`.

Unchanged pages cost a conditional request: the last ``ETag`` and ``Last-Modified`` are sent
back, and a ``304`` keeps the document; the links of each page are saved with it, so the
crawl goes on through a page that answered 304, and through one that failed for now (5xx,
too slow): what was reachable through it at the last sync is checked again, not dropped.
"""

from __future__ import annotations

import hashlib
import html as html_lib
import logging
import re
import urllib.robotparser
from collections import deque
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpx

from graphs.knowledge.connectors.base import Document, Listing, ScanProgress, SourceError
from graphs.knowledge.connectors.fetch import Disallowed, Fetcher, PageError, Scope, normalise, resolve
from graphs.knowledge.connectors.sitemap import SitemapError, read_sitemaps
from graphs.knowledge.convert import HTML_READERS, ConversionError, convert, decode_html

log = logging.getLogger(__name__)

ROBOTS_AGENT = "Threadwise"
MAX_ROBOTS_BYTES = 512_000
"""robots.txt bytes read, the rest ignored (RFC 9309 section 2.5: a crawler reads at least 500 KiB)."""
DISALLOW_ALL = ("User-agent: *", "Disallow: /")

__all__ = ["PageError", "WebConnector", "normalise"]


class Robots:
    """robots.txt of each origin the crawl reads (the ``http`` and ``https`` of a site may
    differ), fetched once per sync on first use, read as RFC 9309
    (https://www.rfc-editor.org/rfc/rfc9309) section 2.3.1 says:

    - 2xx: its rules (a 2xx other than 200 has no body: no rules, every page allowed).
    - 401, 403: nothing may be read (the standard library's reading, kept: a site that
      locks its robots.txt away is not crawled).
    - other 4xx ("unavailable", 2.3.1.3): every page allowed, as with no robots.txt.
    - 429, 5xx, too slow, no connection, a redirect loop or off the site ("unreachable",
      2.3.1.4; 429 is a server asking to slow down, not a missing file): the rules read at
      the last sync (2.4 lets a crawler use a cached copy); with none, nothing is read this
      sync (2.3.1.4: "assume complete disallow"; :attr:`unreachable` says which, for the
      sync report).

    Only what was read this sync (2xx, 4xx) is kept as :attr:`rules` for the next sync: a
    failure never replaces the last good rules.

    Args:
        fetcher: reads the robots.txt files.
        source: the source's name (log lines).
        last: :attr:`rules` of the last sync.
    """

    def __init__(
        self,
        fetcher: Fetcher,
        source: str,
        last: Mapping[str, list[str]],
    ) -> None:
        self._fetcher = fetcher
        self._source = source
        self._last = last
        self._parsers: dict[str, urllib.robotparser.RobotFileParser] = {}
        self.unreachable: dict[str, str] = {}
        """``{origin: why}`` of the origins read nothing of this sync: robots.txt unreachable,
        no copy known."""
        self.rules: dict[str, list[str]] = {}
        """``{origin: the lines parsed}`` of this sync, for the next one (only what was read)."""

    def allowed(self, url: str) -> bool:
        """Whether robots.txt lets user agent ``Threadwise`` read ``url``."""
        p = urlsplit(url)
        origin = f"{p.scheme}://{p.netloc}"
        if origin not in self._parsers:
            self._read(origin)
        return self._parsers[origin].can_fetch(ROBOTS_AGENT, url)

    def _read(self, origin: str) -> None:
        """Read ``origin``'s robots.txt; kept for ``origin`` and, when it redirected to
        another origin of the site (http -> https), for that one too."""
        lines: list[str] | None
        why, also, remember = "", origin, True
        try:
            resp = self._fetcher.get(origin + "/robots.txt", limit=MAX_ROBOTS_BYTES, cut=True)
        except PageError as exc:
            lines, why = None, str(exc)
        else:
            if resp.status in (401, 403):
                lines = list(DISALLOW_ALL)
            elif 200 <= resp.status < 300:
                lines = resp.body.decode("utf-8", "replace").splitlines()
            elif 400 <= resp.status < 500 and resp.status != 429:  # unavailable: no rules
                lines = []
            else:  # 429, 5xx, anything else: unreachable
                lines, why = None, f"HTTP {resp.status}"
            final = urlsplit(resp.url)
            also = f"{final.scheme}://{final.netloc}"
        if lines is None:
            also, remember = origin, False
            if origin in self._last:
                log.info("source %s: %s/robots.txt unreachable (%s): last sync's used", self._source, origin, why)
                lines = list(self._last[origin])
                self.rules[origin] = lines  # still the last good rules at the next sync
            else:
                log.info("source %s: %s/robots.txt unreachable (%s): nothing read", self._source, origin, why)
                lines = list(DISALLOW_ALL)
                self.unreachable[origin] = why
        rp = urllib.robotparser.RobotFileParser(origin + "/robots.txt")
        rp.parse(lines)
        for key in (origin, also):
            self._parsers.setdefault(key, rp)
            if remember:
                self.rules.setdefault(key, lines)


class WebConnector:
    """Documents from a website.

    Args:
        name: the source's name.
        url: the start page, or a ``sitemap.xml`` (or ``.xml.gz``: then its pages, and no link following).
        max_depth: links followed from the start page (0 = the start page only).
        max_pages: most pages read per sync.
        prefix: only addresses whose path starts with this (default: the whole host).
        timeout_seconds: the longest one page (or robots.txt, or sitemap) may take,
            connection to last byte, redirects included.
        max_page_bytes: a larger page is cut off and skipped (sitemaps have their own
            limit, :data:`.sitemap.MAX_SITEMAP_BYTES`).
        follow_links: follow links from pages (default: yes for a start page, no for a sitemap).
        transport: an httpx transport (tests; None = the network, with the deadline).

    Raises:
        SourceError: ``url`` is not an http(s) address.
    """

    kind = "web"
    readers = HTML_READERS

    def __init__(
        self,
        name: str,
        url: str,
        *,
        max_depth: int = 3,
        max_pages: int = 500,
        prefix: str = "",
        timeout_seconds: float = 20.0,
        max_page_bytes: int = 5_000_000,
        follow_links: bool | None = None,
        transport: httpx.BaseTransport | None = None,
    ):
        self.name = name
        self.url = normalise(url)
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise SourceError(f"source {name}: url must be an http(s) address, got {url!r}")
        self.prefix_path = urlsplit(normalise(urljoin(self.url, prefix))).path if prefix else "/"
        self.is_sitemap = parts.path.lower().endswith((".xml", ".xml.gz"))
        self.follow_links = (not self.is_sitemap) if follow_links is None else follow_links
        self.max_depth = max_depth
        self.max_pages = max_pages
        self.timeout_seconds = timeout_seconds
        self.max_page_bytes = max_page_bytes
        self._transport = transport

    def describe(self) -> str:
        if self.follow_links and not self.is_sitemap:
            return f"{self.url} (depth {self.max_depth}, at most {self.max_pages} pages)"
        # no crawl depth where no link is followed (a sitemap lists its pages)
        what = "sitemap" if self.is_sitemap else "links not followed"
        depth = f", links followed to depth {self.max_depth}" if self.follow_links else ""
        return f"{self.url} ({what}{depth}, at most {self.max_pages} pages)"

    def in_scope(self, url: str) -> bool:
        """Whether ``url`` (keyed by the crawl's :class:`.fetch.Scope`) is under ``prefix``."""
        path = urlsplit(url).path
        return path.startswith(self.prefix_path) or path + "/" == self.prefix_path

    # ---- the crawl -----------------------------------------------------------------
    def scan(self, known: Mapping[str, str], state: Mapping[str, Any], progress: ScanProgress | None = None) -> Listing:
        """See :meth:`graphs.knowledge.connectors.base.Connector.scan`. ``state["pages"]`` maps
        each address read to its validators, its document id and its links;
        ``state["sitemaps"]`` each sitemap read to its pages, ``state["robots"]`` each
        origin to its robots.txt lines. The pages are fetched as the
        stream of changed documents is read, one at a time (like the files and git
        sources), so a sync holds a batch of pages, not the site.

        Raises:
            SourceError: (from the stream) the start page or the sitemap cannot be read at all.
        """
        out = Listing()
        out.changed = self._crawl(known, state, out, progress)
        return out

    def _crawl(
        self, known: Mapping[str, str], state: Mapping[str, Any], out: Listing, progress: ScanProgress | None
    ) -> Iterator[Document]:
        """The new and changed pages, fetched as they are asked for; fills ``out`` (kept ids,
        problems, skipped pages, and last ``out.state``) on the way."""
        old_pages: dict[str, dict[str, Any]] = dict(state.get("pages") or {})
        pages: dict[str, dict[str, Any]] = {}
        sitemaps: dict[str, list[str]] = {}
        seen_docs: set[str] = set()
        hashes: dict[str, str] = {}  # address read this sync -> sha256 of its body
        differing: dict[str, list[str]] = {}  # canonical address -> pages naming it but different
        deferred: set[str] = set()  # pages read again after their canonical address
        scope = Scope(self.url)
        with Fetcher(scope, self.timeout_seconds, self._transport) as fetcher:
            robots = Robots(
                fetcher,
                self.name,
                state.get("robots") or {},
            )
            start = scope.key(self.url) or self.url
            queue: deque[tuple[str, int]]
            if self.is_sitemap:
                try:
                    listed, sitemaps = read_sitemaps(
                        fetcher,
                        start,
                        in_scope=self.in_scope,
                        enough=self.max_pages,
                        last=state.get("sitemaps") or {},
                        problem=lambda url, why: out.problem(self.name, f"sitemap {url}", why),
                    )
                except SitemapError as exc:
                    raise SourceError(f"source {self.name}: sitemap {start}: {exc}") from exc
                queue = deque((u, 0) for u in listed)
            else:
                queue = deque([(start, 0)])
            queued = {u for u, _ in queue}
            done: set[str] = set()
            fetched = 0
            start_failed: str | None = None
            while queue and fetched < self.max_pages:
                url, depth = queue.popleft()
                url = scope.key(url) or url  # the site may have moved to https since it was queued
                if url in done:
                    continue
                done.add(url)
                if not robots.allowed(url):
                    parts = urlsplit(url)
                    blocked = robots.unreachable.get(f"{parts.scheme}://{parts.netloc}")
                    if url == start and not self.is_sitemap and blocked:
                        # nothing of the site can be read now: the source fails (its last good
                        # documents stay) instead of a sync that reads nothing and reports success
                        if not blocked.startswith("cannot connect"):
                            blocked = f"robots.txt {blocked}, never read before: nothing may be read (RFC 9309 2.3.1.4)"
                        raise SourceError(f"source {self.name}: start page {self.url}: {blocked}")
                    out.skip(self.name, url, "robots.txt")
                    continue
                moved = scope.key(url) or url  # reading robots.txt may have moved the site (a redirect)
                if moved != url:
                    if moved in done:
                        continue
                    url = moved
                    done.add(url)
                fetched += 1
                if progress is not None:
                    progress(fetched, min(self.max_pages, fetched + len(queue)))
                old = old_pages.get(url) or {}
                headers = {}
                if old.get("id") in known:
                    if old.get("etag"):
                        headers["If-None-Match"] = old["etag"]
                    if old.get("last_modified"):
                        headers["If-Modified-Since"] = old["last_modified"]
                links: list[str] = []
                failed: str | None = None
                try:
                    resp = fetcher.get(
                        url,
                        limit=self.max_page_bytes,
                        too_large=f"larger than {self.max_page_bytes / 1e6:g} MB (max_page_bytes)",
                        headers=headers,
                        allowed=robots.allowed,
                    )
                except Disallowed as exc:
                    out.skip(self.name, url, str(exc))  # as if robots.txt named the address itself
                    continue
                except PageError as exc:
                    failed, resp = str(exc), None
                if resp is not None and resp.status == 304 and old.get("id") in known:
                    doc_id = old["id"]
                    out.kept.add(doc_id)
                    seen_docs.add(doc_id)
                    pages[url] = old
                    if old.get("hash"):
                        hashes[url] = old["hash"]
                    links = list(old.get("links") or [])
                elif resp is None or resp.status != 200:
                    failed = f"HTTP {resp.status}" if resp is not None else failed or "unreadable"
                    # 404/410: the page is gone and leaves the index, with the links only it gave
                    gone = resp is not None and resp.status in (404, 410)
                    if depth == 0 and not self.is_sitemap:  # the start page (perhaps on https by now)
                        start_failed = failed  # the source fails with it: one line, not two
                        continue
                    self._failed(out, known, old, url, failed, keep=not gone)
                    if gone or not old:
                        continue
                    # failed for now (5xx, too slow, a loop): keep it, and check again what
                    # it linked to at the last sync rather than drop what only it reaches
                    pages[url] = old
                    if old.get("id") in known:
                        seen_docs.add(old["id"])
                    links = list(old.get("links") or [])
                else:
                    ctype = resp.headers.get("content-type", "")
                    if "html" not in ctype.lower():
                        out.skip(self.name, url, f"not HTML: {ctype or 'no type'}")
                        continue
                    try:
                        html = decode_html(resp.body, ctype)
                    except ConversionError as exc:  # an image sent as text/html
                        out.skip(self.name, url, f"not HTML: {exc}".removesuffix(", not HTML"))
                        continue
                    version = hashlib.sha256(resp.body).hexdigest()
                    own = scope.key(resp.url) or resp.url
                    hashes[url] = hashes[own] = version
                    doc_id = own
                    canonical = self._canonical(html, resp.url, scope)
                    if canonical is not None and canonical != own:
                        # trusted when it is the same page: the address asked for (it
                        # redirected here), or one read with the same bytes (this sync, or
                        # the last one when it is not read yet); else a template naming
                        # one page for many would merge different pages into one document
                        same = hashes.get(canonical) or (old_pages.get(canonical) or {}).get("hash")
                        if canonical == url or same == version:
                            doc_id = canonical
                        elif (
                            same is None and canonical not in done and url not in deferred and self.in_scope(canonical)
                        ):
                            # not read yet: read it first, then this page again (once)
                            deferred.add(url)
                            done.discard(url)
                            queue.appendleft((url, depth))
                            queue.appendleft((canonical, depth))
                            queued.add(canonical)
                            continue
                        elif same is not None:
                            differing.setdefault(canonical, []).append(own)
                    links = self._links(html, resp.url, scope) if self.follow_links else []
                    pages[url] = {
                        "etag": resp.headers.get("etag", ""),
                        "last_modified": resp.headers.get("last-modified", ""),
                        "id": doc_id,
                        "links": links,
                        "hash": version,
                    }
                    if doc_id not in seen_docs:  # else another address of a page read already
                        seen_docs.add(doc_id)
                        if known.get(doc_id) == version:
                            out.kept.add(doc_id)
                        else:
                            doc = self._document(out, known, old, url, doc_id, resp.body, ctype, resp.url, version)
                            if doc is not None:
                                yield doc
                if depth < self.max_depth:
                    for link in links:
                        key = scope.key(normalise(link))
                        if key is not None and key not in queued and self.in_scope(key):
                            queued.add(key)
                            queue.append((key, depth + 1))
            for canonical, owns in differing.items():
                out.problem(
                    self.name,
                    canonical,
                    f"{len(owns)} page(s) name it as canonical but differ from it; kept under their own "
                    f"addresses (such as {owns[0]})",
                )
            if start_failed and not pages and not self.is_sitemap:
                raise SourceError(f"source {self.name}: start page {self.url}: {start_failed}")
            if queue:
                log.info(
                    "source %s: stopped at max_pages = %d (%d addresses not read)",
                    self.name,
                    self.max_pages,
                    len(queue),
                )
            for origin, why in robots.unreachable.items():
                out.problem(
                    self.name,
                    f"{origin}/robots.txt",
                    f"unreachable ({why}) and never read before: no page of {origin} read this sync (RFC 9309 2.3.1.4)",
                )
        out.state = {"pages": pages, "robots": robots.rules}
        if self.is_sitemap:
            out.state["sitemaps"] = sitemaps

    def _document(
        self,
        out: Listing,
        known: Mapping[str, str],
        old: Mapping[str, Any],
        url: str,
        doc_id: str,
        body: bytes,
        ctype: str,
        final: str,
        version: str,
    ) -> Document | None:
        """The page as a document, or ``None`` (counted in ``out``) when it has no text or cannot
        be converted. Converted by :func:`.convert.convert`: a page over 1 MB in the conversion
        worker, under its time and memory limits, not in the bot's process."""
        try:
            converted = convert(body, final, content_type=ctype, base_url=final)
        except Exception as exc:  # noqa: BLE001 - a page the parser cannot take: this page only
            self._failed(out, known, old, url, f"cannot convert ({type(exc).__name__}: {exc})")
            return None
        title, md = converted.title, converted.text
        if not md.strip():
            out.skip(self.name, url, "no text")
            return None
        return Document(id=doc_id, title=title, text=md, url=doc_id, version=version)

    def _failed(
        self, out: Listing, known: Mapping[str, str], old: Mapping[str, Any], url: str, why: str, keep: bool = True
    ) -> None:
        out.problem(self.name, url, why)
        if keep and old.get("id") in known:
            out.kept.add(old["id"])  # the last good text stays searchable

    def _canonical(self, html: str, url: str, scope: Scope) -> str | None:
        """The page's ``<link rel="canonical">`` (in its first 200,000 characters) when it is
        on this site, keyed by ``scope``, else None."""
        for m in _LINK.finditer(html, 0, 200_000):
            tag = m.group(0)
            if "canonical" in (_attribute(tag, "rel") or "").lower().split() and (href := _attribute(tag, "href")):
                target = resolve(url, href.strip())
                return scope.key(target) if target else None
        return None

    def _links(self, html: str, url: str, scope: Scope) -> list[str]:
        """Same-site ``<a href>`` targets of the page, keyed by ``scope``, in order, without
        duplicates, at most :data:`MAX_LINKS_PER_PAGE` of them, from the first
        :data:`MAX_ANCHORS_PER_PAGE` ``<a href>`` tags.

        One linear pass of regular expressions over the text (no parse tree: the page is
        parsed once, by the conversion); comments, ``<script>``, ``<style>`` and
        ``<template>`` are passed over, ``rel="nofollow"`` links are not followed.
        """
        base = _BASE.search(html)
        base_url = url
        if base is not None and (href := _attribute(base.group(0), "href")):
            base_url = resolve(url, href) or url
        out: dict[str, None] = {}
        anchors = 0
        for m in _ANCHOR_OR_SKIPPED.finditer(html):
            tag = m.group("a")
            if tag is None:
                continue  # a comment, script, style or template
            href = (_attribute(tag, "href") or "").strip()
            if not href or href.startswith(("mailto:", "javascript:", "tel:", "#", "data:")):
                continue
            if "nofollow" in (_attribute(tag, "rel") or "").lower().split():
                continue
            anchors += 1
            resolved = resolve(base_url, href)
            target = scope.key(resolved) if resolved else None
            if target is not None:
                out.setdefault(target, None)
            if len(out) >= MAX_LINKS_PER_PAGE or anchors >= MAX_ANCHORS_PER_PAGE:
                log.info(
                    "source %s: %s: links read from its first %d <a href> tags only (%d addresses)",
                    self.name,
                    url,
                    anchors,
                    len(out),
                )
                break
        return list(out)


MAX_LINKS_PER_PAGE = 5_000
"""Most addresses kept from one page. Each is a request of a later sync and a string in the
source's state at every sync; a navigation or index page a person reads links to hundreds
(this is ten times the default ``max_pages`` of a whole sync), so a page listing more is a
generated one (a calendar, a tag cloud, a hostile page of a million links: the latter cost
over 100 s and 1.8 GB before this limit)."""
MAX_ANCHORS_PER_PAGE = 50_000
"""Most ``<a href>`` tags looked at per page (a page repeating a few links a million times
stops here, about half a second of work)."""

# Each alternative always matches once it has started (an unclosed tag, quote, comment or
# script runs to the end of the text, as in a browser), with possessive repeats: no
# backtracking, so the pass is linear in the page's length whatever the page holds.
_TAG_REST = r"""(?:[^>"']++|"[^"]*+"?|'[^']*+'?)*+(?:>|\Z)"""
_BASE = re.compile(r"<base\s" + _TAG_REST, re.I)
_LINK = re.compile(r"<link\s" + _TAG_REST, re.I)
_ANCHOR_OR_SKIPPED = re.compile(
    r"<!--.*?(?:-->|\Z)|<(?P<raw>script|style|template)\b.*?(?:</(?P=raw)\s*>|\Z)|(?P<a><a\s" + _TAG_REST + ")",
    re.I | re.S,
)
_ATTRIBUTE = {
    name: re.compile(rf"(?:^|[\s\"'/]){name}\s*=\s*(?:\"([^\"]*)\"|'([^']*)'|([^\s\"'>]+))", re.I)
    for name in ("href", "rel")
}


def _attribute(tag: str, name: str) -> str | None:
    """The value of attribute ``name`` (``href`` or ``rel``) in the start tag ``tag``, character
    references decoded, or None."""
    m = _ATTRIBUTE[name].search(tag, 2)
    if m is None:
        return None
    return html_lib.unescape(next(g for g in m.groups() if g is not None))
