"""A question naming the label that tells sibling units apart (a table row's first cell, a release's
version heading) is answered from the unit under that label, not from a sentence that only mentions
it nor from a sibling unit: the real `threadwise ask`, offline (the extractive composer), on pages
written for this test."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli_helpers import ask, write_pages
from tests.conftest import requires_offline_model
from tests.test_question_kinds import write_config

PLANS = """# Tidepool plans

## Plans

| Plan | Price per seat per month | Seats | What you get |
|---|---|---|---|
| Solo | 8 EUR | 1 | Notes and sync |
| Studio | 22 EUR | up to 40 | Shared boards, exports |
| Campus | Ask us | unlimited | Single sign-on, audit trail |

## Discounts

Paying for a year up front saves 10%. Schools pay half the Studio price.
"""

CHANGES = """# Tidepool release notes

## 3.2.0

- New: boards can be exported as PDF.
- Changed: the autosave interval is now 20 seconds.

## 3.1.0

- New: a sticky-note colour picker.
- Fixed: exports of large boards no longer time out.
"""

INCIDENTS = """# Incident handling

Incidents are tracked in the #tide-incidents channel. The duty rota changes every Tuesday.

## Priorities

- **P1**: everyone is locked out. Call the duty engineer at once; acknowledge within 10 minutes.
- **P2**: one feature fails for many teams. Acknowledge within 2 hours.
- **P3**: one user is affected. Handle it the next working day.

Duty pay is 180 EUR per week, plus 40 EUR for each night call.
"""


FAQ = """# Tidepool questions

### Can I draw with a pen tablet?

Yes. Any tablet your system supports works, with pressure on Windows and macOS.

### Can guests edit a board?

No. Guests can look and comment; only members can edit.

### Can I restore a deleted board?

Yes. Deleted boards stay in the Bin for 30 days, then they are gone for good.
"""


def lead(answer: str) -> str:
    """What a reader takes in first: the answer's first 300 characters."""
    return answer[:300]


@pytest.mark.slow
@requires_offline_model
def test_a_question_naming_a_row_or_a_version_is_answered_from_it(tmp_path: Path):
    """A question for "how much does the studio plan cost" opened with the Discounts sentence mentioning Studio and
    never quoted the Studio row (a page with prose quoted no row of its table); "what changed in
    3.2.0" quoted the 3.1.0 items after the 3.2.0 ones, as if they had changed in 3.2.0 too."""
    write_pages(tmp_path / "guide", {"plans.md": PLANS, "changes.md": CHANGES, "incidents.md": INCIDENTS})
    write_config(tmp_path)
    price = ask(tmp_path, "how much does the studio plan cost")["answer"]
    assert "22 EUR" in lead(price), price
    changed = ask(tmp_path, "what changed in 3.2.0")["answer"]
    assert "exported as PDF" in lead(changed), changed
    assert "colour picker" not in changed, changed


@pytest.mark.slow
@requires_offline_model
def test_a_question_naming_an_item_of_a_list_is_answered_from_that_item_alone(tmp_path: Path):
    """ "what's the acknowledge time for p2" quoted the P2 item and went on into P3's "the next working
    day", which a reader takes for more of the P2 answer."""
    write_pages(tmp_path / "guide", {"incidents.md": INCIDENTS, "plans.md": PLANS})
    write_config(tmp_path)
    p2 = ask(tmp_path, "what's the acknowledge time for p2")["answer"]
    assert "within 2 hours" in lead(p2), p2
    assert "10 minutes" not in lead(p2) and "next working day" not in lead(p2), p2


@pytest.mark.slow
@requires_offline_model
def test_a_yes_no_question_is_answered_by_its_own_faq_entry(tmp_path: Path):
    """An FAQ written with one heading per question, read as a whole page: "can guests edit a board"
    opened with the pen-tablet entry's "Yes. Any tablet ..." (every sentence of the page was read with
    the heading of the entry the search found), a yes to another question before the entry's "No."."""
    write_pages(tmp_path / "guide", {"faq.md": FAQ, "plans.md": PLANS})
    write_config(tmp_path)
    guests = ask(tmp_path, "can guests edit a board")["answer"]
    assert guests.startswith("No. Guests can look and comment"), guests
    assert "Any tablet" not in lead(guests), guests
