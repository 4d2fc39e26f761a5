"""Text from documents, questions and models shows on Discord as written, through discord.py
connected to the fake gateway and REST server, the exact content posted checked: ``<@id>``,
``<@&role>``, ``<#channel>``, ``<t:…>`` and ``<:emoji:id>`` are not Discord's markup (a word
joiner after the ``<``; ``allowed_mentions`` alone would keep a mention from pinging, not
from showing as one), ``@everyone`` / ``@here`` are broken, an emoji code (``:x:``) is not an
emoji; code keeps its text."""

from __future__ import annotations

import re

from tests.fakes.chat_model import ScriptedChatModel
from tests.fakes.discord_gateway import DiscordHarness
from tests.test_discord_bot import (  # noqa: F401 - fixtures
    answers,
    ask_in_channel,
    fake,
    never_grounded,
    open_bot,
    wait_help_request,
)
from tests.test_safety_discord import pings_nobody

WJ = "\u2060"
# Discord's markup in text: mentions, roles, channels, slash commands, custom emoji, timestamps
MARKUP = re.compile(r"<(?:@[!&]?\d+|#\d+|/[\w-]+:\d+|a?:\w+:\d+|t:\d+(?::\w)?)>")
EMOJI = re.compile(r":(?!\d+:)[a-z0-9_+'-]+:")


def prose(content: str) -> str:
    """``content`` without its code (blocks and spans), which Discord shows as written."""
    return re.sub(r"`[^`]*`", "", re.sub(r"```.*?```", "", content, flags=re.S))


def hostile(user: str, role: str, channel: str) -> str:
    return (
        f"Failed checks are marked :x: and flaky ones :warning: at 10:30:00, ask <@{user}> or <@&{role}> "
        f"in <#{channel}> before <t:1700000000:R> with <:party:123456789012345678> and @everyone or @here."
    )


def shown(user: str, role: str, channel: str) -> str:
    return (
        f"Failed checks are marked :{WJ}x: and flaky ones :{WJ}warning: at 10:30:00, ask <{WJ}@{user}> or "
        f"<{WJ}@&{role}> in <{WJ}#{channel}> before <{WJ}t:1700000000:R> with <{WJ}:{WJ}party:123456789012345678> "
        f"and @{WJ}everyone or @{WJ}here."
    )


async def test_document_text_is_posted_as_written(tmp_path, fake):
    victim = fake.add_user("victim")
    harness = DiscordHarness(tmp_path, fake, ScriptedChatModel())
    text = hostile(victim.id, fake.admin_role_id, "111111111111111111")
    (tmp_path / "kb" / "checks.md").write_text(
        f"# Weekly checks\n\n{text}\n\nTo test the checks bot, type `:x: <@{victim.id}>` in the test channel.\n"
    )
    with harness.config_path.open("a") as config:
        config.write('\n[graph]\ncomposer = "extractive"\ngraders = "lexical"\n')
    bot = await harness.open()
    try:
        alice = fake.add_user("alice")
        _, thread_id = await ask_in_channel(fake, bot, alice, "how are failed and flaky checks marked?")
        (answer,) = [m for m in fake.bot_messages(thread_id)]
        content = answer["content"]
        assert shown(victim.id, fake.admin_role_id, "111111111111111111") in content, content
        assert f"`:x: <@{victim.id}>`" in content  # code as written
        assert MARKUP.findall(prose(content)) == [] and EMOJI.findall(prose(content)) == []
        assert pings_nobody(answer)
    finally:
        await harness.close()


async def test_model_output_is_posted_as_written(fake, open_bot):
    victim = fake.add_user("victim")
    text = hostile(victim.id, fake.admin_role_id, "111111111111111111")
    bot = await open_bot(ScriptedChatModel(script={"generate": f"{text}\n\n```\necho ':x: <@{victim.id}>'\n```"}))
    alice = fake.add_user("alice")
    _, thread_id = await ask_in_channel(fake, bot, alice, "how do I deploy?")
    (content,) = answers(fake, thread_id)
    assert shown(victim.id, fake.admin_role_id, "111111111111111111") in content, content
    assert f"```\necho ':x: <@{victim.id}>'\n```" in content
    assert MARKUP.findall(prose(content)) == [] and EMOJI.findall(prose(content)) == []


async def test_a_question_echoed_in_a_help_request_is_text(fake, open_bot):
    victim = fake.add_user("victim")
    bot = await open_bot(never_grounded())
    alice = fake.add_user("alice")
    question = hostile(victim.id, fake.admin_role_id, "111111111111111111")
    _, thread_id = await ask_in_channel(fake, bot, alice, question)
    help_msg = await wait_help_request(fake, bot, thread_id)
    content = help_msg["content"]
    assert "> " + shown(victim.id, fake.admin_role_id, "111111111111111111") in content, content
    # the experts we mean are the only live mention: the role in the question is text
    assert MARKUP.findall(prose(content)) == [f"<@&{fake.expert_role_id}>"], content
    assert pings_nobody(help_msg, roles=(fake.expert_role_id,))


async def test_an_experts_answer_and_name_are_text(fake, open_bot):
    victim = fake.add_user("victim")
    bot = await open_bot(never_grounded())
    alice = fake.add_user("alice")
    expert = fake.add_user(f"<@{victim.id}> :crown:", roles=[fake.expert_role_id])
    _, thread_id = await ask_in_channel(fake, bot, alice, "when is the freeze?")
    await wait_help_request(fake, bot, thread_id)
    await fake.send_message(
        expert, f"answer: the freeze starts :x: <t:1700000000:R>, ask <@{victim.id}>", channel_id=thread_id
    )
    await fake.wait_until(lambda: any("the freeze starts" in m["content"] for m in fake.bot_messages(thread_id)))
    await bot.idle()
    for message in fake.bot_messages(thread_id):
        content = fake.all_messages[message["id"]]["content"]
        assert MARKUP.findall(prose(content)) in ([], [f"<@&{fake.expert_role_id}>"]), content
        assert EMOJI.findall(prose(content)) == [], content
    answer = next(m["content"] for m in fake.bot_messages(thread_id) if "the freeze starts" in m["content"])
    assert f"the freeze starts :{WJ}x: <{WJ}t:1700000000:R>, ask <{WJ}@{victim.id}>" in answer, answer
