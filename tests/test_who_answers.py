"""A question about who in the team does, approves or owns something is answered only by a sentence naming
who does it: "who signs off a release?" was answered with a changelog's "The release notes now open from the
help menu." (it shares "release"), "who approves a hotfix?" with the hotfix steps, and "which team owns the
billing service?" with what the billing service does; none names anyone, so the question goes to the experts,
who know. A page that says who does it ("reviewed by one maintainer", "the security team handles ...") still
answers. Through the real `threadwise ask` process, offline, on pages written here."""

from __future__ import annotations

from pathlib import Path

import pytest

from graphs import signals
from tests.cli_helpers import ask_logged, offline_folder

CHANGELOG = """# Changelog

## 3.10.1 (2026-11-20)
- Fixed boards not loading when a column name holds an emoji.

## 3.10.0 (2026-10-30)
- Boards can be archived instead of deleted.
- The release notes now open from the help menu.

## 3.9.0 (2026-08-12)
- Cards can carry a due time as well as a due date.
- Faster search in large workspaces.

## 2.4.0 (2026-02-02)
- Dark theme for the desktop app.

## 1.0.0 (2025-06-01)
- First public release.
"""

RELEASING = """# Releasing Lumenfold

Releases are cut from the main branch every second Tuesday. Tag the release commit with its version and
run `make release`, which builds the installers and uploads them to the downloads page.

## Hotfixes

A hotfix is a release made between two Tuesdays for a bug that blocks customers. Hotfix branches start
from the last release tag, and the hotfix goes out as soon as its tests pass.

## Code review

Every pull request is reviewed by one maintainer of the repository before it is merged.
"""

SERVICES = """# Services

The billing service sends invoices on the first day of each month and retries failed card payments
three times. The search service rebuilds its index every night.

## Security incidents

The security team handles every suspected breach. Report it in the #security channel at once.
"""

PLANS = """# Plans and billing

Lumenfold has a free plan and a Team plan. Billing is monthly or yearly.

The Free plan allows three members on a board. The Team plan costs 7 EUR per member per month and has no
member limit. Invoices are sent by email on the first day of each billing period.
"""

# who does it is said in a list under a heading; what it is for, only in the page's title
OFF_SICK = """# Being off sick

Rest first; the forms can wait until you are back.

## Who to tell

On the first morning you are ill, let these know:

- your team lead, by phone before ten
- the people inbox, with the days you expect to be away
"""

EXPENSES = """# Expense claims

Claims are paid with the next salary run when they arrive before the 20th.

## Sign-off

- your budget holder, for amounts up to 500 EUR
- the finance director, above that
"""


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    pages = {"changelog.md": CHANGELOG, "releasing.md": RELEASING, "services.md": SERVICES, "plans.md": PLANS}
    pages |= {"off-sick.md": OFF_SICK, "expenses.md": EXPENSES}
    return offline_folder(tmp_path_factory.mktemp("who"), pages)


def test_a_sentence_answers_a_who_question_when_it_names_who_does_it():
    assert signals.asks_who_in_team("which team owns the billing service?")
    assert not signals.asks_who_in_team("which team plan includes single sign-on?")
    assert signals.says_who_does("who signs off a release?", "The release manager signs off each release.")
    assert not signals.says_who_does("who signs off a release?", "The release notes now open from the help menu.")
    assert signals.says_who_does("who approves a hotfix?", "Ask @dana before a hotfix goes out.")
    assert not signals.says_who_does("who approves a hotfix?", "Managers approve holiday requests.")
    assert not signals.says_who_does("which team owns the billing service?", "The security team handles breaches.")


@pytest.mark.slow
@pytest.mark.parametrize(
    "question",
    [
        "who signs off a release?",
        "who approves a hotfix?",
        "which team owns the billing service?",
        "who decides when a release is cut?",
        "who is responsible for the billing service?",
    ],
)
def test_a_who_question_no_sentence_answers_goes_to_the_experts(workdir, question):
    reply, stderr = ask_logged(workdir, question, "--source", "docs")
    assert reply["kind"] == "help_request", (reply, stderr[-1500:])


@pytest.mark.slow
@pytest.mark.parametrize(
    ("question", "who"),
    [
        ("who reviews a pull request?", "one maintainer"),
        ("which team handles security incidents?", "The security team"),
        ("who do I tell when I am off sick", "your team lead"),
        ("who do i let know when im sick", "your team lead"),
        ("who signs off expense claims?", "your budget holder"),
    ],
)
def test_a_who_question_a_sentence_answers_is_answered_with_it(workdir, question, who):
    reply, stderr = ask_logged(workdir, question, "--source", "docs")
    assert reply["kind"] == "answer" and who in reply["answer"][:300], (reply, stderr[-1500:])
