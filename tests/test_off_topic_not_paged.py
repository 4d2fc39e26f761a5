"""Chat about the world outside the team paged the experts: offline, a question about sports,
cooking or general coding that no page answers ended in a help request after two searches of the
knowledge base. Now it gets the polite reply that it is not about the documents, while a question
about the team's own workplace or product that nobody documented still goes to the experts (that
is what they are for). Through the real `threadwise ask` process, offline, on pages written here."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.config import Secrets
from bot.runtime import open_runtime
from graphs import signals
from graphs.offline_router import OfflineRouter
from tests.cli_helpers import ask, offline_folder
from tests.fakes.chat_model import ScriptedChatModel
from tests.test_offline_extractive import ask as ask_in_process
from tests.test_offline_extractive import extractive_settings

HANDBOOK = """# Quillbase team handbook

## Expenses
Submit receipts in the finance portal within 30 days. Taxis to the airport are reimbursed.

## Leave
Everyone gets 26 days of annual leave; carry over at most five days into the next year.
"""

PRODUCT = """# Quillbase product guide

## Installing
Install the Quillbase desktop client from the downloads page, then sign in with your work account.

## Exporting
Export a notebook as PDF or Markdown from File > Export.
"""

POLITE = "does not look like a question about it"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return offline_folder(tmp_path_factory.mktemp("offtopic"), {"handbook.md": HANDBOOK, "product.md": PRODUCT})


@pytest.mark.slow
@pytest.mark.parametrize(
    "question",
    [
        "who won the tennis final at wimbledon",
        "how long do i roast a chicken for",
        "how do i squash my commits in git",
    ],
)
def test_a_question_about_the_world_outside_the_team_gets_the_polite_reply(workdir, question):
    reply = ask(workdir, question, "--source", "docs")
    assert reply["kind"] == "direct" and POLITE in reply["answer"], reply
    assert "Hi!" not in reply["answer"] and reply["path"][-2:] == ["direct", "finish"], reply


@pytest.mark.slow
@pytest.mark.parametrize("question", ["who runs the marketing team", "when is the summer barbecue"])
def test_a_team_question_nobody_documented_still_goes_to_the_experts(workdir, question):
    reply = ask(workdir, question, "--source", "docs")
    assert reply["kind"] == "help_request", reply


@pytest.mark.slow
@pytest.mark.parametrize(
    "question",
    ["who approves a hotfix?", "who owns the billing service?", "who do I ask for a new laptop?"],
)
def test_a_question_about_who_in_the_team_does_something_goes_to_the_experts(workdir, question):
    """Its embedding lies near "who wrote hamlet" (general knowledge, then the polite reply), but
    who approves, owns or is asked for something in the team is what the experts know."""
    reply = ask(workdir, question, "--source", "docs")
    assert reply["kind"] == "help_request" and POLITE not in (reply.get("answer") or ""), reply


@pytest.mark.parametrize(
    ("question", "team"),
    [
        ("who signs off a release?", True),
        ("who is responsible for backups?", True),
        ("who should we escalate to?", True),
        ("who wrote hamlet?", False),
        ("who won the derby yesterday?", False),
        ("who is the president of france?", False),
    ],
)
def test_who_in_the_team_is_read_from_the_words(question, team):
    assert signals.asks_who_in_team(question) is team


@pytest.mark.slow
async def test_the_give_up_step_decides_on_the_route_steps_signals_without_embedding_the_message_again(
    tmp_path, monkeypatch
):
    """The give-up step (the polite reply or the experts) used to embed the message against the
    router's examples a second time, though the route step had done it that turn: each message is
    measured once, through the real chat path, whichever way the turn ends."""
    measured: list[str] = []
    signals = OfflineRouter.signals

    def counted(self, message, learned=True):
        measured.append(message)
        return signals(self, message, learned)

    monkeypatch.setattr(OfflineRouter, "signals", counted)
    settings = extractive_settings(tmp_path, {"handbook.md": HANDBOOK, "product.md": PRODUCT})
    async with open_runtime(settings, Secrets(), chat_model=ScriptedChatModel()) as rt:
        for i, (question, polite) in enumerate(
            [("how long do i roast a chicken for", True), ("who runs the marketing team", False)]
        ):
            out, values = await ask_in_process(rt, question, f"once{i}")
            assert values["path"].count("retrieve") == 2, values["path"]  # it reached the give-up step
            if polite:
                assert out.answers and POLITE in out.answers[0].text, values["path"]
            else:
                assert not out.answers and len(out.help_requests) == 1, values["path"]
            assert measured.count(question) == 1, (question, measured)


@pytest.mark.slow
async def test_the_canned_reply_decides_on_the_route_steps_signals_without_embedding_the_message_again(
    tmp_path, monkeypatch
):
    """A message routed away from the documents (a greeting, small talk, a world question) used to
    be embedded against the router's examples a second time by the canned reply, to tell a greeting
    from general knowledge, though the route step had done it that turn: each is measured once, and
    the reply is the same (a greeting greets, a world question gets the polite reply)."""
    measured: list[str] = []
    signals = OfflineRouter.signals

    def counted(self, message, learned=True):
        measured.append(message)
        return signals(self, message, learned)

    monkeypatch.setattr(OfflineRouter, "signals", counted)
    settings = extractive_settings(tmp_path, {"handbook.md": HANDBOOK, "product.md": PRODUCT})
    async with open_runtime(settings, Secrets(), chat_model=ScriptedChatModel()) as rt:
        for i, (message, reply) in enumerate(
            [
                ("hi there", "Hi!"),
                ("good morning everyone", "Hi!"),
                ("hello, is anybody here?", "Hi!"),
                ("thanks a lot 🙏", "You're welcome!"),
                ("how many bytes are in a kilobyte", POLITE),
            ]
        ):
            before = len(measured)
            out, values = await ask_in_process(rt, message, f"direct{i}")
            assert values["path"][-2:] == ["direct", "finish"] and "retrieve" not in values["path"], values["path"]
            assert out.answers and reply in out.answers[0].text, (message, out.answers)
            # the question after the greeting ("is anybody here?") is what the router reads
            assert len(measured) == before + 1, (message, measured[before:])
