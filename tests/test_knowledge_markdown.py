"""What the knowledge base keeps of Markdown: code byte for byte (fenced and indented,
Python, YAML, tabs), split fences reopened, table headers on every chunk, and none of
front matter, comments, admonition markers or link-only lines."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from graphs.knowledge import KnowledgeBase
from graphs.knowledge.splitting import fence_indented_code
from tests.conftest import fetched_corpus

PYTHON = "def main():\n    if ready():\n        run()\n    else:\n        for i in range(3):\n            wait(i)\n"
YAML = "services:\n  api:\n    image: app:1\n    env:\n      - REDIS_URI=redis://r\n  db:\n    image: postgres\n"
TABS = "all:\n\tgo build ./...\n\tif [ -f x ]; then \\\n\t\techo yes; \\\n\tfi\n"


def build(tmp_path: Path, files: dict[str, str], chunk_size: int = 1000) -> KnowledgeBase:
    src = tmp_path / "src"
    for name, text in files.items():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_text(text)
    kb = KnowledgeBase(tmp_path / "index", [src], chunk_size=chunk_size, chunk_overlap=20)
    kb.reindex()
    return kb


def chunks_of(kb: KnowledgeBase, file: str) -> list[tuple[str, str]]:
    return [(c.title, c.text) for c, _ in kb.snapshot.file_chunks(file)]


@pytest.mark.parametrize("lang,code", [("python", PYTHON), ("yaml", YAML), ("makefile", TABS)])
def test_fenced_code_is_kept_byte_for_byte(tmp_path, lang, code):
    doc = f"# Setup\n\nRun this:\n\n```{lang}\n{code}```\n\nThen restart.\n"
    kb = build(tmp_path, {"setup.md": doc})
    texts = [t for _, t in chunks_of(kb, "setup.md")]
    assert any(f"```{lang}\n{code}```" in t for t in texts)
    # and what search returns is the same text
    hit = kb.search(["setup run restart " + code.split()[0]], 1)[0]
    assert f"```{lang}\n{code}```" in hit["text"]


def test_indented_code_and_code_in_lists_keep_indentation(tmp_path):
    indented = "".join("    " + line + "\n" for line in PYTHON.splitlines())
    listed = "".join("   " + line + "\n" for line in PYTHON.splitlines())
    doc = (
        f"# Guide\n\nAn indented block:\n\n{indented}\nA list:\n\n1. Write it:\n\n   ```python\n{listed}   ```\n"
        "2. Run it.\n"
    )
    kb = build(tmp_path, {"guide.md": doc})
    text = "\n\n".join(t for _, t in chunks_of(kb, "guide.md"))
    assert indented.rstrip("\n") in text
    assert f"   ```python\n{listed}   ```" in text


def _fence_bodies(text: str) -> list[tuple[str, str]]:
    """(opening line, body) of each fenced block; fails on an unclosed fence."""
    out = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = re.match(r"^( *)(`{3,}|~{3,})(.*)$", lines[i])
        if m:
            j = i + 1
            while j < len(lines) and lines[j].strip() != m.group(2):
                j += 1
            assert j < len(lines), f"unclosed fence in chunk:\n{text}"
            out.append((lines[i], "\n".join(lines[i + 1 : j])))
            i = j
        i += 1
    return out


@pytest.mark.parametrize(
    "code,opening", [(PYTHON * 12, '```python title="main.py"'), (YAML * 10, "~~~~yaml"), (TABS * 15, "```makefile")]
)
def test_long_fence_is_split_with_the_fence_reopened(tmp_path, code, opening):
    closing = opening.split("yaml")[0] if opening.startswith("~") else "```"
    doc = f"# Long\n\nIntro text.\n\n{opening}\n{code}{closing}\n\nAfter the code.\n"
    kb = build(tmp_path, {"long.md": doc}, chunk_size=300)
    chunks = [t for _, t in chunks_of(kb, "long.md")]
    assert len(chunks) > 3
    fenced = [f for t in chunks for f in _fence_bodies(t)]
    assert len(fenced) > 2 and all(o == opening for o, _ in fenced)  # every piece reopened with its info
    assert "\n".join(body for _, body in fenced) == code.rstrip("\n")  # nothing lost, nothing changed
    assert all(len(t) <= 300 for t in chunks)


def test_long_table_repeats_its_header_in_every_chunk(tmp_path):
    header = "| Setting | Default | Meaning |\n|---|:---:|---|"
    rows = [f"| option_{i} | {i * 10} | what option {i} does to the bot |" for i in range(60)]
    doc = "# Settings\n\nAll settings:\n\n" + header + "\n" + "\n".join(rows) + "\n\nThe end.\n"
    kb = build(tmp_path, {"settings.md": doc}, chunk_size=400)
    chunks = [t for _, t in chunks_of(kb, "settings.md")]
    with_rows = [t for t in chunks if "| option_" in t]
    assert len(with_rows) > 3
    assert all(header in t for t in with_rows)
    kept = [line for t in with_rows for line in t.splitlines() if line.startswith("| option_")]
    assert kept == rows  # every row once, in order
    # a question about a late row gets a chunk that says which column is which
    hit = kb.search(["option_57"], 1)[0]
    assert "| option_57 |" in hit["text"] and hit["text"].startswith(header)


def test_front_matter_comments_admonitions_and_link_only_lines_are_not_indexed(tmp_path):
    doc = """---
title: Deployment guide
sidebar_position: 3
tags: [deploy, ops]
---
<!-- TODO: rewrite this section before the release -->
# Container

[![Build](https://ci.example.com/badge.svg)](https://ci.example.com)
[Edit this page](https://github.com/example/docs/edit/main/deploy.md)

!!! warning "Data loss"
    The container forgets its queue when it restarts.

:::tip
Start Redis first.
:::

> [!NOTE]
> Postgres 15 or later is required.

See also:

- [Persistence](persistence.md)

For the details read
[the checkpoint guide](persistence.md#checkpoints)
which covers restarts.
"""
    kb = build(tmp_path, {"deploy.md": doc})
    chunks = chunks_of(kb, "deploy.md")
    text = "\n".join(t for _, t in chunks)
    for gone in (
        "sidebar_position",
        "TODO",
        "<!--",
        "!!!",
        ":::",
        "[!NOTE]",
        "badge.svg",
        "Edit this page",
        "github.com",
        "persistence.md",
        "---",
    ):
        assert gone not in text, gone
    for kept in (
        "Data loss",
        "The container forgets its queue when it restarts.",
        "Start Redis first.",
        "Postgres 15 or later is required.",
        "Persistence",
        "For the details read\nthe checkpoint guide\nwhich covers restarts.",
    ):
        assert kept in text, kept
    assert "    The container" not in text  # admonition body is text, not an indented code block
    assert all(title.startswith("Deployment guide > Container") for title, _ in chunks)
    assert kb.search(["sidebar_position"], 3) == [] and kb.search(["rewrite release"], 3) == []
    hit = kb.search(["does the container forget its queue on restart?"], 1)[0]
    assert hit["title"] == "Deployment guide > Container"


def test_front_matter_title_without_headings_and_markers_inside_code_are_kept(tmp_path):
    doc = """---
title: "FAQ: tokens"
---
Tokens expire after one hour.

```markdown
---
title: kept
---
!!! note "kept"
<!-- kept -->
[kept](kept.md)
```
"""
    kb = build(tmp_path, {"faq.md": doc})
    [(title, text)] = chunks_of(kb, "faq.md")
    assert title == "FAQ: tokens"
    assert '```markdown\n---\ntitle: kept\n---\n!!! note "kept"\n<!-- kept -->\n[kept](kept.md)\n```' in text


@pytest.mark.parametrize(
    "text, code",
    [
        ("Run this:\n\n    make rollback\n    make status\n\nthen wait.", "make rollback\nmake status"),
        ("Run this:\n\n\tmake rollback\n\nthen wait.", "make rollback"),  # a tab is four columns
        ("Run this:\n\n  \tmake rollback\n\nthen wait.", "make rollback"),  # spaces then a tab
    ],
)
def test_indented_code_of_every_kind_becomes_a_fence(text, code):
    fenced = fence_indented_code(text)
    assert f"```\n{code}\n```" in fenced, fenced


@pytest.mark.parametrize(
    "text",
    [
        "Plain answer [1] with `inline code` and a list:\n\n- one\n- two\n",
        "- item\n\n  continued with two spaces\n",
        "1. step\n\n    continuation of the list item, not code\n",
        "> Quoted:\n>\n>     make rollback\n",  # code in a block quote: fencing it would break the quote
    ],
)
def test_text_without_indented_code_is_left_as_it_is(text):
    assert fence_indented_code(text) == text


# real pages with reference-style links, shortcut references, footnotes and links whose label
# is defined nowhere in the page: (corpus, path) of the fetched corpora (bench/corpora/README.md)
REFERENCE_PAGES = {
    "linux.md": ("hugo-docs", "installation/linux.md"),
    "deprecation.md": ("hugo-docs", "troubleshooting/deprecation.md"),
    "usage.md": ("hugo-docs", "getting-started/usage.md"),
    "etcdHighFsyncDurations.md": ("prometheus-runbooks", "runbooks/etcd/etcdHighFsyncDurations.md"),
    "NodeFilesystemSpaceFillingUp.md": ("prometheus-runbooks", "runbooks/node/NodeFilesystemSpaceFillingUp.md"),
}
RAW_MARKDOWN = re.compile(r"\]\[[^\]\n]*\]|\[\^[^\]\s]+\]|^[ \t]{0,3}\[[^\]\n]+\]:[ \t]*\S", re.M)


def prose(text: str) -> str:
    """``text`` without fenced code and inline code spans (code keeps what it shows)."""
    return re.sub(r"`[^`\n]*`", "", re.sub(r"^\s*```.*?^\s*```", "", text, flags=re.S | re.M))


def test_reference_links_and_footnotes_read_as_text_on_real_pages(tmp_path):
    """A reference link shows its words (with the address its definition gives, as an inline
    link), a reference defined nowhere in the page its words, a footnote its text; the
    definition lines go and code is left alone."""
    pages = {name: (fetched_corpus(corpus) / path).read_text() for name, (corpus, path) in REFERENCE_PAGES.items()}
    kb = build(tmp_path, pages)
    texts = {name: "\n\n".join(t for _, t in chunks_of(kb, name)) for name in REFERENCE_PAGES}
    for name, text in texts.items():
        assert RAW_MARKDOWN.findall(prose(text)) == [], name
    linux, deprecation, etcd = texts["linux.md"], texts["deprecation.md"], texts["etcdHighFsyncDurations.md"]
    assert "[Snap](https://snapcraft.io/) is a free and open-source package manager" in linux  # [Snap][]
    assert "Common [reasons for deprecation](https://en.wikipedia.org/wiki/Deprecation):" in deprecation
    assert "3 minor releases\n" in deprecation + "\n"  # the marker [^1] goes ...
    assert "For example, v0.1.1 => v0.2.0 is a minor release." in deprecation  # ... its footnote's text stays
    # labels defined nowhere in the page (the addresses are listed at its end): the words
    assert "has to be fsync'd to disk by the leader node" in etcd
    assert "(as part of the Raft consensus algorithm)" in etcd
    assert "Log_replication" not in etcd  # an address holding "(algorithm)" goes whole with its list of links
    assert "[container ephemeral storage]" not in texts["NodeFilesystemSpaceFillingUp.md"]
    assert "container ephemeral storage, container images" in texts["NodeFilesystemSpaceFillingUp.md"]


DOCSITES = Path(__file__).parent / "data" / "docsites"
# our own pages of the same kinds: reference-style links (full, collapsed, shortcut), footnotes,
# labels defined nowhere in the page with the addresses listed at its end
OUR_REFERENCE_PAGES = {
    "linux.md": DOCSITES / "site/installation/linux.md",
    "deprecation.md": DOCSITES / "site/troubleshooting/deprecation.md",
    "faq.md": DOCSITES / "site/troubleshooting/faq.md",
    "QueueLeaderElections.md": DOCSITES / "runbooks/queue/QueueLeaderElections.md",
    "NodeVolumeFillingUp.md": DOCSITES / "runbooks/node/NodeVolumeFillingUp.md",
}


def test_reference_links_and_footnotes_read_as_text(tmp_path):
    """A reference link shows its words (with the address its definition gives, as an inline
    link), a reference defined nowhere in the page its words, a footnote its text; the
    definition lines go and code is left alone."""
    kb = build(tmp_path, {name: path.read_text() for name, path in OUR_REFERENCE_PAGES.items()})
    texts = {name: "\n\n".join(t for _, t in chunks_of(kb, name)) for name in OUR_REFERENCE_PAGES}
    for name, text in texts.items():
        assert RAW_MARKDOWN.findall(prose(text)) == [], name
    linux, deprecation, leader = texts["linux.md"], texts["deprecation.md"], texts["QueueLeaderElections.md"]
    assert "[Flatpak](https://example.org/flatpak) installs desktop" in linux  # [Flatpak][]
    assert "[nearly every distribution](https://example.org/flatpak/setup)" in linux  # [words][label]
    assert "[Debian](https://example.org/debian) | `pressroom`" in linux  # in a table
    assert "can be a year old.\n" in linux and "on their own schedule." in linux  # marker [^1] goes, its text stays
    assert "The usual [reasons to retire a feature](https://example.org/pressroom/retiring):" in deprecation
    assert "4 minor releases\n" in deprecation + "\n"
    assert "such as v2.3.0 => v2.4.0." in deprecation
    assert "```sh\npressroom build --verbose\n```" in deprecation
    # labels defined nowhere in the page (the addresses are listed at its end): the words
    assert "which has to persist it and copy it" in leader
    assert "(the brokers agree on\nthe order of writes with a consensus protocol)" in leader
    assert "Consensus_(computer_science)" not in leader  # an address holding "(...)" goes whole with its list
    volume = texts["NodeVolumeFillingUp.md"]
    assert "[container logs]" not in volume and "holds the container logs, the [image layers](" in volume
    assert "[themes page](https://example.org/pressroom/themes)" in texts["faq.md"]


@pytest.mark.parametrize(
    "text, kept",
    [
        ('The last message is state["messages"][-1] here.\n', 'state["messages"][-1]'),  # an index, not a link
        ('Read it with ["messages"][0] first.\n', '["messages"][0]'),
        ("- [ ] write the tests\n- [x] ship it\n", "- [ ] write the tests"),  # task list boxes
        ("Use `[text][label]` for a reference link.\n", "`[text][label]`"),  # inline code
        ("Example:\n\n```markdown\n[text][label]\n\n[label]: https://example.com\n```\n", "[text][label]\n\n[label]:"),
        ("Example:\n\n    [text][label]\n    [label]: https://example.com\n", "[text][label]"),  # indented code
        ("[tool]: We, the experts, are here to help!\n", "[tool]: We, the experts"),  # not a definition
    ],
)
def test_what_only_looks_like_a_reference_link_is_left_as_written(tmp_path, text, kept):
    kb = build(tmp_path, {"page.md": "# Page\n\n" + text})
    assert kept in "\n".join(t for _, t in chunks_of(kb, "page.md"))


# A long hard-wrapped paragraph, as editors wrap at 100 columns; lines open with code, a number, a
# lower-case word, so a cut at a line break starts a chunk mid-sentence
LONG_PARAGRAPH = """# Syncing

## Running a sync

Copperline reads every source again when you run `copperline sync`, and only the pages that
changed are embedded again. Admins can also send `resync` to the bot in a channel (on Matrix
also `/copperline resync source:NAME`; names are matched as the command line matches them), and
one progress message is edited until the summary. A source with a `period` of 30m, 6h or 1d is
synced in the background by `copperline serve` once its period has passed. Exit code 2 means the
configuration is wrong before any page is read; exit code 1 means a source failed, and the summary
names it on one line. Pages that failed to convert are listed as problems with their reason, and
the sync goes on with the others. A sync of one source carries the other sources' pages over
unread. Every sync writes a new generation of the index folder, and the bot switches to it only
when it is complete, so questions asked meanwhile are answered from the last good one. Two syncs
never run at once: the second is told that a sync is already running, with the first one's pid.
"""


@pytest.mark.parametrize("chunk_size", [300, 420, 555])
def test_a_paragraph_longer_than_a_chunk_is_cut_between_sentences(tmp_path, chunk_size):
    """Each chunk of a long hard-wrapped paragraph opens with a sentence's first word and ends with
    a sentence's stop, and together they hold every sentence once: a chunk cut at a line break
    opened with "also `/copperline resync source:NAME`; names are ..." and answers quoted it."""
    kb = build(tmp_path, {"sync.md": LONG_PARAGRAPH}, chunk_size=chunk_size)
    texts = [t for _, t in chunks_of(kb, "sync.md")]
    assert len(texts) > 2
    for text in texts:
        assert len(text) <= chunk_size
        assert text[0].isupper(), text[:60]
        assert text.rstrip().endswith("."), text[-60:]
    paragraph = LONG_PARAGRAPH.split("## Running a sync\n\n")[1]
    assert " ".join(" ".join(texts).split()) == " ".join(paragraph.split())
    hit = kb.search(["how do admins resync from chat"], 1)[0]
    assert "Admins can also send `resync`" in hit["text"] and "names are matched as the command line" in hit["text"]
