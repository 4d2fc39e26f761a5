"""Three ``python -m bot run`` replicas (Slack HTTP mode) on one PostgreSQL database: every
event is delivered to one replica and redelivered to others, a thread's two questions go
to two replicas, a help request is answered through another replica than the one that
paused; a replica is SIGKILLed mid-run; the database's connections are cut mid-run.
Each question gets exactly one reply in its thread, in order; nothing is lost."""

from __future__ import annotations

import asyncio
import re

import aiohttp
import psycopg

from tests.fakes.postgres import outage, pg_database, terminate  # noqa: F401 - fixture
from tests.fakes.replicas import Replica, add_users, help_posts, model_server, replies_in, storage_section
from tests.fakes.slack_api import BOT_USER_ID, SlackEvents, all_text

CHANNEL = "C0GENERAL"


def mention(events: SlackEvents, ts: str, text: str, thread_ts: str | None = None) -> dict:
    return events.message(
        user="UASKER", channel=CHANNEL, ts=ts, thread_ts=thread_ts, text=f"<@{BOT_USER_ID}> {text}", kind="app_mention"
    )


def tokens(posts: list[dict]) -> list[str]:
    """The question each post answers (its ``qtok``), in posting order; "?" for none."""
    return [(re.findall(r"qtok-\d+-\d+", all_text(p)) or ["?"])[0] for p in posts]


async def start(tmp_path, fake, model, url, n: int, **kw) -> list[Replica]:
    replicas = [Replica(tmp_path, fake, model, url, name=f"r{i}", **kw) for i in range(n)]
    async with aiohttp.ClientSession() as session:
        await asyncio.gather(*(r.wait_ready(session) for r in replicas))
    return replicas


async def test_three_replicas_answer_every_question_once_in_order(tmp_path, fake, pg_database):
    name, url = pg_database
    add_users(fake)
    events = SlackEvents()
    async with model_server(delay=0.05) as base:
        replicas = await start(tmp_path, fake, base, url, 3)
        logs = []
        try:
            async with aiohttp.ClientSession() as session:
                threads: dict[int, str] = {}
                sends = []
                for i in range(6):  # question 1 of each thread: to replica i, again to i+1 (retry) and i+2 (new id)
                    ts = fake.next_ts()
                    threads[i] = ts
                    ev = mention(events, ts, f"qtok-{i}-1 how do I roll back?")
                    r = [replicas[(i + k) % 3] for k in range(3)]
                    sends += [
                        r[0].deliver(session, events.event(ev, event_id=f"Ev{i}a")),
                        r[1].deliver(session, events.event(ev, event_id=f"Ev{i}a", retry_num=1)),
                        r[2].deliver(
                            session, events.event(dict(ev, type="message", channel_type="channel"), event_id=f"Ev{i}b")
                        ),
                    ]
                assert set(await asyncio.gather(*sends)) == {200}
                await asyncio.sleep(0.3)
                sends = []
                for i, ts in threads.items():  # question 2 of the thread: to another replica, redelivered to a third
                    ev = mention(events, fake.next_ts(), f"qtok-{i}-2 and after that?", thread_ts=ts)
                    sends += [
                        replicas[(i + 1) % 3].deliver(session, events.event(ev, event_id=f"Ev{i}c")),
                        replicas[(i + 2) % 3].deliver(session, events.event(ev, event_id=f"Ev{i}c", retry_num=1)),
                    ]
                help_ts = fake.next_ts()  # a help request, answered through another replica
                sends.append(
                    replicas[0].deliver(
                        session,
                        events.event(
                            mention(events, help_ts, "qtok-9-1 stuck: when is the deploy freeze?"), event_id="EvH"
                        ),
                    )
                )
                assert set(await asyncio.gather(*sends)) == {200}
                await fake.wait_for(
                    lambda: (
                        all(len(replies_in(fake, ts)) >= 2 for ts in threads.values()) and help_posts(fake, help_ts)
                    ),
                    timeout=90,
                )
                # the help request reaches Slack just before its replica logs the pause
                await fake.wait_for(lambda: any("paused for a human" in r.text() for r in replicas), timeout=10)
                paused = [r for r in replicas if "paused for a human" in r.text()]
                assert len(paused) == 1
                other = [r for r in replicas if r is not paused[0]]
                reply = events.message(
                    user="UEXPERT",
                    channel=CHANNEL,
                    ts=fake.next_ts(),
                    thread_ts=help_ts,
                    text="answer: the freeze starts on Friday",
                )
                sends = [
                    other[0].deliver(session, events.event(reply, event_id="EvR")),
                    other[1].deliver(session, events.event(reply, event_id="EvR", retry_num=1)),
                    paused[0].deliver(session, events.event(reply, event_id="EvR", retry_num=2)),
                ]
                assert set(await asyncio.gather(*sends)) == {200}
                await fake.wait_for(lambda: replies_in(fake, help_ts), timeout=60)
                await asyncio.sleep(2.0)  # nothing more may come (leases, timers, redeliveries)
        finally:
            logs = [await r.stop() for r in replicas]
    everything = "\n".join(logs)
    for i, ts in threads.items():
        posts = replies_in(fake, ts)
        assert tokens(posts) == [f"qtok-{i}-1", f"qtok-{i}-2"], (i, [all_text(p) for p in posts], everything[-4000:])
        assert fake.reactions.get((CHANNEL, ts)) == ["white_check_mark"]
    assert len(help_posts(fake, help_ts)) == 1
    answers = replies_in(fake, help_ts)
    assert len(answers) == 1 and "Friday" in all_text(answers[0])
    assert everything.count("help request resumed by") == 1
    assert "Traceback" not in everything
    answered_by = {
        r.name: len(re.findall(r"\] (?:answer|human) in \d", log)) for r, log in zip(replicas, logs, strict=False)
    }
    # exactly once in all; which replica wins each delivery race depends on the machine's load,
    # so only require that the work was shared (one replica winning every race is not the point)
    assert sum(answered_by.values()) == 13 and sum(1 for n in answered_by.values() if n) >= 2, answered_by
    with psycopg.connect(url) as conn:  # nothing left in flight
        assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM help_requests WHERE status = 'open'").fetchone()[0] == 0


async def test_a_killed_replica_s_questions_are_finished_by_the_others_once(tmp_path, fake, pg_database):
    name, url = pg_database
    add_users(fake)
    events = SlackEvents()
    async with model_server(stall_on={"generate"}) as base:
        replicas = await start(tmp_path, fake, base, url, 3)
        try:
            async with aiohttp.ClientSession() as session:
                threads = {}
                for i in range(4):
                    ts = fake.next_ts()
                    threads[i] = ts
                    assert (
                        await replicas[0].deliver(
                            session,
                            events.event(mention(events, ts, f"qtok-{i}-1 how do I roll back?"), event_id=f"Ev{i}"),
                        )
                        == 200
                    )
                await asyncio.wait_for(base.stalled.wait(), 60)
                await asyncio.sleep(1.0)  # every question of replica 0 reaches the model
                await replicas[0].kill()
                assert all(not replies_in(fake, ts) for ts in threads.values())
                base.release()
                # Slack redelivers to the survivors: ignored, the takeover answers
                for i, ts in threads.items():
                    assert (
                        await replicas[1 + i % 2].deliver(
                            session,
                            events.event(
                                mention(events, ts, f"qtok-{i}-1 how do I roll back?"), event_id=f"Ev{i}", retry_num=1
                            ),
                        )
                        == 200
                    )
                await fake.wait_for(
                    lambda: all(
                        replies_in(fake, ts) and fake.reactions.get((CHANNEL, ts)) == ["white_check_mark"]
                        for ts in threads.values()
                    ),
                    timeout=60,
                )
                await asyncio.sleep(3.0)  # leases expire again: nobody answers twice
        finally:
            logs = [await r.stop() for r in replicas]
    for i, ts in threads.items():
        assert tokens(replies_in(fake, ts)) == [f"qtok-{i}-1"], "\n".join(logs)[-4000:]
    survivors = "\n".join(logs[1:])
    assert "taken over" in survivors
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 0


async def test_database_connections_cut_mid_run_lose_and_double_nothing(tmp_path, fake, pg_database):
    name, url = pg_database
    add_users(fake)
    events = SlackEvents()
    async with model_server(delay=0.3) as base:
        replicas = await start(tmp_path, fake, base, url, 2)
        try:
            async with aiohttp.ClientSession() as session:
                threads = {}
                for i in range(6):
                    ts = fake.next_ts()
                    threads[i] = ts
                    assert (
                        await replicas[i % 2].deliver(
                            session,
                            events.event(mention(events, ts, f"qtok-{i}-1 how do I roll back?"), event_id=f"Ev{i}"),
                        )
                        == 200
                    )
                await asyncio.sleep(0.6)
                cut = terminate(name)
                await asyncio.sleep(0.4)
                cut += terminate(name)
                assert cut > 0
                await fake.wait_for(lambda: all(replies_in(fake, ts) for ts in threads.values()), timeout=90)
                await asyncio.sleep(3.0)  # a lease expiry later, still one reply each
                # the bot recovered by itself: a new question is answered
                ts = fake.next_ts()
                assert (
                    await replicas[0].deliver(
                        session, events.event(mention(events, ts, "qtok-7-1 how do I roll back?"), event_id="EvNew")
                    )
                    == 200
                )
                await fake.wait_for(lambda: replies_in(fake, ts), timeout=60)
        finally:
            logs = [await r.stop() for r in replicas]
    everything = "\n".join(logs)
    for i, t in threads.items():
        posts = replies_in(fake, t)
        assert len(posts) == 1, ([all_text(p) for p in posts], everything[-4000:])
        text = all_text(posts[0])
        assert f"qtok-{i}-1" in text or "database" in text  # the answer, or the apology that says why
    assert tokens(replies_in(fake, ts)) == ["qtok-7-1"]
    assert "Traceback" not in everything


async def test_the_database_going_away_is_said_in_chat_and_the_bot_recovers(tmp_path, fake, pg_database):
    """For 4 s the database refuses connections (and cuts the open ones): runs in flight and
    a question arriving then get the database apology or, if they outlast the outage, their
    answer; once it is back, nothing in flight is left, nothing is answered twice, and new
    questions are answered."""
    name, url = pg_database
    add_users(fake)
    events = SlackEvents()
    async with model_server(delay=0.3) as base:
        replicas = await start(
            tmp_path, fake, base, url, 2, storage=storage_section(lease_seconds=2, interval=0.5, connect_timeout=1)
        )
        try:
            async with aiohttp.ClientSession() as session:
                threads = {}

                async def ask(i: int, replica: Replica) -> None:
                    ts = fake.next_ts()
                    threads[i] = ts
                    assert (
                        await replica.deliver(
                            session,
                            events.event(mention(events, ts, f"qtok-{i}-1 how do I roll back?"), event_id=f"Ev{i}"),
                        )
                        == 200
                    )

                for i in range(4):
                    await ask(i, replicas[i % 2])
                await asyncio.sleep(0.5)
                with outage(name):
                    await asyncio.sleep(1.0)
                    await ask(4, replicas[0])  # arrives while the database is away
                    await asyncio.sleep(3.0)
                await fake.wait_for(lambda: all(replies_in(fake, ts) for ts in threads.values()), timeout=90)
                await asyncio.sleep(6.0)  # past the takeover grace: still one reply each
                await ask(5, replicas[1])
                await fake.wait_for(lambda: replies_in(fake, threads[5]), timeout=60)
                await asyncio.sleep(1.0)
        finally:
            logs = [await r.stop() for r in replicas]
    everything = "\n".join(logs)
    said = 0
    for i, ts in threads.items():
        posts = replies_in(fake, ts)
        assert len(posts) == 1, (i, [all_text(p) for p in posts], everything[-5000:])
        text = all_text(posts[0])
        said += "can't reach my database" in text
        assert f"qtok-{i}-1" in text or "can't reach my database" in text, text
    assert "can't reach my database" in all_text(replies_in(fake, threads[4])[0])
    assert said >= 1 and tokens(replies_in(fake, threads[5])) == ["qtok-5-1"]
    assert "database reachable again" in everything
    assert "Traceback" not in everything
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 0


async def test_a_help_request_times_out_once_across_replicas_even_when_its_replica_died(tmp_path, fake, pg_database):
    """Every replica arms a timer for every open help request (its replica watch); the
    replica that paused is killed; the timeout is answered once, by one of the others."""
    name, url = pg_database
    add_users(fake)
    events = SlackEvents()
    async with model_server() as base:
        replicas = await start(tmp_path, fake, base, url, 3, service="help_timeout_seconds = 4")
        try:
            async with aiohttp.ClientSession() as session:
                ts = fake.next_ts()
                assert (
                    await replicas[0].deliver(
                        session,
                        events.event(mention(events, ts, "qtok-1-1 stuck: when is the deploy freeze?"), event_id="EvH"),
                    )
                    == 200
                )
                await fake.wait_for(lambda: help_posts(fake, ts), timeout=60)
                await asyncio.sleep(1.5)  # the others' watches arm their timers
                await replicas[0].kill()
                await fake.wait_for(lambda: replies_in(fake, ts), timeout=30)
                await asyncio.sleep(3.0)  # every surviving timer has fired by now
        finally:
            logs = [await r.stop() for r in replicas]
    survivors = "\n".join(logs[1:])
    assert len(replies_in(fake, ts)) == 1, survivors[-4000:]
    assert survivors.count("no human answered in time") == 2  # both timers fired ...
    assert survivors.count("help request resumed by timeout") == 1  # ... one claimed it
    assert fake.reactions.get((CHANNEL, ts)) == ["disappointed"]


async def test_a_stopped_replica_s_run_taken_over_is_answered_once_when_it_wakes(tmp_path, fake, pg_database):
    """Replica r0 is stopped (SIGSTOP) in the middle of a run and the database's connections
    are cut (its thread lock with them): its lease expires, r1 takes the run over and
    answers it. Then r0 wakes up (SIGCONT) alive, finishes the run too, and must drop its
    result: the run's fence moved to r1. One answer in the thread, one final reaction."""
    import signal

    name, url = pg_database
    add_users(fake)
    events = SlackEvents()
    async with model_server(stall_on={"generate"}) as base:
        replicas = await start(tmp_path, fake, base, url, 2)
        r0, r1 = replicas
        try:
            async with aiohttp.ClientSession() as session:
                ts = fake.next_ts()
                assert (
                    await r0.deliver(
                        session, events.event(mention(events, ts, "qtok-1-1 how do I roll back?"), event_id="Ev1")
                    )
                    == 200
                )
                await asyncio.wait_for(base.stalled.wait(), 60)  # r0's run is at the model ...
                # ... and its "writing" status is shown (a status being set when the process stops would
                # land after it wakes: statuses are not fenced atomically, only the answer is)
                await fake.wait_for(lambda: fake.reactions.get((CHANNEL, ts)) == ["pencil2"], timeout=30)
                await asyncio.sleep(0.3)
                r0.proc.send_signal(signal.SIGSTOP)
                assert terminate(name) > 0  # r0's connections, its thread lock included, go
                loop = asyncio.get_running_loop()
                deadline = loop.time() + 60
                while "taken over" not in r1.text():  # r0's lease (2 s) expired
                    assert loop.time() < deadline, r1.text()[-3000:]
                    await asyncio.sleep(0.2)
                base.release()
                await fake.wait_for(
                    lambda: replies_in(fake, ts) and fake.reactions.get((CHANNEL, ts)) == ["white_check_mark"],
                    timeout=60,
                )
                r0.proc.send_signal(signal.SIGCONT)
                deadline = loop.time() + 60
                while "dropped here" not in r0.text():  # r0 finished its run: not posted
                    assert loop.time() < deadline, r0.text()[-3000:]
                    await asyncio.sleep(0.2)
                await asyncio.sleep(2.0)  # a lease period later: still one answer
        finally:
            r0.proc.send_signal(signal.SIGCONT)
            logs = [await r.stop() for r in replicas]
    everything = "\n".join(logs)
    assert tokens(replies_in(fake, ts)) == ["qtok-1-1"], (
        [all_text(p) for p in replies_in(fake, ts)],
        everything[-5000:],
    )
    assert fake.reactions.get((CHANNEL, ts)) == ["white_check_mark"], everything[-3000:]
    assert logs[0].count("dropped here") == 1
    assert "Traceback" not in everything
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 0


async def test_a_redelivery_to_another_replica_leaves_the_running_replica_s_status(tmp_path, fake, pg_database):
    """Slack redelivers a mention to replica r1 while r0 is still running it: r1 shows its
    status on receipt, loses the dedup, and must not take the shared bot user's "received"
    reaction away from the message r0 is answering; the question is answered once."""
    name, url = pg_database
    add_users(fake)
    events = SlackEvents()
    async with model_server(delay=1.5) as base:
        replicas = await start(tmp_path, fake, base, url, 2)
        try:
            async with aiohttp.ClientSession() as session:
                ts = fake.next_ts()
                ev = mention(events, ts, "qtok-1-1 how do I roll back?")
                assert await replicas[0].deliver(session, events.event(ev, event_id="Ev1")) == 200
                await fake.wait_for(lambda: fake.reaction_calls(CHANNEL, ts), timeout=30)
                first = fake.reaction_calls(CHANNEL, ts)[0]
                assert first[0] == "add"
                assert await replicas[1].deliver(session, events.event(ev, event_id="Ev1", retry_num=1)) == 200
                await fake.wait_for(lambda: replies_in(fake, ts), timeout=60)
                await asyncio.sleep(0.5)
        finally:
            logs = [await r.stop() for r in replicas]
    assert "duplicate delivery" in logs[1]
    # r0 was in its first model call (1.5 s) when r1 lost the dedup: the "received" reaction
    # stays until r0's next status replaces it (an add of another reaction comes first)
    calls = [c for c in fake.reaction_calls(CHANNEL, ts) if c[2]]
    removed = [i for i, c in enumerate(calls) if c[:2] == ("remove", first[1])]
    assert len(removed) == 1, calls
    assert any(c[0] == "add" and c[1] != first[1] for c in calls[: removed[0]]), calls
    assert tokens(replies_in(fake, ts)) == ["qtok-1-1"]


async def test_one_thread_across_two_replicas_keeps_arrival_order_without_a_stall(tmp_path, fake, pg_database):
    """Three messages of one thread a moment apart, alternating between two replicas, the
    first ones' first reactions slow (so their records are written last): each answered once
    within seconds, the first before the third (same replica: its queue). (Seen: each
    replica's queue order and the database's record order disagreed, so the replicas waited
    for each other until the 40 s turn limit.) Across replicas the order is that of the
    messages the database holds: the second, recorded while the first one's reaction was
    still pending on the other replica, may go first."""
    name, url = pg_database
    add_users(fake)
    events = SlackEvents()
    async with model_server(delay=0.05) as base:
        replicas = await start(tmp_path, fake, base, url, 2)
        logs: list[str] = []
        try:
            async with aiohttp.ClientSession() as session:
                root, ts2, ts3 = fake.next_ts(), fake.next_ts(), fake.next_ts()
                fake.arg_delays[("reactions.add", root)] = 2.0
                fake.arg_delays[("reactions.add", ts2)] = 1.0
                sends = [
                    (replicas[0], mention(events, root, "qtok-1-1 how do I deploy?")),
                    (replicas[1], mention(events, ts2, "qtok-1-2 and how do I roll back?", thread_ts=root)),
                    (replicas[0], mention(events, ts3, "qtok-1-3 and how long does it take?", thread_ts=root)),
                ]
                t0 = asyncio.get_running_loop().time()
                for replica, ev in sends:
                    assert await replica.deliver(session, events.event(ev)) == 200
                    await asyncio.sleep(0.1)
                await fake.wait_for(lambda: len(replies_in(fake, root)) >= 3, timeout=60)
                took = asyncio.get_running_loop().time() - t0
                await asyncio.sleep(1.0)  # nothing more may come
        finally:
            logs = [await r.stop() for r in replicas]
    everything = "\n".join(logs)
    answered = tokens(replies_in(fake, root))
    assert sorted(answered) == ["qtok-1-1", "qtok-1-2", "qtok-1-3"], everything[-3000:]
    assert answered.index("qtok-1-1") < answered.index("qtok-1-3"), answered
    assert took < 20, (took, everything[-3000:])
    assert "still unfinished; going ahead" not in everything


async def test_a_restart_within_the_lease_answers_the_cut_off_queue_before_new_messages(tmp_path, fake, pg_database):
    """One replica killed with a thread's queue (the first message in the model, two waiting)
    and started again at once, while the dead process's leases still run: a message sent right
    after the restart waits for the three (taken over when their leases end); each is
    answered once, in the order sent. (Seen: the new message went first, the first message
    got its answer posted as its own and was never answered.)"""
    name, url = pg_database
    add_users(fake)
    events = SlackEvents()
    storage = storage_section(lease_seconds=8.0, interval=0.5)
    async with model_server(delay=0.4) as base:
        first = Replica(tmp_path, fake, base, url, name="r0", storage=storage)
        logs: list[str] = []
        try:
            async with aiohttp.ClientSession() as session:
                await first.wait_ready(session)
                root = fake.next_ts()
                msgs = [mention(events, root, "qtok-1-1 how do I roll back?")]
                msgs += [
                    mention(events, fake.next_ts(), f"qtok-1-{i} how do I roll back, part {i}?", thread_ts=root)
                    for i in (2, 3)
                ]
                for ev in msgs:
                    assert await first.deliver(session, events.event(ev)) == 200
                await asyncio.sleep(0.6)  # the first one is in the model, the others wait for it
                await first.kill()
                logs.append(first.text())
                second = Replica(tmp_path, fake, base, url, name="r1", storage=storage)
                try:
                    await second.wait_ready(session)
                    new = mention(events, fake.next_ts(), "qtok-1-4 how do I roll back, part 4?", thread_ts=root)
                    assert await second.deliver(session, events.event(new)) == 200
                    await fake.wait_for(lambda: len(replies_in(fake, root)) >= 4, timeout=90)
                    await asyncio.sleep(1.5)  # nothing more may come
                finally:
                    logs.append(await second.stop())
        finally:
            await first.stop()
    everything = "\n".join(logs)
    assert tokens(replies_in(fake, root)) == ["qtok-1-1", "qtok-1-2", "qtok-1-3", "qtok-1-4"], everything[-4000:]
