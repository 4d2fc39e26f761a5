"""A question worded unlike its page: the search expands it with the words of the passages it
did find (pseudo-relevance feedback), so the page those passages point to is found too.

On a small staff handbook written for the test (tests/data/docsites/staffdesk), keyword search
only (no embeddings: nothing else can bridge the words): "I paid for a train ticket myself, how
do I get my money back?" shares its words with the travel page alone, whose section says to file
an expense claim in Ledgerly; the expenses page, which says how a claim is filed and reimbursed,
holds none of the question's words."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from graphs import extractive as ex
from graphs.knowledge import KnowledgeBase

PAGES = Path(__file__).parent / "data" / "docsites" / "staffdesk"
QUESTION = "I paid for a train ticket myself, how do I get my money back?"


@pytest.fixture(scope="module")
def kb(tmp_path_factory) -> KnowledgeBase:
    root = tmp_path_factory.mktemp("feedback")
    shutil.copytree(PAGES, root / "src")
    kb = KnowledgeBase(root / "index", [root / "src"])
    kb.reindex()
    return kb


def test_the_page_the_found_passages_point_to_is_found(kb):
    brain = ex.Extractive(ex.TextEmbedder(None), kb)
    found = [d["location"] for d in brain.retrieve([QUESTION], 5)]
    assert found[0] == "travel.md"
    assert "expenses.md" in found


def test_without_feedback_the_search_finds_only_the_pages_holding_the_question_words(kb):
    plain = {d["location"] for d in kb.search([QUESTION], 20)}
    assert "expenses.md" not in plain  # the page holds none of the question's words
    expanded = [d["location"] for d in kb.search([QUESTION], 20, feedback=ex.FEEDBACK_WEIGHT)]
    assert "expenses.md" in expanded
    assert expanded[0] == "travel.md"  # the feedback ranking adds to the question's, it does not replace it


def test_the_words_added_come_from_the_found_passages_and_are_not_the_questions(kb):
    snap = kb.snapshot
    assert snap is not None
    first = snap.keyword(QUESTION, 1)
    words = snap.feedback_words(first, {"paid", "train", "ticket", "money"}, 10)
    assert {"ledgerly", "expense", "claim", "receipt"} <= set(words)
    assert not {"paid", "train", "ticket", "money"} & set(words)
