"""Slack text rules: incoming text to a question, Markdown to mrkdwn, splitting under the limits,
and the Block Kit payloads (answers, help requests, modals)."""

from __future__ import annotations

import json
import random

import pytest

from bot.platforms.slack.blocks import (
    HelpRef,
    answer_messages,
    help_modal,
    help_request_message,
    mentions,
    question_block_of,
)
from bot.platforms.slack.format import incoming_text, markdown_to_mrkdwn, split_mrkdwn
from bot.protocol import Answer, HelpRequest, HumanAction, Source
from tests.fakes.slack_api import _check_view, check_blocks


@pytest.mark.parametrize(
    "markdown, mrkdwn",
    [
        ("**bold** and __bold__", "*bold* and *bold*"),
        ("*italic* and _italic_", "_italic_ and _italic_"),
        ("~~gone~~", "~gone~"),
        ("snake_case_name and 2*3*4", "snake_case_name and 2*3*4"),
        ("[docs](https://x.test/a?b=1&c=2)", "<https://x.test/a?b=1&amp;c=2|docs>"),
        ("<https://x.test/p>", "<https://x.test/p>"),
        ("![diagram](https://x.test/d.png)", "<https://x.test/d.png|diagram>"),
        ("# Title\n## Sub", "*Title*\n*Sub*"),
        ("- a\n* b\n  + c", "• a\n• b\n  • c"),
        ("- [ ] todo\n- [x] done", "☐ todo\n☑ done"),
        ("1. one\n2. two", "1. one\n2. two"),
        ("> quoted <b> & more", "> quoted &lt;b&gt; &amp; more"),
        ("use `a < b && **c**`", "use `a &lt; b &amp;&amp; **c**`"),
        ("```python\nx = '**no**' if a < b else [l](u)\n```", "```\nx = '**no**' if a &lt; b else [l](u)\n```"),
        ("```\nunclosed", "```\nunclosed\n```"),
        ("---", "──────────"),
    ],
)
def test_markdown_to_mrkdwn(markdown, mrkdwn):
    assert markdown_to_mrkdwn(markdown) == mrkdwn


@pytest.mark.parametrize(
    "slack_text, question",
    [
        ("<@UBOT> how do I deploy?", "how do I deploy?"),
        ("hey <@UBOT>, ping <@U2|ann> and <@U3>", "hey , ping @ann and @U3"),
        ("see <#C1|general> and <!here>", "see #general and @here"),
        ("ask <!subteam^S1|@oncall>", "ask @oncall"),
        (
            "<https://x.test/a|the docs> or <https://x.test/b> or <mailto:a@b.c|a@b.c>",
            "the docs (https://x.test/a) or https://x.test/b or a@b.c",
        ),
        ("if a &lt; b &amp;&amp; c &gt; d", "if a < b && c > d"),
        ("&amp;lt; stays literal", "&lt; stays literal"),
        ("<@UBOT>", ""),
        ("", ""),
    ],
)
def test_incoming_text(slack_text, question):
    assert incoming_text(slack_text, "UBOT") == question


def random_mrkdwn(rng: random.Random) -> str:
    parts = []
    for i in range(rng.randint(5, 40)):
        kind = rng.random()
        if kind < 0.2:
            parts.append(
                "```\n"
                + "\n".join(f"code {i}.{k} " + "x" * rng.randint(0, 120) for k in range(rng.randint(1, 80)))
                + "\n```"
            )
        elif kind < 0.3:
            parts.append(" ".join(f"<https://x.test/{i}/{k}|link {k}> &amp;" for k in range(rng.randint(50, 150))))
        else:
            parts.append(" ".join(f"w{i}.{k}" for k in range(rng.randint(1, 300))))
    return "\n\n".join(parts)


def content(text: str) -> list[str]:
    return [line for line in text.split("\n") if line.strip() and line.strip() != "```"]


@pytest.mark.parametrize("seed", range(25))
@pytest.mark.parametrize("limit", [100, 700, 3000])
def test_split_keeps_everything_in_order_under_the_limit(seed, limit):
    text = random_mrkdwn(random.Random(seed))
    pieces = split_mrkdwn(text, limit)
    assert all(0 < len(p) <= limit for p in pieces)
    assert all(p.count("```") % 2 == 0 for p in pieces)
    squash = lambda lines: "".join("".join(lines).split())  # noqa: E731 - cuts may add line breaks
    assert squash(line for p in pieces for line in content(p)) == squash(content(text))
    for p in pieces:  # never inside a link or an entity
        assert p.count("<") == p.count(">")
        assert "&amp" not in p.replace("&amp;", "")


def test_split_prefers_paragraph_breaks():
    text = "\n\n".join(f"para {i} " + "x" * 400 for i in range(10))
    pieces = split_mrkdwn(text, 1000)
    assert all(p.startswith("para ") for p in pieces)
    assert len(pieces) == 5


def test_split_rejects_tiny_limits():
    with pytest.raises(ValueError):
        split_mrkdwn("text", 10)


def test_answer_messages_sources_and_route_note():
    answer = Answer(
        "See [1] and [2].",
        [Source("Deploying › Rollback", "docs/deploy.md"), Source("Status page", "https://status.test/a?x=1&y=2")],
        route="kb",
        drafts=2,
    )
    [msg] = answer_messages(answer, max_section=3000, max_message=12000)
    assert check_blocks(msg["blocks"]) is None
    texts = [b["text"]["text"] for b in msg["blocks"] if b["type"] == "section"]
    assert texts[0] == "See [1] and [2]."
    assert "1. `docs/deploy.md` — Deploying › Rollback" in texts[1]
    assert "2. <https://status.test/a?x=1&amp;y=2|Status page>" in texts[1]
    assert msg["blocks"][-1] == {
        "type": "context",
        "elements": [{"type": "mrkdwn", "text": "_knowledge base + 2 drafts_"}],
    }
    assert msg["text"].startswith("See [1]")


def test_answer_messages_respect_block_count_and_size():
    answer = Answer("\n\n".join(f"Paragraph {i} " + "y" * 80 for i in range(120)))
    msgs = answer_messages(answer, max_section=100, max_message=40000)
    assert len(msgs) == 3
    for m in msgs:
        assert check_blocks(m["blocks"]) is None
    assert msgs[1]["text"].startswith("(2/3) Paragraph 50")  # 50 blocks per message
    msgs = answer_messages(Answer("z " * 9000), max_section=3000, max_message=5000)
    assert all(sum(len(b.get("text", {}).get("text", "")) for b in m["blocks"]) <= 5000 for m in msgs)


def test_apology_and_human_notes():
    [msg] = answer_messages(Answer("Sorry.", kind="apology"), max_section=3000, max_message=12000)
    assert "no grounded answer found" in msg["blocks"][-1]["elements"][0]["text"]
    [msg] = answer_messages(Answer("Dec 20", kind="human", answered_by="Erik"), max_section=3000, max_message=12000)
    assert "answered by Erik" in msg["blocks"][-1]["elements"][0]["text"]


def test_mentions():
    assert mentions(["U1", "@U2", "S3", "W4", "U1", ""]) == "<@U1> <@U2> <!subteam^S3> <@W4>"


def test_help_request_message_and_modal():
    ref = HelpRef("slack:T:C:1.0", "C", "1.0", "1.1", "intr-1")
    request = HelpRequest(
        "slack:T:C:1.0",
        "Is <b> & c allowed?\nsecond line",
        "knowledge base exhausted",
        ["deploy freeze", "change freeze"],
        interrupt_id="intr-1",
    )
    msg = help_request_message(request, experts=["U1", "S2"], ref=ref, timeout_text="1 h")
    assert check_blocks(msg["blocks"]) is None
    assert msg["text"].startswith("<@U1> <!subteam^S2> help needed")
    buttons = [e for b in msg["blocks"] if b["type"] == "actions" for e in b["elements"]]
    assert [HelpRef.loads(b["value"]) for b in buttons] == [ref] * 3
    question = question_block_of(msg["blocks"])
    assert question["text"]["text"] == "> Is &lt;b&gt; &amp; c allowed?\n> second line"
    assert "within 1 h" in json.dumps(msg["blocks"])
    for action in (HumanAction.ANSWER, HumanAction.RETRY):
        view = help_modal(action, HelpRef("k", "C", "1.0", "1.1", "i", "2.0"), question)
        assert _check_view(view) is None
        assert HelpRef.loads(view["private_metadata"]).help_ts == "2.0"


def test_help_ref_rejects_foreign_values():
    with pytest.raises(ValueError):
        HelpRef.loads("not json")
    with pytest.raises(ValueError):
        HelpRef.loads('{"thread_key": "x"}')
