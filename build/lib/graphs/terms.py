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
    and one-letter words (a one-character spaceless run, e.g. ``"鍵"``, is kept)."""
    seen: dict[str, None] = {}
    for w in words(text):
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
