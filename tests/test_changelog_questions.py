"""Version, release and platform questions the pages answer are answered from them: "whats the latest
version" was sent to the web by the router (the word "latest"), then graded at the current-events
bar and answered with an error row saying "update to the latest version"; "when was 4.2.1 released"
and "does it run on arm" went to the experts, though the changelog has a 4.2.1 entry with its date
and the requirements page names ARM64. Now a question asking for the newest version is not routed
as current events, a changelog's newest entry answers it and a version's entry a question naming
it, each opening with the entry's heading (the version and its date), and "arm" is a term of
"ARM64". A question about the present moment itself ("is the service down right now?") still gets
its 'needs current information' help request. Through the real `threadwise ask` process, offline,
on pages written here."""

from __future__ import annotations

from pathlib import Path

import pytest

from graphs import releases, signals
from tests.cli_helpers import ask_logged, offline_folder

CHANGELOG = """# Changelog

## 4.3.0 (2026-10-02)
- Notes can be pinned to the top of a notebook.
- Faster start-up on large workspaces.

## 4.2.1 (2026-07-14)
- Fixed a crash when exporting a notebook with empty pages.
- Sync retries no longer show the same error twice.

## 4.2.0 (2026-06-03)
- Native builds for Apple silicon.
- CSV export.

## 4.1.0 (2026-02-20)
- Dark theme.
"""

REQUIREMENTS = """# System requirements

Fernlight needs 4 GB of memory and 500 MB of free disk space.

## Processors
Fernlight runs on 64-bit x86 processors (Intel and AMD) and on ARM64 processors. On Macs both Intel
models and Apple silicon (M1 and later) are supported. 32-bit processors are not supported.

## Operating systems
Windows 10 and 11, macOS 13 or later, and Ubuntu 22.04 or later.
"""

ERRORS = """# Error codes

| Code | Meaning | What to do |
|---|---|---|
| FL-204 | The sync server did not answer in time. | Check your connection; Fernlight tries again after a minute. |
| E-1210 | The app is older than the server allows. | Update Fernlight to the latest version. |
"""

INSTALL = """# Installing Fernlight

## Linux
Install the `.deb` package with `sudo apt install ./fernlight.deb`.

## macOS
Open the `.dmg` file and drag Fernlight into the Applications folder.

## Windows
Run `FernlightSetup.exe` and follow the wizard.
"""


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    pages = {"changelog.md": CHANGELOG, "requirements.md": REQUIREMENTS, "errors.md": ERRORS, "install.md": INSTALL}
    return offline_folder(tmp_path_factory.mktemp("changelog"), pages)


def ask(root: Path, question: str) -> tuple[dict, str]:
    """The reply of ``threadwise ask --json`` on the pages, and its log."""
    return ask_logged(root, question, "--source", "docs")


@pytest.mark.parametrize(
    ("question", "newest"),
    [
        ("whats the latest version", True),
        ("what is the most recent version?", True),
        ("what's the latest stable release?", False),  # a release: the present moment
        ("which version is current?", True),
        ("what's the latest release out?", False),  # the present moment
        ("when was 4.2.1 released", False),  # names its version
        ("how do I update to the latest version?", False),  # asks for steps
    ],
)
def test_questions_asking_for_the_newest_version_are_told(question, newest):
    assert releases.asks_newest_version(question) is newest


def test_versions_and_names_run_together_with_numbers_are_read():
    assert signals.asked_versions("when was 4.2.1 released") == ["4.2.1"]
    assert signals.asked_versions("what changed in version 4.2?") == ["4.2"]
    assert signals.asked_versions("is 1.5 GB enough?") == []
    assert signals.code_share("when was 4.2.1 released", "Changelog > 4.2.1 (2026-07-14)") == 1.0
    assert signals.code_share("when was 4.2.1 released", "Changelog > 4.2.10 (2026-08-01)") == 0.0
    assert "arm" in signals.terms("It runs on ARM64 processors.")


@pytest.mark.parametrize(
    ("question", "asked"),
    [
        ("what changed in 3.10?", [(3, 10)]),
        ("whats new in v2", [(2,)]),
        ("when did 3.9 come out?", [(3, 9)]),
        ("when was 4.2.1 released", [(4, 2, 1)]),
        ("is version 4.2 supported?", []),  # asks whether it is supported, not what a release brought
        ("is the new 1.5 GB limit enough?", []),  # an amount
        ("how do I add a new column in 3.10?", []),  # asks for the steps, which release notes do not give
    ],
)
def test_the_releases_a_question_asks_about_are_read(question, asked):
    assert releases.asked_releases(question) == asked


@pytest.mark.slow
@pytest.mark.parametrize(
    ("question", "facts"),
    [
        ("whats the latest version", ["4.3.0"]),
        ("what is the newest version?", ["4.3.0"]),
        ("which version is current?", ["4.3.0"]),
        ("when was 4.2.1 released", ["4.2.1", "2026-07-14"]),
        ("when did 4.1.0 come out?", ["4.1.0", "2026-02-20"]),
        ("what changed in 4.2.0?", ["4.2.0", "Native builds for Apple silicon"]),
        ("does it run on arm", ["ARM64"]),
        ("does it run on arm64?", ["ARM64"]),
        ("is apple silicon supported", ["Apple silicon"]),
    ],
)
def test_version_release_and_platform_questions_are_answered_from_the_pages(workdir, question, facts):
    reply, stderr = ask(workdir, question)
    assert reply["kind"] == "answer", (reply, stderr[-1500:])
    assert all(f in reply["answer"] for f in facts), reply["answer"]
    assert "current information" not in stderr


@pytest.mark.slow
@pytest.mark.parametrize("question", ["is the service down right now?", "what's the latest release out?"])
def test_a_question_about_the_present_moment_still_needs_current_information(workdir, question):
    reply, stderr = ask(workdir, question)
    assert reply["kind"] == "help_request", reply
    assert "it needs current information, which I cannot check" in stderr, stderr[-1500:]


# a changelog whose versions people name by their first numbers ("3.10", "v2"), with pages beside it
LUMENFOLD_CHANGES = """# Changelog

## 3.10.1 (2026-11-20)
- Boards with an emoji in a column name load again.

## 3.10.0 (2026-10-30)
- Boards can be archived instead of deleted.
- Release notes open from the help menu.

## 3.9.0 (2026-08-12)
- Cards carry a due time as well as a due date.

## 2.0.0 (2025-09-01)
- A new sync engine: changes reach other devices within seconds.

## 1.0.0 (2025-06-01)
- First public version.
"""

LUMENFOLD_PLANS = """# Plans

The Free plan allows three members on a board. The Team plan costs 7 EUR per member per month.
Invoices are sent by email on the first day of each billing period.
"""

# each release's own line: an answer about one release quotes its line and no other's
RELEASE_LINES = {
    "3.10.1": "emoji in a column name",
    "3.10.0": "archived instead of deleted",
    "3.9.0": "due time",
    "2.0.0": "new sync engine",
    "1.0.0": "First public version",
}


@pytest.fixture(scope="module")
def releases_dir(tmp_path_factory) -> Path:
    pages = {"changelog.md": LUMENFOLD_CHANGES, "plans.md": LUMENFOLD_PLANS, "install.md": INSTALL}
    return offline_folder(tmp_path_factory.mktemp("releases"), pages)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("question", "version", "date"),
    [
        ("what changed in 3.10?", "3.10.0", "2026-10-30"),  # named by its first numbers: the release that brought 3.10
        ("when did 3.9 come out?", "3.9.0", "2026-08-12"),
        ("whats new in v2", "2.0.0", "2025-09-01"),
        ("whats the latest version", "3.10.1", "2026-11-20"),  # the newest release's notes only
        ("when was 1.0.0 released", "1.0.0", "2025-06-01"),
    ],
)
def test_a_release_named_by_its_first_numbers_is_answered_with_its_own_notes_only(
    releases_dir, question, version, date
):
    """ "when did 3.9 come out?" and "whats new in v2" went to the experts, and "what changed in 3.10?" was
    answered with every release's notes, though the changelog has "## 3.10.0 (2026-10-30)": a version
    named by its first numbers is the release that brought them. And the newest-version answer went on
    with the notes of every other release: an answer about one release holds that release's section
    only."""
    reply, stderr = ask(releases_dir, question)
    assert reply["kind"] == "answer", (reply, stderr[-1500:])
    answer = reply["answer"]
    assert version in answer[:200] and date in answer[:200], answer
    assert RELEASE_LINES[version] in answer, answer
    assert not [v for v, line in RELEASE_LINES.items() if v != version and line in answer], answer


@pytest.mark.slow
@pytest.mark.parametrize("question", ["what changed in 9.9?", "when did 4.2 come out?", "whats new in v7"])
def test_a_release_the_changelog_does_not_have_is_not_answered_with_another_releases_notes(releases_dir, question):
    reply, stderr = ask(releases_dir, question)
    assert reply["kind"] == "help_request", reply
    assert not [line for line in RELEASE_LINES.values() if line in str(reply)], reply
