"""Keyword ranking in memory: the knowledge base ranks chunks with FTS5's own
bm25() scores computed from postings (graphs/knowledge/bm25.py) instead of asking FTS5 to
score every matching row. Users must see the same chunks in the same order: checked against
FTS5 itself on the real LangGraph docs, for queries of every kind the chat sends (plain
words, repeated stems, identifiers that FTS5 reads as phrases, other scripts, diacritics,
operators and quotes in user text, nothing searchable), on a fresh generation and on one
written before the postings file existed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from graphs.knowledge import KnowledgeBase
from graphs.knowledge.bm25 import POSTINGS_FILE
from graphs.knowledge.index import IndexSnapshot

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "corpus" / "langgraph-docs"
DEV = ROOT.parent / "shared" / "eval" / "dev.jsonl"

KINDS = [
    "How do I add memory to a LangGraph agent?",  # plain words
    "graph graphs Graph GRAPHS graphing",  # one stem several times: each phrase counts, as in FTS5
    "create_react_agent with interrupt_before and add_messages",  # identifiers: multi-token phrases
    "langgraph.json の設定ファイルはどこですか",  # spaceless script: bigrams
    "Übersicht über den StateGraph und Checkpointer",  # diacritics folded
    'he said "stream" OR NOT mode* NEAR(a b) -x ^y',  # FTS5 operators and quotes in user text
    "the and of to is",  # stopwords only: nothing to search
    "zzqxv nonexistentterm",  # no match
    "___ __init__ _",  # separators only / a dunder
    "postgres postgres checkpointer Postgres",  # a term repeated by case
]


def _corpus() -> Path:
    if not CORPUS.is_dir():
        pytest.skip("the shared LangGraph docs corpus is not on this machine")
    return CORPUS


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory) -> IndexSnapshot:
    kb = KnowledgeBase(tmp_path_factory.mktemp("index"), [_corpus()])
    kb.ensure_index()
    assert kb.snapshot is not None
    return kb.snapshot


def _questions() -> list[str]:
    rows = [json.loads(line) for line in DEV.read_text().splitlines() if line.strip()] if DEV.exists() else []
    return [r["question"] for r in rows] + KINDS


def test_a_reindex_writes_the_postings_beside_the_index(snapshot):
    assert (snapshot.directory / POSTINGS_FILE).stat().st_size > 0


@pytest.mark.parametrize("limit", [1, 5, 40])
def test_keyword_search_ranks_as_fts5_does(snapshot, limit):
    for question in _questions():
        assert snapshot.keyword(question, limit) == snapshot.keyword_fts(question, limit), question
    # the kinds above do exercise the paths: phrases match, stopwords and operators do not break
    assert snapshot.keyword("create_react_agent", 5) and snapshot.keyword("Übersicht StateGraph", 5)
    assert snapshot.keyword("the and of to is", 5) == [] and snapshot.keyword("zzqxv", 5) == []


@pytest.mark.parametrize("damage", ["missing", "truncated", "not numpy"])
def test_a_generation_without_readable_postings_ranks_the_same(snapshot, tmp_path, damage):
    old = tmp_path / snapshot.directory.name
    shutil.copytree(snapshot.directory, old)
    postings = old / POSTINGS_FILE
    if damage == "missing":  # as written before the postings existed
        postings.unlink()
    elif damage == "truncated":
        postings.write_bytes(postings.read_bytes()[:1000])
    else:
        postings.write_text("not a numpy file")
    reopened = IndexSnapshot(old)
    try:
        for question in _questions():
            assert reopened.keyword(question, 40) == snapshot.keyword_fts(question, 40), question
    finally:
        reopened.close()


def test_a_small_index_ranks_by_weighted_columns_and_length(tmp_path):
    """Hand-made chunks where the order is known: a title match outweighs a text match
    (title weight 2), and of two texts with the word once the shorter ranks first."""
    src = tmp_path / "kb"
    src.mkdir()
    (src / "a.md").write_text("# Other\n\nA long text that mentions checkpointer once among many other words here.\n")
    (src / "b.md").write_text("# Checkpointer\n\nAbout saving.\n")
    (src / "c.md").write_text("# Else\n\nThe checkpointer.\n")
    (src / "ja.md").write_text("# 設定\n\n設定ファイルは langgraph.json です。create_react_agent を使います。\n")
    kb = KnowledgeBase(tmp_path / "index", [src])
    kb.ensure_index()
    docs = kb.search(["checkpointer"], 3)
    assert [d["location"].rsplit("/", 1)[-1] for d in docs] == ["b.md", "c.md", "a.md"]
    snap = kb.snapshot
    assert snap is not None
    for query in ["checkpointer", "設定ファイルはどこ", "create_react_agent の設定"]:
        assert snap.keyword(query, 3) == snap.keyword_fts(query, 3), query
    assert [d["location"].rsplit("/", 1)[-1] for d in kb.search(["設定ファイルはどこ"], 1)] == ["ja.md"]


def _index(tmp_path: Path, files: dict[str, str]) -> KnowledgeBase:
    src = tmp_path / "kb"
    src.mkdir()
    for name, text in files.items():
        (src / name).write_text(text, encoding="utf-8")
    kb = KnowledgeBase(tmp_path / "index", [src])
    kb.ensure_index()
    return kb


@pytest.mark.parametrize("copies", [2, 6])
def test_equal_scores_keep_fts5s_order(tmp_path, copies):
    """Chunks with the same text score the same to the last bit only if the arithmetic is
    FTS5's own, in its order; then ties come out in FTS5's row order (two identical files and
    a query naming both must not come back the other way round)."""
    names = ["delta", "foxtrot", "gateway", "search", "alpha_beta", "zulu"][:copies]
    files = {f"{n}.md": "store thread graph node node node\n" for n in names}
    if copies > 2:
        text = "To rotate dashboard errors key rotate dashboard deployment health.\n"
        files |= {f"copy{i}.md": text for i in range(30)}
    kb = _index(tmp_path, files)
    snap = kb.snapshot
    assert snap is not None
    queries = [
        "delta node graph memory foxtrot thread",
        "how do I search service health dashboard errors gateway?",
        "zulu alpha_beta store",
        "copy1 copy2 copy17 rotate dashboard",
        "node",
    ]
    for query in queries:
        for limit in (1, 2, 5, 40):
            assert snap.keyword(query, limit) == snap.keyword_fts(query, limit), (query, limit)


def test_a_word_longer_than_fts5_keeps_is_searched_as_fts5_does(tmp_path):
    """FTS5 cuts a token at 32,768 bytes, possibly inside a character, which SQLite cannot
    return as text; indexing and searching such a word must work as FTS5 does."""
    long_word = "क" * 11000  # 33,000 bytes of UTF-8
    kb = _index(tmp_path, {"long.md": f"# Long\n\nconfigure {long_word} here\n", "plain.md": "configure the bot\n"})
    snap = kb.snapshot
    assert snap is not None
    for query in [f"how do I configure {long_word}", "ab" + "\U00010348" * 9000, long_word, "configure"]:
        assert snap.keyword(query, 5) == snap.keyword_fts(query, 5)
    assert kb.search(["configure"], 5)


@pytest.mark.parametrize(
    "damage", ["another generation", "rows out of range", "no rows", "not a number", "terms of another shape"]
)
def test_postings_that_do_not_match_their_index_are_read_again_from_it(snapshot, tmp_path, caplog, damage):
    """A postings file that loads but does not belong to its index (copied from another one,
    edited) is not trusted: the generation reads its postings from FTS5 and says so once."""
    import numpy as np

    old = tmp_path / snapshot.directory.name
    shutil.copytree(snapshot.directory, old)
    path = old / POSTINGS_FILE
    with np.load(path) as z:
        arrays = dict(z)
    if damage == "another generation":
        arrays["generation"] = np.frombuffer(b"gen-elsewhere", dtype=np.uint8)
    elif damage == "rows out of range":
        arrays["rows"] = arrays["rows"] + 10**6
    elif damage == "no rows":
        arrays["count"] = np.array(0)
    elif damage == "not a number":
        arrays["freqs"] = arrays["freqs"] * np.nan
    else:
        arrays["terms"] = np.zeros((2, 2), dtype=np.uint8)
    with open(path, "wb") as f:
        np.savez(f, **arrays)
    reopened = IndexSnapshot(old)
    try:
        for question in _questions()[:20]:
            assert reopened.keyword(question, 40) == snapshot.keyword_fts(question, 40), question
    finally:
        reopened.close()
    assert len([r for r in caplog.records if POSTINGS_FILE in r.getMessage()]) == 1


def test_many_rows_of_common_words_rank_as_fts5_does(tmp_path):
    """Ranking skips the long row lists of common words when they cannot change the top
    (rows holding only them score too little); the result must still be FTS5's, ties and
    all, for questions mixing rare and common words and for common words alone."""
    import random

    rng = random.Random(5)
    vocab = [f"w{i}" for i in range(400)]

    def words(n: int) -> list[str]:
        return [vocab[min(int(rng.paretovariate(1.1)) - 1, len(vocab) - 1)] for _ in range(n)]

    files = {}
    for d in range(300):
        sections = [f"## Part {s}\n\n{' '.join(words(60) + [f'rare{d}x{s}', f'topic{d % 7}'])}\n" for s in range(4)]
        files[f"doc{d}.md"] = f"# Guide {d}\n\n" + "\n".join(sections)
    for c in range(5):  # identical chunks: equal scores, FTS5's row order
        files[f"copy{c}.md"] = "w1 w2 w3 w40 topic3 rare7x1\n"
    kb = _index(tmp_path, files)
    snap = kb.snapshot
    assert snap is not None and snap.count > 1000
    queries = (
        [
            f"how does topic{rng.randrange(7)} handle rare{rng.randrange(300)}x{rng.randrange(4)} "
            f"and {' '.join(words(3))}"
            for _ in range(25)
        ]
        + [" ".join(words(4)) for _ in range(25)]
        + ["w1 w2 w3 w40 topic3 rare7x1", "w0", "part guide"]
    )
    for query in queries:
        for limit in (1, 5, 40):
            assert snap.keyword(query, limit) == snap.keyword_fts(query, limit), (query, limit)
