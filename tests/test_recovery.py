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
        config = write_config(tmp_path, fake, slack=f'http_port = {port}\nhttp_host = "127.0.0.1"',
                              extra=models_section(model))
        if service:
            config.write_text(config.read_text().replace("[service]\n", f"[service]\n{service}\n", 1))
        super().__init__(config, port, tmp_path / f"threadwise-{port}.log", {"MISTRAL_API_KEY": "test-key"})


def answers_in(fake: FakeSlackAPI, ts: str) -> list[dict]:
    return [p for p in thread_posts(fake, ts) if not is_help_request(p)]


@pytest.mark.parametrize("stall_on, service, expected, reaction", [
    ("generate", "", "make rollback", "white_check_mark"),      # mid-run: continues from a checkpoint
    ("route", "", "make rollback", "white_check_mark"),         # the first model call
    ("grade_answer", "resume_window_seconds = 0", "Sorry", "disappointed"),  # too old to continue: the apology
])
async def test_killed_mid_run_the_question_is_answered_once_after_a_restart(tmp_path, fake, stall_on, service,
                                                                            expected, reaction):
    events = SlackEvents()
    async with mistral_server(stall_on={stall_on}) as model:
        first = BotProcess(tmp_path, fake, model, service=service)
        try:
            async with aiohttp.ClientSession() as session:
                await first.wait_ready(session)
                ts = fake.next_ts()
                event = SlackEvents.message(user="UASKER", channel=CHANNEL, ts=ts, kind="app_mention",
                                            text=f"<@{BOT_USER_ID}> how do I roll back a deploy?")
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
                    status, _ = await post(session, second.url + "/slack/events",
                                           events.event(event, event_id="Ev1", retry_num=1))
                    assert status == 200
                    # ... and the same message again by another subscription (a new event id)
                    again = dict(event, type="message", channel_type="channel")
                    status, _ = await post(session, second.url + "/slack/events", events.event(again, event_id="Ev2"))
                    assert status == 200
                    await fake.wait_for(lambda: answers_in(fake, ts)
                                        and fake.reactions.get((CHANNEL, ts)) == [reaction], timeout=60)
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
                question = SlackEvents.message(user="UASKER", channel=CHANNEL, ts=ts, kind="app_mention",
                                               text=f"<@{BOT_USER_ID}> how do I roll back a deploy?")
                assert (await post(session, first.url + "/slack/events", events.event(question)))[0] == 200
                await fake.wait_for(lambda: fake.reactions.get((CHANNEL, ts)) == ["white_check_mark"], timeout=60)
                model.stall_on, model._release = {"generate"}, asyncio.Event()
                model.stalled.clear()
                reply_ts = fake.next_ts()
                follow_up = SlackEvents.message(user="UASKER", channel=CHANNEL, ts=reply_ts, thread_ts=ts,
                                                kind="app_mention",
                                                text=f"<@{BOT_USER_ID}> and which version does it go back to?")
                assert (await post(session, first.url + "/slack/events", events.event(follow_up)))[0] == 200
                await asyncio.wait_for(model.stalled.wait(), 60)
                await first.kill()
                assert len(answers_in(fake, ts)) == 1
                model.release()
                routes_before = len(model.bodies("route"))

                second = BotProcess(tmp_path, fake, model)
                try:
                    await second.wait_ready(session)
                    await fake.wait_for(lambda: len(answers_in(fake, ts)) == 2
                                        and fake.reactions.get((CHANNEL, reply_ts)) == ["white_check_mark"],
                                        timeout=60)
                    await asyncio.sleep(1.0)  # nothing more may come
                finally:
                    log2 = await second.stop()
        finally:
            await first.stop()
    assert len(answers_in(fake, ts)) == 2, log2[-3000:]
    assert "recovery" in log2
    history = json.dumps(model.bodies("route")[routes_before:][-1]["messages"])
    assert "roll back a deploy" in history and "which version" in history, history
