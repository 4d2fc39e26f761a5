"""No piece of a link is left in documents or answers: every kind of link a real page holds
(an address with parentheses, a badge image in a link, a link around code or around a card of
blocks, a heading's permalink, an autolink, a script in a link, brackets in a link's text)
becomes one whole Markdown link or its words, through the real conversion, the real sync
(files source, chunking) and the offline composer that quotes the documents."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from graphs.extractive import Extractive, TextEmbedder, clean_prose
from graphs.knowledge import KnowledgeBase
from graphs.knowledge.convert import convert
from graphs.knowledge.sources import clean_markdown
from graphs.markdown_links import link_texts, plain_links
from tests.conftest import fetched_corpus

PAGES = Path(__file__).parent / "data" / "links"
# A Sphinx page (headerlinks, a card link of blocks, badges, scripts) as the generator writes it
SPHINX_PAGE = (PAGES / "consensus.html").read_text()

# Markdown as people write it: the same kinds, plus inline HTML scripts
MARKDOWN_PAGE = (PAGES / "deploy.md").read_text()

DEBRIS = re.compile(r"\]\(|\)\]|</?script|</?[a-z]+>|¶|\[!\[|^\)|\s\)|\(\s*$|javascript:|data:image")


def debris(text: str) -> list[str]:
    """Pieces of links, scripts or tags left in prose (code spans set aside)."""
    prose = re.sub(r"`[^`]*`", "`code`", text)
    found = [m.group(0) for m in DEBRIS.finditer(prose)]
    # a stray ")" with no "(" before it in its sentence
    for sentence in re.split(r"(?<=[.!?])\s+", prose):
        if sentence.count(")") > sentence.count("("):
            found.append(sentence)
    return found


def test_html_links_of_every_kind_become_whole_links_or_words():
    md = convert(SPHINX_PAGE.encode(), "consensus.html").text
    assert "¶" not in md and "#consensus" not in md and "javascript" not in md.lower()
    assert re.search(r"9 seconds by default +on every node", md)  # the footnote's marker [2] is not a citation
    # an address with parentheses or spaces stays one link: percent-encoded where Markdown needs it
    assert "[the Raft algorithm](https://en.wikipedia.org/wiki/Raft_%28algorithm%29)" in md
    assert "[Paxos paper](https://example.com/papers/paxos%20made%20simple%20%282001%29.pdf)" in md
    # a link to nowhere a reader can follow is its words; a card of blocks is its blocks
    assert "with [the dashboard button]" not in md and "opens with the dashboard button in the console" in md
    assert "### Backups\n\nBackups are written to object storage every night at 02:00." in md
    assert "(/guides/backup/)" not in md
    # a picture carried in the page is its alt text, not kilobytes of base64
    assert "The inline logo storage logo marks supported releases." in md
    assert "track(" not in md
    # every link the Markdown holds is whole: removing them leaves no bracket behind
    assert not re.search(r"[\[\]]", re.sub(r"`[^`]*`", "", plain_links(md))), plain_links(md)


@pytest.mark.parametrize(
    "html, words",
    [
        ('<p>See <a href="https://x.test/n">the [draft note</a> now.</p>', r"See the \[draft note now."),
        (
            '<p>Logo <a href="https://x.test"><img src="l.png" alt="[beta] logo"></a> here.</p>',
            "Logo (beta) logo here.",
        ),
        ('<p><a href="https://x.test/a b">spaced</a> and <a href="">empty</a>.</p>', "spaced and empty."),
    ],
)
def test_html_link_texts_with_brackets_stay_one_link(html, words):
    md = convert(html.encode(), "p.html").text
    assert plain_links(md).strip() == words, md


# links as CommonMark reads them: nested parentheses, an image in a link, brackets and code in a
# link text, titles, <addresses>, autolinks; and what is no link
COMMONMARK_LINKS = [
    ("[Raft](https://en.wikipedia.org/wiki/Raft_(algorithm)) is used", "Raft is used"),
    ("see [f](https://x.test/f(a(b))) now", "see f now"),
    ("[![build](https://ci.test/b.svg)](https://ci.test) ok", "build ok"),
    ("[`f(x)`](https://api.test/f) returns", "`f(x)` returns"),
    ("[a [nested] link](https://x.test) here", "a [nested] link here"),
    ('[t](https://x.test "a (b) title") end', "t end"),
    ("[t](<https://x.test/a b (c)>) end", "t end"),
    ("mail <ops@example.com> or <https://x.test/a_(b)>", "mail ops@example.com or https://x.test/a_(b)"),
    ("keep `[x](y)` in code", "keep `[x](y)` in code"),
    ("arr[0] and (x) and [y] stay", "arr[0] and (x) and [y] stay"),
    ("a [broken](link and more", "a [broken](link and more"),
    (r"an \[escaped](x) bracket", r"an \[escaped](x) bracket"),
]


@pytest.mark.parametrize("markdown, words", COMMONMARK_LINKS)
def test_plain_links_reads_links_as_commonmark_does(markdown, words):
    assert plain_links(markdown) == words


def test_clean_prose_leaves_no_script_tag_or_link_piece():
    text = 'Run [<script>alert("x")</script>the checks](https://x.test/a_(b)) <style>p{}</style>first.'
    assert clean_prose(text) == "Run the checks first."
    assert clean_prose("The `<script>` tag stays in code.") == "The `<script>` tag stays in code."
    # character references read as what they stand for, with their ";" only, and not in code
    assert clean_prose("Use&nbsp;the &lt;b&gt; tag &amp; `&lt;i&gt;` &#8212; see ?a=1&copy=2&lang=en.") == (
        "Use the <b> tag & `&lt;i&gt;` — see ?a=1&copy=2&lang=en."
    )


def test_markdown_cleaning_drops_scripts_and_link_only_lines_whole():
    _, md = clean_markdown(MARKDOWN_PAGE)
    assert "window.analytics" not in md and "<script type" not in md
    assert "ci.example.com/badge" not in md  # the badge row is navigation
    assert "The release train leaves every Tuesday" in md
    assert link_texts("[![CI](b.svg)](ci) · [Docs](https://d.test/a_(b))") == ["CI", "Docs"]
    assert link_texts("| [a](x) | [b](y) |") is not None  # only links: the caller checks what starts the line
    assert link_texts("see [a](x) now") is None


def real_pages_index(tmp_path) -> KnowledgeBase:
    """A knowledge base of the Markdown page and the Sphinx HTML page above, synced."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "deploy.md").write_text(MARKDOWN_PAGE)
    (src / "consensus.html").write_text(SPHINX_PAGE)
    kb = KnowledgeBase(tmp_path / "index", [src], patterns=["**/*.md", "**/*.html"])
    kb.reindex()
    return kb


def test_headings_with_links_give_plain_source_titles(tmp_path):
    kb = real_pages_index(tmp_path)
    titles = {c.title for name in ("deploy.md", "consensus.html") for c, _ in kb.snapshot.file_chunks(name)}
    assert "Deploying > Freeze periods" in titles and "Consensus — Storage Guide > Consensus" in titles, titles
    assert not any(debris(t) for t in titles), titles


QUESTIONS = [
    ("how does the cluster elect a leader and replicate writes?", "the Raft algorithm"),
    ("what is the call that forces a snapshot?", "`snapshot()`"),
    ("what does the quorum rule follow?", "Paxos paper"),
    ("how long do leader leases last?", "9 seconds"),
    ("where is write throughput described?", "https://perf.example.com/write"),
    ("how do I open the cluster dashboard?", "the dashboard button"),
    ("where is replication lag plotted?", "on the lag board"),
    ("when are backups written to object storage?", "02:00"),
    ("when do deploys go through the blue-green switch?", "blue-green switch"),
    ("how do rollbacks work, which command?", "deploy --rollback"),
    ("what does every release note link?", "RFC 42"),
    ("where are release windows listed?", "https://calendar.example.com/releases"),
    ("what does the status page embed?", "widget"),
    ("when does the release train leave?", "14:00"),
    ("when do code freezes start?", "first of December"),
]


def test_answers_quoting_real_pages_carry_no_link_debris(tmp_path):
    kb = real_pages_index(tmp_path)
    brain = Extractive(TextEmbedder(None), kb)
    for question, expected in QUESTIONS:
        docs = brain.retrieve([question], 3)
        answer = brain.compose([question], docs)
        prose = re.sub(r"\[\d+\]", "", answer)  # the citations
        assert expected in prose, (question, answer)
        assert debris(prose) == [], (question, answer)


DOCSITES = Path(__file__).parent / "data" / "docsites"
LEFTOVERS = re.compile(
    r"\]\(|<https?:|&(?:[a-z]+|#\d+);|</?(?:a|div|span|h\d|img|p|script|style|br|track)\b[^>]*>", re.I
)


def quotable_leftovers(tmp_path: Path, folder: Path) -> tuple[int, int, list[str]]:
    """``(pages, sentences, leftovers)``: every sentence the offline composer can quote from
    the Markdown pages of ``folder``, read through the real sync, and those holding a piece of
    a link, an autolink's brackets, an HTML tag or a character reference."""
    from graphs.extractive import split_units

    kb = KnowledgeBase(tmp_path / "index", [folder])
    kb.reindex()
    files = sorted(str(p.relative_to(folder)) for p in folder.rglob("*.md"))
    found, units = [], 0
    for name in files:
        for chunk, _ in kb.snapshot.file_chunks(name):
            for unit in split_units(chunk.text):
                units += 1
                prose = re.sub(r"`[^`]*`", "", unit.text)
                if not unit.code and LEFTOVERS.search(prose):
                    found.append(f"{name}: {unit.text[:200]}")
    return len(files), units, found


@pytest.mark.parametrize("site", ["mkdocs", "site", "runbooks"])
def test_documentation_quotes_without_link_or_tag_leftovers(tmp_path, site):
    """Pages written like three kinds of documentation sites (MkDocs with an HTML banner and
    badges, a Hugo manual with shortcodes and reference links, runbooks with link lists):
    no piece of a link, no autolink brackets, no HTML tag or character reference (``&nbsp;``)
    in any sentence the composer can quote."""
    pages, units, found = quotable_leftovers(tmp_path, DOCSITES / site)
    assert pages >= 4 and units > 40 and found == [], found[:10]


@pytest.mark.parametrize("corpus", ["httpx-docs", "hugo-docs", "prometheus-runbooks"])
def test_real_documentation_quotes_without_link_or_tag_leftovers(tmp_path, corpus):
    """The same on three real documentation sets (MkDocs, Hugo with shortcodes, runbooks).
    Before: 41 references (``&nbsp;``), 7 tags (``<h1 align=…>``), 6 autolinks in these three."""
    pages, units, found = quotable_leftovers(tmp_path, fetched_corpus(corpus))
    assert pages > 20 and units > 500 and found == [], found[:10]
