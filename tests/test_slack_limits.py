"""Slack's limits and failures: long answers split under the block limits, 429 with
Retry-After, server errors, refused blocks and failing reactions never lose the answer."""

from __future__ import annotations

import time

import pytest

from tests.fakes.chat_model import ScriptedChatModel
from tests.fakes.slack_api import SlackHarness, all_text, route_note, section_texts, write_config


def long_answer() -> tuple[str, list[str]]:
    """About 12,000 characters of Markdown with a long code block; also its content lines."""
    paragraphs = [f"Paragraph {i}: " + " ".join(f"step{i}.{j}" for j in range(40)) for i in range(20)]
    code = [f"    deploy --region r{k} --replicas {k} --flag=value-{k}" for k in range(80)]
    md = "\n\n".join(paragraphs[:8]) + "\n\n```bash\n" + "\n".join(code) + "\n```\n\n" + "\n\n".join(paragraphs[8:])
    return md, paragraphs[:8] + code + paragraphs[8:]


async def test_answer_of_12000_characters_is_split_in_order_with_balanced_fences(long_answers, slack):
    md, lines = long_answer()
    assert 11_500 < len(md) < 13_000
    slack.model.script["generate"] = md
    req, ts = slack.mention("UASKER", "how do I deploy everywhere?")
    await slack.send(req)

    posts = slack.answers()
    assert len(posts) >= 2  # over the per-message budget: several messages
    assert all(p["thread_ts"] == ts for p in posts)
    sections = [s for p in posts for s in section_texts(p)]
    assert all(len(s) <= 3000 for s in sections)
    assert all(len(p["blocks"]) <= 50 and sum(len(s) for s in section_texts(p)) <= 12000 for p in posts)
    for s in sections:
        assert s.count("```") % 2 == 0, s[:80]  # every section renders its code on its own
    # the code block spans sections: cut, closed and reopened (balanced fences above)
    assert len([s for s in sections if "deploy --region" in s]) >= 2
    # nothing lost, order kept: the content lines, in order, ignoring the fences added at cuts
    seen = [line for s in sections for line in s.split("\n") if line.strip() and line.strip() != "```"]
    assert seen[: len(lines)] == lines
    assert seen[len(lines)] == "*Sources*"
    # the posts reached Slack in order and the route note closes the last one only
    call_ts = [
        c.response["ts"] for c in slack.fake.calls_to("chat.postMessage", ok_only=True) if c.args.get("thread_ts") == ts
    ]
    assert call_ts == sorted(call_ts)
    assert "knowledge base" in route_note(posts[-1])
    assert all(b["type"] == "section" for p in posts[:-1] for b in p["blocks"])
    assert slack.reactions_now(ts) == ["white_check_mark"]


async def test_rate_limited_answer_waits_for_retry_after_and_lands(slack):
    slack.fake.fail("chat.postMessage", "ratelimited", retry_after=1, times=2)
    req, ts = slack.mention("UASKER", "how do I deploy?")
    await slack.send(req)
    calls = slack.fake.calls_to("chat.postMessage")
    assert [c.status for c in calls] == [429, 429, 200]
    assert calls[1].at - calls[0].at >= 1.0 and calls[2].at - calls[1].at >= 1.0  # Retry-After honoured
    assert len(slack.answers()) == 1 and slack.answers()[0]["thread_ts"] == ts


async def test_rate_limited_final_reaction_still_lands(slack):
    slack.fake.fail("reactions.add", "ratelimited", retry_after=1, when=lambda a: a["name"] == "white_check_mark")
    req, ts = slack.mention("UASKER", "how do I deploy?")
    await slack.send(req)
    assert slack.reactions_now(ts) == ["white_check_mark"]
    done = [c.status for c in slack.fake.calls_to("reactions.add") if c.args["name"] == "white_check_mark"]
    assert done == [429, 200]


async def test_rate_limited_intermediate_reaction_is_skipped_without_delaying_the_answer(slack):
    slack.fake.fail("reactions.add", "ratelimited", retry_after=30, times=1)  # hits "eyes"
    req, ts = slack.mention("UASKER", "how do I deploy?")
    started = time.monotonic()
    await slack.send(req)
    assert time.monotonic() - started < 10  # nobody waited 30 s
    assert len(slack.answers()) == 1
    assert slack.reactions_now(ts) == ["white_check_mark"]
    assert "eyes" not in slack.reaction_adds(ts)


async def test_server_error_is_retried(slack):
    slack.fake.fail("chat.postMessage", "internal_error", status=500, times=1)
    req, ts = slack.mention("UASKER", "how do I deploy?")
    await slack.send(req)
    assert [c.status for c in slack.fake.calls_to("chat.postMessage")] == [500, 200]
    assert len(slack.answers()) == 1


async def test_refused_blocks_fall_back_to_plain_text(slack):
    slack.fake.fail("chat.postMessage", "invalid_blocks", times=1)
    req, ts = slack.mention("UASKER", "how do I deploy?")
    await slack.send(req)
    posts = slack.fake.posts()
    assert len(posts) == 1 and posts[0]["thread_ts"] == ts and not posts[0].get("blocks")
    assert "Here is the answer from the knowledge base" in posts[0]["text"]
    assert "*Sources*" in posts[0]["text"]


@pytest.mark.parametrize("error", ["missing_scope", "invalid_name", "channel_not_found"])
async def test_failing_reactions_never_stop_the_answer(slack, error):
    slack.fake.fail("reactions.add", error, times=100)
    req, ts = slack.mention("UASKER", "how do I deploy?")
    await slack.send(req)
    assert len(slack.answers()) == 1
    assert slack.fake.calls_to("reactions.remove") == []  # nothing was added, nothing to remove


async def test_reaction_already_there_or_already_gone_is_harmless(slack):
    ts = slack.fake.next_ts()
    slack.fake.reactions[(slack.channel, ts)] = ["eyes"]  # e.g. left by an earlier process
    slack.fake.fail("reactions.remove", "no_reaction", times=100)
    req, _ = slack.mention("UASKER", "how do I deploy?", ts=ts)
    await slack.send(req)
    assert len(slack.answers()) == 1
    adds = [(n, ok) for op, n, ok in slack.fake.reaction_calls(slack.channel, ts) if op == "add"]
    assert adds[0] == ("eyes", False)  # already_reacted, taken as shown
    assert adds[-1] == ("white_check_mark", True)
    assert "white_check_mark" in slack.reactions_now(ts)


async def test_help_request_with_rate_limit_still_posts(tmp_path, fake):
    model = ScriptedChatModel(script={"grade_answer": '{"grounded": false, "useful": false, "feedback": "x"}'})
    harness = await SlackHarness(tmp_path, fake, write_config(tmp_path, fake), model).open()
    try:
        req, ts = harness.mention("UASKER", "what is the freeze?")
        fake.fail("chat.postMessage", "ratelimited", retry_after=0, when=lambda a: "help needed" in a["text"])
        await harness.send(req)
        helps = harness.help_requests()
        assert [c.status for c in fake.calls_to("chat.postMessage")] == [429, 200]
        assert len(helps) == 1 and helps[0]["thread_ts"] == ts
        assert "<@UEXPERT>" in all_text(helps[0])
        assert harness.reactions_now(ts) == ["raising_hand"]
    finally:
        await harness.close()
