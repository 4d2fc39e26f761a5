"""A code typed the way people type it is answered from the page that names it: "fl204" (lower case,
no hyphen, alone) and "fl311?" went to the experts and "what is e1107" was told it is no question
about the documents, though the error table names FL-204, FL-311 and E-1107; only codes written in
capitals counted as codes. Now a code in lower case or run together, or its number after "error" or
"code" ("error code 1107"), is matched to the code the page states, without case and separator; a
typed code of a kind the pages use that no page names ("fl209") still asks the experts.
Through the real `threadwise ask` process, offline, on pages written here."""

from __future__ import annotations

from pathlib import Path

import pytest

from graphs import signals
from tests.cli_helpers import ask_logged, offline_folder

ERRORS = """# Error codes

When a sync or a sign-in fails Fernlight shows a code. Look it up here before you contact support.

| Code | Meaning | What to do |
|---|---|---|
| FL-204 | The sync server did not answer in time. | Check your connection; Fernlight tries again after a minute. |
| FL-311 | Two people edited the same note while offline. | Open the note and pick the version to keep. |
| E-1107 | Your licence has expired. | Ask the workspace owner to renew the plan. |
| E-1210 | The app is older than the server allows. | Update Fernlight to the newest release. |
"""

OFFLINE = """# Working offline

Fernlight keeps a full copy of your notebooks on your computer, so you can write without a connection.
Changes are sent when you are back online. If two people changed the same note, Fernlight keeps both and asks
which one to keep.
"""

SHARING = """# Sharing notebooks

Share a notebook from its menu: choose Share, type a teammate's email and pick Viewer or Editor. Editors can
change and delete notes; viewers can only read them and leave comments.
"""

REQUIREMENTS = """# System requirements

Fernlight needs 4 GB of memory and 500 MB of free disk space. It runs on 64-bit x86 processors and on
ARM64 processors.
"""


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    pages = {"errors.md": ERRORS, "offline.md": OFFLINE, "sharing.md": SHARING, "requirements.md": REQUIREMENTS}
    return offline_folder(tmp_path_factory.mktemp("typed"), pages)


def ask(root: Path, question: str) -> tuple[dict, str]:
    """The reply of ``threadwise ask --json`` on the pages, and its log."""
    return ask_logged(root, question, "--source", "docs")


@pytest.mark.parametrize(
    ("question", "asked"),
    [
        ("fl204", [("fl", "204")]),
        ("what is e1107", [("e", "1107")]),
        ("error code 1107", [("", "1107")]),
        ("What does FL-204 mean?", [("fl", "204")]),
        ("my build 1107 fails", []),
        ("how much memory do I need?", []),
    ],
)
def test_codes_are_read_as_typed(question, asked):
    assert signals.asked_codes(question) == asked


def test_a_typed_code_is_named_by_the_page_only_as_that_code():
    row = "| FL-204 | The sync server did not answer in time. |"
    assert signals.code_share("fl204", row) == 1.0
    assert signals.code_share("error 204", row) == 1.0
    assert signals.code_share("fl2041", row) == 0.0
    assert signals.code_share("error 204", "It took 204 seconds.") == 0.0  # a number, not a code
    assert signals.codes_missing("fl209", [row]) == ["FL-209"]
    assert signals.codes_missing("does it run on arm64", ["It runs on ARM processors."]) == []


@pytest.mark.slow
@pytest.mark.parametrize(
    ("question", "fact"),
    [
        ("fl204", "The sync server did not answer in time."),
        ("fl311?", "Two people edited the same note while offline."),
        ("what is e1107", "Your licence has expired."),
        ("error code 1107", "Your licence has expired."),
        ("getting e-1210 when I sign in", "The app is older than the server allows."),
    ],
)
def test_the_page_naming_a_typed_code_answers(workdir, question, fact):
    reply, stderr = ask(workdir, question)
    assert reply["kind"] == "answer", (reply, stderr[-1500:])
    assert fact in reply["answer"].split("\n\n")[0], reply["answer"]


@pytest.mark.slow
def test_a_typed_code_no_page_names_asks_the_experts(workdir):
    """The table's neighbouring codes (FL-204) answer nothing about FL-209."""
    reply, _ = ask(workdir, "fl209")
    assert reply["kind"] == "help_request", reply
