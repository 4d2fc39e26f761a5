"""A message counts as handled only once it was answered, apologised for by the graph, or
asked about: a turn that *failed* (the model API down, the database away) ends in the
apology and leaves the message unhandled, so Slack's redelivery of it (``x-slack-retry-num``)
is answered. Through signed Slack requests, the fake Slack Web API and a scripted model; the
database outage on the real PostgreSQL server."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import httpx

from bot.config import ServiceSettings, StorageSettings
from tests.fakes.chat_model import ScriptedChatModel
from tests.fakes.postgres import outage, pg_database  # noqa: F401 - the fixture
from tests.fakes.slack_api import BOT_USER_ID, FakeSlackAPI, SlackHarness, all_text, write_config

NONE_RELEVANT = json.dumps({"documents": [{"id": 1, "relevant": False, "facts": ""}], "feedback": "nothing"})


class Switch:
    """A model task that fails with HTTP 503 while ``down`` (the provider's outage)."""

    def __init__(self, task: str) -> None:
        self.task, self.down = task, True

    def __call__(self, messages: list[Any]) -> str:
        if self.down:
            request = httpx.Request("POST", "http://mistral.local/v1/chat/completions")
            raise httpx.HTTPStatusError("503", request=request, response=httpx.Response(503, request=request))
        return ScriptedChatModel.default_reply(self.task, messages)


def deliveries(harness: SlackHarness, text: str) -> tuple[Any, Any, Any, str]:
    """The first delivery of a channel mention and Slack's two retries of the same event."""
    ts = harness.fake.next_ts()
    event = harness.events.message(
        user="UASKER", channel=harness.channel, ts=ts, kind="app_mention", text=f"<@{BOT_USER_ID}> {text}"
    )
    event_id = f"Ev{ts.replace('.', '')}"
    return (
        harness.events.event(event, event_id=event_id),
        harness.events.event(event, event_id=event_id, retry_num=1),
        harness.events.event(event, event_id=event_id, retry_num=2),
        ts,
    )


def in_thread(harness: SlackHarness, ts: str) -> list[str]:
    return [all_text(p) for p in harness.fake.posts(harness.channel) if p.get("thread_ts") == ts]


async def test_a_redelivery_after_a_failed_turn_is_answered(tmp_path, fake: FakeSlackAPI):
    generate = Switch("generate")
    cfg = write_config(tmp_path, fake, extra="[models]\nmax_retries = 0\n")
    harness = await SlackHarness(tmp_path, fake, cfg, ScriptedChatModel(script={"generate": generate})).open()
    try:
        first, retry, second_retry, ts = deliveries(harness, "how do I deploy?")
        await harness.send(first, timeout=60)
        (apology,) = in_thread(harness, ts)
        assert ServiceSettings().apology in apology
        assert harness.reactions_now(ts) == ["disappointed"]

        generate.down = False  # the provider is back; Slack retries the event
        await harness.send(retry, timeout=60)
        posts = in_thread(harness, ts)
        assert len(posts) == 2 and "Here is the answer" in posts[1], posts
        assert harness.reactions_now(ts) == ["white_check_mark"]  # the failure's apology is gone

        await harness.send(second_retry, timeout=60)  # answered now: a later retry is a duplicate
        assert len(in_thread(harness, ts)) == 2
        # the graph's own apology (no grounded answer) is an outcome, not a failure: not answered twice
        harness.model.script["grade_documents"] = NONE_RELEVANT
        first, retry, _, ts = deliveries(harness, "what is the VPN password policy?")
        await harness.send(first, timeout=60)
        await harness.send(retry, timeout=60)
        assert len(in_thread(harness, ts)) == 1
    finally:
        await harness.close()


async def test_a_redelivery_after_the_database_apology_is_answered(tmp_path, fake: FakeSlackAPI, pg_database):
    name, url = pg_database
    cfg = write_config(tmp_path, fake, extra='[storage]\nbackend = "postgres"\nconnect_timeout_seconds = 2\n')
    harness = await SlackHarness(tmp_path, fake, cfg, ScriptedChatModel(), database_url=url).open()
    try:
        first, retry, second_retry, ts = deliveries(harness, "how do I deploy?")
        with outage(name):
            await harness.send(first, timeout=60)
            (apology,) = in_thread(harness, ts)
            assert StorageSettings().database_apology in apology, apology
        for attempt in (retry, second_retry):  # after the outage Slack retries (twice at most)
            await harness.send(attempt, timeout=60)
            if any("Here is the answer" in p for p in in_thread(harness, ts)):
                break
        posts = in_thread(harness, ts)
        assert [p for p in posts if "Here is the answer" in p], posts
        assert harness.reactions_now(ts) == ["white_check_mark"]
    finally:
        await harness.close()


class Held:
    """A model task that waits (in LangChain's executor thread) until the test lets it go."""

    def __init__(self, task: str) -> None:
        self.task = task
        self.started, self.release = threading.Event(), threading.Event()

    def __call__(self, messages: list[Any]) -> str:
        self.started.set()
        self.release.wait(30)
        return ScriptedChatModel.default_reply(self.task, messages)


async def test_a_redelivery_after_the_database_went_away_mid_run_is_answered(tmp_path, fake, pg_database):
    """The message was recorded, then the database went away while the model wrote the
    answer: the run fails (the database apology), and the message cannot be forgotten until
    the database is back; Slack's retry after that is answered."""
    name, url = pg_database
    cfg = write_config(tmp_path, fake, extra='[storage]\nbackend = "postgres"\nconnect_timeout_seconds = 2\n')
    generate = Held("generate")
    harness = await SlackHarness(
        tmp_path, fake, cfg, ScriptedChatModel(script={"generate": generate}), database_url=url
    ).open()
    try:
        first, retry, second_retry, ts = deliveries(harness, "how do I deploy?")
        assert (await harness.deliver(first)).status == 200
        assert await asyncio.to_thread(generate.started.wait, 30)  # recorded, and the run is under way
        with outage(name):
            generate.release.set()
            await harness.bot.drain(60)
            (apology,) = in_thread(harness, ts)
            assert StorageSettings().database_apology in apology, apology
        for attempt in (retry, second_retry):
            await harness.send(attempt, timeout=60)
            if any("Here is the answer" in p for p in in_thread(harness, ts)):
                break
        assert [p for p in in_thread(harness, ts) if "Here is the answer" in p], in_thread(harness, ts)
        assert harness.reactions_now(ts) == ["white_check_mark"]
    finally:
        generate.release.set()
        await harness.close()
