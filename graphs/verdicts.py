"""The verdict a yes/no question is answered with, from what its documents state.

"Can I use Discord instead of Slack?" is answered by a page that states a capability ("It works
with Slack and Discord: connect either one, or both at once") or a verdict against it ("FreeBSD
is **not** supported"). Quoting sentences that share the question's words leaves the reader to
work out the yes or the no; :func:`verdict_lead` finds the sentence that states it for what the
question names, and the answer opens with "Yes." or "No." and that sentence, cited.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from graphs import signals
from graphs.extractive import split_units
from graphs.state import Doc

# words of a yes/no question that ask whether, not about what
_ASKING = frozenset(
    """use using used run running work working instead also both together same time get make need want able
possible allow allowed support supported way still ok okay fine""".split()
)


def asked_subject(question: str) -> set[str]:
    """What a yes/no question asks about, as terms: the terms of the words it writes with a capital
    letter or as code (names: "Discord", "Slack", "FreeBSD", `interrupt_before`) when it has any,
    else its terms without the words that ask whether ("use", "instead", "possible", ...)."""
    names = re.findall(r"`[^`]+`|\b[A-Z][\w.-]*[A-Za-z0-9]", question)
    named: set[str] = set()
    for i, n in enumerate(names):
        if i == 0 and question.lstrip().startswith(n) and not n.startswith("`"):
            continue  # the capital of the question's first word says nothing
        named |= signals.terms(n)
    named -= _ASKING
    return named or {t for t in signals.terms(question) if t not in _ASKING}


def verdict_lead(question: str, docs: Sequence[Doc]) -> tuple[str, int, str] | None:
    """``("Yes." or "No.", the document's position, the sentence)`` for a yes/no question
    (:func:`graphs.signals.asks_yes_no`) whose documents state it: the first sentence (documents
    best first) holding everything the question asks about (:func:`asked_subject`), read with its
    heading, that states a capability (:func:`graphs.signals.states_capability`: yes) or a verdict
    against it (:func:`graphs.signals.states_verdict`: no). None for another question, when no
    sentence states it, or when sentences state both (the documents' words decide, not this)."""
    if not docs or not signals.asks_yes_no(question):
        return None
    subject = asked_subject(question)
    if not subject:
        return None
    found: list[tuple[str, int, str]] = []
    for i, d in enumerate(docs):
        heading = ""
        for u in split_units(str(d.get("text") or ""), i):
            if u.heading:
                heading = u.text
                continue
            if u.code or u.row >= 0 or not subject <= signals.terms(f"{heading} {u.text}"):
                continue
            if signals.states_verdict(u.text):
                found.append(("No.", i, u.text))
            elif signals.states_capability(u.text):
                found.append(("Yes.", i, u.text))
    if not found or len({v for v, _, _ in found}) > 1:
        return None
    return found[0]


def with_verdict(question: str, docs: Sequence[Doc], answer: str) -> str:
    """``answer`` (cited by position in ``docs``) opening with the verdict of :func:`verdict_lead`:
    "Yes." or "No." before its first sentence when that is the sentence stating it, else before the
    sentence, cited, then the answer (without that sentence where its opening passage quoted it
    further on). ``answer`` unchanged when there is no verdict."""
    found = verdict_lead(question, docs)
    if found is None or not answer:
        return answer
    verdict, at, sentence = found
    first, _, rest = answer.partition("\n\n")
    if first.startswith(sentence):
        return f"{verdict} {answer}"
    if f" {sentence} " in f" {first} ":  # quoted later in the opening passage: it moves to the front
        first = re.sub(r"\s+", " ", f" {first} ".replace(f" {sentence} ", " ")).strip()
        rest = f"{first}\n\n{rest}" if re.sub(r"\s*\[\d+\]$", "", first).strip() else rest
        return f"{verdict} {sentence} [{at + 1}]\n\n{rest}".rstrip()
    return f"{verdict} {sentence} [{at + 1}]\n\n{answer}"
