"""A new question in a chat thread is answered as a new question, offline: several unrelated
questions in one console thread (the console keeps every question in thread ``main``), one
of them in German after English ones, each answered from its own page only, and a
present-moment question asked later in the thread still gets the help request; a real
follow-up ("what about on windows?") is still read with the thread."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage

from bot.config import Secrets
from bot.runtime import open_runtime
from graphs.offline import offline_questions, offline_search_queries, stands_alone, thread_history
from graphs.offline_router import OfflineRouter
from graphs.state import RAGState
from tests.fakes.chat_model import ScriptedChatModel
from tests.test_offline_extractive import ask, extractive_settings

PAGES = {
    "time-off.md": """# Time off

Everyone gets 28 days of paid vacation per calendar year, plus public holidays of the country
you work in. Up to 5 unused days carry over to the next year and expire on 31 March.

## Sick days

If you are sick, tell your manager in Slack before 10:00. From the fourth day you need a
doctor's note.
""",
    "expenses.md": """# Travel and expenses

Book travel through Navan. Anything under 50 EUR needs no receipt; above that, upload the
receipt in Navan within 30 days.

## What you can expense

Taxis to and from the airport or train station, and any taxi after 22:00. Meals while
travelling, up to 60 EUR a day.

## Approval

Your manager approves expenses in Navan every Friday.
""",
    "services.md": """# Services

The search-indexer service listens on port 8020 and is owned by Tomasz in #search-oncall.
The billing-api service listens on port 8000 and is owned by Amara in #payments-oncall.
""",
    "install.md": """# Installing acmectl

## macOS

Install acmectl with Homebrew: `brew install acme/tap/acmectl`.

## Linux

Download the tarball from the releases page and put acmectl on your PATH.

## Windows

Install acmectl with Scoop: `scoop install acmectl`. Under WSL it works as on Linux.
""",
    "laptops.md": """# Laptops

IT ships every new joiner a MacBook Pro, or a Windows ThinkPad on request. Windows laptops
are enrolled in Intune and get their updates every Tuesday.
""",
}

TAXI = "can I expense a taxi to the airport?"
VACATION_DE = "Wie viele Urlaubstage habe ich pro Jahr?"
PORT = "what port does search-indexer run on"
RELEASE = "did the new version come out yet?"


@pytest.fixture(scope="module")
def handbook_settings(tmp_path_factory):
    return extractive_settings(tmp_path_factory.mktemp("handbook"), PAGES)


def thread(*texts: str) -> RAGState:
    """A thread's state: alternating user messages and short answers, ending with the last message."""
    msgs: list[AnyMessage] = [HumanMessage(t) if i % 2 == 0 else AIMessage(t) for i, t in enumerate(texts)]
    return RAGState(messages=msgs, question=texts[-1])


def test_a_message_in_another_language_or_sharing_nothing_stands_alone():
    assert stands_alone(VACATION_DE, TAXI)  # German after English
    assert stands_alone(RELEASE, "can I run it with postgres instead of sqlite?")  # nothing shared
    assert stands_alone(PORT, TAXI, kb=0.7)  # its own search is confident
    # what says it continues keeps the thread, whatever its own search finds
    assert not stands_alone("and sick leave, same cap?", "how much annual leave can I carry over?", kb=0.8)
    assert not stands_alone("what about on windows?", "how do I install acmectl?", kb=0.7)
    assert not stands_alone("do those ever stop on their own?", "can the platform run our agent every morning?")
    # shares the earlier question's subject and its own search is not confident: a follow-up
    assert not stands_alone("how do I roll back an acmectl install", "how do I install acmectl?", kb=0.3)


def test_a_new_question_is_searched_and_scored_without_the_thread():
    state = thread(TAXI, "Taxis to and from the airport can be expensed. [1]", VACATION_DE)
    assert thread_history(state, 6) == []
    assert offline_questions(state, 6) == [VACATION_DE]
    assert offline_search_queries(state, 6) == [VACATION_DE]
    follow = thread("how do I install acmectl?", "Install acmectl with Homebrew. [1]", "what about on windows?")
    assert len(thread_history(follow, 6)) == 2
    assert offline_questions(follow, 6) == [
        "what about on windows?",
        "how do I install acmectl? what about on windows?",
    ]
    assert len(offline_search_queries(follow, 6)) == 3  # the message, with the question, with the answer


@pytest.mark.slow
async def test_topic_switches_in_one_thread_are_answered_as_new_questions(handbook_settings):
    async with open_runtime(handbook_settings, Secrets(), chat_model=ScriptedChatModel()) as rt:
        out, _ = await ask(rt, TAXI, "main")
        assert out.answers[0].sources[0].location == "expenses.md"

        # German after English: the vacation sentence leads, nothing of the expenses answer
        out, values = await ask(rt, VACATION_DE, "main")
        [answer] = out.answers
        assert answer.text.startswith("Everyone gets 28 days"), answer.text
        assert "Navan" not in answer.text and "axi" not in answer.text, answer.text
        assert [s.location for s in answer.sources] == ["time-off.md"]

        out, _ = await ask(rt, PORT, "main")
        [answer] = out.answers
        assert "8020" in answer.text.split("\n\n")[0], answer.text
        assert "vacation" not in answer.text and "Navan" not in answer.text, answer.text

        # a present-moment question later in the thread: the help request, as in a new thread
        out, values = await ask(rt, RELEASE, "main")
        assert not out.answers and out.help_requests, values["path"]
        assert "current information" in out.help_requests[0].reason, out.help_requests

        # a real follow-up keeps the thread: Windows means installing acmectl on Windows
        out, _ = await ask(rt, "how do I install acmectl?", "cli")
        assert out.answers[0].sources[0].location == "install.md"
        out, _ = await ask(rt, "what about on windows?", "cli")
        [answer] = out.answers
        assert "install.md" in [s.location for s in answer.sources], answer.text
        assert "scoop install acmectl" in answer.text, answer.text
        # asked alone, the same words are a new question with nothing of the other thread: which
        # page answers is the search's call (the install page's "## Windows" section is a system
        # label since systems name sections, so it may lead), but it is never a follow-up
        out, values = await ask(rt, "what about on windows?", "alone")
        assert out.answers and values["follow_up"] is False, values["path"]


@pytest.mark.slow
async def test_whether_a_message_continues_the_thread_is_decided_once_per_message(handbook_settings, monkeypatch):
    """The route step decides whether a message is a follow-up and keeps it in the state; the
    search, the graders and the composer read it: the message is compared with every chunk
    vector once (it was eight times for a follow-up: routing, searching, grading, composing
    each asked again)."""
    compared: list[str] = []
    signals = OfflineRouter.signals

    def counted(self: OfflineRouter, message: str, **kw):
        compared.append(message)
        return signals(self, message, **kw)

    monkeypatch.setattr(OfflineRouter, "signals", counted)
    async with open_runtime(handbook_settings, Secrets(), chat_model=ScriptedChatModel()) as rt:
        await ask(rt, "how do I install acmectl?", "once")
        for message, follow_up in (("what about on windows?", True), (VACATION_DE, False)):
            compared.clear()
            out, values = await ask(rt, message, "once")
            assert out.answers and values["follow_up"] is follow_up, (message, values["path"])
            assert compared == [message], compared
        assert "scoop install acmectl" not in out.answers[0].text
