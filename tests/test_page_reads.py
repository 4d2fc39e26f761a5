"""Reading a found chunk's whole page or section from the index is an extra: when the generation
cannot be read any more (closed, or its database damaged) the chunk the search found is answered
as found, and an error that is not the database's (a bug) is not hidden. A real knowledge base
with the real local embeddings, on pages written for this test."""

from __future__ import annotations

import sqlite3

import pytest

from bot.config import ModelSettings
from graphs import extractive as ex
from graphs.knowledge import KnowledgeBase
from graphs.models import build_embeddings

GUIDE = """# Backups

## Schedule

Backups run every night at 02:00 and keep the last fourteen copies.

## Restoring

Open Settings, choose Backups, pick a copy and press Restore. The restore replaces the workspace.

## Storage

Copies are kept in the region the workspace was created in.
"""


@pytest.fixture
def brain(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "backups.md").write_text(GUIDE)
    emb, eid = build_embeddings("local", ModelSettings())
    kb = KnowledgeBase(tmp_path / "index", [docs], embeddings=emb, embedder_id=eid)
    kb.reindex()
    return ex.Extractive(ex.TextEmbedder(emb), kb), kb


@pytest.mark.slow
def test_a_generation_that_cannot_be_read_any_more_answers_with_the_chunk_found(brain):
    extractive, kb = brain
    found = extractive.retrieve(["how do i restore a backup?"], 3)
    assert "press Restore" in found[0]["text"]
    assert len(extractive.page_chunks("backups.md")) == 3  # its three sections

    kb.snapshot.close()  # what a reader sees of a damaged or vanished generation: sqlite3 errors

    assert extractive.page_chunks("backups.md") == []
    assert extractive.page_chunk_ids("backups.md") == []
    assert extractive.page(found[0]) is None  # no whole page to read: the caller keeps the chunk
    assert extractive.widen(found[0]) == found[0]


@pytest.mark.slow
def test_an_error_that_is_not_the_databases_is_not_hidden(brain, monkeypatch):
    extractive, kb = brain

    def broken(*_args, **_kwargs):
        raise ValueError("a bug in reading the page")

    monkeypatch.setattr(kb.snapshot, "file_chunks", broken)
    with pytest.raises(ValueError, match="a bug"):
        extractive.page_chunks("backups.md")
    with pytest.raises(ValueError, match="a bug"):
        extractive.page(extractive.retrieve(["how do i restore a backup?"], 3)[0])

    def damaged(*_args, **_kwargs):
        raise sqlite3.DatabaseError("database disk image is malformed")

    monkeypatch.setattr(kb.snapshot, "file_chunks", damaged)
    assert extractive.page_chunks("backups.md") == []
