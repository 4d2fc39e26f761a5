"""The extractive offline path: grade documents and compose answers from the documents'
own sentences, with the knowledge base's embeddings and the lexical signals of
:mod:`graphs.signals`, and no chat-model call (``[graph] composer = "extractive"``).

- :func:`split_units` cuts a document into sentences / list items (prose), whole
  fenced code blocks and tables (never cut), and each table row read with its header
  (:func:`table_rows`), so a spreadsheet or a rota is graded and quoted by its rows.
- :class:`Extractive` scores units against the question (cosine similarity of MiniLM
  vectors plus the share of the question's terms they hold), grades documents by their
  best unit, reranks retrieved chunks, widens a chunk to its section or short page (parent retrieval),
  and composes the answer: the best sentences in document order, each cited ``[n]``
  (``n`` = position in the graded documents), followed by the code block they introduce.

Without embeddings (keyword-only knowledge base) every score is lexical only.
Thresholds are calibrated on the development eval set by ``bench/calibrate_offline.py``
(cross-validated on its two halves, see bench/README.md).
"""

from __future__ import annotations

import bisect
import html
import re
import sqlite3
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import numpy as np
from langchain_core.embeddings import Embeddings

from graphs import actions, sections, signals
from graphs.knowledge.common import Chunk, KnowledgeBaseError
from graphs.knowledge.crosslingual import CrossLingualIndex, is_foreign, window_texts
from graphs.knowledge.embedding import TextEmbedder  # noqa: F401 - used here, re-exported
from graphs.knowledge.splitting import fence_indented_code
from graphs.markdown_links import WebLink, plain_links, shown_address, web_links
from graphs.state import Doc

if TYPE_CHECKING:
    from graphs.knowledge import KnowledgeBase

# ---- calibrated constants (bench/calibrate_offline.py on the dev eval set) ---------------
LEXICAL_WEIGHT = 0.5  # weight of the lexical share against the cosine in a unit's score
RELEVANCE_THRESHOLD = 0.5  # a document is relevant when its best unit scores at least this
# ... minus MATCH_WEIGHT x (the question's best passage cosine - MATCH_CENTRE): a question whose
# words match a sentence weakly while a whole passage (with its page and headings) matches it
# well is answered, and the bar rises for one no passage is near (graded on the tuning corpora
# against their own questions and the other corpora's questions, which no page answers)
MATCH_WEIGHT = 0.5
MATCH_CENTRE = 0.36
# ... and at least this when the router took the question for current events (no web search
# configured, so the knowledge base is searched anyway: only a strong match may answer)
#: share of the knowledge base's chunks a content word must appear in to say nothing about which
#: page answers (:meth:`Extractive.distinctive`): product names (HTTPX's "httpx" 0.77 of its chunks,
#: LangGraph's 0.59, Hugo's 0.56) lie above it, subject words of a page or a section below
COMMON_SHARE = 0.5
#: ... and in at least this many chunks: in a folder of two or three pages half the chunks are one
#: page, whose own subject words ("grafana" on the dashboards page) are then no product name
MIN_COMMON_CHUNKS = 4
CURRENT_RELEVANCE_THRESHOLD = 0.62
#: a sentence is graded with the words of its section's heading: "system requirements?" is answered by
#: the list under "Requirements", whose items ("4 GB of memory") never repeat the word
GRADE_HEADING_WORDS = True
# a question in another language than the documents (graphs/knowledge/crosslingual.py): the
# multilingual encoder's cosine is on another scale than MiniLM's, and the question's words match none
CROSS_RELEVANCE_THRESHOLD = 0.2
CROSS_RANK_WEIGHT = 2.0  # RRF weight of the encoder's ranking against the ordinary search's
# RRF weight of the question translated word by word (CrossLingualIndex.translate), searched like an
# English one, times the share of its words that were translated
CROSS_TRANSLATED_WEIGHT = 1.5
CROSS_ORIGINAL_WEIGHT = 0.25  # weight of the question's own words in the search once it has a translation
CROSS_RERANK_PRIOR_WEIGHT = 0.75  # RERANK_PRIOR_WEIGHT for a question in another language
CROSS_RERANK_TITLE_WEIGHT = 0.1  # RERANK_TITLE_WEIGHT for a question in another language (no page evidence)
RERANK_PRIOR_WEIGHT = 0.75  # weight of the hybrid search's rank against cos(question, chunk)
# weight of the question terms found in the file and heading path: none since the page's evidence
# below, which measures what a title only hints at (with both, a page whose path repeats a question
# word outranked the page about the question on the tuning corpora)
RERANK_TITLE_WEIGHT = 0.0
# weight of the page's evidence (the mean cosine of the message with all the page's chunks, plus
# RERANK_PAGE_BEST_SHARE x the best one): the page about a topic outranks a neighbouring page that
# mentions it in one passage
RERANK_PAGE_WEIGHT = 0.3
# share of the page's best chunk cosine in its evidence: the mean alone sinks a long page (a reference
# of many sections) whose one section answers below a short page on a neighbouring topic; 2/3 x 0.3 =
# 0.2 per unit of the best cosine, chosen leave-one-corpus-out on fourteen corpora (bench/loco_rank.py;
# larger shares lose rows)
RERANK_PAGE_BEST_SHARE = 2 / 3
# added to a chunk holding every code the message names ("AB-403"), in proportion for some: a code
# names one thing exactly, while a section on a neighbouring code ("## AB-410") reads closer to the
# question for the embeddings than the row of a table that holds it; 1.0 is above any gap of prior,
# cosine and page evidence between two candidates that both match the rest of the question
RERANK_CODE_WEIGHT = 1.0
# weight of the search's pseudo-relevance feedback ranking (``KnowledgeBase.search(feedback=...)``):
# the question's words plus the words its first three passages share, for a question worded unlike
# its page; chosen leave-one-corpus-out on ten corpora (bench/loco_rank.py: every fold chose 0.25)
FEEDBACK_WEIGHT = 0.25
# answer shape
INLINE_CODE_BONUS = 0.1  # added to the score of a sentence holding inline code (identifiers, settings)
QUANTITY_BONUS = 0.2  # added to a sentence stating an amount when the question asks for one ("how many days")
# added to a unit's grade when the question asks for a bound ("whats the max attachment size") and the unit
# states one of the thing asked about ("attachments can be at most 20 MB"): "max" and "at most" share no
# word, and MiniLM puts a short bound question nearer general knowledge than the page's row
BOUND_GRADE_BONUS = 0.1
SUPPORT_CUTOFF = 0.4  # supporting passages start at sentences scoring at least this share of the lead's score
NEIGHBOURS = 2  # sentences quoted after each supporting sentence
BEFORE = 0  # sentences quoted before each supporting sentence
LEAD_AFTER = 3  # sentences quoted after the lead sentence (its passage opens the answer)
LEAD_BEFORE = 1  # sentences quoted before the lead sentence (the cause before a matched symptom)
# sentences quoted after the block the lead's passage introduces: what an example or an error message is
# followed by ("Hugo throws this error:", the error, "To resolve, install a different edition.")
LEAD_AFTER_BLOCK = 1
# added to a sentence or table row naming every code the question asks about ("AB-403"): the row of a
# table of codes answers, not the sentence on a neighbouring code ("AB-410 means ...") that shares
# every other word; above DOC_PRIOR, so it leads from a document found below the other
CODE_BONUS = 0.5
# added to a unit under the label the question names (a row's first cell, a sibling heading, an FAQ's bold
# question), taken from a unit under one of its sibling labels (:func:`label_match`)
LABEL_BONUS = 0.5
LABEL_QUESTION_SHARE = 0.2  # ... and that share of the question's words at least
LABEL_SHARE = 2  # a label is named when the question holds at least 1 / LABEL_SHARE of the words only it has
DOC_PRIOR = 0.4  # weight of the document's search rank (1 / rank) added to its sentences' scores
# added to a sentence saying what is not so or cannot be done ("FreeBSD is **NOT** supported", "the serialized
# value does not contain expire information") when the question asks whether ("can I run it on FreeBSD?") and the
# sentence or its heading holds one of the question's words: the verdict answers it, not a sentence sharing more words
VERDICT_BONUS = 0.1
# shortest follow-up term that matches the start of a longer word ("sick" in "sickness"; a
# shorter one, "ui", would match any word it begins).
FOCUS_PREFIX = 4
# a support's own score (without its document's rank weight) must reach this share of the lead's own score: the
# rank weight (DOC_PRIOR) alone carried the first page's sentences over SUPPORT_CUTOFF while they said nothing of
# the question (a Linux distribution's packages after "what about on a mac?")
SUPPORT_OWN_CUTOFF = 0.4
ANSWER_CHARACTERS = 700  # default prose budget ([graph] answer_characters)
SHORT_LIST_SHARE = 0.3  # a bulleted list this share of the budget or shorter is quoted whole, as a list
# a short list a quoted sentence introduces ("... the following files and directories:") follows it, as a list
LIST_AFTER_INTRO = True
# a passage from a section whose heading names an identifier ("#### `net.retry`", then "Type: integer, Default:
# 3") starts with that heading when the passage does not name it: reference pages name a setting, field or
# option in the heading alone
HEADING_SUBJECT = True
MAX_CODE_CHARACTERS = 1200
# table rows given a cosine per scoring (those holding the most of the question's terms; the
# rest score on their words): a sheet widened to its section is ~50 rows a document, and
# embedding every row of the graded documents took 10-18 s a question with a 300-row sheet on
# a two-core machine at load 13, 2-5 s with this limit (a table of up to 8 rows: every row)
ROW_COSINE_LIMIT = 8
MAX_SECTION_CHARACTERS = 4000
# a row of a table on a page with prose answers on its own, before the page's sentences, when it holds a word of
# the question that at most this share of the table's rows hold ("billing" of "who owns billing-api?" in a table
# of 35 services), in a table of at least ANSWERING_MIN_ROWS rows, and at most ANSWERING_MAX_ROWS rows hold one
ANSWERING_ROW_SHARE = 0.1
ANSWERING_MIN_ROWS = 4
ANSWERING_MAX_ROWS = 3
# a value the question asks about that at most this share of a table's rows hold selects them ("which services
# does team-gamma own?": the 6 rows of 35 naming gamma), quoted as the table with those rows only
SHARED_ROW_SHARE = 0.5
# a page this long or shorter is retrieved whole, not only the section the search found (measured on the six
# tuning corpora: runbooks of ~1,500 characters answer "what's the fix" from the section after the one found)
PAGE_CHARACTERS = 2000


# ---- splitting ------------------------------------------------------------------------
@dataclass
class Unit:
    """One sentence / list item / table row read with its header (``code`` False) or one
    whole fenced code block or table."""

    doc: int  # 0-based position of its document
    pos: int  # position in the document
    text: str
    code: bool = False
    para: int = 0  # the paragraph, list item or block it belongs to (its sentences share it)
    item: str = ""  # the list marker ("1.", "-") of a list item's first sentence, else ""
    # how deep the list item is nested: 0 for the list's own items, 1 for an item of a sub-list under one
    # of them ("   - choose a password" under "2. Set up your accounts:"), and so on; 0 outside lists
    depth: int = 0
    list: int = -1  # the list (consecutive items) a list item belongs to, -1 outside lists
    heading: bool = False  # a heading: it names what follows, it does not answer
    row: int = -1  # a table row read with its header: the position of its table's unit, else -1
    short: bool = False  # shorter than the minimum, kept as a step of its list (never an answer alone)
    reply: bool = False  # the first sentence under a heading asking a question: an FAQ entry's answer opens with it
    # the heading it sits under, kept even when too short to be a unit ("Uninstall", "Install on Windows"): it
    # says what the sentences below it are for; "" before the text's first heading
    section: str = ""
    # the headings it sits under in its text, outermost first, each with its level (``##``: 2); a heading
    # unit is under itself; read by :func:`label_match` only
    path: tuple[tuple[int, str], ...] = ()
    # a table row's first cell, the name that tells it from the table's other rows; a definition list entry's
    # term ("Runner" of "Runner" / ": A machine that ..."), which tells it from the list's other entries
    label: str = ""


_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
_TABLE_SEPARATOR = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(?:\|\s*:?-{2,}:?\s*)+\|?\s*$")
# elements whose content is not text a reader sees: removed with their content
_HIDDEN_HTML = re.compile(r"<(script|style|noscript|template)\b[^>]*>.*?(?:</\1\s*>|\Z)|<!--.*?(?:-->|\Z)", re.I | re.S)
_HTML = re.compile(
    r"</?(?:a|p|br|hr|div|span|img|sup|sub|details|summary|figure|figcaption|iframe|video|audio|source|"
    r"table|thead|tbody|tfoot|caption|tr|td|th|ul|ol|li|dl|dt|dd|em|strong|b|i|u|s|del|ins|mark|small|"
    r"abbr|cite|q|kbd|var|samp|time|code|pre|center|picture|section|article|blockquote|font|"
    r"script|style|noscript|template|track|embed|object|param|h[1-6])\b[^<>]*>",
    re.I,
)
_ADMONITION = re.compile(r"^\s*(?:!!!|\?\?\?\+?)\s*\w*(?:\s+\"([^\"]*)\")?\s*$")
# A sentence ends at . ! ? before a capital letter (Latin, Greek, Cyrillic) or a quote, or
# right after the full-width ends of Chinese and Japanese (。！？), which take no space.
_SENTENCE_END = re.compile(
    r"(?<!\be\.g\.)(?<!\bi\.e\.)(?<!\bvs\.)"
    r"(?:(?<=[.!?])\s+(?=[A-ZÀ-ÖØ-ÞΑ-ΩА-ЯЁ`\"(*])|(?<=[。！？])\s*)"
)
# a list item's marker: a bullet, or a step's number or letter as pages write them ("1.", "1)", "(1)", "a.", "b)",
# "(c)"); Markdown reads "a." and "(1)" lines as one paragraph, which ran the steps together into one line
_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)]|\(\d+\)|[a-z][.)]|\([a-z]\))\s+")
_DEFINITION = re.compile(r"^\s{0,3}:[ \t]+(?=\S)")  # a definition list's definition line (": A machine ...")
# an FAQ entry written as a question line above its reply: "Q: Can I merge two workspaces?" ("**Q:**", "Question:")
# then "A: No, ..." (on the same line or the next), or a question alone in bold on its line ("**Can I pause my
# plan?**", as an HTML definition list's question term is written: graphs.knowledge.sources.definition_lists).
# The question is read as the heading of its entry (at _FAQ_LEVEL), its reply as the answer under it, as under
# "### Can I merge two workspaces?": the reply opens the answer, the next entry is a sibling's, not more of it
_FAQ_QUESTION = re.compile(
    r"^\s{0,3}(?:(?:\*\*|__)?(?:Q|Question)(?:\*\*|__)?\s*:\s*(?:\*\*|__)?\s*(?P<asked>\S[^?]*\?|\S[^?]*$)\s*(?P<rest>.*)"
    r"|(?P<mark>\*\*|__)(?P<bold>[^*_\s][^*_]*\?)(?P=mark)\s*)$"
)
_FAQ_REPLY = re.compile(r"^\s{0,3}(?:\*\*|__)?(?:A|Answer)(?:\*\*|__)?\s*:\s*(?:\*\*|__)?\s*(?=\S)")
_FAQ_LEVEL = 7  # below every Markdown heading (h1-h6): the page's headings hold its questions as their children
# A reply of one or two words opening an FAQ's answer ("Yes.", "No.", "Not yet."): too short to be a
# sentence, it is the answer, and it is read with the sentence after it ("Yes. It runs on any ARM board.")
_BARE_VERDICT = re.compile(
    r"^(?:yes|no|nope|yep|correct|incorrect|not\s+yet|not\s+currently|not\s+at\s+the\s+moment|never|always|"
    r"sometimes|it\s+depends|absolutely|definitely|certainly|of\s+course|sure)\s*[.!]$",
    re.I,
)


def _with_verdicts(pieces: list[str]) -> list[str]:
    """``pieces`` (a paragraph's sentences) with a bare verdict (:data:`_BARE_VERDICT`) joined to the
    sentence after it."""
    out: list[str] = []
    carry = ""
    for piece in pieces:
        piece = piece.strip()
        if _BARE_VERDICT.match(piece):
            carry = f"{carry} {piece}".strip()
            continue
        out.append(f"{carry} {piece}".strip() if carry and piece else piece)
        carry = "" if piece else carry
    if carry:
        out.append(carry)
    return out


# a character reference as CommonMark takes it: with its ";" (``&copy=2`` in an address is text)
_ENTITY = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")
_CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`).+?(?<!`)\1(?!`)", re.S)


def _outside_code(text: str, change: Callable[[str], str]) -> str:
    """``text`` with ``change`` applied to what is not inside an inline code span."""
    out, at = [], 0
    for m in _CODE_SPAN.finditer(text):
        out += [change(text[at : m.start()]), m.group(0)]
        at = m.end()
    return "".join([*out, change(text[at:])])


def clean_prose(text: str) -> str:
    """Markdown prose as plain readable text: links and images become their words
    (:func:`graphs.markdown_links.plain_links`: nested ones, addresses with parentheses and
    autolinks too), HTML tags go (scripts, styles and comments with their content), as do
    list markers, heading marks and admonition markers; character references read as the
    characters they stand for (``&nbsp;``, ``&lt;``, ``&#8212;``: a reader of the page sees
    a space, ``<``, a dash). Inline code is kept as written."""
    text = _outside_code(text, lambda prose: _HIDDEN_HTML.sub(" ", prose))
    text = plain_links(text)
    text = re.sub(r":::\w*", " ", text)  # mkdocs tab / language markers
    text = _outside_code(text, lambda prose: _ENTITY.sub(lambda m: html.unescape(m.group()), _HTML.sub(" ", prose)))
    text = re.sub(r"^\s*#+\s*", "", text)
    text = _ITEM.sub("", text)
    return re.sub(r"\s+", " ", text).strip(" \t")


_WORD = re.compile(r"\w+")


def _placed_words(words: list[str], page: list[str]) -> list[int]:
    """Where each of a passage's ``words`` is in its ``page``'s words (-1: not found): runs of
    at least four words matched in the order of the page, from where the last run ended (a
    passage joins sentences the page may hold apart, under a heading between them)."""
    joined = f" {' '.join(page)} "
    starts = [0]  # where each page word's leading space is in ``joined``
    for w in page[:-1]:
        starts.append(starts[-1] + len(w) + 1)
    placed = [-1] * len(words)
    i = nxt = 0
    while i < len(words):
        key = f" {' '.join(words[i : i + 4])} "
        at = joined.find(key, starts[nxt] if nxt < len(starts) else len(joined))
        at = joined.find(key) if at < 0 else at
        if at < 0:
            i += 1
            continue
        p = bisect.bisect_left(starts, at)
        while i < len(words) and p < len(page) and words[i] == page[p]:
            placed[i], i, p = p, i + 1, p + 1
        nxt = p
    return placed


def with_addresses(text: str, page: tuple[str, list[WebLink]]) -> str:
    """``text`` (a quoted passage, links shown as their words) with each link's address after
    its words: ``Platform overview (https://grafana.example/d/x)`` (a long address is named,
    not shown: :func:`graphs.markdown_links.shown_address`).

    The passage's words are found in its page, so each link gets its own address where
    several share their words (two links named "wiki"); words the page does not show in the
    passage's order (cleaning changed them) get the address only when one address goes by them.

    Args:
        text: the passage as :func:`clean_prose` made it.
        page: its document's plain text and links, from :func:`graphs.markdown_links.web_links`.
    """
    plain, links = page
    if not links:
        return text
    words = list(_WORD.finditer(text))
    page_words = list(_WORD.finditer(plain))
    placed = _placed_words([m.group().lower() for m in words], [m.group().lower() for m in page_words])
    passage_at = {p: i for i, p in enumerate(placed) if p >= 0}
    page_starts = [m.start() for m in page_words]
    after: dict[int, str] = {}  # where in ``text`` an address goes -> the address
    shown: set[str] = set()  # link words given an address
    for link in links:
        its_words = range(bisect.bisect_left(page_starts, link.start), bisect.bisect_left(page_starts, link.end))
        inside = [passage_at[k] for k in its_words if k in passage_at]
        if inside and link.url not in text and link.url not in after.values():
            end = words[inside[-1]].end()
            # the link's words may end past their last word: "[RFC 42]" gets its address after the "]"
            tail = plain[page_words[placed[inside[-1]]].end() : link.end].rstrip()
            after[end + len(tail) if text.startswith(tail, end) else end] = link.url
            shown.add(link.words)
    addresses: dict[str, set[str]] = {}
    for link in links:
        addresses.setdefault(link.words, set()).add(link.url)
    for name, urls in sorted(addresses.items(), key=lambda kv: -len(kv[0])):  # "Kibana logs" before "Kibana"
        found = re.search(r"(?<![\w(])" + re.escape(name) + r"(?![\w)])", text)
        if name not in shown and len(urls) == 1 and found and next(iter(urls)) not in text:
            after.setdefault(found.end(), next(iter(urls)))
    for end in sorted(after, reverse=True):
        text = f"{text[:end]} ({shown_address(after[end])}){text[end:]}"
    return text


# an FAQ heading written as a question without its mark ("How long are deleted items kept"): a question
# word or an auxiliary first, and words enough to ask something ("How it works" is a title)
_QUESTION_HEADING = re.compile(
    r"^\W*(?:how|what|when|where|who|whom|which|why|can|could|do|does|did|is|are|was|were|will|would|should|may|must)"
    r"\b\S*(?:\s+\S+){3,}",
    re.I,
)


def heading_asks(heading: str) -> bool:
    """The heading text ``heading`` (one line, its ``#`` marks allowed) asks a question: it ends
    with "?", or opens with a question word or an auxiliary and has four words or more ("How long
    are deleted items kept"). The first sentence under such a heading is its reply, however short
    (:func:`split_units`)."""
    text = heading.strip().lstrip("#").strip()
    return text.endswith("?") or bool(_QUESTION_HEADING.match(text))


def split_units(
    text: str, doc: int = 0, min_characters: int = 20, short_items: bool = False, asked: bool = False
) -> list[Unit]:
    """Cut ``text`` (Markdown) into prose units (sentences, list items; hard-wrapped lines
    joined), whole code blocks (fenced ones dedented, fences kept; indented ones fenced) and whole
    tables (rows kept), each table followed by its body rows as prose units
    (:func:`table_rows`, ``row`` set). Prose pieces shorter than ``min_characters`` are
    dropped (with ``short_items``, a list item's first sentence is kept, marked ``short``: a
    step "Install the agent:"), except a bare verdict opening an FAQ's answer ("Yes.", "No.",
    "Not yet."), which is read with the sentence after it, and the reply to a question right above
    it ("No, not yet." under "### Can I use it offline?", or after "Q: Can I ...?" in its own
    paragraph); code blocks are never cut. An FAQ entry's question line ("**Q:** Can I ...?", "Q: ...",
    a question alone in bold: :data:`_FAQ_QUESTION`) is read as a heading over its reply (its "A:" left out).
    ``asked``: the text opens under a heading that asks a
    question (a section's chunk, its heading in its heading path, not in its text)."""
    units: list[Unit] = []
    # indented code is code too, not prose to join (a man page's HTML option list was made Markdown
    # when the document was split, graphs.knowledge.sources.clean_markdown)
    lines = unquoted(fence_indented_code(text).splitlines())
    block: list[str] = []
    para = [0]  # the number of the next paragraph / item / block
    lists = [-1, 0]  # the open list's number (-1: none), the next list's number
    adjacent = [False]  # nothing but blank lines since the last code block or table
    section = [""]  # the last heading's text
    path: list[tuple[int, str]] = []  # the open headings, outermost first, with their levels
    above = [asked]  # the last paragraph was a heading asking a question
    reply = [False]  # the last line was an FAQ entry's question line: its reply's "A:" is no part of it
    # the indentation of the open list's items, outermost first: an item indented past its parent's
    # marker is an item of a sub-list, read as part of the parent's item (its depth), never as a step of its own
    indents: list[int] = []

    def flush() -> None:
        if not block:
            return
        adjacent[0] = False
        m = _ITEM.match(block[0])
        marker = m.group(0).strip() if m else ""
        heading = block[0].lstrip().startswith("#")
        if marker and lists[0] < 0:
            lists[0], lists[1] = lists[1], lists[1] + 1
            indents.clear()
        depth = 0
        indent = len(block[0]) - len(block[0].lstrip())
        if marker:
            while indents and indent < indents[-1] + 2:  # a sibling of that item or of one above it
                indents.pop()
            indents.append(indent)
            depth = len(indents) - 1
        elif lists[0] >= 0 and indent:  # a paragraph going on in the item it is indented under
            depth = max(0, sum(1 for at in indents if at < indent) - 1)
        elif not marker and not block[0][:1].isspace():
            lists[0] = -1  # a paragraph flush-left ends the list (an indented one continues its item)
        # a definition list's entry ("Runner" then ": A machine that ..."): its term names what the entry
        # defines, as a table row's first cell names its row (a label, :func:`unit_labels`)
        term = ""
        if not marker and not heading and len(block) > 1 and _DEFINITION.match(block[1]) and block[0].strip():
            term = clean_prose(block[0]).rstrip(":")
            block[1:] = [_DEFINITION.sub("", line) if _DEFINITION.match(line) else line for line in block[1:]]
            block[0] = block[0].rstrip().rstrip(":") + ":"  # "Runner: A machine that ...", as it reads
        joined = clean_prose(" ".join(block))
        block_first = block[0].lstrip()
        block.clear()
        # the first paragraph under a heading that asks ("### Can I use it offline?") is its answer
        answers = above[0] and not heading
        above[0] = heading and heading_asks(joined)
        if heading:
            section[0] = joined
            level = len(block_first) - len(block_first.lstrip("#"))
            while path and path[-1][0] >= level:
                path.pop()
            path.append((level, joined))
        first = True
        pieces = _with_verdicts(_SENTENCE_END.split(joined))
        for k, piece in enumerate(pieces):
            piece = piece.strip()
            # a CJK character carries about a word: count it twice against the minimum; a list
            # item's first sentence is kept however short (a step: "1. Install the agent:"), and so is
            # the reply to a question right above it, however short ("No, not yet.", "Unlimited."): the
            # heading asking it, or the paragraph's own first sentence ("Q: Can I ...? A: No.")
            replied = bool(_WORD.search(piece)) and (
                (answers and k == 0) or (k == 1 and pieces[0].rstrip().endswith("?") and not heading)
            )
            long_enough = replied or len(piece) + sum(1 for ch in piece if ord(ch) >= 0x2E80) >= min_characters
            if long_enough or (short_items and marker and first and piece):
                units.append(
                    Unit(
                        doc,
                        len(units),
                        piece,
                        para=para[0],
                        item=marker if first else "",
                        depth=depth,
                        list=lists[0],
                        heading=heading,
                        short=not long_enough,
                        section=section[0],
                        path=tuple(path),
                        reply=answers and k == 0,
                        label=term,
                    )
                )
                first = False
        para[0] += 1

    def add_block(text: str) -> None:
        prev = units[-1] if units and adjacent[0] else None
        if prev is not None and prev.code:
            merged = _rejoin(prev.text, text)
            if merged is not None:  # one block the chunking cut in two (reopened, or its header repeated)
                prev.text = merged
                return
        units.append(Unit(doc, len(units), text, code=True, para=para[0], list=lists[0]))
        para[0] += 1
        adjacent[0] = True

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
                if _closes(lines[i], fence):
                    break
                i += 1
            if not _closes(body[-1], fence) or len(body) == 1:
                body.append(fence)  # unterminated block (chunk cut): close it
            if any(b.strip() for b in body[1:-1]):  # an empty block (a chunk cut at its fence) is dropped
                add_block("\n".join(body).strip())
            i += 1
            continue
        if line.lstrip().startswith("|") or (
            "|" in line and i + 1 < len(lines) and _TABLE_SEPARATOR.match(lines[i + 1])
        ):
            # a Markdown table (with or without outer pipes) is kept whole, like code: its rows
            # mean nothing flattened into prose
            flush()
            rows = []
            while i < len(lines) and lines[i].strip() and (lines[i].lstrip().startswith("|") or "|" in lines[i]):
                rows.append(lines[i].strip())
                i += 1
            if len(rows) > 1 and not rows[-1].endswith("|"):
                rows.pop()  # a row cut by the chunk's or the prompt's length limit
            at = len(units)
            add_block("\n".join(rows))
            # each row also reads as a sentence with its header ("team: search, on-call lead:
            # Ana"): a table alone on its page (a spreadsheet, a rota) is graded and quoted by
            # the row that answers, where the whole table, read like code, never could
            for text, label in labelled_rows(rows):
                units.append(
                    Unit(doc, len(units), text, para=para[0], row=at, section=section[0], path=tuple(path), label=label)
                )
                para[0] += 1
            continue
        faq = _FAQ_QUESTION.match(line)
        if faq:  # an FAQ entry's question: read as its heading, which the reply (its next lines) answers
            flush()
            block.append(f"{'#' * _FAQ_LEVEL} {faq['asked'] or faq['bold']}")
            flush()
            above[0] = reply[0] = True  # its reply, however short ("Up to three."), is the answer
            if faq["rest"]:  # "Q: Can I ...? A: No." on one line
                lines[i] = faq["rest"]
            else:
                i += 1
            continue
        if reply[0] and not block:
            line = _FAQ_REPLY.sub("", line)
        reply[0] = reply[0] and not line.strip()
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


_CELL_SPLIT = re.compile(r"(?<!\\)\|")


def _cells(row: str) -> list[str]:
    """The cells of a Markdown table row (outer pipes optional, ``\\|`` inside a cell kept
    as ``|``), each as plain text (:func:`clean_prose`)."""
    row = row.strip()
    row = row[1:] if row.startswith("|") else row
    row = row[:-1] if row.endswith("|") and not row.endswith("\\|") else row
    return [clean_prose(c.replace("\\|", "|")) for c in _CELL_SPLIT.split(row)]


def table_rows(rows: list[str]) -> list[str]:
    """The rows' text of :func:`labelled_rows`."""
    return [text for text, _ in labelled_rows(rows)]


def labelled_rows(rows: list[str]) -> list[tuple[str, str]]:
    """Each body row of a Markdown table (``rows``: its lines) as one line of text, every
    cell named by its column's header: ``"team: search, on-call lead: Ana"``. A cell
    without a header, or a table without a header row (no separator line), reads as its
    text alone; a header row of empty cells (HTML converters write one for a table without
    ``<th>``) gives way to the first body row. Empty cells are left out, and so are rows
    holding fewer than two words of text. Each row comes with its first cell (its label: "Business" in a
    table of plans)."""
    if len(rows) >= 2 and _TABLE_SEPARATOR.match(rows[1]):
        header, body = _cells(rows[0]), rows[2:]
        if not any(header) and body:
            header, body = _cells(body[0]), body[1:]
    else:
        header, body = [], rows
    out: list[tuple[str, str]] = []
    for row in body:
        if _TABLE_SEPARATOR.match(row):
            continue
        cells = _cells(row)
        parts = [
            f"{header[i]}: {cell}" if i < len(header) and header[i] and header[i] != cell else cell
            for i, cell in enumerate(cells)
            if cell
        ]
        text = ", ".join(parts)
        if len(text.split()) >= 2:
            out.append((text, cells[0] if cells else ""))
    return out


def answering_rows(units: Sequence[Unit], asked: set[str]) -> set[tuple[int, int]]:
    """The rows (``(doc, pos)``) that answer the question on their own: in each table of at least
    ``ANSWERING_MIN_ROWS`` rows (its pieces, one per chunk, read as one table), the rows holding a
    word of the question (``asked``: its terms) that few of the table's rows hold, at most one in
    ``ANSWERING_ROW_SHARE`` of them, and not its header ("billing" in "who owns billing-api?"
    against a service table's 35 rows), when at most ``ANSWERING_MAX_ROWS`` rows hold one."""
    headers = {(b.doc, b.pos): b.text.split("\n", 1)[0] for b in units if b.code}
    tables: dict[tuple[int, str], list[Unit]] = {}
    for u in units:
        if u.row >= 0:
            tables.setdefault((u.doc, headers.get((u.doc, u.row), "")), []).append(u)
    out: set[tuple[int, int]] = set()
    for (_, header), rows in tables.items():
        if len(rows) < ANSWERING_MIN_ROWS:
            continue
        held, df = _row_terms(rows, header, asked)
        rare = {t for t, n in df.items() if n <= max(1, int(len(rows) * ANSWERING_ROW_SHARE))}
        hits = [r for r, h in zip(rows, held, strict=True) if h & rare]
        if 0 < len(hits) <= ANSWERING_MAX_ROWS:
            out |= {(r.doc, r.pos) for r in hits}
    return out


_LABEL_TOKEN = re.compile(r"[^\W_]+(?:[-./][^\W_]+)*")
_BOLD_LEAD = re.compile(r"^\*\*(.+?)\*\*")


# Operating systems a user names by what they run ("on ubuntu", "my macbook", "win11") where a page's
# sibling sections name the family ("## Linux", "## macOS", "## Windows"): each family's names, one
# pattern a family. A table, not the embeddings: MiniLM puts "ubuntu" nearer "Linux" than "Windows" by
# 0.06 only, while "laptop", "computer" and "desktop" are nearer "Windows" by 0.12-0.16 (no cosine margin
# takes the one and leaves the others), and the systems are a small, closed set. Words that name other
# things too are left out ("arch" and "win" alone, "mac" before "address"), and "pixel" and "galaxy" name
# a phone only with its model after them ("pixel 8", "galaxy s23").
_SYSTEMS = {
    "linux": r"linux|ubuntu|[kxl]ubuntu|debian|fedora|centos|rhel|red\s*hat|opensuse|suse|manjaro|raspbian|"
    r"arch\s+linux|linux\s*mint|rocky\s*linux|almalinux|pop!?_?os|kali",
    "macos": r"mac\s*os(?:\s*x)?|osx|os\s*x|macs?(?!\s*address)|macbooks?(?:\s*(?:air|pro))?|imacs?|"
    r"mac\s*(?:mini|studio)",
    "windows": r"windows(?:\s*(?:7|8|10|11|xp|vista|server))?|win\s*(?:7|8|10|11)",
    "ios": r"ios|ipados|iphones?|ipads?",
    "android": r"android|samsung|oneplus|xiaomi|huawei|motorola|pixel\s*\d{1,2}[a-z]?(?!\d)|"
    r"galaxy\s*(?:[a-z]{1,2}\d{1,3}[a-z]?|note\s*\d{1,2}|tab\s*[a-z]?\d{1,2}|z?\s*fold\s*\d?|z?\s*flip\s*\d?)",
}
# The model or version a user names after the system or device ("iphone 15 pro max", "galaxy s23 ultra",
# "macbook pro m3", "ubuntu 22.04", "android 14"): part of the name, not a word of its own the page must
# hold (a section headed "iOS" answers "my iphone 15" as it answers "my iphone")
_MODEL = (
    r"(?:\s*(?:[a-z]{0,2}\d{1,4}(?:\.\d{1,2})*[a-z]{0,2}|pro|max|plus|mini|air|ultra|lite|se|xl|fe)(?![\w-]|\.\w))*"
)
# a name ends before a letter or a hyphen ("iosevka" is no "ios"); its model may follow it run together ("iphone15")
_SYSTEM = {
    name: re.compile(rf"(?<![\w.-])(?:{pattern})(?![^\W\d_]|-){_MODEL}", re.I) for name, pattern in _SYSTEMS.items()
}


def _label_tokens(text: str) -> set[str]:
    """The words of a label or question compared with each other: its content terms
    (:func:`graphs.signals.terms`), each token holding a digit without its separators
    ("E-1107" and "e1107" are both "e1107", "4.2.0" is "420"), and ``"system:<family>"`` for each
    operating system it names (:data:`_SYSTEMS`: "ubuntu" and "Linux" are both ``"system:linux"``)."""
    out = set(signals.terms(text))
    for t in _LABEL_TOKEN.findall(text.lower()):
        flat = re.sub(r"[-./]", "", t)
        if any(ch.isdigit() for ch in flat):
            out.add(flat)
    out |= {f"system:{name}" for name, pattern in _SYSTEM.items() if pattern.search(text)}
    return out


def unit_labels(units: Sequence[Unit], docs: Sequence[Doc]) -> dict[tuple[int, int], list[tuple[tuple, str]]]:
    """The labels each unit sits under, each with the group of siblings it is told apart from
    (``(doc, pos) -> [(group, label)]``): a table row's first cell among its table's rows ("Business"
    among the plans); a paragraph or list item opening with a bold name ("**SEV2**: ...", an FAQ's
    "**Can I merge tickets?**") among the paragraphs or items of its list or section; a definition
    list entry's term ("Runner", :attr:`Unit.label`) among the terms of its section; each heading
    above it among the headings under the same parent heading of its page ("Linux" among "Windows",
    "macOS"; "Install" among "Uninstall"), its page's chunks read as one page (a chunk's heading path
    is its title, a whole page's its own headings)."""
    out: dict[tuple[int, int], list[tuple[tuple, str]]] = {}
    tables = {(b.doc, b.pos): b.text.split("\n", 1)[0] for b in units if b.code}
    opening: dict[tuple[int, int], str] = {}  # (doc, para) -> the bold name its first unit opens with
    for u in units:
        if (u.doc, u.para) not in opening:
            m = _BOLD_LEAD.match(u.text)
            opening[(u.doc, u.para)] = m[1].strip().rstrip(":?").strip() if m and not u.heading else ""
    for u in units:
        place = str(docs[u.doc].get("location") or u.doc) if u.doc < len(docs) else str(u.doc)
        title = [p.strip() for p in str(docs[u.doc].get("title") or "").split(" > ") if p.strip()]
        path = title[: max(0, u.path[0][0] - 1)] + [t for _, t in u.path] if u.path else title
        labels: list[tuple[tuple, str]] = []
        for k in range(1, len(path)):
            labels.append((("heading", place, tuple(path[:k])), path[k]))
        if u.row >= 0 and u.label:
            labels.append((("row", place, tables.get((u.doc, u.row), "")), u.label))
        elif u.label and not u.heading:  # a definition list's term among the other terms of its section
            labels.append((("term", place, tuple(path)), u.label))
        name = opening.get((u.doc, u.para), "")
        if name and not u.heading:
            where = ("list", u.list) if u.list >= 0 else ("section", tuple(path))
            labels.append((("bold", place, where), name))
        out[(u.doc, u.pos)] = labels
    return out


def label_match(
    question: str, units: Sequence[Unit], docs: Sequence[Doc]
) -> tuple[dict[tuple[int, int], int], set[tuple[int, int]]]:
    """How the labels the question names move each unit (``(doc, pos) -> n``), and the units under a
    label the question passes over (``{(doc, pos)}``: a sibling of a named label, or a system it does
    not name; "Removing > Linux" for "how do I install it on Linux?" is moved by +1 and -1 and is
    such a unit). In each group of
    sibling labels (:func:`unit_labels`), the one label holding more of the question's words that
    its siblings do not hold than any other (compared without case, and a code or version without
    its separators: "e1107" names "E-1107") adds 1 to every unit under it, and each sibling label
    takes 1 from its units: "how much does the business plan cost?" lifts the "Business" row over a
    sentence that mentions Business, and "how do I install on Linux?" the Linux section's install
    steps over the Windows ones; an operating system named by a system of its family does too ("on
    ubuntu" names "Linux", "on my macbook" "macOS": :data:`_SYSTEMS`). A named label that holds
    everything the question asks about (:func:`names_all_asked`: "Runner" for "what's a runner?",
    not "Restarting a runner", which holds a word more) adds 2: the glossary's entry, the row or the
    section that is the very thing asked leads over a section that merely mentions it. Units under no
    named label are left out."""
    asked = _label_tokens(question)
    labels = unit_labels(units, docs)
    groups: dict[tuple, set[str]] = {}
    for found in labels.values():
        for group, label in found:
            groups.setdefault(group, set()).add(label)
    winners: dict[tuple, str] = {}
    losers: dict[tuple, set[str]] = {}  # labels naming only other systems than the question names
    systems = _systems_of(asked)
    for group, names in groups.items():
        if len(names) < 2:
            continue
        name = named_label(asked, names)
        if name:
            winners[group] = name
        elif systems:  # "on my macbook": a phone app page's "Android" section is about another system
            tokens = {n: _label_tokens(n) for n in names}
            losers[group] = {n for n in names if _systems_of(tokens[n]) and not _systems_of(tokens[n]) & systems}
    whole = {g for g, name in winners.items() if names_all_asked(asked, name)}
    out: dict[tuple[int, int], int] = {}
    off: set[tuple[int, int]] = set()
    for key, found in labels.items():
        moves = [
            ((2 if g in whole else 1) if winners[g] == label else -1)
            if g in winners
            else -1
            if label in losers.get(g, ())
            else 0
            for g, label in found
        ]
        if sum(moves):
            out[key] = sum(moves)
        if -1 in moves:
            off.add(key)
    return out, off


def named_label(asked: set[str], names: set[str]) -> str:
    """The one label of ``names`` (sibling labels) that the question's tokens ``asked``
    (:func:`_label_tokens`) name: the one holding more of the question's tokens that its siblings do
    not hold than any other, at least half of those it holds alone and a fifth of the question's
    tokens; "" when none does, or two do alike."""
    if len(names) < 2:
        return ""
    # a date or a note in brackets does not name the unit ("4.2.0 (2026-02-10)" is "4.2.0")
    tokens = {n: _label_tokens(re.sub(r"\([^)]*\)", " ", n)) for n in names}
    hits = {}
    for n in names:
        own = tokens[n] - set().union(*(tokens[o] for o in names if o != n))
        held = sum(1 for t in own if any(_same_word(t, a) for a in asked))
        # named: at least half its own words ("fax" of "Is there a fax integration?"), not one word of
        # a long heading a long question happens to share
        # ... and a good part of what the question asks (one word shared with a long question is chance)
        named = held * LABEL_SHARE >= len(own) and held >= len(asked) * LABEL_QUESTION_SHARE
        hits[n] = held if named else 0
    best = max(hits.values())
    if best > 0 and sum(1 for v in hits.values() if v == best) == 1:
        return next(n for n, v in hits.items() if v == best)
    return ""


# the words a question asking what a thing is adds to the thing's name ("what does board mean?", "define
# runner", "runner definition", "what does SLA stand for"): they name no label
_DEFINING = frozenset({"mean", "meant", "define", "definition", "defined", "stand", "stands"})


def names_all_asked(asked: set[str], label: str) -> bool:
    """The label ``label`` and the question's tokens ``asked`` (:func:`_label_tokens`) but the
    words asking for a meaning (:data:`_DEFINING`) name the same thing: each of either is one of the
    other's (:func:`_same_word`). "Runner" for "what's a runner?" and "define runner"; not
    "Restarting a runner" for them (it holds a word the question does not ask), nor "Runner" for
    "how do I restart a runner?" (the label is one thing the question names, not all it asks)."""
    wanted = {a for a in asked if a not in _DEFINING}
    tokens = _label_tokens(re.sub(r"\([^)]*\)", " ", label))
    return (
        bool(wanted)
        and all(any(_same_word(t, a) for t in tokens) for a in wanted)
        and all(any(_same_word(t, a) for a in wanted) for t in tokens)
    )


def _same_word(label: str, asked: str) -> bool:
    """A label's token and a question's are one word: equal, or one the start of the other and at
    least ``FOCUS_PREFIX + 1`` characters long (the suffix strip leaves "Removing" as "remov", while
    "remove" keeps its "e")."""
    if label == asked:
        return True
    short, longer = sorted((label, asked), key=len)
    return len(short) > FOCUS_PREFIX and longer.startswith(short) and not short.startswith("system:")


def _systems_of(tokens: set[str]) -> set[str]:
    """The operating systems among a label's or a question's tokens (:func:`_label_tokens`)."""
    return {t for t in tokens if t.startswith("system:")}


def _row_terms(rows: Sequence[Unit], header: str, asked: set[str]) -> tuple[list[set[str]], dict[str, int]]:
    """The question's terms (``asked``) each table row holds, leaving out the header's words, and
    how many rows hold each term (its row frequency): ``(held, df)``, ``held[i]`` for ``rows[i]``."""
    wanted = asked - signals.terms(header)
    held = [signals.terms(r.text) & wanted for r in rows]
    df: dict[str, int] = {}
    for h in held:
        for t in h:
            df[t] = df.get(t, 0) + 1
    return held, df


def shared_rows(
    units: Sequence[Unit], asked: set[str], docs: Sequence[Doc]
) -> dict[tuple[int, int], tuple[str, list[Unit]]]:
    """The rows that share the value the question asks about, each (``(doc, pos)``) with its
    group's table (:func:`rows_table`) and the group: in each table of at least
    ``ANSWERING_MIN_ROWS`` rows (its pieces, one per chunk, read as one table), the two or more
    rows holding the words of the question (``asked``: its terms) that at most
    ``SHARED_ROW_SHARE`` of the rows hold, and not its header ("gamma" of "which services does
    team-gamma own?", held by 6 of 35 rows). Where several such words are asked ("Kotlin
    services of Payments"), the rows holding the most of them. A group whose table cannot be
    shown (a table without a header row) is left out."""
    headers = {(b.doc, b.pos): b.text.split("\n", 1)[0] for b in units if b.code}
    tables: dict[tuple[str, str], list[Unit]] = {}
    for u in units:
        if u.row >= 0:
            where = str(docs[u.doc].get("location") or u.doc) if u.doc < len(docs) else str(u.doc)
            tables.setdefault((where, headers.get((u.doc, u.row), "")), []).append(u)
    out: dict[tuple[int, int], tuple[str, list[Unit]]] = {}
    for (_, header), rows in tables.items():
        if len(rows) < ANSWERING_MIN_ROWS:
            continue
        held, df = _row_terms(rows, header, asked)
        selecting = {t for t, n in df.items() if n <= len(rows) * SHARED_ROW_SHARE}
        most = max((len(h & selecting) for h in held), default=0)
        group = [r for r, h in zip(rows, held, strict=True) if most and len(h & selecting) == most]
        values = {frozenset(h & selecting) for r, h in zip(rows, held, strict=True) if r in group}
        # rows holding one asked word each ("string" here, "dictionary" there) share no value
        table = rows_table(units, group) if len(group) >= 2 and len(values) == 1 else ""
        if table:
            out |= {(r.doc, r.pos): (table, group) for r in group}
    return out


def rows_table(units: Sequence[Unit], group: Sequence[Unit]) -> str:
    """The table the rows of ``group`` come from, with those rows only (header and separator
    first), up to ``MAX_CODE_CHARACTERS``: ``""`` when its lines cannot be told."""
    by_pos = {(u.doc, u.pos): u for u in units}
    lines: list[str] = []
    for r in group:
        table = by_pos.get((r.doc, r.row))
        rows = table.text.split("\n") if table is not None else []
        if len(rows) < 3 or not _TABLE_SEPARATOR.match(rows[1]):
            return ""
        if not lines:
            lines = rows[:2]
        line = next((x for x in rows[2:] if table_rows([rows[0], rows[1], x]) == [r.text]), None)
        if line is None:
            return ""
        if len("\n".join([*lines, line])) > MAX_CODE_CHARACTERS:
            break
        lines.append(line)
    return "\n".join(lines) if len(lines) > 2 else ""


def _rejoin(first: str, second: str) -> str | None:
    """``first`` and ``second`` as one code block when ``second`` continues it: a fenced block
    reopened with the same opening line (the chunking closes a long block at a chunk's end and
    reopens it in the next); else None. (A table cut in two stays two: its rows follow each.)"""
    a, b = first.split("\n"), second.split("\n")
    fence = _FENCE.match(a[0])
    if fence:
        if len(a) > 1 and len(b) > 1 and a[0] == b[0] and _closes(a[-1], fence.group(1)):
            return "\n".join(a[:-1] + b[1:])
    return None


_QUOTE = re.compile(r"^[ \t]{0,3}>(?:[ \t]?>)*[ \t]?")


def unquoted(lines: list[str]) -> list[str]:
    """``lines`` (Markdown) with block quote markers taken off, outside fenced code: a quoted
    note ("> **Note:** Cargo does not support ...", hard-wrapped with a "> " on every line) is
    quoted in an answer as the words it shows, not with the markers run into its sentences
    ("... URLs like > `git@example.com:user/repo.git`"); a quote's blank "> " line still ends
    its paragraph, and a fence inside a quote opens a code block. Code keeps its ">" (a prompt,
    a redirection)."""
    out: list[str] = []
    fence = ""
    for line in lines:
        if fence:
            out.append(line)
            if _closes(_QUOTE.sub("", line, count=1), fence):
                fence = ""
            continue
        line = _QUOTE.sub("", line, count=1)
        m = _FENCE.match(line)
        if m:
            fence = m.group(1)
        out.append(line)
    return out


def _closes(line: str, fence: str) -> bool:
    """``line`` closes a code block opened with ``fence``: the same character, at least as
    many, nothing else on the line (CommonMark)."""
    run = line.strip()
    return run.startswith(fence) and set(run) == {fence[0]}


def lexical_share(q_terms: set[str], text: str) -> float:
    """Share (0..1) of the question's terms that occur in ``text``."""
    return len(q_terms & signals.terms(text)) / len(q_terms) if q_terms else 0.0


# ---- choosing the lead sentence ----------------------------------------------------------
# The lead sentence is the prose unit with the highest LEAD_WEIGHTS . lead_features(...): a linear
# ranker fitted by bench/fit_lead.py on the tuning corpora's questions (a sentence holding an expected
# fact is a right lead), chosen there by leave-one-corpus-out. Names of the features, in order:
LEAD_FEATURES = (
    "cosine",  # MiniLM cosine of the question with the sentence
    "cosine_under_heading",  # ... with "heading: sentence"
    "cosine_best",  # the better of the two (what the rules score)
    "term_share",  # share of the question's terms in the sentence
    "idf_share",  # the same, each term weighted by its rarity among the answer's sentences
    "heading_share",  # share of the question's terms in the heading the sentence sits under
    "page_rank",  # 1 / search rank of its document
    "section_first",  # 1 / (1 + sentences of its section before it)
    "paragraph_first",  # the first sentence of its paragraph or list item
    "step",  # an item of a numbered list
    "bullet",  # an item of a bulleted list
    "introduces_block",  # a code block or table follows it
    "table_row",  # a table row read with its header
    "inline_code",  # holds inline code
    "length",  # log(characters) / log(1000)
    "amount",  # states an amount
    "amount_asked",  # ... and the question asks for one
    "verdict",  # says what is not so or cannot be done
    "verdict_asked",  # ... the question asks whether, and it holds one of its words (or its heading does)
    "step_asked",  # a step or a sentence introducing a block, for a question asking how
)
# None: the lead is chosen by the rules of ``compose`` (a fitted ranker did not beat them out of corpus,
# bench/README.md "A fitted lead-sentence ranker")
LEAD_WEIGHTS: tuple[float, ...] | None = None
_HOW_TO = re.compile(r"\bhow\s+(?:do|does|can|could|should|would|to|i|we)\b|\bsteps?\b|\bset\s*up\b", re.I)


def lead_features(
    questions: Sequence[str],
    units: Sequence[Unit],
    headings: Sequence[str],
    cosine: np.ndarray,
    under: np.ndarray,
) -> np.ndarray:
    """The features of :data:`LEAD_FEATURES` for every unit, a ``(len(units), len(LEAD_FEATURES))``
    float array (rows of code blocks and headings are filled too; the composer ranks prose only).

    Args:
        questions: the question variants (the message first: the question's kind is read from it).
        units: the answer's documents' units (:meth:`Extractive.doc_units`), in document order.
        headings: the heading each unit sits under (:meth:`Extractive._headings`).
        cosine, under: :meth:`Extractive.unit_signals`' cosines (alone, under the heading).
    """
    asked: set[str] = set()
    for q in questions:
        asked |= signals.terms(q)
    held = [signals.terms(u.text) & asked for u in units]
    prose = [i for i, u in enumerate(units) if not u.code and not u.heading]
    df = {t: sum(1 for i in prose if t in held[i]) for t in asked}
    # inverse document frequency among the answer's sentences (Sparck Jones 1972, smoothed): a word
    # every sentence repeats ("leave" in a leave policy) tells less than the one few hold
    idf = {t: np.log((len(prose) + 1) / (df[t] + 1)) + 1.0 for t in asked}
    idf_total = sum(idf.values()) or 1.0
    first = questions[0] if questions else ""
    quantity = bool(first) and signals.asks_for_quantity(first)
    yes_no = bool(first) and signals.asks_yes_no(first)
    how_to = bool(_HOW_TO.search(first))
    keys = {(u.doc, u.pos): u for u in units}
    numbered_lists = {(u.doc, u.list) for u in units if u.list >= 0 and _ordered(u.item)}
    out = np.zeros((len(units), len(LEAD_FEATURES)), dtype=np.float64)
    since = 0  # prose units of the section before this one
    seen_para: set[tuple[int, int]] = set()
    for i, u in enumerate(units):
        if i == 0 or u.heading or units[i - 1].doc != u.doc:
            since = 0
        head = headings[i]
        nxt = keys.get((u.doc, u.pos + 1))
        step = u.list >= 0 and (u.doc, u.list) in numbered_lists
        introduces = nxt is not None and nxt.code
        amount = signals.states_quantity(u.text)
        verdict = signals.states_verdict(u.text)
        out[i] = (
            cosine[i],
            under[i],
            max(cosine[i], under[i]),
            len(held[i]) / len(asked) if asked else 0.0,
            sum(idf[t] for t in held[i]) / idf_total,
            len(signals.terms(head) & asked) / len(asked) if asked else 0.0,
            1.0 / (1 + u.doc),
            1.0 / (1 + since),
            float((u.doc, u.para) not in seen_para),
            float(step),
            float(u.list >= 0 and not step),
            float(introduces),
            float(u.row >= 0),
            float("`" in u.text),
            np.log(max(len(u.text), 1)) / np.log(1000),
            float(amount),
            float(amount and quantity),
            float(verdict),
            float(verdict and yes_no and bool(asked & signals.terms(f"{head} {u.text}"))),
            float(how_to and (step or introduces)),
        )
        seen_para.add((u.doc, u.para))
        if not u.heading and not u.code:
            since += 1
    return out


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
        cross_encoder: Embeddings | None = None,
    ):
        self.embedder = embedder
        self.knowledge = knowledge
        self.relevance_threshold = relevance_threshold
        self.current_relevance_threshold = current_relevance_threshold
        # questions in another language than the documents: a multilingual encoder scores instead
        self.cross_embedder = TextEmbedder(cross_encoder) if cross_encoder is not None else None
        self._cross_index: CrossLingualIndex | None = None

    # ---- questions in other languages -----------------------------------------------
    def foreign(self, questions: Sequence[str]) -> bool:
        """The question (the first variant) is in another language than the documents and a
        multilingual encoder is loaded (:mod:`graphs.knowledge.crosslingual`)."""
        return self.cross_embedder is not None and bool(questions) and is_foreign(questions[0])

    def cross_index(self) -> CrossLingualIndex | None:
        """The multilingual vectors of the live generation's chunks (None without an encoder
        or an index); rebuilt when a reindex swapped the generation."""
        snap = getattr(self.knowledge, "snapshot", None) if self.knowledge is not None else None
        if self.cross_embedder is None or snap is None or not hasattr(snap, "chunks"):
            return None
        if self._cross_index is None or self._cross_index.snapshot is not snap:
            self._cross_index = CrossLingualIndex(cast(Embeddings, self.cross_embedder.embeddings), snap)
        return self._cross_index

    def threshold_for(self, questions: Sequence[str], current: bool = False, match: float | None = None) -> float:
        """The relevance threshold a document's :meth:`grade` must reach: the multilingual
        one for a question in another language, the current-events one when the router took
        the question for current events (``current``), else the plain one, moved by
        ``match`` (:meth:`passage_match` of the graded documents, when given): lower by
        ``MATCH_WEIGHT`` x how far it lies above ``MATCH_CENTRE``, higher below it."""
        if self.foreign(questions):
            return CROSS_RELEVANCE_THRESHOLD + (CURRENT_RELEVANCE_THRESHOLD - RELEVANCE_THRESHOLD if current else 0.0)
        if current:
            return self.current_relevance_threshold
        shift = MATCH_WEIGHT * (match - MATCH_CENTRE) if match is not None else 0.0
        return self.relevance_threshold - shift

    def distinctive(self, questions: Sequence[str]) -> list[str] | None:
        """The question variants without their words the knowledge base holds nearly everywhere
        (content words in at least :data:`COMMON_SHARE` of its chunks and :data:`MIN_COMMON_CHUNKS`:
        the product's own name, "Does Zephyrix need a GPU?" -> "Does need a GPU?"). Those words say
        which knowledge base is asked, not which page answers: every page of a product's manual
        shares them with any question about the product, so a sentence scores on them whether or
        not it answers. None when no word is
        that common, a variant would keep no content word ("What is Zephyrix?" asks about just
        that), the question is in another language or there is no keyword index.

        Raises:
            Nothing: an index that cannot be read counts as no index."""
        snap = getattr(self.knowledge, "snapshot", None) if self.knowledge is not None else None
        postings = getattr(snap, "postings", None)
        if postings is None or not postings.count or self.foreign(questions):
            return None
        from graphs.knowledge.index import query_tokenizer

        tokenizer = query_tokenizer()

        def common(word: str) -> bool:
            if not signals.terms(word):  # a stop word or a number: not the knowledge base's own
                return False
            tokens = tokenizer.tokens(word)  # an identifier (HTTP_PROXY) is common only if all its parts are
            return bool(tokens) and all(
                (i := postings.index.get(token)) is not None
                and postings.indptr[i + 1] - postings.indptr[i] >= max(COMMON_SHARE * postings.count, MIN_COMMON_CHUNKS)
                for token in tokens
            )

        out, dropped = [], False
        for q in questions:
            words = re.split(r"(\w[\w'-]*)", q)
            kept = [w if i % 2 == 0 or not common(w) else "" for i, w in enumerate(words)]
            text = re.sub(r"\s+", " ", "".join(kept)).strip()
            dropped = dropped or text != re.sub(r"\s+", " ", q).strip()
            if q.strip() and not signals.terms(text):
                return None
            out.append(text)
        return out if dropped else None

    def only_common_words(self, questions: Sequence[str], docs: Sequence[Doc]) -> bool:
        """Whether ``docs`` pass the relevance bar only on the knowledge base's common words: graded
        on the :meth:`distinctive` variants (the bar moved by their own :meth:`passage_match`), none
        reaches it. A question about something no page covers ("Does Zephyrix need a GPU?" on a
        manual that never speaks of hardware) then asks the experts instead of quoting every page
        that names the product. False when no word is that common."""
        reduced = self.distinctive(questions)
        if reduced is None or not docs:
            return False
        threshold = self.threshold_for(reduced, False, self.passage_match(reduced, docs))
        return not any(score >= threshold for score in self.grade(reduced, docs))

    def passage_match(self, questions: Sequence[str], docs: Sequence[Doc]) -> float | None:
        """The best cosine of the question variants with the documents' chunks as the index
        embedded them (file path, heading path and text: the passage in its context, where
        :meth:`grade` scores single sentences); None when a document is not a knowledge-base
        chunk, without vectors or without documents."""
        if not docs:
            return None
        qv = self.question_vectors(questions)
        dv = self.index_vectors(docs)
        if qv is None or dv is None or dv.shape[1] != qv.shape[1]:
            return None
        return float((dv @ qv.T).max())

    # ---- scoring ------------------------------------------------------------------
    def question_vectors(self, questions: Sequence[str]) -> np.ndarray | None:
        """Unit vectors of the question variants (``None`` without embeddings)."""
        qs = [q for q in questions if q.strip()]
        return self.embedder(qs) if qs else None

    def score_units(
        self, questions: Sequence[str], units: list[Unit], contexts: Sequence[str] | None = None
    ) -> list[Scored]:
        """Score each unit: best cosine over the question variants (0 without embeddings)
        plus ``LEXICAL_WEIGHT`` x the share of the question's terms it holds. Code blocks
        score on their terms and half their cosine (MiniLM reads code poorly).

        ``contexts`` (one per unit, "" for none): the heading a prose unit sits under; its
        cosine is then the better of the unit's own and that of ``"heading: unit"``, so a
        sentence that only makes sense under its heading ("Under 2 years - not eligible"
        under "Sabbatical leave") is scored with it. A table row carries its header already:
        no context; and of the rows, only the ``ROW_COSINE_LIMIT`` holding the most of the
        question's terms get a cosine, the rest score on their terms."""
        if not units:
            return []
        own, under, lexical = self.unit_signals(questions, units, contexts)
        cos = np.maximum(own, under)
        out = []
        for u, c, lex in zip(units, cos, lexical, strict=True):
            bonus = INLINE_CODE_BONUS if not u.code and "`" in u.text else 0.0
            out.append(Scored(u, float(c) * (0.5 if u.code else 1.0) + LEXICAL_WEIGHT * lex + bonus))
        return out

    def unit_signals(
        self, questions: Sequence[str], units: list[Unit], contexts: Sequence[str] | None = None
    ) -> tuple[np.ndarray, np.ndarray, list[float]]:
        """What :meth:`score_units` adds up, apart: for each unit the best cosine of the question
        variants with the unit alone, the same with ``"context: unit"`` (the unit's own cosine
        where it has no context, for code and table rows; 0 without embeddings), and the share of
        the question's terms the unit holds (0..1). Arrays of ``len(units)`` floats."""
        q_terms: set[str] = set()
        for q in questions:
            q_terms |= signals.terms(q)
        lexical = [lexical_share(q_terms, u.text) for u in units]
        embedder = self.cross_embedder if self.foreign(questions) and self.cross_embedder else self.embedder
        qs = [q for q in questions if q.strip()]
        qv = embedder(qs) if qs else None
        cos = np.zeros(len(units), dtype=np.float32)
        under = cos.copy()
        if qv is not None and units:
            rows = [i for i, u in enumerate(units) if u.row >= 0]
            rows_read = set(sorted(rows, key=lambda i: -lexical[i])[:ROW_COSINE_LIMIT])
            at = [i for i, u in enumerate(units) if u.row < 0 or i in rows_read]
            uv = embedder([units[i].text[:1000] for i in at])
            cos[at] = (uv @ qv.T).max(axis=1)
            under = cos.copy()
            if contexts is not None:
                at = [i for i, (u, c) in enumerate(zip(units, contexts, strict=True)) if c and not u.code and u.row < 0]
                if at:
                    cv = embedder([f"{contexts[i]}: {units[i].text}"[:1000] for i in at])
                    under[at] = (cv @ qv.T).max(axis=1)
        return cos, under, lexical

    def doc_units(self, docs: Sequence[Doc], short_items: bool = False) -> list[Unit]:
        """The units of every document (``short_items``: see :func:`split_units`)."""
        units: list[Unit] = []
        for i, d in enumerate(docs):
            # a section's chunk under an FAQ's question ("... > Can I use it offline?") opens with its answer
            asked = heading_asks(str(d.get("title") or "").split(" > ")[-1])
            units += split_units(d.get("text", ""), i, short_items=short_items, asked=asked)
        return units

    def grade(self, questions: Sequence[str], docs: Sequence[Doc]) -> list[float]:
        """Relevance of each document (0..~1.5): the score of its best prose unit, whose term share
        counts the words of the section heading it sits under (:data:`GRADE_HEADING_WORDS`), and the
        question's words naming the operating system that heading names (:data:`_SYSTEMS`: "iphone" under
        "## iOS"), plus :data:`BOUND_GRADE_BONUS` for a unit stating a bound of what a bound question
        asks about."""
        units = self.doc_units(docs)
        scored = self.score_units(questions, units)
        if GRADE_HEADING_WORDS and units:
            q_terms: set[str] = set()
            for q in questions:
                q_terms |= signals.terms(q)
            # the question's words naming an operating system, by family ("iphone" -> "ios"): a section
            # headed "iOS" holds them ("how do I get it on my iphone?" shares no other word with its steps)
            named = {
                name: " ".join(m.group() for q in questions[:1] for m in pattern.finditer(q))
                for name, pattern in _SYSTEM.items()
            }

            def context(u: Unit) -> str:
                heading = self._section_of(u, docs)
                said = " ".join(named[t.split(":", 1)[1]] for t in _systems_of(_label_tokens(heading)))
                return f"{heading} {said}".strip()

            scored = [
                Scored(
                    s.unit,
                    s.score
                    + LEXICAL_WEIGHT
                    * (
                        lexical_share(q_terms, f"{context(s.unit)}\n{s.unit.text}")
                        - lexical_share(q_terms, s.unit.text)
                    ),
                )
                for s in scored
            ]
        subject = self._bound_subject(questions)
        best = [0.0] * len(docs)
        for s in scored:
            if not s.unit.code:
                text = s.unit.text
                bound = bool(subject) and signals.states_bound(text) and bool(subject & signals.terms(text))
                best[s.unit.doc] = max(best[s.unit.doc], s.score + (BOUND_GRADE_BONUS if bound else 0.0))
        return best

    def says_who(self, question: str, docs: Sequence[Doc]) -> list[bool]:
        """For a question asking who in the team does something (:func:`graphs.signals.asks_who_in_team`),
        which of ``docs`` holds a sentence, a list item or a table row that, read with its section's
        heading (and its page's title, under a heading that names only who), names who does it
        (:func:`graphs.signals.says_who_does`): "- your team lead" under "## Who to tell" of "# Being off
        sick" names whom to tell when off sick, the page's title saying what the list is for."""
        out = [False] * len(docs)
        for u in self.doc_units(docs):
            if not u.code and not u.heading and not out[u.doc]:
                # the page's title only: a page read whole keeps the heading path of the chunk the search
                # found ("Releasing > Hotfixes"), which is not the path of the other sections' sentences
                page = str(docs[u.doc].get("title") or "").split(" > ")[0]
                out[u.doc] = signals.says_who_does(question, f"{self._section_of(u, docs)}\n{u.text}", page)
        return out

    @staticmethod
    def _bound_subject(questions: Sequence[str]) -> set[str]:
        """The terms of what the first question variant asks a bound of ("whats the max attachment size"
        -> {"attachment"}), without the words asking for the bound; empty when it asks for none
        (:func:`graphs.signals.asks_for_bound`)."""
        if not questions or not signals.asks_for_bound(questions[0]):
            return set()
        return signals.terms(questions[0]) - signals.BOUND_WORDS

    @staticmethod
    def _section_of(u: Unit, docs: Sequence[Doc]) -> str:
        """The heading of the section ``u`` sits in: its own (:attr:`Unit.section`), else the last part
        of its document's heading path (a chunk that opens inside its section); never the page's title,
        whose words (the product's name) are in every section."""
        if u.section:
            return u.section
        path = str(docs[u.doc].get("title") or "").split(" > ") if u.doc < len(docs) else []
        return path[-1] if len(path) > 1 else ""

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
        cross = self.cross_index() if self.foreign(questions) else None
        if cross is not None and docs:
            cqv = cross.query_vectors([q for q in questions if q.strip()] or [""])
            rowids, scores = cross.chunk_scores(cqv)
            at = {int(r): float(s) for r, s in zip(rowids, scores, strict=True)}
            cos = np.zeros(len(docs), dtype=np.float32)
            for i, d in enumerate(docs):
                m = re.search(r"#(\d+)$", str(d.get("id", "")))
                if m and int(m.group(1)) in at:
                    cos[i] = at[int(m.group(1))]
                else:  # not a chunk of the live generation: its windows encoded now
                    wv = cross.query_vectors(window_texts(d.get("title", ""), d.get("text", "")))
                    cos[i] = float((wv @ cqv.T).max())
            return cos, title
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

    def page_evidence(self, questions: Sequence[str], docs: Sequence[Doc]) -> np.ndarray:
        """Per chunk, how much its whole page is about the question: the mean over all the
        page's chunks (from the live index) of their cosine with the first variant (the
        message itself: the thread's earlier question would pull a follow-up back to the
        page of the earlier subject), plus ``RERANK_PAGE_BEST_SHARE x`` the best of those
        cosines. A page about the topic holds many passages near the question, a neighbouring
        page that mentions it once holds one, so the mean tells them apart where the best
        chunk alone does not; the best chunk keeps a long page whose one section answers (a
        reference of a hundred sections) from sinking with its mean. Zeros without an index
        with vectors, for a question in another language (the index's vectors are not the
        multilingual encoder's) and for a document that is not a knowledge-base chunk."""
        out = np.zeros(len(docs), dtype=np.float32)
        snap = getattr(self.knowledge, "snapshot", None) if self.knowledge is not None else None
        if snap is None or getattr(snap, "vectors", None) is None or not hasattr(snap, "file_chunks") or not docs:
            return out
        if self.foreign(questions):
            return out
        qv = self.question_vectors(questions[:1])
        if qv is None or qv.shape[1] != snap.vectors.shape[1]:
            return out
        pages: dict[tuple[str, str | None], float] = {}
        for i, d in enumerate(docs):
            if not re.search(r"#\d+$", str(d.get("id", ""))) or not d.get("location"):
                continue
            key = (d["location"], d.get("source"))
            if key not in pages:
                vecs = [v for _, v in self.page_chunks(*key) if v is not None]
                cos = np.vstack(vecs) @ qv[0] if vecs else np.zeros(0)
                pages[key] = float(cos.mean() + RERANK_PAGE_BEST_SHARE * cos.max()) if len(cos) else 0.0
            out[i] = pages[key]
        return out

    @staticmethod
    def rerank_scores(
        cos: np.ndarray,
        title: np.ndarray,
        prior: float = RERANK_PRIOR_WEIGHT,
        title_weight: float = RERANK_TITLE_WEIGHT,
        page: np.ndarray | None = None,
        page_weight: float = RERANK_PAGE_WEIGHT,
    ) -> np.ndarray:
        """Rerank score of chunks in hybrid-search order: ``prior x 11/(10 + rank)`` (the
        fused rank, 1 for the first) plus the cosine plus ``title_weight x`` title share plus
        ``page_weight x`` the page's evidence (:meth:`page_evidence`, when given)."""
        ranks = np.arange(1, len(cos) + 1, dtype=np.float32)
        score = prior * 11.0 / (10.0 + ranks) + cos + title_weight * title
        return score + page_weight * page if page is not None else score

    def rerank(self, questions: Sequence[str], docs: list[Doc], k: int) -> list[Doc]:
        """The ``k`` best of ``docs`` (hybrid-search order) by :meth:`rerank_scores` with the
        page's evidence (for a question in another language, with the multilingual cosine and
        its own prior and title weights, without page evidence), plus ``RERANK_CODE_WEIGHT x``
        the share of the first question's codes the chunk names (:func:`graphs.signals.code_share`)."""
        if len(docs) <= 1:
            return docs[:k]
        cos, title = self.rerank_features(questions, docs)
        if self.foreign(questions):
            scores = self.rerank_scores(cos, title, CROSS_RERANK_PRIOR_WEIGHT, CROSS_RERANK_TITLE_WEIGHT)
        else:
            page = self.page_evidence(questions, docs)
            scores = self.rerank_scores(cos, title, RERANK_PRIOR_WEIGHT, RERANK_TITLE_WEIGHT, page=page)
        if RERANK_CODE_WEIGHT and (signals.asked_codes(questions[0]) or signals.asked_versions(questions[0])):
            held = [signals.code_share(questions[0], f"{d.get('title', '')}\n{d.get('text', '')}") for d in docs]
            scores = scores + RERANK_CODE_WEIGHT * np.asarray(held, dtype=np.float32)
        order = np.argsort(-scores, kind="stable")
        return [docs[i] for i in order[:k]]

    def retrieve(
        self,
        questions: Sequence[str | tuple[str, float]],
        k: int,
        candidates_per_result: int = 4,
        sources: Sequence[str] | None = None,
    ) -> list[Doc]:
        """Search the knowledge base (``questions``: plain or ``(query, weight)``, see
        ``KnowledgeBase.search``; a question in the documents' language with the search's
        pseudo-relevance feedback at ``FEEDBACK_WEIGHT``) for ``k * candidates_per_result`` chunks, keep the
        ``k`` best after :meth:`rerank`, each widened to its section (:meth:`widen`; two
        chunks of one section become one document), or to its whole page when the page is at
        most ``PAGE_CHARACTERS`` long (:meth:`page`; the page is then one document). ``sources``: only these configured
        sources (``KnowledgeBase.search``).

        Raises:
            KnowledgeBaseError: no index has been built (or no knowledge base was given).
        """
        if self.knowledge is None:
            raise KnowledgeBaseError("no knowledge base to retrieve from")
        texts = [q if isinstance(q, str) else q[0] for q in questions]
        cross = self.cross_index() if self.foreign(texts) else None
        if cross is not None:  # the multilingual encoder's ranking joins the search's
            extra = cross.search(texts[0], k * candidates_per_result * 3)
            queries = list(questions)
            translated, share = cross.translate(texts[0]) if CROSS_TRANSLATED_WEIGHT > 0 else ("", 0.0)
            if translated:  # the question in the documents' words, searched like an English one
                queries = [
                    (q, CROSS_ORIGINAL_WEIGHT) if isinstance(q, str) else (q[0], q[1] * CROSS_ORIGINAL_WEIGHT)
                    for q in queries
                ]
                queries.append((translated, CROSS_TRANSLATED_WEIGHT * share))
            cands = self.knowledge.search(
                queries, k * candidates_per_result, sources=sources, rankings=[(extra, CROSS_RANK_WEIGHT)]
            )
        else:
            options: dict[str, Any] = {"sources": sources} if sources is not None else {}
            if FEEDBACK_WEIGHT > 0:
                options["feedback"] = FEEDBACK_WEIGHT
            cands = self.knowledge.search(list(questions), k * candidates_per_result, **options)
        out: list[Doc] = []
        seen: set[tuple[str, str | None]] = set()
        for d in self.rerank(texts, cands, len(cands)):
            key = (d.get("location", ""), d.get("title", ""))
            page = (d.get("location", ""), None)  # a short page is one document, whichever chunk found it
            if key in seen or page in seen:
                continue
            whole = self.page(d)
            seen.add(page if whole is not None else key)
            out.append(whole if whole is not None else self.widen(d))
            if len(out) >= k:
                break
        return self.with_named_sections(texts[0] if texts else "", out, k, {p for p, s in seen if s is None})

    def with_named_sections(self, question: str, docs: list[Doc], k: int, whole: Collection[str] = ()) -> list[Doc]:
        """``docs`` with the section of a kept page whose heading names the operating system ``question``
        names (:func:`named_label` among its sibling headings, :data:`_SYSTEMS`: "how do I install it on
        ubuntu?" names "Linux" among "Linux", "macOS" and "Windows") when the search kept others of them and
        not it: the search keeps at most two chunks of a page, and a question naming the system by another
        word than its heading found the other systems' sections. The named section (widened, :meth:`widen`)
        goes before the first of its page's sections; at most ``k`` documents (the last go). Pages in
        ``whole`` (their location) were read whole and hold every section already. ``docs`` unchanged
        without an index or when the question names no system.

        Args:
            question: the user's message.
            docs: the documents :meth:`retrieve` chose, best first.
            k: the most documents to return.
            whole: the locations of the pages read whole (:meth:`page`)."""
        snap = getattr(self.knowledge, "snapshot", None) if self.knowledge is not None else None
        if snap is None or not hasattr(snap, "file_chunk_ids") or not question:
            return docs
        asked = _label_tokens(question)
        systems = _systems_of(asked)
        if not systems:
            return docs
        out = list(docs)
        for d in docs:
            path = [p.strip() for p in str(d.get("title") or "").split(" > ")]
            where = d.get("location", "")
            if len(path) < 2 or not where or where in whole:
                continue
            chunks = [c for c, _ in self.page_chunks(where, d.get("source"))]
            ids = self.page_chunk_ids(where, d.get("source"))
            siblings: dict[str, int] = {}  # a sibling heading -> its first chunk
            for i, c in enumerate(chunks):
                parts = [p.strip() for p in c.title.split(" > ")]
                if len(parts) == len(path) and parts[:-1] == path[:-1]:
                    siblings.setdefault(parts[-1], i)
            name = named_label(asked, set(siblings))
            kept = {str(x.get("title") or "") for x in out if x.get("location") == where}
            # only a system named by another word: a heading the question names by its own words is searched by them
            if not name or not _systems_of(_label_tokens(name)) & systems or len(ids) != len(chunks):
                continue
            if chunks[siblings[name]].title in kept:
                continue
            c = chunks[siblings[name]]
            found = Doc(**{**d, "id": f"{where}#{ids[siblings[name]]}", "title": c.title, "text": c.text})
            found.pop("score", None)
            at = next(i for i, x in enumerate(out) if x.get("location") == where)
            out.insert(at, self.widen(found))
        return out[:k]

    def page_chunks(self, location: str, source: str | None = None) -> list[tuple[Chunk, np.ndarray | None]]:
        """Every chunk of the page at ``location`` (of ``source`` when given) in the live generation,
        in order, each with its vector (None without a dense index); [] without an index or for a page
        it does not hold.

        Raises:
            Nothing: a generation a reindex closed while this turn read it (:class:`sqlite3.Error`)
            counts as no page; the chunks the search found still answer."""
        snap = getattr(self.knowledge, "snapshot", None) if self.knowledge is not None else None
        if snap is None or not hasattr(snap, "file_chunks") or not location:
            return []
        try:
            return list(snap.file_chunks(location, source))
        except sqlite3.Error:
            return []

    def page_chunk_ids(self, location: str, source: str | None = None) -> list[int]:
        """The rowids of :meth:`page_chunks`, in the same order (a chunk's Doc id is
        ``location#rowid``); [] as there."""
        snap = getattr(self.knowledge, "snapshot", None) if self.knowledge is not None else None
        if snap is None or not hasattr(snap, "file_chunk_ids") or not location:
            return []
        try:
            return list(snap.file_chunk_ids(location, source))
        except sqlite3.Error:
            return []

    def page(self, doc: Doc) -> Doc | None:
        """The chunk's whole page when it is at most ``PAGE_CHARACTERS`` long: its sections in
        order, each under its heading and the parent headings it opens (Markdown headings as deep as
        their place in its heading path: "## Removing" then "### Linux"), so a
        short page (a runbook's meaning, impact, diagnosis and mitigation) is quoted from
        whichever section answers, not only from the one the search found; else None (also
        without an index, or for a page of one section, which :meth:`widen` covers)."""
        chunks = [c for c, _ in self.page_chunks(doc.get("location", ""), doc.get("source"))]
        if not chunks:
            return None
        if len({c.title for c in chunks}) <= 1 or sum(len(c.text) for c in chunks) > PAGE_CHARACTERS:
            return None
        parts: list[str] = []
        last: list[str] | None = None
        for c in chunks:
            path = [p.strip() for p in c.title.split(" > ") if p.strip()]
            if path != last:
                # every heading the path opens, not only its last: a "Linux" section under "Removing" read
                # under the "Installing" heading above it answered "how do I install on Linux?" with removal
                same = 0
                while last is not None and same < min(len(path), len(last)) and path[same] == last[same]:
                    same += 1
                for level in range(min(same, max(len(path) - 1, 0)), len(path)):
                    parts.append(f"{'#' * min(6, level + 1)} {path[level]}")
                last = path
            parts.append(c.text)
        return Doc(**{**doc, "text": "\n\n".join(parts)})

    def widen(self, doc: Doc) -> Doc:
        """The chunk widened to its whole section (the chunks of its file sharing its
        heading path, in order), cut to ``MAX_SECTION_CHARACTERS`` around the chunk."""
        chunks = [c for c, _ in self.page_chunks(doc.get("location", ""), doc.get("source"))]
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
        budget: int = ANSWER_CHARACTERS,
        focus: Sequence[str] = (),
        neighbours: int | None = None,
        before: int | None = None,
        doc_prior: float | None = None,
        lead_after: int | None = None,
        lead_before: int | None = None,
        lead_weights: Sequence[float] | None = None,
    ) -> str:
        """An answer a reader takes in at a glance, quoting ``docs`` verbatim (whole
        sentences, never joined by "…"), each passage cited ``[n]`` (``n`` = 1-based
        position in ``docs``):

        1. the lead: the passage around the best-scoring sentence or list item (the
           ``before`` sentences before it in its paragraph, the ``neighbours`` after it);
           a numbered list (steps) is quoted whole when it fits (else from the lead's step
           on, saying where the rest is), and so is a bulleted list of at most
           ``SHORT_LIST_SHARE`` x ``budget`` characters (cases read together), with the code
           blocks inside its steps; the code block or table right after the passage (the one
           its last sentence introduces) follows whole (one longer than
           ``MAX_CODE_CHARACTERS`` is named, "(The code is in [n].)"), then the
           ``LEAD_AFTER_BLOCK`` sentences after that block, which say what it shows ("To
           resolve, install a different edition." after an error message; with the block they
           introduce, counted against ``budget``); a table row of a
           document that is all tables, read with its header ("team: search, on-call lead:
           Ana"), is quoted alone, and another row of its table only when it holds a word of
           the question the rows quoted do not ("search and billing"); a short list the
           passage's last sentence introduces ("... the following directories:") follows it as a
           list (a support's list that does not fit is named, "(The list is in [n].)");
        2. support: passages around the next best sentences, best first, each with the block
           its last sentence introduces, while they stay within ``budget`` characters (a
           support's block counts; one that does not fit is named); a sentence scores as a
           support when its score reaches ``SUPPORT_CUTOFF`` x the lead's and its own score
           (without the rank weight) ``SUPPORT_OWN_CUTOFF`` x the lead's own;
        3. "More in [n]" naming the pages kept and not quoted that hold a sentence a support could be
           (its own score at least ``SUPPORT_OWN_CUTOFF`` x the lead's own), best first; none when there
           is no such page (a quoted page is cited where it is quoted).

        A passage from a section whose heading names an identifier in inline code (a reference
        page's "#### `net.retry`", then "Type: integer, Default: 3") starts with that heading
        ("`net.retry`: ...") when the passage does not name it, once per section.

        A sentence's score is :meth:`score_units`' (read under its heading) plus ``doc_prior``
        x its document's rank weight (the search ranked the document with its whole context),
        plus ``QUANTITY_BONUS`` when the question asks for an amount (a bound or a precision too: "the
        largest value", "how exact") and the sentence states one. A sentence pointing elsewhere ("See
        `LMOVE` for more information.", :func:`graphs.signals.is_pointer`) never leads while another
        sentence is there, and is not quoted as the sentence before one, nor after one (a passage
        ends before it, and the budget goes to the next passage). A question asking whether
        (:func:`graphs.signals.asks_yes_no`: "can I run it on FreeBSD?") adds ``VERDICT_BONUS`` to a
        sentence saying what is not so or cannot be done (:func:`graphs.signals.states_verdict`) that
        holds one of its words, or sits under a heading that does.

        Args:
            questions: the question variants scored against (the message first).
            docs: the graded documents, best first.
            budget: characters of quoted text (the lead's code blocks and tables come on top).
            focus: terms a follow-up adds to the thread's question ("and sick leave?"):
                the lead must hold one when any sentence does, so the answer is about
                what was asked now, not about the earlier subject; and then a support from
                another document than the lead's and the first must hold one too (the thread's
                earlier words bring in lower pages' sentences about the earlier subject).
            neighbours, before: sentences quoted after / before each chosen one.
            doc_prior: weight of the document's rank.
            lead_weights: weights of :data:`LEAD_FEATURES`; when given (default :data:`LEAD_WEIGHTS`),
                the lead is the sentence scoring highest by them (:func:`lead_features`) among those
                that may lead, and the supports keep the order and cutoffs above. Empty (the default,
                ``LEAD_WEIGHTS`` is None): the rules above choose it. ``bench/fit_lead.py`` fits and
                measures them.

        Returns:
            The answer, or ``""`` when no sentence scores above zero.
        """
        neighbours = NEIGHBOURS if neighbours is None else neighbours
        before = BEFORE if before is None else before
        lead_after = LEAD_AFTER if lead_after is None else lead_after
        lead_before = LEAD_BEFORE if lead_before is None else lead_before
        doc_prior = DOC_PRIOR if doc_prior is None else doc_prior
        units = self.doc_units(docs, short_items=True)  # a short step is quoted with its list
        headings = self._headings(docs, units)
        scored = self.score_units(questions, units, headings)
        weights = LEAD_WEIGHTS if lead_weights is None else lead_weights
        ranked: dict[tuple[int, int], float] = {}  # the fitted lead score of each unit
        if weights:
            cosine, under, _ = self.unit_signals(questions, units, headings)
            values = lead_features(questions, units, headings, cosine, under) @ np.asarray(weights, dtype=np.float64)
            ranked = {(u.doc, u.pos): float(v) for u, v in zip(units, values, strict=True)}
        quantity = bool(questions) and signals.asks_for_quantity(questions[0])
        yes_no = bool(questions) and signals.asks_yes_no(questions[0])
        set_up = bool(questions) and sections.asks_to_set_up(questions[0])
        asked = {t for q in questions for t in signals.terms(q)}
        coded = {
            (u.doc, u.pos)
            for u in units
            if questions and not u.heading and signals.code_share(questions[0], u.text) == 1.0
        }
        labelled, off = label_match(questions[0], units, docs) if questions and LABEL_BONUS else ({}, set())
        own: dict[tuple[int, int], float] = {}  # each unit's score without its document's rank weight
        for sc, head in zip(scored, headings, strict=True):
            own[(sc.unit.doc, sc.unit.pos)] = sc.score
            sc.score += doc_prior * (1.0 / (1 + sc.unit.doc))
            if quantity and not sc.unit.code and signals.states_quantity(sc.unit.text):
                sc.score += QUANTITY_BONUS  # "how many days": the sentence with the number
            if (sc.unit.doc, sc.unit.pos) in coded:
                sc.score += CODE_BONUS  # "what does AB-403 mean?": the row or sentence naming AB-403
            sc.score += LABEL_BONUS * labelled.get((sc.unit.doc, sc.unit.pos), 0)  # "the business plan": its row
            if sc.unit.reply and labelled.get((sc.unit.doc, sc.unit.pos), 0) > 0:
                # the question an FAQ entry's heading asks: its answer opens with the yes, the no or the figure
                # ("Yes, with a read-only link."), which shares few words with the question, then says how
                sc.score += LABEL_BONUS
            if (
                yes_no
                and not sc.unit.code
                and signals.states_verdict(sc.unit.text)
                and asked & signals.terms(f"{head} {sc.unit.text}")
            ):
                sc.score += VERDICT_BONUS  # "can I run it on FreeBSD?": "FreeBSD is **NOT** supported"
        by_key = {(sc.unit.doc, sc.unit.pos): sc for sc in scored}
        # a table's rows are quoted in a document that is all tables (a spreadsheet, a rota): a
        # page with prose is quoted by its sentences, a table following the one that leads to it
        # (its rows, whose header words recur in every row, outranked the page's answer)
        written = {u.doc for u in units if not u.code and not u.heading and u.row < 0}
        # ... except a row that answers on its own ("who owns billing-api?" in a table of 35 services)
        answering = answering_rows(units, asked)
        # ... and rows sharing the value asked about ("which services does team-gamma own?"): their table
        shared = shared_rows(units, asked, docs)
        answering |= set(shared)
        answering |= {(u.doc, u.pos) for u in units if u.row >= 0 and (u.doc, u.pos) in coded}  # the code's row
        answering |= {(u.doc, u.pos) for u in units if u.row >= 0 and labelled.get((u.doc, u.pos), 0) > 0}
        prose = sorted(
            (
                sc
                for sc in scored
                if not sc.unit.code
                and not sc.unit.heading
                and not sc.unit.short
                and sc.score > 0
                and not (sc.unit.row >= 0 and sc.unit.doc in written and (sc.unit.doc, sc.unit.pos) not in answering)
            ),
            key=lambda sc: -sc.score,
        )
        # "See `LMOVE` for more information." answers nothing: it leads only when no other sentence is there
        pointers = [sc for sc in prose if signals.is_pointer(sc.unit.text)]
        prose = [sc for sc in prose if sc not in pointers] or pointers
        # "how do I install it?": how to remove it answers the opposite question, though it shares every word but
        # one; it is quoted only when nothing else is there (graphs.actions)
        action = actions.asked_action(questions[0]) if questions else None
        undoing = {
            (u.doc, u.pos)
            for u, h in zip(units, headings, strict=True)
            if action and not u.code and not u.heading and actions.undoes(action, u.text, h.split(" > ")[-1])
        }
        prose = [sc for sc in prose if (sc.unit.doc, sc.unit.pos) not in undoing] or prose
        if not prose:
            return ""
        focus_terms = {t for f in focus for t in signals.terms(f)}
        section_words = {
            (u.doc, u.pos): signals.terms(h.split(" > ")[-1]) for u, h in zip(units, headings, strict=True)
        }
        # how a sentence is about the follow-up's subject: a focus term among its words; when no sentence
        # holds one, also the start of one of its words ("sick" in "sickness") or its section heading's
        # ("and sick leave?": "After four days, send a doctor's note" under "Sick leave"). Only then: the
        # heading put a whole section ahead of the sentence naming what was asked ("Holiday" over the one
        # sentence with "holiday" on another page).
        widened = False

        def on_subject(u: Unit) -> bool:
            words = signals.terms(u.text)
            if not widened:
                return bool(focus_terms & words)
            words |= section_words.get((u.doc, u.pos), set())
            return any(w == t or (len(t) >= FOCUS_PREFIX and w.startswith(t)) for t in focus_terms for w in words)

        on_focus = False  # the lead holds a word the follow-up asks about now
        if focus_terms:
            with_focus = [sc for sc in prose if on_subject(sc.unit)]
            if not with_focus:
                widened = True
                with_focus = [sc for sc in prose if on_subject(sc.unit)]
            if with_focus:  # the follow-up's own subject leads
                prose = with_focus + [sc for sc in prose if sc not in with_focus]
                on_focus = True
        top = prose[0].score
        lead_own = own[(prose[0].unit.doc, prose[0].unit.pos)]
        if ranked:  # the fitted ranker picks the lead among the same sentences; supports keep their order
            may_lead = prose[: len(with_focus)] if on_focus else prose
            best = max(may_lead, key=lambda sc: ranked[(sc.unit.doc, sc.unit.pos)])
            prose = [best] + [sc for sc in prose if sc is not best]
        lead_key = (prose[0].unit.doc, prose[0].unit.pos)
        parts: list[tuple[int, str]] = []  # (document, rendered passage or block)
        used: set[tuple[int, int]] = set()
        quoted: set[str] = set()
        size = 0

        def page_of(doc: int) -> str:
            return str(docs[doc].get("location") or doc)

        def unit_at(doc: int, pos: int) -> Unit | None:
            found = by_key.get((doc, pos))
            return found.unit if found else None

        def norm(text: str) -> str:
            return " ".join(text.split()).lower()

        # (file, header row) -> the words of its rows quoted: a long table comes in several chunks,
        # each starting with the header row, in one document or in several
        table_terms: dict[tuple[str, str], set[str]] = {}

        def table_of(u: Unit) -> tuple[str, str]:
            table = u if u.code else by_key[(u.doc, u.row)].unit
            return str(docs[u.doc].get("location") or u.doc), table.text.split("\n", 1)[0]

        def pieces_of(block: Unit) -> int:
            """How many pieces (one per chunk, each starting with the header row) the table ``block`` is in."""
            head = block.text.split("\n", 1)[0]
            return sum(1 for x in units if x.doc == block.doc and x.code and x.text.split("\n", 1)[0] == head)

        def block_after(x: Unit | None) -> Unit | None:
            """The code block or table right after the sentence or list ``x`` (the one it
            introduces: "Run the following command in all etcd pods." and its command), if not
            quoted yet."""
            if x is None or x.heading or x.code or x.row >= 0:  # a table's row is its own answer
                return None
            block = unit_at(x.doc, x.pos + 1)
            return block if block is not None and block.code and (block.doc, block.pos) not in used else None

        # (doc, pos) -> the heading the unit sits under (the last part of a document's heading path)
        section_of = {(x.doc, x.pos): h.split(" > ")[-1].strip() for x, h in zip(units, headings, strict=True)}
        named: set[tuple[int, str]] = set()  # (doc, heading) put before a passage already
        # where each passage is in ``parts``: (index, n, doc, section heading, its first and last units' positions)
        starts: list[tuple[int, int, int, str, int, int]] = []
        kinds: list[str] = []  # for each passage, the sub-heading saying what its items are (:func:`_category`)

        def introduces_list(x: Unit, nxt: Unit, lead: bool = False) -> bool:
            """``x`` ends with ":" and ``nxt`` starts a short list ``x`` is not in: the list it introduces.
            The ``lead`` passage's list may fill the budget: "the backup copies the following items:" then
            three of its four items reads as if the backup copied three things."""
            return (
                LIST_AFTER_INTRO
                and bool(nxt.item)
                and nxt.list != x.list
                and x.text.rstrip().endswith(":")
                and self._list_size(units, nxt) <= budget * (1.0 if lead else SHORT_LIST_SHARE)
            )

        for n, seed in enumerate(prose):
            if n and (seed.score < top * SUPPORT_CUTOFF or size >= budget):
                break
            u = seed.unit
            if n and own[(u.doc, u.pos)] < lead_own * SUPPORT_OWN_CUTOFF:
                continue  # its page's rank carried it this far, not what it says
            if n and (u.doc, u.pos) in off and labelled.get(lead_key, 0) > 0:
                continue  # "install on ubuntu": the Linux steps lead, the macOS ones answer another question
            if n and labelled.get(lead_key, 0) > 0 and page_of(u.doc) != page_of(lead_key[0]):
                continue  # the entry the question names answers it ("Unlimited."): another page's sentence pads it
            if n and on_focus and u.doc not in (0, prose[0].unit.doc) and not on_subject(u):
                continue  # "and for contractors?": a lower page's sentence not about contractors pads the answer
            if (u.doc, u.pos) in used or norm(u.text) in quoted or (n and (u.doc, u.pos) in undoing):
                continue
            seen = table_terms.get(table_of(u)) if u.row >= 0 else None
            if seen is not None and not (asked & signals.terms(u.text)) - seen:
                continue  # another row of a table quoted already, adding none of the question's words
            numbered = self._numbered(units, u)
            # the lead's list may fill the budget: "half pay for the next 10 days" and the item after it, then
            # the first item and the sentence introducing the list as supports, read as a list shuffled
            # ... unless the question names the lead's item ("the acknowledge time for p2"): that item answers alone
            whole_list = not n and labelled.get((u.doc, u.pos), 0) <= 0
            short_list = u.list >= 0 and self._list_size(units, u) <= budget * (1.0 if whole_list else SHORT_LIST_SHARE)
            rows, group = shared.get((u.doc, u.pos), ("", []))
            if rows and n and size + len(rows) > budget:
                continue  # the rows sharing the value asked about are quoted together or not at all
            if rows:  # the rows sharing the value asked about
                passage = [(u.doc, rows), (u.doc, f"(The rows that match; the whole table is in [{u.doc + 1}].)")]
                keys = {(x.doc, x.pos) for x in group}
                last = u.pos
                table_terms.setdefault(table_of(u), set()).update(t for x in group for t in signals.terms(x.text))
            elif numbered or short_list:  # steps, or a short bulleted list (a table of cases): whole, as a list
                # "how do I set up X?" quoting the list of a procedure's first step: from its first item
                from_start = set_up and sections.is_first_step(self._heading_of(units, u, docs))
                pieces, keys, rest = self._render_list(units, u, budget, from_start, leave_out=undoing)
                if n and size + sum(len(p) for p in pieces) > budget:
                    continue
                passage = [(u.doc, p) for p in pieces]
                passage += [(u.doc, f"The steps go on in [{u.doc + 1}].")] if rest else []
                text = pieces[0]
                intro = unit_at(u.doc, min(keys)[1] - 1)
                if (
                    intro is not None
                    and not intro.code
                    and not intro.heading
                    and intro.list != u.list
                    and intro.text.rstrip().endswith(":")
                    and (intro.doc, intro.pos) not in used
                ):  # the sentence the list completes ("Requests are approved when:") reads first
                    passage[0] = (u.doc, f"{intro.text}\n{text}")
                    keys.add((intro.doc, intro.pos))
                last = max(keys)[1]
            else:
                para = [
                    x
                    for x in units
                    if x.doc == u.doc and not x.code and (x.para == u.para if u.list < 0 else x.list == u.list)
                ]  # a bullet's list
                at = para.index(u)
                back = before if n else lead_before
                chosen = [  # the sentence before, unless it points elsewhere ("For details, see ...")
                    x
                    for x in para[max(0, at - back) : at]
                    if (x.doc, x.pos) not in used
                    and not x.heading
                    and not signals.is_pointer(x.text)
                    and not ((x.doc, x.pos) in off and (u.doc, u.pos) not in off)  # a sibling's
                    and not ((x.doc, x.pos) in undoing and (u.doc, u.pos) not in undoing)  # the opposite action
                ]
                chosen.append(u)
                pos = u.pos
                listed: Unit | None = None  # a list the passage's last sentence introduces ("... directories:")
                after_seed = 0 if u.row >= 0 else neighbours if n else lead_after  # a row answers alone
                for _ in range(after_seed):  # the next sentences, up to a block
                    nxt = unit_at(u.doc, pos + 1)
                    if nxt is None or nxt.code or nxt.heading or nxt.row >= 0 or (nxt.doc, nxt.pos) in used:
                        break  # a table's row is quoted on its own, never as the next sentence
                    if introduces_list(chosen[-1], nxt, lead=not n):
                        break
                    if _category(nxt, docs[u.doc]) != _category(chosen[-1], docs[u.doc]):
                        break  # "### Don't" after "### Do" (headings too short to be units): another kind of item
                    if signals.is_pointer(nxt.text):
                        break  # "See X for more information." ends what the page says here; the rest is another point
                    if (nxt.doc, nxt.pos) in undoing and (u.doc, u.pos) not in undoing:
                        break  # "To disable it, ..." after "To enable dark mode, ...": the opposite action
                    if (nxt.doc, nxt.pos) in off and (u.doc, u.pos) not in off:
                        # "P2: ..." asked: the next item "P3: ..." is a sibling's, not more of the answer; and a page's
                        # opening sentence goes on into the first of its sibling sections ("## Linux" on "on my mac")
                        break
                    chosen.append(nxt)
                    pos += 1
                after_last = unit_at(u.doc, chosen[-1].pos + 1)
                if after_last is not None and introduces_list(chosen[-1], after_last, lead=not n):
                    listed = after_last
                chosen = [x for x in chosen if norm(x.text) not in quoted]
                if not chosen:
                    continue
                text = _joined(chosen)
                keep = chosen.index(u) + 1 if u in chosen else 1  # the lead keeps its sentence and the one before
                while len(chosen) > (keep if n == 0 else 1) and size + len(text) > budget:  # drop the tail
                    # a list item goes whole or not at all: half a step reads as the whole of it
                    tail = chosen[-1].para if chosen[-1].list >= 0 else None
                    chosen.pop()
                    while tail is not None and len(chosen) > (keep if n == 0 else 1) and chosen[-1].para == tail:
                        chosen.pop()
                    text = _joined(chosen)
                if n and size + len(text) > budget:
                    continue
                keys = {(x.doc, x.pos) for x in chosen}
                if u.row >= 0:
                    table_terms.setdefault(table_of(u), set()).update(signals.terms(u.text))
                quoted |= {norm(x.text) for x in chosen}
                passage = [(u.doc, _lone_item(text))]
                last = chosen[-1].pos
                if listed is not None and chosen[-1].pos == listed.pos - 1 and (listed.doc, listed.pos) not in used:
                    # the list the passage's last sentence introduces, as a list
                    pieces, listed_keys, _ = self._render_list(units, listed, budget, leave_out=undoing)  # short: whole
                    if not n or size + len(text) + sum(len(p) for p in pieces) <= budget:
                        passage = [(u.doc, f"{text}\n{pieces[0]}")] + [(u.doc, p) for p in pieces[1:]]
                        keys |= listed_keys
                        last = max(listed_keys)[1]
                    else:  # a support's list that does not fit is named, as its block would be
                        passage.append((u.doc, f"(The list is in [{u.doc + 1}].)"))
            name = section_of.get(min(keys), "") if HEADING_SUBJECT else ""
            if (
                "`" in name
                and (u.doc, name) not in named
                and not signals.terms(name) <= signals.terms(" ".join(t for _, t in passage))
            ):  # the section's heading names what the passage is about ("`net.retry`"), the passage does not
                head = _lone_item(passage[0][1])
                passage[0] = (u.doc, f"{name}:{chr(10) if _ITEM.match(head) else ' '}{head}")
                named.add((u.doc, name))
            used |= keys
            size += sum(len(t) for _, t in passage)
            opening = unit_at(*min(keys))
            kind = _category(opening, docs[u.doc]) if opening is not None and HEADING_SUBJECT else ""
            kind_terms = signals.terms(kind)
            if not kind or (u.doc, name) in named or (kind_terms and kind_terms <= signals.terms(passage[0][1])):
                kind = ""  # named already ("`net.retry`"), or the passage says it itself ("Fixed a crash ...")
            kinds.append(kind)
            starts.append((len(parts), n, u.doc, section_of.get(min(keys), ""), min(keys)[1], max(keys)[1]))
            parts += passage
            block = block_after(unit_at(u.doc, last))
            if block is not None:  # the block the passage's last sentence introduces goes with it
                shown = _shown_block(block)
                if n and size + len(shown) > budget:  # a support's block counts, and is named when it does not fit
                    shown = _shown_block(block, whole=False)
                elif shown.startswith("|") and pieces_of(block) > 1:
                    # a long table (one piece a chunk) is never shown as its first rows alone: named when
                    # its answering row is quoted already, else its first piece says the table goes on
                    if table_terms.get(table_of(block)) is not None:
                        shown = _shown_block(block, whole=False)
                    else:
                        shown += f"\n\n(The table goes on in [{block.doc + 1}].)"
                parts.append((u.doc, shown))
                size += len(shown) if n else 0
                used.add((block.doc, block.pos))
                if n == 0:  # the lead goes on after its block: the sentences that say what the example shows
                    after: list[Unit] = []
                    pos = block.pos
                    for _ in range(LEAD_AFTER_BLOCK):
                        nxt = unit_at(u.doc, pos + 1)
                        if (
                            nxt is None
                            or nxt.code
                            or nxt.heading
                            or nxt.row >= 0
                            or nxt.list >= 0
                            or (nxt.doc, nxt.pos) in used
                            or norm(nxt.text) in quoted
                            or (nxt.doc, nxt.pos) in undoing
                        ):
                            break
                        after.append(nxt)
                        pos += 1
                    if after:
                        text = " ".join(x.text for x in after)
                        parts.append((u.doc, text))
                        size += len(text)
                        used |= {(x.doc, x.pos) for x in after}
                        quoted |= {norm(x.text) for x in after}
                        block = block_after(after[-1])
                        if block is not None:  # and the block that sentence introduces, counted like a support's
                            shown = _shown_block(block)
                            parts.append((u.doc, shown))
                            size += len(shown)
                            used.add((block.doc, block.pos))
            # a table quoted whole (after its sentence, or in a step): its rows are not quoted again
            used |= {(x.doc, x.pos) for x in units if x.row >= 0 and (x.doc, x.row) in used}
        parts = _in_page_order(parts, starts, kinds)
        out: list[str] = []
        # "where's the dashboard link?": the quoted sentences show their links' words only
        asks_link = bool(questions) and signals.asks_for_link(questions[0])
        pages = {d: web_links(str(docs[d].get("text") or "")) for d, _ in parts} if asks_link else {}  # once a doc
        for doc_i, text in parts:
            is_block = text.startswith(("```", "~~~", "|", "The steps go on", "(The "))
            if asks_link and not is_block:
                text = with_addresses(text, pages[doc_i])
            out.append(text if is_block else f"{text} [{doc_i + 1}]")
        # the pages kept and not quoted that say something of the question (a sentence a support could
        # be), in their rank order, one citation a page: the quoted ones are cited where they are quoted
        # already, and a page of two documents (two sections) is one page
        pages_cited = {docs[d].get("location") or str(d) for d, _ in parts}
        said = {sc.unit.doc for sc in prose if own[(sc.unit.doc, sc.unit.pos)] >= lead_own * SUPPORT_OWN_CUTOFF}
        more: list[int] = []
        for d, doc in enumerate(docs):
            page = doc.get("location") or str(d)
            if page not in pages_cited and d in said:
                pages_cited.add(page)
                more.append(d)
        if more:
            out.append("More in " + ", ".join(f"[{d + 1}]" for d in more) + ".")
        return "\n\n".join(out)

    @staticmethod
    def _headings(docs: Sequence[Doc], units: list[Unit]) -> list[str]:
        """The heading each unit sits under: the last heading unit before it in its document, else
        the document's title (a section's heading path); then ``" > "`` and the heading right above it
        when that one is too short to be a unit (:attr:`Unit.section`: "Uninstall", "Install on Windows")."""
        out: list[str] = []
        current, doc = "", -1
        for u in units:
            if u.doc != doc:
                current, doc = str(docs[u.doc].get("title", "") or ""), u.doc
            if u.heading:
                current = u.text
            # a heading too short to be a unit is read after the one above it, as a heading path
            # ("Setting up Harborlog > Install on Windows"): alone, a runbook's "Impact" or "Meaning"
            # lifted every sentence under it
            out.append(f"{current} > {u.section}" if u.section and u.section != current else current)
        return out

    @staticmethod
    def _list_size(units: list[Unit], u: Unit) -> int:
        """Characters of the list holding ``u`` (its items' text and blocks, about as rendered)."""
        return sum(len(x.text) + 3 for x in units if x.doc == u.doc and x.list == u.list)

    @staticmethod
    def _numbered(units: list[Unit], u: Unit) -> bool:
        """``u`` is part of a step of a numbered list: the step's own sentences, a paragraph going on in
        it, an item of a sub-list under it (a "-" under "2."), read as the step is."""
        if u.list < 0:
            return False
        steps = [x for x in units if x.doc == u.doc and x.list == u.list and x.item and not x.depth and x.pos <= u.pos]
        return bool(steps) and _ordered(steps[-1].item)

    @staticmethod
    def _heading_of(units: list[Unit], u: Unit, docs: Sequence[Doc]) -> str:
        """The heading ``u`` is under: the last heading before it in its document's text, else the
        last part of the document's heading path."""
        above = [x for x in units if x.doc == u.doc and x.heading and x.pos < u.pos]
        if above:
            return max(above, key=lambda x: x.pos).text
        return str(docs[u.doc].get("title") or "").split(" > ")[-1] if u.doc < len(docs) else ""

    @staticmethod
    def _render_list(
        units: list[Unit],
        lead: Unit,
        budget: int,
        from_start: bool = False,
        leave_out: Collection[tuple[int, int]] = (),
    ) -> tuple[list[str], set[tuple[int, int]], bool]:
        """The list holding ``lead`` as Markdown (each step's number or a "-", and its sentences;
        a paragraph without a marker continues its step), with the code blocks and tables inside
        its steps in place (one longer than ``MAX_CODE_CHARACTERS`` named: "(The code is in
        [n].)"), whole when it fits ``budget`` (x 1.5: steps are not cut for a few characters;
        blocks count), else from the lead's step on (from the first with ``from_start``: a set-up
        question wants the procedure from its start) while steps fit. An item of a bulleted list whose
        first unit is in ``leave_out`` (``(doc, pos)``: it does the opposite of what is asked, "- To remove
        it, run ...") is left out; a numbered list's steps are a procedure, all quoted. Returns the pieces
        (runs of steps, and each block apart: a citation goes after prose, never inside a fence), the
        units quoted and whether steps were left out after the last one quoted."""
        members = [x for x in units if x.doc == lead.doc and x.list == lead.list]
        items: list[list[Unit]] = []
        for x in members:
            if x.code and not items:
                continue  # nothing to belong to
            if not x.code and ((x.item and not x.depth) or not items):  # a sub-list's items are part of their step
                items.append([x])
            else:
                items[-1].append(x)
        if not _ordered(items[0][0].item) and any(lead in it for it in items):
            kept = [it for it in items if (it[0].doc, it[0].pos) not in leave_out or lead in it]
            items = kept if kept else items
        lead_item = next(i for i, it in enumerate(items) if lead in it)
        shown = {(b.doc, b.pos): _shown_block(b) for it in items for b in it if b.code}

        def cost(it: list[Unit]) -> int:
            return sum(len(shown[(y.doc, y.pos)]) if y.code else len(y.text) + 1 for y in it) + 3

        whole = sum(cost(it) for it in items)
        first = 0 if whole <= budget * 1.5 or from_start else lead_item
        pieces: list[str] = []
        lines: list[str] = []
        keys: set[tuple[int, int]] = set()
        size = 0
        rest = False
        numbers = {it[0].item for it in items if it[0].item[:1].isdigit()}
        lazy = len(numbers) == 1 and len(items) > 1  # "1." on every step: Markdown numbers them 1, 2, 3
        for at, it in enumerate(items[first:], start=first + 1):
            if keys and size + cost(it) > budget * 1.5:
                rest = True
                break
            marker = re.sub(r"\d+", str(at), it[0].item) if lazy else _shown_marker(it[0].item)
            prose: list[str] = []
            depth = 0
            for y in [*it, None]:
                if y is not None and not y.code and not (y.item and y.depth and prose):
                    prose.append(y.text)
                    continue
                if prose:  # the step's sentences (after a block: its text going on, unmarked)
                    lines.append(_list_line(marker, depth, " ".join(prose)))
                    prose, marker = [], ""
                if y is not None and not y.code:  # an item of a sub-list: a line of its own, under its step
                    prose, marker, depth = [y.text], _shown_marker(y.item), y.depth
                    continue
                if y is not None:  # a block inside the step: a piece of its own
                    if lines:
                        pieces.append("\n".join(lines))
                        lines = []
                    pieces.append(shown[(y.doc, y.pos)])
                    marker = ""
            keys |= {(y.doc, y.pos) for y in it}
            size += cost(it)
        if lines:
            pieces.append("\n".join(lines))
        return pieces, keys, rest


def _in_page_order(
    parts: list[tuple[int, str]], starts: Sequence[tuple[int, int, int, str, int, int]], kinds: Sequence[str] = ()
) -> list[tuple[int, str]]:
    """``parts`` (``(doc, text)``: the answer's passages and blocks, best first) with the passages of
    one section together, in the order its page gives them, where the section's best passage was:
    "These entitlements are pro-rated ..." before "The pro-rated amount is calculated ...", which
    says how, whichever scored higher. The lead's passage stays first, the other passages of its
    section right after it. A passage that goes on where the one before it ends (the next item of
    the same list) is joined to it: a list is never split by a sentence from elsewhere. The first
    passage shown of a sub-heading saying what its items are (``kinds``) opens with it in bold
    ("**Removed**: The legacy REST API."), once a page: an item of "### Removed" is never read as one of
    "### Added" (nor joined to the list before it, which sits under another one).

    Args:
        parts: the rendered passages and their blocks, in the order chosen.
        starts: for each passage, ``(index of its first part, n (0: the lead), doc, section
            heading, positions of its first and last units in doc)``, in the order of ``parts``.
        kinds: for each passage, the sub-heading to show before it (:func:`_category`), "" for
            none; empty: none for any.
    """
    if not starts:
        return parts
    bounds = [s[0] for s in starts] + [len(parts)]
    segments = [parts[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
    groups: dict[tuple[int, str], list[int]] = {}
    for i, (_, _, doc, section, _, _) in enumerate(starts):
        groups.setdefault((doc, section), []).append(i)
    order: list[int] = []
    for i, (_, _, doc, section, _, _) in enumerate(starts):
        if i in order:
            continue
        members = groups[(doc, section)]
        lead = [j for j in members if starts[j][1] == 0]
        order += lead + sorted((j for j in members if j not in lead), key=lambda j: starts[j][4])
    out = list(parts[: bounds[0]])
    previous = -1
    shown: set[tuple[int, str]] = set()
    for i in order:
        segment = list(segments[i])
        kind = kinds[i] if i < len(kinds) else ""
        if kind and (starts[i][2], kind) not in shown:
            shown.add((starts[i][2], kind))
            doc, text = segment[0]
            segment[0] = (doc, f"**{kind}**:{chr(10) if _ITEM.match(text) else ' '}{text}")
        if (
            previous >= 0
            and len(segments[previous]) == 1
            and starts[previous][2] == starts[i][2]
            and starts[i][4] == starts[previous][5] + 1
            and _ITEM.match(segment[0][1])
            and not segment[0][1].startswith(("```", "~~~", "|", "(The "))
        ):  # the list's next items: one passage with the items before them
            out[-1] = (out[-1][0], f"{out[-1][1]}\n{segment[0][1]}")
            segment = segment[1:]
        out += segment
        previous = i
    return out


# a heading that names what the items under it are ("Added", "Known issues", "Don't"), not a sentence
CATEGORY_WORDS = 4


def _category(u: Unit, doc: Doc) -> str:
    """The sub-heading ``u`` sits under when it says what the items under it are and the answer would
    not show it: a short heading (at most ``CATEGORY_WORDS`` words, no sentence: "Removed", "Known
    issues", "Don't") below the section's own, a ``###`` or deeper in the text (a release's "### Fixed"
    under "## 3.10.0", "### Do" under "## Subject line"), or the last part of a heading path of three
    or more (``"Changelog > 2.0.0 > Removed"``) for a document whose text holds no heading over ``u``.
    Quoted without it, "The legacy REST API." under "### Removed" reads as new in 2.0. "" for any other
    unit: a page's own sections ("## Installation") are what the search found, their headings name the
    subject, not what the items are; a heading asking a question (:func:`heading_asks`) is a sentence."""
    if u.heading or u.code:
        return ""
    if u.path:
        level, name = u.path[-1]
        if level < 3:
            return ""
    else:
        parts = [p.strip() for p in str(doc.get("title") or "").split(" > ")]
        if len(parts) < 3:
            return ""
        name = parts[-1]
    words = name.split()
    if not words or len(words) > CATEGORY_WORDS or name.rstrip().endswith((".", "?", "!", ":")) or "`" in name:
        return ""
    if heading_asks(name):  # an FAQ entry's question ("Where are backups stored"): its reply answers it
        return ""
    return name


def _joined(chosen: Sequence[Unit]) -> str:
    """The text of consecutive prose units ``chosen`` (one document, in order) as quoted: the
    sentences of a paragraph or of one list item on one line, each list item on a line of its own
    opening with its marker ("- " for a bullet, its number for a step), as Slack, Discord and a
    console show a Markdown list; the items run into one line read as one long sentence. One item
    alone keeps its marker here: a passage going on with the list's next items is joined to it
    (:func:`_in_page_order`), one left alone reads as :func:`_lone_item` says."""
    lines: list[str] = []
    prev: Unit | None = None
    for x in chosen:
        if x.list >= 0 and x.item:  # a list item's first sentence starts its line
            lines.append(_list_line(_shown_marker(x.item), x.depth, x.text))
        elif lines and x.list < 0 and prev is not None and prev.list >= 0:  # the paragraph after a list
            lines.append(f"\n{x.text}")
        elif lines:  # the item's next sentence, or a paragraph continuing it
            lines[-1] += f" {x.text}"
        else:
            lines.append(x.text)
        prev = x
    return "\n".join(lines)


# an item that reads as a sentence: a capital (or code, a quote, emphasis) first, a stop last
_SENTENCE_ITEM = re.compile(r"^[A-Z0-9`\"'(*\[_].*[.!?][\"')\]*_]*$", re.S)


def _lone_item(text: str) -> str:
    """A passage (``text``, as :func:`_joined` made it) that is one list item quoted alone, as it reads
    best: its text without the marker when it is a sentence ("Keep every receipt until the claim is
    paid."), else its line with its marker, unindented ("- a travel adapter if your charger has a foreign
    plug"): a fragment without its marker reads as a stray remark, not as one of a list's items. Any other
    passage as it is."""
    m = _ITEM.match(text)
    if "\n" in text or not m:
        return text
    rest = text[m.end() :]
    return rest if _SENTENCE_ITEM.match(rest) else text.lstrip()


def _shown_marker(item: str) -> str:
    """The marker a list item is quoted with: a step's number or letter as written ("2.", "2)", "(b)"), "-"
    for any bullet."""
    return item if _ordered(item) else "-"


def _ordered(item: str) -> bool:
    """The list marker ``item`` numbers a step ("1.", "1)", "(1)", "a.", "(b)"), not a bullet ("-", "*", "+")."""
    return bool(item) and item not in ("-", "*", "+")


def _list_line(marker: str, depth: int, text: str) -> str:
    """A list item's line as quoted: ``marker`` and ``text``, indented three spaces a level of nesting
    (``depth``), past the marker of the item it sits under ("1. " or "- "), so a sub-list's items read as
    parts of their step, as Markdown shows them; ``marker`` "" (a step's text going on after a block):
    the text alone."""
    return f"{'   ' * depth}{marker} {text}" if marker else text


def _shown_block(block: Unit, whole: bool = True) -> str:
    """A code block or table as quoted: whole (``whole`` and at most ``MAX_CODE_CHARACTERS``
    long), else named with where it is ("(The code is in [2].)"); never cut."""
    if whole and len(block.text) <= MAX_CODE_CHARACTERS:
        return block.text
    return f"(The {'table' if block.text.startswith('|') else 'code'} is in [{block.doc + 1}].)"
