"""The knowledge base: load sources, split into chunks, index, retrieve, atomic reindex.

Modules by concern:

- :mod:`.sources`: finding files; removing front matter, comments, admonition markers
  and link-only lines from Markdown.
- :mod:`.splitting`: heading-aware chunking that keeps code and tables intact.
- :mod:`.embedding`: embedding in requests a hosted API accepts.
- :mod:`.index`: generations on disk, the ``CURRENT`` pointer, the reindex lock, reading.
- :mod:`.kb`: :class:`KnowledgeBase` (search, reindex, start-up build).
- :mod:`graphs.terms`: the words of any script, shared with the lexical signals.

Retrieval is hybrid: SQLite FTS5's ``bm25()`` keyword ranking and cosine similarity of
dense embeddings, each over several query variants, fused with Reciprocal Rank Fusion
(Cormack, Clarke & Buettcher, SIGIR 2009: score = sum 1/(rrf_k + rank)). A reindex builds
a new generation beside the live one and swaps ``CURRENT`` with ``os.replace``; readers
keep using the old snapshot until the swap, so questions are answered meanwhile. Files
whose content, chunking and embedding model are unchanged reuse their old vectors.
"""

from graphs.knowledge.common import (
    Chunk,
    EmbeddingRefusedError,
    IndexStats,
    KnowledgeBaseError,
    NothingIndexedError,
    ProgressFn,
    ReindexBusyError,
)
from graphs.knowledge.index import IndexSnapshot, keyword_query
from graphs.knowledge.kb import KnowledgeBase, rrf_fuse
from graphs.knowledge.sources import clean_markdown, discover_files
from graphs.knowledge.splitting import split_markdown
from graphs.terms import STOPWORDS as _STOPWORDS  # noqa: F401 - kept for older imports

__all__ = [
    "Chunk",
    "EmbeddingRefusedError",
    "IndexSnapshot",
    "IndexStats",
    "KnowledgeBase",
    "KnowledgeBaseError",
    "NothingIndexedError",
    "ProgressFn",
    "ReindexBusyError",
    "clean_markdown",
    "discover_files",
    "keyword_query",
    "rrf_fuse",
    "split_markdown",
]
