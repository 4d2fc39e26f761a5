"""Discord through the real boundary: discord.py connects to a local fake gateway + REST API.

Every test runs the real runtime (scripted chat model, SQLite files under tmp_path) and the
bot through ``run_discord``; events go in as gateway dispatches (MESSAGE_CREATE,
INTERACTION_CREATE...), and everything the bot does is observed as REST calls reaching the
fake: reactions, threads, messages, interaction callbacks.
"""

from __future__ import annotations

import copy
import json
import logging
import re

import pytest

from tests.fakes.chat_model import ScriptedChatModel
from tests.fakes.discord_gateway import DiscordHarness, FakeDiscord, is_help_request

EYES, MAG, PENCIL, RAISED, CHECK, SAD = "👀", "🔍", "✏️", "🙋", "✅", "😞"
NOT_GROUNDED = json.dumps({"grounded": False, "useful": False, "feedback": "not supported by the documents"})


# ---------------------------------------------------------------------------- fixtures and helpers
@pytest.fixture
async def fake():
    server = await FakeDiscord().start()
    yield server
    await server.close()


@pytest.fixture
async def open_bot(tmp_path, fake):
    """Factory: open the bot with a chat model and extra ``[discord]`` config lines."""
    harnesses: list[DiscordHarness] = []

    async def factory(model: ScriptedChatModel | None = None, discord: str = "") -> DiscordHarness:
        harness = await DiscordHarness(tmp_path, fake, model or ScriptedChatModel(), discord=discord).open()
        harnesses.append(harness)
        return harness

    yield factory
    for harness in harnesses:
        await harness.close()


@pytest.fixture
async def bot(open_bot):
    return await open_bot()


def never_grounded() -> ScriptedChatModel:
    """A model whose answers are never grounded: the graph spends its budget and asks for help."""
    return ScriptedChatModel(script={"grade_answer": NOT_GROUNDED})


def present_reactions(fake: FakeDiscord, message_id: str) -> list[str]:
    """The bot's reactions on a message after all successful adds and removes."""
    shown: list[str] = []
    for method, emoji, status in fake.reactions_on(message_id):
        if status >= 300:
            continue
        if method == "PUT" and emoji not in shown:
            shown.append(emoji)
        elif method == "DELETE" and emoji in shown:
            shown.remove(emoji)
    return shown


def answers(fake: FakeDiscord, channel_id: str) -> list[str]:
    """Texts the bot posted in a channel, help requests (messages with buttons) excluded."""
    return [m["content"] for m in fake.bot_messages(channel_id) if not is_help_request(m)]


def help_requests(fake: FakeDiscord, channel_id: str) -> list[dict]:
    """Messages the bot posted with buttons (as they are now: edits included)."""
    return [fake.all_messages[m["id"]] for m in fake.bot_messages(channel_id) if is_help_request(m)]


def button_ids(message: dict) -> dict[str, str]:
    """label -> custom_id of the buttons on a message."""
    return {c["label"]: c["custom_id"] for row in message["components"] for c in row["components"]}


def callbacks_for(fake: FakeDiscord, interaction: dict) -> list[dict]:
    return [c for c in fake.interaction_callbacks if c["interaction_id"] == interaction["id"]]


def ephemeral_texts(fake: FakeDiscord, interaction: dict) -> list[str]:
    """Texts shown only to the user who interacted (ephemeral responses and follow-ups, and
    the edited "thinking" placeholder of an ephemeral deferral)."""
    texts = []
    for c in callbacks_for(fake, interaction):
        if c["type"] == 4 and c["data"].get("flags", 0) & 64:
            texts.append(c["data"].get("content", ""))
    texts += [
        m["content"] for m in fake.followups if m["interaction_token"] == interaction["token"] and m["flags"] & 64
    ]
    original = fake._original.get(interaction["token"])
    if original is not None and original.get("flags", 0) & 64 and original.get("content"):
        texts.append(original["content"])
    return texts


async def ask_in_channel(
    fake: FakeDiscord, bot: DiscordHarness, user, question: str, *, form: str = "<@{}>"
) -> tuple[dict, str]:
    """Mention the bot in the channel with a question; wait for the answer; return the user's
    message and the thread id."""
    msg = await fake.send_message(user, f"{form.format(fake.bot.id)} {question}")
    await fake.wait_until(lambda: msg["id"] in fake.threads)
    await bot.idle()
    return msg, msg["id"]


async def wait_help_request(fake: FakeDiscord, bot: DiscordHarness, channel_id: str) -> dict:
    await fake.wait_until(lambda: help_requests(fake, channel_id), timeout=20)
    await bot.idle()
    return help_requests(fake, channel_id)[-1]


# ---------------------------------------------------------------------------- triggers
async def test_mention_in_channel_starts_a_thread_and_answers_there(fake, bot):
    alice = fake.add_user("alice")
    msg, thread_id = await ask_in_channel(fake, bot, alice, "How do I deploy to production?")

    thread = fake.threads[thread_id]
    assert thread["name"] == "How do I deploy to production?"
    assert thread["parent_id"] == fake.channel_id
    (answer,) = answers(fake, thread_id)  # exactly one answer, in the thread
    assert "Here is the answer from the knowledge base" in answer
    assert "**Sources**" in answer and "`deploy.md`" in answer  # sources as file paths
    assert answer.rstrip().endswith("-# knowledge base")  # the route note
    assert answers(fake, fake.channel_id) == []  # nothing posted in the channel itself
    # statuses follow the graph, one at a time, ending in done
    assert fake.added_reactions(msg["id"]) == [EYES, MAG, PENCIL, CHECK]
    assert present_reactions(fake, msg["id"]) == [CHECK]
    assert fake.calls("POST", f"/channels/{thread_id}/typing")  # typing while writing
    # the model saw the question without the mention
    route_input = str([m for t, m in bot.model.calls if t == "route"][0][-1].content)
    assert "How do I deploy to production?" in route_input and str(fake.bot.id) not in route_input


async def test_follow_up_in_the_thread_needs_no_mention_and_keeps_history(fake, bot):
    alice = fake.add_user("alice")
    _, thread_id = await ask_in_channel(fake, bot, alice, "How do I deploy?")
    follow = await fake.send_message(alice, "and how do I roll it back?", channel_id=thread_id)
    await fake.wait_until(lambda: len(answers(fake, thread_id)) == 2)
    await bot.idle()

    assert len(answers(fake, thread_id)) == 2
    assert len(fake.threads) == 1  # no second thread
    assert present_reactions(fake, follow["id"]) == [CHECK]
    # the second turn saw the first one (one LangGraph thread per Discord thread)
    values = await bot.runtime.service.thread_values(f"discord:{fake.guild_id}:{thread_id}")
    texts = [str(m.content) for m in values["messages"]]
    assert any("How do I deploy?" in t for t in texts) and any("roll it back" in t for t in texts)


async def test_two_quick_messages_in_a_thread_are_answered_in_order(fake, open_bot):
    bot = await open_bot(ScriptedChatModel(script={"generate": lambda msgs: f"Answer about: {msgs[-1].content}"}))
    alice = fake.add_user("alice")
    _, thread_id = await ask_in_channel(fake, bot, alice, "how do I deploy?")
    await fake.send_message(alice, "first: deploy on Monday?", channel_id=thread_id)
    await fake.send_message(alice, "second: deploy on Tuesday?", channel_id=thread_id)
    await fake.wait_until(lambda: len(answers(fake, thread_id)) == 3)
    await bot.idle()
    later = answers(fake, thread_id)[1:]
    assert "first" in later[0] and "second" in later[1]


async def test_mention_in_someone_elses_thread_answers_there_and_continues(fake, bot):
    alice = fake.add_user("alice")
    thread_id = await fake.user_thread(alice, "release planning")
    await fake.send_message(alice, "anyone knows the deploy steps?", channel_id=thread_id)  # not for us yet
    await bot.idle()
    assert fake.calls("POST", "/messages") == []
    await fake.send_message(alice, f"<@{fake.bot.id}> how do I deploy?", channel_id=thread_id)
    await fake.wait_until(lambda: answers(fake, thread_id))
    await fake.send_message(alice, "and to staging?", channel_id=thread_id)  # we take part now
    await fake.wait_until(lambda: len(answers(fake, thread_id)) == 2)
    await bot.idle()
    assert len(answers(fake, thread_id)) == 2
    assert list(fake.threads) == [thread_id]  # no thread inside the thread


async def test_follow_up_in_an_archived_thread_after_a_restart_continues_it(fake, bot):
    alice = fake.add_user("alice")
    _, thread_id = await ask_in_channel(fake, bot, alice, "how do I deploy?")
    fake.archive_thread(thread_id)  # not in GUILD_CREATE any more: discord.py does not know it
    await bot.restart()
    assert bot.bot.get_channel(int(thread_id)) is None
    await fake.send_message(alice, "and to staging?", channel_id=thread_id)
    await fake.wait_until(lambda: len(answers(fake, thread_id)) == 2)
    await bot.idle()
    assert len(answers(fake, thread_id)) == 2


async def test_channel_message_without_mention_is_ignored(fake, bot):
    alice = fake.add_user("alice")
    await fake.send_message(alice, "just chatting, not for the bot")
    await bot.idle()
    assert fake.calls("POST", "/messages") == [] and fake.calls("PUT", "/reactions/") == []
    assert bot.model.calls == []


async def test_dm_is_answered_without_mention(fake, bot):
    alice = fake.add_user("alice")
    msg = await fake.send_message(alice, "where is the on-call rota?", dm=True)
    dm_channel = fake.dm_channels[alice.id]
    await fake.wait_until(lambda: answers(fake, dm_channel))
    await bot.idle()

    assert len(answers(fake, dm_channel)) == 1
    assert fake.threads == {}
    assert present_reactions(fake, msg["id"]) == [CHECK]
    assert await bot.runtime.service.knows_thread(f"discord:dm:{dm_channel}")


async def test_nickname_form_mention_is_detected_and_stripped(fake, bot):
    alice = fake.add_user("alice")
    msg, thread_id = await ask_in_channel(fake, bot, alice, "where is the on-call rota?", form="<@!{}>")
    assert fake.threads[thread_id]["name"] == "where is the on-call rota?"
    assert len(answers(fake, thread_id)) == 1
    route_input = str([m for t, m in bot.model.calls if t == "route"][0][-1].content)
    assert "<@!" not in route_input


async def test_mention_of_the_bots_own_role_counts_as_a_mention(fake, bot):
    alice = fake.add_user("alice")
    msg, thread_id = await ask_in_channel(fake, bot, alice, "how do I deploy?", form=f"<@&{fake.bot_role_id}>")
    assert fake.threads[thread_id]["name"] == "how do I deploy?"
    assert len(answers(fake, thread_id)) == 1


async def test_bare_mention_gets_a_prompt_and_no_llm_call(fake, bot):
    alice = fake.add_user("alice")
    await fake.send_message(alice, f"<@{fake.bot.id}>")
    await fake.wait_until(lambda: answers(fake, fake.channel_id))
    await bot.idle()
    (reply,) = answers(fake, fake.channel_id)
    assert "question" in reply.lower()
    assert bot.model.calls == [] and fake.threads == {}


async def test_other_bots_own_messages_system_messages_and_edits_start_nothing(fake, bot):
    other_bot = fake.add_user("otherbot", bot=True)
    alice = fake.add_user("alice")
    await fake.send_message(other_bot, f"<@{fake.bot.id}> what is the deploy command?")
    await fake.send_message(fake.bot, f"<@{fake.bot.id}> talking to myself")
    await fake.send_message(alice, f"<@{fake.bot.id}> pinned a message", message_type=6)  # CHANNEL_PINNED_MESSAGE
    plain = await fake.send_message(alice, "hello everyone")
    await fake.edit_message(plain, f"<@{fake.bot.id}> hello, how do I deploy?")
    await bot.idle()
    assert fake.calls("POST", "/messages") == [] and fake.threads == {}
    assert fake.calls("PUT", "/reactions/") == []
    assert bot.model.calls == []


async def test_allow_listed_bot_mentioning_us_is_answered(fake, open_bot):
    helper_bot = fake.add_user("ci-bot", bot=True)
    bot = await open_bot(discord=f"allowed_bot_ids = [{helper_bot.id}]")
    await fake.send_message(helper_bot, "deploy finished, any notes?")  # no mention: ignored
    msg, thread_id = await ask_in_channel(fake, bot, helper_bot, "how do I deploy?")
    assert len(answers(fake, thread_id)) == 1
    assert len(fake.threads) == 1


async def test_duplicate_delivery_is_answered_once_even_after_a_restart(fake, bot):
    alice = fake.add_user("alice")
    msg = await fake.send_message(alice, "how do I deploy?", dm=True)
    dm_channel = fake.dm_channels[alice.id]
    await fake.wait_until(lambda: answers(fake, dm_channel))
    await bot.idle()
    await fake.send_message(alice, "how do I deploy?", dm=True, message_id=msg["id"])  # redelivered
    await bot.idle()
    await bot.restart()
    await fake.send_message(alice, "how do I deploy?", dm=True, message_id=msg["id"])  # after a restart
    await bot.idle()
    assert len(answers(fake, dm_channel)) == 1
    assert fake.added_reactions(msg["id"]).count(EYES) == 1


async def test_redelivered_channel_mention_reuses_its_thread_and_answers_once(fake, bot):
    alice = fake.add_user("alice")
    msg, thread_id = await ask_in_channel(fake, bot, alice, "how do I deploy?")
    await fake.send_message(alice, f"<@{fake.bot.id}> how do I deploy?", message_id=msg["id"])
    await bot.idle()
    assert list(fake.threads) == [thread_id]
    assert len(answers(fake, thread_id)) == 1
    assert answers(fake, fake.channel_id) == []


# ---------------------------------------------------------------------------- outbound
async def test_long_answer_with_code_is_split_in_order_under_2000_characters(fake, open_bot, monkeypatch):
    # a team that allows long answers: the shape check must let them through, and the split must hold
    monkeypatch.setenv("THREADWISE_GRAPH__ANSWER_CHARACTERS", "20000")
    code = "```bash\n" + "\n".join(f"tw deploy --step {i:03d} --env prod --wait" for i in range(80)) + "\n```"
    long_answer = (
        "\n\n".join(["Deploying takes three steps [1]. " + "Check the CI status first. " * 20] * 3)
        + "\n\n"
        + code
        + "\n\nDone."
    )
    assert len(long_answer) >= 4500
    bot = await open_bot(ScriptedChatModel(script={"generate": long_answer}))
    alice = fake.add_user("alice")
    _, thread_id = await ask_in_channel(fake, bot, alice, "how do I deploy step by step?")

    parts = answers(fake, thread_id)
    assert len(parts) == 3
    assert all(len(p) <= 2000 for p in parts)
    for part in parts:  # every message has balanced fences
        assert sum(1 for line in part.split("\n") if line.startswith("```")) % 2 == 0
    joined = "\n".join(parts)
    steps = [int(n) for n in re.findall(r"--step (\d+)", joined)]
    assert steps == list(range(80))  # in order, nothing lost, nothing repeated
    assert "Done." in parts[-1] and "**Sources**" in parts[-1]
    assert all(r.status < 400 for r in fake.calls("POST", f"/channels/{thread_id}/messages"))


async def test_bursts_are_paced_by_discord_rate_limits_without_429(tmp_path, monkeypatch):
    monkeypatch.setenv("THREADWISE_GRAPH__ANSWER_CHARACTERS", "20000")  # six long paragraphs pass the shape check
    fake = await FakeDiscord(message_rate=(2, 0.6)).start()  # 2 messages per 0.6 s per channel
    try:
        long_answer = "\n\n".join(f"Paragraph {i}: " + "word " * 300 for i in range(6))
        bot = await DiscordHarness(tmp_path, fake, ScriptedChatModel(script={"generate": long_answer})).open()
        try:
            alice = fake.add_user("alice")
            _, thread_id = await ask_in_channel(fake, bot, alice, "how do I deploy, in detail?")
        finally:
            await bot.close()
        posts = fake.calls("POST", f"/channels/{thread_id}/messages")
        assert len(answers(fake, thread_id)) == 6
        assert [r.status for r in posts] == [200] * 6  # discord.py waited; Discord never said 429
        assert posts[-1].at - posts[0].at >= 0.9  # three windows of two messages
        firsts = [int(re.match(r"Paragraph (\d+)", a).group(1)) for a in answers(fake, thread_id)]
        assert firsts == list(range(6))
    finally:
        await fake.close()


async def test_reaction_403_does_not_stop_the_answer(fake, bot):
    fake.reaction_failures[("*", "*")] = (403, 50013)
    alice = fake.add_user("alice")
    msg, thread_id = await ask_in_channel(fake, bot, alice, "how do I deploy?")
    assert len(answers(fake, thread_id)) == 1
    # one failed attempt, then no hammering of a forbidden endpoint
    assert fake.reactions_on(msg["id"]) == [("PUT", EYES, 403)]


async def test_reactions_in_an_archived_thread_fail_quietly(fake, bot):
    alice = fake.add_user("alice")
    _, thread_id = await ask_in_channel(fake, bot, alice, "how do I deploy?")
    fake.archive_thread(thread_id)
    follow = await fake.send_message(alice, "and rollback?", channel_id=thread_id)
    await fake.wait_until(lambda: len(answers(fake, thread_id)) == 2)
    await bot.idle()
    assert fake.reactions_on(follow["id"]) == [("PUT", EYES, 400)]
    assert len(answers(fake, thread_id)) == 2


# ---------------------------------------------------------------------------- human in the loop
async def test_help_request_answered_by_an_expert_through_the_button_and_modal(fake, open_bot):
    bot = await open_bot(never_grounded())
    alice = fake.add_user("alice")
    erin = fake.add_user("erin", roles=[fake.expert_role_id])
    msg, thread_id = await ask_in_channel(fake, bot, alice, "what is the VPN password policy?")

    help_msg = copy.deepcopy(await wait_help_request(fake, bot, thread_id))  # as the expert's client shows it
    assert f"<@&{fake.expert_role_id}>" in help_msg["content"]  # the expert role is pinged
    assert [str(r) for r in help_msg["allowed_mentions"]["roles"]] == [fake.expert_role_id]
    assert answers(fake, thread_id) == []
    assert present_reactions(fake, msg["id"]) == [RAISED]
    ids = button_ids(help_msg)
    assert set(ids) == {"Answer", "Retry with hint", "Dismiss"}
    assert all(len(i) <= 100 and f"discord:{fake.guild_id}:{thread_id}" in i for i in ids.values())

    click = await fake.click(erin, help_msg, ids["Answer"])
    await fake.wait_until(lambda: callbacks_for(fake, click))
    (modal,) = callbacks_for(fake, click)
    assert modal["type"] == 9  # MODAL
    submit = await fake.submit_modal(erin, help_msg, modal["data"]["custom_id"], {"text": "Rotate it every 90 days."})
    await fake.wait_until(lambda: answers(fake, thread_id))
    await bot.idle()

    (answer,) = answers(fake, thread_id)
    assert "Rotate it every 90 days." in answer and "answered by erin" in answer
    assert present_reactions(fake, msg["id"]) == [CHECK]
    assert any("answered" in t for t in ephemeral_texts(fake, submit))
    assert fake.all_messages[help_msg["id"]]["components"] == []  # spent buttons removed

    # exactly once: a click from a client that still shows the old buttons resumes nothing
    again = await fake.click(erin, help_msg, ids["Dismiss"])
    await fake.wait_until(lambda: ephemeral_texts(fake, again))
    await bot.idle()
    assert "already been handled" in ephemeral_texts(fake, again)[0]
    assert len(answers(fake, thread_id)) == 1


async def test_help_request_button_refused_for_a_non_expert(fake, open_bot):
    bot = await open_bot(never_grounded())
    alice = fake.add_user("alice")
    bob = fake.add_user("bob")
    msg, thread_id = await ask_in_channel(fake, bot, alice, "what is the VPN password policy?")
    help_msg = await wait_help_request(fake, bot, thread_id)

    for label in ("Answer", "Dismiss"):
        click = await fake.click(bob, help_msg, button_ids(help_msg)[label])
        await fake.wait_until(lambda click=click: ephemeral_texts(fake, click))
        assert "Only the experts" in ephemeral_texts(fake, click)[0]
        assert all(c["type"] != 9 for c in callbacks_for(fake, click))  # no modal for non-experts
    await bot.idle()
    assert answers(fake, thread_id) == []
    assert present_reactions(fake, msg["id"]) == [RAISED]  # still waiting for an expert


async def test_help_request_resumed_by_text_reply_from_an_expert_not_from_others(fake, open_bot):
    bot = await open_bot(never_grounded())
    alice = fake.add_user("alice")
    erin = fake.add_user("erin", roles=[fake.expert_role_id])
    msg, thread_id = await ask_in_channel(fake, bot, alice, "what is the VPN password policy?")
    await wait_help_request(fake, bot, thread_id)

    await fake.send_message(alice, "answer: I think it is 30 days", channel_id=thread_id)
    await fake.wait_until(lambda: fake.bot_messages(fake.dm_channels.get(alice.id, "-")))
    await bot.idle()
    assert answers(fake, thread_id) == []  # the non-expert did not resume it
    (private,) = answers(fake, fake.dm_channels[alice.id])
    assert "expert" in private

    await fake.send_message(erin, "answer: Every 90 days, enforced by IT.", channel_id=thread_id)
    await fake.wait_until(lambda: answers(fake, thread_id))
    await bot.idle()
    (answer,) = answers(fake, thread_id)
    assert "Every 90 days, enforced by IT." in answer
    assert present_reactions(fake, msg["id"]) == [CHECK]


async def test_private_refusal_falls_back_to_a_mention_when_dms_are_closed(fake, open_bot):
    bot = await open_bot(never_grounded())
    alice = fake.add_user("alice")
    fake.dms_closed.add(alice.id)
    msg, thread_id = await ask_in_channel(fake, bot, alice, "what is the VPN password policy?")
    await wait_help_request(fake, bot, thread_id)
    await fake.send_message(alice, "dismiss", channel_id=thread_id)
    await fake.wait_until(lambda: answers(fake, thread_id))
    await bot.idle()
    (note,) = answers(fake, thread_id)
    assert note.startswith(f"<@{alice.id}>") and "expert" in note
    assert present_reactions(fake, msg["id"]) == [RAISED]  # still waiting


async def test_dismiss_by_button_ends_in_the_apology(fake, open_bot):
    bot = await open_bot(never_grounded())
    alice = fake.add_user("alice")
    adam = fake.add_user("adam", roles=[fake.admin_role_id])  # admins may answer too
    msg, thread_id = await ask_in_channel(fake, bot, alice, "what is the VPN password policy?")
    help_msg = await wait_help_request(fake, bot, thread_id)

    await fake.click(adam, help_msg, button_ids(help_msg)["Dismiss"])
    await fake.wait_until(lambda: answers(fake, thread_id))
    await bot.idle()
    (apology,) = answers(fake, thread_id)
    assert apology.startswith("Sorry")
    assert present_reactions(fake, msg["id"]) == [SAD]


async def test_retry_with_hint_by_modal_runs_again_and_answers(fake, open_bot):
    grounded = {"now": False}

    def grade(_messages):
        ok = grounded["now"]
        return json.dumps({"grounded": ok, "useful": ok, "feedback": "" if ok else "not supported"})

    bot = await open_bot(ScriptedChatModel(script={"grade_answer": grade}))
    alice = fake.add_user("alice")
    erin = fake.add_user("erin", roles=[fake.expert_role_id])
    msg, thread_id = await ask_in_channel(fake, bot, alice, "how do I deploy on a Friday?")
    help_msg = await wait_help_request(fake, bot, thread_id)
    calls_before = len(bot.model.calls)

    grounded["now"] = True
    click = await fake.click(erin, help_msg, button_ids(help_msg)["Retry with hint"])
    await fake.wait_until(lambda: callbacks_for(fake, click))
    modal_id = callbacks_for(fake, click)[0]["data"]["custom_id"]
    await fake.submit_modal(erin, help_msg, modal_id, {"text": "look in the security handbook"})
    await fake.wait_until(lambda: answers(fake, thread_id))
    await bot.idle()

    (answer,) = answers(fake, thread_id)
    assert "Here is the answer from the knowledge base" in answer
    assert len(bot.model.calls) > calls_before  # a fresh run
    assert any("security handbook" in str(m.content) for _, ms in bot.model.calls[calls_before:] for m in ms)
    assert present_reactions(fake, msg["id"]) == [CHECK]


async def test_help_buttons_keep_working_after_a_restart(fake, open_bot):
    bot = await open_bot(never_grounded())
    alice = fake.add_user("alice")
    erin = fake.add_user("erin", roles=[fake.expert_role_id])
    msg, thread_id = await ask_in_channel(fake, bot, alice, "what is the VPN password policy?")
    help_msg = await wait_help_request(fake, bot, thread_id)

    await bot.restart()
    await fake.click(erin, help_msg, button_ids(help_msg)["Dismiss"])
    await fake.wait_until(lambda: answers(fake, thread_id))
    await bot.idle()
    assert len(answers(fake, thread_id)) == 1
    assert present_reactions(fake, msg["id"]) == [SAD]  # the old responder's reaction was replaced


async def test_help_request_in_a_dm_resumed_by_an_expert_user_id(fake, open_bot):
    erin = fake.add_user("erin")  # an expert by user id (no roles in DMs)
    bob = fake.add_user("bob")
    bot = await open_bot(never_grounded(), discord=f"expert_user_ids = [{erin.id}]")
    alice = fake.add_user("alice")
    msg = await fake.send_message(alice, "what is the VPN password policy?", dm=True)
    dm_channel = fake.dm_channels[alice.id]
    help_msg = copy.deepcopy(await wait_help_request(fake, bot, dm_channel))
    assert f"<@{erin.id}>" in help_msg["content"]
    assert all(f"discord:dm:{dm_channel}" in i for i in button_ids(help_msg).values())

    refused = await fake.click(bob, help_msg, button_ids(help_msg)["Dismiss"])
    await fake.wait_until(lambda: ephemeral_texts(fake, refused))
    await fake.click(erin, help_msg, button_ids(help_msg)["Dismiss"])
    await fake.wait_until(lambda: answers(fake, dm_channel))
    await bot.idle()
    (apology,) = answers(fake, dm_channel)
    assert apology.startswith("Sorry")
    assert present_reactions(fake, msg["id"]) == [SAD]


# ---------------------------------------------------------------------------- admin
async def test_slash_reindex_by_an_admin_edits_one_progress_message(fake, bot):
    adam = fake.add_user("adam", roles=[fake.admin_role_id])
    assert any(r.path.endswith("/commands") and r.body[0]["name"] == "threadwise" for r in fake.calls("PUT"))
    inter = await fake.slash(adam, "threadwise", "reindex")
    await fake.wait_until(lambda: "Reindex done" in (fake._original.get(inter["token"]) or {}).get("content", ""))
    await bot.idle()
    (first,) = callbacks_for(fake, inter)
    assert first["type"] == 4 and not first["data"].get("flags", 0) & 64  # visible to the channel
    assert "Reindexing" in first["data"]["content"]
    edits = fake.calls("PATCH", f"/webhooks/{fake.application_id}/{inter['token']}/messages/@original")
    assert edits and "2 documents" in fake._original[inter["token"]]["content"]
    assert [m for m in fake.followups if m["interaction_token"] == inter["token"]] == []  # one message, edited


async def test_slash_reindex_of_one_source_takes_its_name_in_any_case(fake, bot):
    adam = fake.add_user("adam", roles=[fake.admin_role_id])
    inter = await fake.slash(adam, "threadwise", "reindex", options={"source": "KB"})  # the folder kb
    await fake.wait_until(lambda: "Reindex done" in (fake._original.get(inter["token"]) or {}).get("content", ""))
    await bot.idle()
    (first,) = callbacks_for(fake, inter)
    assert first["data"]["content"].startswith("Reindexing ") and first["data"]["content"].endswith("kb…")
    wrong = await fake.slash(adam, "threadwise", "reindex", options={"source": "handbook"})
    await fake.wait_until(lambda: bool(ephemeral_texts(fake, wrong)))
    await bot.idle()
    texts = ephemeral_texts(fake, wrong)  # privately, naming the sources there are
    assert any(t.startswith("There is no source `handbook`. Sources: `") and t.endswith("kb`") for t in texts), texts


async def test_slash_reindex_refused_ephemerally_for_a_non_admin(fake, bot):
    bob = fake.add_user("bob")
    inter = await fake.slash(bob, "threadwise", "reindex")
    await fake.wait_until(lambda: callbacks_for(fake, inter))
    await bot.idle()
    (reply,) = callbacks_for(fake, inter)
    assert reply["type"] == 4 and reply["data"]["flags"] & 64  # ephemeral
    assert "only admins" in reply["data"]["content"].lower()
    assert not fake.calls("PATCH", "/webhooks/")


async def test_slow_commands_are_deferred_then_the_placeholder_is_replaced(fake, bot):
    bot.bot.defer_after_seconds = 0.0  # as if the service took longer than Discord's 3 s
    adam = fake.add_user("adam", roles=[fake.admin_role_id])
    bob = fake.add_user("bob")
    done = await fake.slash(adam, "threadwise", "reindex")
    refused = await fake.slash(bob, "threadwise", "reindex")
    await fake.wait_until(lambda: "Reindex done" in (fake._original.get(done["token"]) or {}).get("content", ""))
    await fake.wait_until(lambda: (fake._original.get(refused["token"]) or {}).get("content"))
    await bot.idle()
    (deferred,) = callbacks_for(fake, done)
    assert deferred["type"] == 5 and not deferred["data"].get("flags", 0) & 64  # "thinking", public
    (private,) = callbacks_for(fake, refused)
    assert private["type"] == 5 and private["data"]["flags"] & 64  # "thinking", only bob sees it
    assert "only admins" in ephemeral_texts(fake, refused)[0].lower()


async def test_manage_server_permission_counts_as_admin_unless_disabled(fake, open_bot):
    manager = fake.add_user("mia", roles=[fake.manager_role_id])
    bot = await open_bot()
    inter = await fake.slash(manager, "threadwise", "reindex")
    await fake.wait_until(lambda: "Reindex done" in (fake._original.get(inter["token"]) or {}).get("content", ""))
    await bot.close()
    bot = await open_bot(discord="admins_with_manage_guild = false")
    inter = await fake.slash(manager, "threadwise", "reindex")
    await fake.wait_until(lambda: callbacks_for(fake, inter))
    await bot.idle()
    assert callbacks_for(fake, inter)[0]["data"]["flags"] & 64


async def test_slash_status_and_help_answer_anyone(fake, bot):
    bob = fake.add_user("bob")
    status = await fake.slash(bob, "threadwise", "status")
    helped = await fake.slash(bob, "threadwise", "help")
    await fake.wait_until(lambda: callbacks_for(fake, status) and callbacks_for(fake, helped))
    await bot.idle()
    assert "Knowledge base: 2 files" in callbacks_for(fake, status)[0]["data"]["content"]
    assert "mention me" in callbacks_for(fake, helped)[0]["data"]["content"]


async def test_admin_words_after_a_mention(fake, bot):
    adam = fake.add_user("adam", roles=[fake.admin_role_id])
    bob = fake.add_user("bob")
    await fake.send_message(bob, f"<@{fake.bot.id}> reindex")
    await fake.wait_until(lambda: fake.bot_messages(fake.dm_channels.get(bob.id, "-")))
    await bot.idle()
    assert "only admins" in answers(fake, fake.dm_channels[bob.id])[0].lower()  # refused privately
    assert answers(fake, fake.channel_id) == []

    await fake.send_message(adam, f"<@{fake.bot.id}> reindex")
    await fake.wait_until(lambda: any("Reindex done" in m["content"] for m in fake.bot_messages(fake.channel_id)))
    await bot.idle()
    (progress,) = fake.bot_messages(fake.channel_id)  # one message, edited in place
    assert fake.calls("PATCH", f"/channels/{fake.channel_id}/messages/{progress['id']}")
    assert fake.threads == {} and bot.model.calls == []


async def test_token_never_reaches_the_logs(fake, open_bot, caplog):
    caplog.set_level(logging.DEBUG)
    bot = await open_bot()
    alice = fake.add_user("alice")
    await ask_in_channel(fake, bot, alice, "how do I deploy?")
    assert fake.TOKEN not in caplog.text


async def test_a_follow_up_sent_as_the_thread_opens_waits_for_the_question_that_opened_it(fake, open_bot):
    """The thread appears (REST create_thread) before the bot has handed the question on; a
    follow-up posted in it at once must not overtake the question: both are answered, the
    question first, and neither is left showing 👀."""
    bot = await open_bot(ScriptedChatModel(script={"generate": lambda msgs: f"Answer about: {msgs[-1].content}"}))
    alice = fake.add_user("alice")
    fake.create_thread_delay = 0.5  # Discord sends THREAD_CREATE before the REST reply reaches the bot
    for i in range(3):
        q1 = await fake.send_message(alice, f"<@{fake.bot.id}> how do I deploy, take {i}?")
        await fake.wait_until(lambda q1=q1: q1["id"] in fake.threads)
        q2 = await fake.send_message(alice, f"and to staging, take {i}?", channel_id=q1["id"])
        await fake.wait_until(lambda q1=q1: len(answers(fake, q1["id"])) == 2, timeout=30)
        await bot.idle()
        first, second = answers(fake, q1["id"])
        assert f"how do I deploy, take {i}?" in first and f"and to staging, take {i}?" in second, (first, second)
        assert present_reactions(fake, q1["id"]) == [CHECK] and present_reactions(fake, q2["id"]) == [CHECK]
