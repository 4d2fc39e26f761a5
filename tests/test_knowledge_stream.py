"""A sync streamed into the generation batch by batch: the same index whatever the batch
size, moved and renamed documents (files, a real Git repository) cost nothing to embed, each
document's access list is stored with its chunks and read back (older generations still
read), and a source failing halfway through its stream keeps its last good documents."""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings

from graphs.knowledge import KnowledgeBase, bm25
from graphs.knowledge.common import Chunk
from graphs.knowledge.connectors import Document, FilesConnector, GitConnector, Listing, SourceError
from graphs.knowledge.splitting import index_text
from tests.test_sources import git, make_repo


class CountingEmbeddings(Embeddings):
    """Deterministic unit vectors from each text's hash; counts the texts it was asked for
    (from several threads: requests go concurrently)."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self._lock = threading.Lock()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        with self._lock:
            self.texts += texts
        out = []
        for t in texts:
            v = np.random.default_rng(int(hashlib.sha256(t.encode()).hexdigest()[:8], 16)).standard_normal(16)
            out.append((v / np.linalg.norm(v)).tolist())
        return out

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


def write_docs(folder: Path, n: int) -> None:
    words = "alpha beta gamma delta epsilon zeta theta kappa lambda sigma omega".split()
    for i in range(n):
        body = " ".join(words[(i * 3 + j) % len(words)] for j in range(60))
        sub = folder / f"part{i % 3}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"p{i}.md").write_text(
            f"# Page {i}\n\n## One\n\n{body} unique{i}\n\n## Two\n\n{body[::-1]} second{i}\n\n"
            f"## Three\n\n{' '.join(reversed(body.split()))} third{i}\n"
        )


def postings_of(p: bm25.KeywordPostings) -> dict[str, tuple[list[int], list[float]]]:
    return {
        t: (list(p.rows[p.indptr[i] : p.indptr[i + 1]]), list(p.freqs[p.indptr[i] : p.indptr[i + 1]]))
        for i, t in enumerate(p.terms)
        if p.indptr[i + 1] > p.indptr[i]
    }


def test_a_sync_in_small_batches_builds_the_same_index_as_one_batch(tmp_path):
    folder = tmp_path / "docs"
    write_docs(folder, 40)
    built = {}
    for name, batch, concurrency in (("one", 100_000, 1), ("many", 7, 3)):
        emb = CountingEmbeddings()
        kb = KnowledgeBase(
            tmp_path / name,
            connectors=[FilesConnector("d", [folder])],
            embeddings=emb,
            embedder_id="hash",
            batch_size=4,
            write_batch=batch,
            embedding_concurrency=concurrency,
        )
        stats = kb.reindex()
        snap = kb.snapshot
        assert stats.files == 40 and stats.chunks == snap.count == 40 * 3
        assert stats.embedded_chunks == len(emb.texts) == stats.chunks
        rows = snap._conn.execute("SELECT rowid, file, title, text FROM chunks").fetchall()
        for rowid, file, title, text in rows:  # every vector at its chunk's rowid
            expected = emb.embed_query(index_text(Chunk(file, title, text, "")))
            assert np.allclose(snap.vectors[rowid - 1], expected, atol=1e-6)
        # the postings written range by range are those FTS5 holds
        again = bm25.KeywordPostings.from_fts(snap._conn, generation=snap.directory.name)
        assert postings_of(snap.postings) == postings_of(again)
        for q in ["alpha beta", "unique7 omega", "second12", "kappa lambda theta"]:
            assert snap.keyword(q, 10) == snap.keyword_fts(q, 10), q
        built[name] = sorted((f, t, x) for _, f, t, x in rows)
        assert kb.search(["third33"], k=1)[0]["location"] == "part0/p33.md"
    assert built["one"] == built["many"]


def test_moved_and_renamed_files_cost_nothing_to_embed(tmp_path):
    folder = tmp_path / "docs"
    write_docs(folder, 6)
    emb = CountingEmbeddings()
    kb = KnowledgeBase(tmp_path / "index", connectors=[FilesConnector("d", [folder])], embeddings=emb, embedder_id="h")
    kb.reindex()
    emb.texts.clear()
    (folder / "archive").mkdir()
    shutil.move(folder / "part1" / "p4.md", folder / "archive" / "page-four.md")
    stats = kb.reindex()
    assert (stats.sources[0].added, stats.sources[0].removed, stats.sources[0].renamed) == (0, 0, 1)
    assert emb.texts == [] and stats.embedded_chunks == 0
    assert kb.search(["unique4"], k=1)[0]["location"] == "archive/page-four.md"
    # an edited file still embeds its changed chunk only
    path = folder / "archive" / "page-four.md"
    path.write_text(path.read_text().replace("second4", "second4 amended"))
    emb.texts.clear()
    stats = kb.reindex()
    assert stats.embedded_chunks == len(emb.texts) == 1 and "amended" in emb.texts[0]


def test_a_file_renamed_in_git_is_not_embedded_again(tmp_path):
    repo = make_repo(tmp_path)
    conn = GitConnector(
        "repo",
        str(repo),
        "main",
        ["docs/"],
        cache_dir=tmp_path / "clones",
        web_url="https://git.example/acme/handbook/blob/{branch}/{path}",
    )
    emb = CountingEmbeddings()
    kb = KnowledgeBase(tmp_path / "index", connectors=[conn], embeddings=emb, embedder_id="h")
    kb.reindex()
    assert emb.texts
    emb.texts.clear()
    git(repo, "mv", "docs/oncall.md", "docs/runbooks-oncall.md")
    git(repo, "commit", "-q", "-m", "rename")
    stats = kb.reindex()
    report = stats.sources[0]
    assert (report.added, report.removed, report.renamed, report.unchanged) == (0, 0, 1, 2)
    assert emb.texts == [] and stats.embedded_chunks == 0
    hit = kb.search(["ocelot rota"], k=1)[0]
    assert hit["location"] == "docs/runbooks-oncall.md"
    assert hit["url"] == "https://git.example/acme/handbook/blob/main/docs/runbooks-oncall.md"
    assert kb.files_of(["repo"]) == {"docs/deploy.md", "docs/runbooks-oncall.md", "docs/old.md"}


class ListConnector:
    """A source whose documents are given in the test (as a later issue's connectors with
    permissions would give them), streamed one by one; ``fail_after`` documents into the
    stream it fails as a whole source fails (an expired token, a dropped connection)."""

    kind = "list"
    readers = "list-1"

    def __init__(self, name: str, docs: list[Document], fail_after: int | None = None) -> None:
        self.name, self.docs, self.fail_after = name, docs, fail_after

    def describe(self) -> str:
        return f"{len(self.docs)} documents"

    def scan(self, known: Mapping[str, str], state: Mapping[str, Any], progress: Any = None) -> Listing:
        out = Listing(state={"n": len(self.docs)})

        def stream() -> Iterator[Document]:
            for i, d in enumerate(self.docs):
                if self.fail_after is not None and i >= self.fail_after:
                    raise SourceError(f"source {self.name}: the connection dropped")
                if known.get(d.id) == d.version:
                    out.kept.add(d.id)
                else:
                    yield d

        out.changed = stream()
        return out


def test_access_lists_are_stored_with_the_chunks_and_read_back(tmp_path):
    docs = [
        Document(
            "private.md", "Private", "# Payroll\n\nThe payroll run closes on the 25th.\n", version="1", access=("hr",)
        ),
        Document("open.md", "Open", "# Lunch\n\nLunch is served at noon.\n", version="1"),
        Document("none.md", "Nobody", "# Vault\n\nThe vault code rotates.\n", version="1", access=()),
    ]
    kb = KnowledgeBase(tmp_path / "index", connectors=[ListConnector("l", docs)])
    kb.reindex()
    snap = kb.snapshot
    assert snap.manifest["format"] == 3
    assert [c.access for c, _ in snap.file_chunks("private.md")] == [("hr",)]
    assert [c.access for c, _ in snap.file_chunks("open.md")] == [None]
    assert [c.access for c, _ in snap.file_chunks("none.md")] == [()]
    # carried through an edit of the generation
    kb.connectors["l"].docs[1] = Document("open.md", "Open", "# Lunch\n\nLunch moved to one.\n", version="2")
    kb.reindex()
    assert [c.access for c, _ in kb.snapshot.file_chunks("private.md")] == [("hr",)]


def test_a_generation_of_the_previous_format_is_read_and_edited(tmp_path):
    folder = tmp_path / "docs"
    write_docs(folder, 4)
    kb = KnowledgeBase(tmp_path / "index", connectors=[FilesConnector("d", [folder])])
    kb.reindex()
    gen = kb.snapshot.directory
    kb.snapshot.close()
    # the previous format: no access list, no text hash in the chunk table
    conn = sqlite3.connect(gen / "chunks.sqlite")
    conn.execute("DROP INDEX chunks_text")
    conn.execute("ALTER TABLE chunks DROP COLUMN access")
    conn.execute("ALTER TABLE chunks DROP COLUMN text_hash")
    conn.commit()
    conn.close()
    manifest = json.loads((gen / "manifest.json").read_text())
    (gen / "manifest.json").write_text(json.dumps({**manifest, "format": 2}))
    reader = KnowledgeBase(tmp_path / "index", connectors=[FilesConnector("d", [folder])])
    assert [c.access for c, _ in reader.snapshot.file_chunks("part1/p1.md")] == [None] * 3
    assert reader.search(["unique1"], k=1)[0]["location"] == "part1/p1.md"
    (folder / "part2" / "p2.md").write_text("# Two\n\nrewritten page\n")
    stats = reader.reindex()
    assert stats.sources[0].updated == 1 and reader.snapshot.max_rowid > reader.snapshot.count  # an edit
    assert reader.snapshot.manifest["format"] == 3
    assert reader.search(["rewritten"], k=1)[0]["location"] == "part2/p2.md"
    assert [c.access for c, _ in reader.snapshot.file_chunks("part1/p1.md")] == [None] * 3


def test_a_source_failing_halfway_through_its_stream_keeps_its_last_good_documents(tmp_path):
    good = [Document(f"d{i}.md", f"D{i}", f"# D{i}\n\nfirst version keyword{i}\n", version="1") for i in range(6)]
    other = FilesConnector("files", [tmp_path / "docs"])
    write_docs(tmp_path / "docs", 2)
    source = ListConnector("l", good)
    emb = CountingEmbeddings()
    kb = KnowledgeBase(tmp_path / "index", connectors=[source, other], embeddings=emb, embedder_id="h")
    kb.reindex()
    assert kb.files_of(["l"]) == {d.id for d in good}
    for full in (False, True):
        source.docs = [Document(d.id, d.title, d.text.replace("first", "second"), version="2") for d in good]
        source.fail_after = 3  # three new versions read, then the source fails
        if full:  # a generation with many gaps is written whole: the same outcome
            kb.MAX_GAP_SHARE = 0.0
        stats = kb.reindex()
        failed = {r.name: r for r in stats.sources}["l"]
        assert not failed.ok and "connection dropped" in failed.error
        assert kb.files_of(["l"]) == {d.id for d in good}
        for i in range(6):
            hits = [h for h in kb.search([f"keyword{i}"], k=3) if h["location"] == f"d{i}.md"]
            assert len(hits) == 1 and "first version" in hits[0]["text"]
        assert kb.search(["unique1"], k=1)[0]["location"] == "part1/p1.md"
        assert kb.snapshot.count == 6 + 2 * 3
    source.fail_after = None
    stats = kb.reindex()
    assert {r.name: r for r in stats.sources}["l"].updated == 6
    assert all("second" in kb.search([f"keyword{i}"], k=1)[0]["text"] for i in range(6))


def test_postings_read_in_small_pieces_equal_those_fts5_holds(tmp_path, monkeypatch):
    """Common words (more occurrences than one piece holds) are read in pieces, a row's count
    carried across two pieces; a full build and an edit give FTS5's own postings."""
    from graphs.knowledge import writer

    monkeypatch.setattr(writer, "POSTINGS_STEP", 5)
    folder = tmp_path / "docs"
    write_docs(folder, 12)
    kb = KnowledgeBase(tmp_path / "index", connectors=[FilesConnector("d", [folder])], write_batch=5)
    kb.reindex()
    for round_ in range(2):
        snap = kb.snapshot
        again = bm25.KeywordPostings.from_fts(snap._conn, generation=snap.directory.name)
        assert postings_of(snap.postings) == postings_of(again)
        assert np.array_equal(snap.postings.lengths[: len(again.lengths)], again.lengths)
        (folder / "part0" / f"p{round_ * 3}.md").write_text("# New\n\nalpha alpha beta alpha gamma alpha\n")
        kb.reindex()
