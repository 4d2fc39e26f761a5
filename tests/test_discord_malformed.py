"""Malformed interactions from the Discord gateway (junk custom ids, forms without their
fields, data of the wrong type): each ends with at most one log line and no traceback, and
the bot keeps answering. Through discord.py connected to the fake gateway."""

from __future__ import annotations

import logging

import pytest

from tests.fakes.chat_model import ScriptedChatModel
from tests.fakes.discord_gateway import DiscordHarness, FakeDiscord


@pytest.fixture
async def fake():
    server = await FakeDiscord().start()
    yield server
    await server.close()


def _junk(fake: FakeDiscord, user, message: dict) -> list[tuple[str, dict]]:
    """(name, INTERACTION_CREATE data) pairs, each malformed in one way."""
    base = lambda kind: fake._interaction_base(user, channel_id=message["channel_id"], kind=kind, dm=False)  # noqa: E731
    cases = []
    for custom_id in (
        "tw:v:u:",
        "tw:v:x:123",
        "tw:h:a:",
        "tw:h:a:discord:1:2:nointerrupt",
        "tw:ve:",
        "tw:m:a:",
        "x" * 100,
    ):
        data = base(3)
        data["message"] = message
        data["data"] = {"custom_id": custom_id, "component_type": 2}
        cases.append((f"button {custom_id[:20]}", data))
    for custom_id, components in (
        ("tw:m:a:discord:1:2", "junk"),
        ("tw:m:a:discord:1:2", [{"type": 1, "components": "junk"}]),
        ("tw:m:a:discord:1:2", [{"type": 1, "components": [{"type": 4, "value": 5}]}]),
        ("tw:m:r:discord:1:2", []),
        ("tw:vr:abc", [{"type": 1, "components": [{"type": 4, "custom_id": "text"}]}]),
    ):
        data = base(5)
        data["message"] = message
        data["data"] = {"custom_id": custom_id, "components": components}
        cases.append((f"modal {custom_id} {str(components)[:30]}", data))
    return cases


async def test_malformed_interactions_end_in_one_line_and_no_traceback(tmp_path, fake, caplog):
    harness = await DiscordHarness(tmp_path, fake, ScriptedChatModel()).open()
    try:
        user = fake.add_user("alice")
        msg = await fake.send_message(user, f"<@{fake.bot.id}> how do I deploy?")
        await fake.wait_until(lambda: msg["id"] in fake.threads)
        await harness.idle()
        answer = fake.bot_messages(msg["id"])[-1]
        caplog.set_level(logging.INFO)
        for name, data in _junk(fake, user, answer):
            caplog.clear()
            await fake.dispatch("INTERACTION_CREATE", data)
            await harness.idle()
            problems = [r for r in caplog.records if r.levelno >= logging.WARNING]
            assert not any(r.exc_info for r in caplog.records), (name, caplog.text[-2000:])
            assert len(problems) <= 1, (name, [r.getMessage() for r in problems])
        # still answering
        again = await fake.send_message(user, f"<@{fake.bot.id}> and how do I roll back?")
        await fake.wait_until(lambda: again["id"] in fake.threads)
        await harness.idle()
        assert fake.bot_messages(again["id"])
    finally:
        await harness.close()
