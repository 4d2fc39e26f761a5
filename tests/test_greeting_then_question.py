"""A message that opens with thanks or a greeting and then asks a real question is answered like the
question alone: "morning! where's the export?" and "ok great, how do I change my card?" were greeted
("Hi! Ask me a question about ..."), and "great, what about windows?" went to the experts, because
the router and the grader read the greeting's words with the question's. A greeting alone, thanks
alone and small talk after a greeting ("hello, is anybody here?") still get the greeting. Through the
real `threadwise ask` process, offline, on pages written here."""

from __future__ import annotations

from pathlib import Path

import pytest

from graphs import signals
from tests.cli_helpers import ask, offline_folder

INSTALL = """# Installing Fernlight

Fernlight is a desktop app for keeping field notes in sync across a team.

## Linux
Download the `.deb` or `.rpm` package from the downloads page and install it with your package manager,
for example `sudo apt install ./fernlight.deb`. An AppImage is also offered for other distributions.

## macOS
Open the `.dmg` file and drag Fernlight into the Applications folder. The first launch asks you to allow
notifications.

## Windows
Run `FernlightSetup.exe` and follow the wizard. Administrator rights are not needed for a per-user install.
"""

UNINSTALL = """# Removing Fernlight

Your notes stay on the sync server when you remove the app; only the local copy is deleted.

## Linux
Remove the package with `sudo apt remove fernlight`. Delete `~/.config/fernlight` to drop your settings too.

## macOS
Quit Fernlight, then drag it from the Applications folder to the Bin.

## Windows
Open Settings > Apps, pick Fernlight and choose Uninstall.
"""

EXPORT = """# Exporting notes

You can take your notes out of Fernlight at any time. Choose File > Export, pick a notebook and a format
(Markdown, PDF or CSV), then choose where to save the file.
"""

BILLING = """# Billing and invoices

Fernlight is billed per seat each month. Workspace owners find every invoice under Settings > Billing > Invoices,
where each one can be downloaded as a PDF. Change the card on file from the same page.
"""

GREETING = "Hi! Ask me a question"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    pages = {"install.md": INSTALL, "uninstall.md": UNINSTALL, "export.md": EXPORT, "billing.md": BILLING}
    return offline_folder(tmp_path_factory.mktemp("greeted"), pages)


@pytest.mark.parametrize(
    ("message", "question"),
    [
        ("thanks, but how do I uninstall on mac?", "how do I uninstall on mac?"),
        ("cool thanks. and how do I export?", "how do I export?"),
        ("hi! where do I find invoices?", "where do I find invoices?"),
        ("great thanks! and on windows?", "on windows?"),
        ("hi :) what is e1107", "what is e1107"),
        ("thanks for the help! where are invoices?", "where are invoices?"),
        ("thank you for the quick answer, can I export to csv?", "can I export to csv?"),
        # nothing but the greeting, or a remark: the message itself
        ("thanks!", "thanks!"),
        ("thanks, that sorted it", "thanks, that sorted it"),
        ("thanks for the help!", "thanks for the help!"),
        ("hey, how are you?", "hey, how are you?"),
        ("hey bot, you awake?", "hey bot, you awake?"),
        ("how do I uninstall on mac?", "how do I uninstall on mac?"),
    ],
)
def test_the_question_after_a_greeting_is_read_without_it(message, question):
    assert signals.after_chat_opening(message) == question


@pytest.mark.slow
@pytest.mark.parametrize(
    ("message", "facts"),
    [
        ("morning! where's the export?", ["File > Export"]),
        ("ok great, how do I change my card?", ["Change the card on file"]),
        # what the Windows or the Linux sections say (installing or removing)
        ("great, what about windows?", ["FernlightSetup.exe", "Open Settings > Apps"]),
        ("thanks! what about linux?", ["sudo apt install", "sudo apt remove"]),
        ("thanks, but how do I uninstall on mac?", ["drag it from the Applications folder to the Bin"]),
        ("hi! where do I find invoices?", ["Settings > Billing > Invoices"]),
        # thanks for something first: "You're welcome!" or the experts before
        ("thanks for that! how do I change my card?", ["Change the card on file"]),
        ("thanks for the quick reply. what about windows?", ["FernlightSetup.exe", "Open Settings > Apps"]),
        ("thank you for the help! what about linux?", ["sudo apt install", "sudo apt remove"]),
    ],
)
def test_a_question_after_thanks_or_a_greeting_is_answered(workdir, message, facts):
    reply = ask(workdir, message, "--source", "docs")
    assert reply["kind"] == "answer", reply
    assert any(f in reply["answer"] for f in facts) and GREETING not in reply["answer"], reply["answer"]


@pytest.mark.slow
def test_a_follow_up_opening_with_thanks_is_answered_in_its_thread(workdir):
    first = ask(workdir, "how do I export a notebook?", "--source", "docs", "--thread", "greet-thread")
    assert first["kind"] == "answer", first
    reply = ask(workdir, "cool thanks. and where do I find invoices?", "--source", "docs", "--thread", "greet-thread")
    assert reply["kind"] == "answer", reply
    assert "Settings > Billing > Invoices" in reply["answer"], reply["answer"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("message", "reply_opens"),
    [
        ("hi", GREETING),
        ("thanks!", "You're welcome!"),
        ("hello, is anybody here?", GREETING),
        ("thanks, that sorted it", "You're welcome!"),
        ("thanks for the help!", "You're welcome!"),
    ],
)
def test_a_greeting_or_thanks_alone_still_gets_the_greeting(workdir, message, reply_opens):
    reply = ask(workdir, message, "--source", "docs")
    assert reply["kind"] == "direct" and reply["answer"].startswith(reply_opens), reply
    assert reply["path"] == ["start", "route", "direct", "finish"], reply
