"""A question in the present tense about what the documents state ("which version is currently
supported?") is answered from them; a question about the present moment itself ("is the API down
right now?", "what's the latest release out?") gets the honest reply without web search: the bot
cannot check current information. Through the real `threadwise ask` process, offline, on files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli_helpers import ask_logged, offline_folder

SUPPORT = """# Supported versions

## Support policy
Version 4.2 is currently supported; 4.1 gets security fixes until June. Older versions are not supported.
The latest version of the client library is 4.2.3. The API is now served from api.example.com.

## Upgrading
Upgrade with `pip install -U exampleclient`. Read the changelog first.
"""

EXPENSES = "# Expenses\n\nClaim a taxi to the airport in the expenses tool within 30 days.\n"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return offline_folder(tmp_path_factory.mktemp("present"), {"support.md": SUPPORT, "expenses.md": EXPENSES})


@pytest.mark.parametrize(
    ("question", "fact"),
    [
        # what the documents state, asked with "currently", "latest", "now"
        ("what version is currently supported?", "Version 4.2 is currently supported"),
        ("what's the latest version of the client library?", "4.2.3"),
        ("which host is the API now served from?", "api.example.com"),
        # the present moment itself: no document written earlier can tell
        ("is the API down right now?", None),
        ("what's the latest release out?", None),
        ("who won the cup final yesterday?", None),
    ],
)
def test_present_tense_documentation_questions_are_answered_and_present_moment_ones_are_not(workdir, question, fact):
    reply, stderr = ask_logged(workdir, question, "--source", "docs")
    if fact is not None:
        assert reply["kind"] == "answer", (reply, stderr[-1500:])
        assert fact in reply["answer"], reply["answer"]
        assert "current information" not in stderr
    else:
        assert reply["kind"] == "help_request", reply
        assert "it needs current information, which I cannot check" in stderr, stderr[-1500:]


@pytest.mark.parametrize("question", ["Do I need a GPU?", "where can I find the pricing page?"])
def test_a_question_not_about_the_present_is_not_said_to_need_current_information(workdir, question):
    """A question the router may take for news ("do I need a GPU?") that no document answers goes
    to the experts for what it is (nothing found), not with the untrue reason that it needs
    current information."""
    reply, stderr = ask_logged(workdir, question, "--source", "docs")
    assert "current information" not in stderr and "current information" not in json.dumps(reply), stderr[-1500:]
