"""One refusal for a help request's buttons on every platform (bot.interactions.help_replies.on_help_click):
someone neither expert nor admin is told, privately, the same sentence on Slack and on Discord,
naming the channel's experts (mentions built from the configured ids), and no modal opens."""

from __future__ import annotations

import re

import pytest

from tests.fakes.chat_model import ScriptedChatModel
from tests.fakes.discord_gateway import DiscordHarness, FakeDiscord
from tests.fakes.slack_api import SlackHarness, write_config
from tests.test_discord_bot import (
    ask_in_channel,
    button_ids,
    callbacks_for,
    ephemeral_texts,
    never_grounded,
    wait_help_request,
)
from tests.test_slack_help import ask_until_help, click, ephemerals_to, grader

MENTION = re.compile(r"<(?:@&?|!subteam\^)[0-9A-Z]+>")


def without_mentions(text: str) -> str:
    """``text`` with every platform mention replaced by ``@``: the words alone."""
    return MENTION.sub("@", text)


@pytest.fixture
async def discord_fake():
    server = await FakeDiscord().start()
    yield server
    await server.close()


async def slack_refusal(tmp_path, fake, user: str, button: str) -> str:
    (tmp_path / "slack").mkdir()
    model = ScriptedChatModel(script={"grade_documents": grader({"stuck": True})})
    slack = await SlackHarness(tmp_path / "slack", fake, write_config(tmp_path, fake), model).open()
    try:
        _, help_msg = await ask_until_help(slack)
        await slack.send(click(slack, user, help_msg, button))
        assert not slack.fake.calls_to("views.open"), "a modal opened for someone refused"
        (refusal,) = ephemerals_to(slack, user)
        return refusal
    finally:
        await slack.close()


async def discord_refusal(tmp_path, fake: FakeDiscord, label: str) -> str:
    (tmp_path / "discord").mkdir()
    bot = await DiscordHarness(tmp_path / "discord", fake, never_grounded()).open()
    try:
        alice, bob = fake.add_user("alice"), fake.add_user("bob")
        _, thread_id = await ask_in_channel(fake, bot, alice, "what is the VPN password policy?")
        help_msg = await wait_help_request(fake, bot, thread_id)
        pressed = await fake.click(bob, help_msg, button_ids(help_msg)[label])
        await fake.wait_until(lambda: ephemeral_texts(fake, pressed))
        await bot.idle()
        (response,) = callbacks_for(fake, pressed)  # the click's one reply: the refusal, ephemeral
        assert response["type"] == 4 and response["data"]["flags"] & 64
        return str(response["data"]["content"])
    finally:
        await bot.close()


async def test_the_refusal_is_the_same_sentence_naming_the_experts_on_both_platforms(tmp_path, fake, discord_fake):
    on_slack = await slack_refusal(tmp_path, fake, "UOTHER", "threadwise_answer")
    on_discord = await discord_refusal(tmp_path, discord_fake, "Answer")
    assert (
        on_slack == "Only the experts named for this channel (<@UEXPERT>, <!subteam^SEXPERTS>), or an admin, "
        "can answer help requests."
    )
    assert (
        on_discord == f"Only the experts named for this channel (<@&{discord_fake.expert_role_id}>), or an admin, "
        "can answer help requests."
    )
    assert without_mentions(on_slack).replace("@, @", "@") == without_mentions(on_discord)
