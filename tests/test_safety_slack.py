"""Safe in a shared Slack workspace, through signed events into bolt and the fake Web API.

* model text never notifies anyone: no ``<!…>``, ``<@…>``, ``<#…>`` from answer text, whatever
  the Markdown; our own mentions (experts) are live and built after escaping;
* no link previews; replies addressed to other people are left alone (reply_policy);
* people from other organisations get one refusal; admin replies fit response_url's 5 uses;
* done means posted; a refused reaction never leaves the previous stage's reaction.
"""

from __future__ import annotations

import json
import re

import pytest

from bot.platforms.slack.blocks import HelpRef, answer_messages, help_request_message
from bot.protocol import Answer, HelpRequest, Source
from tests.fakes.chat_model import ScriptedChatModel
from tests.fakes.slack_api import BOT_USER_ID, TEAM_ID, SlackHarness, all_text, write_config

# Every Slack special token a link target or raw markup could carry.
TOKENS = [
    "!channel",
    "!here",
    "!everyone",
    "@U0VICTIM",
    "@W0VICTIM",
    "#C0SECRET",
    "!subteam^S0TEAM",
    "!subteam^S0TEAM|@team",
    "@U0VICTIM|boss",
    "!date^1392734382^{date}|x",
]
# Every Markdown construct that could turn a target into markup; {t} is the token.
CONSTRUCTS = [
    "[notes]({t})",
    "[notes](<{t}>)",
    "![img]({t})",
    '[notes]({t} "title")',
    "**[bold]({t})**",
    "- [item]({t})",
    "> [quote]({t})",
    "## [heading]({t})",
    "1. [first]({t})",
    "[{t}]({t})",
    "<{t}>",
    "<{t}|label>",
    "`<{t}>`",
    "``<{t}>``",
    "```\n<{t}>\n```",
    "&lt;{t}&gt;",
    "&lt;{t}|x&gt;",
    "<https://x.test|<{t}>>",
    "[label](https://x.test/<{t}>)",
    "[<{t}>](https://x.test)",
    "<mailto:{t}>",
    "text <{t}> text",
    "~~<{t}>~~",
    "_<{t}>_",
]
BROADCAST_WORDS = ["@channel", "@here", "@everyone", "@Channel", "hey @here!", "[@here](https://x.test)"]
LIVE = re.compile(r"<[!@#][^>]*>")
BROADCAST = re.compile(r"(?<![\w@])@(channel|here|everyone)\b", re.I)


def hostile_markdown() -> str:
    lines = [c.format(t=t) for t in TOKENS for c in CONSTRUCTS]
    return "\n\n".join(lines + BROADCAST_WORDS)


def live_markup(text: str, allowed: tuple[str, ...] = ()) -> list[str]:
    """Mentions, channel links and special commands in mrkdwn, except ``allowed`` ones."""
    return [m for m in LIVE.findall(text) if m not in allowed]


def every_text(post: dict) -> str:
    return all_text(post) + "\n" + json.dumps(post.get("blocks") or [])


@pytest.mark.parametrize("token", TOKENS)
@pytest.mark.parametrize("construct", CONSTRUCTS)
def test_no_markdown_construct_turns_a_token_into_markup(construct, token):
    answer = Answer(
        text=construct.format(t=token),
        sources=[Source(f"<{token}> {token}", f"https://x.test/{token}"), Source(f"<{token}>", token)],
    )
    for msg in answer_messages(answer, max_section=3000, max_message=12000):
        assert live_markup(every_text(msg)) == [], every_text(msg)


@pytest.mark.parametrize("word", BROADCAST_WORDS)
def test_broadcast_words_never_read_as_broadcasts(word):
    text = every_text(answer_messages(Answer(text=word), max_section=3000, max_message=12000)[0])
    assert BROADCAST.findall(text) == [] and "\u2060" in text


async def test_an_answer_full_of_special_tokens_notifies_nobody(long_answers, slack):
    slack.model.script["generate"] = hostile_markdown()
    req, ts = slack.mention("UASKER", "how do I deploy?")
    await slack.send(req)
    posts = slack.fake.posts()
    assert len(posts) >= 1 and all(p.get("thread_ts") == ts for p in posts)
    for post in posts:
        assert live_markup(every_text(post)) == []
        assert BROADCAST.findall(every_text(post)) == []
        # Slack never expands names itself, and never unfurls a URL a model wrote
        assert post.get("unfurl_links") in (False, "false", "0", 0) and post.get("unfurl_media") in (
            False,
            "false",
            "0",
            0,
        )
        assert "link_names" not in post and post.get("parse") in (None, "none")
    assert "notes (!channel)" in "\n".join(all_text(p) for p in posts)  # shown as text, nothing lost


async def test_every_post_of_a_help_flow_keeps_model_and_user_text_inert(tmp_path, fake):
    stuck = json.dumps({"documents": [], "feedback": "see <!channel> and [x](@U0VICTIM)"})
    model = ScriptedChatModel(script={"grade_documents": stuck})
    harness = await SlackHarness(tmp_path, fake, write_config(tmp_path, fake), model).open()
    try:
        req, ts = harness.mention("UASKER", "what about <!here> and [y](!subteam^S0TEAM) and &lt;!channel&gt;?")
        await harness.send(req)
        helps = harness.help_requests()
        assert len(helps) == 1
        text = every_text(helps[0])
        # the experts we mean are live mentions; nothing else is
        assert "<@UEXPERT>" in text and "<!subteam^SEXPERTS>" in text
        assert live_markup(text, ("<@UEXPERT>", "<!subteam^SEXPERTS>")) == []
        # our own hint is escaped too: `answer: <your answer>` is not a Slack link
        assert "`answer: &lt;your answer&gt;`" in text and "<your answer>" not in text
        for post in harness.fake.posts():
            assert post.get("unfurl_links") in (False, "false", "0", 0)
    finally:
        await harness.close()


def test_help_request_hint_and_fields_are_escaped():
    request = HelpRequest(
        thread_key="slack:T:C:1",
        question="<!channel> why?",
        reason="<@U0VICTIM> said so",
        attempts=["searched <#C0SECRET>", "[x](!here)"],
    )
    msg = help_request_message(request, experts=["UEXPERT", "SGROUP", "<!channel>"], ref=HelpRef("k", "C", "1", "1"))
    text = every_text(msg)
    assert live_markup(text, ("<@UEXPERT>", "<!subteam^SGROUP>")) == []
    assert "<@UEXPERT>" in text and "<!subteam^SGROUP>" in text


async def test_refusal_to_a_non_expert_shows_the_experts_as_mentions(tmp_path, fake):
    model = ScriptedChatModel(script={"grade_documents": json.dumps({"documents": [], "feedback": "none"})})
    harness = await SlackHarness(tmp_path, fake, write_config(tmp_path, fake), model).open()
    try:
        req, ts = harness.mention("UASKER", "when is the freeze?")
        await harness.send(req)
        help_msg = harness.help_requests()[0]
        help_ts = [c.response["ts"] for c in fake.calls_to("chat.postMessage", ok_only=True) if c.args is help_msg][0]
        message = fake.messages[(harness.channel, help_ts)]
        button = next(
            e
            for b in message["blocks"]
            if b["type"] == "actions"
            for e in b["elements"]
            if e["action_id"] == "threadwise_dismiss"
        )
        await harness.send(
            harness.events.block_action(
                user="UOTHER",
                action_id="threadwise_dismiss",
                value=button["value"],
                channel=harness.channel,
                message=message,
            )
        )
        refusals = [
            c.args["text"] for c in fake.calls_to("chat.postEphemeral", ok_only=True) if c.args["user"] == "UOTHER"
        ]
        assert len(refusals) == 1
        assert "<@UEXPERT>" in refusals[0] and "<!subteam^SEXPERTS>" in refusals[0]
        assert "&lt;@" not in refusals[0] and "&lt;!" not in refusals[0]
    finally:
        await harness.close()


# ---------------------------------------------------------------------------- reply policy
async def answered_thread(slack: SlackHarness) -> str:
    req, ts = slack.mention("UASKER", "how do I deploy?")
    await slack.send(req)
    assert len(slack.answers()) == 1
    return ts


@pytest.mark.parametrize(
    "text",
    [
        "<@UOTHER> can you check this one?",
        "<@UOTHER|olaf> thoughts?",
        "<!subteam^SEXPERTS> anyone?",
        "<!here> who knows?",
        "thanks <@UEXPERT>, that helped",
    ],
)
async def test_reply_addressed_to_someone_else_starts_no_run(slack, text):
    ts = await answered_thread(slack)
    calls = len(slack.model.calls)
    reply, reply_ts = slack.message("UASKER", text, thread_ts=ts)
    await slack.send(reply)
    assert len(slack.model.calls) == calls
    assert len(slack.answers()) == 1 and slack.reaction_adds(reply_ts) == []


@pytest.mark.parametrize("text", ["and how do I roll back?", f"<@UOTHER> <@{BOT_USER_ID}> and how do I roll back?"])
async def test_follow_up_without_mention_or_with_ours_is_answered(slack, text):
    ts = await answered_thread(slack)
    reply, _ = slack.message("UASKER", text, thread_ts=ts)
    await slack.send(reply)
    assert len(slack.answers()) == 2


@pytest.mark.parametrize(
    "policy, text, answered",
    [
        ("all", "<@UOTHER> can you check this one?", True),
        ("mentions_only", "and how do I roll back?", False),
        ("mentions_only", f"<@{BOT_USER_ID}> and how do I roll back?", True),
    ],
)
async def test_reply_policy_is_configurable(tmp_path, fake, policy, text, answered):
    harness = await SlackHarness(
        tmp_path, fake, write_config(tmp_path, fake, slack=f'reply_policy = "{policy}"'), ScriptedChatModel()
    ).open()
    try:
        ts = await answered_thread(harness)
        reply, _ = (
            harness.mention("UASKER", text.split("> ", 1)[1], thread_ts=ts)
            if BOT_USER_ID in text
            else harness.message("UASKER", text, thread_ts=ts)
        )
        await harness.send(reply)
        assert len(harness.answers()) == (2 if answered else 1)
    finally:
        await harness.close()


def test_reply_policy_is_validated(tmp_path, fake):
    from bot.config import ConfigError, load_settings

    assert load_settings(write_config(tmp_path, fake, slack='reply_policy = "all"')).slack.reply_policy == "all"
    assert load_settings(write_config(tmp_path, fake)).slack.reply_policy == "unless_addressed_to_others"
    with pytest.raises(ConfigError, match="reply_policy"):
        load_settings(write_config(tmp_path, fake, slack='reply_policy = "sometimes"'))


# ---------------------------------------------------------------------------- outsiders
def outsider_mention(slack: SlackHarness, **team_fields) -> tuple[tuple[str, dict], tuple[str, dict], str]:
    """An app_mention and its twin message event from a user of another organisation."""
    ts = slack.fake.next_ts()
    fields = {"user_team": "T0OTHERORG", "source_team": "T0OTHERORG", "team": "T0OTHERORG", **team_fields}
    event = slack.events.message(
        user="UEXTERNAL",
        channel=slack.channel,
        ts=ts,
        kind="app_mention",
        text=f"<@{BOT_USER_ID}> what is in the deploy runbook?",
        **fields,
    )
    twin = slack.events.message(
        user="UEXTERNAL",
        channel=slack.channel,
        ts=ts,
        text=f"<@{BOT_USER_ID}> what is in the deploy runbook?",
        **fields,
    )
    body = slack.events.event_body(event)
    body["is_ext_shared_channel"] = True
    body2 = slack.events.event_body(twin)
    body2["is_ext_shared_channel"] = True
    return (
        slack.events.sign(json.dumps(body), "application/json"),
        slack.events.sign(json.dumps(body2), "application/json"),
        ts,
    )


@pytest.mark.parametrize("fields", [{}, {"team": TEAM_ID}, {"user_team": "T0OTHERORG", "team": None}])
async def test_outsider_in_a_shared_channel_gets_one_refusal_and_no_answer(slack, fields):
    mention, twin, ts = outsider_mention(slack, **fields)
    await slack.send(mention)
    await slack.send(twin)
    assert slack.model.calls == []
    assert slack.fake.posts() == []
    refusals = [c.args for c in slack.fake.calls_to("chat.postEphemeral", ok_only=True)]
    assert [(r["user"], r.get("thread_ts")) for r in refusals] == [("UEXTERNAL", ts)]
    assert "only answer members" in refusals[0]["text"]


async def test_outsider_follow_up_in_our_thread_is_refused_too(slack):
    ts = await answered_thread(slack)
    event = slack.events.message(
        user="UEXTERNAL",
        channel=slack.channel,
        ts=slack.fake.next_ts(),
        thread_ts=ts,
        text="and the rollback?",
        user_team="T0OTHERORG",
        team="T0OTHERORG",
    )
    calls = len(slack.model.calls)
    await slack.send(slack.events.event(event))
    assert len(slack.model.calls) == calls and len(slack.answers()) == 1
    assert len(slack.fake.calls_to("chat.postEphemeral", ok_only=True)) == 1


async def test_allowed_team_is_answered(tmp_path, fake):
    harness = await SlackHarness(
        tmp_path, fake, write_config(tmp_path, fake, slack='allowed_teams = ["T0OTHERORG"]'), ScriptedChatModel()
    ).open()
    try:
        mention, _, ts = outsider_mention(harness)
        await harness.send(mention)
        assert len(harness.answers()) == 1 and harness.answers()[0]["thread_ts"] == ts
    finally:
        await harness.close()


# ---------------------------------------------------------------------------- admin replies
def command(slack: SlackHarness, user: str, text: str, channel: str | None = None, rid: str = ""):
    return slack.events.command(
        user=user, text=text, channel=channel or slack.channel, response_url=slack.fake.response_url(rid)
    )


async def test_reindex_without_channel_access_ends_with_the_result_within_five_uses(slack):
    kb = slack.tmp_path / "kb"
    for i in range(40):
        (kb / f"extra{i}.md").write_text(f"# Extra {i}\n\n" + f"Notes about subsystem {i}. " * 50)
    slack.runtime.admin.progress_interval = 0.0  # every step reported
    slack.fake.fail("chat.postMessage", "not_in_channel", times=1000)
    await slack.send(command(slack, "UADMIN", "reindex", channel="C0ELSEWHERE", rid="r1"), timeout=60)
    used = [r for r in slack.fake.responses if r["rid"] == "r1"]
    assert 2 <= len(used) <= 5
    assert used[-1]["text"].startswith("Reindex done: 42 documents")
    assert slack.fake.refused_responses == []


@pytest.mark.parametrize("text", ["help", ""])
async def test_slash_help_is_private(slack, text):
    await slack.send(command(slack, "UASKER", text))
    assert slack.fake.posts() == []
    private = [c.args for c in slack.fake.calls_to("chat.postEphemeral", ok_only=True)]
    assert len(private) == 1 and private[0]["user"] == "UASKER" and "reindex" in private[0]["text"]
    assert live_markup(private[0]["text"]) == []  # `answer: <your answer>` is escaped


async def test_mention_help_is_private(slack):
    req, ts = slack.mention("UASKER", "help")
    await slack.send(req)
    assert slack.fake.posts() == []
    private = [c.args for c in slack.fake.calls_to("chat.postEphemeral", ok_only=True)]
    assert [(p["user"], p.get("thread_ts")) for p in private] == [("UASKER", ts)]


# ---------------------------------------------------------------------------- done means posted
@pytest.mark.parametrize("error", ["not_in_channel", "channel_not_found", "ratelimited"])
async def test_answer_that_cannot_be_posted_never_ends_as_done(slack, error):
    slack.fake.fail("chat.postMessage", error, times=1000, retry_after=0 if error == "ratelimited" else None)
    req, ts = slack.mention("UASKER", "how do I deploy?")
    await slack.send(req, timeout=40)
    assert slack.fake.posts() == []
    assert slack.reactions_now(ts) == ["disappointed"]
    assert "white_check_mark" not in slack.reaction_adds(ts)


async def test_help_request_that_cannot_be_posted_never_ends_as_waiting(tmp_path, fake):
    model = ScriptedChatModel(script={"grade_documents": json.dumps({"documents": [], "feedback": "none"})})
    harness = await SlackHarness(tmp_path, fake, write_config(tmp_path, fake), model).open()
    try:
        fake.fail("chat.postMessage", "not_in_channel", times=1000)
        req, ts = harness.mention("UASKER", "when is the freeze?")
        await harness.send(req)
        assert harness.reactions_now(ts) == ["disappointed"]
    finally:
        await harness.close()


@pytest.mark.parametrize("error, status", [("too_many_reactions", None), ("internal_error", 500)])
async def test_a_refused_final_reaction_leaves_no_earlier_stage(slack, error, status):
    slack.fake.fail(
        "reactions.add", error, status=status, times=1000, when=lambda a: a.get("name") == "white_check_mark"
    )
    req, ts = slack.mention("UASKER", "how do I deploy?")
    await slack.send(req)
    assert len(slack.answers()) == 1
    assert "pencil2" in slack.reaction_adds(ts)
    assert slack.reactions_now(ts) == []  # not "pencil2": the working stage is gone
