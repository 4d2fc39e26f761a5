"""Expert answers become knowledge on Discord: learned from a help request, answered from in
another thread with a link to the first, forgotten by an admin, then asked about again."""

from __future__ import annotations

from tests.fakes.chat_model import ScriptedChatModel
from tests.test_discord_bot import answers, ask_in_channel, fake, help_requests, open_bot, wait_help_request  # noqa: F401 - fixtures
from tests.test_learning import learned_only


async def test_an_expert_answer_is_learned_cited_and_forgotten_on_discord(fake, open_bot):
    bot = await open_bot(ScriptedChatModel(script={"grade_documents": learned_only}))
    alice = fake.add_user("alice")
    erin = fake.add_user("erin", roles=[fake.expert_role_id])
    adam = fake.add_user("adam", roles=[fake.admin_role_id])
    _, first = await ask_in_channel(fake, bot, alice, "what is the VPN password policy?")
    await wait_help_request(fake, bot, first)
    await fake.send_message(erin, "answer: Rotate the VPN password every 90 days.", channel_id=first)
    await fake.wait_until(lambda: answers(fake, first))
    await bot.idle()

    for question in ("what is the VPN password policy?", "how often must the VPN password change?"):
        _, thread = await ask_in_channel(fake, bot, alice, question)
        await fake.wait_until(lambda thread=thread: answers(fake, thread) or help_requests(fake, thread))
        await bot.idle()
        assert help_requests(fake, thread) == [], question
        (answer,) = answers(fake, thread)
        assert "answered by erin on 20" in answer
        assert f"https://discord.com/channels/{fake.guild_id}/{first}" in answer

    await fake.send_message(adam, f"<@{fake.bot.id}> learned forget 1")
    await fake.wait_until(lambda: fake.bot_messages(fake.dm_channels.get(adam.id, "-")))
    await bot.idle()
    assert "removed" in answers(fake, fake.dm_channels[adam.id])[-1]
    _, thread = await ask_in_channel(fake, bot, alice, "what is the VPN password policy?")
    await wait_help_request(fake, bot, thread)
    assert answers(fake, thread) == []


async def test_slash_learned_lists_for_admins_only(fake, open_bot):
    from tests.test_discord_bot import callbacks_for, ephemeral_texts

    bot = await open_bot(ScriptedChatModel(script={"grade_documents": learned_only}))
    bot.runtime.learned.add("what is the VPN password policy?", "Every 90 days.", "erin")
    bob, adam = fake.add_user("bob"), fake.add_user("adam", roles=[fake.admin_role_id])
    refused = await fake.slash(bob, "threadwise", "learned")
    await fake.wait_until(lambda: ephemeral_texts(fake, refused))
    listed = await fake.slash(adam, "threadwise", "learned")
    await fake.wait_until(lambda: callbacks_for(fake, listed) and ephemeral_texts(fake, listed))
    await bot.idle()
    assert "only admins" in ephemeral_texts(fake, refused)[0].lower()
    assert any(
        "1: what is the VPN password policy?" in t and "answered by erin" in t for t in ephemeral_texts(fake, listed)
    )
