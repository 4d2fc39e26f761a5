"""The sentence that answers opens an offline answer: not a sentence pointing to another page, the
one stating an amount when a bound or a precision is asked for, the verdict when the question asks
whether. The pages are our own words, written the way the documentation kinds we measure on write."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from bot.eval import first_fact_position
from graphs import signals
from graphs.extractive import Extractive, TextEmbedder
from tests.cli_helpers import ask
from tests.conftest import requires_offline_model
from tests.test_question_kinds import write_config


def page(location: str, text: str, title: str = "") -> dict:
    return {"id": f"{location}#1", "location": location, "title": title, "text": text}


def compose(question: str, *docs: dict, **kw) -> str:
    return Extractive(TextEmbedder(None)).compose([question], list(docs), **kw)


PARENTAL_PAY = """## Parental leave pay

For more information on parental leave pay, see the People team's policy page.

The first 26 weeks are paid at your full salary, then 13 weeks at the statutory rate.
"""


def test_a_sentence_pointing_to_another_page_never_opens_the_answer():
    """ "For more information on parental leave pay, see ..." shares the most of the question's
    words and says nothing: the sentence that answers leads, and the pointer is not quoted before it."""
    answer = compose("is parental leave paid?", page("leave.md", PARENTAL_PAY))
    assert answer.startswith("The first 26 weeks are paid at your full salary"), answer
    assert "For more information" not in answer


@pytest.mark.parametrize(
    "sentence",
    [
        "See `JOBMOVE` for more information.",
        "Please see the retry pattern described in the `JOBMOVE` documentation.",
        "For details, refer to the networking page.",
        "For more information on signing requests in Tempora, see Request Signing.",
        "This command behaves exactly like `COUNTERADD`, so please refer to the documentation of `COUNTERADD` "
        "for further information.",
        "For an introduction to the sketch data structure check the `SKETCHCOUNT` command page.",
    ],
)
def test_pointer_sentences_are_told(sentence):
    assert signals.is_pointer(sentence)


@pytest.mark.parametrize(
    "sentence",
    [
        "For example, calling `LOGAPPEND` in the following form:",
        "Check the box to enable remote access.",
        "Read the value back with `GET`.",
        "Seeing the error again means the lock is still held.",
        "The key expires after the timeout; see the example below.",
    ],
)
def test_sentences_that_say_something_are_not_pointers(sentence):
    assert not signals.is_pointer(sentence)


@pytest.mark.parametrize(
    "question",
    [
        "whats the largest value a single string key can hold",
        "how exact is the unique visitor count from hyperloglog",
        "how precise are the scores, will i lose digits?",
        "and sick days, is there a max?",
        "what's the biggest number a counter can reach",
    ],
)
def test_bounds_and_precision_are_asked_as_amounts(question):
    assert signals.asks_for_quantity(question)


# a command reference page written like a key-value store's (no title, the command's name only in the file name)
BLOBPATCH = """Writes _value_ into the blob stored at _key_, beginning at _offset_ and replacing as many bytes
as _value_ holds. A blob shorter than _offset_ is first filled up with zero bytes, and a key that holds
nothing yet is treated as an empty blob, so the command always leaves a blob long enough for _value_ at
_offset_.

Keep in mind that the highest offset you can write at is 2^26 - 1 (67108863), since one blob holds at most
64 megabytes. Spread larger data over several keys.
"""


def test_a_question_asking_for_the_largest_value_leads_with_the_limit():
    """ "the largest value a blob can hold" asks for an amount: the sentence stating the limit
    leads, not the opening sentence sharing more of the question's words."""
    answer = compose("whats the largest value a blob key can hold", page("blobpatch.md", BLOBPATCH), budget=250)
    assert first_fact_position(answer, ["64 megabytes"]) < 250, answer


PLATFORMS = """# Running the server

The server runs on Linux, Windows and macOS, and in a container on any of them.

## BSD

FreeBSD and its derivatives are **not** supported, because the runtime does not build there.
"""


def test_a_question_asking_whether_leads_with_the_verdict():
    """ "can I run the server on FreeBSD?": the sentence saying it is not supported answers it,
    ahead of the page's opening sentence that shares as many of the question's words; a question
    asking how leads as before."""
    answer = compose("can I run the server on FreeBSD?", page("install.md", PLATFORMS), budget=100)
    assert answer.startswith("FreeBSD and its derivatives are **not** supported"), answer
    answer = compose("how does the server run on FreeBSD", page("install.md", PLATFORMS), budget=100)
    assert answer.startswith("The server runs on Linux"), answer


@pytest.mark.parametrize(
    ("question", "asks"),
    [
        ("can i run the server on truenas core / freebsd", True),
        ("if i INCR a counter that has an expire on it does the expire get reset", True),
        ("worker waits for jobs on a list, can it wait with no time limit?", True),
        ("is running the docker image on my mac mini fine?", True),
        ("storing 64 bit ids as scores, will i lose precision?", True),
        ("how do i get the index of every occurrence", False),
        ("what port is the web ui on by default?", False),
        ("dlna vanished after i upgraded, where did it go", False),
        ("my server is down", False),
    ],
)
def test_questions_asking_whether_are_told(question, asks):
    assert signals.asks_yes_no(question) is asks


@pytest.mark.parametrize(
    ("sentence", "verdict"),
    [
        ("FreeBSD and its derivatives are **NOT** supported.", True),
        ("As a rule you cannot take the company laptop abroad for any length of time.", True),
        ("The exported archive does not contain the access rights.", True),
        ("Builds for 32-bit ARM will not receive any updates.", True),
        ("If the alert is not firing, the alerting pipeline is broken.", False),
        ("Tickets are not needed for the staff car park.", False),
        ("The retention period is carried over to the copied bucket.", False),
    ],
)
def test_verdict_sentences_are_told(sentence, verdict):
    assert signals.states_verdict(sentence) is verdict


LEAVE_PAGE = """# Annual leave

Employees get 25 days of annual leave a year, plus bank holidays. Book leave in the HR system at least two weeks
ahead.

Contractors are not entitled to paid annual leave; agree time off with your account manager.
"""

EXPENSES_PAGE = """# Expenses

Claim expenses in the finance tool within 30 days of paying. Days spent travelling count as working days, and a
day of leave cannot be claimed back as an expense.
"""


def test_a_follow_up_answer_quotes_no_other_page_that_leaves_out_what_it_asks_now():
    """ "and for contractors?" after a question about annual leave: the contractors sentence leads, and
    the expenses page, which shares "days" and "leave" with the thread's question but says nothing about
    contractors, is not quoted after it."""
    questions = ["and for contractors?", "how many days of annual leave do we get? and for contractors?"]
    docs = [page("leave.md", LEAVE_PAGE), page("expenses.md", EXPENSES_PAGE)]
    answer = Extractive(TextEmbedder(None)).compose(questions, docs, focus=["contractors"])
    assert answer.startswith("Contractors are not entitled to paid annual leave"), answer
    quoted = answer.rsplit("\n\nMore in ", 1)[0]  # "More in" may name the page kept and not quoted
    assert "[2]" not in quoted and "travelling" not in answer, answer


TRAVEL_PAGE = """# Travel

Book train tickets through the travel portal; first class is allowed on journeys over three hours. See the
travel policy page for more information. The office team keeps a list of preferred hotels near each client
site.
"""


def test_a_passage_ends_before_a_sentence_pointing_elsewhere():
    """The sentences after the answering one are quoted up to a pointer ("See the travel policy page
    for more information."), not through it into what the page says next (hotels, for a question
    about train tickets), and the pointer is not quoted."""
    answer = compose("can I book first class train tickets?", page("travel.md", TRAVEL_PAGE))
    lead = answer.split("\n\n")[0]
    assert (
        lead == "Book train tickets through the travel portal; first class is allowed on journeys over three hours. [1]"
    )
    assert "See the travel policy" not in answer, answer


def test_a_sentence_only_its_page_rank_carried_is_not_quoted_after_the_answer():
    """ "The office team keeps a list of preferred hotels" shares nothing with a question about train
    tickets; on the first page its rank weight alone passed the support cutoff, so it padded the answer."""
    answer = compose("can I book first class train tickets?", page("travel.md", TRAVEL_PAGE))
    assert "hotels" not in answer, answer


EXPENSES = """## Claiming expenses

Submit each claim within 30 days of the purchase, with a photo of the receipt.

Claims are paid with the next monthly salary.
"""

TRAVEL = """## Booking travel

Travel expense claims need the booking reference the travel desk sends with each ticket.
"""

EXPENSES_LIMITS = """## Claim limits

Meals on a work trip are covered up to 40 euros a day.
"""


def more_in(answer: str) -> list[str]:
    """The citations of the answer's "More in" line ([] without one)."""
    last = answer.rsplit("\n\n", 1)[-1]
    return re.findall(r"\[\d+\]", last) if last.startswith("More in ") else []


def test_more_in_names_only_pages_not_quoted_yet_in_their_order():
    """The answer cites each quoted page where it quotes it; "More in" then points to the pages kept
    and not quoted that say something of the question (best first, one citation for a page of two
    sections), not to the same pages again."""
    docs = [
        page("finance/expenses.md", EXPENSES, "Expenses > Claiming expenses"),
        page("finance/travel.md", TRAVEL, "Travel > Booking travel"),
        page("finance/expenses.md", EXPENSES_LIMITS, "Expenses > Claim limits"),
    ]
    answer = compose("how many days do I have to submit an expense claim?", *docs, budget=130)
    assert answer.startswith("Submit each claim within 30 days of the purchase"), answer
    assert "[1]" in answer.rsplit("\n\n", 1)[0]
    assert more_in(answer) == ["[2]"], answer
    # every page quoted: no "More in" line repeating their citations
    alone = compose("how many days do I have to submit an expense claim?", docs[0])
    assert "More in" not in alone and alone.rstrip().endswith("[1]"), alone


def test_a_quoted_note_is_quoted_as_its_words_without_the_quote_markers():
    """A note written as a block quote, hard-wrapped with "> " on every line, reads in the answer
    as the page shows it: its kind and its words, no ">" run into its sentences; the code after
    it keeps its prompt."""
    text = (Path(__file__).parent / "data" / "answers" / "mirrors.md").read_text()
    answer = compose("does the tool use my proxy settings for downloads?", page("mirrors.md", text))
    assert "**Note:** The tool does not read the system's proxy settings." in answer, answer
    assert "Set the `registry.mirror` key to an address" in answer, answer
    assert not re.search(r"(^|\s)>\s", answer.split("```")[0]), answer
    if "```" in answer:
        assert "> tool config set registry.mirror" in answer


HARBORLOG = Path(__file__).parent / "data" / "docsites" / "harborlog"


@pytest.mark.slow
@requires_offline_model
def test_an_install_question_leads_with_its_systems_install_step_not_the_removal_step(tmp_path):
    """`threadwise ask` offline on a product guide whose sections are "Install on Ubuntu", "Install
    on Windows" and "Removing Harborlog" (headings too short to be sentences themselves): the Windows
    question opens with the Windows install step, not with "On Ubuntu, run `sudo apt-get purge
    harborlog`" of the removal section, which shares more of its words; the Ubuntu question shows the
    apt install command before any removal command."""
    shutil.copytree(HARBORLOG, tmp_path / "guide")
    write_config(tmp_path)
    windows = ask(tmp_path, "how do I install harborlog on windows?")["answer"]
    assert windows.startswith("Start `HarborlogInstaller.msi` from an administrator prompt."), windows
    ubuntu = ask(tmp_path, "how do I install harborlog on ubuntu?")["answer"]
    assert not ubuntu.startswith("On Ubuntu, run `sudo apt-get purge"), ubuntu
    # the removal section is a sibling of the one the question names: after the install command, if at all
    install = ubuntu.find("sudo apt-get install harborlog")
    assert -1 < install < 300 and "purge" not in ubuntu[:install], ubuntu


QUILLPAD_FAQ = """# Quillpad FAQ

## Can I use Quillpad without an internet connection?

Yes. Notes are kept on your device and are sent to the server the next time you connect.

## Does Quillpad have a dark theme?

No. Only the light theme ships today, and a high-contrast mode is planned for the spring release.

## Is there a limit on the size of a note?

Not yet. Very long notes open more slowly on phones, so we suggest splitting a note past 50 pages.
"""

QUILLPAD_THEMES = """# Themes and fonts

Quillpad uses the light theme with the Inter font. You can change the font size under Settings >
Appearance, from 12 to 24 points. Notes keep their own font when they are shared.
"""


@pytest.mark.slow
@requires_offline_model
def test_an_faq_answer_keeps_the_yes_or_no_it_opens_with(tmp_path):
    """`threadwise ask` offline on an FAQ whose answers open with "Yes.", "No." or "Not yet.": the
    answer opens with that word and the sentence after it. The word alone is shorter than a sentence
    and was dropped, so "does quillpad have a dark theme?" read "Only the light theme ships today"
    without the "No." the page gives."""
    (tmp_path / "guide").mkdir()
    (tmp_path / "guide" / "faq.md").write_text(QUILLPAD_FAQ)
    (tmp_path / "guide" / "themes.md").write_text(QUILLPAD_THEMES)
    write_config(tmp_path)
    offline = ask(tmp_path, "can I use quillpad offline?")["answer"]
    assert offline.startswith("Yes. Notes are kept on your device"), offline
    dark = ask(tmp_path, "does quillpad have a dark theme?")["answer"]
    assert dark.startswith("No. Only the light theme ships today"), dark
    size = ask(tmp_path, "is there a max note size in quillpad?")["answer"]
    assert size.startswith("Not yet. Very long notes open more slowly on phones"), size
