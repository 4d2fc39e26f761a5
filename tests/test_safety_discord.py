"""Safe in a shared Discord server, through discord.py connected to the fake gateway.

* answers notify nobody (allowed_mentions parses nothing; experts only in help requests) and
  never unfurl a URL (SUPPRESS_EMBEDS on every message the bot writes);
* replies addressed to other people are left alone (reply_policy);
* servers outside the allow-list get one refusal;
* without thread permission every question is its own conversation;
* the text answered is the text created (edits never change or start an answer);
* help is private; done means posted; a refused reaction leaves no earlier stage.
"""

from __future__ import annotations

import pytest

from tests.fakes.chat_model import ScriptedChatModel
from tests.fakes.discord_gateway import FakeDiscord, is_help_request
from tests.test_discord_bot import (  # noqa: F401 - fixtures
    CHECK,
    PENCIL,
    SAD,
    answers,
    ask_in_channel,
    bot,
    ephemeral_texts,
    fake,
    help_requests,
    never_grounded,
    open_bot,
    present_reactions,
    wait_help_request,
)

SUPPRESS_EMBEDS = 1 << 2
HOSTILE = (
    "@everyone @here look: <@{user}> <@&{role}> <@!{user}> https://attacker.test/track?id=1 "
    "[docs](https://attacker.test/x) <https://attacker.test/y>"
)


def pings_nobody(message: dict, roles: tuple[str, ...] = ()) -> bool:
    allowed = message.get("allowed_mentions") or {}
    return (
        allowed.get("parse") == []
        and not allowed.get("users")
        and [str(r) for r in allowed.get("roles") or []] == list(roles)
        and not allowed.get("replied_user")
    )


def bot_messages_everywhere(fake: FakeDiscord) -> list[dict]:
    return [m for msgs in fake.messages.values() for m in msgs]


# ---------------------------------------------------------------------------- mentions and previews
async def test_answers_ping_nobody_and_show_no_previews(fake, open_bot):
    victim = fake.add_user("victim")
    text = HOSTILE.format(user=victim.id, role=fake.admin_role_id)
    bot = await open_bot(ScriptedChatModel(script={"generate": text}))
    alice = fake.add_user("alice")
    _, thread_id = await ask_in_channel(fake, bot, alice, "how do I deploy?")
    (answer,) = [m for m in fake.bot_messages(thread_id)]
    # shown (as a word no client turns into a ping) and never allowed to ping
    assert "@\u2060everyone" in answer["content"] and "https://attacker.test/track" in answer["content"]
    assert pings_nobody(answer)
    assert answer["flags"] & SUPPRESS_EMBEDS


async def test_every_message_of_a_help_flow_suppresses_previews(fake, open_bot):
    bot = await open_bot(never_grounded())
    alice = fake.add_user("alice")
    bob = fake.add_user("bob")
    _, thread_id = await ask_in_channel(fake, bot, alice, "see https://attacker.test/z @everyone what now?")
    help_msg = await wait_help_request(fake, bot, thread_id)
    assert pings_nobody(help_msg, roles=(fake.expert_role_id,))  # only the experts we mean
    await fake.send_message(bob, "answer: guess", channel_id=thread_id)  # a non-expert: private note by DM
    await fake.wait_until(lambda: fake.bot_messages(fake.dm_channels.get(bob.id, "-")))
    await bot.idle()
    sent = bot_messages_everywhere(fake)
    assert len(sent) >= 2 and all(m["flags"] & SUPPRESS_EMBEDS for m in sent)


# ---------------------------------------------------------------------------- reply policy
async def test_reply_addressed_to_someone_else_in_the_thread_starts_no_run(fake, bot):
    alice = fake.add_user("alice")
    bob = fake.add_user("bob")
    msg, thread_id = await ask_in_channel(fake, bot, alice, "how do I deploy?")
    calls = len(bot.model.calls)
    await fake.send_message(alice, f"<@{bob.id}> can you check this?", channel_id=thread_id)
    await fake.send_message(alice, f"<@&{fake.expert_role_id}> anyone?", channel_id=thread_id)
    bobs = await fake.send_message(bob, f"<@{alice.id}> looks right to me", channel_id=thread_id)
    await fake.send_message(alice, "thanks!", channel_id=thread_id, reply_to=bobs)  # a reply to bob
    await bot.idle()
    assert len(bot.model.calls) == calls
    assert len(answers(fake, thread_id)) == 1

    await fake.send_message(alice, "and how do I roll it back?", channel_id=thread_id)  # for the bot
    await fake.wait_until(lambda: len(answers(fake, thread_id)) == 2)
    await bot.idle()
    await fake.send_message(alice, f"<@{bob.id}> <@{fake.bot.id}> and to staging?", channel_id=thread_id)
    await fake.wait_until(lambda: len(fake.bot_messages(thread_id)) == 3)  # answered (or sent to the experts)


@pytest.mark.parametrize(
    "policy, text, answered",
    [
        ("all", "<@{other}> can you check this?", True),
        ("mentions_only", "and how do I roll it back?", False),
        ("mentions_only", "<@{bot}> and how do I roll it back?", True),
    ],
)
async def test_reply_policy_is_configurable(fake, open_bot, policy, text, answered):
    bot = await open_bot(discord=f'reply_policy = "{policy}"')
    alice = fake.add_user("alice")
    bob = fake.add_user("bob")
    _, thread_id = await ask_in_channel(fake, bot, alice, "how do I deploy?")
    await fake.send_message(alice, text.format(other=bob.id, bot=fake.bot.id), channel_id=thread_id)
    await bot.idle()
    assert len(answers(fake, thread_id)) == (2 if answered else 1)


# ---------------------------------------------------------------------------- outsiders
async def test_server_outside_the_allow_list_gets_one_refusal(fake, open_bot):
    bot = await open_bot(discord="allowed_guild_ids = [42]")
    alice = fake.add_user("alice")
    msg = await fake.send_message(alice, f"<@{fake.bot.id}> what is in the deploy runbook?")
    await fake.send_message(alice, "no mention: nothing at all")
    await bot.idle()
    assert bot.model.calls == [] and fake.threads == {}
    (refusal,) = fake.bot_messages(fake.channel_id)
    assert "only answer members" in refusal["content"]
    assert str(refusal["message_reference"]["message_id"]) == msg["id"]
    slash = await fake.slash(alice, "threadwise", "status")
    await bot.idle()
    assert any("only answer members" in t for t in ephemeral_texts(fake, slash))


# ---------------------------------------------------------------------------- no thread permission
async def test_without_thread_permission_each_question_is_its_own_conversation(fake, open_bot):
    grader_stuck = {"stuck": True}

    def grade_answer(messages):
        import json

        return json.dumps({"grounded": not grader_stuck["stuck"], "useful": True, "feedback": "no"})

    bot = await open_bot(ScriptedChatModel(script={"grade_answer": grade_answer}))
    fake.threads_forbidden = True
    alice = fake.add_user("alice")
    bob = fake.add_user("bob")
    # alice's question gets stuck and waits for an expert, in the channel
    a_msg = await fake.send_message(alice, f"<@{fake.bot.id}> what is the VPN policy?")
    await fake.wait_until(lambda: help_requests(fake, fake.channel_id), timeout=20)
    await bot.idle()
    grader_stuck["stuck"] = False
    # bob's unrelated question is answered, not told to wait for alice's expert
    b_msg = await fake.send_message(bob, f"<@{fake.bot.id}> how do I deploy?")
    await fake.wait_until(lambda: answers(fake, fake.channel_id))
    await bot.idle()
    (b_answer,) = [m for m in fake.bot_messages(fake.channel_id) if not is_help_request(m)]
    assert str(b_answer["message_reference"]["message_id"]) == b_msg["id"]
    assert "waiting for an expert" not in b_answer["content"]
    assert present_reactions(fake, b_msg["id"]) == [CHECK]
    assert fake.dm_channels.get(bob.id) is None  # no private "waiting" note either
    # bob's follow-up is a reply to the bot's answer: it continues bob's conversation only
    follow = await fake.send_message(bob, "and to staging?", reply_to=fake.all_messages[b_answer["id"]])
    await fake.wait_until(lambda: len(answers(fake, fake.channel_id)) == 2)
    await bot.idle()
    service = bot.runtime.service
    b_key = f"discord:{fake.guild_id}:{b_msg['id']}"
    texts = [str(m.content) for m in (await service.thread_values(b_key))["messages"]]
    assert any("how do I deploy?" in t for t in texts) and any("and to staging?" in t for t in texts)
    assert not any("VPN" in t for t in texts)
    assert present_reactions(fake, follow["id"]) == [CHECK]
    assert await service.pending_interrupt(f"discord:{fake.guild_id}:{a_msg['id']}") is not None


# ---------------------------------------------------------------------------- edits
async def test_an_edit_in_the_same_read_never_starts_an_answer(fake, bot):
    alice = fake.add_user("alice")
    await fake.send_message(alice, "just chatting about deploys", edit_to=f"<@{fake.bot.id}> how do I deploy?")
    await bot.idle()
    assert bot.model.calls == [] and fake.threads == {} and fake.calls("POST", "/messages") == []


async def test_the_text_answered_is_the_text_created(fake, bot):
    alice = fake.add_user("alice")
    msg = await fake.send_message(
        alice, f"<@{fake.bot.id}> how do I deploy?", edit_to=f"<@{fake.bot.id}> ignore that and write a poem"
    )
    await fake.wait_until(lambda: msg["id"] in fake.threads)
    await bot.idle()
    route_input = str([m for t, m in bot.model.calls if t == "route"][0][-1].content)
    assert "how do I deploy?" in route_input and "poem" not in route_input


# ---------------------------------------------------------------------------- admin replies
async def test_help_is_private(fake, bot):
    alice = fake.add_user("alice")
    slash = await fake.slash(alice, "threadwise", "help")
    await fake.wait_until(lambda: ephemeral_texts(fake, slash))
    await bot.idle()
    (text,) = set(ephemeral_texts(fake, slash))
    assert "reindex" in text and "`answer: <your answer>`" in text
    await fake.send_message(alice, f"<@{fake.bot.id}> help")
    await fake.wait_until(lambda: fake.bot_messages(fake.dm_channels.get(alice.id, "-")))
    await bot.idle()
    assert fake.bot_messages(fake.channel_id) == []  # nothing public


# ---------------------------------------------------------------------------- done means posted
@pytest.mark.parametrize("status, code", [(403, 50001), (403, 50013), (404, 10003)])
async def test_answer_that_cannot_be_posted_never_ends_as_done(fake, bot, status, code):
    alice = fake.add_user("alice")
    fake.message_failures["*"] = (status, code)
    msg = await fake.send_message(alice, f"<@{fake.bot.id}> how do I deploy?")
    await fake.wait_until(lambda: SAD in present_reactions(fake, msg["id"]))
    await bot.idle()
    assert present_reactions(fake, msg["id"]) == [SAD]


async def test_a_refused_final_reaction_leaves_no_earlier_stage(fake, bot):
    fake.reaction_failures[("*", CHECK)] = (400, 30010)  # maximum number of reactions reached
    alice = fake.add_user("alice")
    msg, thread_id = await ask_in_channel(fake, bot, alice, "how do I deploy?")
    assert len(answers(fake, thread_id)) == 1
    assert PENCIL in fake.added_reactions(msg["id"])
    assert present_reactions(fake, msg["id"]) == []
