"""Cheap lexical graders, used instead of LLM graders when the chat model is too small to
judge (``[graph] graders = "lexical"``, and ``"auto"`` with the offline model).

They make the same checks as the LLM graders (document relevance, grounding,
usefulness) from term overlap, at no model cost. Terms are those of
:func:`graphs.terms.content_terms` (any script: case-folded words of two or more
characters minus stopwords, character bigrams of Chinese, Japanese, Thai...), with a
crude suffix strip (s, es, ing, ed) so that "reindexing" matches "reindex".
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from graphs.terms import content_terms, without_mentions

_REFUSALS = (
    "i don't know",
    "i do not know",
    "i'm not sure",
    "cannot answer",
    "can't answer",
    "no information",
    "not contain",
    "does not say",
    "do not have",
)


# A name run together with its number ("arm64", "python3", "win11", "aarch64"): its letters name the thing too,
# so "does it run on arm?" holds a term of "ARM64 processors"
_NAME_NUMBER = re.compile(r"([a-z]{3,})\d+")


def terms(text: str) -> set[str]:
    """Content terms of ``text`` (see the module docstring); a word of three or more letters run
    together with a number gives its letters as a term too ("arm64" -> "arm64", "arm")."""
    out = set()
    for w in content_terms(text):
        named = _NAME_NUMBER.fullmatch(w)
        if named:
            out.add(named.group(1))
        for suffix in ("ing", "es", "ed", "s"):
            if len(w) > len(suffix) + 3 and w.endswith(suffix):
                w = w[: -len(suffix)]
                break
        out.add(w)
    return out


def relevance(question: str, document: str) -> float:
    """Share (0..1) of the question's terms that occur in the document."""
    q = terms(question)
    return len(q & terms(document)) / len(q) if q else 0.0


def grounding(answer: str, sources: list[str]) -> float:
    """Share (0..1) of the answer's terms that occur in the sources (citations ignored)."""
    a = terms(re.sub(r"\[\d+\]", " ", answer))
    if not a:
        return 0.0
    s: set[str] = set()
    for text in sources:
        s |= terms(text)
    return len(a & s) / len(a)


def is_useful(question: str, answer: str) -> bool:
    """The answer is not empty, not a refusal, and shares a term with the question."""
    low = answer.lower()
    if len(low.strip()) < 10 or any(r in low for r in _REFUSALS):
        return False
    return bool(terms(question) & terms(answer))


def key_sentences(question: str, text: str, n: int = 2, max_characters: int = 400) -> list[str]:
    """The ``n`` sentences or list items of ``text`` sharing the most terms with
    ``question`` (in document order), each cut to ``max_characters``."""
    q = terms(question)
    # unwrap hard-wrapped lines, keep paragraph, list-item and code-line breaks
    blocks = re.split(r"\n\s*\n|\n(?=\s*(?:[-*+] |\d+\. |#|```|    ))", text)
    pieces = []
    for block in blocks:
        joined = re.sub(r"\s*\n\s*", " ", block.strip())
        pieces += [p.strip(" -*+\t") for p in re.split(r"(?<=[.!?])\s+(?=[A-Z`\"(])", joined) if len(p.strip()) > 20]
    scored = sorted(((len(q & terms(p)), i) for i, p in enumerate(pieces)), reverse=True)[:n]
    return [_cut(pieces[i], max_characters) for score, i in sorted(scored, key=lambda x: x[1]) if score > 0]


def _cut(text: str, limit: int) -> str:
    """``text`` cut at a word boundary to at most ``limit`` characters, marked with '…'."""
    if len(text) <= limit:
        return text
    return text[:limit].rsplit(" ", 1)[0].rstrip(",;:") + " …"


def extractive_answer(question: str, documents: Sequence[Mapping[str, Any]], max_documents: int = 3) -> str:
    """An answer made only of the documents' own key sentences, cited ``[n]`` by document
    position: grounded by construction (the fallback when a small model's drafts are not)."""
    lines = []
    for i, d in enumerate(documents[:max_documents], start=1):
        for s in key_sentences(question, d.get("text", "")):
            lines.append(f"- {s} [{i}]")
    if not lines:
        return ""
    return "Here is what the documentation says:\n" + "\n".join(lines)


_SMALL_TALK = frozenset(
    """hi hello hey hiya yo thanks thank thx ty cheers bye goodbye morning evening afternoon
ok okay cool great nice awesome lol good night welcome sup howdy""".split()
)


_FILLER = frozenset(
    """a the you so much very lot lots all there everyone folks guys team bot threadwise again
for it that this is and again man mate""".split()
)


# What a message asking what the bot is for reads like, once a greeting or the bot's name before it
# and the punctuation are gone: "what can you do?", "what are you for?", "help", "how can you help
# me?", "what can I ask you?", "who are you?", "what do you know about?"
_ABOUT_BOT = re.compile(
    r"^(?:"
    r"help(?: me| us| please)?|please help|i need help|"
    r"what (?:else )?(?:can|could|do|does) (?:you|u|it|the bot|this bot|threadwise) (?:do|help with|help me with|know|"
    r"know about|answer|tell me about)|"
    r"what (?:are|r) (?:you|u) (?:for|good for|able to do|here for|about)|"
    r"what (?:is|s) (?:this bot|this|the bot|threadwise|your (?:purpose|job|role)) (?:for|about|here for)|"
    r"what (?:is|s) your (?:purpose|job|role)|"
    r"what (?:can|could|should|may) (?:i|we) ask(?: you| u| it| the bot| here)?(?: about)?|"
    r"how (?:can|could|do) (?:you|u|the bot|threadwise) help(?: me| us)?(?: here)?|"
    r"(?:who|what) (?:are|r) (?:you|u)|"
    r"(?:can|could) you help(?: me| us)?|"
    r"what do you know"
    r")(?: here| for me| for us| exactly)?$"
)
_BOT_ADDRESS = re.compile(r"^(?:(?:hi|hello|hey|yo|ok|okay|so|um|uh|bot|threadwise|there)\b[\s,!.]*)+")


def asks_what_bot_does(text: str) -> bool:
    """Whether ``text`` asks what the bot can do or is for ("what can you do?", "what are you
    for?", "help", "hi, how can you help me?"): answered with what the bot does and what its
    knowledge base holds, never searched for ("help" is on every page of a user guide) nor sent to
    the experts. A question that goes on ("help me configure Slack", "what can you do about rate
    limits?") is a question."""
    words = re.sub(r"[^\w\s']+", " ", text.lower())
    words = re.sub(r"\s+", " ", words).strip()
    words = _BOT_ADDRESS.sub("", words).strip()
    return bool(words) and len(words.split()) <= 9 and bool(_ABOUT_BOT.match(words))


def is_small_talk(text: str) -> bool:
    """A short greeting or thanks ("hi!", "thanks a lot", "good morning"): at most five
    words, all of them small-talk or filler words (so "is slack ok?" is not small talk)."""
    words = re.findall(r"[a-z']+", text.lower())
    return (
        0 < len(words) <= 5
        and any(w in _SMALL_TALK for w in words)
        and all(w in _SMALL_TALK or w in _FILLER for w in words)
        and "?" not in text
    )


# Words a greeting, thanks, a goodbye or an acknowledgement is made of, beyond the short ones of
# _SMALL_TALK ("thanks, that sorted it", "perfect, cheers", "see you tomorrow", "you're awesome")
_CHAT_WORDS = _SMALL_TALK | frozenset(
    """hii heya hallo bye byebye cya see later perfect brilliant amazing excellent superb lovely wonderful
sweet thx tysm tyvm ta appreciate appreciated kudos congrats gm gn""".split()
)


def sounds_like_chat(text: str) -> bool:
    """``text`` may be a greeting, thanks or a goodbye as far as its words go: it holds such a word
    ("hey bot, you awake?", "thanks, that sorted it", "perfect, cheers") or no content word at all
    ("how are you?"). A message with content words and none of those ("how do I uninstall it?",
    "ab403", "which port does the relay use?") is a question or a lookup, whatever its embedding is
    near: the offline router never takes it for small talk."""
    words = re.findall(r"[a-z']+", text.lower())
    return any(w in _CHAT_WORDS for w in words) or not terms(text)


# What a greeting, thanks or acknowledgement before a question is made of: its chat words, and words that
# only address or stress it ("thanks so much", "hi there team", "ok cool thanks", "oh great").
_OPENING_WORDS = _CHAT_WORDS | frozenset(
    """so much very lot lots a all there everyone folks guys team bot threadwise again man mate oh ah well
alright sure wow yes yeah yep really""".split()
)
_OPENING_PHRASES = (
    # thanks for something, up to the punctuation that ends it ("thanks for the help! how do I ...")
    r"(?:thanks|thank\s+you|thx|ty|cheers)\s+for\s+[a-z' ]{1,40}?(?=\s*[.!,;:])|"
    r"thank\s+you|got\s+it|that(?:'s|s|\s+is)\s+(?:great|perfect|helpful|brilliant|awesome)"
)
# The conjunction or aside that turns from the thanks to the question: "thanks, but how ...", "cool thanks.
# and how ...", "great, one more thing: where ..."
_TURN = re.compile(
    r"^(?:and|but|so|also|then|now|btw|anyway|one\s+more\s+(?:thing|question)|quick\s+question)\b\W*", re.I
)
# A question in its own words: it opens with a question word, an auxiliary verb put first or a request
# ("where do I find invoices", "can I export to csv", "tell me how to ...").
_QUESTION_OPENS = re.compile(
    r"^(?:how|what|what's|whats|where|where's|wheres|which|who|who's|whom|whose|why|when|is|are|was|were|"
    r"can|could|do|does|did|will|would|should|may|must|has|have|any|tell|show|explain|give)\b",
    re.I,
)


def after_chat_opening(text: str) -> str:
    """The question ``text`` asks after the greeting, thanks or acknowledgement it opens with ("thanks,
    but how do I uninstall on mac?" -> "how do I uninstall on mac?", "cool thanks. and how do I
    export?" -> "how do I export?", "hi! where do I find invoices?" -> "where do I find invoices?"):
    the router reads the question, which the opening words would make read like small talk.
    ``text`` itself when it opens with no greeting or thanks word (:data:`_CHAT_WORDS`), or when
    what follows is no question with a content word: a greeting alone ("hi there!", "thanks a
    lot"), thanks with a remark ("thanks, that sorted it"), small talk ("hey, how are you?")."""
    words = re.findall(r"[a-z']+", text.lower())
    taken: list[str] = []
    pos = 0
    for m in re.finditer(rf"(?P<phrase>{_OPENING_PHRASES})|[a-z']+", text, re.I):
        word = re.sub(r"\s+", " ", m.group(0).lower())
        if re.search(r"\w", text[pos : m.start()]) or not (word in _OPENING_WORDS or m.group("phrase")):
            break
        taken.append(word)
        pos = m.end()
    if not any(w in _CHAT_WORDS or " " in w for w in taken) or len(" ".join(taken).split()) >= len(words):
        return text
    rest = re.sub(r"^[\W_]+", "", text[pos:])
    turned = _TURN.sub("", rest).strip()
    # a question in its own words, or one the thanks turns to ("great thanks! and on windows?")
    asks = _QUESTION_OPENS.match(turned) or (turned != rest.strip() and turned.endswith("?"))
    return turned if asks and terms(turned) else text


# The asker, or the asker's team, in the message: "how much RAM do I need", "our builds are stuck",
# "can we run it on ARM", "my laptop won't boot"
_FIRST_PERSON = re.compile(r"\b(?:i|i'm|im|i've|ive|i'd|i'll|me|my|mine|we|we're|we've|our|ours|us)\b", re.I)


def speaks_of_own_setup(text: str) -> bool:
    """``text`` speaks of the asker's or the team's own situation ("how much RAM do I need", "can we
    run it on ARM?", "my laptop won't boot"): a question about what the team uses, which its documents
    answer, not a general-knowledge question ("what is a mutex", "explain idempotent")."""
    return bool(_FIRST_PERSON.search(text))


def is_lookup(text: str) -> bool:
    """``text`` is one word, code or name and nothing else ("ab403", "AB-500", "uninstall",
    "FL-403?"): something to look up in the documents, never small talk or general knowledge
    (a greeting of one word holds a small-talk word: :func:`is_small_talk`)."""
    tokens = text.split()
    return len(tokens) == 1 and bool(terms(text)) and not is_small_talk(text)


# Words of time and change: a question about what is happening or has changed says when ("yet",
# "still", "again", "tomorrow", "this week", "the newest")
_TIMELY = re.compile(
    r"\b(?:now|nowadays|current|currently|today|tonight|tomorrow|yesterday|yet|still|again|anymore|lately|"
    r"recent|recently|latest|newest|new|soon|upcoming|next|ago|live|this\s+(?:week|month|year|morning|evening)|"
    r"last\s+(?:night|week|month|year)|at\s+the\s+moment|rn)\b",
    re.I,
)


def speaks_of_time(text: str) -> bool:
    """``text`` says when or that something changed ("yet", "still", "again", "tomorrow", "this
    week", "the newest", "currently"): a question about current events always does; one without
    any such word ("is Windows 10 supported?", "do I need admin rights to install it?") asks what
    holds, which the documents state."""
    return bool(_TIMELY.search(text))


# Words that ask about the live state of the world by themselves: the instant ("right now"), a
# span of days the documents were written before ("this week"), whether something is up or out
_NOW = re.compile(
    r"\b(?:right now|just now|rn|this (?:week|month|year)|last (?:night|week)|"
    r"(?:is|are) \S+(?: \S+)? (?:down|up|working|offline)\b|outage|status page|"
    # whether a release has happened: "did 10.12 come out yet", "is 8.2 released yet", "the next version"
    r"out yet|(?:released|shipped|launched|available) (?:yet|already)|coming out|(?:next|upcoming) (?:release|version)|"
    r"release date)",
    re.I,
)
# A question asking where something is: "what's the status page url?", "where is the link to the
# incident board?" (the documents give addresses; the status itself is what changes)
_ASKS_ADDRESS = re.compile(
    r"\b(?:what|where)(?:'s|’s|s|\s+is|\s+are)?\s+(?:the\s+)?(?:\w+\s+){0,3}?"
    r"(?:urls?|links?|web ?(?:site|page|address)|address)\b",
    re.I,
)
# Present-tense words are also how documentation states what holds ("version 4.2 is currently
# supported", "the latest client is 4.2.3", "the API is now served from ..."): alone they ask what
# the documents say. They ask about the present moment only about something that happens or
# changes outside the documents: a release or news, a live status, a price or the weather.
_PRESENT = re.compile(
    r"\b(?:current|currently|now|nowadays|today|tonight|tomorrow|yesterday|latest|newest|most recent|up to date|"
    r"at the moment)\b",
    re.I,
)
_LIVE_SUBJECT = re.compile(
    r"\b(?:releases?|released|shipped|launched|news|announce(?:d|ments?)|status(?! codes?)|incidents?|outages?|"
    r"happening|going on|weather|prices?|stocks?|(?:exchange|interest) rates?|scores?|time is it|"
    r"won|winners?|elections?|elected)\b|"  # who won the final yesterday, today's election
    r"\b(?:is|are|version|release|\d)\S* out\b",  # "is 2.1 out", "the latest version out today"
    re.I,
)
# "today" alone, and "tomorrow", are no such word: "I'm off sick today", "a dentist appointment
# tomorrow" are about the asker's day, which the documents do answer; with a live subject ("the
# weather tomorrow", "was it released yesterday?") they are


def asks_for_now(text: str) -> bool:
    """The question asks about the present moment ("right now", "the latest release", "is
    X down", "did 2.0 come out yet"): documents written earlier cannot answer it, whatever
    they say about the subject. A present-tense word about what documentation states ("which
    version is currently supported?", "what's the latest client version?") is not such a question,
    nor is one asking where something is (:data:`_ASKS_ADDRESS`: "what's the status page url?"
    asks for an address the documents give, not for the status)."""
    if _ASKS_ADDRESS.search(text):
        return False
    return bool(_NOW.search(text)) or bool(_PRESENT.search(text) and _LIVE_SUBJECT.search(text))


# Who holds a rota's turn ("who is on call?", "who's on duty this weekend"): the holder changes
# from shift to shift, so the question asks about the present moment even without a time word
_ON_DUTY = re.compile(
    r"\bwho(?:'s|’s|s|\s+is|\s+are)\s+(?:\w+\s+){0,2}?on[\s-]?(?:call|duty|shift|rota)\b",
    re.I,
)
# The day or the instant of the asking: an answer about it is true that day only
_THIS_DAY = re.compile(
    r"\b(?:today|today's|tonight|right now|just now|at the moment|this (?:morning|afternoon|evening))\b", re.I
)


# A status question about a thing as it is while asked: "is main broken?", "is the build green?", "are the
# runners down?" (a subject, then the state it is in), or a word of the instant in the languages people
# ask in ("ist die API gerade down?", "está caído ahora?", "c'est en panne en ce moment ?")
_STATUS_NOW = re.compile(
    r"^\W*(?:is|are|was|were|ist|sind)\s+(?:\S+\s+){1,3}?(?:gerade\s+|now\s+|still\s+)?"
    r"(?:down|up|broken|green|red|failing|flaky|offline|working|degraded|stuck|kaputt)\b|"
    r"\b(?:ongoing|gerade|aktuell|im\s+moment|en\s+ce\s+moment|actuellement|ahora|ahorita|en\s+este\s+momento)\b",
    re.I,
)
# A question about how to act or what the rule is: "how do I report an outage?", "what is our outage
# policy?", "where do we post incidents?", "who do I tell about a status page change?". Its answer holds
# for the next asker, whatever live subject ("outage", "status page") it names.
_PROCEDURE = re.compile(
    r"^\W*(?:how\s+(?:do|can|should|would|to|does)\b|"
    r"what(?:'s|’s|s|\s+is|\s+are)\s+(?:our|the|your)\s+(?:\w+\s+){0,3}?"
    r"(?:polic(?:y|ies)|process(?:es)?|procedures?|rules?|steps|runbooks?|playbooks?|guidelines?)\b|"
    r"(?:where|who|whom)\s+(?:do|should|can|must)\s+(?:i|we)\b)",
    re.I,
)


def holds_for_now(question: str) -> bool:
    """An answer to ``question`` is true when it is asked, not for the next asker: the question asks
    about the state of something now (:data:`_STATUS_NOW`: "is main broken?", "is the build green?",
    "ist die API gerade down?"), about the present moment (:func:`asks_for_now`: "is the API down
    right now?", "what's the latest release this week?") unless it asks how to act or what the rule
    is (:data:`_PROCEDURE`: "how do I report an outage?", "what is our outage policy?" name a live
    subject but ask a rule), about who is on call or on duty, or about this day or instant ("who is
    on call today?", "is the office open today?"). An expert's answer to it is not kept for reuse
    (:mod:`bot.service.learning`, :func:`graphs.learned.usable`), even where the answer is a rule
    ("I'm off sick today, who do I tell?"): asking the experts again costs less than a stale answer."""
    if _STATUS_NOW.search(question) or _ON_DUTY.search(question) or _THIS_DAY.search(question):
        return True
    return asks_for_now(question) and not _PROCEDURE.search(question)


# A code a product gives its errors, alerts or articles: capitals, an optional hyphen, two or more
# digits ("PH-500", "E0425", "KB4023057"), written in capitals (a size or a time, "20GB", "60s", is not one)
_CODE = re.compile(r"(?<![\w.-])[A-Z]{1,6}-?\d{2,}(?![\w-])")


def codes(text: str) -> list[str]:
    """The codes ``text`` names ("what does PH-500 mean?" -> ``["PH-500"]``): capitals, an optional
    hyphen and two or more digits; in order, each once. A mention's id ("@U02345678") is none
    (:func:`graphs.terms.without_mentions`)."""
    return list(dict.fromkeys(m.group(0) for m in _CODE.finditer(without_mentions(text))))


# The same code as people type it: in lower case or run together ("fl204", "e-1107", "Fl 204" is not one:
# a word and a number), or its number alone after a word saying it is a code ("error code 1107",
# "error 1107", "code #1107"): the page states it as "FL-204" or "E-1107".
_TYPED_CODE = re.compile(r"(?<![\w.-])([A-Za-z]{1,6})-?(\d{2,})(?![\w-])")
_CODE_NUMBER = re.compile(
    r"\b(?:errors?|err|codes?|faults?|alerts?)(?:\s+(?:codes?|numbers?|no\.?))?\s*#?\s*(\d{3,})(?![\w.-])", re.I
)


def asked_codes(text: str) -> list[tuple[str, str]]:
    """The codes ``text`` asks about, as written (:func:`codes`) or as typed (:data:`_TYPED_CODE`,
    :data:`_CODE_NUMBER`), each as ``(letters, digits)`` with the letters in lower case, ``""``
    for a number alone: "what is e1107" -> ``[("e", "1107")]``, "error code 1107" ->
    ``[("", "1107")]``, "FL-204 and fl311" -> ``[("fl", "204"), ("fl", "311")]``; in order, each once.
    A mention's id ("@U02345678", "<@W0123456>") is none (:func:`graphs.terms.without_mentions`)."""
    text = without_mentions(text)
    found = [(m[1].lower(), m[2]) for m in _TYPED_CODE.finditer(text)]
    found += [("", m[1]) for m in _CODE_NUMBER.finditer(text) if not any(d == m[1] for _, d in found)]
    return list(dict.fromkeys(found))


def _names_code(letters: str, digits: str, text: str) -> bool:
    """``text`` names the code ``(letters, digits)`` as a whole word, with or without a separator,
    without case ("fl204" is in "| FL-204 |" and "fl 204", not in "FL-2041"); a number alone
    (``letters`` "") only in a code's form, capitals before it ("1107" is in "E-1107", not in
    "build 1107" nor in "1107 MB")."""
    if letters:
        return bool(re.search(rf"(?<![\w-]){re.escape(letters)}[\s_-]?{digits}(?![\w-])", text, re.I))
    return bool(re.search(rf"(?<![\w-])[A-Z]{{1,6}}[\s_-]?{digits}(?![\w-])", text))


def codes_missing(question: str, texts: Sequence[str]) -> list[str]:
    """The codes of ``question`` that none of ``texts`` holds: those written as codes (:func:`codes`,
    compared without case and separators: "PH-500" is in "ph 500", "PH500"), and those typed in
    lower case ("fl209", :func:`asked_codes`) of a kind ``texts`` name (a code of the same
    letters, "FL-204"; "arm64" is no code where no text names codes of the ARM kind). A page
    about another code ("PH-403 means ...") answers nothing about this one, however close the
    rest of its words are."""
    asked = codes(question)
    typed = [
        (a, d) for a, d in asked_codes(question) if a and not any(c.lower().replace("-", "") == a + d for c in asked)
    ]
    if not asked and not typed:  # most messages: the documents are not read
        return []
    flat = [re.sub(r"[\W_]+", "", t.lower()) for t in texts]
    missing = [c for c in asked if not any(re.sub(r"[\W_]+", "", c.lower()) in f for f in flat)]
    if typed:
        kinds = {re.sub(r"[\W\d_]+", "", c).lower() for t in texts for c in codes(t)}
        missing += [f"{a.upper()}-{d}" for a, d in typed if a in kinds and not any(_names_code(a, d, t) for t in texts)]
    return missing


# A version a question names: three or more numbers with dots ("4.2.1", "v10.12.3"), or two after
# "version", "release" or "v" ("version 4.2", "v4.2"; "1.5 GB" is no version)
_VERSION = re.compile(
    r"(?<![\w.])v?(\d+\.\d+(?:\.\d+)+)(?![\w]|\.\d)|"
    r"\b(?:versions?|releases?|v)\s?(\d+\.\d+)(?![\w]|\.\d)",
    re.I,
)


def asked_versions(text: str) -> list[str]:
    """The versions ``text`` names (:data:`_VERSION`), without a leading "v": "when was 4.2.1
    released?" -> ``["4.2.1"]``, "what changed in version 4.2" -> ``["4.2"]``; in order, each once."""
    return list(dict.fromkeys(m[1] or m[2] for m in _VERSION.finditer(text)))


def code_share(question: str, text: str) -> float:
    """Share (0..1) of the codes and versions ``question`` asks about that ``text`` names: the codes
    written as codes or typed (:func:`asked_codes`: "AB-403", "ab403", "error 403";
    :func:`_names_code`: "AB-403" is in "| ab403 |" and "AB 403", not in "AB-4031"), and the
    versions (:func:`asked_versions`: "4.2.1" is in "## 4.2.1 (2026-07-14)" and "v4.2.1", not in
    "4.2.10" nor "14.2.1"); 0 when the question names none. Like a code, a version names one
    entry of a changelog exactly, whatever its words."""
    asked = asked_codes(question)
    versions = asked_versions(question)
    if not asked and not versions:
        return 0.0
    held = sum(1 for a, d in asked if _names_code(a, d, text))
    held += sum(1 for v in versions if re.search(rf"(?<![\w.])v?{re.escape(v)}(?![\w]|\.\d)", text, re.I))
    return held / (len(asked) + len(versions))


def asks_what_documents_state(text: str) -> bool:
    """The message uses a present-tense word ("currently", "now", "the latest") about what
    documentation states ("which version is currently supported?", "what's the latest config
    format?") and does not ask about the present moment (:func:`asks_for_now`): the documents
    answer it, not a web search. The offline router never sends it to the web; a chat model's
    route to the web is corrected to the knowledge base (:meth:`graphs.graders.Graders.check_route`),
    which still falls back to the web when it finds nothing."""
    return bool(_PRESENT.search(text)) and not asks_for_now(text)


# A question asking for an amount, a duration, a frequency or a time: "how many days", "how much
# notice", "how long", "how often", "by when", "what's the default timeout", "which port"; and one
# asking for a bound or a precision, whose answer is a number too ("the largest value a key can hold",
# "how exact is the count", "is there a max?").
_QUANTITY_QUESTION = re.compile(
    r"\b(?:how\s+(?:many|much|long|often|soon|far|big|large|late|early|small|fast|exact|precise|accurate)|"
    r"by\s+when|what\s+time|"
    r"(?:what|which)(?:'s|\s+is)?\s+(?:the\s+)?(?:default\s+)?(?:port|size|limit|percentage|rate|timeout|number)|"
    r"maximum|minimum|max|largest|biggest|smallest|highest|lowest|longest|deadline)\b",
    re.I,
)
# An amount in a sentence: a digit, a number word, a frequency word.
_QUANTITY = re.compile(
    r"\d|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty|"
    r"forty|fifty|hundred|thousand|half|once|twice|daily|weekly|fortnightly|monthly|annually|yearly|"
    r"every)\b",
    re.I,
)


# "url" only where it is what is asked ("what's the url of the form"), not a subject ("set a base url")
_LINK_QUESTION = re.compile(
    r"\b(?:links?|web ?sites?|web address|bookmark(?:ed)?|hyperlinks?|e-?mail(?: address)?)\b|"
    r"\b(?:what|where)(?:'s|’s|s|\s+is|\s+are)?\s+(?:the\s+)?(?:\w+\s+){0,3}?urls?\b",
    re.I,
)


def asks_for_link(question: str) -> bool:
    """The question asks for a link or an address ("where's the kibana link", "what's the url
    of the form", "who do I email for IT?"): an answer quoting a sentence must then show its
    links' addresses (web and ``mailto:``), not only their words."""
    return bool(_LINK_QUESTION.search(question))


# A question asking how to do something: "how do I reindex ...", "how to set up ...", "what are the steps
# to ...", and the same in German, French, Spanish and Japanese (not "how many", "how long": amounts).
_HOW_TO = re.compile(
    r"\bhow\s+(?:do|can|could|should|would|to)\b|"
    r"\b(?:steps?|instructions?|procedure)\s+(?:to|for)\b|\bwalk\s+me\s+through\b|"
    r"\bwie\b(?!\s+(?:viele?|lange?|oft|alt|gro(?:ß|ss)|hoch|weit|sp[äa]t))|"
    r"(?:^|[.!?]\s*)comment\b(?!\s+s'appelle)|(?:^|[\s¿])c[óo]mo\b|"
    r"どうやって|どのように|どうすれば|どうしたら|方法|手順|するには",
    re.I,
)


def asks_how_to(question: str) -> bool:
    """The question asks how to do something ("how do I reindex the knowledge base?", "Wie
    richte ich den Bot für Slack ein?", "¿Cómo configuro el bot?"), not for an amount ("how
    many days") or a thing."""
    return bool(_HOW_TO.search(question))


# What names a page of the knowledge base (a question asking for one names it, then what it is about)
# (not "file": "which file configures the channels?", "where is the lock file?" ask for a file of the
# product, whose name the pages state, not for a page of the documentation)
_PAGE_WORD = (
    r"(?:guides?|docs?|documents?|documentation|pages?|manuals?|readmes?|runbooks?|instructions|tutorials?|"
    r"articles?|handbooks?|wiki(?:\s+pages?)?|write-?ups?|how-?tos?)"
)
# A question asking for the page about something rather than for what it says: "give me the link to the
# Slack setup guide", "where is the doc on reindexing?", "which file configures the channels?", "is there
# a page about deploys?", "point me to the runbook for the queue". Not "which file formats are read?"
# (what the product does with files) nor "where's the kibana link" (a link the pages hold: asks_for_link).
_PAGE_QUESTION = re.compile(
    rf"\b(?:links?|urls?|address|path)\s+(?:to|of|for)\s+(?:the\s+|a\s+|an\s+|our\s+)?(?:[\w-]+\s+){{0,4}}?{_PAGE_WORD}\b|"
    rf"\bwhere(?:'s|\s+is|\s+are|\s+can\s+i\s+find|\s+do\s+i\s+find|\s+would\s+i\s+find)?\s+(?:the\s+|a\s+|our\s+)?"
    rf"(?:[\w-]+\s+){{0,3}}?{_PAGE_WORD}\s+(?:on|about|for|that|which|describing|explaining|covering)\b|"
    rf"\bwhich\s+{_PAGE_WORD}\b(?!\s+(?:formats?|types?|sizes?|extensions?|names?)\b)|"
    rf"\b(?:is\s+there|do\s+we\s+have|got)\s+(?:a|an|any)\s+{_PAGE_WORD}\s+(?:on|about|for)\b|"
    rf"\b(?:point|send|give|show|link)\s+me\s+(?:to\s+)?(?:the\s+|a\s+|an\s+)?(?:[\w-]+\s+){{0,4}}?{_PAGE_WORD}\b",
    re.I,
)
# the words of such a question that ask for the page, not what it is about
_PAGE_REQUEST_WORDS = frozenset(
    """link links url urls address path guide guides doc docs document documents documentation page pages file
files manual manuals readme readmes runbook runbooks instruction instructions tutorial tutorials article articles
handbook handbooks wiki write writeup writeups up howto howtos where which find give send show point please there
have got describe describes explain explains cover covers mention mentions talk talks tell tells""".split()
)


def asks_for_page(question: str) -> bool:
    """The question asks for the page about something ("give me the link to the Slack setup
    guide", "where is the doc on reindexing?", "which file configures the channels?"): it is
    answered by naming the page (its title and where it is), not by a sentence holding "link"."""
    return bool(_PAGE_QUESTION.search(question))


def page_subject(question: str) -> set[str]:
    """The terms of a page request (:func:`asks_for_page`) that say what the page is about:
    ``{"slack", "setup"}`` of "give me the link to the Slack setup guide"."""
    return terms(question) - _PAGE_REQUEST_WORDS - terms(" ".join(_PAGE_REQUEST_WORDS))


# A bound, a size or a price of something the asker uses: "max file size", "whats the attachment
# limit", "storage quota on solo", "how much does it cost", "upload cap"
_BOUND_QUESTION = re.compile(
    r"\b(?:max|maximum|min|minimum|limits?|quotas?|caps?|allowance|price|prices|pricing|cost|costs|fees?|"
    r"how\s+(?:big|large|much)\s+(?:can|may|is|are|does|do)\b|size\s+limit|largest|biggest|smallest)\b",
    re.I,
)


def asks_for_bound(question: str) -> bool:
    """The question asks for a limit, a size bound, a quota or a price ("whats the max attachment
    size", "upload limit?", "how much does the team plan cost"): what a product's own pages state,
    never general knowledge however near its embedding lies to "how many bytes in a kilobyte"
    (:meth:`graphs.offline_router.OfflineRouter.vetoed`). A bound of something in the world ("the max
    value of an int in python") is searched too, and the give-up step still tells it is not about
    the documents when no page answers it."""
    return bool(_BOUND_QUESTION.search(question))


# Who in the team does, approves or owns something: "who approves a hotfix?", "who signs off a release?",
# "who owns the billing service?", "who is responsible for backups?", "who do I ask about access?". A
# question about who did something in the world is asked in the past tense ("who wrote hamlet?", "who won
# the derby?") or about a title ("who is the president of france?").
_TEAM_VERBS = (
    r"(?:approves?|signs?\s+off|owns?|reviews?|decides?|handles?|maintains?|manages?|merges?|deploys?|triages?|"
    r"grants?|assigns?|looks\s+after|takes\s+care\s+of)"
)
_WHO_IN_TEAM = re.compile(
    rf"\bwho\s+(?:(?:can|should|must|will|may|would)\s+)?{_TEAM_VERBS}\b|"
    # "which team owns the billing service?", "which group handles refunds?" (not "which team plan ...")
    rf"\bwhich\s+(?:team|group|department|squad|person|people|role)s?\s+(?:(?:can|should|must|will|does|do)\s+)?"
    rf"{_TEAM_VERBS}\b|"
    r"\b(?:who|which\s+team)(?:'s|’s|s|\s+is|\s+are)\s+(?:responsible|in\s+charge|accountable)\b|"
    r"\bwho\s+(?:do|should|can|must)\s+(?:i|we)\s+(?:ask|tell|contact|ping|talk\s+to|speak\s+to|go\s+to|"
    r"escalate\s+to|report\s+to)\b",
    re.I,
)


def asks_who_in_team(question: str) -> bool:
    """The question asks who or which team in the team does, approves or owns something
    (:data:`_WHO_IN_TEAM`: "who approves a hotfix?", "which team owns the billing service?"): a team
    question its experts answer when no page does, never general knowledge nor a question about the
    world outside the team, however near its embedding lies to "who wrote hamlet"
    (:meth:`graphs.offline_router.OfflineRouter.vetoed`, :meth:`~graphs.offline_router.OfflineRouter.off_topic`),
    and answered only by a sentence naming who does it (:func:`says_who_does`)."""
    return bool(_WHO_IN_TEAM.search(question))


# Who does something, as a sentence names them: a role ("the release manager", "one maintainer", "the on-call
# engineer"), a team or group ("the platform team", "#security"), a handle or an address ("@dana",
# "hr@example.com"), anyone at all ("any member of staff can approve it"). Not a word that names a thing as
# often ("board", "support", "it")
_DOER = re.compile(
    r"\b(?:teams?|squads?|groups?|departments?|desks?|committees?|leads?(?!\s+to\b)|managers?|owners?|maintainers?|"
    r"engineers?|developers?|admins?|administrators?|approvers?|reviewers?|directors?|head\s+of|officers?|chairs?|"
    r"cto|ceo|cfo|coo|vps?|on[-\s]?call|person|people|someone|somebody|anyone|anybody|everyone|staff|members?|"
    r"authors?|captains?|champions?|coordinators?|specialists?|architects?|founders?|hr)\b|"
    r"(?<![\w@.])[@#][a-z][\w.-]+|\b[\w.+-]+@[\w-]+\.[a-z]{2,}\b",
    re.I,
)
# the words of a who-question that ask who, not what it is about ("who", "which team", "responsible")
_WHO_WORDS = frozenset(
    terms(
        "who whom whose which team teams group department squad person people role responsible charge accountable "
        "ask tell contact ping talk speak go escalate report"
    )
)


def says_who_does(question: str, text: str, page: str = "") -> bool:
    """``text`` (a sentence, with its heading) names who does what the who-question ``question``
    (:func:`asks_who_in_team`) asks about: it names a doer (:data:`_DOER`: a role, a team, a handle or
    an address) and, beside the doer's own words, a word of what is asked: of its subject ("release" of
    "who signs off a release?", "billing" of "which team owns the billing service?"), or the verb when
    the question names nothing else ("who approves?"). "The release notes now open from the help
    menu." names no one, and "Managers approve holiday requests." not who approves a hotfix.
    ``page``: the page's title, read with ``text`` when ``text``'s first line (its section's heading)
    is there and names nothing but who does it (a sentence under no heading is not about the title's
    every word): "- your team lead" under "## Who to tell" of "# Being off sick"
    says whom to tell when off sick, while under "## Security incidents" of "# Services" the security
    team does not own every service."""
    if not _DOER.search(text):
        return False
    asking = _WHO_IN_TEAM.search(question)
    verb = terms(asking.group()) - _WHO_WORDS if asking else set()
    subject = terms(question) - _WHO_WORDS - verb
    heading = text.split("\n", 1)[0]
    if page and heading.strip() and not terms(heading) - _WHO_WORDS - verb:
        text = f"{page}\n{text}"
    said = terms(_DOER.sub(" ", text))
    # one word of what is asked is enough: a chatty question ("feeling rubbish today, who do I tell that I'm
    # off sick") holds words no sentence repeats; the grader's bar still weighs how well the rest matches
    return bool((subject or verb) & said)


# A sentence stating a bound with its number: "at most 20 MB each", "up to 25 guests", "no more than 60
# requests a minute", "limited to 3 devices"
_STATES_BOUND = re.compile(
    r"\b(?:at\s+most|up\s+to|no\s+more\s+than|not\s+more\s+than|maximum(?:\s+of)?|max|limit(?:ed)?\s+(?:to|of|is)|"
    r"capped\s+at|at\s+least|minimum(?:\s+of)?)\b[^.;\n]{0,20}?\d",
    re.I,
)
# The words that ask for a bound: not the subject a bound sentence must share with the question
BOUND_WORDS = frozenset(
    terms("what whats how max maximum min minimum limit limits quota caps cap allowance size price cost fee largest")
)


def states_bound(text: str) -> bool:
    """``text`` states a bound with its number ("can be at most 20 MB each", "up to 25 guests")."""
    return bool(_STATES_BOUND.search(text))


def asks_for_quantity(question: str) -> bool:
    """The question asks for an amount, a duration, a frequency or a time ("how many days",
    "how much notice", "how often", "by when", "the default timeout")."""
    return bool(_QUANTITY_QUESTION.search(question))


def states_quantity(text: str) -> bool:
    """``text`` states an amount: a digit or a number or frequency word ("five seconds",
    "fortnightly", "25 days")."""
    return bool(_QUANTITY.search(text))


# A sentence that sends the reader elsewhere instead of saying anything: "See `LMOVE` for more
# information.", "For details, refer to the configuration page.", "Please refer to the documentation
# of `INCRBYFLOAT` for further information." (what it points at is another page, not an answer).
_POINTER = re.compile(
    r"^\W*(?:(?:please\s+)?(?:see|refer\s+to)\b|"
    r"for\s+(?:more|further|additional|full|complete|detailed)?\s*(?:information|info|details)\b|"
    r"for\s+(?:an?\s+)?(?:introduction|overview)\b|more\s+(?:information|details|info)\b|learn\s+more\b|"
    r"(?:check|read)\s+(?:out\s+)?the\b.{0,80}\b(?:page|documentation|docs|guide|section|wiki|reference)\b)|"
    r"\bplease\s+(?:refer|see)\b|\brefer\s+to\s+the\s+(?:documentation|docs)\b",
    re.I,
)


def is_pointer(sentence: str) -> bool:
    """``sentence`` points the reader to another page or section ("See `LMOVE` for more
    information.", "For details, refer to ...", "..., please refer to the documentation of X for
    further information."): it never answers on its own, so it never opens an answer."""
    return bool(_POINTER.search(sentence))


# A yes/no question: "can I ...?", "does X support ...?", "is it possible to ...", "will I lose
# precision?", a verb asking whether after a clause ("if I INCR it does the expire get reset"); not
# a question asking which, how or what ("how do I ...", "what port is ...").
_MODAL = r"(?:can|could|does|do|did|is|are|was|will|would|should|may|must|has|have)\s+(?!not\b)[\w`'.-]+"
# opening the question or a clause of it ("worker should wait, can it wait forever?"), or "does the / do I /
# did it" anywhere ("if I INCR it does the expire get reset")
_YES_NO_VERB = re.compile(
    rf"(?:^\W*|[,;:.!?(]\s*|\b(?:so|and|but|or|then|also|otherwise)\s+){_MODAL}|"
    r"\b(?:does|do|did)\s+(?:the|a|an|my|your|our|its|it|this|that|these|those|i|we|you|they)\b",
    re.I,
)
_ANY_MODAL = re.compile(rf"\b{_MODAL}", re.I)  # anywhere, in a message ending with "?"
_WH_WORD = re.compile(r"\b(?:how|what|what's|whats|where|where's|which|who|whom|whose|why|when)\b", re.I)


# A sentence giving a verdict: what is not so, cannot be done or is not supported ("is **NOT**
# supported", "cannot work from abroad", "does not contain expire information", "deprecated"); a
# negation alone is not one ("if it is not firing, ...", "receipts are not required").
_VERDICT = re.compile(
    r"\b(?:cannot|can't|unsupported|deprecated|impossible|incompatible)\b|"
    r"\b(?:not|n't|never|no\s+longer)[*_]*\s+(?:[\w*]+\s+){0,2}?"
    r"(?:support|supported|supports|possible|allowed|available|compatible|able|eligible|recommended|work|works|"
    r"contain|contains|kept|preserved|receive|guaranteed|safe)\b",
    re.I,
)


def asks_yes_no(question: str) -> bool:
    """``question`` asks whether something holds or can be done ("can I run it on FreeBSD?",
    "if I INCR a counter does the expire get reset", "is running the image on a mac fine?"),
    not for a thing or a way (a question with "how", "what", "which", "where", ... is not)."""
    if _WH_WORD.search(question):
        return False
    return bool(_YES_NO_VERB.search(question)) or (
        question.rstrip().endswith("?") and bool(_ANY_MODAL.search(question))
    )


def states_verdict(text: str) -> bool:
    """``text`` gives a verdict a yes/no question is answered by: what is not so or cannot be
    done ("is **NOT** supported", "cannot work from abroad", "does not contain expire information",
    "is no longer available", "deprecated")."""
    return bool(_VERDICT.search(text))


# A sentence stating what works, is supported or can be done: "It works with Slack and Discord", "Runs on
# Linux and macOS", "PostgreSQL 14 and later are supported", "connect either one, or both at once".
_CAPABILITY = re.compile(
    r"\b(?:works?|runs?|integrates?|connects?|talks?)\s+(?:(?:only|well|fine|equally)\s+)?"
    r"(?:with|on|in|alongside|against|to)\b|"
    r"\b(?:supports?|supported|compatible|available)\b|"
    r"\bcan\s+(?:also\s+)?(?:be\s+)?(?:used?|run|connect(?:ed)?|work|talk)\b|"
    r"\beither\b[^.]*\bor\b|\bor\s+both\b|\band/or\b",
    re.I,
)


def states_capability(text: str) -> bool:
    """``text`` states what works, is supported or can be done ("It works with Slack and Discord",
    "connect either one, or both at once", "PostgreSQL 14 and later are supported"), and no verdict
    against it (:func:`states_verdict`: "is not supported" is a "no")."""
    return bool(_CAPABILITY.search(text)) and not states_verdict(text)
