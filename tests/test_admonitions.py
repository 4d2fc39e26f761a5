"""Admonitions keep their text and their kind: a page's note, warning or tip is indexed as the
reader sees it on the built page ("Warning: Restoring a backup replaces the volume ..."),
whatever the generator's syntax (Docusaurus ``:::warning``, ``:::info[Important]`` with an
indented body, MkDocs ``!!! tip "Title"``, GitHub ``> [!CAUTION]``, reStructuredText
``.. note::``, GitBook ``{% hint %}``, MDX ``<Warning>``), and no marker is left. The pages
are ours (tests/data/admonitions)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from graphs.extractive import Extractive, TextEmbedder
from graphs.knowledge import KnowledgeBase

DATA = Path(__file__).parent / "data" / "admonitions"


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> KnowledgeBase:
    root = tmp_path_factory.mktemp("admonitions")
    shutil.copytree(DATA, root / "src")
    kb = KnowledgeBase(root / "index", [root / "src"], chunk_size=1000, chunk_overlap=20)
    kb.reindex()
    return kb


def page(kb: KnowledgeBase, name: str) -> str:
    return "\n".join(c.text for c, _ in kb.snapshot.file_chunks(name))


def test_docusaurus_mkdocs_and_github_admonitions_keep_their_kind(kb: KnowledgeBase) -> None:
    text = page(kb, "backups.md")
    assert "Warning: Restoring a backup replaces the volume; files written since the backup are gone." in text
    # a title names the box; a body indented four spaces is the box's text, not a code block
    assert "Important: The object store bucket must exist before the first backup runs" in text
    assert "```" not in text and "    The object store" not in text
    assert "Faster restores: Keep the last three backups on local disk as well." in text
    assert "Caution: Deleting the bucket deletes every backup in it." in text
    # a language variant is not an admonition
    assert "\nLanguage variants such as this one carry no label." in f"\n{text}"
    for marker in (":::", "!!!", "[!CAUTION]", "[Important]"):
        assert marker not in text, marker


def test_restructuredtext_directives_are_labelled_and_dedented(kb: KnowledgeBase) -> None:
    text = page(kb, "builds.rst")
    assert "Note: A project on the free plan runs one build at a time." in text
    # nested in a field list, six spaces deep: prose, not an indented code block
    assert "Warning: Submodules are fetched only when the configuration file lists them." in text
    assert "```" not in text
    assert "New in version 4.2: Builds can be cancelled from the dashboard." in text
    assert ".. note::" not in text and ".. warning::" not in text and "versionadded" not in text


def test_gitbook_hints_and_mdx_components_keep_their_kind(kb: KnowledgeBase) -> None:
    leave = page(kb, "leave.md")
    assert "Danger: Leave must be requested at least eight weeks before it starts." in leave
    assert "hint" not in leave
    limits = page(kb, "limits.mdx")
    assert "Warning: Attachments larger than twenty megabytes are refused with error 413." in limits
    assert "An avatar must be square. Info: Animated avatars need a paid plan." in limits
    assert "<" not in limits and ":::" not in limits


def test_an_answer_quoting_a_warning_says_it_is_one(kb: KnowledgeBase) -> None:
    question = "what happens to files written since the backup when I restore it?"
    docs = kb.search([question], 3)
    assert docs and docs[0]["location"] == "backups.md"
    answer = Extractive(TextEmbedder(None)).compose([question], docs)
    assert "Warning: Restoring a backup replaces the volume" in answer
