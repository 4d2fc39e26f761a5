"""The verdict a yes/no question is answered with, from what its documents state.

"Can I use Discord instead of Slack?" is answered by a page that states a capability ("It works
with Slack and Discord: connect either one, or both at once") or a verdict against it ("FreeBSD
is **not** supported"). Quoting sentences that share the question's words leaves the reader to
work out the yes or the no; :func:`verdict_lead` finds the sentence that states it for all the
question asks about, and the answer opens with that sentence, cited. "Yes." or "No." goes before it
only when the sentence states it plainly (:func:`label`): a word-level reading of a sentence that
says "works on Linux only; on macOS it is not available" must not turn it into a yes or a no.
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
    return named or asked_terms(question)


def asked_terms(question: str) -> set[str]:
    """Every term of a yes/no question but the words that ask whether: all of what it asks about
    ("is SSO free?": ``{"sso", "free"}``), which a sentence answering it must name."""
    return {t for t in signals.terms(question) if t not in _ASKING}


# A question asking whether something can be done without, or not, a thing: a sentence's yes or no
# answers the question turned round ("can I run it without Docker?" - "It runs on Docker.").
_NEGATED_QUESTION = re.compile(r"\b(?:without|not|no|never)\b|n't\b", re.I)
# Words that make a statement conditional or partial: "only on Linux", "on the Enterprise plan",
# "coming soon", "unless", "but": its yes or no holds for part of what is asked, if at all.
_CONDITION = re.compile(
    r"\b(?:only|except|unless|but|however|although|though|whereas|while|if|when|until|planned|soon|yet|"
    r"beta|preview|experimental|deprecated|limited|plan|plans|tier|paid|enterprise|requires?|required|"
    r"instead|partly|partially|some)\b",
    re.I,
)
# A negation: beside a capability it may be about what is asked ("no GraphQL endpoint, but ...").
_NEGATION = re.compile(r"\b(?:no|not|never|cannot|without|none|neither|nor)\b|n't\b", re.I)
# A plain "no" to a capability: the thing "is not supported", "does not work with", "cannot be used".
_PLAIN_NO = re.compile(
    r"\b(?:is|are)(?:\s+\*\*|\s+)(?:not|no\s+longer)\**\s+(?:supported|available|possible|compatible)\b|"
    r"\bunsupported\b|\b(?:does|do)(?:\s+not|n't)\s+(?:support|work|run)\b|"
    r"\bcan(?:not|'t|\s+not)\s+(?:be\s+)?(?:used?|run|connect(?:ed)?|install(?:ed)?)\b",
    re.I,
)


# A statement that something was taken away: "Dropped support for Debian 10", "Removed the v1 API", "no
# longer ships". It names the thing and "support" as a capability would, and means the opposite.
_WITHDRAWN = re.compile(
    r"\b(?:dropped|drops|dropping|removed|removes|no\s+longer|discontinued|retired|withdrawn|stopped|"
    r"end(?:ed|s)?\s+(?:of\s+life|support)|sunset)\b",
    re.I,
)


# A sentence that opens with its own yes or no (an FAQ's "Yes. Notes are kept on your device.", "No, not
# yet."): the word stands alone before a stop, a comma or a dash. "No card is needed" and "No one can
# see it" open with a determiner, not a reply: read as a verdict they led "is there a free trial?"
_SAID = re.compile(r"^\W*(?:yes|no|not\s+yet)\b[*_]*(?=\s*(?:[.,;:!—–]|-\s|$))", re.I)


def label(question: str, sentence: str) -> str:
    """ "Yes." or "No." when ``sentence`` plainly states it for all ``question`` asks about, else
    "": a label made from a sentence's words must never say the opposite of the page, so any doubt
    leaves the sentence to speak for itself. "Yes." needs a capability (:func:`graphs.signals.
    states_capability`) and no negation or condition anywhere in the sentence ("works on Linux
    only; on macOS it is not available" is neither); "No." needs one plain "no" to a capability
    (:data:`_PLAIN_NO`: "Microsoft Teams is not supported") and nothing that works or holds in part
    beside it ("Linux and macOS are supported; Windows is not supported" is neither). A sentence
    saying something was taken away (:data:`_WITHDRAWN`: "Dropped support for Debian 10", "removed")
    gets no "Yes." however much it speaks of support. A question
    asking about doing without something gets no label: its sentence answers the question turned round."""
    if _NEGATED_QUESTION.search(question) or _SAID.match(sentence):
        return ""
    plain_no = _PLAIN_NO.findall(sentence)
    if len(plain_no) == 1:
        rest = _PLAIN_NO.sub(" ", sentence)
        # a reason beside the "no" may hold another negation ("because its bots cannot read threads")
        if not signals.states_capability(rest) and not _CONDITION.search(rest):
            return "No."
        return ""
    if _WITHDRAWN.search(sentence):
        return ""  # "Dropped support for Debian 10": a "Yes." would say the opposite of the page
    if signals.states_capability(sentence) and not _CONDITION.search(sentence) and not _NEGATION.search(sentence):
        return "Yes."
    return ""


def verdict_lead(question: str, docs: Sequence[Doc]) -> tuple[str, int, str] | None:
    """``(label, the document's position, the sentence)`` for a yes/no question
    (:func:`graphs.signals.asks_yes_no`) whose documents state it: the first sentence (documents
    best first) holding, read with its heading, everything the question asks about
    (:func:`asked_subject` and :func:`asked_terms`), that opens with its own yes or no (an FAQ
    entry's "Yes, with a read-only link.", however short), states a capability
    (:func:`graphs.signals.states_capability`) or a verdict against it
    (:func:`graphs.signals.states_verdict`, or that it was taken away: "dropped support for").
    ``label`` is "Yes.", "No." or "" (:func:`label`); it is "" too when sentences of both kinds are
    found (the documents' words decide, not this). None for another question, a question about doing
    without something, or when no sentence states it."""
    if not docs or not signals.asks_yes_no(question) or _NEGATED_QUESTION.search(question):
        return None
    subject = asked_subject(question) | asked_terms(question)
    if not subject:
        return None
    found: list[tuple[str, int, str]] = []
    kinds: set[bool] = set()
    for i, d in enumerate(docs):
        heading = ""
        for u in split_units(str(d.get("text") or ""), i):
            if u.heading:
                heading = u.text
                continue
            # a sentence under a heading of the text reads with that heading and the page's title, not with
            # the heading path of the section the search found (a whole FAQ page carries one question's)
            title = str(d.get("title", "") or "")
            where = f"{title.split(' > ')[0]} {heading}" if heading else title
            if u.code or u.row >= 0 or not subject <= signals.terms(f"{where} {u.text}"):
                continue
            said = _SAID.match(u.text)  # an FAQ entry's own "Yes, with a read-only link." / "No, not yet."
            if said:
                kinds.add(not said.group().strip(" \t*_").lower().startswith("no"))
            elif signals.states_verdict(u.text) or _WITHDRAWN.search(u.text):
                kinds.add(False)  # "not supported", and "dropped support for" too
            elif signals.states_capability(u.text):
                kinds.add(True)
            else:
                continue
            found.append((label(question, u.text), i, u.text))
    if not found:
        return None
    verdict, at, sentence = found[0]
    return ("" if len(kinds) > 1 else verdict), at, sentence


def with_verdict(question: str, docs: Sequence[Doc], answer: str) -> str:
    """``answer`` (cited by position in ``docs``) opening with the sentence of :func:`verdict_lead`,
    after its label ("Yes." or "No.") when it has one: before its first sentence when that is the
    sentence stating it, else the sentence, cited, then the answer (without that sentence where its
    opening passage quoted it further on). ``answer`` unchanged when there is no such sentence."""
    found = verdict_lead(question, docs)
    if found is None or not answer:
        return answer
    verdict, at, sentence = found
    lead = f"{verdict} " if verdict else ""
    first, _, rest = answer.partition("\n\n")
    if first.startswith(sentence):
        return f"{lead}{answer}"
    if f" {sentence} " in f" {first} ":  # quoted later in the opening passage: it moves to the front
        first = re.sub(r"\s+", " ", f" {first} ".replace(f" {sentence} ", " ")).strip()
        rest = f"{first}\n\n{rest}" if re.sub(r"\s*\[\d+\]$", "", first).strip() else rest
        return f"{lead}{sentence} [{at + 1}]\n\n{rest}".rstrip()
    return f"{lead}{sentence} [{at + 1}]\n\n{answer}"
