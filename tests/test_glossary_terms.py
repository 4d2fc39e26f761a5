"""A question asking what a word means is answered by the entry that defines it, not by a how-to
section whose heading merely holds the word: on a handbook with a glossary and how-to pages,
"what's a dock" was answered with "Run `tw dock reset` ..." under "## Resetting a dock" and the
glossary's "Dock" / ": A cabinet that ..." was only named in "More in". A definition list's term
and a bold term are labels like a heading (graphs/extractive.py unit_labels), and a label that is
all the question asks about counts twice (names_all_asked). Through the real `threadwise ask`,
offline, on pages written here."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli_helpers import ask, offline_folder
from tests.conftest import requires_offline_model

GLOSSARY = """# Tidewell words

The words the Tidewell guides use, in one place.

Dock
: A cabinet that charges the handheld scanners of one warehouse aisle overnight.

Manifest
: The signed list of every parcel that leaves the warehouse on one truck.

Bay
: A numbered floor area where pallets wait before they are loaded.
"""

TERMS = """# Billing words

**Seat**: one person allowed to sign in to Tidewell, paid for each month.

**Tier**: the price band of an account, set by how many parcels it ships a year.
"""

HOWTO = """# Everyday fixes

## Resetting a dock
Run `tw dock reset --aisle N` from the office laptop; the scanners in it reconnect within a minute.

## Reprinting a manifest
Open the truck's page, choose Print again, and sign the new copy; the old one is void.

## Freeing a bay
Scan the bay's barcode and pick Empty; the next pallet can be placed there straight away.

## Adding a seat
An account owner adds a seat under Billing > People; the new person gets an invitation email.
"""


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    pages = {"glossary.md": GLOSSARY, "billing.md": TERMS, "fixes.md": HOWTO}
    return offline_folder(tmp_path_factory.mktemp("terms"), pages)


@pytest.mark.slow
@requires_offline_model
@pytest.mark.parametrize(
    ("question", "definition", "how_to"),
    [
        ("what's a dock", "A cabinet that charges the handheld scanners", "tw dock reset"),
        ("what is a manifest?", "The signed list of every parcel", "Print again"),
        ("what does bay mean", "A numbered floor area", "Scan the bay's barcode"),
        ("define dock", "A cabinet that charges the handheld scanners", "tw dock reset"),
        ("what's a seat", "one person allowed to sign in", "Billing > People"),
    ],
)
def test_the_entry_defining_the_word_asked_about_leads(workdir, question, definition, how_to):
    reply = ask(workdir, question, "--source", "docs")
    assert reply["kind"] == "answer", reply
    answer = reply["answer"]
    assert definition in answer.split("\n\n")[0], answer
    assert how_to not in answer, answer


@pytest.mark.slow
@requires_offline_model
@pytest.mark.parametrize(
    ("question", "how_to"),
    [("how do i reset a dock?", "tw dock reset"), ("how do I add a seat", "Billing > People")],
)
def test_a_how_to_question_naming_a_defined_word_keeps_its_section(workdir, question, how_to):
    reply = ask(workdir, question, "--source", "docs")
    assert reply["kind"] == "answer", reply
    assert how_to in reply["answer"].split("\n\n")[0], reply["answer"]
