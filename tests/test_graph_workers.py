"""Graph worker processes (``[service] graph_workers``): the chat process keeps Slack,
the graph runs in worker processes. Through the real boundary: ``python -m bot run`` in Slack
HTTP mode (a real subprocess with its real workers), signed events, the Slack and Mistral
fakes; what is checked is what a user sees (posts in the thread, reactions) and what the
saved thread holds (the next question's prompt carries the history)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest

from tests.fakes.bot_process import child_pids
from tests.fakes.mistral_stall import StallingMistral, mistral_server
from tests.fakes.slack_api import FakeSlackAPI, SlackEvents, all_text, is_help_request
from tests.test_recovery import CHANNEL, BotProcess, answers_in, deliver, mention
from tests.test_slack_run import thread_posts

WORKERS = "graph_workers = 2"


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").exists() and Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


async def wait_until(check, timeout: float = 30.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not check():
        assert loop.time() < deadline, "timed out"
        await asyncio.sleep(0.1)


def done(fake: FakeSlackAPI, ts: str) -> bool:
    return bool(answers_in(fake, ts)) and fake.reactions.get((CHANNEL, ts)) == ["white_check_mark"]


@dataclass
class Stalled:
    """A bot with two graph workers and one question stalled in the model (see :func:`stalled_question`)."""

    bot: BotProcess
    model: StallingMistral
    workers: list[int]
    ts: str


@asynccontextmanager
async def workers_bot(
    tmp_path: Path, fake: FakeSlackAPI, stall_on: set[str]
) -> AsyncIterator[tuple[BotProcess, StallingMistral, aiohttp.ClientSession]]:
    """The bot with two graph workers, ready, its model stalling at ``stall_on`` tasks, and a
    session to send events with; the bot is stopped afterwards (its log: ``bot.text()``)."""
    async with mistral_server(stall_on=stall_on) as model:
        bot = BotProcess(tmp_path, fake, model, service=WORKERS)
        try:
            async with aiohttp.ClientSession() as session:
                await bot.wait_ready(session)
                yield bot, model, session
        finally:
            await bot.stop()


@asynccontextmanager
async def stalled_question(tmp_path: Path, fake: FakeSlackAPI) -> AsyncIterator[Stalled]:
    """Start the bot with two workers, ask one question and wait until a worker's run of it
    stalls at "generate" (its answer being written); the bot is stopped afterwards."""
    async with workers_bot(tmp_path, fake, {"generate"}) as (bot, model, session):
        workers = child_pids(bot.proc.pid)
        assert len(workers) == 2
        ts = fake.next_ts()
        await deliver(session, bot, SlackEvents(), mention(ts, "how do I roll back a deploy?"), "Ev1")
        await asyncio.wait_for(model.stalled.wait(), 60)
        yield Stalled(bot, model, workers, ts)


async def test_questions_and_follow_ups_are_answered_by_the_workers_with_the_thread_history(tmp_path, fake):
    """Three threads at once and then a follow-up in one of them: each is answered once in
    its own thread with the done reaction; the follow-up's prompt holds the first turn
    (written to the checkpoint file by a worker, read by whichever worker runs next)."""
    events = SlackEvents()
    async with mistral_server() as model:
        bot = BotProcess(tmp_path, fake, model, service=WORKERS)
        try:
            async with aiohttp.ClientSession() as session:
                await bot.wait_ready(session)
                workers = child_pids(bot.proc.pid)
                assert len(workers) == 2, bot.text()[-3000:]
                questions = {
                    fake.next_ts(): text
                    for text in (
                        "how do I roll back a deploy?",
                        "how long do deploy rollouts take?",
                        "how do I go back to an earlier release after a deploy?",
                    )
                }
                await asyncio.gather(
                    *(
                        deliver(session, bot, events, mention(ts, text), f"Ev{i}")
                        for i, (ts, text) in enumerate(questions.items())
                    )
                )
                await fake.wait_for(lambda: all(done(fake, ts) for ts in questions), timeout=60)
                first = next(iter(questions))
                routes_before = len(model.bodies("route"))
                reply_ts = fake.next_ts()
                await deliver(
                    session,
                    bot,
                    events,
                    mention(reply_ts, "and which version does it go back to?", thread_ts=first),
                    "EvF",
                )
                await fake.wait_for(
                    lambda: (
                        len(answers_in(fake, first)) == 2
                        and fake.reactions.get((CHANNEL, reply_ts)) == ["white_check_mark"]
                    ),
                    timeout=60,
                )
                await asyncio.sleep(0.5)  # nothing more may come
                assert child_pids(bot.proc.pid) == workers  # no worker died
        finally:
            log = await bot.stop()
    assert "graph workers ready: 2 processes" in log
    # the workers log as the chat process does: events, not the HTTP client's line per model request
    assert "HTTP Request:" not in log and "answer in" in log, log[-3000:]
    for ts in questions:
        posts = answers_in(fake, ts)
        assert len(posts) == (2 if ts == first else 1), log[-3000:]
        assert all(p["thread_ts"] == ts for p in posts)
        assert "make rollback" in all_text(posts[0])
    history = json.dumps(model.bodies("route")[routes_before:][-1]["messages"])
    assert "roll back a deploy" in history and "which version" in history, history
    assert not any(alive(pid) for pid in workers)  # stopped with the bot


async def test_a_worker_killed_mid_run_the_question_is_still_answered_once(tmp_path, fake):
    """SIGKILL the worker running a question while its answer is being written: the chat
    process starts another worker and runs the question again; one answer, done."""
    async with stalled_question(tmp_path, fake) as q:
        for pid in q.workers:  # whichever runs it
            os.kill(pid, signal.SIGKILL)
        await wait_until(
            lambda: (
                len([p for p in child_pids(q.bot.proc.pid) if p not in q.workers]) == 2
                and "started again" in q.bot.text()
            ),
            timeout=60,
        )
        q.model.release()
        await fake.wait_for(lambda: done(fake, q.ts), timeout=60)
        await asyncio.sleep(1.0)  # nothing more may come
    log = q.bot.text()
    posts = answers_in(fake, q.ts)
    assert len(posts) == 1, log[-3000:]
    assert "make rollback" in all_text(posts[0])
    assert "running the question again" in log
    assert fake.reactions[(CHANNEL, q.ts)] == ["white_check_mark"]


async def test_a_help_request_from_a_worker_is_answered_by_the_expert_reply(tmp_path, fake):
    """No document is relevant: the run pauses (interrupt) in a worker and the help request
    is posted in the thread; the expert's reply resumes it (Command(resume=...) through the
    pool) and is posted as the answer."""
    events = SlackEvents()
    async with mistral_server() as model:
        model.script["grade_documents"] = [json.dumps({"documents": [], "feedback": "nothing about holidays"})]
        bot = BotProcess(tmp_path, fake, model, service=WORKERS)
        try:
            async with aiohttp.ClientSession() as session:
                await bot.wait_ready(session)
                ts = fake.next_ts()
                await deliver(session, bot, events, mention(ts, "when is the office closed for the holidays?"), "Ev1")
                await fake.wait_for(lambda: any(is_help_request(p) for p in thread_posts(fake, ts)), timeout=60)
                reply = SlackEvents.message(
                    user="UEXPERT",
                    channel=CHANNEL,
                    ts=fake.next_ts(),
                    thread_ts=ts,
                    text="answer: from Dec 20 to Jan 3",
                )
                await deliver(session, bot, events, reply, "Ev2")
                await fake.wait_for(
                    lambda: any("Dec 20 to Jan 3" in all_text(p) for p in answers_in(fake, ts)), timeout=60
                )
                await fake.wait_for(lambda: fake.reactions.get((CHANNEL, ts)) == ["white_check_mark"], timeout=30)
        finally:
            log = await bot.stop()
    answers = [p for p in answers_in(fake, ts) if "Dec 20 to Jan 3" in all_text(p)]
    assert len(answers) == 1, log[-3000:]


async def test_with_two_workers_twice_the_questions_run_at_once(tmp_path, fake):
    """``max_concurrent_runs = "auto"`` is 32 per process that runs the graph: with two workers,
    40 questions at once are all in the model together (in one process 8 of them would wait,
    showing the queued reaction), and each is answered once."""
    events = SlackEvents()
    async with workers_bot(tmp_path, fake, {"route"}) as (bot, model, session):
        stamps = [fake.next_ts() for _ in range(40)]
        await asyncio.gather(
            *(
                deliver(session, bot, events, mention(ts, f"how do I roll back deploy {i}?"), f"Ev{i}")
                for i, ts in enumerate(stamps)
            )
        )
        await wait_until(lambda: model.stalling == len(stamps), timeout=60)
        assert not any("hourglass_flowing_sand" in fake.reactions.get((CHANNEL, ts), []) for ts in stamps)
        model.release()
        await wait_until(lambda: all(done(fake, ts) for ts in stamps), timeout=90)
    assert all(len(answers_in(fake, ts)) == 1 for ts in stamps), bot.text()[-3000:]


def saved_rows(db: Path) -> tuple[int, int]:
    """(checkpoints, pending writes) saved in the checkpoint file ``db``."""
    with sqlite3.connect(db) as conn:
        return (
            conn.execute("SELECT count(*) FROM checkpoints").fetchone()[0],
            conn.execute("SELECT count(*) FROM writes").fetchone()[0],
        )


async def test_a_stop_saves_every_run_in_flight_as_in_process(tmp_path, fake):
    """SIGTERM with six questions stalled in the workers (their answers being written): each
    run ends as a stop ends it in process, its checkpoint saved, so after a restart each
    continues from it instead of starting again, as in process. (Seen: the worker cancelled
    each stopped run a second time as it exited, cutting its checkpoint save short: 3 of 6 saved.)"""
    events = SlackEvents()
    async with workers_bot(tmp_path, fake, {"generate"}) as (bot, model, session):
        stamps = [fake.next_ts() for _ in range(6)]
        await asyncio.gather(
            *(
                deliver(session, bot, events, mention(ts, f"how do I roll back deploy {i}?"), f"Ev{i}")
                for i, ts in enumerate(stamps)
            )
        )
        await wait_until(lambda: model.stalling == len(stamps), timeout=60)
        await bot.stop()
        assert bot.proc.returncode == 0, bot.text()[-3000:]
    with sqlite3.connect(next(tmp_path.rglob("checkpoints.sqlite"))) as conn:
        saved = conn.execute("SELECT count(DISTINCT thread_id) FROM checkpoints").fetchone()[0]
    assert saved == len(stamps), bot.text()[-3000:]


async def test_workers_end_with_a_killed_chat_process_and_the_cut_off_run_saves_nothing(tmp_path, fake):
    """kill -9 of the chat process while a worker runs a question (stalled in the model): its
    workers see their socket close and exit (none is left running), and the cut-off run saves
    nothing more to the thread, as when the graph ran in the killed process. (Seen: the worker
    cancelled the run, LangGraph saved its checkpoint on the way out, and after the restart
    recovery continued the half-run turn instead of asking the question again.)"""
    async with stalled_question(tmp_path, fake) as q:
        db = next(tmp_path.rglob("checkpoints.sqlite"))
        saved = saved_rows(db)
        await q.bot.kill()
        await wait_until(lambda: not any(alive(pid) for pid in q.workers), timeout=20)
        q.model.release()
        await asyncio.sleep(0.5)
        assert saved_rows(db) == saved


@pytest.mark.parametrize("fault, kind", [("401", "auth: HTTPStatusError"), ("no server", "network: ConnectError")])
async def test_a_failure_in_a_worker_is_told_as_it_is_in_process(tmp_path, fake, fault, kind):
    """The model refuses the key (401), or no model server listens (a cause chained inside
    the retry wrapper), while a worker runs the question: the user gets the apology, and
    the log names the failure's kind and cause as an in-process run does, read from the
    whole cause chain in the worker (pickling would drop the chain)."""
    events = SlackEvents()
    async with mistral_server() as model:
        # the model answers at start (`run` checks it before serving), then fails
        gone = mistral_server()
        target = model if fault == "401" else await gone.__aenter__()
        bot = BotProcess(tmp_path, fake, target, service=WORKERS)
        try:
            async with aiohttp.ClientSession() as session:
                await bot.wait_ready(session)
                model.status = 401
                if fault == "no server":
                    await gone.__aexit__(None, None, None)  # no model server listens any more
                ts = fake.next_ts()
                await deliver(session, bot, events, mention(ts, "how do I roll back a deploy?"), "Ev1")
                await fake.wait_for(
                    lambda: answers_in(fake, ts) and fake.reactions.get((CHANNEL, ts)) == ["disappointed"], timeout=60
                )
        finally:
            log = await bot.stop()
    assert "Sorry" in all_text(answers_in(fake, ts)[0])
    failed = [line for line in log.splitlines() if "graph run failed" in line]
    assert len(failed) == 1 and f"graph run failed: {kind}" in failed[0], log[-3000:]
