"""Questions that read like general knowledge or like the present moment, whose answer the team's
own pages give: "what's a runner?" was told it is no question about the documents though the
glossary defines Runner, "what does http 503 mean" too though the API page names HTTP 503, and
"whats the status page url" was said to need current information (the word "status") though two
pages give the address. Now a question routed as general knowledge is answered when its search
clears the current-events bar, and a question asking where something is never asks about the
present moment. Through the real `threadwise ask` process, offline, on pages written here."""

from __future__ import annotations

from pathlib import Path

import pytest

from graphs import signals
from tests.cli_helpers import ask_logged, offline_folder

GLOSSARY = """# Glossary

Words used across the Lanternbox handbook.

Workspace
: One customer's space in Lanternbox, with its own members, boards and billing.

Runner
: A machine that executes Lanternbox jobs for a workspace.

Board
: A shared list of cards that a team works through.
"""

API = """# Lanternbox API

## Authentication
Send your token in the `Authorization` header. Tokens are created under Settings > Tokens.

## Errors
When the job queue is full the API answers HTTP 503 with a `Retry-After` header; wait that many seconds
and send the request again. A missing or wrong token gives HTTP 401.
"""

INCIDENTS = """# When Lanternbox is slow

## Check the status page first
Open https://status.lanternbox.example to see whether an incident is already known.
If it shows nothing, collect the job ids and page the on-call engineer.

## Restarting a runner
Run `lbx runner restart` on the runner's machine; jobs resume by themselves.
"""

ONCALL = """# On-call duties

The on-call engineer posts updates on the status page (https://status.lanternbox.example) every 30 minutes
during an incident, and writes the review within five working days.
"""


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    pages = {"glossary.md": GLOSSARY, "api.md": API, "incidents.md": INCIDENTS, "oncall.md": ONCALL}
    return offline_folder(tmp_path_factory.mktemp("named"), pages)


@pytest.mark.parametrize(
    ("question", "not_present_moment"),
    [
        ("whats the status page url", True),
        ("where is the link to the status page?", True),
        ("is the status page down?", False),
        ("what's the status of the api right now?", False),
    ],
)
def test_a_question_asking_where_something_is_does_not_ask_about_the_present_moment(question, not_present_moment):
    assert signals.asks_for_now(question) is not not_present_moment


@pytest.mark.slow
@pytest.mark.parametrize(
    ("question", "fact"),
    [
        ("what's a runner", "A machine that executes Lanternbox jobs"),
        ("what does http 503 mean", "HTTP 503"),
        ("whats the status page url", "https://status.lanternbox.example"),
    ],
)
def test_the_pages_that_name_what_is_asked_answer_it(workdir, question, fact):
    reply, stderr = ask_logged(workdir, question, "--source", "docs")
    assert reply["kind"] == "answer", (reply, stderr[-1500:])
    assert fact in reply["answer"], reply["answer"]
    assert "current information" not in stderr and "does not look like a question" not in reply["answer"]


@pytest.mark.slow
def test_general_knowledge_no_page_names_is_still_not_searched(workdir):
    """A general-knowledge question the pages do not speak of keeps the polite reply."""
    reply, _ = ask_logged(workdir, "what is the difference between a process and a thread", "--source", "docs")
    assert reply["kind"] == "direct" and "does not look like a question about it" in reply["answer"], reply
    assert reply["path"] == ["start", "route", "direct", "finish"], reply
