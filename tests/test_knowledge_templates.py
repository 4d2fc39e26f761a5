"""Template syntax of documentation generators is removed from what the knowledge base
indexes, and the text a reader of the built page sees stays: on real pages of each kind
(Liquid on the 18F handbook, Hugo shortcodes on Hugo's docs, MDX on Docusaurus' docs,
Jinja on MkDocs-macros pages; tests/data/templates/README.md names their sources).
Code is content: a template tag shown in a code block stays, only its escapes go."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from graphs.knowledge import KnowledgeBase
from graphs.knowledge.templates import kind_of_file, strip_templates

DATA = Path(__file__).parent / "data" / "templates"
PAGES = sorted(p for p in DATA.iterdir() if p.suffix in (".md", ".mdx") and p.name != "README.md")
SYNTAX = re.compile(
    r"\{%.*?%\}|\{\{.*?\}\}|\{#.*?#\}|^\s*(?:import|export)\s.*\bfrom\b|<[A-Z][\w.]*[\s/>]|\{/\*", re.S | re.M
)


def prose_of(markdown: str) -> str:
    """``markdown`` without fenced code blocks and inline code spans."""
    out, fence = [], None
    for line in markdown.split("\n"):
        m = re.match(r"^\s*(`{3,}|~{3,})", line)
        if fence is None and m:
            fence = m.group(1)
            continue
        if fence is not None:
            if line.strip().startswith(fence) and not line.strip()[len(fence) :].strip():
                fence = None
            continue
        out.append(line)
    return re.sub(r"`+[^`\n]*`+", "", "\n".join(out))


def code_blocks(markdown: str) -> list[str]:
    return re.findall(r"^\s*```[^\n]*\n(.*?)^\s*```", markdown, re.S | re.M)


def stripped(name: str) -> str:
    return strip_templates((DATA / name).read_text(), kind_of_file(name))


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_no_template_syntax_is_left_in_the_prose_of_real_pages(page):
    text = strip_templates(page.read_text(), kind_of_file(page.name))
    assert SYNTAX.findall(prose_of(text)) == []
    assert len(text) > 0.5 * len(page.read_text())  # the text around the syntax stays


def test_liquid_tags_keep_what_the_reader_sees():
    design = stripped("18f-design-chapter.md")
    assert "- #18f-design —\u00a0Our home base for chapter conversation and news" in design
    assert "[guilds](/working-groups-and-guilds-101)" in design  # a link's target tag is its address
    travel = stripped("18f-travel-guide.md")
    assert "Updated Travel Guidance for GSA Employees (07/13/2021)" in travel  # the alert's title
    assert "GSA published [updated travel guidance](/july-13-travel-guidance/) for all employees." in travel
    shortcodes = stripped("18f-shortcodes.md")
    assert "\nan ocelot\n" in shortcodes  # an image tag becomes its alt text, the file name goes
    assert "Don't forget the alt text!" in shortcodes
    assert "If your image adds context for sighted users" in shortcodes  # a block tag's inner text


def test_liquid_in_code_blocks_is_content_and_only_its_escapes_go():
    shortcodes = stripped("18f-shortcodes.md")
    blocks = code_blocks(shortcodes)
    # {% raw %}...{% endraw %} is how the page shows a tag: the built page shows the tag
    assert '{% image "_img/ocelot.png"\n  "ocelot" %}\n' in blocks
    assert '{% page "updating-the-handbook/components" %}\n' in blocks
    mathesar = stripped("mkdocs-macros-mathesar.md")
    assert "raw/{{mathesar_version}}/docker-compose.yml" in mathesar  # in its code block, untouched
    assert "{% include" not in mathesar and "{: #steps}" not in mathesar and "## Step-by-Step Guide\n" in mathesar


def test_hugo_shortcodes():
    media = stripped("hugo-media-types.md")
    assert "media type" in media  # glossary-term keeps its term
    assert "datatable" not in media  # a data table's keys are not text
    assert "```hugo\n[mediaTypes.'text/html']\nsuffixes = ['htm','html']\n```" in media  # code-toggle is code
    highlight = stripped("hugo-highlight.md")
    assert "{{< highlight LANG OPTIONS >}}" in highlight  # the escaped form {{</* */>}} shows as the shortcode
    assert "```go\n" in highlight
    assert "{{</*" not in highlight


def test_mdx_imports_comments_and_components():
    tabs = stripped("docusaurus-tabs.mdx")
    assert "import Tabs from '@theme/Tabs';\nimport TabItem" in tabs  # the jsx example block stays whole
    assert "Windows: Use Ctrl + C to copy." in tabs and "MacOS: Use Command + V to paste." in tabs
    assert "This is an apple 🍎" in prose_of(tabs)
    assert "## Syncing tab choices\n" in tabs
    install = stripped("docusaurus-installation.mdx")
    assert "## Requirements\n" in install and "UpgradeGuide" not in install
    assert "```bash npm2yarn\nnpx create-docusaurus@latest my-website classic\n```" in install
    assert "<summary>Alternative installation commands</summary>" in install  # HTML is not MDX syntax


def test_plain_text_and_unknown_syntax_are_left_alone():
    text = "Use {braces} and {{ in prose }} carefully"
    assert strip_templates(text, "text") == text
    assert strip_templates("a {b} c", "markdown") == "a {b} c"
    assert strip_templates("no template here", "mdx") == "no template here"


def test_the_knowledge_base_indexes_pages_without_template_syntax(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for page in PAGES:
        (src / page.name).write_text(page.read_text())
    kb = KnowledgeBase(tmp_path / "index", [src], chunk_size=800, chunk_overlap=20)
    kb.reindex()
    hits = kb.search(["which slack channel is the design chapter's home base"], 3)
    assert any("#18f-design" in h["text"] for h in hits)
    for page in PAGES:
        for chunk, _ in kb.snapshot.file_chunks(page.name):
            assert SYNTAX.findall(prose_of(chunk.text)) == [], (page.name, chunk.text[:300])


def test_a_markdown_page_importing_components_is_read_as_mdx_wherever_the_import_is():
    page = (
        "# Shows\n\nSeason folders are named `Season 01`.\n\n"
        "import VideoMetadataProviders from './\\_video-metadata-providers.md';\n\n"
        "<VideoMetadataProviders />\n\nDo not mix Season folders with episodes.\n"
    )
    text = strip_templates(page, kind_of_file("shows.md"))
    assert "import" not in text and "<VideoMetadataProviders" not in text
    assert "Season folders are named `Season 01`." in text and "Do not mix Season folders with episodes." in text
    # plain Markdown with code that imports, or prose about imports, is not MDX
    for plain in (
        "# Use\n\n```js\nimport React from 'react';\n```\n\n<Tabs> is a component.\n",
        "# Python\n\nimport os from the standard library.\n\nimport json\n",
        'Go:\n\nimport "fmt"\n\n<Tabs> stays.\n',
    ):
        assert strip_templates(plain, "markdown") == plain
