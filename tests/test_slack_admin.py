"""Admin commands in Slack: ``/threadwise reindex|status|help`` and the same words after a mention.

Only ``[slack] admins`` may reindex; others get an ephemeral refusal. A reindex edits one
progress message and ends with counts, while questions keep being answered.
"""

from __future__ import annotations

import re

import pytest

from tests.fakes.slack_api import SlackHarness

DONE = re.compile(r"Reindex done: (\d+) documents? into (\d+) chunks? .* in [\d.]+ s")


def command(slack: SlackHarness, user: str, text: str, channel: str | None = None):
    return slack.events.command(
        user=user, text=text, channel=channel or slack.channel, response_url=slack.fake.response_url()
    )


def progress_edits(slack: SlackHarness) -> tuple[dict, list[str]]:
    """The progress message and the texts it went through (post, then chat.update edits)."""
    posts = [c for c in slack.fake.calls_to("chat.postMessage", ok_only=True) if "Reindex" in c.args["text"]]
    assert len(posts) == 1, [c.args["text"] for c in posts]
    ts = posts[0].response["ts"]
    edits = [c.args["text"] for c in slack.fake.calls_to("chat.update", ok_only=True) if c.args["ts"] == ts]
    return posts[0].args, [posts[0].args["text"], *edits]


async def test_slash_reindex_by_admin_updates_one_message_and_ends_with_counts(slack):
    resp = await slack.deliver(command(slack, "UADMIN", "reindex"))
    assert resp.status == 200  # acknowledged at once
    await slack.bot.drain(20)
    post, texts = progress_edits(slack)
    assert post["channel"] == slack.channel and "thread_ts" not in post
    assert len(texts) >= 2
    m = DONE.search(texts[-1])
    assert m and int(m.group(1)) == 2 and int(m.group(2)) >= 2


async def test_slash_reindex_by_non_admin_is_refused_privately(slack):
    await slack.send(command(slack, "UOTHER", "reindex"))
    assert slack.fake.calls_to("chat.postMessage", "chat.update") == []
    refusals = slack.fake.calls_to("chat.postEphemeral", ok_only=True)
    assert len(refusals) == 1 and refusals[0].args["user"] == "UOTHER"
    assert "only admins" in refusals[0].args["text"].lower()
    rows = await slack.runtime.bookkeeping.audit_rows()
    assert rows[-1][:3] == ("UOTHER", "reindex", 0)


async def test_mention_reindex_by_admin_reports_in_the_thread(slack):
    req, ts = slack.mention("UADMIN", "reindex")
    await slack.send(req)
    post, texts = progress_edits(slack)
    assert post["thread_ts"] == ts
    assert DONE.search(texts[-1])
    assert slack.model.calls == []  # an admin word is not a question


async def test_mention_reindex_by_non_admin_is_refused_privately(slack):
    req, ts = slack.mention("UASKER", "reindex")
    await slack.send(req)
    assert slack.fake.calls_to("chat.postMessage", "chat.update") == []
    refusals = slack.fake.calls_to("chat.postEphemeral", ok_only=True)
    assert [(c.args["user"], c.args.get("thread_ts")) for c in refusals] == [("UASKER", ts)]


@pytest.mark.parametrize("text", ["status", "STATUS"])
async def test_slash_status(slack, text):
    await slack.send(command(slack, "UASKER", text))
    posts = slack.fake.posts()
    assert len(posts) == 1 and "Knowledge base: 2 files" in posts[0]["text"]


@pytest.mark.parametrize("text", ["help", ""])
async def test_slash_help_and_bare_command(slack, text):
    await slack.send(command(slack, "UASKER", text))
    assert slack.fake.posts() == []  # help is private
    private = [c.args["text"] for c in slack.fake.calls_to("chat.postEphemeral", ok_only=True)]
    assert len(private) == 1 and "reindex" in private[0] and "`answer: &lt;your answer&gt;`" in private[0]


async def test_slash_command_where_the_bot_is_not_a_member_answers_through_response_url(slack):
    slack.fake.fail("chat.postMessage", "not_in_channel", times=10)
    await slack.send(command(slack, "UADMIN", "reindex", channel="C0ELSEWHERE"))
    texts = [r["text"] for r in slack.fake.responses]
    assert texts and DONE.search(texts[-1])
    assert all(r["response_type"] == "ephemeral" for r in slack.fake.responses)


async def test_questions_are_answered_while_a_reindex_runs(slack):
    kb = slack.tmp_path / "kb"
    for i in range(1500):  # enough new text for the reindex to take about a second
        (kb / f"extra{i}.md").write_text(f"# Extra {i}\n\n" + f"Notes about subsystem {i}. " * 150)
    await slack.deliver(command(slack, "UADMIN", "reindex"))
    req, ts = slack.mention("UASKER", "how do I deploy?")
    await slack.deliver(req)
    await slack.bot.drain(60)
    answer = [c for c in slack.fake.calls_to("chat.postMessage", ok_only=True) if c.args.get("thread_ts") == ts]
    done = [c for c in slack.fake.calls_to("chat.update", ok_only=True) if DONE.search(c.args["text"])]
    assert len(answer) == 1 and len(done) == 1
    assert answer[0].at < done[0].at  # answered before the reindex finished
    assert DONE.search(done[0].args["text"]).group(1) == "1502"


async def test_a_source_is_named_in_chat_as_config_toml_writes_it_or_in_other_case(tmp_path, fake):
    """``reindex NAME`` and ``sources NAME`` keep the name's case: an exact name first (``runbooks``
    beside ``Runbooks`` is told apart), else the name in any case (``RUNBOOKS``, ``KB`` for the
    ``kb`` folder); an unknown name is answered privately with the sources there are."""
    from tests.fakes.chat_model import ScriptedChatModel
    from tests.fakes.slack_api import SlackHarness, write_config

    for folder, text in (("Runbooks", "# Pager\n\nPage the on-call lead."), ("runbooks", "# Old\n\nOld pages.")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "pager.md").write_text(text)
    sources = "".join(
        f'\n[[sources]]\nname = "{name}"\ntype = "files"\npath = "{tmp_path / name}"\n'
        for name in ("Runbooks", "runbooks")
    )
    harness = await SlackHarness(
        tmp_path, fake, write_config(tmp_path, fake, extra=sources), ScriptedChatModel()
    ).open()
    kb = str(tmp_path / "kb")
    try:
        for words, reindexed in [
            ("reindex Runbooks", "Runbooks"),
            ("reindex runbooks", "runbooks"),
            ("Reindex RUNBOOKS", "Runbooks, runbooks"),
            ("reindex KB", kb),
        ]:
            fake.calls.clear()
            await harness.send(command(harness, "UADMIN", words))
            await harness.bot.drain(20)
            _, texts = progress_edits(harness)
            assert texts[0] == f"Reindexing {reindexed}…", (words, texts)
            assert texts[-1].startswith("Reindex done"), (words, texts)
        fake.calls.clear()
        req, _ = harness.mention("UADMIN", "reindex Handbook")
        await harness.send(req)
        private = [c.args["text"] for c in fake.calls_to("chat.postEphemeral", ok_only=True)]
        assert private == [f"There is no source `Handbook`. Sources: `{kb}`, `Runbooks`, `runbooks`"]
        assert fake.calls_to("chat.postMessage", "chat.update") == []
        fake.calls.clear()
        await harness.send(command(harness, "UASKER", "sources RUNBOOKS"))
        [post] = fake.posts()
        assert "• Runbooks (files): 1 document, 1 chunk" in post["text"] and "• runbooks (files)" in post["text"]
        assert kb not in post["text"], post["text"]
    finally:
        await harness.close()
