"""Knowledge sources through real local components: files written by real PDF/office writers,
a website served by a local HTTP server made here (robots.txt, sitemap, redirects, loops,
404/500, slow and endless pages, non-UTF-8 HTML, ETag/Last-Modified), a real Git repository
made with the git program (add, change, rename, delete; a URL that needs credentials), the
sync report, the schedule, the CLI, and the graph answering from each source type with a link
to the original."""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from bot.config import ConfigError, load_settings
from bot.sync import SourceSync, SyncBusy, sources_text
from graphs.knowledge import KnowledgeBase, KnowledgeBaseError
from graphs.knowledge.connectors import FilesConnector, GitConnector, WebConnector
from graphs.knowledge.index import ReindexLock
from tests.conftest import scripted_runtime, write_config
from tests.test_graph_paths import ask

# ---- a website ---------------------------------------------------------------------------

Route = Callable[[BaseHTTPRequestHandler], None]


def page(title: str, body: str, *, charset: str = "utf-8", head: str = "") -> bytes:
    return (
        f"<html><head><meta charset='{charset}'><title>{title}</title>{head}</head><body>"
        f"<nav><a href='/'>Home</a> <a href='/guide/'>Guide</a> Navigation menu text</nav>"
        f"<main>{body}</main><footer>Copyright footer text</footer></body></html>"
    ).encode(charset)


class Site:
    """A website on 127.0.0.1 served by the standard library's threading HTTP server.

    ``pages`` maps a path to ``(status, headers, body)`` or to a callable that writes the
    response itself; ``hits`` counts requests per path; ``conditional`` counts 304 answers."""

    def __init__(self) -> None:
        self.pages: dict[str, tuple[int, dict[str, str], bytes] | Route] = {}
        self.hits: dict[str, int] = {}
        self.not_modified = 0
        site = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - the standard library's name
                path = self.path
                site.hits[path] = site.hits.get(path, 0) + 1
                entry = site.pages.get(path) or site.pages.get(path.split("?", 1)[0])
                if entry is None:
                    self.send_response(404)
                    self.send_header("Content-Type", "text/html")
                    self.end_headers()
                    self.wfile.write(b"<html><body>not found</body></html>")
                    return
                if callable(entry):
                    entry(self)
                    return
                status, headers, body = entry
                etag = headers.get("ETag")
                if etag and self.headers.get("If-None-Match") == etag:
                    site.not_modified += 1
                    self.send_response(304)
                    self.end_headers()
                    return
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"

    def html(
        self, path: str, title: str, body: str, *, etag: bool = True, charset: str = "utf-8", head: str = ""
    ) -> None:
        data = page(title, body, charset=charset, head=head)
        headers = {"Content-Type": f"text/html; charset={charset}" if charset == "utf-8" else "text/html"}
        if etag:
            headers["ETag"] = '"' + hashlib.sha256(data).hexdigest()[:16] + '"'
        self.pages[path] = (200, headers, data)

    def redirect(self, path: str, to: str) -> None:
        self.pages[path] = (301, {"Location": to}, b"")


@contextmanager
def serve_site() -> Iterator[Site]:
    site = Site()
    thread = threading.Thread(target=site.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield site
    finally:
        site.server.shutdown()
        site.server.server_close()


def never_ending(handler: BaseHTTPRequestHandler) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", "text/html")
    handler.end_headers()
    try:
        handler.wfile.write(b"<html><body><main>")
        for _ in range(100_000):  # bounded: the client gives up long before
            handler.wfile.write(b"<p>more and more text that never ends</p>" * 100)
    except OSError:
        pass


def slow(handler: BaseHTTPRequestHandler) -> None:
    time.sleep(3)
    try:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/html")
        handler.end_headers()
        handler.wfile.write(b"<html><body>late</body></html>")
    except OSError:
        pass


def build_site(site: Site) -> None:
    site.pages["/robots.txt"] = (200, {"Content-Type": "text/plain"}, b"User-agent: *\nDisallow: /private/\n")
    site.html(
        "/",
        "Acme docs",
        "<h1>Acme docs</h1><p>Start with the <a href='/guide/'>guide</a>, the "
        "<a href='/old-faq'>FAQ</a>, the <a href='/api/'>API</a>, <a href='/private/keys'>keys</a>, "
        "<a href='/loop-a'>loop</a>, <a href='/broken'>broken</a>, <a href='/missing'>missing</a>, "
        "<a href='/endless'>endless</a>, <a href='/slow'>slow</a>, <a href='/latin'>café</a>, "
        "<a href='/guide/?utm=1'>guide again</a>, <a href='/manual.zip'>manual</a>, "
        "<a href='https://elsewhere.example/'>elsewhere</a>.</p>",
    )
    site.html(
        "/guide/",
        "Guide",
        "<h1>Deploying</h1><p>Rotate the flux capacitor with <code>acme rotate</code> "
        "before each deploy.</p><pre><code class='language-bash'>acme rotate --force\n  --grace 24h</code></pre>"
        "<table><tr><th>Env</th><th>Region</th></tr><tr><td>prod</td><td>eu-west</td></tr></table>",
        head="<link rel='canonical' href='/guide/'>",
    )
    site.redirect("/old-faq", "/faq/")
    site.html("/faq/", "FAQ", "<h1>FAQ</h1><p>The quokka quota is 42 requests per minute.</p>")
    site.html("/api/", "API", "<h1>API</h1><p>Tokens expire after nine hours.</p>", etag=False)
    site.html("/private/keys", "Keys", "<p>secret keys page</p>")
    site.redirect("/loop-a", "/loop-b")
    site.redirect("/loop-b", "/loop-a")
    site.pages["/broken"] = (500, {"Content-Type": "text/html"}, b"<html>boom</html>")
    site.pages["/endless"] = never_ending
    site.pages["/slow"] = slow
    site.html("/latin", "Café", "<h1>Crème brûlée</h1><p>Le café est servi à midi.</p>", charset="iso-8859-1")
    site.pages["/manual.zip"] = (200, {"Content-Type": "application/zip"}, b"PK\x03\x04")


def web_connector(site: Site, **kw: object) -> WebConnector:
    return WebConnector("site", site.base + "/", max_depth=2, timeout_seconds=1.5, max_page_bytes=300_000, **kw)  # type: ignore[arg-type]


def test_a_website_is_crawled_with_its_edge_cases(tmp_path):
    with serve_site() as site:
        build_site(site)
        kb = KnowledgeBase(tmp_path / "index", connectors=[web_connector(site)])
        stats = kb.reindex()
        [report] = stats.sources
        files = kb.files_of(["site"])
        # pages on the site, each once (the canonical address), nothing from elsewhere or /private/
        assert files == {
            f"{site.base}/",
            f"{site.base}/guide/",
            f"{site.base}/faq/",
            f"{site.base}/api/",
            f"{site.base}/latin",
        }
        assert "/private/keys" not in site.hits
        problems = "\n".join(report.problems)
        assert "redirect loop" in problems and "HTTP 500" in problems and "HTTP 404" in problems
        assert "max_page_bytes" in problems and "timeout_seconds" in problems
        assert report.ok and report.added == 5 and len(report.problems) == 5 and report.skipped >= 2
        # HTML to Markdown: code (its indentation) and tables kept, navigation and footer dropped
        [doc] = kb.search(["flux capacitor rotate"], k=1)
        assert doc["url"] == f"{site.base}/guide/" and doc["title"].startswith("Guide")
        text = " ".join(d["text"] for d in kb.search(["acme rotate force grace prod region"], k=3))
        assert "```bash\nacme rotate --force\n  --grace 24h\n```" in text and "| prod | eu-west |" in text
        assert "Navigation menu" not in text and "Copyright footer" not in text
        latin = kb.search(["crème brûlée café"], k=1)[0]
        assert latin["title"] == "Café > Crème brûlée" and "Le café est servi à midi." in latin["text"]
        assert latin["url"] == f"{site.base}/latin"

        # unchanged pages cost a conditional request (ETag); a changed page is read again
        before = dict(site.hits)
        site.html("/faq/", "FAQ", "<h1>FAQ</h1><p>The quokka quota is now 50 requests per minute.</p>")
        again = kb.reindex().sources[0]
        assert site.not_modified >= 3
        assert again.updated == 1 and again.unchanged == 4 and again.added == again.removed == 0
        assert site.hits["/guide/"] == before["/guide/"] + 1  # one request, answered 304
        assert "50 requests" in kb.search(["quokka quota"], k=1)[0]["text"]

        # a page that disappears leaves; one that answers 500 keeps its last good text
        del site.pages["/faq/"]
        site.pages["/api/"] = (500, {"Content-Type": "text/html"}, b"boom")
        third = kb.reindex().sources[0]
        assert third.removed == 1 and f"{site.base}/faq/" not in kb.files_of(["site"])
        assert "nine hours" in kb.search(["tokens expire"], k=1)[0]["text"]


def test_a_website_is_read_one_page_at_a_time_as_the_sync_asks_for_it():
    """The web source streams like the files and git sources: no page is fetched before the
    sync asks for a document, and each document costs the pages up to it, not the site."""
    with serve_site() as site:
        site.html("/", "Home", "".join(f"<p><a href='/p{i}/'>page {i}</a></p>" for i in range(30)))
        for i in range(30):
            site.html(f"/p{i}/", f"Page {i}", f"<h1>Page {i}</h1><p>The marmot count of page {i} is {i}.</p>")
        listing = web_connector(site).scan({}, {})
        assert site.hits == {}  # nothing fetched yet
        stream = iter(listing.changed)
        first, second = next(stream), next(stream)
        assert (first.title, second.title) == ("Home", "Page 0")
        assert sum(site.hits.values()) <= 4  # robots.txt, the start page, the first linked page
        rest = list(stream)
        assert len(rest) == 29 and len(listing.state["pages"]) == 31
        assert all(n == 1 for n in site.hits.values())  # each page once


def test_a_sitemap_lists_the_pages_and_a_dead_start_page_fails_the_source(tmp_path):
    with serve_site() as site:
        build_site(site)
        urls = "".join(f"<url><loc>{site.base}{p}</loc></url>" for p in ("/guide/", "/faq/", "/private/keys"))
        site.pages["/sitemap.xml"] = (
            200,
            {"Content-Type": "application/xml"},
            f"<urlset xmlns='http://www.sitemaps.org/schemas/sitemap/0.9'>{urls}</urlset>".encode(),
        )
        kb = KnowledgeBase(tmp_path / "index", connectors=[WebConnector("map", site.base + "/sitemap.xml")])
        kb.reindex()
        assert kb.files_of(["map"]) == {f"{site.base}/guide/", f"{site.base}/faq/"}
        # the whole site down: the source fails, its documents stay
        site.pages.clear()
        stats = kb.reindex()
        assert stats.failed and "sitemap" in stats.failed[0].error and stats.failed[0].documents == 2
        assert kb.search(["quokka"], k=1)[0]["url"] == f"{site.base}/faq/"
        [status] = kb.source_status()
        assert "HTTP 404" in status["last_error"] and status["last_success"] and status["documents"] == 2


# ---- files -------------------------------------------------------------------------------


def write_office_files(folder: Path) -> None:
    """A PDF (fpdf2), a DOCX (python-docx), a PPTX (python-pptx), an XLSX (openpyxl), an MDX
    file, and the bad ones: a corrupt PDF, a password-protected PDF, a 200 MB file (sparse),
    a binary file named .md."""
    from docx import Document as Docx
    from fpdf import FPDF
    from openpyxl import Workbook
    from pptx import Presentation

    folder.mkdir(parents=True, exist_ok=True)
    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", size=11)
    pdf.multi_cell(
        0, 6, "Rotating the signing key: run keyctl rotate on the vault host. The zebra key stays valid for one day."
    )
    (folder / "runbook.pdf").write_bytes(bytes(pdf.output()))
    d = Docx()
    d.add_heading("Onboarding", 1)
    d.add_paragraph("Ask Priya for a walrus badge on your first day.")
    d.add_paragraph("Bring your ferret passport", style="List Bullet")
    table = d.add_table(rows=2, cols=2)
    for (r, c), text in {(0, 0): "Tool", (0, 1): "Owner", (1, 0): "VPN", (1, 1): "IT desk"}.items():
        table.cell(r, c).text = text
    buf = io.BytesIO()
    d.save(buf)
    (folder / "onboarding.docx").write_bytes(buf.getvalue())
    p = Presentation()
    slide = p.slides.add_slide(p.slide_layouts[1])
    slide.shapes.title.text = "Quarterly goals"
    slide.placeholders[1].text = "Ship the narwhal sync feature"
    buf = io.BytesIO()
    p.save(buf)
    (folder / "goals.pptx").write_bytes(buf.getvalue())
    wb = Workbook()
    ws = wb.active
    ws.title = "Prices"
    ws.append(["Plan", "Price"])
    ws.append(["Pelican plan", 12])
    buf = io.BytesIO()
    wb.save(buf)
    (folder / "prices.xlsx").write_bytes(buf.getvalue())
    (folder / "intro.mdx").write_text("---\ntitle: Intro\n---\n\n# Welcome\n\nThe axolotl setting lives here.\n")
    (folder / "corrupt.pdf").write_bytes(b"%PDF-1.4\n1 0 obj garbage")
    locked = FPDF()
    locked.add_page()
    locked.set_font("Helvetica", size=11)
    locked.cell(0, 10, "secret")
    locked.set_encryption(owner_password="owner", user_password="user")
    (folder / "locked.pdf").write_bytes(bytes(locked.output()))
    with open(folder / "huge.txt", "wb") as f:
        f.truncate(200_000_000)  # 200 MB, sparse: costs no disk
    (folder / "binary.md").write_bytes(bytes(range(256)) * 40)


def test_office_files_and_pdfs_become_searchable_markdown_and_bad_files_are_counted(tmp_path):
    write_office_files(tmp_path / "docs")
    conn = FilesConnector("handbook", [tmp_path / "docs"], web_url="https://intranet.example/handbook/{path}")
    kb = KnowledgeBase(tmp_path / "index", connectors=[conn])
    stats = kb.reindex()
    [report] = stats.sources
    assert report.added == 5 and report.ok
    problems = dict(p.split(": ", 1) for p in report.problems)
    assert set(problems) == {"corrupt.pdf", "locked.pdf", "huge.txt", "binary.md"}
    assert "password-protected" in problems["locked.pdf"] and "200 MB" in problems["huge.txt"]
    assert "binary" in problems["binary.md"] and "PDF" in problems["corrupt.pdf"]
    for query, file in [
        ("zebra key vault", "runbook.pdf"),
        ("walrus badge", "onboarding.docx"),
        ("narwhal sync", "goals.pptx"),
        ("pelican plan price", "prices.xlsx"),
        ("axolotl setting", "intro.mdx"),
    ]:
        doc = kb.search([query], k=1)[0]
        assert doc["location"] == file, query
        assert doc["url"] == f"https://intranet.example/handbook/{file}"
    # headings and tables survive the conversion
    docx = kb.search(["walrus badge"], k=1)[0]
    assert "- Bring your ferret passport" in docx["text"]
    assert docx["title"] == "Onboarding" and "| VPN | IT desk |" in " ".join(
        d["text"] for d in kb.search(["VPN IT desk walrus"], k=2)
    )
    # nothing changed: nothing read again
    again = kb.reindex()
    assert again.sources[0].unchanged == 5 and again.embedded_chunks == 0 and again.changed_files == []
    assert again.generation == stats.generation  # nothing written: the live generation stays


# ---- git ---------------------------------------------------------------------------------


def git(repo: Path, *args: str) -> str:
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@x",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@x",
        "PATH": "/usr/bin:/bin:/usr/local/bin",
        "HOME": str(repo.parent),
    }
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True).stdout


def make_repo(root: Path) -> Path:
    repo = root / "upstream"
    (repo / "docs").mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (repo / "docs" / "deploy.md").write_text("# Deploy\n\nThe llama switch must be on before a deploy.\n")
    (repo / "docs" / "oncall.md").write_text("# On call\n\nPage the ocelot rota after midnight.\n")
    (repo / "docs" / "old.md").write_text("# Old\n\nThe dodo service is retired.\n")
    (repo / "README.md").write_text("# Readme\n\nNot under docs/.\n")
    (repo / "docs" / "logo.png").write_bytes(b"\x89PNG\r\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "first")
    return repo


def test_a_git_repository_syncs_by_commit_with_renames_and_deletions(tmp_path):
    repo = make_repo(tmp_path)
    conn = GitConnector(
        "repo",
        str(repo),
        "main",
        ["docs/"],
        cache_dir=tmp_path / "clones",
        web_url="https://git.example/acme/handbook/blob/{branch}/{path}",
    )
    kb = KnowledgeBase(tmp_path / "index", connectors=[conn])
    first = kb.reindex().sources[0]
    assert first.added == 3 and kb.files_of(["repo"]) == {"docs/deploy.md", "docs/oncall.md", "docs/old.md"}
    assert kb.search(["llama switch"], k=1)[0]["url"] == "https://git.example/acme/handbook/blob/main/docs/deploy.md"

    # the same commit: nothing read
    same = kb.reindex().sources[0]
    assert same.unchanged == 3 and same.added == same.updated == same.removed == 0

    (repo / "docs" / "deploy.md").write_text("# Deploy\n\nThe llama switch must be off during a deploy.\n")
    git(repo, "mv", "docs/oncall.md", "docs/on-call.md")
    git(repo, "rm", "-q", "docs/old.md")
    (repo / "docs" / "new.md").write_text("# New\n\nThe quetzal queue drains hourly.\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "change, rename, delete, add")
    second = kb.reindex().sources[0]
    assert (second.added, second.updated, second.removed, second.renamed, second.unchanged) == (1, 1, 1, 1, 0)
    assert second.summary().startswith("repo: 1 added, 1 updated, 1 removed, 1 renamed, 0 unchanged")
    assert kb.files_of(["repo"]) == {"docs/deploy.md", "docs/on-call.md", "docs/new.md"}
    assert "off during" in kb.search(["llama switch"], k=1)[0]["text"]
    assert kb.search(["ocelot rota"], k=1)[0]["url"].endswith("/blob/main/docs/on-call.md")
    assert not [d for d in kb.search(["dodo retired"], k=3) if d["location"] == "docs/old.md"]


def test_a_git_url_that_needs_credentials_fails_that_source_only(tmp_path):
    def unauthorized(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(401)
        handler.send_header("WWW-Authenticate", 'Basic realm="git"')
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.md").write_text("# Notes\n\nThe yak shaving budget is small.\n")
    with serve_site() as site:
        site.pages["/private.git/info/refs?service=git-upload-pack"] = unauthorized
        conn = GitConnector("private", site.base + "/private.git", "main", cache_dir=tmp_path / "clones")
        kb = KnowledgeBase(tmp_path / "index", connectors=[conn, FilesConnector("notes", [tmp_path / "notes"])])
        t0 = time.monotonic()
        stats = kb.reindex()
        assert time.monotonic() - t0 < 60  # no prompt waited for
    [failed] = stats.failed
    assert failed.name == "private" and "credentials" in failed.error
    assert kb.search(["yak shaving"], k=1)[0]["source"] == "notes"
    status = {s["name"]: s for s in kb.source_status()}
    assert "credentials" in status["private"]["last_error"] and status["notes"]["last_error"] is None


# ---- config, sync, schedule, CLI, chat ---------------------------------------------------


def test_sources_config_is_validated_naming_the_key(tmp_path):
    base = write_config(tmp_path)
    for entry, expected in [
        (
            '[[sources]]\nname = "x"\ntype = "web"\n',
            '[[sources]] entry 1 (name = "x"): url: missing (a web source needs it)',
        ),
        ('[[sources]]\nname = "x"\ntype = "ftp"\nurl = "x"\n', '[[sources]] entry 1 (name = "x"): type'),
        ('[[sources]]\nname = "x"\ntype = "git"\nrepo = "r"\nschedule = "often"\n', "not a period"),
        (
            '[[sources]]\nname = "x"\ntype = "files"\npath = "a"\n'
            '[[sources]]\nname = "x"\ntype = "files"\npath = "b"\n',
            "names an earlier [[sources]] entry",
        ),
        (
            '[[sources]]\nname = "x"\ntype = "files"\npath = "a"\n[[channels]]\nplatform = "slack"\nid = "C1"\n'
            'sources = ["y"]\n',
            "'y' is not one of",
        ),
    ]:
        path = tmp_path / "bad.toml"
        path.write_text(base.read_text() + entry)
        with pytest.raises(ConfigError) as err:
            load_settings(path)
        assert expected in str(err.value), entry


async def test_sync_is_one_at_a_time_and_the_schedule_syncs_due_sources(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "a.md").write_text("# A\n\nAlpha text.\n")
    kb = KnowledgeBase(tmp_path / "index", connectors=[FilesConnector("a", [tmp_path / "a"])])
    now = [1_000_000_000.0]
    sync = SourceSync(kb, None, {"a": 3600}, clock=lambda: now[0])
    assert sync.due() == ["a"]  # never synced
    with ReindexLock(tmp_path / "index"):  # another process is syncing this folder
        with pytest.raises(SyncBusy):
            await sync.run()
    stop = asyncio.Event()
    task = asyncio.create_task(sync.run_schedule(stop, tick_seconds=0.05))
    for _ in range(200):
        if kb.is_built():
            break
        await asyncio.sleep(0.05)
    assert kb.files_of(["a"]) == {"a.md"}
    (tmp_path / "a" / "b.md").write_text("# B\n\nBeta text.\n")
    await asyncio.sleep(0.2)
    assert kb.files_of(["a"]) == {"a.md"}  # not due yet: the period has not passed
    now[0] = time.time() + 3601
    for _ in range(200):
        if kb.files_of(["a"]) == {"a.md", "b.md"}:
            break
        await asyncio.sleep(0.05)
    stop.set()
    await task
    assert kb.files_of(["a"]) == {"a.md", "b.md"}
    assert "a (files): 2 documents" in sources_text(kb, {"a": 3600}) and "every 1h" in sources_text(kb, {"a": 3600})


@pytest.fixture
def root_logging() -> Iterator[None]:
    """``main()`` in this process sets up logging on the captured stderr: put it back after."""
    import logging

    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def test_the_cli_syncs_one_source_and_lists_them_all(tmp_path, capsys, root_logging):
    from bot.__main__ import main

    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "a.md").write_text("# A\n\nAlpha text.\n")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "b.md").write_text("# B\n\nBeta text.\n")
    config = write_config(tmp_path)
    config.write_text(
        config.read_text()
        .replace("[knowledge]\n", "[knowledge]\n", 1)
        .replace("sources = [", "patterns = ['**/*.md']\nsources = [")
        + """
[[sources]]
name = "alpha"
type = "files"
path = "a"

[[sources]]
name = "bad"
type = "git"
repo = "no-such-repo"
"""
    )
    assert main(["--config", str(config), "sync", "nope"]) == 2
    assert "Unknown source nope" in capsys.readouterr().err
    # the first sync of one source reads the others too: an index never leaves out a source
    # that can be read; the one that cannot fails (exit 1) and is not tried again by the next
    # sync of another source for 10 minutes
    assert main(["--config", str(config), "sync", "alpha"]) == 1
    out = capsys.readouterr().out
    assert "alpha: 1 added" in out and "kb: 3 added" in out and "bad: FAILED" in out, out
    assert main(["--config", str(config), "sync", "alpha"]) == 0
    out = capsys.readouterr().out
    assert "alpha: 0 added" in out and "bad" not in out and "kb:" not in out, out
    assert main(["--config", str(config), "sync"]) == 1  # a source failed: exit 1, the rest synced
    out = capsys.readouterr().out
    assert "bad: FAILED: repository not found:" in out and "alpha: 0 added" in out
    assert main(["--config", str(config), "sources", "--json"]) == 0
    rows = {r["name"]: r for r in map(json.loads, capsys.readouterr().out.splitlines())}
    assert rows["alpha"]["documents"] == 1 and rows["alpha"]["chunks"] == 1 and rows["alpha"]["last_sync"]
    assert "repository not found" in rows["bad"]["last_error"]
    assert rows[str(tmp_path / "kb")]["documents"] == 3  # [knowledge] sources keep working beside them


async def test_the_graph_answers_from_each_source_type_with_a_link_to_the_original(tmp_path):
    repo = make_repo(tmp_path)
    write_office_files(tmp_path / "handbook")
    with serve_site() as site:
        build_site(site)
        config = write_config(tmp_path)
        config.write_text(
            config.read_text()
            + f"""
[[sources]]
name = "handbook"
type = "files"
path = "handbook"
web_url = "https://intranet.example/handbook/{{path}}"

[[sources]]
name = "site"
type = "web"
url = "{site.base}/"
max_depth = 1
timeout_seconds = 1.5
max_page_bytes = 300000

[[sources]]
name = "repo"
type = "git"
repo = "{repo}"
branch = "main"
paths = ["docs/"]
web_url = "https://git.example/acme/handbook/blob/{{branch}}/{{path}}"

[[channels]]
platform = "discord"
id = "42"
sources = ["site"]
"""
        )
        settings = load_settings(config)
        async with scripted_runtime(settings) as (rt, _):
            for question, url in [
                (
                    "what stays valid for one day after rotating the zebra key?",
                    "https://intranet.example/handbook/runbook.pdf",
                ),
                ("how do I rotate the flux capacitor?", f"{site.base}/guide/"),
                (
                    "must the llama switch be on before a deploy?",
                    "https://git.example/acme/handbook/blob/main/docs/deploy.md",
                ),
            ]:
                out = await ask(rt, question, thread=url)
                [answer] = out.answers
                assert answer.sources[0].location == url, question
                assert answer.sources[0].is_url and answer.sources[0].title
            # a channel restricted to the website never cites the other sources
            from bot.chat.channels import run_scope

            scope = run_scope(settings, "discord", "42")
            assert scope["sources"] == ["site"]
            docs = rt.knowledge.search(["zebra key llama switch flux capacitor"], k=5, sources=["site"])
            assert docs and {d["source"] for d in docs} == {"site"}
            # the admin commands: sources, then a reindex of one source, summarised in chat
            out = ConsoleOut()
            await rt.service.admin("sources", actor_id="ana", is_admin=False, out=out)  # type: ignore[arg-type]
            assert "handbook (files): 5 documents" in out.notices[-1] and "repo (git): 3 documents" in out.notices[-1]
            await rt.service.admin("reindex repo", actor_id="ana", is_admin=True, out=out)  # type: ignore[arg-type]
            assert "repo: 0 added, 0 updated, 0 removed, 3 unchanged" in out.progress[-1]


async def test_admin_reindex_takes_a_knowledge_folder_by_the_name_config_toml_gives_it(tmp_path):
    config = write_config(tmp_path)
    config.write_text(config.read_text().replace(json.dumps([str(tmp_path / "kb")]), '["kb/"]'))
    async with scripted_runtime(load_settings(config)) as (rt, _):
        out = ConsoleOut()
        await rt.service.admin("reindex kb", actor_id="ana", is_admin=True, out=out)  # type: ignore[arg-type]
        assert not out.notices and out.progress[-1].startswith("Reindex done: "), (out.notices, out.progress)
        await rt.service.admin("reindex kbb", actor_id="ana", is_admin=True, out=out)  # type: ignore[arg-type]
        assert out.notices == [f"There is no source `kbb`. Sources: `{tmp_path / 'kb'}`"]


class ConsoleOut:
    """The admin command's output: notices and progress texts."""

    def __init__(self) -> None:
        self.notices: list[str] = []
        self.progress: list[str] = []

    async def post_notice(self, text: str) -> None:
        self.notices.append(text)

    async def notify_private(self, text: str) -> None:
        self.notices.append(text)

    async def update_progress(self, text: str, final: bool = False) -> None:
        self.progress.append(text)


def test_an_unknown_source_name_is_refused(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "a.md").write_text("# A\n\nAlpha.\n")
    kb = KnowledgeBase(tmp_path / "index", connectors=[FilesConnector("a", [tmp_path / "a"])])
    with pytest.raises(KnowledgeBaseError, match="not a source"):
        kb.reindex(sources=["b"])


class HashEmbeddings:
    """Deterministic unit vectors from each text's hash (a stand-in embedding model)."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        import numpy as np

        out = []
        for t in texts:
            v = np.random.default_rng(int(hashlib.sha256(t.encode()).hexdigest()[:8], 16)).standard_normal(16)
            out.append((v / np.linalg.norm(v)).tolist())
        return out

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


def test_an_edited_generation_ranks_and_embeds_as_a_rebuilt_one(tmp_path):
    """Syncs after edits write the generation as an edit of the last (rows removed, rows
    appended): keyword ranking still equals FTS5's own over the edited index, the postings
    equal those read from it afresh, every vector sits at its chunk's rowid, and a
    generation with too many gaps is written whole again."""
    import numpy as np
    from langchain_core.embeddings import Embeddings

    from graphs.knowledge import bm25
    from graphs.knowledge.splitting import index_text

    class Emb(HashEmbeddings, Embeddings):
        pass

    folder = tmp_path / "docs"
    folder.mkdir()
    words = "alpha beta gamma delta epsilon zeta theta kappa lambda sigma omega".split()
    for i in range(30):
        body = " ".join(words[(i + j) % len(words)] for j in range(40))
        (folder / f"p{i}.md").write_text(f"# Page {i}\n\n## One\n\n{body} unique{i}\n\n## Two\n\n{body[::-1]}\n")
    kb = KnowledgeBase(
        tmp_path / "index", connectors=[FilesConnector("d", [folder])], embeddings=Emb(), embedder_id="hash"
    )
    kb.reindex()
    first = kb.snapshot
    for round_ in range(3):
        for i in range(round_, 30, 7):
            (folder / f"p{i}.md").write_text(f"# Page {i}\n\nrewritten {round_} {words[i % 11]} unique{i} omega\n")
        (folder / f"p{29 - round_}.md").unlink()
        (folder / f"new{round_}.md").write_text(f"# New {round_}\n\nfresh lambda sigma text{round_}\n")
        stats = kb.reindex()
        snap = kb.snapshot
        assert stats.reused_chunks > 0
        assert snap.max_rowid > snap.count or round_ == 2  # edited, not rewritten (round 2: gaps over 25 %)
        for q in ["alpha beta", "omega rewritten", "unique3", "fresh sigma", "kappa lambda theta", "text1 zeta"]:
            assert snap.keyword(q, 20) == snap.keyword_fts(q, 20), q
        again = bm25.KeywordPostings.from_fts(snap._conn, generation=snap.directory.name)
        live = {
            t: (
                list(snap.postings.rows[snap.postings.indptr[i] : snap.postings.indptr[i + 1]]),
                list(snap.postings.freqs[snap.postings.indptr[i] : snap.postings.indptr[i + 1]]),
            )
            for i, t in enumerate(snap.postings.terms)
            if snap.postings.indptr[i + 1] > snap.postings.indptr[i]
        }
        fresh = {
            t: (
                list(again.rows[again.indptr[i] : again.indptr[i + 1]]),
                list(again.freqs[again.indptr[i] : again.indptr[i + 1]]),
            )
            for i, t in enumerate(again.terms)
        }
        assert live == fresh and snap.postings.count == again.count
        assert np.allclose(snap.postings.lengths[: len(again.lengths)], again.lengths)
        rows = snap._conn.execute("SELECT rowid, file, title, text, source, url FROM chunks").fetchall()
        from graphs.knowledge.common import Chunk

        for rowid, file, title, text, _, _ in rows:
            expected = Emb().embed_query(index_text(Chunk(file, title, text, "")))
            assert np.allclose(snap.vectors[rowid - 1], expected, atol=1e-6)
    assert kb.files_of(["d"]) == {p.name for p in folder.glob("*.md")} and "p28.md" not in kb.files_of(["d"])
    assert first.directory.name != kb.snapshot.directory.name
    # many edits: the gaps pass the limit and the next generation is compacted
    for i in range(25):
        (folder / f"p{i}.md").write_text(f"# Page {i}\n\nall new {i}\n")
    kb.reindex()
    kb.reindex()
    (folder / "p0.md").write_text("# Page 0\n\nonce more\n")
    kb.reindex()
    assert kb.snapshot.max_rowid - kb.snapshot.count <= kb.snapshot.max_rowid * KnowledgeBase.MAX_GAP_SHARE
