"""Documents in prompts and citations in answers: documents are numbered ``[1]``, ``[2]``
in the prompt (:func:`format_docs`), and the answer's citations are renumbered to the
sources listed under it (:func:`cite_sources`)."""

from __future__ import annotations

import re

from graphs.knowledge.splitting import fence_indented_code
from graphs.state import Doc


def format_docs(docs: list[Doc], limit: int, with_facts: bool = False, only: set[int] | None = None) -> str:
    """Number ``docs`` for a prompt: ``[n] title (location)`` then at most ``limit``
    characters of text, preceded by the grader's key facts when ``with_facts``; ``only``:
    the numbers to include (the others are left out, numbers kept)."""
    parts = []
    for i, d in enumerate(docs, start=1):
        if only is not None and i not in only:
            continue
        head = f"[{i}] {d.get('title') or ''} ({d.get('location', '')})".replace(" ()", "")
        body = d.get("text", "")[:limit]
        if with_facts and d.get("facts"):
            body = f"Key facts: {d['facts']}\n{body}"
        parts.append(f"{head}\n{body}")
    return "\n\n".join(parts)


_CODE = re.compile(r"```.*?(?:```|$)|`[^`\n]*`", re.S)
_CITATION = re.compile(r"\[(\d+(?:\s*,\s*\d+)*)\]")
#: a list of citations, ``[1], [2]``: renumbered as one, so two chunks of one file cited side
#: by side read as that file once
_CITATION_LIST = re.compile(r"\[\d+(?:\s*,\s*\d+)*\](?:,[ \t]*\[\d+(?:\s*,\s*\d+)*\])*")


def cited_numbers(generation: str, count: int) -> set[int]:
    """The document numbers (1..``count``) a draft cites as ``[n]`` or ``[n, m]`` outside code."""
    prose = _CODE.sub(" ", generation)
    return {n for m in _CITATION.finditer(prose) for n in map(int, m.group(1).split(",")) if 1 <= n <= count}


def _source(doc: Doc) -> dict[str, str]:
    """A cited source: its title and where it is, the document's URL when it has one (a web
    page, the file on its Git host) so every platform links it, else its path."""
    where = doc.get("url") or doc["location"]
    return {"title": doc.get("title") or doc["location"], "location": where}


def cite_sources(generation: str, docs: list[Doc]) -> tuple[str, list[dict[str, str]]]:
    """Number the sources by file, in citation order, and renumber the answer's
    citations (``[n]`` or ``[n, m]``, ``n`` = position in ``docs``) to match, so ``[k]``
    in the text is the k-th listed source even when two cited chunks come from one file.
    Code (fenced or inline) is left untouched.

    Indented code blocks are written as fenced ones first (chat platforms render only
    fences as code; :func:`graphs.knowledge.splitting.fence_indented_code`).

    Returns ``(text, sources)``, each source ``{"title", "location"}`` (the URL when the
    document has one, else its path); with no valid citation, every document is listed and
    the text is otherwise unchanged. Citations of documents that do not exist are dropped.
    """
    generation = fence_indented_code(generation)
    order: list[str] = []
    sources: dict[str, dict[str, str]] = {}

    def number(match: re.Match) -> str:
        numbers: list[int] = []
        for part in re.findall(r"\d+", match.group(0)):
            i = int(part) - 1
            if not 0 <= i < len(docs):
                continue
            loc = docs[i]["location"]
            if loc not in sources:
                order.append(loc)
                sources[loc] = _source(docs[i])
            if order.index(loc) + 1 not in numbers:
                numbers.append(order.index(loc) + 1)
        separator = ", " if "]," in match.group(0) else ""  # a list stays a list
        return separator.join(f"[{n}]" for n in numbers)

    pieces, last = [], 0
    for code in _CODE.finditer(generation):  # renumber prose only
        pieces += [_CITATION_LIST.sub(number, generation[last : code.start()]), code.group(0)]
        last = code.end()
    pieces.append(_CITATION_LIST.sub(number, generation[last:]))
    if not order:
        for d in docs:
            sources.setdefault(d["location"], _source(d))
        return generation, list(sources.values())
    text = re.sub(r"(\[\d+\])(\1)+", r"\1", "".join(pieces))  # "[1][1]" after merging -> "[1]"
    return text, [sources[loc] for loc in order]
