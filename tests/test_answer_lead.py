"""The sentence that answers opens an offline answer: not a sentence pointing to another page,
not the first page's sentence when a lower page's answers clearly better, the one stating an
amount when a bound or a precision is asked for, the verdict when the question asks whether; and
after it only what supports it, not sentences the page's rank carried in."""

from __future__ import annotations

import pytest

from bot.eval import first_fact_position
from graphs import signals
from graphs.extractive import Extractive, TextEmbedder


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
        "See `RPOPLPUSH` for more information.",
        "Please see the pattern description in the `RPOPLPUSH` documentation.",
        "For details, refer to the networking page.",
        "For more information on using proxies in HTTPX, see HTTP Proxying.",
        "The exact behavior of this command is identical to the one of the `INCRBYFLOAT` command, please refer "
        "to the documentation of `INCRBYFLOAT` for further information.",
        "For an introduction to HyperLogLog data structure check the `PFCOUNT` command page.",
    ],
)
def test_pointer_sentences_are_told(sentence):
    assert signals.is_pointer(sentence)


@pytest.mark.parametrize(
    "sentence",
    [
        "For example, calling `XADD` in the following form:",
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


SETRANGE = """Overwrites part of the string stored at _key_, starting at the specified offset, for the entire
length of _value_. If the offset is larger than the current length of the string at _key_, the string is
padded with zero-bytes to make _offset_ fit. Non-existing keys are considered as empty strings, so this
command will make sure it holds a string large enough to be able to set _value_ at _offset_.

Note that the maximum offset that you can set is 2^29 -1 (536870911), as Redis Strings are limited to 512
megabytes. If you need to grow beyond this size, you can use multiple keys.
"""


def test_a_question_asking_for_the_largest_value_leads_with_the_limit():
    """ "the largest value a string can hold" asks for an amount: the sentence stating the limit
    leads, not the opening sentence sharing more of the question's words."""
    answer = compose("whats the largest value a string key can hold", page("setrange.md", SETRANGE), budget=250)
    assert first_fact_position(answer, ["512"]) < 250, answer
