"""Ranking and the decision to answer on the extractive path, with the real local MiniLM
embeddings: over a library's documentation (pages written like an MkDocs site, and HTTPX's real
docs when the fetched corpora are here) the page about a topic outranks a neighbouring page
that mentions it in one section; over a small staff handbook, a question whose page is found
is answered even when no single sentence shares its words, and one no page answers still goes
to the experts."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage

from bot.config import ModelSettings
from graphs import extractive as ex
from graphs.graders import ExtractiveGraders
from graphs.knowledge import KnowledgeBase
from graphs.models import build_embeddings
from graphs.offline import OfflineKit
from tests.conftest import fetched_corpus

DOCS = Path(__file__).parent / "data" / "docsites" / "mkdocs"
CHATAPI = Path(__file__).parent / "data" / "docsites" / "chatapi"


def brain_over(root: Path, folder: Path, pages: list[str]) -> ex.Extractive:
    """The extractive brain over ``pages`` of ``folder`` (copied below ``root``), local embeddings."""
    for rel in pages:
        (root / "src" / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(folder / rel, root / "src" / rel)
    emb, eid = build_embeddings("local", ModelSettings())
    kb = KnowledgeBase(root / "index", [root / "src"], embeddings=emb, embedder_id=eid)
    kb.reindex()
    return ex.Extractive(ex.TextEmbedder(emb), kb)


def topic_outranks_neighbour(brain: ex.Extractive, question: str, topic: str, neighbour: str, word: str) -> None:
    """Of the search's passages for ``question``, the ``neighbour`` page's section titled with
    ``word`` and the ``topic`` page's best passage: reranked, the topic page comes first, and its
    page evidence is the larger one (both above 0)."""
    found = brain.knowledge.search([question], 10)
    near = next(d for d in found if d["location"] == neighbour and word in d["title"].lower())
    about = next(d for d in found if d["location"] == topic)
    ranked = brain.rerank([question], [near, about], 2)
    assert [d["location"] for d in ranked] == [topic, neighbour]
    page = brain.page_evidence([question], [near, about])
    assert page[1] > page[0] > 0


@pytest.fixture(scope="module")
def brain(tmp_path_factory) -> ex.Extractive:
    pages = ["advanced/time-zones.md", "migrating.md", "contributing.md", "quickstart.md", "index.md"]
    return brain_over(tmp_path_factory.mktemp("ranking"), DOCS, pages)


@pytest.mark.slow
def test_the_page_about_the_topic_outranks_a_neighbour_that_mentions_it_once(brain):
    # the migration guide has one section on time zones; the time zones page is about nothing
    # else. Their best passages match the question about as well.
    for question in (
        "server sends timestamps with no zone and tempora.parse fails, can tempora guess the zone",
        "my api gives times without a timezone, how do i parse them with tempora",
    ):
        topic_outranks_neighbour(brain, question, "advanced/time-zones.md", "migrating.md", "zone")


@pytest.mark.slow
def test_the_page_about_the_topic_outranks_a_neighbour_on_real_pages(tmp_path):
    # the Requests compatibility guide has one section on content encoding; the text encodings
    # page is about nothing else, and the hybrid search of the whole HTTPX docs put the
    # compatibility guide first
    pages = ["advanced/text-encodings.md", "compatibility.md", "contributing.md"]
    question = "server sends a non utf-8 page and resp.text is garbage, can httpx guess the encoding"
    topic_outranks_neighbour(
        brain_over(tmp_path, fetched_corpus("httpx-docs"), pages),
        question,
        "advanced/text-encodings.md",
        "compatibility.md",
        "encoding",
    )


@pytest.mark.slow
def test_page_evidence_is_left_out_where_it_cannot_be_measured(brain):
    # documents that are not chunks of the index (web results) get no page evidence, and
    # ranking them still works
    web = [
        {"id": "web-1", "text": "Tempora reads time zones from the IANA database.", "location": "https://a"},
        {"id": "web-2", "text": "Unrelated text about cooking pasta.", "location": "https://b"},
    ]
    assert list(brain.page_evidence(["where does tempora get its time zones"], web)) == [0.0, 0.0]
    assert brain.rerank(["where does tempora get its time zones"], web, 2)[0]["location"] == "https://a"


HANDBOOK = {
    "staff-handbook/claiming-expenses.md": """# Claiming expenses

If you spend your own money on something for work, we pay it back. Keep the receipt.

## How to claim

Submit each claim in Xero within a month of spending the money, with a photo of the receipt.
Your line manager approves it and it is paid with the next payroll.

## What you can claim

Travel to client sites outside London, hotels when a trip needs an overnight stay, and meals on those trips
up to 25 pounds a day. Ask the operations team before booking anything over 200 pounds.
""",
    "staff-handbook/benefits/season-ticket-loan.md": """# Season ticket loan

We lend you the cost of an annual season ticket for your commute, interest free.
You pay it back from your salary over twelve months. Ask the operations team for the form.
""",
    "staff-handbook/leave/holiday.md": """# Holiday

Everyone gets 25 days of paid holiday a year, plus bank holidays. Book holiday in the leave calendar.
""",
}


@pytest.fixture(scope="module")
def handbook(tmp_path_factory) -> ExtractiveGraders:
    root = tmp_path_factory.mktemp("handbook")
    for rel, text in HANDBOOK.items():
        (root / "src" / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / "src" / rel).write_text(text)
    emb, eid = build_embeddings("local", ModelSettings())
    kb = KnowledgeBase(root / "index", [root / "src"], embeddings=emb, embedder_id=eid)
    kb.reindex()
    return ExtractiveGraders(OfflineKit(kb, cross_language=False), history_messages=6)


async def relevant_pages(graders: ExtractiveGraders, question: str) -> tuple[list[str], list[str]]:
    """The retrieved pages and the pages the grader keeps, as the graph's first pass does."""
    docs = graders.kit.extractive.retrieve([question], 5)
    grades, _ = await graders.grade_documents({"messages": [HumanMessage(question)], "source": "kb"}, docs)
    kept = [docs[g.id - 1]["location"] for g in grades.documents if g.relevant]
    return [d["location"] for d in docs], kept


@pytest.mark.slow
async def test_a_question_whose_page_is_found_is_answered_not_sent_to_the_experts(handbook):
    # no sentence of the expenses page says "claim back" or "paid for myself", so each
    # sentence alone scores under the plain bar; the page's passage, read with its headings,
    # matches the question well, which lowers the bar
    retrieved, kept = await relevant_pages(handbook, "how do I claim back a hotel I paid for myself")
    assert retrieved[0] == "staff-handbook/claiming-expenses.md"
    assert "staff-handbook/claiming-expenses.md" in kept
    assert "staff-handbook/leave/holiday.md" not in kept


@pytest.mark.slow
async def test_a_question_no_page_answers_still_goes_to_the_experts(handbook):
    _, kept = await relevant_pages(handbook, "how do I rebalance kafka consumer groups after adding partitions?")
    assert kept == []


LOUD_WORD = {
    # a short page all about one word of the question ("email"), its title and path included, beside
    # the longer page about what the question asks (resigning), which uses that word once
    "people/email-addresses.md": """# Email addresses

Every teammate gets a work email address on their first day, in the form first.last@example.com.

## Changing your email address

You can ask for a new email address when your name changes. Email the IT team with the address you want and
they will set it up within a week. Your old email address keeps working as an alias for a year.

## Shared mailboxes

Teams can have a shared email inbox such as support@example.com. Ask the IT team by email to create one.
""",
    "people/leaving.md": """# Leaving the company

We are sorry to see people go, and we want leaving to be simple.

## Resigning

Tell your line manager first and agree your last working day. Your notice period is in your contract: one
month for most roles. Then send your resignation email to people@example.com so the People team can start
your offboarding.

## Exit interviews

Every leaver is offered an exit interview with their People Partner in their last week.
""",
    "people/holiday.md": "# Holiday\n\nEveryone gets 25 days of holiday a year. Book it in the leave calendar.\n",
    "people/expenses.md": "# Expenses\n\nClaim expenses in Xero with a photo of the receipt.\n",
}


@pytest.mark.slow
def test_a_page_repeating_one_word_of_the_question_does_not_outrank_the_page_about_it(tmp_path):
    # "email" is the loudest word of these questions and the whole subject of the neighbouring
    # page (title, path, every paragraph); the page about resigning holds it once
    for rel, text in LOUD_WORD.items():
        (tmp_path / "src" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "src" / rel).write_text(text)
    emb, eid = build_embeddings("local", ModelSettings())
    kb = KnowledgeBase(tmp_path / "index", [tmp_path / "src"], embeddings=emb, embedder_id=eid)
    kb.reindex()
    brain = ex.Extractive(ex.TextEmbedder(emb), kb)
    for question in (
        "how do i give my notice, who should i email",
        "i want to resign, who do i email?",
        "who do i email to quit",
    ):
        assert brain.retrieve([question], 3)[0]["location"] == "people/leaving.md", question


@pytest.mark.slow
def test_a_long_reference_page_whose_one_section_answers_outranks_a_short_guide_on_the_topic(tmp_path):
    # the chat API's room reference (tests/data/docsites/chatapi) has 44 sections on every endpoint
    # and object of a room, one of which lists the auto archive durations; the discussions guide
    # is about archiving in every section but names no duration. The guide's passage comes first
    # from the search (its words are the question's); the mean of all the reference page's chunks
    # is low (most sections are about other things), and the best of them keeps it from sinking
    brain = brain_over(tmp_path, CHATAPI, ["resources/room.md", "topics/discussions.md"])
    question = "what auto archive durations can a discussion have?"
    found = brain.knowledge.search([question], 10)
    guide = next(d for d in found if d["location"] == "topics/discussions.md")
    reference = next(d for d in found if d["location"] == "resources/room.md" and "Metadata" in d["title"])
    ranked = brain.rerank([question], [guide, reference], 2)
    assert [d["location"] for d in ranked] == ["resources/room.md", "topics/discussions.md"]
    assert "10080 minutes" in brain.retrieve([question], 1)[0]["text"]
