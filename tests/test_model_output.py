"""Model output that is not an answer or not a verdict, from a Mistral-shaped server:
empty drafts are failed drafts, and replies cut at max_tokens (finish_reason "length")
are noticed: structured output is asked for again with more room, a cut answer gets its
code fence closed and says it was cut short."""

from __future__ import annotations

import json

import pytest

from bot.platforms.console import ConsoleResponder
from tests.fakes.mistral_api import CHARS_PER_TOKEN, mistral_runtime

QUESTION = "what does the standalone container need to boot?"
MAX_TOKENS = 64  # the fake cuts replies at 64 * 4 = 256 characters
ROOM = MAX_TOKENS * CHARS_PER_TOKEN
MODELS = f"max_tokens = {MAX_TOKENS}"
GOOD_DRAFT = "It needs REDIS_URI and DATABASE_URI [1]."


async def ask(rt, text: str = QUESTION, thread: str = "t") -> ConsoleResponder:
    out = ConsoleResponder(thread, show_status=False)
    await rt.service.ask(f"console:{thread}", text, out)
    return out


# ---- empty drafts ----------------------------------------------------------------------
@pytest.mark.parametrize("empty", ["", "   ", "\n\t\n"])
async def test_an_empty_draft_is_a_failed_draft(tmp_path, empty):
    async with mistral_runtime(tmp_path, {"generate": [empty, GOOD_DRAFT]}, MODELS) as (rt, fake):
        out = await ask(rt)
        values = await rt.service.thread_values("console:t")
    assert [a.text for a in out.answers] == [GOOD_DRAFT]
    assert values["path"].count("generate") == 2
    assert any("empty" in f for f in values["generation_feedback"])
    assert len(fake.bodies("grade_answer")) == 1  # the empty draft was not sent to the grader
    assert "empty" in fake.bodies("generate")[1]["messages"][-1]["content"]  # the redraft knows why


@pytest.mark.parametrize("human_review", ["true", "false"])
async def test_only_empty_drafts_never_post_an_empty_answer(tmp_path, human_review):
    async with mistral_runtime(
        tmp_path, {"generate": [" "]}, MODELS, f"[graph]\nhuman_review = {human_review}\nmax_generations = 2"
    ) as (rt, fake):
        out = await ask(rt)
        values = await rt.service.thread_values("console:t")
    assert all(a.text.strip() for a in out.answers)
    assert fake.bodies("grade_answer") == []
    assert values["path"].count("generate") == 4  # 2 drafts x 2 knowledge-base searches, each counted
    if human_review == "true":
        [request] = out.help_requests
        assert "empty" in request.reason
        assert not out.answers
    else:
        assert [a.kind for a in out.answers] == ["apology"]


# ---- cut at max_tokens: structured output ---------------------------------------------
def padded(obj: dict, key_path: tuple, size: int) -> str:
    """``obj`` as JSON, with the string at ``key_path`` padded so the whole is ``size`` long."""
    text = json.dumps(obj)
    target = obj
    for k in key_path[:-1]:
        target = target[k]
    target[key_path[-1]] += " " + "x" * max(0, size - len(text) - 1)
    return json.dumps(obj)


async def test_cut_document_grades_are_asked_again_with_more_room(tmp_path):
    grades = padded(
        {
            "documents": [
                {"id": 1, "relevant": True, "facts": "REDIS_URI and DATABASE_URI"},
                {"id": 2, "relevant": False, "facts": ""},
                {"id": 3, "relevant": False, "facts": ""},
            ],
            "feedback": "",
        },
        ("documents", 0, "facts"),
        ROOM + 150,
    )
    async with mistral_runtime(tmp_path, {"grade_documents": [grades]}, MODELS) as (rt, fake):
        out = await ask(rt)
    first, second = fake.bodies("grade_documents")
    assert first["max_tokens"] == MAX_TOKENS and second["max_tokens"] == 2 * MAX_TOKENS
    sources = fake.bodies("generate")[0]["messages"][-1]["content"]
    assert "[1]" in sources and "[2]" not in sources  # only the one relevant document, not every one
    assert out.answers[0].text == GOOD_DRAFT


async def test_a_cut_verdict_is_not_a_pass(tmp_path):
    verdict = padded(
        {"grounded": False, "useful": True, "feedback": "the port is not in the sources"}, ("feedback",), ROOM + 100
    )
    grounded = json.dumps({"grounded": True, "useful": True, "feedback": ""})
    script = {"grade_answer": [verdict, verdict, grounded], "generate": ["It listens on port 8123 [1].", GOOD_DRAFT]}
    async with mistral_runtime(tmp_path, script, MODELS) as (rt, fake):
        out = await ask(rt)
    assert [b["max_tokens"] for b in fake.bodies("grade_answer")] == [MAX_TOKENS, 2 * MAX_TOKENS, MAX_TOKENS]
    assert [a.text for a in out.answers] == [GOOD_DRAFT]  # the ungrounded first draft was not posted


async def test_a_cut_route_is_asked_again(tmp_path):
    route = padded({"question": "hello there", "route": "direct", "query": "hello"}, ("question",), ROOM + 50)
    async with mistral_runtime(tmp_path, {"route": [route]}, MODELS) as (rt, fake):
        out = await ask(rt, "hello there")
    assert fake.tasks() == ["route", "route", "direct"]
    assert out.answers[0].kind == "direct"


async def test_structured_output_cut_twice_takes_the_safe_default(tmp_path):
    grades = padded(
        {"documents": [{"id": 1, "relevant": False, "facts": ""}], "feedback": "nothing"}, ("feedback",), 3 * ROOM
    )
    async with mistral_runtime(tmp_path, {"grade_documents": [grades]}, MODELS) as (rt, fake):
        out = await ask(rt)
    assert len(fake.bodies("grade_documents")) == 2  # one retry with more room, then the default
    assert out.answers[0].text == GOOD_DRAFT


# ---- cut at max_tokens: answers ---------------------------------------------------------
async def test_a_cut_answer_is_asked_again_with_more_room(tmp_path):
    answer = "The container needs these [1]:\n\n```bash\n" + "export REDIS_URI=redis://cache:6379\n" * 8 + "```\nDone."
    assert ROOM < len(answer) <= 2 * ROOM
    async with mistral_runtime(tmp_path, {"generate": [answer]}, MODELS) as (rt, fake):
        out = await ask(rt)
    assert [b["max_tokens"] for b in fake.bodies("generate")] == [MAX_TOKENS, 2 * MAX_TOKENS]
    assert out.answers[0].text == answer
    assert "cut short" not in out.answers[0].text


@pytest.mark.parametrize("fence", ["```", "```python", "~~~"])
async def test_an_answer_cut_inside_a_code_block_is_closed_and_marked(tmp_path, fence):
    answer = f"Run this [1]:\n\n{fence}\n" + "docker run --env REDIS_URI=redis://cache:6379 image\n" * 40
    async with mistral_runtime(tmp_path, {"generate": [answer]}, MODELS) as (rt, fake):
        out = await ask(rt)
    text = out.answers[0].text
    marker = fence[:3]
    assert sum(1 for line in text.splitlines() if line.strip().startswith(marker)) % 2 == 0  # no open fence
    assert text.rstrip().endswith("(answer cut short)")
    assert text.startswith("Run this [1]:")
