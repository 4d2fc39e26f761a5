"""Web search through tavily-python's AsyncTavilyClient (POST {api_base_url}/search).

Web search is available only when TAVILY_API_KEY is set and ``[web] enabled`` is true.
Failures (HTTP errors, timeouts, empty results) are logged and return no documents:
the graph treats that as "no relevant documents". Every query sent is
at most :data:`MAX_QUERY_CHARACTERS` long (:func:`clip_query`).
"""

from __future__ import annotations

import asyncio
import logging
import re

from graphs.state import Doc

log = logging.getLogger(__name__)

MAX_QUERY_CHARACTERS = 400
"""Tavily refuses a query longer than 400 characters (HTTP 400, "Query is too long")."""

_SENTENCE_END = re.compile(r"(?<=[.?!])\s+|\n\s*\n|\n(?=\s*\S)")


def clip_query(text: str, limit: int = MAX_QUERY_CHARACTERS) -> str:
    """A web query of at most ``limit`` characters built from ``text`` (a search query,
    or a question that may be a pasted log).

    Whitespace runs become one space. Text within the limit is kept whole; longer text
    gives its first sentence (or line) when that holds at least three words and fits,
    else its beginning cut at the last word boundary before the limit.
    """
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    first = " ".join(_SENTENCE_END.split(text.strip(), maxsplit=1)[0].split())
    if len(first.split()) >= 3 and len(first) <= limit:
        return first
    cut = flat[: limit + 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else flat[:limit]).rstrip()


class WebSearch:
    """Tavily search.

    Args:
        api_key: TAVILY_API_KEY (from the environment only).
        api_base_url: Tavily API base (tests point it at a local server).
        max_results: results per search (Tavily allows 1..20).
        search_depth: ``basic`` or ``advanced`` (Tavily API docs).
        timeout: seconds per search (a float, passed to the client as is; Tavily's
            client caps it at 120).
        max_characters: each result's content is cut to this many characters.
    """

    def __init__(
        self,
        api_key: str,
        api_base_url: str = "https://api.tavily.com",
        max_results: int = 5,
        search_depth: str = "basic",
        timeout: float = 20.0,
        max_characters: int = 1500,
    ):
        from tavily import AsyncTavilyClient

        self._client = AsyncTavilyClient(api_key=api_key, api_base_url=api_base_url)
        self.max_results = max_results
        self.search_depth = search_depth
        self.timeout = timeout
        self.max_characters = max_characters

    async def search(self, query: str) -> list[Doc]:
        """Search the web for ``query`` (cut by :func:`clip_query`); returns up to
        ``max_results`` docs ([] on any failure)."""
        query = clip_query(query)
        if not query:
            return []
        try:
            result = await asyncio.wait_for(
                self._client.search(
                    query, max_results=self.max_results, search_depth=self.search_depth, timeout=self.timeout
                ),
                self.timeout + 5,
            )
        except Exception as exc:  # noqa: BLE001 - web failure counts as no documents
            log.warning("web search failed: %s: %s", type(exc).__name__, str(exc)[:200])
            return []
        docs: list[Doc] = []
        for r in (result or {}).get("results", []):
            url = r.get("url") or ""
            content = (r.get("content") or "").strip()
            if url and content:
                docs.append(
                    Doc(
                        id=url,
                        text=content[: self.max_characters],
                        location=url,
                        title=r.get("title") or url,
                        score=float(r.get("score") or 0.0),
                    )
                )
        return docs
