"""Short questions a new user asks about their own product's manual, without its name: the real
`threadwise ask` process, offline (local embeddings, the extractive composer), on a product manual
written for these tests (tests/data/docsites/ferrylink: install and uninstall per OS, requirements,
ports, an error-code table, a FAQ). The embedding of a short question lies near the examples of
every route class; these are answered from the pages, or asked of the experts, and never greeted
or told they are not about the documents."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from graphs import signals
from tests.cli_helpers import ask
from tests.test_question_kinds import write_config

FERRYLINK = Path(__file__).parent / "data" / "docsites" / "ferrylink"
GREETING = "Ask me a question about"
NOT_ABOUT_IT = "does not look like a question about it"


@pytest.fixture
def manual(tmp_path: Path) -> Path:
    """A folder with a copy of the Ferrylink manual under ``guide/`` and a config.toml reading it."""
    shutil.copytree(FERRYLINK, tmp_path / "guide")
    write_config(tmp_path)
    return tmp_path


@pytest.mark.parametrize(
    "message, chat",
    [
        ("hey bot, you awake?", True),
        ("thanks, that sorted it 🙏", True),
        ("ok perfect, cheers", True),
        ("how are you?", True),
        ("see you tomorrow", True),
        ("how do I uninstall it?", False),
        ("ab403", False),
        ("Which port does the relay use?", False),
    ],
)
def test_a_message_sounds_like_chat_only_with_a_greeting_word_or_no_content_word(message, chat):
    assert signals.sounds_like_chat(message) == chat


@pytest.mark.parametrize(
    "message, own, lookup, timely",
    [
        ("how much memory do I need?", True, False, False),
        ("can we run it on ARM?", True, False, False),
        ("what does HTTP 429 mean again", False, False, True),
        ("explain 'idempotent' in one sentence pls", False, False, False),
        ("AB-500", False, True, False),
        ("hi", False, False, False),
        ("is Windows 10 supported?", False, False, False),
        ("did they ship v11 yet or are we still on v10", True, False, True),
        ("are trains running tomorrow with the strike?", False, False, True),
    ],
)
def test_the_words_that_veto_a_route_class_are_told(message, own, lookup, timely):
    assert signals.speaks_of_own_setup(message) == own
    assert signals.is_lookup(message) == lookup
    assert signals.speaks_of_time(message) == timely


@pytest.mark.slow
def test_short_questions_about_the_product_are_answered_not_greeted(manual: Path):
    """Short questions were greeted ("how do I uninstall it?", near "how are you?"), told they are no
    question about the documents ("how much memory do I need?", near "how many bytes in a kilobyte")
    or sent to the experts ("which OS do we need?", near "is github down right now?": taken for
    current events, it had to match a page more strongly than the Requirements section does)."""
    answer = ask(manual, "how do I uninstall it?")
    assert answer["kind"] == "answer" and "apt-get remove ferrylink" in answer["answer"], answer
    answer = ask(manual, "how much memory do I need?")
    assert answer["kind"] == "answer" and "4 GB of memory" in answer["answer"], answer
    answer = ask(manual, "which OS do we need?")
    assert answer["kind"] == "answer" and "Windows 10 or 11" in answer["answer"], answer
    answer = ask(manual, "thanks, that sorted it")
    assert answer["kind"] == "direct" and "welcome" in answer["answer"], answer


@pytest.mark.slow
@pytest.mark.parametrize("code, kind, says", [("FL-403", "answer", "folder's owner"), ("AB-500", "help_request", "")])
def test_a_message_of_one_code_is_looked_up_not_greeted(manual: Path, code: str, kind: str, says: str):
    """A code alone is a lookup: the table's row when a page names it, else the experts are asked."""
    answer = ask(manual, code)
    assert answer["kind"] == kind and "retrieve" in answer["path"], answer
    assert GREETING not in (answer["answer"] or "") and says in (answer["answer"] or ""), answer


@pytest.mark.slow
def test_a_question_naming_a_section_is_answered_from_it(manual: Path):
    """A question naming a section was sent to the experts ("system requirements?"): the list under
    "Requirements" ("4 GB of memory", "Windows 10 or 11") never repeats the words asked, and the bar
    was measured on the items alone. A sentence is graded with its section heading's words, so the section answers."""
    answer = ask(manual, "system requirements?")
    assert answer["kind"] == "answer" and "4 GB of memory" in answer["answer"], answer
    assert answer["sources"] and "install.md" in str(answer["sources"][0]), answer
