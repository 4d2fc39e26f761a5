"""A crash loses nothing and doubles nothing: ``threadwise run`` (Slack HTTP mode, a real
subprocess) is killed with SIGKILL while a question is in the graph; after a restart on the
same data folder the question gets exactly one answer (or, when too old, the apology) in
its thread, the "working" reactions are cleared, and a redelivery of the message by Slack
does not start a second answer."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import aiohttp
import pytest

from tests.fakes.bot_process import BotProcess as SlackRunProcess
from tests.fakes.mistral_stall import StallingMistral, mistral_server, models_section
from tests.fakes.slack_api import BOT_USER_ID, FakeSlackAPI, SlackEvents, all_text, is_help_request, write_config
from tests.test_slack_run import free_port, post, thread_posts

ROOT = Path(__file__).resolve().parent.parent
CHANNEL = "C0GENERAL"


class BotProcess(SlackRunProcess):
    """``python -m bot run`` in Slack HTTP mode against the fakes (Slack + Mistral)."""

    def __init__(self, tmp_path: Path, fake: FakeSlackAPI, model: StallingMistral, *, service: str = "") -> None:
        port = free_port()
        config = write_config(
            tmp_path, fake, slack=f'http_port = {port}\nhttp_host = "127.0.0.1"', extra=models_section(model)
        )
        if service:
            config.write_text(config.read_text().replace("[service]\n", f"[service]\n{service}\n", 1))
        super().__init__(config, port, tmp_path / f"threadwise-{port}.log", {"MISTRAL_API_KEY": "test-key"})


def mention(ts: str, text: str, thread_ts: str | None = None) -> dict:
    """An app_mention of the bot by UASKER in CHANNEL (in thread ``thread_ts`` if given)."""
    return SlackEvents.message(
        user="UASKER", channel=CHANNEL, ts=ts, thread_ts=thread_ts, kind="app_mention", text=f"<@{BOT_USER_ID}> {text}"
    )


async def deliver(
    session: aiohttp.ClientSession, bot: BotProcess, events: SlackEvents, event: dict, event_id: str
) -> None:
    """Post ``event`` signed to ``bot``'s events endpoint; Slack must get its 200."""
    status, _ = await post(session, bot.url + "/slack/events", events.event(event, event_id=event_id))
    assert status == 200


def all_done(fake: FakeSlackAPI, *timestamps: str) -> bool:
    """Every message of ``timestamps`` shows exactly the done reaction."""
    return all(fake.reactions.get((CHANNEL, ts)) == ["white_check_mark"] for ts in timestamps)


def answers_in(fake: FakeSlackAPI, ts: str) -> list[dict]:
    return [p for p in thread_posts(fake, ts) if not is_help_request(p)]


@pytest.mark.parametrize(
    "stall_on, service, expected, reaction",
    [
        ("generate", "", "make rollback", "white_check_mark"),  # mid-run: continues from a checkpoint
        ("route", "", "make rollback", "white_check_mark"),  # the first model call
        ("grade_answer", "resume_window_seconds = 0", "Sorry", "disappointed"),  # too old to continue: the apology
    ],
)
async def test_killed_mid_run_the_question_is_answered_once_after_a_restart(
    tmp_path, fake, stall_on, service, expected, reaction
):
    events = SlackEvents()
    async with mistral_server(stall_on={stall_on}) as model:
        first = BotProcess(tmp_path, fake, model, service=service)
        try:
            async with aiohttp.ClientSession() as session:
                await first.wait_ready(session)
                ts = fake.next_ts()
                event = SlackEvents.message(
                    user="UASKER",
                    channel=CHANNEL,
                    ts=ts,
                    kind="app_mention",
                    text=f"<@{BOT_USER_ID}> how do I roll back a deploy?",
                )
                status, _ = await post(session, first.url + "/slack/events", events.event(event, event_id="Ev1"))
                assert status == 200
                try:
                    await asyncio.wait_for(model.stalled.wait(), 60)
                except TimeoutError:
                    raise AssertionError(first.log.read_text()[-3000:]) from None
                await asyncio.sleep(0.5)  # let the step before the stalled call be checkpointed
                working = list(fake.reactions.get((CHANNEL, ts), []))
                await first.kill()
                assert answers_in(fake, ts) == []
                assert working and "white_check_mark" not in working  # e.g. eyes / mag / pencil2
                model.release()

                second = BotProcess(tmp_path, fake, model, service=service)
                try:
                    await second.wait_ready(session)
                    # Slack redelivers the event (no ack came from the dead process)
                    status, _ = await post(
                        session, second.url + "/slack/events", events.event(event, event_id="Ev1", retry_num=1)
                    )
                    assert status == 200
                    # ... and the same message again by another subscription (a new event id)
                    again = dict(event, type="message", channel_type="channel")
                    status, _ = await post(session, second.url + "/slack/events", events.event(again, event_id="Ev2"))
                    assert status == 200
                    await fake.wait_for(
                        lambda: answers_in(fake, ts) and fake.reactions.get((CHANNEL, ts)) == [reaction], timeout=60
                    )
                    await asyncio.sleep(1.5)  # nothing more may come
                finally:
                    log2 = await second.stop()
        finally:
            await first.stop()
    posts = answers_in(fake, ts)
    assert len(posts) == 1, log2[-3000:]
    assert posts[0]["thread_ts"] == ts
    assert expected in all_text(posts[0])
    assert fake.reactions[(CHANNEL, ts)] == [reaction]
    assert "recovery" in log2


async def test_a_follow_up_killed_mid_run_is_answered_once_with_the_thread_history(tmp_path, fake):
    """A follow-up in a thread the bot already answered, killed while its answer is written:
    after the restart it is asked again from the thread's previous turn (its history is
    there, the cut-off run left nothing behind), and answered once."""
    events = SlackEvents()
    async with mistral_server() as model:
        first = BotProcess(tmp_path, fake, model)
        try:
            async with aiohttp.ClientSession() as session:
                await first.wait_ready(session)
                ts = fake.next_ts()
                question = SlackEvents.message(
                    user="UASKER",
                    channel=CHANNEL,
                    ts=ts,
                    kind="app_mention",
                    text=f"<@{BOT_USER_ID}> how do I roll back a deploy?",
                )
                assert (await post(session, first.url + "/slack/events", events.event(question)))[0] == 200
                await fake.wait_for(lambda: fake.reactions.get((CHANNEL, ts)) == ["white_check_mark"], timeout=60)
                model.stall_on, model._release = {"generate"}, asyncio.Event()
                model.stalled.clear()
                reply_ts = fake.next_ts()
                follow_up = SlackEvents.message(
                    user="UASKER",
                    channel=CHANNEL,
                    ts=reply_ts,
                    thread_ts=ts,
                    kind="app_mention",
                    text=f"<@{BOT_USER_ID}> and which version does it go back to?",
                )
                assert (await post(session, first.url + "/slack/events", events.event(follow_up)))[0] == 200
                await asyncio.wait_for(model.stalled.wait(), 60)
                await first.kill()
                assert len(answers_in(fake, ts)) == 1
                model.release()
                routes_before = len(model.bodies("route"))

                second = BotProcess(tmp_path, fake, model)
                try:
                    await second.wait_ready(session)
                    await fake.wait_for(
                        lambda: (
                            len(answers_in(fake, ts)) == 2
                            and fake.reactions.get((CHANNEL, reply_ts)) == ["white_check_mark"]
                        ),
                        timeout=60,
                    )
                    await asyncio.sleep(1.0)  # nothing more may come
                finally:
                    log2 = await second.stop()
        finally:
            await first.stop()
    assert len(answers_in(fake, ts)) == 2, log2[-3000:]
    assert "recovery" in log2
    history = json.dumps(model.bodies("route")[routes_before:][-1]["messages"])
    assert "roll back a deploy" in history and "which version" in history, history


@pytest.mark.parametrize("how", ["kill -9", "SIGTERM"])
async def test_a_thread_queue_cut_off_by_a_restart_is_answered_in_order_once_each(tmp_path, fake, how):
    """Two messages of one thread (the first one's first reaction slow, so the second is
    recorded first), the first stalled in the graph, the second waiting for its turn; the
    process is killed (or stopped: SIGTERM gives up on the stalled run after its drain), then
    started again, and a third message arrives at once: each is answered once, in the
    order sent, and the thread's history holds them in that order. (Seen: the second was
    recovered first and the first got its answer too, never its own; a stop deleted the
    waiting message's record, so it was never answered; the new message overtook them.)"""
    events = SlackEvents()
    async with mistral_server(stall_on={"generate"}) as model:
        first = BotProcess(tmp_path, fake, model)
        try:
            async with aiohttp.ClientSession() as session:
                await first.wait_ready(session)
                root, second_ts = fake.next_ts(), fake.next_ts()
                fake.arg_delays[("reactions.add", root)] = 0.4
                await deliver(session, first, events, mention(root, "how do I roll back a deploy?"), "Ev0")
                await deliver(
                    session, first, events, mention(second_ts, "and which version does it go back to?", root), "Ev1"
                )
                await asyncio.wait_for(model.stalled.wait(), 60)
                await fake.wait_for(lambda: fake.reactions.get((CHANNEL, second_ts)), timeout=10)
                await asyncio.sleep(0.3)
                if how == "kill -9":
                    await first.kill()
                else:
                    await first.stop()  # drains for ~10 s (the stalled call does not end), then exits
                assert answers_in(fake, root) == []
                model.release()

                second = BotProcess(tmp_path, fake, model)
                try:
                    await second.wait_ready(session)
                    third_ts = fake.next_ts()
                    await deliver(session, second, events, mention(third_ts, "and how long does it take?", root), "Ev3")
                    await fake.wait_for(lambda: all_done(fake, root, second_ts, third_ts), timeout=90)
                    await asyncio.sleep(1.0)  # nothing more may come
                finally:
                    log2 = await second.stop()
        finally:
            await first.stop()
    assert len(answers_in(fake, root)) == 3, log2[-3000:]
    done_at = fake.added_at()
    assert done_at[root] < done_at[second_ts] < done_at[third_ts], log2[-3000:]
    # the conversation as the model got it (the system prompt's own examples may hold the same words)
    history = json.dumps([m for m in model.bodies("route")[-1]["messages"] if m.get("role") != "system"])
    spots = [history.find(t) for t in ("roll back a deploy", "which version", "how long does it take")]
    assert -1 not in spots and spots == sorted(spots), history


async def test_a_crash_while_one_message_waits_for_slack_loses_no_message_behind_it(tmp_path, fake):
    """The first message's first reaction takes seconds (Slack is slow); two follow-ups of
    its thread arrive meanwhile and the process is killed: the follow-ups were recorded at
    once (not after the slow one), so after the restart both are answered, once each, in the
    order sent. (Seen: every message behind the slow one waited to be recorded, and the kill
    lost them all, each left showing 👀.)"""
    events = SlackEvents()
    async with mistral_server() as model:
        first = BotProcess(tmp_path, fake, model)
        try:
            async with aiohttp.ClientSession() as session:
                await first.wait_ready(session)
                root = fake.next_ts()
                fake.arg_delays[("reactions.add", root)] = 6.0
                follow_ups = [fake.next_ts(), fake.next_ts()]
                texts = [
                    "how do I roll back a deploy?",
                    "and which version does it go back to?",
                    "and how long does it take?",
                ]
                for i, (ts, text) in enumerate(zip([root, *follow_ups], texts, strict=True)):
                    await deliver(session, first, events, mention(ts, text, None if i == 0 else root), f"Ev{i}")
                await fake.wait_for(lambda: all(fake.reactions.get((CHANNEL, ts)) for ts in follow_ups), timeout=10)
                await asyncio.sleep(1.0)
                await first.kill()
                del fake.arg_delays[("reactions.add", root)]
                second = BotProcess(tmp_path, fake, model)
                try:
                    await second.wait_ready(session)
                    await fake.wait_for(lambda: all_done(fake, *follow_ups), timeout=90)
                    await asyncio.sleep(1.0)  # nothing more may come
                finally:
                    log2 = await second.stop()
        finally:
            await first.stop()
    assert len(answers_in(fake, root)) == 2, log2[-3000:]
    done_at = fake.added_at()
    assert done_at[follow_ups[0]] < done_at[follow_ups[1]]
