"""Fast under load: what a user notices when many questions arrive at once.

- the first reaction comes at once, before a run slot is free; a question that waits for
  one shows the "queued" status, and still ends done;
- with a hosted model the default caps ("auto") let many questions run at once, while
  the offline model keeps one call at a time;
- the Slack Web API calls of many questions share keep-alive connections, and a user's
  name is looked up once (not once per delivery and question).
"""

from __future__ import annotations

import asyncio
import re
import time

import aiohttp

from bot.config import Secrets, load_settings
from bot.platforms.console import ConsoleResponder
from bot.platforms.slack.run import run_slack
from bot.protocol import IncomingMessage, Status
from bot.runtime import AUTO_CONCURRENCY, open_runtime, resolve_concurrency
from tests.conftest import scripted_runtime, wait_healthy
from tests.fakes.chat_model import ScriptedChatModel
from tests.fakes.mistral_api import mistral_runtime
from tests.fakes.slack_api import (
    BOT_TOKEN,
    BOT_USER_ID,
    SIGNING_SECRET,
    FakeSlackAPI,
    SlackEvents,
    SlackHarness,
    write_config,
)
from tests.test_slack_run import free_port, post


class TimedResponder(ConsoleResponder):
    """The console responder, with the time each status was shown."""

    def __init__(self, thread: str) -> None:
        super().__init__(thread, show_status=False)
        self.times: list[tuple[Status, float]] = []

    async def set_status(self, status: Status) -> None:
        self.times.append((status, time.monotonic()))
        await super().set_status(status)


def question(thread: str, text: str) -> IncomingMessage:
    return IncomingMessage(
        platform="console",
        thread_key=f"console:{thread}",
        message_id=f"m-{thread}",
        author_id="ana",
        author_name="ana",
        text=text,
    )


def slow_generate(seconds: float):
    def generate(messages):
        time.sleep(seconds)
        return "It needs REDIS_URI [1]."

    return generate


async def test_questions_beyond_the_run_limit_are_shown_queued_at_once(settings):
    settings.service.max_concurrent_runs = 1
    async with scripted_runtime(settings, {"generate": slow_generate(0.6)}) as (rt, _):
        outs = [TimedResponder(f"t{i}") for i in range(3)]
        t0 = time.monotonic()
        await asyncio.gather(
            *[rt.service.handle(question(f"t{i}", "what does the container need?"), out) for i, out in enumerate(outs)]
        )
    first_answer_done = min(t for out in outs for s, t in out.times if s == Status.DONE)
    for out in outs:
        first_status, at = out.times[0]
        assert at - t0 < 0.5 < first_answer_done - t0, out.times  # before any run could finish
        assert out.statuses[-1] == Status.DONE and len(out.answers) == 1
    firsts = sorted(out.statuses[0] for out in outs)
    assert firsts.count(Status.RECEIVED) == 1 and firsts.count(Status.QUEUED) == 2, firsts


async def test_a_question_with_a_free_slot_shows_received_then_the_graph_steps(settings):
    async with scripted_runtime(settings) as (rt, _):
        out = TimedResponder("one")
        await rt.service.handle(question("one", "what does the container need?"), out)
    assert out.statuses == [Status.RECEIVED, Status.SEARCHING, Status.WRITING, Status.DONE]


async def test_auto_caps_run_many_questions_at_once_with_a_hosted_model(tmp_path):
    """100 questions at once against a Mistral-shaped server writing answers in 6 s: with the
    default caps ("auto") they are all in flight together (small fixed caps made a slow
    model answer a burst in waves: bench/README.md). The answer takes long enough that a busy
    shared machine still gets every question to the model before the first answer returns."""
    async with mistral_runtime(tmp_path, {"generate": [{"delay": 6.0}]}) as (rt, fake):
        outs = [ConsoleResponder(f"q{i}", show_status=False) for i in range(100)]
        t0 = time.monotonic()
        await asyncio.gather(
            *[rt.service.handle(question(f"q{i}", "what does the container need?"), o) for i, o in enumerate(outs)]
        )
        wall = time.monotonic() - t0
    assert all(o.statuses[-1] == Status.DONE and len(o.answers) == 1 for o in outs)
    # every run admitted at once: the calls cap (64) is what limits, not the runs (32 before)
    assert all(Status.QUEUED not in o.statuses for o in outs)
    assert fake.max_in_flight >= 60, (fake.max_in_flight, wall)  # the old caps allowed 4, then 32


def test_auto_caps_per_model():
    hosted = ScriptedChatModel()
    assert resolve_concurrency("auto", "auto", hosted) == AUTO_CONCURRENCY["hosted"]
    assert resolve_concurrency(3, "auto", hosted) == (3, AUTO_CONCURRENCY["hosted"][1])
    assert resolve_concurrency("auto", 5, hosted) == (AUTO_CONCURRENCY["hosted"][0], 5)
    # each graph worker process runs its own share; calls stay one cap, shared out
    assert resolve_concurrency("auto", "auto", hosted, workers=2) == (
        AUTO_CONCURRENCY["hosted"][0],
        2 * AUTO_CONCURRENCY["hosted"][1],
    )
    assert resolve_concurrency("auto", 5, hosted, workers=2)[1] == 5
    assert AUTO_CONCURRENCY["llamacpp"][0] == 1


async def test_slack_calls_share_connections_and_names_are_looked_up_once(tmp_path, fake: FakeSlackAPI):
    port = free_port()
    settings = load_settings(write_config(tmp_path, fake, slack=f'http_port = {port}\nhttp_host = "127.0.0.1"'))
    secrets = Secrets(slack_bot_token=BOT_TOKEN, slack_signing_secret=SIGNING_SECRET)
    events = SlackEvents()
    url = f"http://127.0.0.1:{port}/slack/events"
    stop = asyncio.Event()
    roots: list[str] = []
    async with open_runtime(settings, secrets, chat_model=ScriptedChatModel()) as runtime:
        task = asyncio.create_task(run_slack(runtime, stop=stop))
        try:
            async with aiohttp.ClientSession() as session:
                await wait_healthy(session, port)
                for i in range(6):  # a channel mention arrives twice: app_mention and message
                    ts = fake.next_ts()
                    roots.append(ts)
                    for kind in ("app_mention", "message"):
                        event = SlackEvents.message(
                            user="UASKER",
                            channel="C0GENERAL",
                            ts=ts,
                            kind=kind,
                            text=f"<@{BOT_USER_ID}> question {i}: how do I deploy?",
                        )
                        status, _ = await post(session, url, events.event(event))
                        assert status == 200
                await fake.wait_for(
                    lambda: all(fake.reactions.get(("C0GENERAL", ts)) == ["white_check_mark"] for ts in roots),
                    timeout=30,
                )
        finally:
            stop.set()
            await asyncio.wait_for(task, 15)
    posts = [p for p in fake.posts() if p.get("thread_ts") in roots]
    assert sorted(p["thread_ts"] for p in posts) == sorted(roots)  # one answer per question
    assert len(fake.calls_to("users.info")) == 1  # one user, twelve deliveries, six questions
    api_peers = [p for c, p in zip(fake.calls, fake.peers, strict=False) if c.method != "auth.test"]
    assert len(set(api_peers)) <= len(api_peers) // 4, (len(set(api_peers)), len(api_peers))


async def test_the_first_reaction_waits_for_no_lookup_and_no_storage(tmp_path, fake: FakeSlackAPI):
    """Acknowledge on receipt: the received reaction lands while the user's name lookup is
    still in flight and while the bookkeeping and checkpoint files are busy (held by other
    work); the answer follows once they are free."""
    fake.delays["users.info"] = 2.0
    harness = await SlackHarness(tmp_path, fake, write_config(tmp_path, fake), ScriptedChatModel()).open()
    try:
        request, ts = harness.mention("UASKER", "how do I deploy?")
        async with harness.runtime.bookkeeping._lock, harness.runtime.graph.checkpointer.lock:  # both files busy
            t0 = time.monotonic()
            assert (await harness.deliver(request)).status == 200
            await fake.wait_for(lambda: harness.reactions_now(ts), timeout=1.5)
            assert harness.reactions_now(ts) == ["eyes"] and time.monotonic() - t0 < 1.5
            assert not fake.calls_to("users.info", ok_only=True) and not harness.answers()
        await harness.bot.drain(30)
        assert harness.reactions_now(ts) == ["white_check_mark"]
        assert [a["thread_ts"] for a in harness.answers()] == [ts]
    finally:
        await harness.close()


async def test_a_redelivery_after_a_restart_leaves_no_reaction_behind(tmp_path, fake: FakeSlackAPI):
    """A new process does not remember the message: it acknowledges it, then finds it was
    answered before (the dedup mark on disk) and takes its reaction off again."""
    harness = await SlackHarness(tmp_path, fake, write_config(tmp_path, fake), ScriptedChatModel()).open()
    try:
        request, ts = harness.mention("UASKER", "how do I deploy?")
        await harness.send(request)
        assert harness.reactions_now(ts) == ["white_check_mark"]
        await harness.restart()
        await harness.send(request)
        assert harness.reactions_now(ts) == ["white_check_mark"]
        assert len(harness.answers()) == 1
    finally:
        await harness.close()


async def test_a_second_delivery_shows_nothing_more(tmp_path, fake: FakeSlackAPI):
    """A channel mention arrives twice (app_mention and message): one received reaction."""
    harness = await SlackHarness(tmp_path, fake, write_config(tmp_path, fake), ScriptedChatModel()).open()
    try:
        ts = fake.next_ts()
        for kind in ("app_mention", "message"):
            event = SlackEvents.message(
                user="UASKER", channel=harness.channel, ts=ts, kind=kind, text=f"<@{BOT_USER_ID}> how do I deploy?"
            )
            assert (await harness.deliver(harness.events.event(event))).status == 200
        await harness.bot.drain(30)
        adds = [c.args["name"] for c in fake.calls_to("reactions.add") if c.args["timestamp"] == ts]
        assert adds == ["eyes", "mag", "pencil2", "white_check_mark"], adds
        assert harness.runtime.service.runs_wanted() == 0  # no run slot left promised
    finally:
        await harness.close()


async def test_the_answer_check_sees_the_sources_the_draft_cites(settings):
    """The retrieved chunks go to the model for grading and for writing; the answer check
    gets only the ones the draft cites (all of them when it cites none)."""
    drafts = ["It needs REDIS_URI [2].", "It needs REDIS_URI."]
    async with scripted_runtime(
        settings,
        {
            "generate": drafts,
            "grade_answer": ['{"grounded": false, "useful": true}', '{"grounded": true, "useful": true}'],
        },
    ) as (rt, model):
        out = ConsoleResponder("t", show_status=False, show_answers=False)
        await rt.service.handle(question("cite", "container requirements, Studio auth tokens, trimming messages?"), out)
    documents = next(str(m[-1].content) for t, m in model.calls if t == "generate")
    shown = re.findall(r"^\[(\d+)\]", documents, re.MULTILINE)
    assert len(shown) >= 2, documents
    checks = [str(m[-1].content) for t, m in model.calls if t == "grade_answer"]
    assert re.findall(r"^\[(\d+)\]", checks[0], re.MULTILINE) == ["2"]  # the cited one, under its own number
    assert re.findall(r"^\[(\d+)\]", checks[1], re.MULTILINE) == shown  # no citation: every source
