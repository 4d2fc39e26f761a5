"""Slack triggers through bolt and a fake Web API: one answer per user message, in its thread.

Events are signed HTTP requests dispatched through slack-bolt; everything the bot does
is observed as calls reaching the fake Slack server.
"""

from __future__ import annotations

import json
import re

import pytest

from tests.fakes.chat_model import ScriptedChatModel
from tests.fakes.slack_api import (
    BOT_USER_ID,
    SlackHarness,
    all_text,
    route_note,
    section_texts,
    write_config,
)


def answered_in(slack: SlackHarness, root: str) -> list[dict]:
    return [p for p in slack.answers() if p.get("thread_ts") == root]


async def test_mention_in_channel_answers_in_thread_with_reactions_and_sources(slack):
    req, ts = slack.mention("UASKER", "how do I deploy?")
    resp = await slack.deliver(req)
    assert resp.status == 200  # acknowledged before any work
    await slack.bot.drain(20)

    answers = slack.answers()
    assert len(answers) == 1
    assert answers[0]["thread_ts"] == ts  # a new thread under the question, never top level
    text = all_text(answers[0])
    assert "Here is the answer from the knowledge base" in text
    assert "*Sources*" in text and ".md" in text  # sources as file paths
    assert "knowledge base" in route_note(answers[0])
    # statuses follow the graph, one at a time, ending in done
    adds = slack.reaction_adds(ts)
    assert adds[0] == "eyes" and adds[-1] == "white_check_mark"
    assert "mag" in adds and "pencil2" in adds
    assert adds.index("mag") < adds.index("pencil2")
    assert slack.reactions_now(ts) == ["white_check_mark"]
    # the question reached the model without the mention
    route_calls = [m for t, m in slack.model.calls if t == "route"]
    assert "how do I deploy?" in str(route_calls[0][-1].content)
    assert f"<@{BOT_USER_ID}>" not in str(route_calls[0][-1].content)


async def test_mention_arriving_also_as_message_event_is_answered_once(slack):
    req, ts = slack.mention("UASKER", "where is the on-call rota?")
    dup, _ = slack.message("UASKER", f"<@{BOT_USER_ID}> where is the on-call rota?", ts=ts)
    await slack.deliver(req)
    await slack.deliver(dup)
    await slack.bot.drain(20)
    assert len(answered_in(slack, ts)) == 1
    assert slack.reaction_adds(ts).count("eyes") == 1


async def test_dm_is_answered_without_mention(slack):
    req, ts = slack.message("UASKER", "how do I roll back?", channel="D0DM", channel_type="im")
    await slack.send(req)
    answers = slack.answers("D0DM")
    assert len(answers) == 1 and answers[0]["thread_ts"] == ts
    assert slack.reactions_now(ts, "D0DM") == ["white_check_mark"]


async def test_follow_up_in_thread_without_mention_answers_in_the_same_thread(slack):
    req, root = slack.mention("UASKER", "how do I deploy?")
    await slack.send(req)
    follow, ts2 = slack.message("UASKER", "and how long does it take?", thread_ts=root)
    await slack.send(follow)
    answers = answered_in(slack, root)
    assert len(answers) == 2  # thread_ts is the root, not the follow-up's ts
    assert all(p["thread_ts"] == root for p in slack.fake.posts())
    assert slack.reactions_now(ts2) == ["white_check_mark"]
    # one LangGraph thread keyed by the root ts holds both turns
    key = f"slack:T0TEAM:{slack.channel}:{root}"
    values = await slack.runtime.service.thread_values(key)
    humans = [m.content for m in values["messages"] if m.type == "human"]
    assert humans == ["how do I deploy?", "and how long does it take?"]


async def test_thread_reply_in_a_thread_without_the_bot_is_ignored(slack):
    root = slack.fake.next_ts()
    chatter, _ = slack.message("UASKER", "lunch?", ts=root)
    reply, _ = slack.message("UOTHER", "sure, at noon", thread_ts=root)
    await slack.send(chatter)
    await slack.send(reply)
    assert slack.fake.calls_to("chat.postMessage", "reactions.add") == []


async def test_channel_message_without_mention_is_ignored(slack):
    req, _ = slack.message("UASKER", "how do I deploy?")
    await slack.send(req)
    assert slack.fake.calls_to("chat.postMessage", "reactions.add") == []


@pytest.mark.parametrize(
    "extra",
    [
        {"subtype": "message_changed", "message": {"text": "<@UBOT> edited question", "ts": "1.1", "user": "UASKER"}},
        {"subtype": "message_deleted", "deleted_ts": "1.1"},
        {"subtype": "bot_message", "bot_id": "BOTHER"},
        {"bot_id": "BOTHER", "bot_profile": {"id": "BOTHER", "name": "other"}},
        {"subtype": "channel_join"},
        {"edited": {"user": "UASKER", "ts": "2.2"}},
        {"hidden": True},
    ],
)
async def test_edits_deletions_bots_and_other_subtypes_are_ignored(slack, extra):
    req, _ = slack.message("UASKER", f"<@{BOT_USER_ID}> how do I deploy?", channel="D0DM", channel_type="im", **extra)
    await slack.send(req)
    assert slack.fake.calls_to("chat.postMessage", "reactions.add", "chat.postEphemeral") == []


async def test_our_own_posts_are_ignored(slack):
    req, _ = slack.message(BOT_USER_ID, "Here is the answer", channel="D0DM", channel_type="im", bot_id="BBOT")
    await slack.send(req)
    req2, _ = slack.message(BOT_USER_ID, "Here is the answer", channel="D0DM", channel_type="im")
    await slack.send(req2)
    assert slack.fake.calls_to("chat.postMessage", "reactions.add") == []


async def test_allow_listed_bot_that_mentions_us_is_answered(tmp_path, fake):
    config = write_config(tmp_path, fake, slack='allowed_bots = ["BFRIEND"]')
    harness = await SlackHarness(tmp_path, fake, config, ScriptedChatModel()).open()
    try:
        req, ts = harness.message("UFRIENDBOT", f"<@{BOT_USER_ID}> how do I deploy?", bot_id="BFRIEND")
        await harness.send(req)
        silent, _ = harness.message("UOTHERBOT", f"<@{BOT_USER_ID}> how do I deploy?", bot_id="BNOTLISTED")
        await harness.send(silent)
        assert [p["thread_ts"] for p in harness.answers()] == [ts]
    finally:
        await harness.close()


async def test_retried_delivery_with_retry_header_is_answered_once(slack):
    req, ts = slack.mention("UASKER", "how do I deploy?")
    body = json.loads(req[0])
    await slack.deliver(req)
    retry = slack.events.event(body["event"], event_id=body["event_id"], retry_num=1)
    resp = await slack.deliver(retry)
    assert resp.status == 200  # acknowledged, so Slack stops retrying
    retry2 = slack.events.event(body["event"], event_id=body["event_id"], retry_num=2)
    await slack.deliver(retry2)
    await slack.bot.drain(20)
    assert len(answered_in(slack, ts)) == 1


async def test_repeated_delivery_after_restart_is_not_answered_again(slack):
    req, ts = slack.mention("UASKER", "how do I deploy?")
    await slack.send(req)
    assert len(answered_in(slack, ts)) == 1
    await slack.restart()  # a new process on the same data files
    again, _ = slack.mention("UASKER", "how do I deploy?", ts=ts)  # same message, new delivery (new event id)
    await slack.send(again)
    assert len(answered_in(slack, ts)) == 1
    # and the new process still answers new questions
    other, ts2 = slack.mention("UASKER", "who is on call?")
    await slack.send(other)
    assert len(answered_in(slack, ts2)) == 1


async def test_bad_signature_is_rejected(slack):
    event = slack.events.message(
        user="UASKER", channel=slack.channel, ts=slack.fake.next_ts(), text=f"<@{BOT_USER_ID}> hi", kind="app_mention"
    )
    resp = await slack.deliver(slack.events.event(event, bad_signature=True))
    assert resp.status == 401
    await slack.bot.drain(5)
    assert slack.fake.calls_to("chat.postMessage") == []


async def test_bare_mention_gets_one_short_reply_and_no_llm_call(slack):
    req, ts = slack.mention("UASKER", "")
    await slack.send(req)
    posts = slack.fake.posts()
    assert len(posts) == 1 and posts[0]["thread_ts"] == ts
    assert "question" in posts[0]["text"].lower()
    assert slack.model.calls == []


async def test_reply_after_bare_mention_needs_no_mention(slack):
    req, root = slack.mention("UASKER", "")
    await slack.send(req)
    follow, _ = slack.message("UASKER", "how do I deploy?", thread_ts=root)
    await slack.send(follow)
    assert len(answered_in(slack, root)) == 1


async def test_incoming_escapes_are_undone_and_links_kept(slack):
    req, _ = slack.mention("UASKER", "why does a &lt; b &amp;&amp; c &gt; d fail? see <https://x.test/p|the page>")
    await slack.send(req)
    question = str([m for t, m in slack.model.calls if t == "route"][0][-1].content)
    assert "a < b && c > d" in question
    assert "the page (https://x.test/p)" in question


async def test_answer_markdown_becomes_mrkdwn(slack):
    slack.model.script["generate"] = (
        "## Steps\n**Run** the [deploy job](https://ci.test/job?a=1&b=2) and check `x < y`:\n"
        "- first\n- second\n```bash\nmake deploy && echo <done>\n```"
    )
    req, _ = slack.mention("UASKER", "how do I deploy?")
    await slack.send(req)
    text = "\n".join(section_texts(slack.answers()[0]))
    assert "*Steps*" in text and "*Run*" in text and "**" not in text
    assert "<https://ci.test/job?a=1&amp;b=2|deploy job>" in text
    assert "`x &lt; y`" in text
    assert "• first\n• second" in text
    assert "```\nmake deploy &amp;&amp; echo &lt;done&gt;\n```" in text


async def test_an_indented_code_block_in_an_answer_is_posted_as_code(slack):
    """A model that writes CommonMark's indented code (which Slack does not render) gets
    its block posted as a fence, lines and inner indentation kept, nothing in it formatted
    or taken for a citation."""
    slack.model.script["generate"] = (
        "Set the ids [1]:\n\n    [discord]\n    expert_role_ids = [112233]  # *not bold*\n        nested = 1\n\nDone."
    )
    req, _ = slack.mention("UASKER", "how do I deploy?")
    await slack.send(req)
    text = "\n".join(section_texts(slack.answers()[0]))
    assert "```\n[discord]\nexpert_role_ids = [112233]  # *not bold*\n    nested = 1\n```" in text, text


def web_only_grader(messages):
    """grade_documents: knowledge base hits are irrelevant, web results are relevant."""
    last = str(messages[-1].content)
    ids = [int(i) for i in re.findall(r"^\[(\d+)\]", last, re.M)]
    relevant = "example.com" in last
    return json.dumps(
        {
            "documents": [{"id": i, "relevant": relevant, "facts": "v9" if relevant else ""} for i in ids],
            "feedback": "" if relevant else "not in the docs",
        }
    )


async def test_web_search_status_and_url_sources(tmp_path, fake, tavily):
    config = write_config(tmp_path, fake, web=f'api_base_url = "{tavily.base_url}"')
    model = ScriptedChatModel(
        script={"grade_documents": web_only_grader, "generate": "Version 9 was released today [1]."}
    )
    harness = await SlackHarness(tmp_path, fake, config, model, tavily_api_key="tvly-test").open()
    try:
        req, ts = harness.mention("UASKER", "what was released today?")
        await harness.send(req)
        adds = harness.reaction_adds(ts)
        assert adds[0] == "eyes" and adds[-1] == "white_check_mark"
        assert adds.index("mag") < adds.index("globe_with_meridians") < adds.index("pencil2")
        assert harness.reactions_now(ts) == ["white_check_mark"]
        [answer] = harness.answers()
        text = all_text(answer)
        assert "<https://example.com/news|Release notes>" in text  # a URL source is a link
        assert "web search" in route_note(answer)
    finally:
        await harness.close()


async def test_file_only_dm_gets_the_short_reply(slack):
    req, ts = slack.message(
        "UASKER", "", channel="D0DM", channel_type="im", subtype="file_share", files=[{"id": "F1", "name": "log.txt"}]
    )
    await slack.send(req)
    posts = slack.fake.posts("D0DM")
    assert len(posts) == 1 and posts[0]["thread_ts"] == ts and slack.model.calls == []


async def test_thread_reply_also_sent_to_channel_is_answered_in_the_thread(slack):
    req, root = slack.mention("UASKER", "how do I deploy?")
    await slack.send(req)
    follow, ts2 = slack.message("UASKER", "and roll back?", thread_ts=root, subtype="thread_broadcast")
    await slack.send(follow)
    assert len(answered_in(slack, root)) == 2
    assert slack.reactions_now(ts2) == ["white_check_mark"]


async def test_private_channel_mention_and_group_dm_without_mention(slack):
    req, ts = slack.mention("UASKER", "how do I deploy?", channel="G0PRIVATE")
    await slack.send(req)
    assert [p["thread_ts"] for p in slack.answers("G0PRIVATE")] == [ts]
    chatter, _ = slack.message("UASKER", "how do I deploy?", channel="G0MPIM", channel_type="mpim")
    await slack.send(chatter)
    assert slack.fake.posts("G0MPIM") == []


@pytest.mark.parametrize("slow", [None, "first reaction", "author lookup"])
async def test_two_follow_ups_a_moment_apart_are_answered_in_the_order_sent(slack, slow):
    """Two follow-ups a moment apart, between them a bare mention (a short reply, no run);
    with the first one's calls before its run slower (Slack's latency varies per call) it
    still cannot be overtaken: the first is answered first, and the thread's history holds
    them in the order sent."""
    req, root = slack.mention("UASKER", "how do I deploy?")
    await slack.send(req)
    first, ts1 = slack.message("UOTHER", "how long does it take?", thread_ts=root)
    second, ts2 = slack.message("UASKER", "and how do I roll back?", thread_ts=root)
    if slow == "first reaction":
        slack.fake.arg_delays[("reactions.add", ts1)] = 0.6
    elif slow == "author lookup":  # the first author's name is not known yet; the second's is
        slack.fake.arg_delays[("users.info", "UOTHER")] = 0.6
    bare, _ = slack.mention("UASKER", "", thread_ts=root)
    for request in (first, bare, second):
        await slack.deliver(request)
    await slack.bot.drain(20)
    assert len(answered_in(slack, root)) == 3
    done_at = slack.fake.added_at()
    assert done_at[ts1] < done_at[ts2]
    values = await slack.runtime.service.thread_values(f"slack:T0TEAM:{slack.channel}:{root}")
    humans = [m.content for m in values["messages"] if m.type == "human"]
    assert humans == ["how do I deploy?", "how long does it take?", "and how do I roll back?"]


async def test_a_follow_up_without_a_mention_sent_before_the_question_is_recorded_is_answered(slack):
    """The question's first reaction is slow, so its follow-up (no mention: the bot takes part
    in the thread because of that question) arrives before the question is recorded: it is
    still answered, after the question. (It was dropped as "a thread without the bot".)"""
    req, root = slack.mention("UASKER", "how do I deploy?")
    slack.fake.arg_delays[("reactions.add", root)] = 0.5
    follow, ts2 = slack.message("UASKER", "and how do I roll back?", thread_ts=root)
    await slack.deliver(req)
    await slack.deliver(follow)
    await slack.bot.drain(20)
    assert len(answered_in(slack, root)) == 2
    assert slack.reactions_now(ts2) == ["white_check_mark"]


async def test_questions_in_different_channels_are_answered_in_their_own_threads(slack):
    reqs = [slack.mention("UASKER", "how do I deploy?", channel=c) for c in ("C1", "C2", "C3")]
    for req, _ in reqs:
        await slack.deliver(req)
    await slack.bot.drain(20)
    for channel, (_, ts) in zip(("C1", "C2", "C3"), reqs, strict=False):
        assert [p["thread_ts"] for p in slack.answers(channel)] == [ts]
