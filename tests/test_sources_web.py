"""The web source against awkward and hostile servers, each a real local HTTP (or HTTPS)
server made here, synced through the real index (``KnowledgeBase.reindex``) or the real CLI:
headers sent one byte a second, sitemap indexes listing themselves, a redirect into a path
robots.txt forbids, a hub page answering 500, sitemaps over 5 MB or gzipped (and a gzip bomb),
an http -> https redirect, and tracking parameters."""

from __future__ import annotations

import gzip
import hashlib
import socket
import ssl
import subprocess
import threading
import time
import tracemalloc
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from graphs.knowledge import KnowledgeBase
from graphs.knowledge.connectors import FilesConnector, WebConnector
from graphs.knowledge.connectors.fetch import Fetcher, PageError, Scope, normalise
from graphs.knowledge.connectors.sitemap import MAX_SITEMAP_ENTRIES, MAX_SITEMAP_FILES
from graphs.knowledge.connectors.web import MAX_LINKS_PER_PAGE
from tests.fakes.bot_process import threadwise
from tests.test_sources import Site, serve_site, slow
from tests.test_sources_safety import files_config

TIMEOUT = 1.5
STOP = threading.Event()  # set at the end of each test: the dripping handlers stop


@pytest.fixture(autouse=True)
def _stop_dripping() -> Iterator[None]:
    STOP.clear()
    yield
    STOP.set()


def drip(handler: BaseHTTPRequestHandler) -> None:
    """A response whose headers never end: one byte a second (as long as the client listens)."""
    try:
        handler.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nX-Drip: ")
        while not STOP.wait(1.0):
            handler.wfile.write(b"a")
    except OSError:
        pass


def put(site: Site, path: str, title: str, body: str) -> None:
    """Serve an HTML page at ``path`` with an ETag (no navigation links: each test's links are its own)."""
    data = f"<html><head><meta charset='utf-8'><title>{title}</title></head><body><main>{body}</main></body></html>"
    etag = '"' + hashlib.sha256(data.encode()).hexdigest()[:16] + '"'
    site.pages[path] = (200, {"Content-Type": "text/html; charset=utf-8", "ETag": etag}, data.encode())


def web(site: Site, path: str = "/", **kw: object) -> WebConnector:
    kw = {"max_depth": 2, "timeout_seconds": TIMEOUT, **kw}
    return WebConnector("site", site.base + path, **kw)  # type: ignore[arg-type]


def client_threads() -> set[str]:
    """The threads of this process other than the test servers' request handlers."""
    return {t.name for t in threading.enumerate() if "process_request_thread" not in t.name}


def reindex_peak(kb: KnowledgeBase) -> tuple[Any, int]:
    """``kb``'s first source's sync report and the peak bytes Python allocated during the sync."""
    tracemalloc.start()
    try:
        report = kb.reindex().sources[0]
        return report, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def urlset(*locs: str, pad: int = 0) -> bytes:
    entries = "".join(f"<url><loc>{loc}</loc></url>" for loc in locs)
    filler = f"<!-- {'x' * pad} -->" if pad else ""
    return (
        f"<?xml version='1.0' encoding='UTF-8'?>{filler}"
        f"<urlset xmlns='http://www.sitemaps.org/schemas/sitemap/0.9'>{entries}</urlset>"
    ).encode()


def sitemapindex(*locs: str) -> bytes:
    entries = "".join(f"<sitemap><loc>{loc}</loc></sitemap>" for loc in locs)
    return f"<sitemapindex xmlns='http://www.sitemaps.org/schemas/sitemap/0.9'>{entries}</sitemapindex>".encode()


XML = {"Content-Type": "application/xml"}


# ---- 1. a deadline from connection to last byte ---------------------------------------------
def test_headers_sent_one_byte_a_second_cost_one_request_its_deadline_and_nothing_else(tmp_path):
    with serve_site() as site:
        put(site, "/", "Home", "<h1>Home</h1><p><a href='/drip'>drip</a> <a href='/ok'>ok</a></p>")
        put(site, "/drip", "Drip", "<h1>Drip</h1><p>The dormouse of the drip page sleeps at noon.</p>")
        put(site, "/ok", "Ok", "<h1>Ok</h1><p>The ocelot of the ok page hunts at dusk.</p>")
        kb = KnowledgeBase(tmp_path / "index", connectors=[web(site)])
        assert kb.reindex().sources[0].added == 3

        # the measured deadline of one request: the headers never end, the read timeout never trips
        fetcher = Fetcher(Scope(site.base + "/"), TIMEOUT)
        site.pages["/drip"] = drip
        started = time.monotonic()
        with pytest.raises(PageError, match=r"took over 1.5 s \(timeout_seconds\)"):
            fetcher.get(site.base + "/drip", limit=1000)
        assert TIMEOUT <= time.monotonic() - started < TIMEOUT + 1.0
        fetcher.close()

        # robots.txt and a page dripping: each costs its deadline, the sync goes on, the page
        # keeps its last good text, and no thread is left behind
        site.pages["/robots.txt"] = drip
        threads = client_threads()
        started = time.monotonic()
        report = kb.reindex().sources[0]
        took = time.monotonic() - started
        assert took < 2 * TIMEOUT + 3.0, took
        assert report.ok and report.removed == 0 and report.unchanged == 3, report
        assert report.problems == [f"{site.base}/drip: took over 1.5 s (timeout_seconds)"], report.problems
        assert "dormouse" in kb.search(["dormouse drip page"], k=1)[0]["text"]
        assert client_threads() == threads


def test_a_dripping_sitemap_costs_its_deadline_a_child_its_pages_are_kept(tmp_path):
    with serve_site() as site:
        put(site, "/a", "A", "<h1>A</h1><p>The aardvark page.</p>")
        put(site, "/b", "B", "<h1>B</h1><p>The badger page.</p>")
        site.pages["/sitemap.xml"] = (200, XML, sitemapindex(f"{site.base}/one.xml", f"{site.base}/two.xml"))
        site.pages["/one.xml"] = (200, XML, urlset(f"{site.base}/a"))
        site.pages["/two.xml"] = (200, XML, urlset(f"{site.base}/b"))
        kb = KnowledgeBase(tmp_path / "index", connectors=[web(site, "/sitemap.xml")])
        assert kb.reindex().sources[0].added == 2
        site.pages["/two.xml"] = drip  # a child sitemap: its pages of the last sync are read again
        started = time.monotonic()
        report = kb.reindex().sources[0]
        assert time.monotonic() - started < TIMEOUT + 3.0
        assert report.ok and report.removed == 0 and report.unchanged == 2, report
        assert report.problems == [
            f"sitemap {site.base}/two.xml: took over 1.5 s (timeout_seconds) (its 1 pages of the last sync kept)"
        ]
        site.pages["/sitemap.xml"] = drip  # the sitemap itself: the source fails, its documents stay
        started = time.monotonic()
        stats = kb.reindex()
        assert time.monotonic() - started < TIMEOUT + 3.0
        assert stats.failed and "sitemap" in stats.failed[0].error and "timeout_seconds" in stats.failed[0].error
        assert kb.files_of(["site"]) == {f"{site.base}/a", f"{site.base}/b"}


def test_the_cli_sync_goes_past_a_dripping_page(tmp_path):
    with serve_site() as site:
        put(site, "/", "Home", "<h1>Home</h1><p><a href='/drip'>drip</a> <a href='/ok'>ok</a></p>")
        put(site, "/ok", "Ok", "<h1>Ok</h1><p>The ocelot of the ok page hunts at dusk.</p>")
        site.pages["/drip"] = drip
        (tmp_path / "kb").mkdir()
        cfg = files_config(tmp_path, "kb")
        cfg.write_text(
            cfg.read_text()
            + f'\n[[sources]]\nname = "site"\ntype = "web"\nurl = "{site.base}/"\ntimeout_seconds = 1.0\n'
        )
        started = time.monotonic()
        synced = threadwise("sync", "--config", str(cfg), cwd=tmp_path, timeout=120)
        took = time.monotonic() - started
    assert synced.returncode == 0, synced.stderr[-2000:]
    assert "site: 2 added, 0 updated, 0 removed, 0 unchanged; 1 problem" in synced.stdout, synced.stdout
    assert f"{site.base}/drip: took over 1 s (timeout_seconds)" in synced.stderr, synced.stderr[-2000:]
    assert took < 60, took


# ---- 2. sitemap loops --------------------------------------------------------------------------
def test_sitemap_indexes_listing_themselves_and_each_other_are_read_once_each(tmp_path):
    with serve_site() as site:
        b = site.base
        put(site, "/a", "A", "<h1>A</h1><p>The aardvark page.</p>")
        put(site, "/b", "B", "<h1>B</h1><p>The badger page.</p>")
        site.pages["/sitemap.xml"] = (200, XML, sitemapindex(f"{b}/sitemap.xml", f"{b}/other.xml", f"{b}/pages.xml"))
        site.pages["/other.xml"] = (200, XML, sitemapindex(f"{b}/sitemap.xml", f"{b}/other.xml", f"{b}/pages.xml"))
        site.pages["/pages.xml"] = (200, XML, urlset(f"{b}/a", f"{b}/b", f"{b}/a", f"{b}/a?utm_source=mail", "/b#top"))
        kb = KnowledgeBase(tmp_path / "index", connectors=[web(site, "/sitemap.xml")])
        report = kb.reindex().sources[0]
        assert report.added == 2 and not report.problems, report
        assert site.hits == {"/robots.txt": 1, "/sitemap.xml": 1, "/other.xml": 1, "/pages.xml": 1, "/a": 1, "/b": 1}

        # an index of 150 sitemaps: 100 sitemap files at most per sync, the rest named as a problem
        children = [f"{b}/child-{i}.xml" for i in range(150)]
        site.pages["/sitemap.xml"] = (200, XML, sitemapindex(*children))
        for i in range(150):
            site.pages[f"/child-{i}.xml"] = (200, XML, urlset(f"{b}/a"))
        site.hits.clear()
        report = kb.reindex().sources[0]
        read = sum(n for path, n in site.hits.items() if path.endswith(".xml"))
        assert read == MAX_SITEMAP_FILES and site.hits["/a"] == 1, site.hits
        assert report.problems == [
            f"sitemap {b}/child-{MAX_SITEMAP_FILES - 1}.xml: not read: {MAX_SITEMAP_FILES} sitemaps read this sync "
            f"already ({150 - MAX_SITEMAP_FILES + 1} left)"
        ], report.problems


# ---- 3. robots.txt on every redirect hop ----------------------------------------------------------
def test_a_redirect_into_a_path_robots_txt_forbids_is_not_followed(tmp_path):
    with serve_site() as site:
        site.pages["/robots.txt"] = (200, {"Content-Type": "text/plain"}, b"User-agent: *\nDisallow: /private/\n")
        put(site, "/", "Home", "<h1>Home</h1><p><a href='/go'>go</a> <a href='/hop'>hop</a> <a href='/ok'>ok</a></p>")
        put(site, "/ok", "Ok", "<h1>Ok</h1><p>The ocelot page.</p>")
        site.redirect("/go", "/private/secret")
        site.redirect("/hop", "/hop-2")  # the second hop is the forbidden one
        site.redirect("/hop-2", "/private/other")
        put(site, "/private/secret", "Secret", "<p>The root password is hunter2.</p>")
        put(site, "/private/other", "Other", "<p>The other root password is hunter3.</p>")
        site.pages["/sitemap.xml"] = (200, XML, urlset(f"{site.base}/go", f"{site.base}/ok"))
        sitemap = WebConnector("map", site.base + "/sitemap.xml", timeout_seconds=TIMEOUT)
        kb = KnowledgeBase(tmp_path / "index", connectors=[web(site), sitemap])
        stats = kb.reindex()
        crawl, listed = stats.sources
        assert kb.files_of(["site"]) == {f"{site.base}/", f"{site.base}/ok"}
        assert kb.files_of(["map"]) == {f"{site.base}/ok"}
        assert not any(path.startswith("/private/") for path in site.hits), site.hits
        assert crawl.skipped == 2 and listed.skipped == 1 and not crawl.problems and not listed.problems
        assert f"{site.base}/go (redirects to {site.base}/private/secret, which robots.txt disallows)" in (
            crawl.skipped_examples
        )


def test_a_robots_txt_failing_for_now_is_replaced_by_the_last_one_read(tmp_path):
    with serve_site() as site:
        site.pages["/robots.txt"] = (200, {"Content-Type": "text/plain"}, b"User-agent: *\nDisallow: /private/\n")
        put(site, "/", "Home", "<h1>Home</h1><p>The hedgehog home page.</p><p><a href='/private/keys'>keys</a></p>")
        put(site, "/private/keys", "Keys", "<p>The root password is hunter2.</p>")
        kb = KnowledgeBase(tmp_path / "index", connectors=[web(site)])
        assert kb.reindex().sources[0].skipped == 1
        # 429 (a server asking to slow down), 5xx, too slow, in a row: each time the last good
        # rules, and none of these failures is saved as the rules of the next sync
        text = {"Content-Type": "text/plain", "Retry-After": "3600"}
        for failing in [(429, text, b"slow down"), (503, text, b"busy"), drip, (429, text, b"slow down")]:
            site.pages["/robots.txt"] = failing
            report = kb.reindex().sources[0]
            assert report.skipped == 1 and report.unchanged == 1 and not report.problems, report
            assert "/private/keys" not in site.hits and kb.files_of(["site"]) == {f"{site.base}/"}
        # no robots.txt read before: unreachable means read nothing this sync (RFC 9309 2.3.1.4)
        (tmp_path / "notes").mkdir()
        (tmp_path / "notes" / "n.md").write_text("# Notes\n\nA files source, so the index is not empty.\n")
        for status in (503, 429):
            site.pages["/robots.txt"] = (status, text, b"busy")
            notes = FilesConnector("notes", [tmp_path / "notes"])
            fresh = KnowledgeBase(tmp_path / f"fresh-{status}", connectors=[web(site), notes])
            report = fresh.reindex().sources[0]
            assert report.added == 0 and fresh.files_of(["site"]) == set(), report
            # nothing of the site may be read: the source fails in one line, not a quiet success
            assert not report.ok and report.error == (
                f"start page {site.base}/: robots.txt HTTP {status}, never read before: "
                "nothing may be read (RFC 9309 2.3.1.4)"
            ), report.error
        assert site.hits["/"] == 5 and "/private/keys" not in site.hits  # the 5 syncs of kb only
        # 404 (and other 4xx: "unavailable"): no rules, every page read
        site.pages["/robots.txt"] = (404, text, b"none")
        report = fresh.reindex().sources[0]
        assert report.added == 2 and site.hits["/private/keys"] == 1, report


# ---- 4. a hub page failing for now ----------------------------------------------------------------
def test_pages_reachable_only_through_a_failing_hub_stay_until_the_hub_is_gone(tmp_path):
    with serve_site() as site:
        put(site, "/", "Home", "<h1>Home</h1><p>The hedgehog home page.</p><p><a href='/hub/'>hub</a></p>")
        put(site, "/hub/", "Hub", "<h1>Hub</h1><p><a href='/hub/a'>a</a> <a href='/hub/b'>b</a></p>")
        put(site, "/hub/a", "A", "<h1>A</h1><p>The aardvark digs at dawn.</p>")
        put(site, "/hub/b", "B", "<h1>B</h1><p>The badger digs at dusk.</p>")
        hub = site.pages["/hub/"]
        kb = KnowledgeBase(tmp_path / "index", connectors=[web(site)])
        assert kb.reindex().sources[0].added == 4
        everything = kb.files_of(["site"])

        site.pages["/hub/"] = (500, {"Content-Type": "text/html"}, b"boom")
        before = dict(site.hits)
        report = kb.reindex().sources[0]
        assert report.problems == [f"{site.base}/hub/: HTTP 500"] and report.removed == 0, report
        assert kb.files_of(["site"]) == everything
        assert site.hits["/hub/a"] == before["/hub/a"] + 1  # checked again (answered 304), not just kept

        # failing again, too slow this time, while a child changed: the child is read again
        site.pages["/hub/"] = slow
        put(site, "/hub/a", "A", "<h1>A</h1><p>The aardvark digs at noon now.</p>")
        report = kb.reindex().sources[0]
        assert report.problems == [f"{site.base}/hub/: took over 1.5 s (timeout_seconds)"], report.problems
        assert report.updated == 1 and report.removed == 0 and kb.files_of(["site"]) == everything
        assert "noon" in kb.search(["aardvark digs"], k=1)[0]["text"]

        site.pages["/hub/"] = hub
        assert kb.reindex().sources[0].problems == []
        # the hub gone (404): it leaves, and so do the pages only it linked to
        del site.pages["/hub/"]
        report = kb.reindex().sources[0]
        assert report.removed == 3 and kb.files_of(["site"]) == {f"{site.base}/"}, report


# ---- 5. sitemap sizes and gzip ---------------------------------------------------------------------
def gzip_bomb(size: int) -> bytes:
    """A gzip file of ``size`` bytes of spaces inside a ``<urlset>`` (a few hundred KB)."""
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    out = [z.compress(b"<urlset>")]
    block = b" " * (1 << 20)
    for _ in range(size >> 20):
        out.append(z.compress(block))
    out.append(z.compress(b"</urlset>"))
    out.append(z.flush())
    return b"".join(out)


def test_large_and_gzipped_sitemaps_read_within_the_protocol_limits_and_a_gzip_bomb_does_not(tmp_path):
    with serve_site() as site:
        b = site.base
        put(site, "/a", "A", "<h1>A</h1><p>The aardvark page.</p>")
        put(site, "/b", "B", "<h1>B</h1><p>The badger page.</p>")
        put(site, "/c", "C", "<h1>C</h1><p>The caracal page.</p>")
        put(site, "/d", "D", "<h1>D</h1><p>The dingo page.</p>")
        put(site, "/e", "E", "<h1>E</h1><p>The echidna page.</p>")
        # over the 5 MB page limit (default max_page_bytes), well under the sitemap's 50 MB
        site.pages["/big.xml"] = (200, XML, urlset(f"{b}/a", pad=6_000_000))
        # a gzipped sitemap by name and type, and one sent with Content-Encoding: gzip
        site.pages["/b.xml.gz"] = (200, {"Content-Type": "application/x-gzip"}, gzip.compress(urlset(f"{b}/b")))
        site.pages["/c.xml"] = (200, {**XML, "Content-Encoding": "gzip"}, gzip.compress(urlset(f"{b}/c")))
        # over 50,000 entries: the first 50,000 read
        many = urlset(*[f"{b}/d"] * MAX_SITEMAP_ENTRIES, f"{b}/e")
        site.pages["/many.xml"] = (200, XML, many)
        site.pages["/bomb.xml.gz"] = (200, {"Content-Type": "application/gzip"}, gzip_bomb(400 << 20))
        names = ("/big.xml", "/b.xml.gz", "/c.xml", "/many.xml", "/bomb.xml.gz")
        site.pages["/sitemap.xml"] = (200, XML, sitemapindex(*[b + n for n in names]))
        kb = KnowledgeBase(tmp_path / "index", connectors=[WebConnector("site", b + "/sitemap.xml")])
        report, peak = reindex_peak(kb)
        assert kb.files_of(["site"]) == {f"{b}/a", f"{b}/b", f"{b}/c", f"{b}/d"}, report
        assert report.problems == [
            f"sitemap {b}/many.xml: lists over 50,000 addresses: the first 50,000 read",
            f"sitemap {b}/bomb.xml.gz: larger than 50 MB uncompressed (the sitemaps.org limit)",
        ], report.problems
        assert peak < 200 << 20, peak  # the bomb is 400 MB: decompressed no further than the limit

        # a .gz sitemap as the source's url
        gz = KnowledgeBase(tmp_path / "gz", connectors=[WebConnector("gz", b + "/b.xml.gz")])
        assert gz.reindex().sources[0].added == 1 and gz.files_of(["gz"]) == {f"{b}/b"}


def test_a_page_sent_as_a_gzip_bomb_costs_max_page_bytes(tmp_path):
    with serve_site() as site:
        put(site, "/", "Home", "<h1>Home</h1><p>The hedgehog home page.</p><p><a href='/bomb'>bomb</a></p>")
        site.pages["/bomb"] = (200, {"Content-Type": "text/html", "Content-Encoding": "gzip"}, gzip_bomb(200 << 20))
        kb = KnowledgeBase(tmp_path / "index", connectors=[web(site, max_page_bytes=300_000)])
        report, peak = reindex_peak(kb)
        assert report.added == 1 and report.problems == [f"{site.base}/bomb: larger than 0.3 MB (max_page_bytes)"]
        assert peak < 50 << 20, peak


# ---- 6. http -> https on the same host ----------------------------------------------------------------
class DualServer(ThreadingHTTPServer):
    """HTTP and HTTPS on one port: a connection opening with a TLS handshake (0x16) gets TLS."""

    def __init__(self, handler: type[BaseHTTPRequestHandler], context: ssl.SSLContext) -> None:
        super().__init__(("127.0.0.1", 0), handler)
        self.context = context
        self.daemon_threads = True

    def get_request(self) -> tuple[socket.socket, object]:
        sock, addr = super().get_request()
        sock.settimeout(5)
        try:
            if sock.recv(1, socket.MSG_PEEK) == b"\x16":
                sock = self.context.wrap_socket(sock, server_side=True)
        except OSError:
            pass
        sock.settimeout(None)
        return sock, addr


@contextmanager
def serve_dual(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Site]:
    """A :class:`Site` answering plain HTTP with a redirect to the same address over HTTPS
    (a self-signed certificate for 127.0.0.1, trusted through ``SSL_CERT_FILE``)."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1"]
        + ["-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    site = Site()
    site.server.server_close()
    plain = site.server.RequestHandlerClass

    class Upgrading(plain):  # type: ignore[misc, valid-type]
        def do_GET(self) -> None:  # noqa: N802 - the standard library's name
            if not isinstance(self.connection, ssl.SSLSocket):
                site.hits["http " + self.path] = site.hits.get("http " + self.path, 0) + 1
                self.send_response(301)
                self.send_header("Location", site.base.replace("http:", "https:") + self.path)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            super().do_GET()

    site.server = DualServer(Upgrading, context)
    site.base = f"http://127.0.0.1:{site.server.server_address[1]}"
    thread = threading.Thread(target=site.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield site
    finally:
        site.server.shutdown()
        site.server.server_close()


def test_an_http_site_moving_to_https_is_read_over_https_once(tmp_path, monkeypatch):
    with serve_dual(tmp_path, monkeypatch) as site:
        plain, secure = site.base, site.base.replace("http:", "https:")
        site.pages["/robots.txt"] = (200, {"Content-Type": "text/plain"}, b"User-agent: *\nDisallow: /private/\n")
        put(
            site,
            "/",
            "Home",
            f"<h1>Home</h1><p><a href='{plain}/a'>a</a> <a href='{secure}/a'>a again</a> <a href='/b'>b</a> "
            f"<a href='{plain}/private/x'>private</a></p>",
        )
        put(site, "/a", "A", "<h1>A</h1><p>The aardvark page.</p>")
        put(site, "/b", "B", f"<h1>B</h1><p>The badger page, <a href='{plain}/a'>back to a</a>.</p>")
        put(site, "/private/x", "X", "<p>Private.</p>")
        kb = KnowledgeBase(tmp_path / "index", connectors=[web(site)])
        report = kb.reindex().sources[0]
        assert report.added == 3 and not report.problems, report
        assert kb.files_of(["site"]) == {f"{secure}/", f"{secure}/a", f"{secure}/b"}
        # robots.txt once over http (redirected, and from then on the site is read over https),
        # every page once over https
        assert site.hits == {"http /robots.txt": 1, "/robots.txt": 1, "/": 1, "/a": 1, "/b": 1}, site.hits
        assert kb.search(["aardvark page"], k=1)[0]["url"] == f"{secure}/a"
        # the next sync: unchanged, nothing doubled
        again = kb.reindex().sources[0]
        assert again.unchanged == 3 and again.added == again.removed == 0 and not again.problems, again


def test_other_hosts_and_ports_are_other_sites():
    scope = Scope("http://docs.example.com/")
    assert scope.key("https://docs.example.com/a") == "http://docs.example.com/a"  # same site, read as started
    assert scope.key("http://docs.example.com:80/a") == "http://docs.example.com/a"
    for other in ("http://www.docs.example.com/a", "https://docs.example.com:8443/a", "ftp://docs.example.com/a"):
        assert scope.key(other) is None, other
    scope.upgrade()
    assert scope.key("http://docs.example.com/a") == "https://docs.example.com/a"
    port = Scope("http://127.0.0.1:8080/")
    assert port.key("https://127.0.0.1:8080/a") == "http://127.0.0.1:8080/a" and port.key("https://127.0.0.1/a") is None


# ---- 7. tracking parameters ----------------------------------------------------------------------------
def test_one_page_linked_with_tracking_parameters_is_one_document(tmp_path):
    with serve_site() as site:
        variants = ["/page", "/page?utm_source=x", "/page?ref=y", "/page?fbclid=z", "/page?gclid=w&utm_medium=m"]
        links = " ".join(f"<a href='{v}'>v{i}</a>" for i, v in enumerate(variants))
        links += " <a href='/list?b=2&a=1'>list</a> <a href='/list?a=1&b=2&utm_campaign=c'>list again</a>"
        put(site, "/", "Home", f"<h1>Home</h1><p>{links}</p>")
        put(site, "/page", "Page", "<h1>Page</h1><p>The pangolin page.</p>")  # no canonical link
        put(site, "/list", "List", "<h1>List</h1><p>The list page of lemurs.</p>")
        kb = KnowledgeBase(tmp_path / "index", connectors=[web(site)])
        report = kb.reindex().sources[0]
        assert kb.files_of(["site"]) == {f"{site.base}/", f"{site.base}/page", f"{site.base}/list?a=1&b=2"}, report
        assert sum(n for path, n in site.hits.items() if path.startswith("/page")) == 1, site.hits
        assert sum(n for path, n in site.hits.items() if path.startswith("/list")) == 1, site.hits
    # the parameters that matter stay, as written, sorted
    assert normalise("HTTP://Example.com/s?q=a%20b&page=2&utm_term=x#frag") == "http://example.com/s?page=2&q=a%20b"


# ---- 8. a page of a million links ---------------------------------------------------------------------
def test_a_page_of_very_many_links_costs_seconds_and_keeps_the_first_links(tmp_path):
    n = 300_000  # ~6 MB: every link a distinct page of the site (in <nav>: the conversion drops it)
    links = b"".join(b'<a href="/l%d">%d</a>' % (i, i) for i in range(n))
    hub = b"<html><body><main><p>The hub of the heron.</p></main><nav>" + links + b"</nav></body></html>"
    with serve_site() as site:
        site.pages["/"] = (200, {"Content-Type": "text/html"}, hub)
        put(site, "/l0", "L0", "<h1>L0</h1><p>The first leaf.</p>")
        connector = web(site, max_depth=1, max_pages=3, max_page_bytes=20_000_000)
        kb = KnowledgeBase(tmp_path / "index", connectors=[connector])
        started = time.monotonic()
        report = kb.reindex().sources[0]
        took = time.monotonic() - started
        assert report.added == 2 and site.hits["/l0"] == 1 and site.hits["/l1"] == 1, report
        assert took < 60, took  # mostly the conversion's parse of 6 MB
        # what the sync keeps of the page for the next one: its first MAX_LINKS_PER_PAGE links,
        # read in a fraction of a second (all 300,000 through a parse tree: ~30 s)
        listing = connector.scan({}, {})
        list(listing.changed)
        saved = listing.state["pages"][f"{site.base}/"]["links"]
        assert saved == [f"{site.base}/l{i}" for i in range(MAX_LINKS_PER_PAGE)]
        links_alone = time.monotonic()
        connector._links(hub.decode(), site.base + "/", Scope(site.base + "/"))
        assert time.monotonic() - links_alone < 2.0
    # what a parser would see: no links from comments or scripts, nofollow, <base>, quoted '>'
    tricky = (
        "<base href='/docs/'><!-- <a href='/c'>c</a> --><script>s = '<a href=\"/s\">'</script>"
        "<A data-href='/no' HREF='a?x=1&amp;y=2'>a</A><a rel='nofollow noopener' href=/nf>n</a>"
        "<a href=b#x>b</a><a title='x>y' href='/q'>q</a><a href='mailto:x'>m</a><a href='http://other/'>o</a>"
    )
    got = connector._links(tricky, "http://x/p", Scope("http://x/"))
    assert got == ["http://x/docs/a?x=1&y=2", "http://x/docs/b", "http://x/q"]


# ---- 9. junk XML inside the sitemap size limit ------------------------------------------------------------
def test_junk_xml_sitemaps_are_refused_in_moments_and_the_sitemaps_of_a_sync_have_a_time_budget(tmp_path, monkeypatch):
    with serve_site() as site:
        b = site.base
        put(site, "/a", "A", "<h1>A</h1><p>The aardvark page.</p>")
        put(site, "/b", "B", "<h1>B</h1><p>The badger page.</p>")
        head = b"<urlset xmlns='http://www.sitemaps.org/schemas/sitemap/0.9'>"
        gz = {"Content-Type": "application/x-gzip"}
        # 32 MB raw each, a few tens of KB gzipped: was 110 s and 900 MB for the first
        flat = head + b"<url><loc>" + f"{b}/a".encode() + b"</loc>" + b"<x/>" * 8_000_000 + b"</url></urlset>"
        nested = head + b"<url>" + b"<x>" * 3_000_000 + b"</x>" * 3_000_000 + b"</url></urlset>"
        empty = head + b"<url/>" * 5_000_000 + b"</urlset>"
        site.pages["/flat.xml.gz"] = (200, gz, gzip.compress(flat))
        site.pages["/nested.xml.gz"] = (200, gz, gzip.compress(nested))
        site.pages["/empty.xml.gz"] = (200, gz, gzip.compress(empty))
        site.pages["/good.xml"] = (200, XML, urlset(f"{b}/a", f"{b}/b"))
        names = ("/flat.xml.gz", "/nested.xml.gz", "/empty.xml.gz", "/good.xml")
        site.pages["/sitemap.xml"] = (200, XML, sitemapindex(*[b + n for n in names]))
        kb = KnowledgeBase(tmp_path / "index", connectors=[web(site, "/sitemap.xml")])
        tracemalloc.start()
        started = time.monotonic()
        try:
            report = kb.reindex().sources[0]
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        took = time.monotonic() - started
        assert report.problems == [
            f"sitemap {b}/flat.xml.gz: not a sitemap (an entry of over 10,000 elements)",
            f"sitemap {b}/nested.xml.gz: not a sitemap (elements nested over 12 deep)",
            f"sitemap {b}/empty.xml.gz: lists over 50,000 addresses: the first 50,000 read",
        ], report.problems
        assert kb.files_of(["site"]) == {f"{b}/a", f"{b}/b"}
        assert took < 20, took
        assert peak < 200 << 20, peak  # the 32 MB bodies themselves, not a tree of millions of elements

        # the sitemaps of one sync share a time budget: the ones left are one problem line
        monkeypatch.setattr("graphs.knowledge.connectors.sitemap.MAX_SITEMAPS_SECONDS", 1.0)
        site.pages["/flat.xml.gz"] = slow  # over timeout_seconds (1.5 s), and over the budget
        report = kb.reindex().sources[0]
        assert report.problems == [
            f"sitemap {b}/flat.xml.gz: took over 1.5 s (timeout_seconds)",
            f"sitemap {b}/nested.xml.gz: not read: the sitemaps of this sync took 1 s already (3 left)",
        ], report.problems
        # the pages of the sitemap not read (good.xml) are those of its last sync, not removed
        assert report.removed == 0 and kb.files_of(["site"]) == {f"{b}/a", f"{b}/b"}, report


# ---- 10. binary bodies under an HTML label ----------------------------------------------------------------
def test_binary_content_sent_or_named_as_html_is_not_indexed(tmp_path):
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 80
    junk = bytes(range(1, 32)) * 200  # no magic number, no NUL: control characters
    with serve_site() as site:
        put(site, "/", "Home", "<h1>Home</h1><p>The heron home. <a href='/logo'>l</a> <a href='/junk'>j</a></p>")
        site.pages["/logo"] = (200, {"Content-Type": "text/html; charset=utf-8"}, png)
        site.pages["/junk"] = (200, {"Content-Type": "text/html"}, junk)
        # UTF-16 HTML (NUL bytes) labelled as such is still read
        utf16 = "<html><body><main><p>The wide walrus page.</p></main></body></html>".encode("utf-16-le")
        site.pages["/wide"] = (200, {"Content-Type": "text/html; charset=utf-16le"}, utf16)
        site.pages["/"] = (
            site.pages["/"][0],
            site.pages["/"][1],
            site.pages["/"][2].replace(b"</p>", b" <a href='/wide'>w</a></p>", 1),
        )
        kb = KnowledgeBase(tmp_path / "index", connectors=[web(site)])
        report = kb.reindex().sources[0]
        assert kb.files_of(["site"]) == {f"{site.base}/", f"{site.base}/wide"}, report
        assert report.skipped == 2 and not report.problems, report
        assert report.skipped_examples == [
            f"{site.base}/logo (not HTML: binary content (a PNG image))",
            f"{site.base}/junk (not HTML: binary content (control characters))",
        ]
    # the files source: the same check (one function) for an image named .html
    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "logo.html").write_bytes(png)
    (tmp_path / "kb" / "ok.html").write_text("<html><body><main><p>The okapi page.</p></main></body></html>")
    files = KnowledgeBase(tmp_path / "files", connectors=[FilesConnector("kb", [tmp_path / "kb"])])
    report = files.reindex().sources[0]
    assert files.files_of(["kb"]) == {"ok.html"} and report.problems == [
        "logo.html: binary content (a PNG image), not HTML"
    ], report


# ---- 11. session ids in links ------------------------------------------------------------------------------
def test_links_carrying_a_fresh_session_id_are_the_same_pages(tmp_path):
    counter = iter(range(10**9))

    def session_page(text: str) -> Callable[[BaseHTTPRequestHandler], None]:
        def route(handler: BaseHTTPRequestHandler) -> None:
            sid = next(counter)  # a new session id in every link of every answer
            links = (
                f"<a href='/s/page;jsessionid={sid}'>a</a> <a href='/s/other?PHPSESSID={sid}'>b</a> "
                f"<a href='/s/third?sid={sid}&amp;s=2'>c</a> <a href='/s/fourth?sessionid={sid}'>d</a> "
                f"<a href='/s/fifth?osCsid={sid}'>e</a>"
            )
            body = f"<html><body><main><p>{text}</p><p>{links}</p></main></body></html>".encode()
            handler.send_response(200)
            handler.send_header("Content-Type", "text/html")
            handler.send_header("Content-Length", str(len(body)))
            handler.end_headers()
            handler.wfile.write(body)

        return route

    with serve_site() as site:
        for path, text in [
            ("/s/start", "The start page of the stoat."),
            ("/s/page", "The page of the panda."),
            ("/s/other", "The other page of the otter."),
            ("/s/third", "The third page of the tapir."),
            ("/s/fourth", "The fourth page of the fox."),
            ("/s/fifth", "The fifth page of the ferret."),
        ]:
            site.pages[path] = session_page(text)
        kb = KnowledgeBase(tmp_path / "index", connectors=[web(site, "/s/start", max_depth=10, max_pages=30)])
        report = kb.reindex().sources[0]
        b = site.base
        assert kb.files_of(["site"]) == {
            f"{b}/s/start",
            f"{b}/s/page",
            f"{b}/s/other",
            f"{b}/s/third?s=2",
            f"{b}/s/fourth",
            f"{b}/s/fifth",
        }
        assert report.added == 6 and sum(site.hits.values()) == 7, site.hits  # robots.txt and 6 pages, once each
        again = kb.reindex().sources[0]
        # the same 6 documents (their text changes: each answer holds new session ids)
        assert again.documents == 6 and again.added == again.removed == 0, again
    assert normalise("http://x/a;JSESSIONID=AB12;v=1/b;sid=3?Sid=4&q=1") == "http://x/a;v=1/b?q=1"
    # ASP.NET's cookieless sessions put the id in the path; a parenthesis of a page name stays
    assert normalise("http://x/(S(f3k1zq))/shop/cart.aspx") == "http://x/shop/cart.aspx"
    assert normalise("http://x/(A(a1)S(b2)F(c3))/p?zenid=9") == "http://x/p"
    assert normalise("http://x/wiki/Raft_(algorithm)") == "http://x/wiki/Raft_(algorithm)"
    assert normalise("http://x/notes/(draft)/a") == "http://x/notes/(draft)/a"


# ---- 12. a canonical link naming another page ---------------------------------------------------------------
def test_a_canonical_link_merges_only_addresses_of_the_same_page(tmp_path):
    with serve_site() as site:
        b = site.base
        canon = "<link rel='canonical' href='/canon/'>"
        home = "".join(f"<a href='/canon/p{i}'>p{i}</a> " for i in range(5))
        home += "<a href='/dup?x=1'>dup first</a> <a href='/dup'>dup</a>"
        site.html("/canon/", "Home", f"<h1>Home</h1><p>The home of the heron. {home}</p>", head=canon)
        for i, animal in enumerate(["aardvark", "badger", "caracal", "dingo", "echidna"]):
            site.html(f"/canon/p{i}", animal, f"<h1>{animal}</h1><p>The page of the {animal}.</p>", head=canon)
        # the same page under a second address, reached before its canonical one: one document
        site.html("/dup", "Dup", "<h1>Dup</h1><p>The duplicated dugong.</p>", head="<link rel='canonical' href='/dup'>")
        put(site, "/", "Root", "<h1>Root</h1><p>The root of the rook.</p>")  # the navigation of site.html
        put(site, "/guide/", "Guide", "<h1>Guide</h1><p>The guide of the gnu.</p>")
        kb = KnowledgeBase(tmp_path / "index", connectors=[web(site, "/canon/", max_depth=1)])
        report = kb.reindex().sources[0]
        pages = {f"{b}/", f"{b}/guide/", f"{b}/canon/", f"{b}/dup"} | {f"{b}/canon/p{i}" for i in range(5)}
        assert kb.files_of(["site"]) == pages, report
        assert report.problems == [
            f"{b}/canon/: 5 page(s) name it as canonical but differ from it; kept under their own addresses "
            f"(such as {b}/canon/p0)"
        ], report.problems
        assert "badger" in kb.search(["page of the badger"], k=1)[0]["text"]
        again = kb.reindex().sources[0]
        assert again.unchanged == 9 and again.added == again.removed == 0, again


# ---- 13. a link whose text is its address ------------------------------------------------------------------
def test_a_link_whose_text_is_its_address_reads_as_plain_words(tmp_path):
    with serve_site() as site:
        put(
            site,
            "/",
            "Home",
            "<h1>Home</h1><p>The heron home links <a href='/public.html'>/public.html</a> and "
            "<a href='/other.html'>the other page</a>.</p>",
        )
        put(site, "/public.html", "Public", "<h1>Public</h1><p>The public page of the puffin.</p>")
        put(site, "/other.html", "Other", "<h1>Other</h1><p>The other page of the osprey.</p>")
        kb = KnowledgeBase(tmp_path / "index", connectors=[web(site)])
        assert kb.reindex().sources[0].added == 3
        text = kb.search(["heron home links"], k=1)[0]["text"]
    assert "links /public.html and [the other page](" in text and "</public.html>" not in text, text


def test_malformed_and_overlong_addresses_cost_their_link_only(tmp_path):
    """A link, a sitemap entry, a canonical link or a redirect naming an address that is no
    address (an unclosed IPv6 bracket) or longer than any server reads (70,000 characters:
    httpx refuses it with InvalidURL, which is no HTTPError) is passed over; the site's other
    pages are read and the source does not fail."""
    huge = "/" + "x" * 70_000
    with serve_site() as site:
        put(
            site,
            "/",
            "Home",
            f'<h1>Home</h1><p>The otter page.</p><a href="{huge}">long</a>'
            '<a href="http://[::1/x">broken</a><a href="/ok">ok</a><a href="/moved">moved</a>',
        )
        site.pages["/"] = (
            200,
            site.pages["/"][1],
            site.pages["/"][2].replace(b"<head>", b'<head><link rel="canonical" href="http://[::1/">', 1),
        )
        put(site, "/ok", "Ok", "<h1>Ok</h1><p>The badger page.</p>")
        site.pages["/moved"] = (301, {"Location": "http://[::1/elsewhere"}, b"")
        site.pages["/sitemap.xml"] = (
            200,
            {"Content-Type": "application/xml"},
            urlset(f"{site.base}/ok", site.base + huge, "http://[::1/y"),
        )
        kb = KnowledgeBase(tmp_path / "crawl", connectors=[web(site, max_depth=2)])
        report = kb.reindex().sources[0]
        assert report.ok, report.error
        assert kb.files_of(["site"]) == {f"{site.base}/", f"{site.base}/ok"}, report
        assert huge not in site.hits
        listed = KnowledgeBase(tmp_path / "sitemap", connectors=[web(site, "/sitemap.xml")])
        report = listed.reindex().sources[0]
        assert report.ok and listed.files_of(["site"]) == {f"{site.base}/ok"}, report
