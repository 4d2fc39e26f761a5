"""Expert answers become knowledge: a help request answered by an expert is saved as a
learned entry; the same question (or a paraphrase) in another thread is answered from it
on the first pass, citing who answered, when, with a link to the thread; admins list and
forget entries (chat and CLI); after ``forget`` the question pauses again."""

from __future__ import annotations

import asyncio
import json
import re
import time

import pytest

from bot.cli import main
from graphs import signals
from tests.fakes.chat_model import ScriptedChatModel
from tests.fakes.slack_api import SlackHarness, all_text, write_config


def learned_only(messages) -> str:
    """grade_documents: only learned entries ("answered by ..." sources) are relevant."""
    blocks = re.split(r"^(?=\[\d+\] )", str(messages[-1].content), flags=re.M)
    docs = []
    for block in blocks:
        m = re.match(r"\[(\d+)\] (.*)", block)
        if m:
            docs.append({"id": int(m.group(1)), "relevant": "answered by" in m.group(2), "facts": ""})
    return json.dumps({"documents": docs, "feedback": "nothing about it in the documents"})


def ephemerals(slack, user: str) -> list[str]:
    return [c.args["text"] for c in slack.fake.calls_to("chat.postEphemeral", ok_only=True) if c.args["user"] == user]


@pytest.fixture
async def slack(tmp_path, fake):
    model = ScriptedChatModel(script={"grade_documents": learned_only})
    harness = await SlackHarness(tmp_path, fake, write_config(tmp_path, fake), model).open()
    yield harness
    await harness.close()


async def ask(slack, text: str, user: str = "UASKER") -> tuple[str, list[dict], list[dict]]:
    """Ask in a new thread; returns (ts, answers in it, help requests in it)."""
    req, ts = slack.mention(user, text)
    await slack.send(req)
    return (
        ts,
        [a for a in slack.answers() if a.get("thread_ts") == ts],
        [h for h in slack.help_requests() if h.get("thread_ts") == ts],
    )


async def test_an_expert_answer_is_learned_cited_and_forgotten_on_slack(slack, tmp_path):
    ts, answers, helps = await ask(slack, "when is the deploy freeze?")
    assert answers == [] and len(helps) == 1
    reply, _ = slack.message("UEXPERT", "answer: The deploy freeze runs from Dec 20 to Jan 3.", thread_ts=ts)
    await slack.send(reply)

    for question in ("when is the deploy freeze?", "when does the deploy freeze start?"):
        calls = len(slack.model.calls)
        ts2, answers, helps = await ask(slack, question)
        assert helps == [] and len(answers) == 1, question
        text = all_text(answers[0])
        assert "answered by Erik on 20" in text  # the citation: who and when
        assert f"fake.slack.com/archives/{slack.channel}/p{ts.replace('.', '')}" in text  # link to the thread
        tasks = [t for t, _ in slack.model.calls[calls:]]
        assert tasks.count("generate") == 1 and "rewrite" not in tasks  # the first pass
        prompt = "\n".join(str(m.content) for _, msgs in slack.model.calls[calls:] for m in msgs)
        assert "Dec 20 to Jan 3" in prompt and "disagree" in prompt  # the entry, and the conflict rule

    # admins list and forget; others may not
    await slack.send(slack.events.command(user="UOTHER", text="learned list", channel=slack.channel))
    assert "only admins" in ephemerals(slack, "UOTHER")[-1]
    await slack.send(slack.events.command(user="UADMIN", text="learned list", channel=slack.channel))
    listing = ephemerals(slack, "UADMIN")[-1]
    assert "1: when is the deploy freeze?" in listing and "Dec 20 to Jan 3" in listing
    await slack.send(slack.events.command(user="UADMIN", text="learned forget 1", channel=slack.channel))
    assert "removed" in ephemerals(slack, "UADMIN")[-1]

    _, answers, helps = await ask(slack, "when is the deploy freeze?")
    assert answers == [] and len(helps) == 1  # it pauses again


async def test_experts_remember_directly_in_a_thread_and_others_cannot(slack):
    ts, _, helps = await ask(slack, "who approves a hotfix?")
    assert len(helps) == 1
    reply, _ = slack.mention("UOTHER", "remember: anyone can", thread_ts=ts)
    await slack.send(reply)
    assert "Only the experts" in ephemerals(slack, "UOTHER")[-1]
    reply, _ = slack.mention("UEXPERT", "remember: The on-call lead approves hotfixes.", thread_ts=ts)
    await slack.send(reply)
    assert "Saved as the answer to “who approves a hotfix?”" in ephemerals(slack, "UEXPERT")[-1]
    _, answers, helps = await ask(slack, "who approves a hotfix?")
    assert helps == [] and "answered by Erik" in all_text(answers[0])


async def test_learning_off_in_a_channel_neither_saves_nor_uses_entries(tmp_path, fake):
    model = ScriptedChatModel(script={"grade_documents": learned_only})
    config = write_config(tmp_path, fake, extra='[[channels]]\nplatform = "slack"\nid = "C0QUIET"\nlearning = false\n')
    slack = await SlackHarness(tmp_path, fake, config, model).open()
    try:
        req, ts = slack.mention("UASKER", "when is the deploy freeze?", channel="C0QUIET")
        await slack.send(req)
        reply, _ = slack.message("UEXPERT", "answer: Dec 20.", thread_ts=ts, channel="C0QUIET")
        await slack.send(reply)
        assert slack.runtime.learned.entries() == []  # not saved from there
        # learned elsewhere, not used there
        _, _, helps = await ask(slack, "when is the deploy freeze?")
        reply, _ = slack.message("UEXPERT", "answer: Dec 20.", thread_ts=helps[0]["thread_ts"])
        await slack.send(reply)
        assert len(slack.runtime.learned.entries()) == 1
        req, ts = slack.mention("UASKER", "when is the deploy freeze?", channel="C0QUIET")
        await slack.send(req)
        assert len([h for h in slack.help_requests("C0QUIET") if h["thread_ts"] == ts]) == 1
    finally:
        await slack.close()


async def test_cli_lists_and_forgets_learned_entries(slack, tmp_path, capsys):
    ts, _, _ = await ask(slack, "when is the deploy freeze?")
    reply, _ = slack.message("UEXPERT", "answer: Dec 20 to Jan 3.", thread_ts=ts)
    await slack.send(reply)
    config = str(slack.config_path)
    capsys.readouterr()
    assert await asyncio.to_thread(main, ["learned", "list", "--config", config]) == 0
    out = capsys.readouterr().out
    assert "1: when is the deploy freeze?" in out and "answered by Erik on" in out and "fake.slack.com" in out
    assert await asyncio.to_thread(main, ["learned", "forget", "7", "--config", config]) == 1
    assert await asyncio.to_thread(main, ["learned", "forget", "1", "--config", config]) == 0
    assert slack.runtime.learned.entries() == []


async def test_remember_sent_while_the_question_before_it_runs_answers_that_question(slack):
    """``remember:`` waits for its turn like any message of the thread: sent a moment after
    a follow-up that is still being answered, it is saved as the answer to that follow-up,
    not to the question before it."""

    def relevant(messages, delay: float = 0.0) -> str:  # runs in the model's worker thread
        time.sleep(delay)
        ids = [int(i) for i in re.findall(r"^\[(\d+)\]", str(messages[-1].content), re.M)]
        return json.dumps({"documents": [{"id": i, "relevant": True, "facts": ""} for i in ids], "feedback": ""})

    slack.model.script["grade_documents"] = relevant
    ts, answers, _ = await ask(slack, "how do I deploy?")
    assert answers
    slack.model.script["grade_documents"] = lambda messages: relevant(messages, 0.6)  # the follow-up takes a while
    follow, _ = slack.mention("UEXPERT", "and how do I roll back?", thread_ts=ts)
    remember, _ = slack.mention("UEXPERT", "remember: Run make rollback.", thread_ts=ts)
    await slack.deliver(follow)
    await asyncio.sleep(0.1)
    await slack.send(remember)
    assert "Saved as the answer to “and how do I roll back?”" in ephemerals(slack, "UEXPERT")[-1], ephemerals(
        slack, "UEXPERT"
    )


def test_a_deleted_learned_entries_file_is_an_error_not_a_silent_loss(tmp_path):
    """The file deleted under a running bot (its kept connection would write to the deleted
    inode and report success): saving fails with the missing table, as without kept connections."""
    import sqlite3

    from graphs.learned import SqliteLearnedStore

    store = SqliteLearnedStore(tmp_path / "learned.sqlite")
    store.add("who approves a hotfix?", "The on-call lead.", "Erik")
    for suffix in ("", "-wal", "-shm"):
        (tmp_path / f"learned.sqlite{suffix}").unlink(missing_ok=True)
    with pytest.raises(sqlite3.OperationalError, match="no such table"):
        store.add("who approves a rollback?", "The release manager.", "Erik")


# An expert's answer to these is true when given ("yes, outage since 9am", "Anna today"), not later.
PRESENT_MOMENT = [
    "is the API down right now?",
    "who is on call today?",
    "what's the latest release this week?",
    "who's on call?",
    "is main broken?",  # a status question asks about now without a time word
    "is the build green?",
    "ist die API gerade down?",
]
# Rules: their answer holds for the next asker, though "outage" names something live.
TEAM_QUESTIONS = [
    "when is the deploy freeze?",
    "who approves a hotfix?",
    "how do I report an outage?",
    "what is our outage policy?",
]


@pytest.mark.parametrize(
    ("question", "kept"), [(q, False) for q in PRESENT_MOMENT] + [(q, True) for q in TEAM_QUESTIONS]
)
async def test_an_answer_about_the_present_moment_is_given_once_and_not_learned(slack, question, kept):
    ts, answers, helps = await ask(slack, question)
    assert answers == [] and len(helps) == 1
    reply, _ = slack.message("UEXPERT", "answer: Yes, since 9am; Anna is on it.", thread_ts=ts)
    await slack.send(reply)
    posted = [a for a in slack.answers() if a.get("thread_ts") == ts]
    assert any("since 9am" in all_text(a) for a in posted)  # the asker still gets the expert's answer

    _, answers, helps = await ask(slack, question)
    if kept:
        assert helps == [] and "answered by Erik" in all_text(answers[0]), question
    else:  # the next asker's moment is another one: the experts are asked again
        assert answers == [] and len(helps) == 1, question
        assert slack.runtime.learned.entries() == []


@pytest.mark.parametrize(
    ("question", "now"),
    [(q, True) for q in ("are the runners down?", "any incidents ongoing?", "est-ce en panne en ce moment ?")]
    + [(q, False) for q in ("where do I report an outage?", "what is the incident process?", "is red a colour?")],
)
def test_a_status_question_holds_for_now_and_a_rule_about_a_live_subject_does_not(question, now):
    assert signals.holds_for_now(question) is now


async def test_remember_on_a_question_about_the_present_moment_saves_nothing_and_says_why(slack):
    ts, _, helps = await ask(slack, "who is on call today?")
    assert len(helps) == 1
    reply, _ = slack.mention("UEXPERT", "remember: Anna is on call.", thread_ts=ts)
    await slack.send(reply)
    assert "asks about the present moment" in ephemerals(slack, "UEXPERT")[-1]
    assert slack.runtime.learned.entries() == []


async def test_an_answer_about_the_present_moment_learned_by_an_earlier_version_is_not_given(slack):
    slack.runtime.learned.add("is the API down right now?", "Yes, outage since 9am.", "Erik")
    slack.runtime.learned.add("when is the deploy freeze?", "Dec 20 to Jan 3.", "Erik")
    _, answers, helps = await ask(slack, "is the API down right now?")
    assert answers == [] and len(helps) == 1  # not "outage since 9am" from some earlier day
    _, answers, helps = await ask(slack, "when is the deploy freeze?")
    assert helps == [] and "answered by Erik" in all_text(answers[0])
