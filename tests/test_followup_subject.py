"""A follow-up in a thread is answered about what it asks now, offline: "and sick leave?" after a
question about holiday leads with the sick-leave rule, not with the holiday paragraph the thread
was about; "ok and train tickets?" after a taxi question leads with the train row of the expenses
table. The thread's earlier words only tell which page the follow-up is about. The pages are our
own words, of the kinds a staff handbook and a product guide have."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli_helpers import ask, write_pages
from tests.conftest import requires_offline_model
from tests.test_question_kinds import write_config

TIME_OFF = """# Time off at Pinewood

## Holiday

Everyone on a full contract gets **26 days** of holiday a year, on top of bank holidays. Part-time
staff get the same share of their hours. Up to three unused days move to the next year.

Book holiday in Rota at least a week ahead when it is longer than two days.

## Sick leave

Let your team lead know by 9:30 on the first morning. After four days of illness, send a fit note
from your doctor to the people team.

## Parental leave

Pinewood tops up statutory pay to your full salary for the first **12 weeks** of parental leave.
"""

EXPENSES = """# Expenses

Claim in Ledgerly within a month of paying, with a photo of the receipt.

## Limits

| Item | Limit | Notes |
|------|-------|-------|
| Taxi | 35 EUR per ride | only when no bus or tram runs, or after 22:00 |
| Train | standard class | first class on journeys over three hours |
| Hotel | 130 EUR per night | breakfast included where offered |
| Meals | 30 EUR per day | on trips away from your office |
"""

# a product page sharing "tickets" with the train question: the thread tells them apart
HELPDESK = """# Helpdesk app troubleshooting

## Tickets do not appear

When new tickets do not appear in the inbox, sign out and sign in again, then check that the inbox
filter is set to "All tickets".

## Tickets open slowly

Tickets with many attachments open slowly on mobile; open them on the web app instead.
"""


def lead(answer: str) -> str:
    """The part of an answer a reader sees first (its first 300 characters)."""
    return answer[:300]


def opening(answer: str) -> str:
    """The answer's first paragraph."""
    return answer.split("\n\n", 1)[0]


@pytest.mark.slow
@requires_offline_model
def test_a_follow_up_leads_with_what_it_asks_now_not_the_previous_answer(tmp_path: Path):
    """`threadwise ask --thread` twice: the follow-up's answer opens with the new subject's rule
    (sick leave; the train row), not with the previous answer's paragraph (holiday; the taxi row).
    The sick-leave sentences never say "sick" (their heading does), and the follow-up shares "leave"
    with the holiday question, so the thread's words pulled the holiday paragraph back to the lead."""
    write_pages(tmp_path / "guide", {"time-off.md": TIME_OFF, "expenses.md": EXPENSES, "helpdesk.md": HELPDESK})
    write_config(tmp_path)

    first = ask(tmp_path, "how many days of holiday leave do i get", "--thread", "leave")["answer"]
    assert "26 days" in lead(first), first
    sick = ask(tmp_path, "and sick leave?", "--thread", "leave")["answer"]
    assert "fit note" in lead(sick) or "9:30" in lead(sick), sick
    assert "26 days" not in opening(sick), sick

    ask(tmp_path, "can i expense a taxi?", "--thread", "travel")
    train = ask(tmp_path, "ok and train tickets?", "--thread", "travel")["answer"]
    assert "first class on journeys over three hours" in opening(train), train
    assert "35 EUR" not in opening(train) and "sign out" not in opening(train), train


ERRORS = """# Error codes

Every error the Lumen agent shows has a code and a short meaning.

| Code | Meaning | What to do |
|------|---------|------------|
| LM-401 | The sign-in token expired | Sign in again from the tray icon. |
| LM-507 | The local store is full | Run `lumen store trim` or raise `store.limit_mb`. |
| LM-612 | The proxy refused the connection | Check `proxy.address` with your network team. |
"""

SETTINGS = """# Settings

Lumen reads its settings from `lumen.toml` in your home folder. Restart the agent after a change.

| Setting | Type | Default | Meaning |
|---------|------|---------|---------|
| `account` | string | (none) | Your workspace name. Required. |
| `store.limit_mb` | integer | `800` | Largest size of the local store, in MB. |
| `store.keep_days` | integer | `30` | Days a synced message stays in the local store. |
| `proxy.address` | string | (none) | Proxy for all connections, as host:port. |
| `sync.every_seconds` | integer | `45` | How often the agent syncs. |
"""

CHANGES = """# What's new

## 3.1

- New: the default theme follows the system setting.
- Changed: the default `sync.every_seconds` is now 45 (was 90).
- Removed: the `legacy_login` setting.
"""


@pytest.mark.slow
@requires_offline_model
def test_a_follow_up_pointing_back_at_a_setting_gets_that_settings_default(tmp_path: Path):
    """ "whats the default for that setting" after an answer telling to raise `store.limit_mb`: the
    answer opens with that setting's row of the settings table (its default, 800), not with release
    notes about other defaults; "that setting" is named in the previous answer, not in the user's
    earlier words."""
    write_pages(tmp_path / "guide", {"errors.md": ERRORS, "settings.md": SETTINGS, "changes.md": CHANGES})
    write_config(tmp_path)

    first = ask(tmp_path, "what does LM-507 mean", "--thread", "store")["answer"]
    assert "store.limit_mb" in opening(first), first
    default = ask(tmp_path, "whats the default for that setting", "--thread", "store")["answer"]
    assert "store.limit_mb" in opening(default) and "800" in opening(default), default


INSTALL = """# Installing Fernhill

Fernhill runs on three desktop systems and as a server in a container. Each needs about 300 MB of disk.

## Linux

1. Download the `fernhill.tar.gz` archive from the downloads page.
2. Unpack it with `tar -xzf fernhill.tar.gz -C ~/.local`.
3. Run `~/.local/fernhill/setup.sh` to add Fernhill to the application menu.

## macOS

1. Open the `Fernhill.dmg` file you downloaded.
2. Drag the Fernhill icon into the Applications folder.

## Windows

1. Run `FernhillSetup.exe` as a normal user, not as an administrator.
2. Finish the wizard and start Fernhill from the Start menu.

## Docker

Start the server edition with `docker run -p 8080:8080 fernhill/server`, then open port 8080 in a browser.
"""

# what each section's steps alone hold
SECTION_STEPS = {
    "linux": "fernhill.tar.gz",
    "macos": "Fernhill.dmg",
    "windows": "FernhillSetup.exe",
    "docker": "docker run",
}


@pytest.mark.slow
@requires_offline_model
def test_a_follow_up_naming_a_sibling_section_is_answered_from_that_section(tmp_path: Path):
    """After "how do I install it on linux?" was answered with the Linux steps, "same for docker?", "what
    about docker then?" and "does that work on docker too?" were answered with the Linux steps again: their
    words pointing back ("same", "then", "that") read the follow-up with the names the previous answer
    quotes (`fernhill.tar.gz`, `~/.local/fernhill/setup.sh`), which pulled the answer back to the Linux
    section. A follow-up asking the same about another thing it names is answered from that thing's
    section, and not with the Linux steps."""
    write_pages(tmp_path / "guide", {"install.md": INSTALL, "time-off.md": TIME_OFF, "expenses.md": EXPENSES})
    write_config(tmp_path)
    follow_ups = [
        ("same for docker?", "docker"),
        ("what about docker then?", "docker"),
        ("does that work on docker too?", "docker"),
        ("is it the same on windows?", "windows"),
        ("what about mac", "macos"),
    ]
    for n, (question, section) in enumerate(follow_ups):
        first = ask(tmp_path, "how do I install it on linux?", "--thread", f"install-{n}")["answer"]
        assert SECTION_STEPS["linux"] in lead(first), first
        answer = ask(tmp_path, question, "--thread", f"install-{n}")["answer"]
        assert SECTION_STEPS[section] in lead(answer), (question, answer)
        assert SECTION_STEPS["linux"] not in answer, (question, answer)
