"""An item quoted from under a short sub-heading that says what the items are ("### Removed", "### Fixed",
"### Known issues", "### Don't") is quoted with it: "whats new in v2" answered "The legacy REST API." from
a changelog's "### Removed", read as if the REST API were new, "what changed in 3.10?" answered "Login
loop on Safari." from "### Fixed", read as a feature, and a style guide's "### Don't" rules were quoted as
rules to follow. Now the answer shows the sub-heading in bold before its items ("**Removed**:"). Through
the real `threadwise ask` process, offline, on pages written here; and a release's section found from a
page's chunks keeps its sub-headings."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from graphs import releases
from tests.cli_helpers import ask, offline_folder

CHANGELOG = """# Changelog

## [2.0.0] - 2024-01-05
### Added
- Webhooks for every event.
### Removed
- The legacy REST API.

## [1.4.0] - 2023-09-12
### Added
- Export of reports as PDF.
### Fixed
- Dates shown in the wrong time zone.
"""

NOTES = """# Release notes

## 3.11.0 (2025-02-01)
### Changed
- Sessions now last eight hours.

## 3.10.0 (2024-11-20)
### Fixed
- Login loop on Safari.
- Slow search on large spaces.
### Known issues
- Uploads over 2 GB stall at 99 percent.
"""

STYLE = """# Writing commit messages

Every commit message on the team follows these rules.

## Subject line

### Do
- Start with a verb in the imperative.
- Keep it under fifty characters.

### Don't
- End the subject with a full stop.
- Write "misc fixes" or "wip".
"""

# a sub-heading shown before the items under it: "**Removed**:"
_SHOWN = re.compile(r"\*\*([^*\n]+)\*\*:")


def shown_over(answer: str, phrase: str) -> str | None:
    """The last sub-heading shown in ``answer`` before ``phrase`` (None when none is, or the phrase is
    not quoted)."""
    at = answer.find(phrase)
    if at < 0:
        return None
    found = _SHOWN.findall(answer[:at])
    return found[-1] if found else None


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    pages = {"changelog.md": CHANGELOG, "notes.md": NOTES, "style.md": STYLE}
    return offline_folder(tmp_path_factory.mktemp("categories"), pages)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("question", "phrase", "heading"),
    [
        ("whats new in v2", "The legacy REST API", "Removed"),
        ("whats new in v2", "Webhooks for every event", "Added"),
        ("what was removed in 2.0?", "The legacy REST API", "Removed"),
        ("what changed in 3.10?", "Login loop on Safari", "Fixed"),
        ("what changed in 3.10?", "Uploads over 2 GB stall", "Known issues"),
        ("what should I not do in a commit subject?", "full stop", "Don't"),
    ],
)
def test_an_item_is_quoted_under_the_sub_heading_saying_what_it_is(workdir, question, phrase, heading):
    answer = ask(workdir, question, "--source", "docs")["answer"]
    assert phrase in answer, answer
    assert shown_over(answer, phrase) == heading, answer


def test_a_release_found_in_a_pages_chunks_keeps_its_sub_headings():
    chunks = [
        ("Changelog > [2.0.0] - 2024-01-05 > Added", "- Webhooks for every event."),
        ("Changelog > [2.0.0] - 2024-01-05 > Removed", "- The legacy REST API."),
        ("Changelog > [1.4.0] - 2023-09-12 > Added", "- Export of reports as PDF."),
    ]
    found = releases.newest_section(chunks)
    assert found is not None
    path, text = found
    assert path == "Changelog > [2.0.0] - 2024-01-05"
    assert text.index("### Removed") < text.index("The legacy REST API") and "Export" not in text
    page = {"title": "x", "text": "", "location": "c.md"}
    docs = releases.release_first("what changed in 1.4?", [page], lambda d: chunks)
    assert "### Added" in docs[0]["text"] and "Export of reports as PDF." in docs[0]["text"]
