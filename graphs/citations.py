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
    document has one, else its path; the title names every section of the file cited,
    :func:`sections_title`); with no valid citation, every document is listed and
    the text is otherwise unchanged. Citations of documents that do not exist are dropped.
    """
    generation = fence_indented_code(generation)
    order: list[str] = []
    sources: dict[str, dict[str, str]] = {}
    titles: dict[str, list[str]] = {}  # the titles of a file's cited chunks, in citation order

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
            title = quoted_section(docs[i], _quote_before(match))
            if title and title not in titles.setdefault(loc, []):
                titles[loc].append(title)
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
    for loc in order:
        if titles.get(loc):
            sources[loc]["title"] = sections_title(titles[loc])
    return text, [sources[loc] for loc in order]


_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$", re.M)
_WORD = re.compile(r"\w+")


def _quote_before(citation: re.Match[str]) -> str:
    """The text a citation closes: from the paragraph's start or the citation before, to it."""
    return re.split(r"\n[ \t]*\n|\[\d+(?:\s*,\s*\d+)*\]", citation.string[: citation.start()])[-1]


def quoted_section(doc: Doc, quote: str) -> str:
    """The heading path (``"Page > Section"``) of the part of ``doc`` that ``quote`` (a passage of
    an answer citing it) comes from: a document holding several sections under Markdown headings
    (a whole short page) is cited by the section quoted, not by the title of the chunk that found
    it; the document's title when the quote is not found in it or comes before any heading.
    Headings are read as levels of the title's path (``## Removing`` under ``# Scanner``)."""
    title = str(doc.get("title") or "")
    text = str(doc.get("text") or "")
    words = _WORD.findall(quote)
    if len(words) < 3 or "#" not in text:
        return title
    at = -1
    for part in (words[:8], words[-8:]):  # the quote's start, else its end (a sentence cut short)
        found = re.search(r"\W+".join(map(re.escape, part)), text)
        if found:
            at = found.start()
            break
    if at < 0:
        return title
    path = [p.strip() for p in title.split(" > ") if p.strip()]
    fences = [f.span() for f in re.finditer(r"^[ \t]*(`{3,}|~{3,}).*?^[ \t]*\1", text, re.S | re.M)]
    for heading in _HEADING.finditer(text, 0, at):
        if any(a <= heading.start() < b for a, b in fences):  # a shell comment in code is no heading
            continue
        path = [*path[: len(heading.group(1)) - 1], heading.group(2).strip()]
    return " > ".join(path) or title


def sections_title(titles: list[str]) -> str:
    """One title naming every section quoted from one page: ``["Scanner > Installing",
    "Scanner > Removing"]`` -> ``"Scanner > Installing; Removing"`` (the heading path the
    titles share, then each one's own part, in the order given); a title that is only the
    shared path (the page's opening) adds nothing. ``titles``: chunk titles, headings joined
    by ``" > "``; at least one."""
    paths = [[p.strip() for p in t.split(" > ")] for t in titles]
    shared = 0
    while all(len(p) > shared and p[shared] == paths[0][shared] for p in paths):
        shared += 1
    own: list[str] = []
    for p in paths:
        tail = " > ".join(p[shared:])
        if tail and tail not in own:
            own.append(tail)
    head = " > ".join(paths[0][:shared])
    return " > ".join(x for x in (head, "; ".join(own)) if x)
