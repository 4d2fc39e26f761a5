"""Status reactions are paced: a step of a run (searching, web, writing) that a
newer status replaces within ``[<platform>.reactions] change_interval_seconds`` is never
sent; the first reaction and the result land at once; a step that lasts longer is shown.

Observed at the network boundary: the reactions.add / reactions.remove calls reaching the
fake Slack Web API, the reaction REST calls reaching the fake Discord server.
"""

from __future__ import annotations

import time

from tests.fakes.chat_model import ScriptedChatModel
from tests.fakes.discord_gateway import DiscordHarness, FakeDiscord
from tests.fakes.slack_api import FakeSlackAPI, SlackHarness, write_config

EYES, MAG, PENCIL, CHECK = "👀", "🔍", "✏️", "✅"


def slow_model(seconds: float) -> ScriptedChatModel:
    """Every model call takes ``seconds`` (the scripted model runs in a worker thread)."""

    def slow(task: str):
        def reply(messages):
            time.sleep(seconds)
            return ScriptedChatModel.default_reply(task, messages)

        return reply

    return ScriptedChatModel(script={t: slow(t) for t in ("route", "grade_documents", "generate", "grade_answer")})


def reaction_ops(fake: FakeSlackAPI, channel: str, ts: str) -> list[tuple[str, str]]:
    return [(op, name) for op, name, _ in fake.reaction_calls(channel, ts)]


async def test_a_quick_run_shows_received_then_done_and_sends_no_step(tmp_path, fake: FakeSlackAPI):
    """The default interval (1 s): a run that ends sooner costs 3 reaction calls, not 7."""
    from bot.config import Reactions

    interval = Reactions().change_interval_seconds  # the product's default
    assert interval == 1.0
    config = write_config(tmp_path, fake, change_interval_seconds=interval)
    harness = await SlackHarness(tmp_path, fake, config, ScriptedChatModel()).open()
    try:
        request, ts = harness.mention("UASKER", "how do I deploy?")
        await harness.send(request)
        assert reaction_ops(fake, harness.channel, ts) == [
            ("add", "eyes"),
            ("add", "white_check_mark"),
            ("remove", "eyes"),
        ]
        assert harness.reactions_now(ts) == ["white_check_mark"]
        assert len(harness.answers()) == 1
    finally:
        await harness.close()


async def test_steps_longer_than_the_interval_are_each_shown_in_order(tmp_path, fake: FakeSlackAPI):
    """Each stage holds a model call of 0.5 s, the interval is 0.2 s: every step is shown,
    in the graph's order, one reaction at a time, ending in done."""
    config = write_config(tmp_path, fake, change_interval_seconds=0.2)
    harness = await SlackHarness(tmp_path, fake, config, slow_model(0.5)).open()
    try:
        request, ts = harness.mention("UASKER", "how do I deploy?")
        await harness.send(request, timeout=30)
        assert harness.reaction_adds(ts) == ["eyes", "mag", "pencil2", "white_check_mark"]
        assert harness.reactions_now(ts) == ["white_check_mark"]
        removes = [n for op, n in reaction_ops(fake, harness.channel, ts) if op == "remove"]
        assert removes == ["eyes", "mag", "pencil2"]
    finally:
        await harness.close()


async def test_a_step_is_shown_no_sooner_than_the_interval_after_the_last_change(tmp_path, fake: FakeSlackAPI):
    """Interval 1.5 s, model calls of 0.5 s: searching starts ~0.5 s after received but is
    shown only at ~1.5 s (the first step may be replaced by writing before its turn)."""
    config = write_config(tmp_path, fake, change_interval_seconds=1.5)
    harness = await SlackHarness(tmp_path, fake, config, slow_model(0.5)).open()
    try:
        request, ts = harness.mention("UASKER", "how do I deploy?")
        await harness.send(request, timeout=30)
        calls = [c for c in fake.calls_to("reactions.add") if c.args.get("timestamp") == ts]
        names = [c.args["name"] for c in calls]
        assert names[0] == "eyes" and names[-1] == "white_check_mark" and len(names) <= 4
        steps = calls[1:-1]
        assert steps, names  # the run lasts ~2 s: at least one step was shown
        for before, step in zip(calls, steps, strict=False):
            assert step.at - before.at >= 1.4, (names, [c.at for c in calls])
        assert harness.reactions_now(ts) == ["white_check_mark"]
    finally:
        await harness.close()


async def test_discord_paces_steps_the_same_way(tmp_path):
    """One behaviour on both platforms: a quick run on Discord adds 👀 then ✅, no step."""
    fake = await FakeDiscord().start()
    harness = await DiscordHarness(tmp_path, fake, ScriptedChatModel(), change_interval_seconds=1.0).open()
    try:
        alice = fake.add_user("alice")
        msg = await fake.send_message(alice, f"<@{fake.bot.id}> How do I deploy?")
        await fake.wait_until(lambda: msg["id"] in fake.threads)
        await harness.idle()
        await fake.wait_until(lambda: CHECK in fake.added_reactions(msg["id"]))
        assert fake.added_reactions(msg["id"]) == [EYES, CHECK]
    finally:
        await harness.close()
        await fake.close()
