"""Keyword ranking in memory (issue 11): the knowledge base ranks chunks with FTS5's own
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
