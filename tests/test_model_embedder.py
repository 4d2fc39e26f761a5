"""The embedder belongs to the index generation: a knowledge base configured with another
embedder rebuilds the index by itself, and a process whose embedder is not the live
generation's (another replica on the same index folder) never compares its query vectors
with that generation's vectors: it searches by keyword, and says so once."""

from __future__ import annotations

import logging

from langchain_core.embeddings import Embeddings

from graphs.knowledge import KnowledgeBase
from tests.conftest import write_kb


class Counted(Embeddings):
    """A deterministic embedder of ``dims`` dimensions that counts its calls."""

    def __init__(self, dims: int) -> None:
        self.dims = dims
        self.calls = 0

    def _vector(self, text: str) -> list[float]:
        return [float((len(text) + i) % 7) + 1.0 for i in range(self.dims)]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls += 1
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        self.calls += 1
        return self._vector(text)


def test_another_embedder_rebuilds_and_never_mixes_vectors(tmp_path, caplog):
    kb_dir, index = write_kb(tmp_path), tmp_path / "index"
    first, second = Counted(3), Counted(5)
    a = KnowledgeBase(index, [str(kb_dir)], embeddings=first, embedder_id="test:a")
    assert a.needs_rebuild()
    a.ensure_index()
    assert a.stats()["embedder"] == "test:a" and a.search(["container boot"], 3)
    b = KnowledgeBase(index, [str(kb_dir)], embeddings=second, embedder_id="test:b")
    assert b.needs_rebuild()  # the embedder changed: the next start rebuilds by itself
    b.ensure_index()
    assert b.stats()["embedder"] == "test:b" and not b.needs_rebuild()
    before = first.calls
    with caplog.at_level(logging.WARNING, logger="graphs.knowledge"):
        for _ in range(3):
            docs = a.search(["container boot"], 3)  # 3-dimensional queries against 5-dimensional vectors
            assert docs  # keyword search still answers
    assert first.calls == before  # no query vector was made for another embedder's generation
    warned = [r for r in caplog.records if "was embedded with test:b" in r.getMessage()]
    assert len(warned) == 1 and "this process embeds with test:a" in warned[0].getMessage()
