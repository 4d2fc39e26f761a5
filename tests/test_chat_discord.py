"""The shared chat layer (bot/chat/) as Discord shows it: the same rules as on Slack
(tests/test_chat_slack.py), through the fake Discord gateway.

* who may answer a help request: its experts *and* the admins (bot.chat.policy.may_answer_help);
* the help request says how long it stays open (bot.chat.help.expiry_note) - only Slack did;
* after a resume the help request shows the shared handled note (bot.chat.help.handled_note);
* the reply syntax shown is the one parsed (bot.chat.text);
* bots are ignored unless allow-listed and mentioning the bot (bot.chat.policy.ignore_reason).
"""

from __future__ import annotations

import asyncio

from bot.chat.help import done_note
from bot.chat.syntax import parse_human_reply
from bot.protocol import HumanAction
from tests.test_discord_bot import (  # noqa: F401
    CHECK,
    answers,
    ask_in_channel,
    button_ids,
    ephemeral_texts,
    fake,
    never_grounded,
    open_bot,
    present_reactions,
    wait_help_request,
)


async def test_an_admin_who_is_no_expert_may_answer_by_button_and_modal(fake, open_bot):  # noqa: F811
    bot = await open_bot(never_grounded())
    alice = fake.add_user("alice")
    adam = fake.add_user("adam", roles=[fake.admin_role_id])
    msg, thread_id = await ask_in_channel(fake, bot, alice, "what is the VPN password policy?")
    help_msg = await wait_help_request(fake, bot, thread_id)

    click = await fake.click(adam, help_msg, button_ids(help_msg)["Answer"])
    await fake.wait_until(
        lambda: any(c["type"] == 9 for c in fake.interaction_callbacks if c["interaction_id"] == click["id"])
    )
    modal = next(c for c in fake.interaction_callbacks if c["interaction_id"] == click["id"] and c["type"] == 9)
    submit = await fake.submit_modal(adam, help_msg, modal["data"]["custom_id"], {"text": "Rotate it every 90 days."})
    await fake.wait_until(lambda: answers(fake, thread_id))
    await bot.idle()
    (answer,) = answers(fake, thread_id)
    assert "Rotate it every 90 days." in answer
    assert present_reactions(fake, msg["id"]) == [CHECK]
    # the help request shows the shared handled note, naming who resumed it, and no buttons
    edited = fake.all_messages[help_msg["id"]]
    assert edited["content"].endswith(f"-# Help request answered by <@{adam.id}>.")
    assert edited["components"] == []
    assert done_note(HumanAction.ANSWER) in ephemeral_texts(fake, submit)


async def test_someone_neither_expert_nor_admin_is_refused_with_the_shared_words(fake, open_bot):  # noqa: F811
    bot = await open_bot(never_grounded())
    alice = fake.add_user("alice")
    bob = fake.add_user("bob")
    _, thread_id = await ask_in_channel(fake, bot, alice, "what is the VPN password policy?")
    help_msg = await wait_help_request(fake, bot, thread_id)
    click = await fake.click(bob, help_msg, button_ids(help_msg)["Dismiss"])
    await fake.wait_until(lambda: ephemeral_texts(fake, click))
    await bot.idle()
    # the click's one reply names the channel's experts, as on Slack (tests/test_chat_help_refusal.py)
    assert set(ephemeral_texts(fake, click)) == {
        f"Only the experts named for this channel (<@&{fake.expert_role_id}>), or an admin, can answer help requests."
    }
    assert answers(fake, thread_id) == []


async def test_help_request_says_how_long_it_stays_open_and_shows_the_parsed_syntax(fake, open_bot):  # noqa: F811
    bot = await open_bot(never_grounded())
    alice = fake.add_user("alice")
    _, thread_id = await ask_in_channel(fake, bot, alice, "what is the VPN password policy?")
    text = (await wait_help_request(fake, bot, thread_id))["content"]
    assert "stays open for 10 min" in text  # [service] help_timeout_seconds = 600 in the test config
    assert "without a reply within 10 min I'll apologise to the asker" in text
    for shown in ("answer: <your answer>", "retry: <a hint for a new search>", "dismiss"):
        assert f"`{shown}`" in text
        assert parse_human_reply(shown) is not None


async def test_other_bots_are_ignored_unless_allow_listed_and_mentioning(fake, open_bot):  # noqa: F811
    robo = fake.add_user("robo", bot=True)
    bot = await open_bot(discord=f"allowed_bot_ids = [{robo.id}]")
    other = fake.add_user("other", bot=True)
    await fake.send_message(other, f"<@{fake.bot.id}> how do I deploy?")
    quiet = await fake.send_message(robo, "how do I deploy?")  # allow-listed but no mention
    asked = await fake.send_message(robo, f"<@{fake.bot.id}> how do I deploy?")
    await fake.wait_until(lambda: asked["id"] in fake.threads)
    await bot.idle()
    assert quiet["id"] not in fake.threads
    assert len(fake.threads) == 1


# ---------------------------------------------------------------------------- slash command publishing
def _published(fake) -> list[str]:  # noqa: F811
    """Paths of the command publications (PUT .../commands), in order."""
    return [r.path for r in fake.calls("PUT") if r.path.endswith("/commands")]


async def test_start_without_command_guilds_publishes_nothing_globally(fake, open_bot):  # noqa: F811
    await open_bot(discord="command_guild_ids = []")  # overrides the harness's guild
    assert _published(fake) == []


async def test_start_with_command_guilds_publishes_to_those_servers_only(fake, open_bot):  # noqa: F811
    await open_bot()  # the harness config sets command_guild_ids = [the fake's server]
    assert _published(fake) == [f"/applications/{fake.application_id}/guilds/{fake.guild_id}/commands"]


async def test_threadwise_discord_sync_publishes_globally_or_to_a_server(fake, tmp_path, monkeypatch):  # noqa: F811
    from bot.cli import main
    from tests.fakes.discord_gateway import write_config

    config = write_config(tmp_path, fake, discord="command_guild_ids = []")
    monkeypatch.setenv("DISCORD_TOKEN", fake.TOKEN)
    assert await asyncio.to_thread(main, ["discord", "sync", "--config", str(config)]) == 0
    assert await asyncio.to_thread(main, ["discord", "sync", "--guild", "42", "--config", str(config)]) == 0
    app = fake.application_id
    assert _published(fake) == [f"/applications/{app}/commands", f"/applications/{app}/guilds/42/commands"]
    body = next(r.body for r in fake.calls("PUT") if r.path.endswith("/commands"))
    assert [c["name"] for c in body] == ["threadwise"]
    assert {o["name"] for o in body[0]["options"]} == {"reindex", "status", "help", "learned", "remember"}

    monkeypatch.setenv("DISCORD_TOKEN", "wrong")
    assert await asyncio.to_thread(main, ["discord", "sync", "--config", str(config)]) == 1
    monkeypatch.delenv("DISCORD_TOKEN")
    assert await asyncio.to_thread(main, ["discord", "sync", "--config", str(config)]) == 2
