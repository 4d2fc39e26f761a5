"""A list is quoted with its introduction, its items in the page's order, and the passages of one
section read in the page's order: on a handbook's sick pay section the answer opened with the list's
second and third items, then a paragraph, then the first item, then the list's introduction ("Across
any twelve months in a row, Quillmark pays you:") last; an expenses list was quoted in two halves
with a sentence of another section between them. Through the real `threadwise ask`, offline, on
pages written here."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli_helpers import ask, offline_folder
from tests.conftest import requires_offline_model

SICK = """# Being unwell

Tell your team lead before ten in the morning on any day you cannot work because you are ill.

## Sick pay

Across any twelve months in a row, Quillmark pays you:

- your usual salary for the first fifteen working days you are off sick
- three quarters of your salary for the following ten working days off sick
- the statutory amount after that, for as long as the law allows it to be paid

Part-time staff get the same number of weeks, counted in their own working days. The days are counted from the
first day of the earliest absence inside those twelve months. A doctor's note is needed from the eighth
calendar day of any one absence.
"""

CARE = """# Caring for someone

## Carer's leave

When someone who depends on you is ill, you can take up to five days of paid carer's leave a year. Ask your
team lead by message; no form is needed. Carer's leave is counted apart from your own sick days.
"""

HOLIDAY = """# Holidays

Everyone gets twenty-six days of paid holiday a year plus public holidays. Up to five unused days move to the
next year.
"""

EXPENSES = """# Expenses

Keep every receipt, on paper or as a photo, until the claim is paid.

## What you can claim

Quillmark pays back what you spent for work when it is one of these:

- train or bus fares to a customer's office, in standard class, booked as early as you can
- a hotel night when the customer's office is more than three hours from home
- lunch on a day spent at a customer's office, up to fifteen pounds
- books and courses your team lead agreed to beforehand in writing

Claims go in within two months of the spending. Late claims are paid only when a director agrees.
"""


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    pages = {"sick.md": SICK, "care.md": CARE, "holiday.md": HOLIDAY, "expenses.md": EXPENSES}
    return offline_folder(tmp_path_factory.mktemp("lists"), pages)


def listed(page: str, intro: str) -> str:
    """The introduction ``intro`` of ``page`` and its list's items, one a line, as quoted."""
    lines = page.split("\n")
    at = next(i for i, line in enumerate(lines) if line.startswith(intro))
    items = []
    for line in lines[at + 1 :]:
        if line.startswith("- "):
            items.append(line)
        elif items:
            break
    return "\n".join([lines[at], *items])


@pytest.mark.slow
@requires_offline_model
@pytest.mark.parametrize(
    ("question", "page", "intro", "first"),
    [
        ("what do I get paid when I'm off sick", SICK, "Across any twelve months", True),
        ("how much sick pay do we get", SICK, "Across any twelve months", True),
        ("can i claim a hotel?", EXPENSES, "Quillmark pays back", True),
        ("what expenses can I claim back", EXPENSES, "Quillmark pays back", False),
    ],
)
def test_a_list_is_quoted_with_its_introduction_in_the_pages_order(workdir, question, page, intro, first):
    answer = ask(workdir, question, "--source", "docs")["answer"]
    whole = listed(page, intro)
    assert whole in answer, answer
    if first:  # the list answers: it leads, its introduction first
        assert answer.startswith(whole), answer
