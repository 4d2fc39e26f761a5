"""The shared chat layer (bot/chat/) that Slack, Discord and the console adapters call: one
algorithm each, shown here on every platform's renderer."""

from __future__ import annotations

import asyncio
import logging
import random

import pytest

from bot.chat.policy import ignore_reason, may_answer_help
from bot.chat.split import split_text
from bot.chat.tasks import BackgroundTasks
from bot.platforms.console import format_answer as console_answer
from bot.platforms.discord.format import format_sources, split_message
from bot.platforms.slack.blocks import sources_mrkdwn
from bot.platforms.slack.format import split_mrkdwn
from bot.protocol import Answer, Source


def markdown(rng: random.Random) -> str:
    parts = []
    for i in range(rng.randint(5, 30)):
        if rng.random() < 0.3:
            parts.append(
                "```\n"
                + "\n".join(f"line {i}.{k} " + "x" * rng.randint(0, 90) for k in range(rng.randint(1, 40)))
                + "\n```"
            )
        else:
            parts.append(" ".join(f"w{i}.{k}" for k in range(rng.randint(1, 200))))
    return "\n\n".join(parts)


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("limit", [200, 2000])
def test_slack_and_discord_cut_the_same_text_at_the_same_places(seed, limit):
    """One splitter: for plain ASCII with ``` fences (no Slack links, no emoji) both
    platforms cut identically; only their counting and protected spans differ."""
    text = markdown(random.Random(seed))
    assert split_mrkdwn(text, limit) == split_message(text, limit) == split_text(text, limit)
    assert len(split_message(text, limit)) > 1 or len(text) <= limit


def test_the_platform_parameters_are_what_differs():
    emoji = "🙂" * 150  # 150 code points, 300 UTF-16 units
    assert split_mrkdwn(emoji, 200) == [emoji]  # Slack counts characters
    pieces = split_message(emoji, 200)  # Discord counts UTF-16 units
    assert len(pieces) == 2 and "".join(pieces) == emoji
    assert all(len(p.encode("utf-16-le")) // 2 <= 200 for p in pieces)
    link = "<https://x.test/a|a long label> " * 20
    assert all(p.count("<") == p.count(">") for p in split_mrkdwn(link, 100))  # never inside a Slack link
    with pytest.raises(ValueError):
        split_mrkdwn("x", 99)
    with pytest.raises(ValueError):
        split_message("x", 39)


def test_sources_and_route_note_come_from_one_renderer_on_every_platform():
    answer = Answer(
        "See [1] and [2].",
        [
            Source("Deploying", "https://example.com/deploy"),
            Source("docs/runbook.md", "docs/runbook.md"),
            Source("Runbook", "docs/ops.md"),
        ],
        route="kb",
        drafts=1,
        path=["route", "retrieve", "generate"],
    )
    slack = sources_mrkdwn(answer).split("\n")
    discord = format_sources(answer).split("\n")
    console = console_answer(answer).split("\n")
    assert slack == [
        "*Sources*",
        "1. <https://example.com/deploy|Deploying>",
        "2. `docs/runbook.md`",
        "3. `docs/ops.md` — Runbook",
    ]
    assert discord == [
        "**Sources**",
        "1. [Deploying](<https://example.com/deploy>)",
        "2. `docs/runbook.md`",
        "3. Runbook — `docs/ops.md`",
        "-# knowledge base",
    ]
    assert console[2:6] == [
        "Sources:",
        "  [1] https://example.com/deploy — Deploying",
        "  [2] docs/runbook.md",
        "  [3] docs/ops.md — Runbook",
    ]
    assert "(knowledge base; path: route -> retrieve -> generate)" in console


async def test_background_tasks_log_failures_and_wait_for_late_starters(caplog):
    tasks = BackgroundTasks("test", logging.getLogger("test.tasks"))
    done: list[str] = []

    async def later() -> None:
        await asyncio.sleep(0.01)
        done.append("later")

    async def first() -> None:
        tasks.spawn(later(), "started meanwhile")
        done.append("first")

    async def fails() -> None:
        raise RuntimeError("boom")

    tasks.spawn(first(), "first")
    with caplog.at_level(logging.ERROR, "test.tasks"):
        assert await tasks.spawn(fails(), "fails") is None  # logged, never raised
    await tasks.wait_idle(5)
    assert done == ["first", "later"] and len(tasks) == 0
    assert "test background task failed: fails" in caplog.text

    tasks.spawn(asyncio.sleep(30), "slow")
    with pytest.raises(TimeoutError):
        await tasks.wait_idle(0.05)
    await tasks.shutdown(grace=0.05)  # cancels what does not finish in time
    assert tasks.pending() == []


@pytest.mark.parametrize("platform_ids", [("UBOT", "B1", "U2"), (100, 200, 300)])  # Slack, Discord shapes
def test_one_author_rule_for_bots_and_the_bot_itself(platform_ids):
    me, allowed_bot, other_bot = platform_ids
    args = {"own_id": me, "allowed_bots": [allowed_bot]}
    assert ignore_reason(author=me, is_bot=True, bot_id=me, mentions_bot=True, **args)
    assert ignore_reason(author="", is_bot=False, bot_id=None, mentions_bot=True, **args)
    assert ignore_reason(author=other_bot, is_bot=True, bot_id=other_bot, mentions_bot=True, **args)
    assert ignore_reason(author="X1", is_bot=True, bot_id=allowed_bot, mentions_bot=False, **args)
    assert ignore_reason(author="X1", is_bot=True, bot_id=allowed_bot, mentions_bot=True, **args) == ""
    assert ignore_reason(author="X1", is_bot=False, bot_id=None, mentions_bot=False, **args) == ""


def test_experts_and_admins_may_answer_help_requests():
    assert may_answer_help(expert=True, admin=False) and may_answer_help(expert=False, admin=True)
    assert not may_answer_help(expert=False, admin=False)
