"""Questions a changelog answers by its headings: which version is the newest ("whats the latest
version?") and what a named version is ("when was 4.2.1 released?"). A changelog is a page with
two or more sections headed by a version ("## 4.3.0 (2026-10-02)", "## v4.2.1", "## Version 4.2");
its headings hold what these questions ask (the version, its date), which no sentence under them
says, so the search, the grader and the composer read them (:func:`newest_first`,
:func:`names_newest`, :func:`release_lead`)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from graphs import signals
from graphs.state import Doc

# A question asking which version is the newest: "whats the latest version", "what is the most recent
# release?", "which version is current?", "newest build"
_NEWEST = re.compile(
    r"\b(?:latest|newest|most\s+recent|current|last)\s+(?:stable\s+)?(?:version|release|build)\b|"
    r"\b(?:what|which)\s+(?:version|release)\s+is\s+(?:the\s+)?(?:latest|newest|current|most\s+recent)\b",
    re.I,
)
# A heading naming a version: "4.3.0 (2026-10-02)", "v4.2.1", "Version 4.2 - June", "[4.1.0] - 2026-02-20"
_VERSION_HEADING = re.compile(r"^\W*(?:v|version\s+|release\s+)?(\d+(?:\.\d+)+)(?![\w.])", re.I)


def asks_newest_version(question: str) -> bool:
    """``question`` asks which version is the newest ("whats the latest version?", "which version is
    current?"), naming none (:func:`graphs.signals.asked_versions`), not asking about the present
    moment (:func:`graphs.signals.asks_for_now`: "what's the latest release out?") nor how to do
    something ("how do I update to the latest version?")."""
    return (
        bool(_NEWEST.search(question))
        and not signals.asked_versions(question)
        and not signals.asks_for_now(question)
        and not signals.asks_how_to(question)  # asks for the steps, which the changelog does not give
    )


def heading_version(path: str) -> tuple[int, ...] | None:
    """The version the last heading of the heading path ``path`` names, as numbers to compare
    (``"Changelog > 4.2.1 (2026-07-14)"`` -> ``(4, 2, 1)``); None when it names none."""
    m = _VERSION_HEADING.match(path.split(" > ")[-1])
    return tuple(int(p) for p in m.group(1).split(".")) if m else None


def newest_section(chunks: Sequence[tuple[str, str]]) -> tuple[str, str] | None:
    """The ``(heading path, text)`` of the newest version's section of a page (``chunks``: its
    ``(heading path, text)`` in order; a section's chunks joined), when the page is a changelog:
    two or more of its sections are headed by distinct versions. None for another page."""
    versions: dict[str, tuple[int, ...]] = {}
    for path, _ in chunks:
        v = heading_version(path)
        if v is not None:
            versions.setdefault(path, v)
    if len(set(versions.values())) < 2:
        return None
    path = max(versions, key=lambda p: versions[p])
    return path, "\n\n".join(text for p, text in chunks if p == path)


# a Markdown heading line of a document's text (a short page is read whole, its sections' headings in it)
_HEADING_LINE = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)


def doc_versions(doc: Doc) -> list[tuple[tuple[int, ...], str]]:
    """The versions ``doc``'s headings name, each with its heading (``((4, 2, 1), "4.2.1
    (2026-07-14)")``): the last heading of its heading path, then the headings in its text (a page
    read whole holds its sections' headings), in order."""
    heads = [str(doc.get("title") or "").split(" > ")[-1].strip()]
    heads += [m.group(1).strip() for m in _HEADING_LINE.finditer(str(doc.get("text") or ""))]
    out = []
    for head in heads:
        v = heading_version(head)
        if v is not None and (v, head) not in out:
            out.append((v, head))
    return out


def newest_first(
    question: str, docs: Sequence[Doc], chunks_of: Callable[[Doc], Sequence[tuple[str, str]]]
) -> list[Doc]:
    """For a question asking for the newest version (:func:`asks_newest_version`), ``docs`` (search
    order) with the newest section of the first changelog among their pages first (``chunks_of(doc)``:
    the ``(heading path, text)`` of the document's page, [] when it cannot be read, as
    :meth:`graphs.extractive.Extractive.page_chunks` gives; :func:`newest_section`; a document that
    holds it already, the page read whole, moves first): the search finds the changelog by its
    words, often at an older entry, or a sentence saying "update to the latest version"; the newest
    entry is the answer. Any other question, or no changelog: ``docs`` unchanged."""
    if not docs or not asks_newest_version(question):
        return list(docs)
    for doc in docs:
        found = newest_section(chunks_of(doc))
        if found is None:
            continue
        path, text = found
        top = heading_version(path)
        holding = [d for d in docs if d.get("location") == doc.get("location") and top in dict(doc_versions(d))]
        newest = holding[0] if holding else Doc(**{**doc, "title": path, "text": text[:4000]})
        return [newest, *(d for d in docs if d is not newest)]
    return list(docs)


def _newest_heading(docs: Sequence[Doc]) -> tuple[int, str] | None:
    """Where the newest version among ``docs``' headings (:func:`doc_versions`) is: ``(position,
    heading)``, the first document holding it; None when no heading names a version."""
    best: tuple[tuple[int, ...], int, str] | None = None
    for i, d in enumerate(docs):
        for v, head in doc_versions(d):
            if best is None or v > best[0]:
                best = (v, i, head)
    return (best[1], best[2]) if best is not None else None


def names_newest(question: str, docs: Sequence[Doc]) -> list[bool]:
    """For a question asking for the newest version (:func:`asks_newest_version`), which of ``docs``
    holds the heading of the newest version among their headings (the section :func:`newest_first`
    put first): it answers the question whatever its sentences score. All False for another
    question."""
    found = _newest_heading(docs) if asks_newest_version(question) else None
    return [found is not None and i == found[0] for i in range(len(docs))]


def release_lead(question: str, docs: Sequence[Doc]) -> str:
    """The sentence opening an answer from a changelog, cited by its position in ``docs``: for a
    question asking for the newest version, ``The newest version Changelog lists is **4.3.0
    (2026-10-02)** [1].``; for one naming a version (:func:`graphs.signals.asked_versions`) a
    heading of ``docs`` names, ``Changelog lists **4.2.1 (2026-07-14)** [2].`` (the heading holds
    the date, which no sentence under it says); "" otherwise."""

    def page(d: Doc) -> str:
        path = str(d.get("title") or "")
        return path.split(" > ")[0].strip() if " > " in path else str(d.get("location") or "")

    if asks_newest_version(question):
        found = _newest_heading(docs)
        if found is not None:
            return f"The newest version {page(docs[found[0]])} lists is **{found[1]}** [{found[0] + 1}]."
        return ""
    asked = signals.asked_versions(question)
    for i, d in enumerate(docs):
        for v, head in doc_versions(d):
            if asked and ".".join(map(str, v)) in asked:
                return f"{page(d)} lists **{head}** [{i + 1}]."
    return ""
