"""Heading-aware Markdown chunking that keeps code and tables intact.

The document is cleaned (:func:`graphs.knowledge.sources.clean_markdown`), parsed into
top-level blocks with markdown-it-py (CommonMark + tables; the parser rich already
uses), and every block's source lines are sliced from the original text, so fenced and
indented code keeps its indentation and tabs byte for byte (LangChain's
MarkdownHeaderTextSplitter strips every line, code included).

Headings h1-h4 form the heading path (the chunk's title); the blocks of a section are
packed into chunks of at most ``chunk_size`` characters. A block longer than that is
split by lines: a fence split in two is closed at the end of one chunk and reopened
(same marker and info string) at the start of the next; a table's header and separator
rows start every chunk that holds its rows; prose lines longer than a chunk go through
LangChain's RecursiveCharacterTextSplitter (with ``chunk_overlap``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from markdown_it import MarkdownIt

from graphs.knowledge.common import Chunk
from graphs.knowledge.sources import FENCE_RE, clean_markdown
from graphs.markdown_links import plain_links

if TYPE_CHECKING:  # loaded when a document is split, not to list sources (LangChain: ~0.2 s)
    from langchain_text_splitters import RecursiveCharacterTextSplitter

SPLITTER_ID = "md-blocks-6"
"""Names this chunking; stored in the manifest so a change of it rebuilds the index.
3: headings, scripts and link-only lines read with whole links (:mod:`graphs.markdown_links`);
4: admonitions keep their kind as a label of their text ("Warning: ..."), reStructuredText's
``.. note::`` directives included (:func:`graphs.knowledge.sources.clean_markdown`);
5: a paragraph longer than a chunk is cut between sentences, not at a hard-wrapped line;
6: an HTML definition list's question term is written in bold on its own line above its reply."""

_MD = MarkdownIt("commonmark", {"html": True}).enable("table").disable(["inline", "text_join"])  # blocks only
_MAX_HEADING_LEVEL = 4


@dataclass
class _Block:
    kind: str  # "fence", "code_block", "table" or another markdown-it block type
    lines: list[str]

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


# inline HTML a heading may hold around its words (a permalink, an anchor, code, emphasis)
_HEADING_HTML = re.compile(r"</?(?:a|span|code|em|strong|b|i|img|sup|sub|small|br|kbd|mark)\b[^<>]*>", re.I)


def heading_text(source: str) -> str:
    """A heading's words on one line: links and images as their text (a permalink
    ``[¶](#x)`` as its sign), its inline HTML tags gone, white space collapsed."""
    return " ".join(_HEADING_HTML.sub(" ", plain_links(source)).split())


def _sections(text: str) -> list[tuple[list[str], list[_Block]]]:
    """``(heading path, blocks)`` per section, in document order."""
    lines = text.split("\n")
    out: list[tuple[list[str], list[_Block]]] = []
    headings: dict[int, str] = {}
    blocks: list[_Block] = []
    tokens = _MD.parse(text)
    for i, tok in enumerate(tokens):
        if tok.level != 0 or tok.map is None or tok.nesting == -1:
            continue
        start, end = tok.map
        if tok.type == "heading_open" and int(tok.tag[1:]) <= _MAX_HEADING_LEVEL:
            if blocks:
                out.append(([headings[k] for k in sorted(headings)], blocks))
                blocks = []
            level = int(tok.tag[1:])
            headings = {k: v for k, v in headings.items() if k < level}
            headings[level] = heading_text(tokens[i + 1].content)
            continue
        if tok.type == "hr":
            continue
        body = lines[start:end]
        while body and not body[-1].strip():
            body.pop()
        while body and not body[0].strip():
            body.pop(0)
        if body:
            kind = "table" if tok.type == "table_open" else tok.type.removesuffix("_open")
            blocks.append(_Block(kind, body))
    if blocks:
        out.append(([headings[k] for k in sorted(headings)], blocks))
    return out


def split_markdown(text: str, file: str, file_hash: str, chunk_size: int, overlap: int, title: str = "") -> list[Chunk]:
    """Split one Markdown or text file into heading-aware chunks (see the module docstring).

    Args:
        text: the whole file.
        file: its display path (stored in each chunk).
        file_hash: sha256 of its bytes.
        chunk_size: the longest chunk, in characters (a single line of code or a table
            row longer than that is cut into pieces of this size).
        overlap: characters shared by consecutive pieces of a long prose line.
        title: the document's title from its source (a web page's ``<title>``, a PDF's
            metadata): the first element of every heading path when the text has no front
            matter title.

    Returns:
        The chunks in document order.
    """
    title_prefix, body = clean_markdown(text)
    title_prefix = title_prefix or " ".join(title.split())
    if not body.strip():
        return []
    from langchain_text_splitters import Language, RecursiveCharacterTextSplitter

    prose = RecursiveCharacterTextSplitter.from_language(
        Language.MARKDOWN, chunk_size=chunk_size, chunk_overlap=min(overlap, chunk_size // 2)
    )
    chunks: list[Chunk] = []
    for path, blocks in _sections(body):
        if title_prefix and (not path or path[0] != title_prefix):
            path = [title_prefix, *path]
        title = " > ".join(path)
        current = ""
        for block in blocks:
            for piece in _fit(block, chunk_size, prose):
                if current and len(current) + 2 + len(piece) > chunk_size:
                    chunks.append(Chunk(file, title, current, file_hash))
                    current = piece
                else:
                    current = f"{current}\n\n{piece}" if current else piece
        if current:
            chunks.append(Chunk(file, title, current, file_hash))
    return [c for c in chunks if c.text.strip()]


def _fit(block: _Block, size: int, prose: RecursiveCharacterTextSplitter) -> list[str]:
    """``block`` as pieces of at most ``size`` characters."""
    text = block.text
    if len(text) <= size:
        return [text]
    if block.kind == "table" and len(block.lines) > 2:
        return _pack_lines(block.lines[2:], size, prose, header=block.lines[:2], code=True)
    if block.kind == "paragraph":
        return _pack_sentences(text, size, prose)
    return _pack_lines(block.lines, size, prose, code=block.kind in ("fence", "code_block"))


# where a sentence ends and the next begins: its stop (and a closing quote or bracket), white space
# (a hard-wrapped line's break included), then what opens a sentence; "e.g. the" does not match
_SENTENCE_GAP = re.compile(r"[.!?][\"'”’)\]]*\s+(?=[A-Z0-9`*_\"'“‘(\[<])")


def _pack_sentences(text: str, size: int, prose: RecursiveCharacterTextSplitter) -> list[str]:
    """A prose paragraph longer than ``size`` characters as pieces of whole sentences, each at most
    ``size`` characters, sliced from ``text`` as written (its hard-wrapped lines kept): a chunk cut
    at a line break began mid-sentence ("`/threadwise reindex source:NAME`; names matched ...")
    and the one before ended mid-sentence, and an answer quoting either read as a fragment. A
    sentence longer than ``size`` alone is packed by its lines (:func:`_pack_lines`)."""
    bounds = [0, *(m.end() for m in _SENTENCE_GAP.finditer(text)), len(text)]
    pieces: list[str] = []
    start = 0  # where the piece being packed begins in ``text``
    for end, following in zip(bounds[1:], bounds[2:] + [len(text)], strict=True):
        if end == len(text) or len(text[start:following].strip()) > size:
            piece = text[start:end].strip()
            if len(piece) <= size:
                pieces.append(piece)
            else:
                pieces.extend(_pack_lines(piece.split("\n"), size, prose))
            start = end
    return [p for p in pieces if p]


def _pack_lines(
    lines: list[str],
    size: int,
    prose: RecursiveCharacterTextSplitter,
    *,
    header: list[str] | None = None,
    code: bool = False,
) -> list[str]:
    """Pack ``lines`` into pieces of at most ``size`` characters, never breaking a line
    unless it alone is too long; ``header`` lines start every piece; a fence open at a
    cut is closed and reopened."""
    header = header or []
    pieces: list[str] = []
    cur: list[str] = list(header)
    size_of_cur = [sum(len(x) + 1 for x in cur)]  # characters of "\n".join(cur) + 1
    base = len(header)  # lines at the start of ``cur`` that are not new content
    opening: str | None = None  # the line that opened the current fence
    closing = ""  # the marker that closes it

    def length(extra: list[str]) -> int:
        return size_of_cur[0] + sum(len(x) + 1 for x in extra) - 1

    def add(line: str) -> None:
        cur.append(line)
        size_of_cur[0] += len(line) + 1

    def flush() -> None:
        nonlocal cur, base
        if opening and cur[-1] is opening and len(cur) - 1 > base:  # a fence opened last: move it on
            pieces.append("\n".join(cur[:-1]))
        elif len(cur) > base:
            pieces.append("\n".join(cur + ([closing] if opening else [])))
        cur = list(header) + ([opening] if opening else [])
        size_of_cur[0] = sum(len(x) + 1 for x in cur)
        base = len(cur)

    for line in lines:
        tail = [closing] if opening else []
        if len(cur) > base and length([line, *tail]) > size:
            flush()
        if length([line, *tail]) > size:  # too long even for a piece of its own: cut it
            room = max(size - length([*tail, ""]), 16)
            parts = _cut(line, room, prose, code or opening is not None)
            for part in parts[:-1]:
                add(part)
                flush()
            line = parts[-1]
        add(line)
        m = FENCE_RE.match(line)
        if m and opening is None and not (m.group(2)[0] == "`" and "`" in m.group(3)):
            opening, closing = line, m.group(1) + m.group(2)
        elif (
            m
            and opening is not None
            and m.group(2)[0] == closing.lstrip(" \t>")[0]
            and len(m.group(2)) >= len(closing.lstrip(" \t>"))
            and not m.group(3).strip()
        ):
            opening, closing = None, ""
    if len(cur) > base:
        pieces.append("\n".join(cur + ([closing] if opening else [])))
    return pieces


def _cut(line: str, size: int, prose: RecursiveCharacterTextSplitter, code: bool) -> list[str]:
    """A line too long for one chunk: code is cut every ``size`` characters, prose by the
    recursive splitter (paragraph, sentence, word)."""
    if not code:
        parts = [p for p in prose.split_text(line) if p.strip()]
        if parts and all(len(p) <= size for p in parts):
            return parts
    return [line[i : i + size] for i in range(0, len(line), size)] or [line]


def index_text(chunk: Chunk) -> str:
    """Text that is embedded: file path words, heading path, then the chunk."""
    path_words = re.sub(r"[/_.\-]+", " ", chunk.file.rsplit(".", 1)[0])
    return f"{path_words}\n{chunk.title}\n{chunk.text}"


def fence_indented_code(text: str) -> str:
    """``text`` (Markdown) with each indented code block (CommonMark: four spaces or a tab,
    after a blank line, not a list item's continuation: markdown-it decides) written as a
    fenced block, dedented, blank lines inside kept; code inside a block quote is left as
    written. Code then reads as code wherever only
    fences are recognised (extractive answers, citation renumbering, chat rendering): its
    lines stay lines and ``[123]`` in it is not taken for a citation."""
    if "    " not in text and "\t" not in text:
        return text  # no indentation of four columns anywhere: no indented code (and no parse per answer)
    blocks = [tok.map for tok in _MD.parse(text) if tok.type == "code_block" and tok.map]
    if not blocks:
        return text
    lines = text.split("\n")
    out: list[str] = []
    done = 0
    for start, end in blocks:
        body = lines[start:end]
        while body and not body[-1].strip():
            body.pop()
        if start < done or not body or any(line.lstrip().startswith(">") for line in body):
            continue  # overlapping, empty, or inside a block quote (its lines carry the quote's ">")
        indent = min(len(line) - len(line.lstrip()) for line in body if line.strip())
        out += lines[done:start]
        out += ["```", *(line[indent:] if line.strip() else "" for line in body), "```"]
        out += lines[start + len(body) : end]  # the blank lines after it
        done = end
    out += lines[done:]
    return "\n".join(out)
