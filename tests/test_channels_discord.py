"""Per-channel settings on Discord: an entry matched by the channel's name gives its threads
their own experts (who are pinged and who may answer)."""

from __future__ import annotations

from tests.test_discord_bot import (  # noqa: F401 - fixtures
    answers,
    ask_in_channel,
    fake,
    help_requests,
    never_grounded,
    open_bot,
    wait_help_request,
)


async def test_a_channels_experts_replace_the_default_ones_in_its_threads(fake, open_bot):
    bob = fake.add_user("bob")
    bot = await open_bot(
        never_grounded(),
        discord=f"""
[[channels]]
platform = "discord"
name = "general"
expert_role_ids = []
expert_user_ids = [{bob.id}]
""",
    )
    alice = fake.add_user("alice")
    erin = fake.add_user("erin", roles=[fake.expert_role_id])  # an expert everywhere else
    _, thread_id = await ask_in_channel(fake, bot, alice, "what is the VPN password policy?")
    help_msg = await wait_help_request(fake, bot, thread_id)
    assert f"<@{bob.id}>" in help_msg["content"] and f"<@&{fake.expert_role_id}>" not in help_msg["content"]

    await fake.send_message(erin, "answer: 30 days", channel_id=thread_id)
    await fake.wait_until(lambda: fake.bot_messages(fake.dm_channels.get(erin.id, "-")))
    await bot.idle()
    assert answers(fake, thread_id) == []  # not an expert in this channel

    await fake.send_message(bob, "answer: Every 90 days, enforced by IT.", channel_id=thread_id)
    await fake.wait_until(lambda: answers(fake, thread_id))
    await bot.idle()
    assert "Every 90 days" in answers(fake, thread_id)[0]
