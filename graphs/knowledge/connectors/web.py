"""``type = "web"``: a website from a start page or a ``sitemap.xml``.

The crawl stays on the start URL's scheme, host and port (and below ``prefix`` when one is
set), honours ``robots.txt`` (the standard library's parser, user agent ``Threadwise``),
stops at ``max_depth`` links from the start and at ``max_pages`` pages, follows at most 5
redirects per page (a loop is a problem of that page), reads each page's
``<link rel="canonical">`` (two addresses of one page are one document), skips what is
not HTML, and cuts a page that is larger than ``max_page_bytes`` or takes longer than
``timeout_seconds`` (a page that never ends). Unchanged pages cost a conditional request:
the last ``ETag`` and ``Last-Modified`` are sent back, and a ``304`` keeps the document;
the links of such a page were saved with it, so the crawl goes on through it.
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
import urllib.robotparser
from collections import deque
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import urldefrag, urljoin, urlsplit, urlunsplit
from xml.etree import ElementTree

import httpx

from graphs.knowledge.connectors.base import Document, Listing, ScanProgress, SourceError
from graphs.knowledge.convert import HTML_READERS, decode_html, html_to_markdown
from graphs.knowledge.templates import strip_templates

log = logging.getLogger(__name__)

USER_AGENT = "Threadwise/0.1 (+https://github.com/threadwise; knowledge sync)"
ROBOTS_AGENT = "Threadwise"
MAX_REDIRECTS = 5


class PageError(Exception):
    """One page cannot be read (the message says why)."""


def normalise(url: str) -> str:
    """``url`` without its fragment, with a lower-case scheme and host and a path ('/' if empty)."""
    url, _ = urldefrag(url.strip())
    p = urlsplit(url)
    return urlunsplit((p.scheme.lower(), p.netloc.lower(), p.path or "/", p.query, ""))


class WebConnector:
    """Documents from a website.

    Args:
        name: the source's name.
        url: the start page, or a ``sitemap.xml`` (then its pages, and no link following).
        max_depth: links followed from the start page (0 = the start page only).
        max_pages: most pages read per sync.
        prefix: only addresses starting with this (default: the whole host).
        timeout_seconds: the longest one page may take, connection to last byte.
        max_page_bytes: a larger page is cut off and skipped.
        follow_links: follow links from pages (default: yes for a start page, no for a sitemap).
        transport: an httpx transport (tests; None = the network).
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
        self.origin = f"{parts.scheme}://{parts.netloc}"
        self.prefix = normalise(urljoin(self.url, prefix)) if prefix else self.origin + "/"
        self.is_sitemap = parts.path.lower().endswith(".xml")
        self.follow_links = (not self.is_sitemap) if follow_links is None else follow_links
        self.max_depth = max_depth
        self.max_pages = max_pages
        self.timeout_seconds = timeout_seconds
        self.max_page_bytes = max_page_bytes
        self._transport = transport

    def describe(self) -> str:
        return f"{self.url} (depth {self.max_depth}, at most {self.max_pages} pages)"

    def in_scope(self, url: str) -> bool:
        return url.startswith(self.prefix) or url + "/" == self.prefix

    # ---- HTTP ----------------------------------------------------------------------
    def _client(self) -> httpx.Client:
        return httpx.Client(
            transport=self._transport,
            follow_redirects=False,
            headers={"User-Agent": USER_AGENT},
            timeout=httpx.Timeout(self.timeout_seconds),
        )

    def _get(
        self, client: httpx.Client, url: str, headers: dict[str, str] | None = None
    ) -> tuple[str, int, dict[str, str], bytes]:
        """GET with redirects followed by hand (same host only, loops refused), a byte cap
        and a deadline. Returns ``(final url, status, headers, body)``.

        Raises:
            PageError: redirect loop, too many redirects, off-site redirect, too large, too
                slow, or a network error.
        """
        seen = [url]
        deadline = time.monotonic() + self.timeout_seconds
        for _ in range(MAX_REDIRECTS + 1):
            try:
                with client.stream("GET", url, headers=headers or {}) as resp:
                    if resp.has_redirect_location:
                        target = normalise(urljoin(url, resp.headers.get("location", "")))
                        if target in seen:
                            raise PageError(f"redirect loop ({' -> '.join([*seen, target])})")
                        if not target.startswith(self.origin + "/"):
                            raise PageError(f"redirects off the site to {target}")
                        seen.append(target)
                        url = target
                        continue
                    body = bytearray()
                    if resp.status_code == 200:
                        for piece in resp.iter_bytes():
                            body += piece
                            if len(body) > self.max_page_bytes:
                                raise PageError(f"larger than {self.max_page_bytes / 1e6:g} MB (max_page_bytes)")
                            if time.monotonic() > deadline:
                                raise PageError(f"took over {self.timeout_seconds:.0f} s (timeout_seconds)")
                    return url, resp.status_code, {k.lower(): v for k, v in resp.headers.items()}, bytes(body)
            except httpx.TimeoutException as exc:
                raise PageError(f"took over {self.timeout_seconds:g} s (timeout_seconds)") from exc
            except httpx.ConnectError as exc:  # no such host, nothing listening, TLS refused
                raise PageError(f"cannot connect ({exc})") from exc
            except httpx.HTTPError as exc:
                raise PageError(f"{type(exc).__name__}: {exc}") from exc
        raise PageError(f"more than {MAX_REDIRECTS} redirects")

    def _robots(self, client: httpx.Client) -> urllib.robotparser.RobotFileParser:
        rp = urllib.robotparser.RobotFileParser(self.origin + "/robots.txt")
        try:
            _, status, _, body = self._get(client, self.origin + "/robots.txt")
        except PageError as exc:
            log.info("source %s: robots.txt unreadable (%s): every page allowed", self.name, exc)
            status, body = 404, b""
        if status in (401, 403):  # the standard library's reading of these codes: nothing may be fetched
            rp.parse(["User-agent: *", "Disallow: /"])
        elif status == 200:
            rp.parse(body.decode("utf-8", "replace").splitlines())
        else:  # no robots.txt: everything may be fetched
            rp.parse([])
        return rp

    def _sitemap(self, client: httpx.Client, url: str, out: Listing, depth: int = 0) -> list[str]:
        """The page addresses of a sitemap (a sitemap index is followed, 3 levels at most)."""
        try:
            _, status, _, body = self._get(client, url)
        except PageError as exc:
            raise SourceError(f"source {self.name}: sitemap {url}: {exc}") from exc
        if status != 200:
            raise SourceError(f"source {self.name}: sitemap {url}: HTTP {status}")
        try:
            root = ElementTree.fromstring(body)
        except ElementTree.ParseError as exc:
            raise SourceError(f"source {self.name}: sitemap {url} is not XML ({exc})") from exc
        locs = [(el.text or "").strip() for el in root.iter() if el.tag.endswith("loc")]
        if root.tag.endswith("sitemapindex"):
            pages: list[str] = []
            for loc in locs:
                if depth < 3 and normalise(urljoin(url, loc)).startswith(self.origin + "/"):
                    pages += self._sitemap(client, normalise(urljoin(url, loc)), out, depth + 1)
            return pages
        return [normalise(urljoin(url, loc)) for loc in locs if loc]

    # ---- the crawl -----------------------------------------------------------------
    def scan(self, known: Mapping[str, str], state: Mapping[str, Any], progress: ScanProgress | None = None) -> Listing:
        """See :meth:`graphs.knowledge.connectors.base.Connector.scan`. ``state["pages"]`` maps
        each address read to its validators, its document id and its links. The pages are
        fetched as the stream of changed documents is read, one at a time (like the files
        and git sources), so a sync holds a batch of pages, not the site.

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
        seen_docs: set[str] = set()
        with self._client() as client:
            robots = self._robots(client)
            queue: deque[tuple[str, int]]
            if self.is_sitemap:
                queue = deque((u, 0) for u in self._sitemap(client, self.url, out) if self.in_scope(u))
            else:
                queue = deque([(self.url, 0)])
            queued = {u for u, _ in queue}
            fetched = 0
            start_failed: str | None = None
            while queue and fetched < self.max_pages:
                url, depth = queue.popleft()
                if not robots.can_fetch(ROBOTS_AGENT, url):
                    out.skip(self.name, url, "robots.txt")
                    continue
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
                try:
                    final, status, resp_headers, body = self._get(client, url, headers)
                except PageError as exc:
                    if url == self.url and not self.is_sitemap:
                        start_failed = str(exc)  # the source fails with it: one line, not two
                        continue
                    self._failed(out, known, old, url, str(exc))
                    continue
                links: list[str] = []
                if status == 304 and old.get("id") in known:
                    doc_id = old["id"]
                    out.kept.add(doc_id)
                    seen_docs.add(doc_id)
                    pages[url] = old
                    links = list(old.get("links") or [])
                elif status != 200:
                    # 404/410: the page is gone and leaves the index; any other status may pass
                    if url == self.url and not self.is_sitemap:
                        start_failed = f"HTTP {status}"  # the source fails with it: one line, not two
                        continue
                    self._failed(out, known, old, url, f"HTTP {status}", keep=status not in (404, 410))
                    continue
                else:
                    ctype = resp_headers.get("content-type", "")
                    if "html" not in ctype.lower():
                        out.skip(self.name, url, f"not HTML: {ctype or 'no type'}")
                        continue
                    html = decode_html(body, ctype)
                    canonical = self._canonical(html, final)
                    doc_id = canonical
                    links = self._links(html, final) if self.follow_links else []
                    pages[url] = {
                        "etag": resp_headers.get("etag", ""),
                        "last_modified": resp_headers.get("last-modified", ""),
                        "id": doc_id,
                        "links": links,
                    }
                    if doc_id in seen_docs:
                        continue  # another address of a page read already
                    seen_docs.add(doc_id)
                    version = hashlib.sha256(body).hexdigest()
                    if known.get(doc_id) == version:
                        out.kept.add(doc_id)
                    else:
                        try:
                            title, md = html_to_markdown(html, final)
                        except Exception as exc:  # noqa: BLE001 - a page the parser cannot take: this page only
                            self._failed(out, known, old, url, f"cannot convert ({type(exc).__name__}: {exc})")
                            continue
                        md = strip_templates(md, "html")
                        if not md.strip():
                            out.skip(self.name, url, "no text")
                            continue
                        yield Document(id=doc_id, title=title, text=md, url=doc_id, version=version)
                if depth < self.max_depth:
                    for link in links:
                        if link not in queued and self.in_scope(link):
                            queued.add(link)
                            queue.append((link, depth + 1))
            if start_failed and not pages and not self.is_sitemap:
                raise SourceError(f"source {self.name}: start page {self.url}: {start_failed}")
            if queue:
                log.info(
                    "source %s: stopped at max_pages = %d (%d addresses not read)",
                    self.name,
                    self.max_pages,
                    len(queue),
                )
        out.state = {"pages": pages}

    def _failed(
        self, out: Listing, known: Mapping[str, str], old: Mapping[str, Any], url: str, why: str, keep: bool = True
    ) -> None:
        out.problem(self.name, url, why)
        if keep and old.get("id") in known:
            out.kept.add(old["id"])  # the last good text stays searchable

    def _canonical(self, html: str, url: str) -> str:
        """The page's ``<link rel="canonical">`` when it is on this site, else ``url``."""
        m = re.search(r"<link\b[^>]*\brel=[\"']?canonical[\"']?[^>]*>", html[:200_000], re.I)
        if m:
            href = re.search(r"\bhref=[\"']([^\"']+)[\"']", m.group(0), re.I)
            if href:
                target = normalise(urljoin(url, href.group(1)))
                if target.startswith(self.origin + "/"):
                    return target
        return normalise(url)

    def _links(self, html: str, url: str) -> list[str]:
        """Same-site ``<a href>`` targets of the page, normalised, in order, without duplicates."""
        from bs4 import BeautifulSoup

        soup = BeautifulSoup(html, "html.parser")
        base = soup.find("base", href=True)
        base_url = urljoin(url, str(base["href"])) if base is not None else url
        out: dict[str, None] = {}
        for a in soup.find_all("a", href=True):
            href = str(a["href"]).strip()
            if (
                not href
                or href.startswith(("mailto:", "javascript:", "tel:", "#"))
                or "nofollow" in (a.get("rel") or [])
            ):
                continue
            target = normalise(urljoin(base_url, href))
            if target.startswith(self.origin + "/"):
                out.setdefault(target, None)
        return list(out)
