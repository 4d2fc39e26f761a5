"""Embedding many chunks in requests a hosted API accepts.

Hosted embedding APIs cap the tokens of one request. For Mistral the issue report quotes
16,384 tokens per request over all inputs; langchain-mistralai batches at 16,000 (its
``MAX_TOKENS``) and mistral-embed reads at most 8,192 tokens per input (neither checked
against docs.mistral.ai here: no internet). Offline there is no tokenizer (langchain-mistralai
then counts characters, which dense scripts exceed: a Chinese character is often more than
one token), so batches are sized from a conservative estimate (:func:`estimate_tokens`)
against a budget well under the limit (``knowledge.embedding_batch_tokens``), and a batch
the API still refuses with HTTP 400 for its size is split in halves and sent again.
"""

from __future__ import annotations

import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from graphs.knowledge.common import EmbeddingRefusedError

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings

log = logging.getLogger(__name__)


class _DropClientTraceback(logging.Filter):
    """langchain-mistralai logs a full traceback ("An error occurred with MistralAI") for
    every failed request before raising; we handle or report each failure in one line
    ourselves, so that record is dropped (a library fault worked around here only)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != "An error occurred with MistralAI"


logging.getLogger("langchain_mistralai.embeddings").addFilter(_DropClientTraceback())

_DENSE = re.compile(
    r"[\u0e00-\u0eff\u1000-\u109f\u1100-\u11ff\u1780-\u17ff\u3000-\u9fff\uac00-\ud7af"
    r"\uf900-\ufaff\uff00-\uffef\U00020000-\U0003134f]"
)
_TOO_BIG = re.compile(
    r"too many (?:tokens|inputs)|too large|too long|maximum context|token limit"
    r"|max(imum)? .*tokens",
    re.I,
)


def estimate_tokens(text: str) -> int:
    """A conservative token count without a tokenizer: one token per character of the
    scripts written without spaces (CJK, Thai, ...), one per two other non-ASCII
    characters (Cyrillic, Greek, accented letters take more tokens than English), and one
    per four ASCII characters (the usual English average); at least 1."""
    dense = len(_DENSE.findall(text))
    other = sum(1 for c in text if ord(c) > 127) - dense if not text.isascii() else 0
    ascii_chars = len(text) - dense - other
    return max(1, dense + (other + 1) // 2 + (ascii_chars + 3) // 4)


def batches(texts: Sequence[str], max_items: int, max_tokens: int) -> list[list[int]]:
    """Indices of ``texts`` grouped in order into batches of at most ``max_items`` texts
    and ``max_tokens`` estimated tokens (a single text over the budget is a batch alone)."""
    out: list[list[int]] = []
    cur: list[int] = []
    used = 0
    for i, t in enumerate(texts):
        n = estimate_tokens(t)
        if cur and (len(cur) >= max_items or used + n > max_tokens):
            out.append(cur)
            cur, used = [], 0
        cur.append(i)
        used += n
    if cur:
        out.append(cur)
    return out


def is_request_too_large(exc: BaseException) -> bool:
    """True for an HTTP 400/413 whose message says the request has too many tokens."""
    response = getattr(exc, "response", None)
    status = getattr(response, "status_code", None)
    if response is None or status not in (400, 413):
        return False
    try:
        body = response.text
    except Exception:  # noqa: BLE001 - a streamed body may be unreadable
        body = ""
    return status == 413 or bool(_TOO_BIG.search(f"{body} {exc}"))


def embed_texts(
    embeddings: Embeddings,
    texts: Sequence[str],
    *,
    max_items: int,
    max_tokens: int,
    concurrency: int = 1,
    progress: Callable[[int, int], None] | None = None,
) -> np.ndarray:
    """Embed ``texts`` (shortest first) in batches sized by :func:`batches`; a batch refused as too large
    (:func:`is_request_too_large`) is split in halves, down to single texts.

    Args:
        embeddings: any LangChain ``Embeddings``.
        texts: the texts, in order.
        max_items: most texts per request.
        max_tokens: most estimated tokens per request.
        concurrency: requests in flight at once (threads; the embeddings client must be
            thread-safe, as httpx-based clients are). A server that embeds on several
            cores or machines answers several requests in the time of one.
        progress: called as ``progress(done, total)`` after each request (from the calling
            thread or a worker, one call at a time).

    Returns:
        float32 matrix, row i = unit vector of ``texts[i]``.

    Raises:
        EmbeddingRefusedError: a single text is refused as too large.
        Exception: other errors of the embeddings client, unchanged.
    """
    rows: list[np.ndarray | None] = [None] * len(texts)
    done = 0
    lock = threading.Lock()

    def run(idx: list[int]) -> None:
        nonlocal done
        try:
            vectors = embeddings.embed_documents([texts[i] for i in idx])
        except Exception as exc:  # noqa: BLE001 - only "too large" is handled here
            if not is_request_too_large(exc):
                raise
            if len(idx) == 1:
                raise EmbeddingRefusedError(
                    f"the embeddings API refused one chunk as too large ({estimate_tokens(texts[idx[0]])} "
                    "estimated tokens): lower knowledge.chunk_size"
                ) from exc
            half = len(idx) // 2
            log.warning("embedding batch of %d texts refused as too large: splitting it in halves", len(idx))
            run(idx[:half])
            run(idx[half:])
            return
        for i, v in zip(idx, normalise(np.asarray(vectors)), strict=True):
            rows[i] = v
        with lock:
            done += len(idx)
            if progress:
                progress(done, len(texts))

    # similar lengths together: a local model pads every text of a batch to its longest
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    groups = [[order[j] for j in batch] for batch in batches([texts[i] for i in order], max_items, max_tokens)]
    if concurrency <= 1 or len(groups) <= 1:
        for g in groups:
            run(g)
    else:
        with ThreadPoolExecutor(max_workers=min(concurrency, len(groups)), thread_name_prefix="embed") as pool:
            futures = [pool.submit(run, g) for g in groups]
            try:
                for future in futures:
                    future.result()
            except BaseException:
                for future in futures:  # requests not yet sent are not sent
                    future.cancel()
                raise
    if not rows:
        return np.zeros((0, 0), dtype=np.float32)
    return np.vstack(cast(list[np.ndarray], rows)).astype(np.float32)  # every row was filled


def normalise(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero), as float32."""
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.ndim == 1:
        vectors = vectors[None, :]
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return vectors / norms


class TextEmbedder:
    """Unit vectors of texts from a LangChain ``Embeddings`` (or ``None``: every call
    returns ``None``), cached by text (at most ``cache_size`` texts, least recently used
    dropped). Thread-safe; ``embed_documents`` errors propagate."""

    def __init__(self, embeddings: Any | None, cache_size: int = 8192):
        self.embeddings = embeddings
        self.cache_size = cache_size
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def available(self) -> bool:
        return self.embeddings is not None

    def __call__(self, texts: Sequence[str]) -> np.ndarray | None:
        """``len(texts) x dim`` float32 unit vectors, or ``None`` without embeddings."""
        if self.embeddings is None:
            return None
        with self._lock:
            todo = [t for t in dict.fromkeys(texts) if t not in self._cache]
        if todo:
            vecs = np.asarray(self.embeddings.embed_documents(list(todo)), dtype=np.float32)
            norms = np.linalg.norm(vecs, axis=1, keepdims=True)
            norms[norms == 0] = 1.0
            vecs = vecs / norms
            with self._lock:
                for t, v in zip(todo, vecs, strict=True):
                    self._cache[t] = v
                while len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
        with self._lock:
            out = []
            for t in texts:
                v = self._cache.get(t)
                if v is None:  # evicted meanwhile by another thread: embed it alone
                    v = np.asarray(self.embeddings.embed_documents([t])[0], dtype=np.float32)
                    v = v / (np.linalg.norm(v) or 1.0)
                else:
                    self._cache.move_to_end(t)
                out.append(v)
        return np.vstack(out) if out else np.zeros((0, 1), dtype=np.float32)
