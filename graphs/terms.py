"""Text terms for any script: the one tokenizer of keyword search and the lexical signals.

Words are runs of Unicode letters, digits, combining marks and ``_``, after NFKC
normalisation and case folding (``"Straße"`` -> ``"strasse"``, full-width -> ASCII).
Latin, Greek and Cyrillic words also lose their diacritics (``"Übersicht"`` ->
``"ubersicht"``), as SQLite FTS5's ``unicode61 remove_diacritics 2`` does.

Scripts written without spaces between words (Chinese, Japanese, Korean, Thai, Lao,
Khmer, Myanmar) have no word boundaries to find without a dictionary, so their runs
become overlapping character bigrams (``"設定ファイル"`` -> ``設定 定フ ファ ァイ イル``), the
usual dictionary-free approach of CJK full-text search (e.g. Lucene's CJKBigramFilter).
The index holds the bigrams and the single characters; queries use the bigrams (or the
single character of a one-character run).

Reading a question in another language word by word (:mod:`graphs.knowledge.crosslingual`)
needs words as they are written instead (:func:`written_words`: case and accents kept, a
katakana or Han run whole), the documents' dictionary words (:func:`plain_words`), and the
function words of the languages it reads (:data:`FUNCTION_WORDS`, :func:`names_no_topic`),
kept here with the English stopwords.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

STOPWORDS = frozenset(
    """a an and are as at be but by can could do does did for from has have how i if in into is it
    its me my no not of on or our so that the their them then there these they this to was we
    what when where which while who why will with would you your just any some get got im ive dont
    doesnt cant wont should shall about also one all like use using used want need tbh pls please""".split()
)
"""English function words left out of queries and lexical signals."""

#: The commonest function words of the languages the cross-language path reads (a few dozen
#: each, as written): a question holding more of another language's than of English's is in
#: that language (:func:`graphs.knowledge.crosslingual.is_foreign`).
FUNCTION_WORDS: dict[str, frozenset[str]] = {
    lang: frozenset(ws.split())
    for lang, ws in {
        "en": "the a an is are was were be to of and in on for with how what why when where which who do does did "
        "i my we our you your it this that can should there not no",
        "de": "der die das ein eine ist sind wie was warum wann wo wer ich wir ihr sie es und oder nicht kein "
        "mit für auf bei von zu im in den dem des muss kann soll gibt man mein meine unser",
        "fr": "le la les un une est sont comment quoi pourquoi quand où qui je nous vous il elle et ou ne pas "
        "avec pour sur dans du des de au aux faut peut dois mon ma mes notre quel quelle",
        "es": "el la los las un una es son cómo como qué que por qué cuándo dónde quién yo nosotros usted y o "
        "no con para en del de al hay puedo debo mi mis nuestro cuál",
        "it": "il lo la gli le un una è sono come cosa perché quando dove chi io noi voi e o non con per su "
        "nel del della posso devo mio mia",
        "pt": "o a os as um uma é são como que por quando onde quem eu nós você e ou não com para em do da "
        "posso devo meu minha",
        "nl": "de het een is zijn hoe wat waarom wanneer waar wie ik wij jij en of niet met voor op in van moet "
        "kan mijn",
    }.items()
}


def _marks_class() -> str:
    """A regex character-class body of every combining mark (Unicode category M*) in the BMP."""
    parts, start, prev = [], None, None
    for cp in range(0x300, 0x10000):
        if unicodedata.category(chr(cp)).startswith("M"):
            if start is None:
                start = cp
            prev = cp
        elif start is not None:
            parts.append(f"\\u{start:04x}-\\u{prev:04x}" if prev != start else f"\\u{start:04x}")
            start = None
    return "".join(parts)


_MARKS = _marks_class()
# Han (with extensions and compatibility), kana, Hangul, Thai, Lao, Myanmar, Khmer, and the
# iteration / prolonged-sound marks 々 〆 ー.
_SPACELESS = (
    "\u3005\u3006\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
    "\uac00-\ud7af\u1100-\u11ff\u3130-\u318f\u0e00-\u0e7f\u0e80-\u0eff\u1000-\u109f\u1780-\u17ff"
    "\U00020000-\U0003134f"
)
_WORD_RE = re.compile(rf"[\w{_MARKS}]+")
_SPACELESS_RUN_RE = re.compile(rf"([{_SPACELESS}][{_SPACELESS}{_MARKS}]*)")
_CLUSTER_RE = re.compile(rf".[{_MARKS}]*", re.S)
_HIRAGANA_RE = re.compile(r"[\u3040-\u309f]")
_DIACRITIC_SCRIPTS_END = 0x0530  # Latin, Greek and Cyrillic letters lie below U+0530


# A mention of a person, a group or a channel as the chat platforms give it: Slack's "<@U02345678>",
# "<#C0123|ops>", "<!subteam^S0123|@oncall>", "<!here>", Discord's "<@123456789012345678>", "<@!1234...>",
# "<@&role>", "<#channel>", and the ids bot/platforms/slack/format.incoming_text leaves of them ("@U02345678",
# "@W0123456", "#C0123", "@123456789012345678"). It names who is told or asked, never what is asked about:
# read as a word or a code ("U02345678" -> u, 02345678) it sent answered questions to the experts. An id
# holds a digit, so "@dataclass", "@angular/core" and "#ops" stay words.
_MENTION_RE = re.compile(
    r"<[@#!][^<>\n]{1,80}>|(?<![\w.@#/-])[@#](?:[A-Z](?=[A-Z0-9]*\d)[A-Z0-9]{2,}|\d{15,20})(?![\w-])"
)


def without_mentions(text: str) -> str:
    """``text`` with its mentions of people, groups and channels (:data:`_MENTION_RE`) made spaces:
    "@U02345678 how do I restore?" -> "  how do I restore?", "<#C0123|ops> hi" -> "  hi". The one
    reading of mentions for search words (:func:`content_terms`) and codes
    (:func:`graphs.signals.codes`, :func:`graphs.signals.asked_codes`)."""
    return _MENTION_RE.sub(" ", text) if ("@" in text or "#" in text or "<" in text) else text


def normalise(text: str) -> str:
    """NFKC-normalised, case-folded ``text`` (lone surrogates are dropped)."""
    if not text.isascii():
        text = text.encode("utf-8", "ignore").decode("utf-8")
        text = unicodedata.normalize("NFKC", text)
    return text.casefold()


@lru_cache(maxsize=65536)
def _fold(word: str) -> str:
    """``word`` without the diacritics of Latin, Greek and Cyrillic letters."""
    if word.isascii():
        return word
    decomposed = unicodedata.normalize("NFKD", word)
    if any(ord(c) >= _DIACRITIC_SCRIPTS_END and not unicodedata.combining(c) for c in decomposed):
        return word  # other scripts: marks are letters (Devanagari vowel signs, Japanese dakuten)
    return unicodedata.normalize("NFC", "".join(c for c in decomposed if not unicodedata.combining(c)))


def _bigrams(run: str) -> list[str]:
    """Overlapping bigrams of the character clusters (a base and its marks) of ``run``."""
    cl = _CLUSTER_RE.findall(run)
    return cl if len(cl) == 1 else [cl[i] + cl[i + 1] for i in range(len(cl) - 1)]


def words(text: str) -> list[str]:
    """The words of ``text`` in order: normalised words of spaced scripts (``_`` kept
    inside identifiers) and bigrams of spaceless runs (see the module docstring).

    Args:
        text: any Unicode text (lone surrogates and control characters are ignored).

    Returns:
        Terms in document order, with repeats.
    """
    out: list[str] = []
    for word in _WORD_RE.findall(normalise(text)):
        if word.isascii():
            out.append(word)
            continue
        for i, seg in enumerate(_SPACELESS_RUN_RE.split(word)):
            if not seg:
                continue
            if i % 2:  # a spaceless run
                grams = _bigrams(seg)
                if len(grams) > 1 and not _all_hiragana(seg):
                    # hiragana are mostly particles and inflections around kanji/katakana words
                    grams = [g for g in grams if not _HIRAGANA_RE.search(g)] or grams
                out += grams
            else:
                out.append(_fold(seg))
    return out


def _all_hiragana(run: str) -> bool:
    return all(_HIRAGANA_RE.match(c) or unicodedata.combining(c) for c in run)


def content_terms(text: str) -> list[str]:
    """Distinct content terms of ``text`` in order: :func:`words` minus English stopwords
    and one-letter words (a one-character spaceless run, e.g. ``"鍵"``, is kept), without the
    mentions of people and channels (:func:`without_mentions`)."""
    seen: dict[str, None] = {}
    for w in words(without_mentions(text)):
        if (len(w) > 1 or is_spaceless(w)) and w not in STOPWORDS:
            seen.setdefault(w, None)
    return list(seen)


def index_text(text: str) -> str:
    """``text`` as the keyword index stores it: normalised and folded as :func:`words` does
    (so that queries made of :func:`words` match whatever SQLite's tokenizer folds), and every
    spaceless run replaced by its single characters and bigrams, so that FTS5's ``unicode61``
    tokenizer (which would keep a whole run as one token) sees terms."""

    def spread(m: re.Match[str]) -> str:
        run = m.group(1)
        cl = _CLUSTER_RE.findall(run)
        return " " + " ".join(cl + (_bigrams(run) if len(cl) > 1 else [])) + " "

    norm = normalise(text)
    if norm.isascii():
        return norm
    return _SPACELESS_RUN_RE.sub(spread, _WORD_RE.sub(lambda m: _fold(m.group()), norm))


def is_spaceless(term: str) -> bool:
    """True if ``term`` starts with a character of a script written without spaces."""
    return bool(_SPACELESS_RUN_RE.match(term))


# ---- words as written, for reading a question in another language word by word ----------------

# more of the commonest words of questions in German, French and Spanish that translate to no topic
_MORE_FOREIGN_STOPWORDS = frozenset(
    "einen einem einer eines wird werden wurde habe haben hat bin bist sein seine auch noch nur schon "
    "immer dann denn aber wenn weil dass damit darf dürfen können müssen sollte welche welcher welches "
    "viele lange oft bekommen machen ihn beim aus pro "
    "puis peux peut faire fait avez avoir suis sommes êtes ont sera être cette ces leur leurs son sa ses "
    "tout tous toute toutes très plus moins comme aussi encore après avant combien dois doit "
    "qu quoi lorsque à par moi même "
    "está están puedo puede pueden hacer tengo tiene tienen tenemos esta este estos estas ese esa muy más menos "
    "cuánto cuánta cuántos cuántas también todo todos después antes sobre cuando debería deberíamos".split()
)


def plain(word: str) -> str:
    """``word`` normalised and folded as :func:`words` makes it (``"Cómo"`` -> ``"como"``)."""
    return _fold(normalise(word))


# more English words that name no topic in a word read alone (a translation target "before" or
# "many" would add noise to any question's translation); the keyword search keeps them (STOPWORDS)
_MORE_ENGLISH_STOPWORDS = frozenset(
    "after again always been before being both doing down each few further had having here many more most much "
    "must needs only other over own same such than those through under until very were without yours".split()
)
_ENGLISH_NO_TOPIC = frozenset(plain(w) for w in STOPWORDS | FUNCTION_WORDS["en"] | _MORE_ENGLISH_STOPWORDS)
_NO_TOPIC = _ENGLISH_NO_TOPIC | frozenset(
    plain(w) for ws in (*FUNCTION_WORDS.values(), _MORE_FOREIGN_STOPWORDS) for w in ws
)


def names_no_topic(word: str, english_only: bool = False) -> bool:
    """``word`` (any case, with or without its accents) is a function word that names no topic:
    an English stopword (:data:`STOPWORDS`, the English :data:`FUNCTION_WORDS`, and more of the
    commonest English words, which a search keeps but a word read alone does not) or, unless
    ``english_only``, a function word or a common question word of another language the
    cross-language path reads."""
    return plain(word) in (_ENGLISH_NO_TOPIC if english_only else _NO_TOPIC)


# a question's words as written: Latin words (with accents; an identifier whole, "crates.io",
# "REDIS_URI"), katakana runs (loanwords: "チェックポイント"), Han runs ("病気", "週"), Cyrillic and
# Hangul words; hiragana (particles, inflections) and punctuation are left out
_WRITTEN_WORD = re.compile(
    r"[A-Za-zÀ-ÖØ-öø-ÿœŒ][A-Za-z0-9À-ÖØ-öø-ÿœŒ_]*(?:[./][A-Za-z0-9_]+)*|[\u30a1-\u30fa\u30fc\u31f0-\u31ff]{2,}"
    r"|[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3005]+|[\u0400-\u04ff]+|[\uac00-\ud7af]+"
)
# a dictionary word: a run of letters, lower-case after its first letter, not part of an identifier
# ("EncryptedSerializer", "REDIS_URI", "Cargo.toml") or of a hyphenated word
_PLAIN_WORD = re.compile(r"(?<![\w.-])[A-Za-z][a-z]+(?![\w-])")
_LATIN_WORD = re.compile(r"[a-zà-öø-ÿœ]+", re.I)


def written_words(text: str) -> list[str]:
    """The words of ``text`` as written, in order, with repeats: Latin words with their case and
    accents (an identifier with its ``.``, ``/`` and ``_`` parts whole), katakana runs of two or
    more, Han runs, Cyrillic and Hangul words."""
    return _WRITTEN_WORD.findall(text)


def plain_words(text: str) -> list[str]:
    """The dictionary words of ``text`` (English prose), lower-cased, in order, with repeats:
    runs of ASCII letters lower-case after their first, identifiers and hyphenated words left
    out (the keyword search matches those as they are)."""
    return [m.lower() for m in _PLAIN_WORD.findall(text)]


def is_latin_word(word: str) -> bool:
    """``word`` is Latin letters only (accents allowed: ``"pensión"``, not ``"http2"``)."""
    return bool(_LATIN_WORD.fullmatch(word))
