"""Votes, 👎 reasons and "Ask the experts" are handled once (bot.interactions.votes); here as Discord
shows them, through discord.py connected to the fake gateway (Slack: test_chat_feedback_slack.py,
same rules): an outsider's vote or "Ask the experts" gets the one refusal; "Ask the experts"
about an answer not known here says so privately.
"""

from __future__ import annotations

from bot.chat import vote_controls
from bot.chat.policy import OUTSIDER_REFUSAL
from tests.test_discord_bot import (  # noqa: F401 - fixtures
    ask_in_channel,
    bot,
    callbacks_for,
    ephemeral_texts,
    fake,
    open_bot,
)
from tests.test_feedback_discord import last_answer

UNKNOWN_ANSWER = "abcdef0123456789"


def with_button(message: dict, custom_id: str) -> dict:
    """``message`` as a client shows it with one button ``custom_id`` (a forged or stale control)."""
    button = {"type": 2, "style": 2, "label": "x", "custom_id": custom_id}
    return {**message, "components": [{"type": 1, "components": [button]}]}


# ---------------------------------------------------------------------------- Discord
async def test_discord_vote_and_ask_the_experts_from_another_server_are_refused(fake, open_bot):  # noqa: F811
    harness = await open_bot(discord="allowed_guild_ids = [42]")
    alice = fake.add_user("alice")
    await fake.send_message(alice, f"<@{fake.bot.id}> what is in the deploy runbook?")
    await harness.idle()
    (refusal,) = fake.bot_messages(fake.channel_id)  # a message of the bot's to click on
    message = fake.all_messages[refusal["id"]]
    clicks = [
        await fake.click(alice, with_button(message, cid), cid)
        for cid in (f"tw:v:d:{UNKNOWN_ANSWER}", f"tw:ve:{UNKNOWN_ANSWER}")
    ]
    for click in clicks:
        await fake.wait_until(lambda c=click: ephemeral_texts(fake, c))
    await harness.idle()
    assert [set(ephemeral_texts(fake, c)) for c in clicks] == [{OUTSIDER_REFUSAL}, {OUTSIDER_REFUSAL}]
    assert not [c for c in clicks for cb in callbacks_for(fake, c) if cb["type"] == 9]  # no reason modal


async def test_discord_ask_the_experts_about_an_unknown_answer_says_so(fake, bot):  # noqa: F811
    alice = fake.add_user("alice")
    _, thread_id = await ask_in_channel(fake, bot, alice, "how do I deploy?")
    answer = last_answer(fake, thread_id)
    click = await fake.click(alice, with_button(answer, f"tw:ve:{UNKNOWN_ANSWER}"), f"tw:ve:{UNKNOWN_ANSWER}")
    await fake.wait_until(lambda: ephemeral_texts(fake, click))
    await bot.idle()
    assert set(ephemeral_texts(fake, click)) == {vote_controls.NOT_FOUND}
