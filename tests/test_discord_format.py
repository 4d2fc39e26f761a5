"""Discord text rules: mentions out of questions, thread names, answers split under 2000 characters."""

from __future__ import annotations

import random
import re

import pytest

from bot.platforms.discord.format import (
    format_answer,
    format_help_request,
    size,
    split_message,
    strip_mentions,
    thread_name,
)
from bot.protocol import Answer, HelpRequest, Source

FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")


def content_lines(text: str) -> list[str]:
    """Non-blank, non-fence lines, in order: what a reader must find in the messages."""
    return [ln.rstrip() for ln in text.split("\n") if ln.strip() and not FENCE.match(ln)]


def assert_well_split(text: str, chunks: list[str], limit: int) -> None:
    assert chunks, "nothing to post"
    for chunk in chunks:
        assert 0 < size(chunk) <= limit, f"chunk of {size(chunk)} > {limit}"
        fences = [ln for ln in chunk.split("\n") if FENCE.match(ln)]
        assert len(fences) % 2 == 0, f"unbalanced code fence in chunk:\n{chunk}"
    # every non-whitespace character outside fence lines survives, in order (fences may be added)
    joined = "".join(content_lines("\n".join(chunks)))
    assert re.sub(r"\s", "", joined) == re.sub(r"\s", "", "".join(content_lines(text)))


def test_mentions_of_the_bot_in_both_forms_are_stripped():
    assert strip_mentions("<@42> how do I deploy?", [42]) == "how do I deploy?"
    assert strip_mentions("<@!42>   how do I   deploy?", [42]) == "how do I deploy?"
    assert strip_mentions("hey <@!42>, and <@7>?", [42]) == "hey , and <@7>?"
    assert strip_mentions("<@42>\n```py\nx  = 1\n```", [42]) == "```py\nx = 1\n```"
    assert strip_mentions("<@42>", [42]) == ""
    assert strip_mentions("<@&9> deploy? <@&10>", [42], [9]) == "deploy? <@&10>"


def test_thread_name_is_first_line_and_fits_discord():
    assert thread_name("How do I **rotate** the API keys?\nmore", 90) == "How do I rotate the API keys?"
    long = "word " * 60
    name = thread_name(long, 90)
    assert size(name) <= 90 and name.endswith("…")
    assert thread_name("```\ncode\n```", 90) == "code"
    assert thread_name("   ", 90) == "Question"
    assert size(thread_name("x" * 500, 200)) <= 100


def test_short_text_is_one_message():
    assert split_message("hello", 2000) == ["hello"]
    assert split_message("  \n ", 2000) == []


def test_4500_character_answer_with_a_code_block_is_split_in_order_with_fences_reopened():
    prose = "\n\n".join(f"Paragraph {i}: " + "lorem ipsum dolor sit amet " * 12 for i in range(6))
    code = "```python\n" + "\n".join(f"print('line {i:03d} of the deploy script')" for i in range(70)) + "\n```"
    text = prose + "\n\n" + code + "\n\nThat's all."
    assert size(text) > 4500
    chunks = split_message(text, 2000)
    assert len(chunks) >= 3
    assert_well_split(text, chunks, 2000)
    # the code block (longer than a message) was cut: one message closes it, the next reopens it
    assert any(c.endswith("script')\n```") for c in chunks[:-1])
    assert any(c.startswith("```python\nprint('line") for c in chunks[1:])
    assert content_lines("\n".join(chunks)) == content_lines(text)


def test_paragraph_boundaries_are_preferred():
    para = "a" * 700
    text = "\n\n".join([para] * 4)
    chunks = split_message(text, 2000)
    assert [len(c) for c in chunks] == [1402, 1402]


def test_a_line_longer_than_a_message_is_cut_at_spaces():
    text = " ".join(["token"] * 1000)
    chunks = split_message(text, 2000)
    assert_well_split(text, chunks, 2000)
    assert all(not c.startswith(" ") and not c.endswith("tok") for c in chunks)


@pytest.mark.parametrize("seed", range(40))
def test_random_markdown_always_fits_and_keeps_everything(seed):
    rnd = random.Random(seed)
    limit = rnd.choice([100, 300, 2000])
    parts = []
    for _ in range(rnd.randint(5, 40)):
        kind = rnd.random()
        if kind < 0.3:
            lang = rnd.choice(["", "python", "bash"])
            body = "\n".join(
                "".join(rnd.choice("abc xyz=()") for _ in range(rnd.randint(0, 150))) for _ in range(rnd.randint(1, 30))
            )
            parts.append(f"```{lang}\n{body}\n```")
        elif kind < 0.4:
            parts.append("🙂" * rnd.randint(1, 400))
        else:
            parts.append(
                " ".join(rnd.choice(["alpha", "beta", "gamma", "**bold**", "`x`"]) for _ in range(rnd.randint(1, 400)))
            )
    text = rnd.choice(["\n\n", "\n"]).join(parts)
    chunks = split_message(text, limit)
    assert_well_split(text, chunks, limit)


def test_answer_has_sources_as_links_or_paths_and_the_route_note():
    answer = Answer(
        text="Use `tw deploy`. [1][2]\n\n#### Details\nSee docs.",
        sources=[Source("Deploying", "https://example.com/deploy"), Source("Runbook > Deploy", "docs/runbook.md")],
        route="kb",
        drafts=1,
    )
    (msg,) = format_answer(answer, 2000)
    assert "1. [Deploying](<https://example.com/deploy>)" in msg
    assert "2. Runbook > Deploy — `docs/runbook.md`" in msg
    assert msg.rstrip().endswith("-# knowledge base")
    assert "**Details**" in msg and "####" not in msg


def test_long_answer_keeps_sources_after_the_text():
    answer = Answer(text="word " * 900, sources=[Source("Guide", "docs/guide.md")], route="kb", drafts=2)
    chunks = format_answer(answer, 2000)
    assert len(chunks) == 3
    assert all(size(c) <= 2000 for c in chunks)
    assert "**Sources**" in chunks[-1] and "-# knowledge base + 2 drafts" in chunks[-1]


def test_help_request_fits_and_names_the_experts():
    req = HelpRequest(
        thread_key="discord:1:2", question="q" * 3000, reason="knowledge base exhausted", attempts=["searched x"] * 50
    )
    text = format_help_request(req, "<@&5>", 2000)
    assert size(text) <= 2000
    assert text.startswith("🙋 <@&5> ")
    assert "`answer: <your answer>`" in text and "`dismiss`" in text
