"""A short question about a limit, a size, a quota or a price is a question about the product: offline,
"whats the max attachment size" was told "this does not look like a question about it" because its
embedding lies nearer the router's general-knowledge examples ("how many bytes in a kilobyte") than
the page's row saying "at most 20 MB each". Through the real `threadwise ask` process, offline, on
pages written here; chat about the world keeps its polite reply."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli_helpers import ask, offline_folder

ERRORS = """# Fernwick error messages

Fernwick shows a code with every error. Codes starting with FW-3 are about what you added to a note.

| Code | Meaning | What to do |
|---|---|---|
| FW-301 | Note is locked | Ask the note's owner to unlock it, or make a copy. |
| FW-310 | Image too large | Pictures inside a note may be at most 8 MB each; shrink the picture and add it again. |
| FW-322 | Unsupported format | Only PNG, JPEG and GIF pictures can be placed in a note. |
"""

SHARING = """# Sharing notebooks

Share a notebook from its menu: Share > Invite people. Each shared notebook takes up to 25 guests; past
that, make a team workspace instead.

Guests can read and comment. Only members of the workspace can edit pages.
"""

PLANS = """# Fernwick plans

The Basic plan is free and keeps 2 GB of notes and pictures per person. The Team plan costs 6 EUR per
person a month and keeps 50 GB per workspace.

Your plan renews on the same day each month. Cancel any time under Settings > Billing.
"""

POLITE = "does not look like a question about it"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    pages = {"errors.md": ERRORS, "sharing.md": SHARING, "plans.md": PLANS}
    return offline_folder(tmp_path_factory.mktemp("bounds"), pages)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("question", "fact"),
    [
        ("whats the max picture size", "8 MB"),
        ("whats the maximum image size", "8 MB"),
        ("whats the storage limit on basic", "2 GB"),
    ],
)
def test_a_question_about_a_limit_is_answered_from_the_page_stating_it(workdir, question, fact):
    reply = ask(workdir, question, "--source", "docs")
    assert reply["kind"] == "answer" and fact in reply["answer"], reply


@pytest.mark.slow
def test_a_limit_no_page_words_alike_goes_to_the_experts_not_the_polite_reply(workdir):
    # no page names files: the experts may know, the bot must not say it is no question about Fernwick
    reply = ask(workdir, "whats the max file size", "--source", "docs")
    assert reply["kind"] != "direct" and POLITE not in (reply["answer"] or ""), reply


@pytest.mark.slow
@pytest.mark.parametrize(
    "question",
    ["who won the champions league", "how long do i boil an egg", "what is the max value of an int in python"],
)
def test_chat_about_the_world_keeps_the_polite_reply(workdir, question):
    reply = ask(workdir, question, "--source", "docs")
    assert reply["kind"] == "direct" and POLITE in reply["answer"], reply
