"""Votes, 👎 reasons and "Ask the experts" are handled once (bot.interactions.votes); here as Slack
shows them, through the fake Slack Web API and signed requests (Discord: test_chat_feedback_discord.py,
same rules). Slack slash commands and interactions apply the outsider rule
(bot.chat.policy.is_outsider) that messages do: a user of another organisation (Slack Connect)
gets the one refusal, nothing runs, nothing is recorded.
"""

from __future__ import annotations

import json

import pytest

from bot.chat import vote_controls
from bot.chat.policy import OUTSIDER_REFUSAL
from bot.chat.threads import parse_thread_key, thread_key
from bot.platforms.slack.blocks import ACTION_VOTE_ESCALATE
from tests.fakes.slack_api import SlackEvents, vote_buttons

OTHER_ORG = "T0OTHERORG"
UNKNOWN_ANSWER = "abcdef0123456789"


# ---------------------------------------------------------------------------- Slack
def ephemeral_texts_to(slack, user: str) -> list[str]:
    return [c.args["text"] for c in slack.fake.calls_to("chat.postEphemeral", ok_only=True) if c.args["user"] == user]


def responses(slack, rid: str) -> list[str]:
    return [r["text"] for r in slack.fake.responses if r["rid"] == rid]


async def slack_answer(slack) -> dict:
    req, _ = slack.mention("UASKER", "how do I deploy?")
    await slack.send(req)
    (answer,) = slack.answers()
    ts = next(c.response["ts"] for c in slack.fake.calls_to("chat.postMessage", ok_only=True) if c.args is answer)
    return slack.fake.messages[(slack.channel, ts)]


@pytest.mark.parametrize("words", ["status", "reindex", "help"])
async def test_slack_slash_command_from_another_organisation_is_refused(slack, words):
    outsider = SlackEvents(team_id=OTHER_ORG)  # signed like every request; the user's team is not ours
    request = outsider.command(
        user="UEXTERNAL", text=words, channel=slack.channel, response_url=slack.fake.response_url("ext")
    )
    await slack.send(request)
    said = ephemeral_texts_to(slack, "UEXTERNAL") + responses(slack, "ext")
    assert said == [OUTSIDER_REFUSAL]
    assert slack.fake.posts() == []


async def test_slack_slash_command_from_an_allowed_team_still_runs(tmp_path, fake):
    from tests.fakes.chat_model import ScriptedChatModel
    from tests.fakes.slack_api import SlackHarness, write_config

    config = write_config(tmp_path, fake, slack=f'allowed_teams = ["{OTHER_ORG}"]')
    harness = await SlackHarness(tmp_path, fake, config, ScriptedChatModel()).open()
    try:
        request = SlackEvents(team_id=OTHER_ORG).command(
            user="UEXTERNAL", text="help", channel=harness.channel, response_url=fake.response_url("ext")
        )
        await harness.send(request)
        said = ephemeral_texts_to(harness, "UEXTERNAL") + responses(harness, "ext")
        assert len(said) == 1 and "reindex" in said[0]
    finally:
        await harness.close()


async def test_slack_vote_and_ask_the_experts_from_another_organisation_are_refused(slack):
    answer = await slack_answer(slack)
    buttons = vote_buttons(answer)
    outsider = SlackEvents(team_id=OTHER_ORG)
    down = buttons["threadwise_vote_down"]
    await slack.send(
        outsider.block_action(
            user="UEXTERNAL", action_id=down["action_id"], value=down["value"], channel=slack.channel, message=answer
        )
    )
    await slack.send(
        outsider.block_action(
            user="UEXTERNAL", action_id=ACTION_VOTE_ESCALATE, value=down["value"], channel=slack.channel, message=answer
        )
    )
    assert ephemeral_texts_to(slack, "UEXTERNAL") == [OUTSIDER_REFUSAL, OUTSIDER_REFUSAL]
    assert await slack.runtime.bookkeeping.feedback_rows() == []
    assert slack.fake.views == [] and slack.help_requests() == []


async def test_slack_ask_the_experts_about_an_unknown_answer_says_so(slack):
    answer = await slack_answer(slack)
    for value in (UNKNOWN_ANSWER, "not an id"):
        await slack.send(
            slack.events.block_action(
                user="UASKER", action_id=ACTION_VOTE_ESCALATE, value=value, channel=slack.channel, message=answer
            )
        )
    assert ephemeral_texts_to(slack, "UASKER") == [vote_controls.NOT_FOUND] * 2
    assert slack.help_requests() == []


# ---------------------------------------------------------------------------- the thread-key scheme
def test_thread_keys_round_trip_and_foreign_shapes_are_refused():
    assert thread_key("slack", "T1", "C1", "1.2") == "slack:T1:C1:1.2"
    assert thread_key("discord", "dm", 42) == "discord:dm:42"
    key = parse_thread_key("slack:T1:C1:1.2")
    assert key is not None and (key.platform, key["team"], key["channel"], key["root"]) == ("slack", "T1", "C1", "1.2")
    assert str(key) == "slack:T1:C1:1.2"
    assert parse_thread_key("discord:7:9")["channel"] == "9"  # type: ignore[index]
    for foreign in ("slack:T1:C1", "discord:1:2:3", "teams:1:2", "slack::C1:1.2", ""):
        assert parse_thread_key(foreign) is None
    with pytest.raises(ValueError):
        thread_key("discord", "1", "2:3")
    json.dumps(str(key))
