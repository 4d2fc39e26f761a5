"""Answer feedback on Discord: persistent 👍/👎 buttons under every answer, one vote per user
per answer (the latest counts), a 👎 opens an optional-reason modal."""

from __future__ import annotations

from tests.fakes.discord_gateway import vote_ids
from tests.test_discord_bot import answers, ask_in_channel, bot, callbacks_for, ephemeral_texts, fake, open_bot  # noqa: F401 - fixtures


def last_answer(fake, thread_id: str) -> dict:
    return [fake.all_messages[m["id"]] for m in fake.bot_messages(thread_id) if vote_ids(fake.all_messages[m["id"]])][
        -1
    ]


async def test_discord_votes_once_per_user_latest_counts_with_a_private_reason(fake, bot):
    alice, bob = fake.add_user("alice"), fake.add_user("bob")
    _, thread_id = await ask_in_channel(fake, bot, alice, "how do I deploy?")
    answer = last_answer(fake, thread_id)
    ids = vote_ids(answer)
    assert set(ids) == {"up", "down"} and all(len(i) <= 100 for i in ids.values())

    first = await fake.click(alice, answer, ids["up"])
    await fake.wait_until(lambda: ephemeral_texts(fake, first))
    await fake.click(alice, answer, ids["up"])  # a double click: one vote
    await fake.click(bob, answer, ids["up"])
    await bot.idle()
    store = bot.runtime.bookkeeping
    rows = await store.feedback_rows()
    assert sorted((r["user_id"], r["vote"]) for r in rows) == sorted([(str(alice.id), 1), (str(bob.id), 1)])
    assert "👍" in ephemeral_texts(fake, first)[0]
    assert rows[0]["question"] == "how do I deploy?" and rows[0]["channel"] == fake.channel_id

    down = await fake.click(alice, answer, ids["down"])
    await fake.wait_until(lambda: callbacks_for(fake, down))
    (modal,) = callbacks_for(fake, down)
    assert modal["type"] == 9  # a modal, only for alice
    submit = await fake.submit_modal(alice, answer, modal["data"]["custom_id"], {"text": "Outdated: use deploy-prod"})
    await fake.wait_until(lambda: ephemeral_texts(fake, submit))
    await bot.idle()
    got = {r["user_id"]: r for r in await store.feedback_rows()}
    assert got[str(alice.id)]["vote"] == -1 and got[str(alice.id)]["reason"] == "Outdated: use deploy-prod"
    assert got[str(bob.id)]["vote"] == 1 and len(got) == 2
    assert len(answers(fake, thread_id)) == 1  # nothing new in the thread


async def test_discord_vote_buttons_work_after_a_restart(fake, bot):
    alice = fake.add_user("alice")
    _, thread_id = await ask_in_channel(fake, bot, alice, "how do I deploy?")
    answer = last_answer(fake, thread_id)
    await bot.restart()
    click = await fake.click(alice, answer, vote_ids(answer)["up"])
    await fake.wait_until(lambda: ephemeral_texts(fake, click))
    await bot.idle()
    assert [(r["user_id"], r["vote"]) for r in await bot.runtime.bookkeeping.feedback_rows()] == [(str(alice.id), 1)]


async def test_discord_thumbs_down_with_a_reason_can_ask_the_experts(fake, bot):
    from tests.test_discord_bot import help_requests

    alice = fake.add_user("alice")
    erin = fake.add_user("erin", roles=[fake.expert_role_id])
    _, thread_id = await ask_in_channel(fake, bot, alice, "how do I deploy?")
    answer = last_answer(fake, thread_id)
    down = await fake.click(alice, answer, vote_ids(answer)["down"])
    await fake.wait_until(lambda: callbacks_for(fake, down))
    submit = await fake.submit_modal(
        alice, answer, callbacks_for(fake, down)[0]["data"]["custom_id"], {"text": "it is make ship now"}
    )
    await fake.wait_until(lambda: [m for m in fake.followups if m["interaction_token"] == submit["token"]])
    await bot.idle()
    offer = [m for m in fake.followups if m["interaction_token"] == submit["token"]][-1]
    assert offer["flags"] & 64 and "expert" in offer["content"]
    button = offer["components"][0]["components"][0]
    offered = {**answer, "id": offer.get("id", answer["id"]), "components": offer["components"]}
    await fake.click(alice, offered, button["custom_id"])
    await fake.wait_until(lambda: help_requests(fake, thread_id))
    await bot.idle()
    (help_msg,) = help_requests(fake, thread_id)
    assert "how do I deploy?" in help_msg["content"] and "it is make ship now" in help_msg["content"]
    await fake.send_message(erin, "answer: Run make ship from main.", channel_id=thread_id)
    await fake.wait_until(lambda: "make ship" in answers(fake, thread_id)[-1])
    await bot.idle()
    assert [e.answer for e in bot.runtime.learned.entries()] == ["Run make ship from main."]
