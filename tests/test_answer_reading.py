"""An offline answer a new user takes in at a glance, on a product guide written for these tests:
the real `threadwise eval`, offline (local embeddings, the extractive composer). Lists are quoted as
lists, one item a line and never half an item; an FAQ's short reply ("No, not yet.") is the answer;
the steps of the operating system the user names, in their own word ("ubuntu", "my macbook",
"win11"), lead and the other systems' steps are left out."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.cli_helpers import write_offline_config, write_pages
from tests.conftest import requires_offline_model
from tests.test_cli_offline import threadwise

SHARING = """# Sharing boards

Every board has an owner. The owner decides who else may open it.

## Roles

A member of a board has one of these roles:

- Viewer: opens the board and reads every card, but cannot change anything or leave comments on the cards.
- Commenter: everything a viewer can do, plus leaving comments and reactions on any card of the board.
- Editor: adds, moves and deletes cards, renames columns, and changes the board's colours and background.
- Owner: everything an editor can do, plus inviting people, changing their roles and deleting the board.
"""

BACKUP = """# Backups

Lumenfold keeps a copy of your boards so that a mistake can be undone.

## What is backed up

The nightly backup copies the following items to a second data centre:

- every card, with its text, checklist and due date, as it was at midnight in your region
- the comments and reactions left on cards, including those of guests who have since left
- attached files up to 25 MB each; larger files are linked but not copied
- board settings such as colours, column names and who has access to the board

Backups are kept for 35 days. After that the oldest copy is removed each night.

## Restoring a board

1. Open the board's menu and choose Version history.
2. Pick the night you want to go back to.
3. Select Restore. The current board is kept as a copy named after today's date.
"""

SYNC = """# Sync problems

Boards normally sync within a few seconds. When a change does not reach your other devices, work through
the checks below before you contact support.

## When sync stops

- Look at the cloud icon in the top bar: a red cross means the app has lost its connection to the servers.
- Sign out and back in if the icon shows a key, because your session has expired after thirty days unused.
- Check the status page for an outage in your region; changes made meanwhile are sent once it is over.
- Make sure the device's clock is right, since a clock off by more than five minutes makes the servers
  refuse each change.

If none of this helps, send the sync log from Help, Diagnostics to support.
"""

PLANS = """# Plans and billing

Lumenfold has a free plan and a Team plan. Billing is monthly or yearly.

The Free plan allows three members on a board. The Team plan costs 7 EUR per member per month and has no
member limit. Invoices are sent by email on the first day of each billing period.
"""


def answers(tmp_path: Path, pages: dict[str, str], questions: list[str]) -> list[str]:
    """The answers of `threadwise eval` offline to ``questions`` (all knowledge-base rows), in
    order, on a guide of ``pages`` (file name -> Markdown) written under ``tmp_path``; "" for a
    question that got no answer."""
    write_pages(tmp_path / "guide", pages)
    write_offline_config(tmp_path, ["guide"], k=None)
    rows = [
        {"id": f"q{i}", "kind": "kb", "expected_route": "vectorstore", "question": q} for i, q in enumerate(questions)
    ]
    (tmp_path / "q.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = threadwise("eval", "q.jsonl", "--config", "config.toml", "--json", "out.json", cwd=tmp_path, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    by_id = {r["id"]: r.get("answer") or "" for r in json.loads((tmp_path / "out.json").read_text())["rows"]}
    return [by_id[f"q{i}"] for i in range(len(questions))]


def items(page: str) -> list[str]:
    """The bulleted items of ``page``, each as one line of text (a wrapped item joined)."""
    out: list[str] = []
    for line in page.splitlines():
        if line.startswith("- "):
            out.append(line[2:].strip())
        elif out and line.startswith("  ") and line.strip():
            out[-1] += " " + line.strip()
    return out


@pytest.mark.slow
@requires_offline_model
def test_a_quoted_list_keeps_one_item_a_line_and_every_item_whole(tmp_path: Path):
    """An answer quoting a bulleted list longer than a short list ran its items into one paragraph
    ("... comments on the cards. Commenter: everything a viewer can do ... Editor: adds, moves ..."),
    which reads as one long sentence in Slack, Discord and the console; the items are each on a line
    of their own, opening with "- ", and an item is quoted whole or not at all."""
    pages = {"sharing.md": SHARING, "backup.md": BACKUP, "sync.md": SYNC, "plans.md": PLANS}
    questions = [
        "what can a commenter do?",
        "what does the nightly backup copy?",
        "what roles can a board member have?",
    ]
    got = answers(tmp_path, pages, questions)
    every = items(SHARING) + items(BACKUP) + items(SYNC)
    for question, answer in zip(questions, got, strict=True):
        quoted = [it for it in every if it[:40] in answer]
        assert len(quoted) >= 2, (question, answer)
        for it in quoted:
            assert re.search(r"(?:^|\n)- " + re.escape(it) + r"(?: \[\d\])?(?:\n|$)", answer), (question, it, answer)


FAQ = """# Lumenfold FAQ

### Can I use it offline?

No, not yet.

### Does it sync between my devices?

Yes. Boards sync through your Lumenfold account a few seconds after each change, on every device where you
are signed in.

### How many boards can I keep?

Unlimited.

### Can I export a board to PDF?

Only on the Team plan. Free accounts can export PNG images instead.

### Can I share a board with someone outside my team?

Yes, with a read-only link. Open the board, choose Share, then Create link. Anyone with the link can read
the board until you turn the link off. They cannot edit or comment, and they do not see your other boards.

### Where are my boards stored?

In the Lumenfold cloud, in the region you picked when you signed up. A local copy is kept for speed while
the app runs.
"""

SUPPORT = """# Getting help

Our support team answers in English and German on working days.

Q: Is there a phone line?
A: Not anymore.

Q: How fast do you answer?
A: Within one working day, and within two hours for outages that stop a whole team.
"""


@pytest.mark.slow
@requires_offline_model
def test_a_short_faq_reply_is_the_answer(tmp_path: Path):
    """Under "### Can I use it offline?" the reply "No, not yet." was shorter than a sentence and dropped,
    and the answer opened with another entry ("In the Lumenfold cloud, ..."); "Unlimited." and "Not
    anymore." were lost the same way, and "can I share a board with someone outside my team" opened with
    the entry's fourth sentence ("They cannot edit or comment ...") before its "Yes, with a read-only
    link.". An FAQ entry's reply opens the answer, however short."""
    pages = {"faq.md": FAQ, "support.md": SUPPORT, "sharing.md": SHARING, "plans.md": PLANS}
    questions = [
        "can I use it offline?",
        "how many boards can I keep?",
        "can I share a board with someone outside my team?",
        "is there a phone line for support?",
    ]
    offline, boards, share, phone = answers(tmp_path, pages, questions)
    assert offline.startswith("No, not yet."), offline
    assert boards.startswith("Unlimited."), boards
    assert share.startswith("Yes, with a read-only link. Open the board, choose Share"), share
    assert "Not anymore." in phone[:300], phone


INSTALL = """# Installing Lumenfold

Lumenfold runs on the three desktop systems below. Each one needs about 300 MB of free disk space and a user
account that may install programs.

## Linux

1. Download the `lumenfold.tar.gz` archive from the downloads page.
2. Unpack it into your home folder with `tar -xzf lumenfold.tar.gz -C ~/.local`.
3. Run `~/.local/lumenfold/setup.sh` to add Lumenfold to the application menu.

## macOS

1. Open the `Lumenfold.dmg` file you downloaded.
2. Drag the Lumenfold icon into the Applications folder.
3. On the first launch, allow the app under System Settings, Privacy and Security.

## Windows

1. Run `LumenfoldSetup.exe` as a normal user, not as an administrator.
2. Pick the install folder, or keep the one the wizard suggests.
3. Finish the wizard and start Lumenfold from the Start menu.
"""

MOBILE = """# The mobile app

The phone app shows your boards and lets you add cards on the go. Editing columns needs the desktop app.

## iOS

Install Lumenfold from the App Store, then sign in with the same account you use on the desktop.
Notifications are turned on under Settings, Lumenfold, Notifications.

## Android

Install Lumenfold from the Google Play store, then sign in with your usual account. Allow notifications
when the app asks on its first start, or later under the system's app settings.
"""

# a page too long to be read whole: the search keeps at most two of its sections
SETUP = """# Setting up Quillmark

Quillmark is a note-taking app for teams. This page explains how to put it on your computer and how to keep
it up to date. Every system needs about 500 MB of disk space, a network connection during the first start
and an account on your team's Quillmark server.

Before you start, ask your administrator for the server address. It looks like `https://notes.example.org`
and is entered on the first start. Without it the app opens in a local demo mode, whose notes are not kept.

## Linux

Quillmark ships as an AppImage that runs on most distributions without root rights.

1. Download `Quillmark-x86_64.AppImage` from the releases page of your server.
2. Make it executable with `chmod +x Quillmark-x86_64.AppImage`.
3. Start it by double-clicking, or from a terminal with `./Quillmark-x86_64.AppImage`.
4. To add it to your menu, run it once with the `--integrate` option.

Distributions without FUSE need the `--appimage-extract-and-run` option instead. Wayland sessions are
supported from version 2.4 on; older versions fall back to XWayland.

## macOS

Quillmark needs macOS 12 or newer, on Intel or Apple silicon.

1. Download `Quillmark.dmg` from the releases page of your server.
2. Open the disk image and drag Quillmark into Applications.
3. Eject the disk image, then start Quillmark from Launchpad.
4. Answer Allow when macOS asks whether Quillmark may send notifications.

If macOS says the app is damaged, it was downloaded through a proxy that changed the file: download it
again on another network.

## Windows

Quillmark supports Windows 10 and 11, 64-bit only.

1. Download `QuillmarkSetup.msi` from the releases page of your server.
2. Double-click the installer and follow its three screens.
3. Start Quillmark from the Start menu; the first start takes up to a minute while the search index is built.

Company laptops managed with Intune can receive the same installer through the company portal. Ask your
administrator if the portal does not list it.

## Updating

Quillmark checks for a new version once a day and shows a blue dot on the menu button when one is ready.
Choose Restart to update. Your notes stay where they are during an update.
"""

# what each system's steps alone hold
STEPS = {
    "linux": ("lumenfold.tar.gz", "Quillmark-x86_64.AppImage"),
    "macos": ("Lumenfold.dmg", "Quillmark.dmg"),
    "windows": ("LumenfoldSetup.exe", "QuillmarkSetup.msi"),
}


@pytest.mark.slow
@requires_offline_model
def test_the_steps_of_the_system_the_user_names_lead_and_the_others_are_left_out(tmp_path: Path):
    """Sections "## Linux", "## macOS", "## Windows": "how do I install on ubuntu" quoted the Windows steps
    first and the Linux and macOS ones after them, "on my macbook" and "on win11" the same mix: a user names
    the system they run, the page its family. On a page too long to be read whole the search kept the
    macOS and Windows sections only (two a page) and the Linux steps were not quoted at all."""
    short = [
        ("how do I install on ubuntu", "linux", 0),
        ("how do I install it on my macbook", "macos", 0),
        ("installing on win11", "windows", 0),
        ("install on debian", "linux", 0),
        ("how do I install it on a mac", "macos", 0),
    ]
    long = [
        ("how do I install quillmark on ubuntu", "linux", 1),
        ("how do I install quillmark on my macbook", "macos", 1),
        ("install quillmark on windows 11", "windows", 1),
    ]
    # a guide of several pages: in a guide of three, "install" is in half the passages and says nothing
    guide = {"sharing.md": SHARING, "backup.md": BACKUP, "sync.md": SYNC, "faq.md": FAQ, "plans.md": PLANS}
    got = answers(tmp_path / "short", {"install.md": INSTALL, "mobile.md": MOBILE, **guide}, [q for q, _, _ in short])
    got += answers(tmp_path / "long", {"setup.md": SETUP, **guide}, [q for q, _, _ in long])
    for (question, system, page), answer in zip(short + long, got, strict=True):
        assert STEPS[system][page] in answer[:300], (question, answer)
        for other in STEPS.keys() - {system}:
            assert STEPS[other][page] not in answer, (question, other, answer)
        assert "Google Play" not in answer, (question, answer)  # the phone app's Android section


TALLYHOP = """# Tallyhop desktop client

Tallyhop keeps your timesheets in sync with the team's ledger.

## Installing

### Linux

Download the `.deb` package and install it with `sudo apt install ./tallyhop.deb`. The client starts on the next
login.

### Windows

Run `tallyhop-setup.exe` and accept the defaults. A shortcut appears on the desktop.

## Removing

### Linux

Remove the package with `sudo apt remove tallyhop`. Your timesheets stay on the server.

### Windows

Open Settings, Apps, find Tallyhop and choose Uninstall. Your timesheets stay on the server.
"""


@pytest.mark.slow
@requires_offline_model
def test_an_answer_keeps_to_the_section_and_the_entry_asked_about(tmp_path: Path):
    """A short page is read whole, and its "### Linux" under "## Removing" was read without the "##
    Removing" above it: "how do I install tallyhop on linux?" went on with the removal command and the
    Windows installer, and each removal question quoted both systems' steps of both sections. An FAQ
    entry named by the question ("where are my boards stored?") was followed by another page's
    paragraphs that only share a word with it (the roles of a board's members)."""
    pages = {"tallyhop.md": TALLYHOP, "faq.md": FAQ, "sharing.md": SHARING, "plans.md": PLANS}
    questions = [
        "how do I install tallyhop on linux?",
        "how do I remove tallyhop from windows?",
        "how do I remove tallyhop from linux?",
        "how many boards can I keep?",
        "can I export a board to PDF?",
        "where are my boards stored?",
    ]
    install, windows, linux, *entries = answers(tmp_path, pages, questions)
    steps = {"install": "apt install", "setup": "tallyhop-setup.exe", "remove": "apt remove", "settings": "Uninstall"}
    for answer, asked in ((install, "install"), (windows, "settings"), (linux, "remove")):
        assert steps[asked] in answer[:300], answer
        assert not [s for k, s in steps.items() if k != asked and s in answer], answer
    for answer in entries:
        assert answer and "Viewer:" not in answer and "Every board has an owner" not in answer, answer


@pytest.mark.slow
@requires_offline_model
def test_a_phone_named_by_its_model_or_maker_is_answered_from_its_systems_section(tmp_path: Path):
    """The phone app's page has "## iOS" and "## Android": "how do I get it on my iphone" shares no word
    with the iOS steps ("Install Lumenfold from the App Store ...") and was graded below the bar, so it
    went to the experts; "my samsung phone" and "my ipad" the same. The section of the system the phone
    runs answers, and the other system's is left out."""
    guide = {"sharing.md": SHARING, "backup.md": BACKUP, "sync.md": SYNC, "faq.md": FAQ, "plans.md": PLANS}
    asked = [
        ("how do I get it on my iphone", "App Store", "Google Play"),
        ("how do I install it on my samsung phone", "Google Play", "App Store"),
        ("can I get the app on my ipad", "App Store", "Google Play"),
    ]
    got = answers(tmp_path, {"install.md": INSTALL, "mobile.md": MOBILE, **guide}, [q for q, _, _ in asked])
    for (question, own, other), answer in zip(asked, got, strict=True):
        assert own in answer[:300] and other not in answer, (question, answer)


@pytest.mark.slow
@requires_offline_model
def test_a_device_named_with_its_model_is_answered_from_its_systems_section(tmp_path: Path):
    """ "my iphone" and "my samsung phone" were answered from the iOS and Android sections, but "my iphone
    15", "my ipad air 5" and "my samsung galaxy s24 ultra" went to the experts, the model ("15", "air
    5", "s24 ultra") read as words of the question no section holds; "my pixel 8" and "my galaxy s23"
    were answered with the desktop systems' steps, "pixel" and "galaxy" naming no system. A model after
    the device's name is part of its name: the section of the system it runs answers, and the other
    systems' steps are left out ("my macbook pro m3" was, and stays, answered so)."""
    guide = {"sharing.md": SHARING, "backup.md": BACKUP, "sync.md": SYNC, "faq.md": FAQ, "plans.md": PLANS}
    asked = [
        ("how do I get it on my iphone 15", "App Store"),
        ("how do I install it on my pixel 8", "Google Play"),
        ("how do I get the app on my galaxy s23", "Google Play"),
        ("how do I install it on my samsung galaxy s24 ultra", "Google Play"),
        ("how do I get it on my ipad air 5", "App Store"),
        ("can I get the app on my iphone 15 pro max", "App Store"),
        ("how do I install it on my macbook pro m3", "Lumenfold.dmg"),
    ]
    steps = ["App Store", "Google Play", "Lumenfold.dmg", "LumenfoldSetup.exe", "lumenfold.tar.gz"]
    got = answers(tmp_path, {"install.md": INSTALL, "mobile.md": MOBILE, **guide}, [q for q, _ in asked])
    for (question, own), answer in zip(asked, got, strict=True):
        assert own in answer[:300], (question, answer)
        assert not [s for s in steps if s != own and s in answer], (question, answer)


DETERMINER_NO = """# Quillby questions

### Is there a free trial?

30 days.
No payment details are asked for during it.

### Can anyone join my board?

Only people you invite.
No one outside your team can find a board by searching for it.

### Can I export to PDF?

No, not yet.
Exports to CSV work today.
"""


@pytest.mark.slow
@requires_offline_model
def test_a_sentence_opening_with_no_and_a_noun_is_no_verdict(tmp_path: Path):
    """ "No payment details are asked for" and "No one outside your team ..." open with "no" as a
    determiner: read as the entry's own "No." they led the answers to "is there a free trial?" and
    "can anyone join my board?" above the entry's reply ("30 days.", "Only people you invite."),
    reading as a no. A reply word standing alone ("No, not yet.") still leads."""
    questions = ["is there a free trial?", "can anyone join my board?", "can i export to pdf?"]
    trial, join, pdf = answers(tmp_path, {"faq.md": DETERMINER_NO}, questions)
    assert trial.startswith("30 days."), trial
    assert join.startswith("Only people you invite."), join
    assert pdf.startswith("No, not yet."), pdf


UNMARKED_FAQ = """# Brindle help

## Billing

### Is there a discount for schools

Half price.
Send us the school's registration number and we apply it from the next invoice.

### How long is a free trial

Three weeks.
You can extend it once by writing to support.

## Data

### How long are deleted notes kept

60 days.
After that they are erased from every copy, backups included.

### Where are backups stored

Oslo.
A second copy is kept in Stockholm for a year.
"""


@pytest.mark.slow
@requires_offline_model
def test_an_faq_heading_without_its_question_mark_still_gets_its_short_reply(tmp_path: Path):
    """FAQ headings are often written without "?" ("### How long are deleted notes kept"): their short
    replies ("60 days.") were dropped as shorter than a sentence, and another entry's number answered
    ("how long are deleted items kept" got the trial's "14 days"). The reply under a heading that asks,
    with or without its mark, leads."""
    questions = [
        "how long are deleted notes kept?",
        "is there a discount for schools",
        "where are the backups stored?",
        "how long is the free trial",
    ]
    deleted, schools, backups, trial = answers(tmp_path, {"help.md": UNMARKED_FAQ}, questions)
    assert deleted.startswith("60 days."), deleted
    assert schools.startswith("Half price."), schools
    assert backups.startswith("Oslo."), backups
    assert trial.startswith("Three weeks."), trial
