"""A mention of a teammate, a group or a channel in a question is no part of what it asks: Slack gives
a mention as "<@U02345678>" (and the bot renders it "@U02345678"), Discord as "<@123456789012345678>",
and the id was read as a typed error code ("u", "02345678") no page names, so "@U02345678 how do I
restore a backup?" went to the experts while the same question without the mention was answered.
Through the real `threadwise ask` process, offline, on pages written here."""

from __future__ import annotations

from pathlib import Path

import pytest

from graphs import signals
from tests.cli_helpers import ask, offline_folder

BACKUPS = """# Backups

Every night Driftmark copies each workspace: its boards, their comments and the member list.
Copies are kept for sixty days.

## Restoring a backup

1. Open Settings > Backups.
2. Choose the night you want back.
3. Type the workspace name and press Restore. The current boards are replaced.
"""

ERRORS = """# Error codes

| Code | Meaning | What to do |
|---|---|---|
| DM-401 | Your session ran out. | Sign in again. |
| DM-502 | The board server is busy. | Wait a minute and reload. |
"""

SHARING = """# Sharing a board

Open the board, choose Share and type a teammate's email. Guests can read and comment; members can edit.
"""

QUESTION = "how do I restore a backup?"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    pages = {"backups.md": BACKUPS, "errors.md": ERRORS, "sharing.md": SHARING}
    return offline_folder(tmp_path_factory.mktemp("mentions"), pages)


@pytest.mark.parametrize(
    "question",
    [
        f"@U02345678 {QUESTION}",  # Slack's user mention as the bot renders it
        f"hey <@W0123456> {QUESTION}",  # an Enterprise Grid user, as Slack sends it
        f"<@123456789012345678> {QUESTION}",  # Discord
        f"<#C0123456|ops> {QUESTION}",  # a channel link
        f"{QUESTION} cc <!subteam^S0123ABC|@backup-team>",  # a user group
    ],
)
def test_a_question_with_a_mention_is_answered_like_the_question_alone(workdir, question):
    reply = ask(workdir, question, "--source", "docs")
    assert reply["kind"] == "answer", reply
    assert "Settings > Backups" in reply["answer"], reply["answer"]


@pytest.mark.parametrize(
    ("question", "asked"),
    [
        ("@U02345678 how do I restore a backup?", []),
        ("<@U02345678> what does dm401 mean?", [("dm", "401")]),
        ("hey @W0123456 what does dm401 mean?", [("dm", "401")]),
        ("<@!123456789012345678> error code 502", [("", "502")]),
        ("<#C0123456|ops> <!subteam^S0123ABC|@oncall> #C0123456 why?", []),
    ],
)
def test_a_mention_is_no_code(question, asked):
    assert signals.asked_codes(question) == asked
    assert not signals.codes(question)


def test_a_mention_is_no_search_word_but_a_decorator_or_a_channel_name_is():
    assert signals.terms("<@U02345678> @W0123456 <#C0123456|ops> restore") == {"restore"}
    assert {"dataclas", "ops"} <= signals.terms("what does @dataclass do in #ops?")
