"""The extractive offline path: grade documents and compose answers from the documents'
own sentences, with the knowledge base's embeddings and the lexical signals of
:mod:`graphs.signals`, and no chat-model call (``[graph] composer = "extractive"``).

- :func:`split_units` cuts a document into sentences / list items (prose) and whole
  fenced code blocks (never cut).
- :class:`Extractive` scores units against the question (cosine similarity of MiniLM
  vectors plus the share of the question's terms they hold), grades documents by their
  best unit, reranks retrieved chunks, widens a chunk to its section (parent retrieval),
  and composes the answer: the best sentences in document order, each cited ``[n]``
  (``n`` = position in the graded documents), followed by the code block they introduce.

Without embeddings (keyword-only knowledge base) every score is lexical only.
Thresholds are calibrated on the development eval set by ``bench/calibrate_offline.py``
(cross-validated on its two halves, see bench/README.md).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from graphs import signals
from graphs.knowledge.common import KnowledgeBaseError
from graphs.knowledge.embedding import TextEmbedder  # noqa: F401 - used here, re-exported
from graphs.knowledge.splitting import fence_indented_code
from graphs.state import Doc

if TYPE_CHECKING:
    from graphs.knowledge import KnowledgeBase

# ---- calibrated constants (bench/calibrate_offline.py on the dev eval set) ---------------
LEXICAL_WEIGHT = 0.5  # weight of the lexical share against the cosine in a unit's score
RELEVANCE_THRESHOLD = 0.5  # a document is relevant when its best unit scores at least this
# ... and at least this when the router took the question for current events (no web search
# configured, so the knowledge base is searched anyway: only a strong match may answer)
CURRENT_RELEVANCE_THRESHOLD = 0.62
RERANK_PRIOR_WEIGHT = 0.75  # weight of the hybrid search's rank against cos(question, chunk)
RERANK_TITLE_WEIGHT = 0.1  # weight of the question terms found in the file and heading path
# answer shape
INLINE_CODE_BONUS = 0.1  # added to the score of a sentence holding inline code (identifiers, settings)
RELATIVE_CUTOFF = 0.4  # sentences scoring under this share of the best one are not quoted
MAX_SENTENCES = 6  # best-scoring sentences quoted
NEIGHBOURS = 2  # sentences quoted after each of them (the next ones of its paragraph)
BEFORE = 1  # sentences quoted before each of them (what a heading-like match introduces, or the cause it follows)
MAX_ANSWER_CHARACTERS = 3000
MAX_CODE_CHARACTERS = 1200
MAX_SECTION_CHARACTERS = 4000


# ---- splitting ------------------------------------------------------------------------
@dataclass
class Unit:
    """One sentence / list item (``code`` False) or one whole fenced code block."""

    doc: int  # 0-based position of its document
    pos: int  # position in the document
    text: str
    code: bool = False


_FENCE = re.compile(r"^\s*(```|~~~)")
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_HTML = re.compile(
    r"</?(?:a|p|br|hr|div|span|img|sup|sub|details|summary|figure|figcaption|iframe|video|source|"
    r"table|thead|tbody|tr|td|th|ul|ol|li|em|strong|b|i|code|pre|center|picture)\b[^<>]*>",
    re.I,
)
_ADMONITION = re.compile(r"^\s*(?:!!!|\?\?\?\+?)\s*\w*(?:\s+\"([^\"]*)\")?\s*$")
# A sentence ends at . ! ? before a capital letter (Latin, Greek, Cyrillic) or a quote, or
# right after the full-width ends of Chinese and Japanese (。！？), which take no space.
_SENTENCE_END = re.compile(
    r"(?<!\be\.g\.)(?<!\bi\.e\.)(?<!\bvs\.)"
    r"(?:(?<=[.!?])\s+(?=[A-ZÀ-ÖØ-ÞΑ-ΩА-ЯЁ`\"(*])|(?<=[。！？])\s*)"
)
_ITEM = re.compile(r"^\s*(?:[-*+]|\d+\.)\s+")


def clean_prose(text: str) -> str:
    """Markdown prose as plain readable text: links keep their words, HTML tags, list
    markers, heading marks and admonition markers go."""
    text = _LINK.sub(r"\1", text)
    text = re.sub(r":::\w*", " ", text)  # mkdocs tab / language markers
    text = _HTML.sub(" ", text)
    text = re.sub(r"^\s*#+\s*", "", text)
    text = _ITEM.sub("", text)
    return re.sub(r"\s+", " ", text).strip(" \t")


def split_units(text: str, doc: int = 0, min_characters: int = 20) -> list[Unit]:
    """Cut ``text`` (Markdown) into prose units (sentences, list items; hard-wrapped lines
    joined), whole code blocks (fenced ones dedented, fences kept; indented ones fenced) and whole
    tables (rows kept). Prose pieces shorter
    than ``min_characters`` are dropped; code blocks are never cut."""
    units: list[Unit] = []
    lines = fence_indented_code(text).splitlines()  # indented code is code too, not prose to join
    block: list[str] = []

    def flush() -> None:
        if not block:
            return
        joined = clean_prose(" ".join(block))
        block.clear()
        for piece in _SENTENCE_END.split(joined):
            piece = piece.strip()
            # a CJK character carries about a word: count it twice against the minimum
            if len(piece) + sum(1 for ch in piece if ord(ch) >= 0x2E80) >= min_characters:
                units.append(Unit(doc, len(units), piece))

    i = 0
    while i < len(lines):
        line = lines[i]
        m = _FENCE.match(line)
        if m:
            flush()
            indent = len(line) - len(line.lstrip())
            fence = m.group(1)
            body = [line[indent:]]
            i += 1
            while i < len(lines):
                body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i].lstrip())
                if lines[i].strip().startswith(fence):
                    break
                i += 1
            if not body[-1].strip().startswith(fence) or len(body) == 1:
                body.append(fence)  # unterminated block (chunk cut): close it
            if any(b.strip() for b in body[1:-1]):  # an empty block (a chunk cut at its fence) is dropped
                units.append(Unit(doc, len(units), "\n".join(body).strip(), code=True))
            i += 1
            continue
        if line.lstrip().startswith("|"):
            # a Markdown table is kept whole, like code: its rows mean nothing flattened into prose
            flush()
            rows = []
            while i < len(lines) and lines[i].lstrip().startswith("|"):
                rows.append(lines[i].strip())
                i += 1
            if len(rows) > 1 and not rows[-1].endswith("|"):
                rows.pop()  # a row cut by the chunk's or the prompt's length limit
            units.append(Unit(doc, len(units), "\n".join(rows), code=True))
            continue
        if not line.strip() or _ITEM.match(line) or line.lstrip().startswith("#") or _ADMONITION.match(line):
            flush()
            adm = _ADMONITION.match(line)
            if adm:
                if adm.group(1):
                    block.append(adm.group(1) + ":")
                i += 1
                continue
        if line.strip():
            block.append(line)
            if line.lstrip().startswith("#"):
                flush()
        i += 1
    flush()
    return units


def lexical_share(q_terms: set[str], text: str) -> float:
    """Share (0..1) of the question's terms that occur in ``text``."""
    return len(q_terms & signals.terms(text)) / len(q_terms) if q_terms else 0.0


# ---- the extractive brain ---------------------------------------------------------------
@dataclass
class Scored:
    unit: Unit
    score: float


class Extractive:
    """Grades, reranks and composes with embeddings (optional) and lexical signals.

    Args:
        embedder: a :class:`TextEmbedder` (its embeddings may be ``None``).
        knowledge: the :class:`~graphs.knowledge.KnowledgeBase` (sections are read from
            its live snapshot; ``None`` disables section widening).
    """

    def __init__(
        self,
        embedder: TextEmbedder,
        knowledge: KnowledgeBase | None = None,
        relevance_threshold: float = RELEVANCE_THRESHOLD,
        current_relevance_threshold: float = CURRENT_RELEVANCE_THRESHOLD,
    ):
        self.embedder = embedder
        self.knowledge = knowledge
        self.relevance_threshold = relevance_threshold
        self.current_relevance_threshold = current_relevance_threshold

    # ---- scoring ------------------------------------------------------------------
    def question_vectors(self, questions: Sequence[str]) -> np.ndarray | None:
        """Unit vectors of the question variants (``None`` without embeddings)."""
        qs = [q for q in questions if q.strip()]
        return self.embedder(qs) if qs else None

    def score_units(self, questions: Sequence[str], units: list[Unit]) -> list[Scored]:
        """Score each unit: best cosine over the question variants (0 without embeddings)
        plus ``LEXICAL_WEIGHT`` x the share of the question's terms it holds. Code blocks
        score on their terms and half their cosine (MiniLM reads code poorly)."""
        if not units:
            return []
        q_terms: set[str] = set()
        for q in questions:
            q_terms |= signals.terms(q)
        qv = self.question_vectors(questions)
        cos = np.zeros(len(units), dtype=np.float32)
        if qv is not None:
            uv = self.embedder([u.text[:1000] for u in units])
            cos = (uv @ qv.T).max(axis=1)
        out = []
        for u, c in zip(units, cos, strict=True):
            lex = lexical_share(q_terms, u.text)
            bonus = INLINE_CODE_BONUS if not u.code and "`" in u.text else 0.0
            out.append(Scored(u, float(c) * (0.5 if u.code else 1.0) + LEXICAL_WEIGHT * lex + bonus))
        return out

    def doc_units(self, docs: Sequence[Doc]) -> list[Unit]:
        """The units of every document, the title counted as a prose unit of its own."""
        units: list[Unit] = []
        for i, d in enumerate(docs):
            units += split_units(d.get("text", ""), i)
        return units

    def grade(self, questions: Sequence[str], docs: Sequence[Doc]) -> list[float]:
        """Relevance of each document (0..~1.5): the score of its best prose unit."""
        scored = self.score_units(questions, self.doc_units(docs))
        best = [0.0] * len(docs)
        for s in scored:
            if not s.unit.code:
                best[s.unit.doc] = max(best[s.unit.doc], s.score)
        return best

    # ---- retrieval helpers --------------------------------------------------------------
    def rerank_features(self, questions: Sequence[str], docs: list[Doc]) -> tuple[np.ndarray, np.ndarray]:
        """``(cosine, title share)`` per chunk: the best cosine of the question variants
        with the chunk's heading path and text, and the share of the question's terms in
        its file path and heading path."""
        q_terms: set[str] = set()
        for q in questions:
            q_terms |= signals.terms(q)
        title = np.array(
            [
                lexical_share(q_terms, f"{re.sub(r'[/_.-]+', ' ', d.get('location', ''))} {d.get('title', '')}")
                for d in docs
            ],
            dtype=np.float32,
        )
        qv = self.question_vectors(questions)
        if qv is None or not docs:
            return np.zeros(len(docs), dtype=np.float32), title
        dv = self.index_vectors(docs)
        if dv is None or dv.shape[1] != qv.shape[1]:
            dv = self.embedder([f"{d.get('title', '')}\n{d.get('text', '')}"[:1000] for d in docs])
        return (dv @ qv.T).max(axis=1), title

    def index_vectors(self, docs: Sequence[Doc]) -> np.ndarray | None:
        """The chunks' vectors from the live index (a knowledge-base Doc id is
        ``file#rowid``, row ``rowid - 1`` of the snapshot's vectors), or ``None`` when a
        document is not a knowledge-base chunk or the index has no vectors."""
        vectors = getattr(getattr(self.knowledge, "snapshot", None), "vectors", None)
        if vectors is None:
            return None
        rows = []
        for d in docs:
            m = re.search(r"#(\d+)$", str(d.get("id", "")))
            if not m or not 1 <= int(m.group(1)) <= len(vectors):
                return None
            rows.append(int(m.group(1)) - 1)
        return np.asarray(vectors[rows], dtype=np.float32)

    @staticmethod
    def rerank_scores(
        cos: np.ndarray,
        title: np.ndarray,
        prior: float = RERANK_PRIOR_WEIGHT,
        title_weight: float = RERANK_TITLE_WEIGHT,
    ) -> np.ndarray:
        """Rerank score of chunks in hybrid-search order: ``prior x 11/(10 + rank)`` (the
        fused rank, 1 for the first) plus the cosine plus ``title_weight x`` title share."""
        ranks = np.arange(1, len(cos) + 1, dtype=np.float32)
        return prior * 11.0 / (10.0 + ranks) + cos + title_weight * title

    def rerank(self, questions: Sequence[str], docs: list[Doc], k: int) -> list[Doc]:
        """The ``k`` best of ``docs`` (hybrid-search order) by :meth:`rerank_scores`."""
        if len(docs) <= 1:
            return docs[:k]
        cos, title = self.rerank_features(questions, docs)
        order = np.argsort(-self.rerank_scores(cos, title), kind="stable")
        return [docs[i] for i in order[:k]]

    def retrieve(
        self,
        questions: Sequence[str | tuple[str, float]],
        k: int,
        candidates_per_result: int = 4,
        sources: Sequence[str] | None = None,
    ) -> list[Doc]:
        """Search the knowledge base (``questions``: plain or ``(query, weight)``, see
        ``KnowledgeBase.search``) for ``k * candidates_per_result`` chunks, keep the
        ``k`` best after :meth:`rerank`, each widened to its section (:meth:`widen`; two
        chunks of one section become one document). ``sources``: only these configured
        sources (``KnowledgeBase.search``).

        Raises:
            KnowledgeBaseError: no index has been built (or no knowledge base was given).
        """
        if self.knowledge is None:
            raise KnowledgeBaseError("no knowledge base to retrieve from")
        cands = (
            self.knowledge.search(list(questions), k * candidates_per_result, sources=sources)
            if sources is not None
            else self.knowledge.search(list(questions), k * candidates_per_result)
        )
        texts = [q if isinstance(q, str) else q[0] for q in questions]
        out: list[Doc] = []
        seen: set[tuple[str, str]] = set()
        for d in self.rerank(texts, cands, len(cands)):
            key = (d.get("location", ""), d.get("title", ""))
            if key not in seen:
                seen.add(key)
                out.append(self.widen(d))
            if len(out) >= k:
                break
        return out

    def widen(self, doc: Doc) -> Doc:
        """The chunk widened to its whole section (the chunks of its file sharing its
        heading path, in order), cut to ``MAX_SECTION_CHARACTERS`` around the chunk."""
        snap = getattr(self.knowledge, "snapshot", None) if self.knowledge is not None else None
        if snap is None or not hasattr(snap, "file_chunks"):
            return doc
        try:
            chunks = [c for c, _ in snap.file_chunks(doc["location"], doc.get("source"))]
        except Exception:  # noqa: BLE001 - a section is an optional extra
            return doc
        section = [c.text for c in chunks if c.title == doc.get("title", "")]
        if len(section) <= 1 or doc.get("text") not in section:
            return doc
        at = section.index(doc["text"])
        text, lo, hi = doc["text"], at, at
        while True:  # grow around the chunk, after first, within the limit
            grew = False
            for j in (hi + 1, lo - 1):
                if (
                    0 <= j < len(section)
                    and (j > hi or j < lo)
                    and len(text) + len(section[j]) <= MAX_SECTION_CHARACTERS
                ):
                    text = text + "\n\n" + section[j] if j > hi else section[j] + "\n\n" + text
                    hi, lo = max(hi, j), min(lo, j)
                    grew = True
            if not grew:
                break
        return Doc(**{**doc, "text": text})

    # ---- composing -------------------------------------------------------------------------
    def compose(
        self,
        questions: Sequence[str],
        docs: Sequence[Doc],
        intro: str = "From the documentation:",
        max_sentences: int | None = None,
        neighbours: int | None = None,
        before: int | None = None,
    ) -> str:
        """An answer quoting the best-scoring sentences of ``docs`` in document order, each
        paragraph cited ``[n]`` (``n`` = 1-based position in ``docs``), each followed by
        the code block that comes right after it in the document (whole, or left out
        when longer than ``MAX_CODE_CHARACTERS``), with up to ``before`` prose sentences
        before it (default ``BEFORE``) and ``neighbours`` after it; "…" marks sentences
        left out between two quoted ones of a paragraph. ``""`` when no sentence scores
        above zero."""
        max_sentences = MAX_SENTENCES if max_sentences is None else max_sentences
        neighbours = NEIGHBOURS if neighbours is None else neighbours
        before = BEFORE if before is None else before
        units = self.doc_units(docs)
        scored = self.score_units(questions, units)
        by_key = {(s.unit.doc, s.unit.pos): s for s in scored}
        prose = sorted((s for s in scored if not s.unit.code and s.score > 0), key=lambda s: -s.score)
        if not prose:
            return ""
        top = prose[0].score
        chosen: list[Unit] = []
        size = 0
        picked = 0
        for s in prose:
            if picked >= max_sentences or s.score < top * RELATIVE_CUTOFF:
                break
            if size + len(s.unit.text) > MAX_ANSWER_CHARACTERS or s.unit in chosen:
                continue
            picked += 1
            chosen.append(s.unit)
            size += len(s.unit.text)
            for back in range(1, before + 1):  # the sentences before it (prose only)
                prev = by_key.get((s.unit.doc, s.unit.pos - back))
                if (
                    prev is None
                    or prev.unit.code
                    or prev.unit in chosen
                    or size + len(prev.unit.text) > MAX_ANSWER_CHARACTERS
                ):
                    break
                chosen.append(prev.unit)
                size += len(prev.unit.text)
            pos = s.unit.pos
            for _ in range(neighbours + 1):  # the next sentences, then the code block they lead to
                nxt = by_key.get((s.unit.doc, pos + 1))
                if nxt is None:
                    break
                pos += 1
                if nxt.unit.code:
                    if (
                        len(nxt.unit.text) <= MAX_CODE_CHARACTERS
                        and size + len(nxt.unit.text) <= MAX_ANSWER_CHARACTERS + MAX_CODE_CHARACTERS
                    ):
                        chosen.append(nxt.unit)
                        size += len(nxt.unit.text)
                    break
                if size + len(nxt.unit.text) > MAX_ANSWER_CHARACTERS:
                    break
                chosen.append(nxt.unit)
                size += len(nxt.unit.text)
        places = sorted({(u.doc, u.pos) for u in chosen})
        parts: list[str] = []
        para: list[str] = []
        last: tuple[int, int] | None = None
        quoted: set[str] = set()  # the same sentence in two chunks or pages is quoted once
        for doc_i, pos in places:
            u = by_key[(doc_i, pos)].unit
            key = " ".join(u.text.split()).lower()
            if key in quoted:
                continue
            quoted.add(key)
            if para and last is not None and (last[0] != doc_i or u.code):
                parts.append(" ".join(para) + f" [{last[0] + 1}]")
                para = []
            if u.code:
                parts.append(u.text)
            else:
                if para and last is not None and pos > last[1] + 1:
                    para.append("…")  # sentences left out between two quoted ones
                para.append(u.text)
            last = (doc_i, pos)
        if para and last is not None:
            parts.append(" ".join(para) + f" [{last[0] + 1}]")
        return (intro + "\n\n" if intro else "") + "\n\n".join(parts)
