"""Questions a changelog answers by its headings: which version is the newest ("whats the latest
version?") and what a named version is or brought ("when was 4.2.1 released?", "what changed in
3.10?", "whats new in v2"). A changelog is a page with two or more sections headed by a version
("## 4.3.0 (2026-10-02)", "## v4.2.1", "## Version 4.2"); its headings hold what these questions ask
(the version, its date), which no sentence under them says, so the search, the grader and the
composer read them (:func:`release_first`, :func:`names_release`, :func:`releases_missing`,
:func:`release_lead`, :func:`only_release`). A version named by its first numbers is the release
that brought them ("3.10" is 3.10.0 where the changelog has 3.10.0 and 3.10.1, "v2" the oldest 2.x)."""

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
# A question about what a release brought or when it came out: "what changed in 3.10?", "when did 3.9 come
# out?", "whats new in v2", "release notes for 4.2", "what was fixed in 3.10.1", "what's in 2.4?"
_ABOUT_RELEASE = re.compile(
    r"\b(?:chang(?:ed?|es|elog)|new|different|fix(?:ed|es)|added|removed|released?|shipped|(?:came|come)\s+out|"
    r"notes|brought|introduced|what(?:'s|s|\s+is|\s+was)\s+in)\b",
    re.I,
)
# A version as people name it in such a question: numbers with dots ("3.10", "4.2.1"), or a number after
# "v", "version" or "release" ("v2", "version 4"); not an amount ("1.5 GB", "2.5 seconds")
_NAMED_VERSION = re.compile(
    r"(?<![\w.])(?:(?:v|version\s+|release\s+)(\d+(?:\.\d+)*)|(\d+(?:\.\d+)+))(?![\w]|\.\d)"
    r"(?!\s*(?:%|[kmgt]i?b|ms|s|secs?|seconds?|minutes?|mins?|hours?|days?|x|times|percent)\b)",
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


def asked_releases(question: str) -> list[tuple[int, ...]]:
    """The versions ``question`` asks what they brought or when they came out (:data:`_ABOUT_RELEASE`),
    as numbers, in order, each once: "what changed in 3.10?" -> ``[(3, 10)]``, "whats new in v2" ->
    ``[(2,)]``, "when was 4.2.1 released" -> ``[(4, 2, 1)]``; [] for a question about no release ("is
    version 4.2 supported?", "is 1.5 GB enough?") and for one asking how to do something ("how do I add a
    new column in 3.10?": the steps, which release notes do not give)."""
    if not _ABOUT_RELEASE.search(question) or signals.asks_how_to(question):
        return []
    found = [tuple(int(p) for p in (m[1] or m[2]).split(".")) for m in _NAMED_VERSION.finditer(question)]
    return list(dict.fromkeys(found))


def _brought(asked: tuple[int, ...], versions: Sequence[tuple[int, ...]]) -> tuple[int, ...] | None:
    """The version of ``versions`` the asked version names: the oldest one it is the first numbers of
    ("3.10" -> 3.10.0 of 3.10.0 and 3.10.1: the release that brought 3.10); None when none."""
    named = [v for v in versions if v[: len(asked)] == asked]
    return min(named) if named else None


def heading_version(path: str) -> tuple[int, ...] | None:
    """The version the last heading of the heading path ``path`` names, as numbers to compare
    (``"Changelog > 4.2.1 (2026-07-14)"`` -> ``(4, 2, 1)``); None when it names none."""
    m = _VERSION_HEADING.match(path.split(" > ")[-1])
    return tuple(int(p) for p in m.group(1).split(".")) if m else None


def _version_path(path: str) -> str:
    """The part of the heading path ``path`` up to its last heading naming a version (``"Changelog >
    2.0.0 > Removed"`` -> ``"Changelog > 2.0.0"``: a release's "### Removed" is part of its section);
    "" when no heading names one."""
    parts = path.split(" > ")
    for end in range(len(parts), 0, -1):
        if heading_version(" > ".join(parts[:end])) is not None:
            return " > ".join(parts[:end])
    return ""


def _section_text(path: str, chunks: Sequence[tuple[str, str]]) -> str:
    """The text of the section headed by the version heading path ``path`` (as :func:`_version_path`
    gives) among ``chunks``: its heading, then its chunks in order, each under its sub-headings as
    Markdown headings one level deeper ("## 2.0.0", "### Removed", "- The legacy REST API."): an item
    of a release's "### Removed" quoted without it reads as new."""
    depth = len(path.split(" > "))
    out = [f"## {path.split(' > ')[-1]}"]
    shown: list[str] = []
    for p, text in chunks:
        if p != path and not p.startswith(path + " > "):
            continue
        subs = p.split(" > ")[depth:]
        for k, sub in enumerate(subs):
            if shown[: k + 1] != subs[: k + 1]:
                out.append(f"{'#' * (3 + k)} {sub}")
        shown = subs
        out.append(text)
    return "\n\n".join(out)


def _release_paths(chunks: Sequence[tuple[str, str]]) -> dict[str, tuple[int, ...]]:
    """The version heading paths of a page's ``chunks`` (:func:`_version_path`), in order, with their
    versions."""
    paths: dict[str, tuple[int, ...]] = {}
    for path, _ in chunks:
        top = _version_path(path)
        v = heading_version(top) if top else None
        if v is not None:
            paths.setdefault(top, v)
    return paths


def newest_section(chunks: Sequence[tuple[str, str]]) -> tuple[str, str] | None:
    """The ``(heading path, text)`` of the newest version's section of a page (``chunks``: its
    ``(heading path, text)`` in order; a section's chunks joined with its sub-headings,
    :func:`_section_text`), when the page is a changelog: two or more of its sections are headed by
    distinct versions. None for another page."""
    versions = _release_paths(chunks)
    if len(set(versions.values())) < 2:
        return None
    path = max(versions, key=lambda p: versions[p])
    return path, _section_text(path, chunks)


# a Markdown heading line of a document's text (a short page is read whole, its sections' headings in it)
_HEADING_LINE = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$", re.M)


def doc_versions(doc: Doc) -> list[tuple[tuple[int, ...], str]]:
    """The versions ``doc``'s headings name, each with its heading (``((4, 2, 1), "4.2.1
    (2026-07-14)")``): the last heading of its heading path, then the headings in its text (a page
    read whole holds its sections' headings), in order."""
    heads = [str(doc.get("title") or "").split(" > ")[-1].strip()]
    heads += [m.group(2).strip() for m in _HEADING_LINE.finditer(str(doc.get("text") or ""))]
    out = []
    for head in heads:
        v = heading_version(head)
        if v is not None and (v, head) not in out:
            out.append((v, head))
    return out


def _wanted_section(question: str, chunks: Sequence[tuple[str, str]]) -> tuple[str, str] | None:
    """The ``(heading path, text)`` of the section of a changelog page (``chunks``, as for
    :func:`newest_section`) that ``question`` asks about: the newest version's for a question asking
    for it (:func:`asks_newest_version`), the version a question about a release names
    (:func:`asked_releases`, :func:`_brought`); None for another page or question, or no such section."""
    if asks_newest_version(question):
        return newest_section(chunks)
    asked = asked_releases(question)
    paths = _release_paths(chunks)
    if not asked or len(set(paths.values())) < 2:
        return None
    for a in asked:
        v = _brought(a, list(paths.values()))
        if v is not None:
            path = next(p for p, pv in paths.items() if pv == v)
            return path, _section_text(path, chunks)
    return None


def release_first(
    question: str, docs: Sequence[Doc], chunks_of: Callable[[Doc], Sequence[tuple[str, str]]]
) -> list[Doc]:
    """For a question asking for the newest version (:func:`asks_newest_version`) or about a release it
    names (:func:`asked_releases`: "what changed in 3.10?"), ``docs`` (search order) with that version's
    section of the first changelog among their pages first (``chunks_of(doc)``: the ``(heading path,
    text)`` of the document's page, [] when it cannot be read, as
    :meth:`graphs.extractive.Extractive.page_chunks` gives; :func:`_wanted_section`; a document that
    holds it already, the page read whole, moves first): the search finds the changelog by its words,
    often at another entry, or a sentence saying "update to the latest version". Any other question,
    or no changelog or no such section: ``docs`` unchanged."""
    if not docs or not (asks_newest_version(question) or asked_releases(question)):
        return list(docs)
    for doc in docs:
        found = _wanted_section(question, chunks_of(doc))
        if found is None:
            continue
        path, text = found
        top = heading_version(path)
        holding = [d for d in docs if d.get("location") == doc.get("location") and top in dict(doc_versions(d))]
        wanted = holding[0] if holding else Doc(**{**doc, "title": path, "text": text[:4000]})
        return [wanted, *(d for d in docs if d is not wanted)]
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


def _asked_heading(question: str, docs: Sequence[Doc]) -> tuple[int, str] | None:
    """Where the version heading ``question`` asks about is among ``docs``' headings
    (:func:`doc_versions`): ``(position, heading)`` of the first document holding it; the newest
    version's for a question asking for it, the version a question about a release names
    (:func:`asked_releases`, :func:`_brought`: "3.10" is 3.10.0); None when none is there."""
    if asks_newest_version(question):
        return _newest_heading(docs)
    asked = asked_releases(question)
    if not asked:
        return None
    held = [(v, i, head) for i, d in enumerate(docs) for v, head in doc_versions(d)]
    for a in asked:
        v = _brought(a, [h[0] for h in held])
        if v is not None:
            _, i, head = next(h for h in held if h[0] == v)
            return i, head
    return None


def names_release(question: str, docs: Sequence[Doc]) -> list[bool]:
    """Which of ``docs`` holds the heading of the version ``question`` asks about
    (:func:`_asked_heading`: the newest for "whats the latest version", 3.10.0 for "what changed in
    3.10?"; the section :func:`release_first` put first): it answers the question whatever its
    sentences score. All False for another question, or when no heading names that version."""
    found = _asked_heading(question, docs)
    return [found is not None and i == found[0] for i in range(len(docs))]


def releases_missing(question: str, docs: Sequence[Doc]) -> list[str]:
    """The versions a question about a release names (:func:`asked_releases`: "what changed in 9.9?")
    that a changelog among ``docs`` (a document with a version heading, :func:`doc_versions`) has no
    heading for and no document's text names (as "9.9", "v9.9" or the first numbers of "9.9.1"):
    another release's notes answer nothing about it. [] when the question names none, or no changelog
    is among ``docs`` (nothing tells the version is missing)."""
    asked = asked_releases(question)
    if not asked or not any(doc_versions(d) for d in docs):
        return []
    heads = [v for d in docs for v, _ in doc_versions(d)]
    texts = [f"{d.get('title', '')}\n{d.get('text', '')}" for d in docs]
    missing = []
    for a in asked:
        name = ".".join(map(str, a))
        said = re.compile(rf"(?<![\w.])v?{re.escape(name)}(?!\w)", re.I)
        if _brought(a, heads) is None and not any(said.search(t) for t in texts):
            missing.append(name)
    return missing


def release_lead(question: str, docs: Sequence[Doc]) -> str:
    """The sentence opening an answer from a changelog, cited by its position in ``docs``: for a
    question asking for the newest version, ``The newest version Changelog lists is **4.3.0
    (2026-10-02)** [1].``; for one about a release it names (:func:`asked_releases`, "what changed in
    3.10?": the version that brought it, :func:`_asked_heading`) or naming a version
    (:func:`graphs.signals.asked_versions`) a heading of ``docs`` names, ``Changelog lists **4.2.1
    (2026-07-14)** [2].`` (the heading holds the date, which no sentence under it says); ""
    otherwise."""

    def page(d: Doc) -> str:
        path = str(d.get("title") or "")
        return path.split(" > ")[0].strip() if " > " in path else str(d.get("location") or "")

    found = _asked_heading(question, docs)
    if asks_newest_version(question):
        return f"The newest version {page(docs[found[0]])} lists is **{found[1]}** [{found[0] + 1}]." if found else ""
    if found is not None:
        return f"{page(docs[found[0]])} lists **{found[1]}** [{found[0] + 1}]."
    asked = signals.asked_versions(question)
    for i, d in enumerate(docs):
        for v, head in doc_versions(d):
            if asked and ".".join(map(str, v)) in asked:
                return f"{page(d)} lists **{head}** [{i + 1}]."
    return ""


def only_release(question: str, docs: Sequence[Doc]) -> list[Doc]:
    """``docs`` for composing the answer to a question a changelog's heading answers
    (:func:`_asked_heading`: "whats the latest version", "what changed in 3.10?"): the document
    holding that version's heading with its text cut to that section (from its heading to the next
    heading as high; a page read whole holds every release), every other document's text emptied
    (positions kept, so citations stay those of ``docs``): the answer is that release's notes, never
    another release's. ``docs`` unchanged for another question or when no heading is found."""
    found = _asked_heading(question, docs)
    if found is None:
        return list(docs)
    at, head = found
    text = str(docs[at].get("text") or "")
    lines = list(_HEADING_LINE.finditer(text))
    start = next((m for m in lines if m.group(2).strip() == head), None)
    if start is not None:
        level = len(start.group(1))
        end = next((m.start() for m in lines if m.start() > start.start() and len(m.group(1)) <= level), len(text))
        text = text[start.start() : end].strip()
    return [Doc(**{**d, "text": text if i == at else ""}) for i, d in enumerate(docs)]
