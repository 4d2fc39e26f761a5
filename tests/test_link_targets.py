"""Links to addresses no reader can follow keep their words and lose the address: a target of
70,000 characters (``http://x/aaaa…``), one that is no address (``http://[::1``), a picture
carried in the page as megabytes of base64 (``data:image/png;base64,…``), as a link, an image,
an autolink, a reference or bare words. Before, such a page was about 79 chunks of
``aaaa…`` in the index and in answers. Through the real conversion and Markdown cleaning,
and through a real ``threadwise sync`` and ``threadwise ask`` of a folder and of a web site
(a local HTTP server)."""

from __future__ import annotations

import json
import re
import sqlite3
import time
from pathlib import Path

import pytest

from graphs.knowledge.connectors import fetch
from graphs.knowledge.convert import convert
from graphs.knowledge.sources import clean_markdown
from graphs.link_targets import MAX_URL_CHARS, drop_long_addresses, usable_address
from graphs.markdown_links import drop_unusable_targets
from tests.fakes.bot_process import threadwise
from tests.test_conversion_limits import sync_folder
from tests.test_link_debris import COMMONMARK_LINKS
from tests.test_sources import serve_site
from tests.test_sources_safety import files_config
from tests.test_sources_web import put

HUGE = "http://x/" + "a" * 70_000
PNG = "data:image/png;base64," + "iVBORw0KGgoAAAANSUhEUg" * 100_000  # 2.2 MB of a picture
JUNK = re.compile(r"a{100}|(?:iVBORw0KGgoAAAANSUhEUg){3}")

# the same facts in both formats; each sentence holds one kind of address
OTTER_HTML = f"""<html><head><title>Otters</title></head><body><main>
<h1>Otters</h1>
<p>Sea otters hold hands while they sleep, read <a href="{HUGE}">the field guide</a> first.</p>
<p>The keeper is <a href="{HUGE}">{HUGE}</a> Marisol.</p>
<p>A photo: <img src="{PNG}" alt="two otters asleep"> taken at dawn.</p>
<p>Bare {HUGE} text, <a href="http://[::1/den">the den map</a>, <a href="http://zoo:port/">the pool</a>.</p>
<p>Feeding is at <a href="/feeding.html">four o'clock</a>.</p>
</main></body></html>"""

OTTER_MD = f"""# Otters

Sea otters hold hands while they sleep, read [the field guide]({HUGE}) first.

The keeper is <{HUGE}> Marisol.

A photo: ![two otters asleep]({PNG}) taken at dawn.

Bare {HUGE} text, [the den map](http://[::1/den), [the pool](http://zoo:port/), [the map][map].

Feeding is at [four o'clock](feeding.md), see `[x]({HUGE[:40]})`.

[map]: {HUGE}
"""

WORDS = [
    "Sea otters hold hands while they sleep, read the field guide first.",
    "The keeper is  Marisol.",
    "A photo: two otters asleep taken at dawn.",
    "the den map, the pool",
]


def test_the_limit_is_one_constant_shared_with_the_crawler():
    assert fetch.MAX_URL_CHARS is MAX_URL_CHARS == 8_190
    assert fetch.resolve("http://x/", "/" + "a" * (MAX_URL_CHARS - 9)) is not None
    assert fetch.resolve("http://x/", "/" + "a" * MAX_URL_CHARS) is None
    assert usable_address("http://x/" + "a" * (MAX_URL_CHARS - 9)) and not usable_address(HUGE)
    for bad in ("", "http://[::1/x", "http://h:port/", "data:image/png;base64,iVBOR", " javascript:go()", "VBScript:x"):
        assert not usable_address(bad), bad
    for good in ("../a.md", "#part", "mailto:a@b.example", "https://en.wikipedia.org/wiki/Raft_(algorithm)"):
        assert usable_address(good), good


def test_html_links_and_images_to_unusable_addresses_keep_their_words():
    md = convert(OTTER_HTML.encode(), "otters.html").text
    assert len(md) < 1000 and not JUNK.search(md), md[:2000]
    for words in WORDS:
        assert words in md, (words, md)
    assert re.search("Bare +text", md) and "[four o'clock](/feeding.html)" in md, md  # a usable link stays whole


def test_markdown_links_images_autolinks_and_references_to_unusable_addresses_keep_their_words():
    title, md = clean_markdown(OTTER_MD)
    assert len(md) < 1000 and not JUNK.search(md), md[:2000]
    for words in WORDS:
        assert words in md, (words, md)
    assert ", the map." in md and "[four o'clock](feeding.md)" in md, md
    assert f"`[x]({HUGE[:40]})`" in md  # code is never touched


@pytest.mark.parametrize(
    "markdown, kept",
    [
        (f"[![build]({PNG})](https://ci.test) ok", "[build](https://ci.test) ok"),  # the link around it stays
        (f"[a]({HUGE})[b]({HUGE}) c", "ab c"),  # two in one run of text
        (f"see (<{HUGE}>) and ({HUGE}).", "see () and ."),
        (f'<img src="{PNG}" alt="x">', '<img src="" alt="x">'),  # an HTML attribute in Markdown
        (f"[a]({HUGE} 'a title') b", "a b"),
        (
            "[a](https://x.test/f(a(b))) and ![i](data:image/gif;base64,R0lG) [e](f)",
            "[a](https://x.test/f(a(b))) and i [e](f)",
        ),
        (
            "long words " + "ab" * 9_000 + " stay",
            "long words " + "ab" * 9_000 + " stay",
        ),  # no address: not junk of this kind
    ],
)
def test_markdown_cleaning_cases(markdown, kept):
    assert drop_unusable_targets(markdown) == kept
    assert clean_markdown(markdown)[1] == kept


@pytest.mark.parametrize("markdown, words", [(m, w) for m, w in COMMONMARK_LINKS if "<" not in m.replace("](<", "")])
def test_links_to_unusable_addresses_are_read_as_every_link_is_read(markdown, words):
    """The scan for unusable addresses finds a link where the link reader does (nested
    parentheses, an image in a link, brackets or code in its text, a title, an <address>):
    with usable addresses the text stays as written; with the same addresses made unusable
    each link becomes its words, as :func:`plain_links` reads them."""
    assert drop_unusable_targets(markdown) == markdown
    assert drop_unusable_targets(markdown.replace("https://", "data:")) == words


def test_code_keeps_what_it_holds():
    for text in (f"# Code\n\n```\n[a]({HUGE})\n![b]({PNG})\n```\n", f"# Code\n\n    <{HUGE}>\n"):
        assert clean_markdown(text)[1] == text


@pytest.mark.parametrize(
    "shape",
    [
        "[a](" * 50_000,  # every link's address runs on to the end
        "[" * 300_000,  # brackets that never close
        "``x`" * 50_000,  # code spans that never close
        ("[a](" + "b" * 9_000 + " ") * 100,
        ("[a](http://x/" + "a" * 9_000 + ")") * 100,
        "a:" * 300_000,
        f"x {PNG} " * 3,
    ],
)
def test_any_shape_of_text_is_read_in_linear_time(shape):
    t0 = time.perf_counter()
    drop_unusable_targets(shape)
    drop_long_addresses(shape)
    assert time.perf_counter() - t0 < 10  # 0.1-1 s each; a scan from each bracket took minutes


def chunk_texts(data: Path) -> list[str]:
    """Every chunk's text in the live index generation under ``data`` (its SQLite chunk table)."""
    texts: list[str] = []
    for db in data.glob("index*/*/*.sqlite"):
        with sqlite3.connect(db) as con:
            tables = {r[0] for r in con.execute("select name from sqlite_master where type = 'table'")}
            if "chunks" in tables:
                texts += [r[0] for r in con.execute("select text from chunks")]
    return texts


def ask(tmp_path: Path, cfg: Path, question: str) -> dict:
    asked = threadwise("ask", "--json", question, "--config", str(cfg), cwd=tmp_path, timeout=200)
    assert asked.returncode == 0, asked.stderr[-2000:]
    return json.loads(asked.stdout)


def test_a_synced_folder_of_such_pages_gives_their_words_and_no_junk(tmp_path):
    synced, _ = sync_folder(tmp_path, {"otters.html": OTTER_HTML.encode(), "otters.md": OTTER_MD.encode()})
    # 3 documents of a few sentences each: one chunk each (before: 79 chunks per page)
    assert "docs: 3 added, 0 updated, 0 removed, 0 unchanged (3 documents, 3 chunks" in synced.stdout, synced.stdout
    texts = chunk_texts(tmp_path / "data")
    assert len(texts) == 3 and not [t for t in texts if JUNK.search(t)], [t[:200] for t in texts]
    answer = ask(tmp_path, tmp_path / "config.toml", "Do sea otters hold hands while they sleep?")
    assert "hold hands while they sleep" in answer["answer"] and not JUNK.search(answer["answer"]), answer
    assert answer["sources"][0] in ("otters.html", "otters.md"), answer


def test_a_synced_web_site_with_such_a_page_gives_its_words_and_no_junk(tmp_path):
    with serve_site() as site:
        body = OTTER_HTML.split("<main>", 1)[1].split("</main>", 1)[0]
        put(site, "/", "Otters", body)
        put(site, "/feeding.html", "Feeding", "<h1>Feeding</h1><p>Keepers feed the otters clams.</p>")
        (tmp_path / "kb").mkdir()
        cfg = files_config(tmp_path, "kb")
        cfg.write_text(cfg.read_text() + f'\n[[sources]]\nname = "site"\ntype = "web"\nurl = "{site.base}/"\n')
        synced = threadwise("sync", "--config", str(cfg), cwd=tmp_path, timeout=200)
        assert synced.returncode == 0, synced.stdout + synced.stderr[-2000:]
        assert "site: 2 added, 0 updated, 0 removed, 0 unchanged (2 documents, 2 chunks" in synced.stdout, synced.stdout
        assert not any(len(path) > MAX_URL_CHARS for path in site.hits), "an overlong address was requested"
        texts = chunk_texts(tmp_path / "data")
        assert texts and not [t for t in texts if JUNK.search(t)], [t[:200] for t in texts]
        answer = ask(tmp_path, cfg, "Do sea otters hold hands while they sleep?")
    assert "hold hands while they sleep" in answer["answer"] and not JUNK.search(answer["answer"]), answer
    assert answer["sources"] == [f"{site.base}/"], answer
