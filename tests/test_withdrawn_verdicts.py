"""A yes/no answer never says the opposite of the page: "is ubuntu 20.04 supported" was answered
"Yes. Dropped support for Windows 8.1 and Ubuntu 20.04.", a "Yes." made from a changelog bullet's
words ("support", the version asked about) whose meaning is that the support was taken away. And a
sentence saying that exactly what is asked is not supported stays in the answer beside the one saying
what is. Through the real `threadwise ask` process, offline, on pages written here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.cli_helpers import ask, offline_folder

RELEASES = """# Brindle release notes

## 3.0.0 — 2026-03-02

- A faster search index.
- Dropped support for Debian 10 and macOS 11.
- Removed the Ubuntu 20.04 packages.

## 2.4.0 — 2025-11-20

- Dark theme for the web app.
- Exports keep their folder names.
"""

REQUIREMENTS = """# Installing Brindle

Brindle runs on Debian 12, Ubuntu 22.04 and 24.04, and macOS 13 or newer.

The command-line tool needs Python 3.10 or newer.
"""

WINDOWS = """# Brindle on Windows

Brindle supports Windows 10 (22H2) and Windows 11. Windows 8.1 and older are not supported. The
installer needs 300 MB of free disk space.

1. Download `BrindleSetup.exe` from your account page.
2. Run it and follow the steps.

To remove Brindle, open Settings > Apps and choose Uninstall.
"""


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    pages = {"releases.md": RELEASES, "requirements.md": REQUIREMENTS, "windows.md": WINDOWS}
    return offline_folder(tmp_path_factory.mktemp("withdrawn"), pages)


def opening(answer: str) -> str:
    """The answer's first paragraph, without its citation markers."""
    return re.sub(r"\s*\[\d+\]", "", answer.split("\n\n", 1)[0]).strip()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("question", "said"),
    [
        ("is debian 10 supported", "Dropped support for Debian 10"),
        ("is macos 11 supported", "Dropped support for Debian 10 and macOS 11"),
        ("are there packages for ubuntu 20.04", "Removed the Ubuntu 20.04 packages"),
    ],
)
def test_no_yes_is_put_before_a_sentence_saying_the_support_was_dropped(workdir, question, said):
    reply = ask(workdir, question, "--source", "docs")
    assert reply["kind"] == "answer" and said in reply["answer"], reply
    assert not opening(reply["answer"]).lower().startswith("yes"), reply


@pytest.mark.slow
def test_a_sentence_saying_what_is_supported_still_gets_its_yes(workdir):
    reply = ask(workdir, "is debian 12 supported", "--source", "docs")
    assert opening(reply["answer"]).startswith("Yes. Brindle runs on Debian 12"), reply


@pytest.mark.slow
@pytest.mark.parametrize(
    "question", ["does it run on windows 8", "can i use it on windows 7", "is windows 8.1 supported"]
)
def test_the_sentence_saying_what_is_asked_is_not_supported_is_kept(workdir, question):
    reply = ask(workdir, question, "--source", "docs")
    assert "Windows 8.1 and older are not supported" in opening(reply["answer"]), reply
