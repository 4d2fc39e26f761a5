"""Which retrieved section answers a question of a given kind, before any sentence is chosen
(the extractive composer quotes its documents in their order, the first one leading).

A question asking how to do something ("how do I reindex the knowledge base?") is answered by
the section that does it: its heading or its steps. Two kinds of section mention the question's
words without answering it, and the search ranks them high because they repeat those words:

- a troubleshooting section (its heading: "Troubleshooting", "FAQ", "Known issues", "Limits and
  troubleshooting", ...): symptoms and fixes that name the operation ("if reindexing fails,
  ...") but do not say how to do it, unless the question itself is about a problem;
- a section that holds the question's words only inside a code block or an example command
  (``make ask Q="How do I reindex the knowledge base?"`` on a getting-started page).

:func:`answering_first` moves those after the sections that answer, keeping the search's order
within each group: a move of whole sections, no sentence is rescored.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from graphs import signals
from graphs.knowledge.crosslingual import is_foreign
from graphs.state import Doc

# the last part of a heading path that names a section of problems and their fixes
_TROUBLESHOOTING = re.compile(
    r"\b(?:troubleshoot\w*|faq|frequently asked|known (?:issues|problems|limitations)|common (?:issues|problems|"
    r"errors|mistakes)|problems?|errors?|pitfalls|gotchas|caveats|debugging|fehlerbehebung|dépannage|"
    r"solución de problemas)\b|トラブルシューティング",
    re.I,
)
# a question about a problem: a troubleshooting section is what answers it
_PROBLEM = re.compile(
    r"\b(?:error|errors|fail\w*|broken|crash\w*|stuck|wrong|stale|not work\w*|doesn'?t|does not|won'?t|can'?t|cannot|"
    r"isn'?t|problem|issue|troubleshoot\w*|fix|exception|refused|denied|missing|fehler|erreur|échoue|falla|"
    # undoing a change is recovery, which troubleshooting sections hold ("Rolling back an upgrade")
    r"roll\s*back\w*|rollback\w*|revert\w*|undo\w*|recover\w*|restore\w*|annul\w*|rétabl\w*|"
    r"rückgängig|zurücksetz\w*|zurückroll\w*|deshac\w*|revierto|revertir|restaur\w*)\b|エラー|ロールバック|元に戻",
    re.I,
)
_FENCED = re.compile(r"^\s*(`{3,}|~{3,}).*?^\s*\1[ \t]*$", re.M | re.S)
_INDENTED = re.compile(r"(?:^(?: {4}|\t).*\n?)+", re.M)


def is_troubleshooting(title: str) -> bool:
    """The section's heading path ends with a heading of problems and their fixes
    ("Administration > Troubleshooting", "Limits and troubleshooting", "FAQ")."""
    return bool(_TROUBLESHOOTING.search(title.split(" > ")[-1]))


def asks_about_problem(question: str) -> bool:
    """The question is about something going wrong ("why does reindex fail?", "index is stale"):
    a troubleshooting section answers it."""
    return bool(_PROBLEM.search(question))


def prose_of(text: str) -> str:
    """A section's Markdown without its code blocks (fenced or indented) and inline code spans
    that hold a whole command line with spaces (an example of the question typed out)."""
    text = _FENCED.sub(" ", text)
    text = _INDENTED.sub(" ", text)
    return re.sub(r"`[^`\n]*\s[^`\n]*\?[^`\n]*`", " ", text)  # `make ask Q="How do I ...?"`


def mentions_only(question_terms: set[str], doc: Doc) -> bool:
    """``doc`` holds the question's words mostly in code or an example command: more of them in
    its code than in its prose and heading path together (``make ask Q="How do I reindex the
    knowledge base?"`` on a page whose prose says "knowledge index"). The section quotes the
    question, it does not answer it."""
    if not question_terms:
        return False
    text = str(doc.get("text") or "")
    in_prose = question_terms & signals.terms(f"{doc.get('title', '')} {prose_of(text)}")
    in_code = question_terms & signals.terms(text)
    return len(in_code) > len(in_prose) and len(in_code - in_prose) > 0 and len(in_prose) < len(question_terms)


_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$", re.M)


def split_troubleshooting(doc: Doc) -> tuple[Doc | None, list[Doc]]:
    """``doc`` (one section, or a short page read whole with its sections under their headings,
    :meth:`graphs.extractive.Extractive.page`) apart from its troubleshooting sections:
    ``(the rest or None, [each troubleshooting section as a document of its own])``. A document
    with headings inside (a page read whole, titled by the section the search found) is cut at its
    troubleshooting headings, one without is what its heading path says. A section runs to the
    next heading as deep or deeper."""
    title = str(doc.get("title") or "")
    text = str(doc.get("text") or "")
    heads = [m for m in _HEADING.finditer(text) if not _in_code(text, m.start())]
    if not heads:  # one section: its heading path says what it is
        return (None, [doc]) if is_troubleshooting(title) else (doc, [])
    if not any(is_troubleshooting(m.group(2)) for m in heads):
        return doc, []
    keep: list[str] = []
    apart: list[Doc] = []
    at = 0
    for i, m in enumerate(heads):
        if not is_troubleshooting(m.group(2)) or m.start() < at:
            continue
        depth = len(m.group(1))
        end = next((n.start() for n in heads[i + 1 :] if len(n.group(1)) <= depth), len(text))
        keep.append(text[at : m.start()])
        page = title.split(" > ")[0]
        # an id of its own (the graph keeps one document per id), still ending with the chunk's row
        # number, by which its index vector is found
        row = re.search(r"#\d+$", str(doc.get("id") or ""))
        base = str(doc.get("id") or "")[: row.start()] if row else str(doc.get("id") or "")
        its_id = f"{base} > {m.group(2)}{row.group(0) if row else ''}"
        apart.append(
            Doc(**{**doc, "id": its_id, "text": text[m.start() : end].strip(), "title": f"{page} > {m.group(2)}"})
        )
        at = end
    keep.append(text[at:])
    rest = "".join(keep).strip()
    # the page read whole was titled by the section the search found: a troubleshooting one is apart now
    named = title.split(" > ")[0] if is_troubleshooting(title) else title
    return (Doc(**{**doc, "text": rest, "title": named}) if rest else None), apart


def _in_code(text: str, at: int) -> bool:
    """Position ``at`` of ``text`` is inside a fenced code block (a ``#`` comment there is no heading)."""
    return sum(1 for m in re.finditer(r"^\s*(?:`{3,}|~{3,})", text[:at], re.M)) % 2 == 1


def answering_first(question: str, docs: Sequence[Doc], question_terms: set[str] | None = None) -> list[Doc]:
    """``docs`` (search order) with the sections that answer a how-to question first: a
    troubleshooting section (:func:`is_troubleshooting`, unless the question is about a problem;
    one inside a short page read whole is taken out of it, :func:`split_troubleshooting`) and a
    section holding the question's words only in code (:func:`mentions_only`) go after the
    others, each group in the search's order. Any other question, or no section left to lead:
    ``docs`` unchanged.

    Args:
        question: the message (English or another language).
        docs: the retrieved sections, best first.
        question_terms: the question's terms in the documents' language (a question in another
            language: its translation's), default :func:`graphs.signals.terms` of ``question``.
    """
    if not docs or not signals.asks_how_to(question) or asks_about_problem(question):
        return list(docs)
    terms = signals.terms(question) if question_terms is None else question_terms
    first: list[Doc] = []
    quoting: list[Doc] = []
    troubles: list[Doc] = []
    for d in docs:
        rest, apart = split_troubleshooting(d)
        troubles += apart
        if rest is not None:
            (quoting if mentions_only(terms, rest) else first).append(rest)
    if not first:
        return list(docs)
    return first + quoting + troubles


def leading_sections(question: str, docs: Sequence[Doc]) -> list[Doc]:
    """The graded ``docs`` as the composer may quote them for ``question``: for a how-to question
    (not about a problem) with a section that is not troubleshooting among them, the
    troubleshooting sections' text is left out (empty), so a symptom naming the question's words
    cannot lead or pad the answer, and each document keeps its position (its citation number).
    Else ``docs`` as they are."""
    if not signals.asks_how_to(question) or asks_about_problem(question):
        return list(docs)
    trouble = [is_troubleshooting(str(d.get("title") or "")) for d in docs]
    if all(trouble) or not any(trouble):
        return list(docs)
    return [Doc(**{**d, "text": ""}) if t else d for d, t in zip(docs, trouble, strict=True)]


def page_title(doc: Doc) -> str:
    """The title of the page ``doc`` is a section of: the first part of its heading path (its
    file's name when it has no title)."""
    return str(doc.get("title") or "").split(" > ")[0].strip() or str(doc.get("location") or "")


def _held(subject: set[str], text: str) -> set[str]:
    """The terms of ``subject`` that ``text`` names: a term names a word it begins, or that begins
    it ("configur" of "configures": "Configuration", "Configure"), from four letters on."""
    words = signals.terms(text)
    return {t for t in subject if any(w.startswith(t) or (len(w) >= 4 and t.startswith(w)) for w in words)}


def _own_name(d: Doc) -> str:
    """A document's page's own name: its file path, address and page title."""
    where = re.sub(r"[/_.#-]+", " ", f"{d.get('location', '')} {d.get('url', '')}")
    return f"{where} {page_title(d)}"


def page_named(question: str, docs: Sequence[Doc]) -> list[bool]:
    """For each of ``docs``: whether a page request (:func:`graphs.signals.asks_for_page`) names
    its page, its own name (:func:`_own_name`) holding everything the request asks about
    ("Webhooks", ``webhooks.md`` for "where is the doc on webhooks?"), whatever its text says. All
    False for another question, or one that names nothing but the page words."""
    subject = signals.page_subject(question) if signals.asks_for_page(question) else set()
    if not subject:
        return [False] * len(docs)
    return [_held(subject, _own_name(d)) == subject for d in docs]


def asked_page(question: str, docs: Sequence[Doc]) -> int | None:
    """Which of ``docs`` (best first) is the page a page request (:func:`graphs.signals.asks_for_page`)
    asks for: the one whose file path and page title (counted twice) and section headings hold the
    most of what the page is to be about (:func:`graphs.signals.page_subject`), the search's order
    breaking ties; None for
    another question, no documents, or none whose title or path names any of it (the links to
    "the payments and search runbooks" kept in a page of dashboards: the links are asked for, not
    that page). A page's address or title says what it is about: a section that only mentions the
    words ("Link previews" for "the link to the Slack setup guide") is not the page asked for."""
    if not docs or not signals.asks_for_page(question):
        return None
    subject = signals.page_subject(question)

    def named(d: Doc) -> int:
        # the page's own name (its file path, address and title) counts twice a section heading's words
        own = _held(subject, _own_name(d))
        return 2 * len(own) + len(_held(subject, str(d.get("title") or "")) - own)

    best = max(range(len(docs)), key=lambda i: (named(docs[i]), -i))
    return best if named(docs[best]) else None


def asked_page_first(question: str, docs: Sequence[Doc]) -> list[Doc]:
    """``docs`` with the sections of the page a page request asks for (:func:`asked_page`) first,
    in the search's order; any other question: unchanged."""
    at = asked_page(question, docs)
    if at is None:
        return list(docs)
    where = docs[at].get("location")
    return [d for d in docs if d.get("location") == where] + [d for d in docs if d.get("location") != where]


def page_pointer(question: str, docs: Sequence[Doc]) -> str:
    """The sentence naming the page a page request asks for, cited by its position in ``docs``:
    ``The page on this is **Setting up Teambot for Slack** (`slack-setup.md`) [1].`` (its address
    when it has one, else its path in the knowledge source); "" for another question."""
    at = asked_page(question, docs)
    if at is None:
        return ""
    d = docs[at]
    where = str(d.get("url") or d.get("location") or "")
    web = where.startswith(("http://", "https://"))
    shown = "" if not where else f" ({where})" if web else f" (`{where}`)"
    return f"The page on this is **{page_title(d)}**{shown} [{at + 1}]."


def page_subject_query(question: str) -> str:
    """For a page request (:func:`graphs.signals.asks_for_page`), its words that say what the page
    is about, in their order ("Slack setup" of "give me the link to the Slack setup guide"): the
    search query that finds the page rather than sentences holding "link" or "guide"; "" for
    another question or when nothing is left."""
    if not signals.asks_for_page(question):
        return ""
    subject = signals.page_subject(question)
    return " ".join(w for w in re.findall(r"[\w-]+", question) if signals.terms(w) & subject)


# a heading that is a step of a procedure: "1. Create the Slack app from the manifest", "Step 2: Set the tokens"
_STEP_HEADING = re.compile(r"^\s*(?:step\s+)?(\d+)\s*[.):]\s*\S", re.I)
_NUMBERED_ITEM = re.compile(r"^\s{0,3}\d+[.)]\s+\S", re.M)
# a question asking to set something up (so for a whole procedure, from its first step), in the languages
# the multilingual encoder reads: "set up", "einrichten" ("richte ... ein"), "configurer", "configurar", "設定"
_SET_UP = re.compile(
    r"\b(?:set\s*up|setup|install\w*|configur\w*|get\s+started|einricht\w*|richte\w*\b.*\bein\b|"
    r"installier\w*|konfigurier\w*|mettre\s+en\s+place|param[ée]tr\w*|instal\w*)|設定|セットアップ|インストール|導入",
    re.I,
)


def is_first_step(heading: str) -> bool:
    """``heading`` (one heading, not a path) is step 1 of a procedure: "1. Create the application",
    "Step 1: Install"."""
    m = _STEP_HEADING.match(heading)
    return m is not None and int(m.group(1)) == 1


def is_procedure(doc: Doc) -> bool:
    """``doc`` is steps to follow: its heading is a numbered step ("2. Set the tokens") or its text
    holds a numbered list of two items or more."""
    if any(_STEP_HEADING.match(part) for part in str(doc.get("title") or "").split(" > ")):
        return True
    return len(_NUMBERED_ITEM.findall(prose_of(str(doc.get("text") or "")))) >= 2


def asks_to_set_up(question: str) -> bool:
    """The question asks how to set something up, install or configure it (in English, German,
    French, Spanish or Japanese): a procedure answers it from its first step."""
    return signals.asks_how_to(question) and bool(_SET_UP.search(question))


def first_step(doc: Doc, chunks: Sequence[tuple[str, str]]) -> Doc | None:
    """The first step of the procedure ``doc`` is a later step of, or introduces: the section of the
    same page (``chunks``: its ``(heading path, text)`` in order) whose heading is step 1 under the
    same parent ("Slack > 1. Create the app" for "Slack > 2. Set the tokens > Socket Mode", or for
    the page's opening "Slack"), with its subsections, as one document (it keeps ``doc``'s id: the
    page's vector stands for it); None when ``doc`` is step 1 itself or its page has no step 1."""
    parts = str(doc.get("title") or "").split(" > ")
    numbered = [(i, int(m.group(1))) for i, p in enumerate(parts) if (m := _STEP_HEADING.match(p))]
    if numbered and numbered[0][1] == 1:
        return None
    at = numbered[0][0] if numbered else len(parts)
    parent = parts[:at]
    texts: list[str] = []
    title = ""
    for path, text in chunks:
        its = path.split(" > ")
        step = _STEP_HEADING.match(its[at]) if len(its) > at and its[:at] == parent else None
        if step is not None and int(step.group(1)) == 1:
            title = title or " > ".join(its[: at + 1])
            texts.append(text)
    if not texts:
        return None
    return Doc(**{**doc, "title": title, "text": "\n\n".join(texts)[:4000]})


def steps_first(
    question: str, docs: Sequence[Doc], chunks_of: Callable[[Doc], Sequence[tuple[str, str]]] | None = None
) -> list[Doc]:
    """For a how-to question in another language than the documents, not about a problem or undoing
    a change (:func:`asks_about_problem`), ``docs`` (search order) with the best page's sections
    that are steps (:func:`is_procedure`) first: the multilingual match finds the
    pages about the subject ("Slack") but not which of their sections does what is asked, and
    a section of steps is what a how-to question wants. A question asking to set something up
    (:func:`asks_to_set_up`) whose leading section is a later step also gets the procedure's first
    step ahead of it (:func:`first_step`, from ``chunks_of(doc)``: the ``(heading path, text)`` of
    the document's page, [] when it cannot be read; the search's own copy of that section when it found it). Any other
    question: ``docs`` unchanged."""
    if not docs or not signals.asks_how_to(question) or not is_foreign(question) or asks_about_problem(question):
        return list(docs)
    # only the best page's steps: a numbered list on another page is another task's procedure
    # ("reset my password" is not answered by the sync queue's restart steps)
    page = docs[0].get("location")
    steps = [d for d in docs if d.get("location") == page and is_procedure(d)]
    ordered = steps + [d for d in docs if d not in steps] if steps else list(docs)
    if chunks_of is not None and asks_to_set_up(question):
        first = first_step(ordered[0], chunks_of(ordered[0]))
        if first is not None:  # found by the search too: it moves to the front
            same = [
                d for d in ordered if (d.get("location"), d.get("title")) == (first.get("location"), first["title"])
            ]
            ordered = [same[0] if same else first, *(d for d in ordered if d not in same)]
    return ordered
