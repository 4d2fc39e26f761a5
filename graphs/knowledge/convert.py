"""Documents of any supported format as Markdown: the one conversion every connector uses.

- Markdown, MDX and plain text are decoded by their byte-order mark (UTF-8, UTF-16, UTF-32),
  else as UTF-8, else by detection (:func:`_detect`: Windows-1252 when it fits as well as
  what charset-normalizer found); bytes that are not text (NUL bytes, or mostly control
  characters: a binary file named ``.md``) are refused.
- HTML goes through :func:`html_to_markdown`: navigation chrome (``nav``, ``header``,
  ``footer``, ``aside``, scripts, forms) and headings' permalinks (``¶``) are dropped, every
  link becomes one whole Markdown link or its words (:func:`_plain_links`),
  ``main``/``article`` is preferred, and
  markdownify writes ATX headings, pipe tables and fenced code (its language from a
  ``language-*`` class). The encoding comes from a byte-order mark, the HTTP header, then
  ``<meta charset>``, then UTF-8, then detection as for text, so non-UTF-8 pages read correctly.
- PDF and PPTX go through Microsoft's markitdown (pdfminer.six, python-pptx under it),
  DOCX through python-docx (:func:`_docx` says why), XLSX through openpyxl (:func:`_xlsx`
  says why): headings and tables of office files are kept; a PDF gives its text in reading
  order, its printed lines joined into paragraphs and its larger type as headings (:func:`_pdf`;
  see docs/knowledge-base.md for why markitdown and pdfminer and not docling).
- DOCX, PPTX and XLSX are zip archives: :func:`check_zip` refuses one that would expand too
  far (a zip bomb: over 200 MB in all, or a part over 100:1) from its central directory,
  before any converter opens it.
- Small documents that expand in their converter have limits of their own: HTML nesting
  (:data:`MAX_HTML_DEPTH`), a sheet's cells (:data:`MAX_SHEET_CELLS`), a Word table's spans
  (:data:`MAX_TABLE_COLUMNS`), a PDF's inflated streams (:data:`MAX_PDF_INFLATED_BYTES`); and
  PDF, office files and large HTML are converted in a worker process with a time and memory
  limit (:data:`MAX_CONVERT_SECONDS`, :data:`MAX_CONVERT_MEMORY_BYTES`), so a document past
  them costs that document only.

Template syntax (Liquid/Jinja tags, Hugo shortcodes, MDX imports and components) is removed
by :func:`graphs.knowledge.templates.strip_templates` from Markdown, MDX and converted HTML,
here, before the text is split (plain text and office files are left as they are).
"""

from __future__ import annotations

import atexit
import io
import logging
import os
import re
import threading
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from graphs.file_formats import HTML_SUFFIXES, OFFICE_SUFFIXES, SUPPORTED_SUFFIXES, TEXT_SUFFIXES
from graphs.knowledge.common import display_name
from graphs.knowledge.templates import strip_templates
from graphs.link_targets import MAX_URL_CHARS, drop_long_addresses, usable_address

log = logging.getLogger(__name__)

CONVERTER_VERSION = 9
"""Raised whenever a format's conversion gives other Markdown than before (another
converter, tables or headings written differently): part of :data:`FILE_READERS` and
:data:`HTML_READERS`, so documents read by the older conversion are read again at the next
sync. 1: office files through markitdown; 2: DOCX through python-docx; 3: XLSX through
openpyxl (:func:`_xlsx`); 4: HTML links made whole or dropped (:func:`_plain_links`); 5: and
brackets in their texts and alt texts made safe; 6: a PDF's wrapped lines joined into its
paragraphs, larger type and lone title lines as headings (:func:`_pdf`); 7: links and
images to no address a reader can follow (70,000 characters, malformed, ``data:``) keep only
their words, in HTML here and in every format's Markdown when it is split
(:func:`graphs.knowledge.sources.clean_markdown`: reading every document again splits it
again, and a chunk that comes out the same keeps its vectors); 8: an MDX tab
(``<TabItem label="Python">``) a list item of its label with its content under it
(:func:`graphs.knowledge.templates.strip_templates`); 9: HTML definition lists (a man page's
options) written as Markdown paragraphs when a document is split, for the search as for the
answers (they were converted only when an answer was composed). An index written before
readers were recorded has none: read again."""
FILE_READERS = f"{CONVERTER_VERSION}:{','.join(sorted(SUPPORTED_SUFFIXES))}"
"""What a ``files`` or ``git`` source can read: the conversion's version and every readable
ending. The index keeps it per source (``readers`` in its manifest); when it differs, a file
that was passed over or converted by an older release is read again without a manual
reindex (see :meth:`graphs.knowledge.KnowledgeBase.needs_rebuild`)."""
HTML_READERS = f"{CONVERTER_VERSION}:html"
"""What a ``web`` source can read (its pages are HTML): as :data:`FILE_READERS`."""


class ConversionError(ValueError):
    """A document cannot be converted (the message says why in a few words)."""


@dataclass(frozen=True)
class Converted:
    """A converted document: its title ('' if none) and Markdown text."""

    title: str
    text: str


def kind_of(name: str) -> str | None:
    """``"markdown"``, ``"mdx"``, ``"text"``, ``"rst"``, ``"html"``, ``"pdf"``, ``"docx"``, ``"pptx"``,
    ``"xlsx"`` by the name's ending, or None when it is not supported."""
    suffix = PurePosixPath(name.lower()).suffix
    if suffix in TEXT_SUFFIXES:
        return TEXT_SUFFIXES[suffix]
    if suffix in HTML_SUFFIXES:
        return "html"
    if suffix in OFFICE_SUFFIXES:
        return suffix[1:]
    return None


def convert(data: bytes, name: str, *, content_type: str = "", base_url: str = "") -> Converted:
    """Convert one document to Markdown.

    Args:
        data: the document's bytes.
        name: its file name or URL path (the ending picks the format unless ``content_type``
            says HTML).
        content_type: an HTTP ``Content-Type`` (its charset is honoured for HTML).
        base_url: the page's address, for HTML's relative links.

    Raises:
        ConversionError: the format is not supported, the bytes are not what the name says
            (binary in a text file), the file is damaged or password-protected, or the
            converter failed.
    """
    kind = "html" if "html" in content_type.lower() else kind_of(name)
    if kind is None:
        raise ConversionError(f"unsupported file type {PurePosixPath(name).suffix or '(none)'}")
    # the worker needs POSIX (RLIMIT_AS, select on pipes): elsewhere everything converts here
    if (
        os.name == "posix"
        and kind not in ("markdown", "mdx", "text", "rst")
        and (kind != "html" or len(data) > ISOLATED_HTML_BYTES)
    ):
        if kind in ZIP_KINDS:
            check_zip(data, kind)  # here: a zip bomb costs no round trip to the worker
        return _WORKER.convert(data, kind, content_type, base_url)
    return convert_here(data, kind, content_type, base_url)


def convert_here(data: bytes, kind: str, content_type: str = "", base_url: str = "") -> Converted:
    """:func:`convert` of a document of ``kind`` (:func:`kind_of`) in this process, without
    the time and memory limits of the worker (:mod:`graphs.knowledge.convert_worker` calls it).

    Raises:
        ConversionError: as :func:`convert`.
    """
    if kind in ("markdown", "mdx", "text", "rst"):
        text = decode_text(data)
        return Converted("", strip_templates(text, kind) if kind != "text" else text)
    if kind == "html":
        html = decode_html(data, content_type)
        title, md = html_to_markdown(html, base_url)
        return Converted(title, strip_templates(md, "html"))
    return _office(data, kind)


MAX_CONVERT_SECONDS = 180.0
"""The longest one PDF, office file or large HTML page may take to convert; past it the
worker converting it is killed (and started again for the next document) and the document
gives one problem line. A 5,000-page PDF converts in about 40 s on a loaded machine."""
MAX_CONVERT_MEMORY_BYTES = 2_000_000_000
"""The most memory the conversion worker may take beyond what it holds after importing the
converters (its address space, ``RLIMIT_AS``); a document needing more gives one problem
line. python-docx parses a 200 MB document part (:data:`MAX_UNZIPPED_BYTES`) into an lxml
tree of about 1-1.5 GB."""
ISOLATED_HTML_BYTES = 1_000_000
"""HTML larger than this is converted in the worker too; smaller pages (nearly all) are
converted here, without the cost of passing them to another process."""


class _Worker:
    """One long-lived conversion process (:mod:`graphs.knowledge.convert_worker`), started at
    the first document that needs it and again after it was killed; a lock makes threads take
    turns. Converting in another process costs a few milliseconds per document, and its
    start (imports) about a second once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: Any = None

    def _start(self) -> Any:
        import subprocess
        import sys

        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        return subprocess.Popen(
            [sys.executable, "-m", "graphs.knowledge.convert_worker", str(MAX_CONVERT_MEMORY_BYTES)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            start_new_session=True,  # Ctrl-C in a terminal goes to the bot, which stops the worker
        )

    def _stop(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
            self._proc = None

    def convert(self, data: bytes, kind: str, content_type: str, base_url: str) -> Converted:
        """``data`` converted in the worker.

        Raises:
            ConversionError: as :func:`convert`, or the document took over
                :data:`MAX_CONVERT_SECONDS` or more than :data:`MAX_CONVERT_MEMORY_BYTES`.
        """
        import select

        from graphs.knowledge.worker_messages import read_message, write_message

        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                self._proc = self._start()
            proc = self._proc
            deadline = time.monotonic() + MAX_CONVERT_SECONDS
            try:
                write_message(proc.stdin, (data, kind, content_type, base_url))
                ready, _, _ = select.select([proc.stdout], [], [], max(deadline - time.monotonic(), 0))
                if not ready:
                    self._stop()
                    raise ConversionError(
                        f"stopped: converting this {kind.upper()} took over {MAX_CONVERT_SECONDS:g} s, "
                        "the longest a document may take"
                    )
                status, value = read_message(proc.stdout)
            except (EOFError, BrokenPipeError, OSError):
                self._stop()  # it died: out of memory beyond what Python could report, or killed
                status, value = "memory", ""
            except BaseException:
                self._stop()  # Ctrl-C or another error mid-answer: the pipe holds half a message
                raise
        if status == "ok":
            return value
        if status == "memory":
            raise ConversionError(
                f"stopped: this {kind.upper()} needed more than the {MAX_CONVERT_MEMORY_BYTES / 1e9:g} GB "
                "of memory a document may take to convert"
            )
        raise ConversionError(value)


_WORKER = _Worker()
atexit.register(_WORKER._stop)

_BOMS = (
    (b"\xef\xbb\xbf", "utf-8-sig"),
    (b"\xff\xfe\x00\x00", "utf-32"),
    (b"\x00\x00\xfe\xff", "utf-32"),
    (b"\xff\xfe", "utf-16"),
    (b"\xfe\xff", "utf-16"),
)


def _bom(data: bytes) -> str | None:
    """The encoding a byte-order mark at the start of ``data`` names, or None."""
    return next((enc for mark, enc in _BOMS if data.startswith(mark)), None)


def decode_text(data: bytes) -> str:
    """Text file bytes as str: by their byte-order mark, else UTF-8, else detected
    (:func:`_detect`).

    Raises:
        ConversionError: NUL bytes without a UTF-16/32 mark, or mostly control characters
            (a binary file).
    """
    bom = _bom(data)
    head = data[:65536]
    if b"\x00" in head and bom not in ("utf-16", "utf-32"):
        raise ConversionError("binary content (NUL bytes), not text")
    try:
        text = data.decode(bom or "utf-8-sig")
    except UnicodeDecodeError:
        text = _detect(data)
    sample = text[:20000]
    controls = sum(1 for ch in sample if ord(ch) < 32 and ch not in "\n\r\t\f")
    if sample and controls / len(sample) > 0.05:
        raise ConversionError("binary content (control characters), not text")
    return text.replace("\x00", "")


def _detect(data: bytes) -> str:
    """Bytes that are not UTF-8, decoded by charset-normalizer's guess, except that
    Windows-1252 (the Western European legacy encoding, by far the most common in team
    documents) is taken when it fits as well: on a short German or French text the detector
    finds several single-byte encodings equally good and picks the Baltic or Central European
    one ("÷ffnet" for "öffnet", "crčme" for "crème"). A text in Windows-1250 that happens to
    fit Windows-1252 as well is then misread; such a file is best saved as UTF-8.

    Raises:
        ConversionError: no encoding fits (a binary file).
    """
    from charset_normalizer import from_bytes

    sample = data[:1_000_000]
    best = from_bytes(sample).best()
    if best is None:
        raise ConversionError("binary content (no text encoding fits), not text")
    encoding = best.encoding
    if encoding not in ("cp1252", "ascii", "utf_8"):
        western = from_bytes(sample, cp_isolation=["cp1252"]).best()
        # coherence is the detector's language-likeness (0-1); 0.05 is the spread between
        # equally right single-byte candidates on short texts (measured: 0.625 vs 0.667)
        if western is not None and western.chaos <= best.chaos and western.coherence >= best.coherence - 0.05:
            encoding = "cp1252"
    return data.decode(encoding, errors="replace")


_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_\-:.]+)""", re.I)
_LATIN1_LABELS = {"iso-8859-1", "iso8859-1", "latin1", "latin-1", "l1", "us-ascii", "ascii", "cp819", "iso_8859-1"}


_MAGIC = {
    b"\x89PNG": "a PNG image",
    b"GIF8": "a GIF image",
    b"\xff\xd8\xff": "a JPEG image",
    b"RIFF": "a RIFF file (WebP, WAV, AVI)",
    b"%PDF-": "a PDF",
    b"PK\x03\x04": "a zip archive",
    b"\x1f\x8b": "gzip data",
    b"7z\xbc\xaf": "a 7-Zip archive",
    b"Rar!": "a RAR archive",
    b"\x7fELF": "a program",
    b"OggS": "Ogg media",
    b"ID3": "an MP3",
    b"wOFF": "a font",
    b"wOF2": "a font",
    b"\x00\x00\x01\x00": "an icon",
}


def binary_content(data: bytes, wide: bool = False) -> str | None:
    """What ``data`` is when it is binary rather than text, or None: a known magic number
    (:data:`_MAGIC`), or in its first KB a NUL byte (unless ``wide``: UTF-16/32) or over 10%
    control characters (text has tabs and line breaks only)."""
    for magic, what in _MAGIC.items():
        if data.startswith(magic):
            return what
    head = data[:1024]
    if not wide and b"\x00" in head:
        return "NUL bytes"
    text_bytes = b"\x00\t\n\r\f\x1b" if wide else b"\t\n\r\f\x1b"
    controls = sum(1 for b in head if b < 32 and b not in text_bytes)
    if head and controls / len(head) > 0.1:
        return "control characters"
    return None


def decode_html(data: bytes, content_type: str = "") -> str:
    """HTML bytes as str: a byte-order mark, else the header's charset, else ``<meta charset>``/
    ``http-equiv``, else UTF-8, else detected as text is (:func:`_detect`). A page labelled
    ISO-8859-1 or ASCII is read as Windows-1252, as browsers do (its curly quotes and euro
    sign are in the bytes 0x80-0x9F that ISO-8859-1 leaves to control characters).

    Raises:
        ConversionError: binary content (:func:`binary_content`: an image served or named as HTML).
    """
    bom = _bom(data)
    if not bom and (what := binary_content(data, wide=re.search(r"utf-?(16|32)", content_type, re.I) is not None)):
        raise ConversionError(f"binary content ({what}), not HTML")
    if bom:
        return data.decode(bom, errors="replace")
    candidates = []
    m = re.search(r"charset=[\"']?([\w\-:.]+)", content_type, re.I)
    if m:
        candidates.append(m.group(1))
    m2 = _META_CHARSET.search(data[:4096])
    if m2:
        candidates.append(m2.group(1).decode("ascii", "ignore"))
    candidates.append("utf-8")
    for enc in candidates:
        if enc.lower() in _LATIN1_LABELS:
            enc = "cp1252"
        try:
            return data.decode(enc)
        except (LookupError, UnicodeDecodeError):
            continue
    try:
        return _detect(data)
    except ConversionError:
        return data.decode("utf-8", errors="replace")


_CHROME = [
    "script",
    "style",
    "noscript",
    "template",
    "nav",
    "header",
    "footer",
    "aside",
    "form",
    "button",
    "iframe",
    "svg",
    "canvas",
    "select",
    "dialog",
]
_CHROME_ROLES = ["navigation", "banner", "contentinfo", "complementary", "search", "menu", "menubar", "toolbar"]
_CHROME_CLASS = re.compile(
    r"(^|[\s_-])(nav|navbar|navigation|sidebar|breadcrumbs?|toc|table-of-contents|footer|"
    r"header|menu|skip-link|cookie|edit-this-page|pagination|theme-doc-footer)($|[\s_-])",
    re.I,
)


MAX_HTML_DEPTH = 128
"""How deep elements may nest below the page's main part (``main``, ``article`` or ``body``)
before what lies deeper is kept as plain text: its words stay, its structure (lists, links,
tables) goes. Markdown conversion recurses once per level (three Python frames), so a page
of 100,000 nested ``<div>`` (1.2 MB) ended in RecursionError after minutes. Real pages
nest 15-40 levels (Lighthouse warns past 32); pages with many unclosed ``<font>`` or ``<p>``
tags go deeper, and keep their words. 128 levels stay well inside Python's default limit
of 1,000 frames."""


def _gone(tag: Any) -> bool:
    """``tag`` was decomposed (it sits inside a removed element). Read from the tag's own
    attributes: bs4's ``Tag.decomposed`` falls back to ``find("_decomposed")``, a search of
    the tag's whole subtree, which made a page of nested elements quadratic."""
    return bool(tag.__dict__.get("_decomposed")) or tag.__dict__.get("attrs") is None


def _flatten_deep(root: Any, limit: int = MAX_HTML_DEPTH) -> None:
    """Replace the content of every element ``limit`` levels below ``root`` by its text
    (:data:`MAX_HTML_DEPTH` says why); walks the tree without recursion, in linear time."""
    from bs4 import NavigableString, Tag

    deep = 0
    stack = [(root, 0)]
    while stack:
        tag, depth = stack.pop()
        children = [c for c in tag.contents if isinstance(c, Tag)]
        if depth < limit:
            stack.extend((c, depth + 1) for c in children)
        elif children:
            deep += 1
            text = " ".join(tag.get_text(" ").split())
            tag.clear()
            tag.append(NavigableString(text))
    if deep:
        log.info("HTML nested over %d levels: %d parts kept as plain text", limit, deep)


def html_to_markdown(html: str, base_url: str = "") -> tuple[str, str]:
    """The readable part of an HTML page as Markdown (see the module docstring).

    Returns:
        ``(title, markdown)``: the title from ``<title>`` (or the first ``<h1>``).
    """
    from bs4 import BeautifulSoup
    from markdownify import MarkdownConverter

    soup: Any = BeautifulSoup(html, "html.parser")  # bs4's overloads do not type attribute filters
    title = ""
    if soup.title and soup.title.string:
        title = " ".join(soup.title.string.split())
    root: Any = soup.find("main") or soup.find("article") or soup.find(attrs={"role": "main"}) or soup.body or soup
    _flatten_deep(root)
    for tag in root.find_all(_CHROME):
        if not _gone(tag):
            tag.decompose()
    for tag in root.find_all(attrs={"role": _CHROME_ROLES}):
        if not _gone(tag):
            tag.decompose()
    for tag in root.find_all(True):
        if _gone(tag):
            continue
        classes = " ".join(tag.get("class") or []) + " " + str(tag.get("id") or "")
        if tag.name not in ("main", "article", "body", "pre", "code", "table") and _CHROME_CLASS.search(classes):
            tag.decompose()
    h1 = root.find("h1")
    if not title and h1 is not None:
        title = " ".join(h1.get_text(" ").split())
    _plain_links(root)

    def language(el: Any) -> str:
        for node in (el, el.find("code")):
            for cls in (node.get("class") or []) if node is not None else []:
                for prefix in ("language-", "lang-", "highlight-source-"):
                    if cls.startswith(prefix):
                        return cls[len(prefix) :]
        return ""

    md = MarkdownConverter(
        heading_style="ATX",
        bullets="-",
        code_language_callback=language,
        escape_underscores=False,
        escape_asterisks=False,
    ).convert_soup(root)
    md = re.sub(r"\n{3,}", "\n\n", md).strip() + "\n"
    return title, md


_PERMALINK_CLASS = re.compile(
    r"(^|[\s_-])(headerlink|anchor|anchorjs-link|hash-link|header-anchor|heading-link|permalink)($|[\s_-])", re.I
)
_FOOTNOTE_MARK = re.compile(r"\[?(?:\d{1,3}|[*†‡§])\]?")  # a footnote's marker: [2], 3, *, †
_BLOCKS = [
    "p",
    "div",
    "section",
    "article",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "ul",
    "ol",
    "li",
    "dl",
    "table",
    "pre",
    "blockquote",
    "figure",
    "hr",
]
_URL_UNSAFE = re.compile(r"[\s()<>\[\]\\]")


def _safe_url(url: str) -> str:
    """``url`` with the characters that would end a Markdown link early (white space,
    parentheses, angle and square brackets, backslashes) percent-encoded: the address reads
    the same to a browser, and the link stays one link."""
    return _URL_UNSAFE.sub(lambda m: "".join(f"%{b:02X}" for b in m.group().encode("utf-8")), url.strip())


def _plain_links(root: Any) -> None:
    """Make every ``<a>`` and ``<img>`` under ``root`` convert to one whole Markdown link or to
    its words, so no part of a link is left in the text (a stray ``)`` or ``](``):

    - a heading's permalink (``<a class="headerlink" href="#x">¶</a>``, or a same-page link
      whose text holds no letter or digit: ``¶``, ``#``, ``§``, an icon) goes, as does a
      footnote's marker (a same-page link ``[2]``: Markdown's ``[^2]`` goes too, and a reader
      of an answer would take it for a citation);
    - a link to no address a reader can follow (none, ``javascript:``, ``data:``, over
      :data:`~graphs.link_targets.MAX_URL_CHARS` characters, malformed:
      :func:`~graphs.link_targets.usable_address`) becomes its text (nothing when its text is
      that address); a link whose text is its address (``<a href="/a.html">/a.html</a>``)
      becomes its text;
    - a link around blocks (a card: a heading and a paragraph in one ``<a>``) becomes its
      blocks: Markdown has no link across paragraphs;
    - addresses are made safe for Markdown (:func:`_safe_url`: parentheses, spaces), and so
      are a link text's unbalanced brackets (escaped) and an alt text's brackets;
    - an image whose address is the picture itself (``data:``) or no address becomes its alt
      text;
    - an address over the limit written as words in the text goes
      (:func:`~graphs.link_targets.drop_long_addresses`; code is left as written).
    """
    for a in root.find_all("a"):
        if _gone(a):
            continue
        href = str(a.get("href") or "").strip()
        classes = " ".join(a.get("class") or [])
        words = a.get_text("", strip=True)
        if href.startswith("#") and (
            _FOOTNOTE_MARK.fullmatch(words)
            or not re.search(r"\w", words)
            or (_PERMALINK_CLASS.search(classes) and len(words) <= 3)
        ):
            a.decompose()
        elif words == href and not usable_address(href):
            a.decompose()  # its words are that address: nothing a reader can use
        elif not usable_address(href) or a.find(_BLOCKS):
            a.unwrap()
        elif words == href:  # markdownify would write <href>: not a link without a scheme
            a.unwrap()
        else:
            a["href"] = _safe_url(href)
            text = a.get_text()
            if text.count("[") != text.count("]"):  # "[draft" would end the link text early
                for piece in a.find_all(string=True):
                    if "[" in piece or "]" in piece:
                        piece.replace_with(piece.replace("[", "\\[").replace("]", "\\]"))
    for img in root.find_all("img"):
        if _gone(img):
            continue
        src = str(img.get("src") or "").strip()
        if not usable_address(src):
            alt = " ".join(str(img.get("alt") or "").split())
            if alt:
                img.replace_with(alt)
            else:
                img.decompose()
        else:
            img["src"] = _safe_url(src)
            # brackets in an alt text would end the image's ![alt] early
            img["alt"] = str(img.get("alt") or "").replace("[", "(").replace("]", ")")
    for piece in root.find_all(string=True):
        if len(piece) > MAX_URL_CHARS and not piece.find_parent(["pre", "code"]):
            if (kept := drop_long_addresses(str(piece))) != piece:
                piece.replace_with(kept)


ZIP_KINDS = ("docx", "pptx", "xlsx")
"""The formats that are zip archives of XML parts (Office Open XML): :func:`check_zip` looks
at their central directory before any converter opens them."""
MAX_UNZIPPED_BYTES = 200_000_000
"""The most an office file's parts may expand to, all together. The file size limit
(``max_file_bytes``) counts the compressed bytes only: a 424 KB DOCX can expand to 754 MB,
which python-docx would parse whole (an lxml tree takes several times its XML's size in
memory). 200 MB is four times the default 50 MB file limit, so a file of that size made of
pictures (stored as they are: they expand to about their own size) is still read, while
the XML the converters parse stays at a size one sync can hold."""
MAX_ZIP_RATIO = 100
"""The most one part of an office file may expand, uncompressed bytes per compressed byte,
once it expands past :data:`ZIP_RATIO_GRACE_BYTES`. Apache POI's ``ZipSecureFile``, the zip
bomb guard of the Java office-file library, refuses the same by default
(``MIN_INFLATE_RATIO = 0.01``, after 100 KiB); word-processing and spreadsheet XML compress
5-20:1, a bomb's repeated bytes 1000:1 (the most deflate reaches). See also OWASP's file
upload cheat sheet and the "Decompression pitfalls" of Python's ``zipfile`` documentation."""
ZIP_RATIO_GRACE_BYTES = 100 * 1024
"""A part expanding to less than this is not held to :data:`MAX_ZIP_RATIO` (POI's grace size:
a small, repetitive part such as an empty sheet compresses well and costs nothing)."""
MAX_ZIP_MEMBERS = 10_000
"""The most parts an office file may hold: a 500-slide deck has a few thousand (slides,
their relations, pictures); more is an archive of many tiny parts made to exhaust the parser."""


def check_zip(data: bytes, kind: str) -> None:
    """Refuse an office file (a zip archive) that would expand too far, before it is opened
    by a converter: reads the archive's central directory only (microseconds), not its parts.

    The sizes the directory declares are the ones that count: Python's ``zipfile``, which
    python-docx, python-pptx and openpyxl read through, stops a part at its declared size (its
    checksum then fails), so a part cannot expand past what is checked here.

    Args:
        data: the file's bytes.
        kind: ``"docx"``, ``"pptx"`` or ``"xlsx"`` (for the message).

    Raises:
        ConversionError: not a zip archive, more than :data:`MAX_ZIP_MEMBERS` parts, over
            :data:`MAX_UNZIPPED_BYTES` unzipped, or a part over :data:`MAX_ZIP_RATIO` (the
            message names the part and the sizes).
    """
    import zipfile

    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError) as exc:
        raise ConversionError(f"cannot read this {kind.upper()} (not a zip archive: {exc})") from None
    if len(members) > MAX_ZIP_MEMBERS:
        raise ConversionError(
            f"refused: {len(members)} parts in this {kind.upper()}, over the {MAX_ZIP_MEMBERS} a document "
            "has (a zip bomb?)"
        )
    total = sum(m.file_size for m in members)
    if total > MAX_UNZIPPED_BYTES:
        raise ConversionError(
            f"refused: this {kind.upper()} expands to {total / 1e6:,.0f} MB, over the "
            f"{MAX_UNZIPPED_BYTES / 1e6:.0f} MB an office file may unzip to (a zip bomb?)"
        )
    for m in members:
        ratio = m.file_size / max(m.compress_size, 1)
        if m.file_size > ZIP_RATIO_GRACE_BYTES and ratio > MAX_ZIP_RATIO:
            raise ConversionError(
                f"refused: its part {display_name(m.filename[:200])} expands {ratio:,.0f}:1 "
                f"({m.compress_size / 1e3:,.0f} KB to {m.file_size / 1e6:,.1f} MB), over the "
                f"{MAX_ZIP_RATIO}:1 of any document (a zip bomb?)"
            )


def _office(data: bytes, kind: str) -> Converted:
    if kind in ZIP_KINDS:
        check_zip(data, kind)
    try:
        from markitdown import StreamInfo
    except ImportError as exc:  # the 'documents' extra is not installed
        raise ConversionError(
            f"{kind.upper()} needs the 'documents' extra: pip install 'threadwise[documents]'"
        ) from exc
    # the format's own converter, not MarkItDown's dispatcher: that one falls back to reading
    # a damaged PDF or DOCX as plain text, and would index its raw bytes
    try:
        if kind == "docx":
            text, title = _docx(data), ""
        elif kind == "xlsx":
            text, title = _xlsx(data), ""
        elif kind == "pdf":
            text, title = _pdf(data), ""
        else:
            result = _converter(kind).convert(io.BytesIO(data), StreamInfo(extension="." + kind))
            text, title = result.markdown or "", (result.title or "").strip()
    except (ConversionError, MemoryError):
        raise
    except Exception as exc:  # noqa: BLE001 - every converter's own errors: one line, this document only
        raise ConversionError(f"cannot read this {kind.upper()} ({_why(exc)})") from None
    if not text.strip():
        raise ConversionError(f"no text in this {kind.upper()} (a scanned PDF needs OCR, which is not done)")
    return Converted(title, text)


_CONVERTERS: dict[str, Any] = {}


def _converter(kind: str) -> Any:
    """markitdown's converter of ``kind`` (made once per process)."""
    if kind not in _CONVERTERS:
        from markitdown import converters

        cls = {"pdf": converters.PdfConverter, "pptx": converters.PptxConverter}[kind]
        _CONVERTERS[kind] = cls()
    return _CONVERTERS[kind]


def _pdf(data: bytes) -> str:
    """PDF to Markdown: paragraphs as the page shows them, larger type as headings, and pages
    of tables or forms as markitdown lays them out.

    A PDF holds positioned lines, not paragraphs. pdfminer's layout analysis (what markitdown
    gives for prose) puts a paragraph's lines in one box only while the space between them is
    under half a line (``LAParams.line_margin``), so with 1.15-2.0 line spacing every printed
    line became a paragraph of its own, and answers quoted half sentences ("stipend is 300
    euros per year", its subject on the line before). Here the lines of pdfminer's boxes are
    joined again by :func:`_pdf_page`. Pages that markitdown reads as a table or form
    (pdfplumber's words in aligned columns) keep its Markdown table.

    Args:
        data: the PDF's bytes.

    Returns:
        Markdown: ``#``/``##``/``###`` headings, paragraphs separated by a blank line, pages too.

    Raises:
        Exception: pdfminer's or pdfplumber's own errors (a damaged or password-protected
            file); :func:`_office` turns them into one :class:`ConversionError`.
    """
    from pdfminer.high_level import extract_pages
    from pdfminer.layout import LAParams

    with _pdf_limits():
        forms = _pdf_forms(data)
        pages: list[list[_PdfLine]] = []
        chars = 0
        for layout in extract_pages(io.BytesIO(data), laparams=LAParams()):
            pages.append(list(_pdf_lines(layout)))
            chars += sum(len(line.text) for line in pages[-1])
            if chars > MAX_PDF_TEXT_CHARS:
                log.warning("PDF text cut after page %d: over %d characters", len(pages), MAX_PDF_TEXT_CHARS)
                break
    sizes: dict[float, int] = {}
    for line in (ln for page in pages for ln in page):
        sizes[line.size] = sizes.get(line.size, 0) + len(line.text)
    body = max(sizes, key=lambda k: sizes[k]) if sizes else 0.0
    # the sizes of larger type, largest first: "#", "##", then "###"
    big = sorted((k for k in sizes if k >= body * HEADING_SIZE_RATIO), reverse=True)
    out = []
    for i, page in enumerate(pages):
        text = forms.get(i) or _pdf_page(page, body, big, first=i == 0)
        if text.strip():
            out.append(text.strip())
    return "\n\n".join(out)


HEADING_SIZE_RATIO = 1.15
"""A line whose type is at least this much larger than the body text's (the size most of the
document's characters have) is a heading: a 12 pt title over 10.5 pt text is, a 10.5 pt line
over 10 pt text (a rounding of the same size) is not."""
PARAGRAPH_GAP_RATIO = 1.25
"""Two lines are in different paragraphs when the distance between their baselines is this
much more than the document's line pitch (plus 1 pt of rounding): a paragraph's own space
(6 pt after a 14 pt line: 1.4) or a blank line (2.0) splits, the lines of one paragraph at
any line spacing (their pitch is the line pitch itself) do not."""


@dataclass
class _PdfLine:
    """One printed line: its text, box (PDF points, y upwards), type size, and how far right
    a line of its column goes (``right``: set by :func:`_pdf_page`)."""

    text: str
    x0: float
    y0: float
    x1: float
    y1: float
    size: float
    right: float = 0.0


def _pdf_lines(layout: Any) -> Iterator[_PdfLine]:
    """The horizontal text lines of one pdfminer page, in pdfminer's reading order (its boxes'
    order: columns one after the other)."""
    from pdfminer.layout import LTChar, LTTextBox, LTTextLineHorizontal

    for box in layout:
        if not isinstance(box, LTTextBox):
            continue
        for line in box:
            if not isinstance(line, LTTextLineHorizontal):
                continue
            text = " ".join(line.get_text().split())
            if not text:
                continue
            chars = [c for c in line if isinstance(c, LTChar) and c.get_text().strip()]
            counts: dict[float, int] = {}
            for c in chars:
                counts[round(c.size, 1)] = counts.get(round(c.size, 1), 0) + 1
            size = max(counts, key=lambda k: counts[k]) if counts else round(line.height, 1)
            yield _PdfLine(text, line.x0, line.y0, line.x1, line.y1, size)


def _pdf_page(lines: list[_PdfLine], body: float, big: list[float], first: bool = False) -> str:
    """One page's lines as Markdown paragraphs and headings (:func:`_pdf`).

    A line goes on the paragraph of the line before unless: the pitch between their baselines
    is over :data:`PARAGRAPH_GAP_RATIO` times the page's line pitch (the smallest pitch two or
    more pairs of body lines share), the line is not below the one before (a new column), the
    type size changes (a heading), it starts a list item, or the first word of the line would
    have fitted on the line before (so that line ended on purpose: the last line of a
    paragraph, an address, a short list). A word broken with a hyphen stays hyphenated.
    ``first``: the document's first page."""
    for line in lines:  # the lines of its size beside or below it: its column
        line.right = max(o.x1 for o in lines if o.size == line.size and o.x0 < line.x1 and o.x1 > line.x0)
    pitches: dict[float, int] = {}
    for a, b in zip(lines, lines[1:], strict=False):
        if a.size == b.size == body and b.y1 <= a.y1:
            step = round((a.y0 - b.y0) * 2) / 2
            if 0 < step < 4 * body:
                pitches[step] = pitches.get(step, 0) + 1
    shared = [p for p, n in pitches.items() if n >= 2] or list(pitches)
    pitch = min(shared) if shared else body * 1.2
    blocks: list[tuple[float, list[str]]] = []  # (type size, its lines)
    prev: _PdfLine | None = None
    for line in lines:
        if prev is None or _pdf_break(prev, line, pitch):
            blocks.append((line.size, [line.text]))
        else:
            blocks[-1][1].append(line.text)
        prev = line
    out = []
    for k, (size, texts) in enumerate(blocks):
        text = texts[0]
        for more in texts[1:]:
            text = text + more if text.endswith("-") and text[-2:-1].isalpha() else f"{text} {more}"
        if size in big and len(text) <= 200:
            text = "#" * min(big.index(size) + 1, 3) + " " + text
        elif len(texts) == 1 and k + 1 < len(blocks) and _PDF_LABEL.match(text) and not _LIST_ITEM.match(text):
            # a short line of its own, ending in no punctuation, before more text: a title or
            # heading in the body's type ("Travel and Expense Policy", "Mileage"); a page's
            # first one is the document's title when no larger type says otherwise
            level = 1 if first and k == 0 and not big else min(len(big) + 1, 3) if big else 2
            text = "#" * level + " " + text
        out.append(text)
    return "\n\n".join(out)


_PDF_LABEL = re.compile(r"^[A-Z0-9\u00c0-\u024f][^\n]{0,79}(?<![.!?:;,])$")


_LIST_ITEM = re.compile(r"^(?:[-•●▪◦*–]\s|\(?\d{1,3}[.)]\s|\(?[a-z][.)]\s)")


def _pdf_break(prev: _PdfLine, line: _PdfLine, pitch: float) -> bool:
    """``line`` starts a new paragraph after ``prev`` (:func:`_pdf_page` says when)."""
    if abs(line.size - prev.size) > 0.05 * max(line.size, prev.size):
        return True
    if line.y1 > prev.y1 or line.x0 > prev.x1 or line.x1 < prev.x0:
        return True  # above the line before, or beside it: another column or block
    if prev.y0 - line.y0 > pitch * PARAGRAPH_GAP_RATIO + 1:
        return True
    if _LIST_ITEM.match(line.text):
        return True
    first = line.text.split(" ", 1)[0]
    per_char = (line.x1 - line.x0) / max(len(line.text), 1)
    # the room left on the line before, against the first word and a space
    return prev.right - prev.x1 > (len(first) + 1) * per_char


def _pdf_forms(data: bytes) -> dict[int, str]:
    """``{page index: Markdown}`` of the pages markitdown reads as a table or form
    (pdfplumber's words in aligned columns: markitdown's own test, a private function of its
    PDF converter; without it, or when pdfplumber fails, no page is and every page is prose)."""
    try:
        import pdfplumber
        from markitdown.converters._pdf_converter import _extract_form_content_from_words
    except ImportError:
        return {}
    out: dict[int, str] = {}
    try:
        with pdfplumber.open(io.BytesIO(data)) as pdf:
            for i, page in enumerate(pdf.pages):
                content = _extract_form_content_from_words(page)
                if content is not None:
                    out[i] = content
                page.close()  # its cached objects: memory stays flat over many pages
    except ConversionError:
        raise
    except Exception as exc:  # noqa: BLE001 - pdfminer reads the file next and says what is wrong
        log.debug("pdfplumber: %s", exc)
        return {}
    return out


MAX_PDF_INFLATED_BYTES = 200_000_000
"""The most a PDF's compressed (FlateDecode) streams may inflate to, all together, counted
as pdfminer (under pdfplumber and the text extraction) inflates them; past it the PDF is
refused. The file size limit counts compressed bytes: a 528 KB PDF inflated one page's
content to 400 MB (1.5 GB and 3 minutes in a sync), and a 50 MB one could inflate to tens
of gigabytes; pdfminer itself has no limit. 200 MB is :data:`MAX_UNZIPPED_BYTES`, the
office files' limit: a PDF of pictures keeps its images compressed (they are not inflated
to read text), and a 5,000-page text PDF inflates to a few tens of MB."""
MAX_PDF_TEXT_CHARS = 20_000_000
"""The most text read from one PDF, in characters: the pages after it are left out (a log
line says so). A 5,000-page book holds about 10 million."""

_pdf_budget = threading.local()


def _inflate(inflater: Any, data: bytes, chunks: list[bytes]) -> None:
    """Inflate ``data`` into ``chunks`` 1 MB at a time, each counted against this thread's
    PDF budget (``_pdf_budget.left``, bytes; unlimited when None), so a bomb is stopped
    holding at most the budget.

    Raises:
        ConversionError: over :data:`MAX_PDF_INFLATED_BYTES`.
        zlib.error: damaged data.
    """
    while not inflater.eof:
        out = inflater.decompress(data, 1 << 20)
        data = inflater.unconsumed_tail
        if not out and not data:
            return
        if getattr(_pdf_budget, "left", None) is not None:
            _pdf_budget.left -= len(out)
            if _pdf_budget.left < 0:
                raise ConversionError(
                    f"refused: this PDF's streams inflate past {MAX_PDF_INFLATED_BYTES / 1e6:.0f} MB, "
                    "the most a document may (a decompression bomb?)"
                )
        chunks.append(out)


class _BudgetedZlib:
    """pdfminer's ``zlib`` (its only inflater, for FlateDecode streams) with the inflating
    counted against this thread's PDF budget (:func:`_inflate`)."""

    error = zlib.error

    def __getattr__(self, name: str) -> Any:
        return getattr(zlib, name)

    def decompress(self, data: bytes) -> bytes:
        inflater = zlib.decompressobj()
        chunks: list[bytes] = []
        _inflate(inflater, data, chunks)
        if not inflater.eof:  # as zlib.decompress: pdfminer then reads it as a damaged stream
            raise zlib.error("Error -5 while decompressing data: incomplete or truncated stream")
        return b"".join(chunks)


def _decompress_damaged(data: bytes) -> bytes:
    """pdfminer's ``decompress_corrupted`` (a stream whose checksum is wrong: inflate it and
    let the checksum go) in linear time and within the budget: pdfminer's own feeds one byte
    at a time and appends to one bytes object, quadratic in the output.

    Raises:
        zlib.error: damaged before its last 3 bytes (the checksum), as pdfminer's.
    """
    inflater = zlib.decompressobj()
    chunks: list[bytes] = []
    _inflate(inflater, data[:-3], chunks)
    try:
        for i in range(max(len(data) - 3, 0), len(data)):
            _inflate(inflater, data[i : i + 1], chunks)
    except zlib.error:
        log.warning("Data-loss while decompressing corrupted data")
    return b"".join(chunks)


@contextmanager
def _pdf_limits() -> Iterator[None]:
    """Inside: pdfminer inflates at most :data:`MAX_PDF_INFLATED_BYTES` in this thread."""
    import pdfminer.pdftypes

    pdfminer.pdftypes.zlib = _BudgetedZlib()  # type: ignore[assignment]  # its only inflater
    pdfminer.pdftypes.decompress_corrupted = _decompress_damaged
    _pdf_budget.left = MAX_PDF_INFLATED_BYTES
    try:
        yield
    finally:
        _pdf_budget.left = None


def _why(exc: BaseException) -> str:
    """The real cause of a converter's error in one short line ("password-protected" for
    pdfminer's password errors)."""
    causes = [exc]
    while causes[-1].__cause__ is not None and len(causes) < 5:
        causes.append(causes[-1].__cause__)
    text = " ".join(f"{type(c).__name__} {c}" for c in causes)
    if "Password" in text or "password" in text or "encrypt" in text.lower():
        return "password-protected"
    cause = causes[-1]
    return f"{type(cause).__name__}: {' '.join(str(cause).split())[:200]}"


def _docx(data: bytes) -> str:
    """DOCX to Markdown with python-docx: the body's paragraphs and tables in order; Word's
    ``Title`` and ``Heading N`` styles become ATX headings, list styles ``-`` items, tables
    pipe tables (first row as the header). Not markitdown's DOCX path (mammoth): its equation
    pre-pass loses the ``w:`` namespace with beautifulsoup4 4.15, after which mammoth finds
    no body ("Could not find the body element") in ordinary files, e.g. every file
    python-docx writes; and mammoth alone took 1.5-2.4 s per file here (a pure-Python XML
    parse of the style parts) against ~0.1 s for python-docx (lxml)."""
    import docx
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    document = docx.Document(io.BytesIO(data))
    out: list[str] = []
    for element in document.element.body.iterchildren():
        tag = element.tag.rsplit("}", 1)[-1]
        if tag == "p":
            paragraph = Paragraph(element, document)
            text = " ".join(paragraph.text.split())
            if not text:
                continue
            style = (paragraph.style.name if paragraph.style is not None else "") or ""
            level = style.removeprefix("Heading").strip()
            if style == "Title":
                out.append(f"# {text}")
            elif style.startswith("Heading") and level.isdigit():
                out.append(f"{'#' * min(int(level), 6)} {text}")
            elif "List" in style:
                out.append(f"- {text}")
            else:
                out.append(text)
        elif tag == "tbl":
            rows = _docx_rows(Table(element, document))
            rows = [r for r in rows if any(r)]
            if rows:
                width = max(len(r) for r in rows)
                rows = [r + [""] * (width - len(r)) for r in rows]
                lines = ["| " + " | ".join(rows[0]) + " |", "|" + " --- |" * width]
                lines += ["| " + " | ".join(r) + " |" for r in rows[1:]]
                out.append("\n".join(lines))
    return "\n\n".join(out) + "\n"


MAX_TABLE_COLUMNS = 63
"""The most columns a Word table is read as: Word's own limit (a table has at most 63
columns). A cell spanning more (``<w:gridSpan w:val="2000000000"/>`` in a 36 KB file) made
python-docx repeat it once per column: 10.9 GB before it was stopped."""


def _docx_rows(table: Any) -> list[list[str]]:
    """The texts of a python-docx table, one per grid column as python-docx's ``row.cells``
    gives them (a cell spanning columns repeated, a vertically merged cell's text in every
    row it covers), but a span never reaches past the table's grid (``w:tblGrid``), at most
    :data:`MAX_TABLE_COLUMNS` columns: each cell still gives its text once."""
    from docx.table import _Cell

    grid = table._tbl.tblGrid
    width = min(len(grid.gridCol_lst) if grid is not None else 0, MAX_TABLE_COLUMNS)
    rows: list[list[str]] = []
    above: dict[int, str] = {}  # grid offset -> text in the row above (vertical merges)
    for row in table.rows:
        out: list[str] = []
        here: dict[int, str] = {}
        offset = row._tr.grid_before
        for tc in row._tr.tc_lst:
            if tc.vMerge == "continue" and offset in above:
                text = above[offset]
            else:
                source = tc
                for _ in range(len(rows)):  # python-docx's walk up to the merge's first cell
                    if source.vMerge != "continue":
                        break
                    source = source._tc_above
                text = " ".join(_Cell(source, table).text.split())
            here[offset] = text
            span = tc.grid_span
            out.extend([text.replace("|", "\\|")] * min(span, max(width - len(out), 1)))
            offset += span
        above = here
        rows.append(out)
    return rows


def _xlsx(data: bytes) -> str:
    """XLSX to Markdown with openpyxl: each sheet that holds a value becomes ``## <sheet>``
    and one pipe table, its first row that holds a value as the header; empty rows and
    columns are left out, empty cells stay empty, a whole number reads ``12`` and a date
    ``2026-12-03``; formulas give their last computed value. Not markitdown's XLSX path
    (pandas): it writes every empty cell as ``NaN``, an empty sheet as a broken table, and a
    column of numbers with a gap as ``12.0`` (pandas makes it float), which then reads as the
    document's text in answers."""
    import datetime as dt

    import openpyxl

    def cell(value: Any) -> str:
        if value is None:
            return ""
        if isinstance(value, float) and value.is_integer():
            return str(int(value))
        if isinstance(value, dt.datetime):
            return value.date().isoformat() if value.time() == dt.time() else value.isoformat(sep=" ")
        if isinstance(value, dt.date | dt.time):
            return value.isoformat()
        return " ".join(str(value).split()).replace("|", "\\|")

    book = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    out: list[str] = []
    try:
        for sheet in book.worksheets:
            cells = _sheet_cells(book, sheet, cell)
            if not cells:
                continue
            row_ids = sorted({r for r, _ in cells})
            col_ids = sorted({c for _, c in cells})
            if len(row_ids) * len(col_ids) > MAX_SHEET_CELLS:
                raise ConversionError(
                    f"refused: sheet {display_name(sheet.title[:100])} would be a table of {len(row_ids):,} rows "
                    f"by {len(col_ids):,} columns, over the {MAX_SHEET_CELLS:,} cells a sheet may have"
                )
            rows = [[cells.get((r, c), "") for c in col_ids] for r in row_ids]
            lines = ["| " + " | ".join(rows[0]) + " |", "|" + " --- |" * len(col_ids)]
            lines += ["| " + " | ".join(r) + " |" for r in rows[1:]]
            out.append(f"## {sheet.title}\n\n" + "\n".join(lines))
    finally:
        book.close()
    return "\n\n".join(out) + "\n" if out else ""


MAX_SHEET_CELLS = 1_000_000
"""The most cells one spreadsheet sheet may hold, and the most its table may have once empty
rows and columns are left out (rows × columns). openpyxl pads every row it reads out to the
sheet's last column, and every gap out to the last row: a 4.8 KB file with values in ``A1`` and
``XFD1048576`` became 17 billion cells (11 GB before it was stopped). Here only the cells
the file holds are read; a million is Excel's own row limit and about 50-100 MB of sheet XML,
more than any sheet worth answering questions from."""


def _sheet_cells(book: Any, sheet: Any, fmt: Any) -> dict[tuple[int, int], str]:
    """The non-empty cells of one read-only openpyxl sheet as ``{(row, column): text}``
    (``fmt`` gives a value's text), read with openpyxl's own sheet parser, as its
    ``iter_rows`` does, but without padding rows and columns it does not hold.

    Raises:
        ConversionError: over :data:`MAX_SHEET_CELLS` non-empty cells.
    """
    from openpyxl.worksheet._reader import WorkSheetParser

    cells: dict[tuple[int, int], str] = {}
    with sheet._get_source() as src:
        parser = WorkSheetParser(
            src,
            sheet._shared_strings,
            data_only=book.data_only,
            epoch=book.epoch,
            date_formats=book._date_formats,
            timedelta_formats=book._timedelta_formats,
        )
        for row_id, row in parser.parse():
            for c in row:
                text = fmt(c["value"])
                if text:
                    cells[(row_id, c["column"])] = text
            if len(cells) > MAX_SHEET_CELLS:
                raise ConversionError(
                    f"refused: sheet {display_name(sheet.title[:100])} holds over {MAX_SHEET_CELLS:,} cells"
                )
    return cells
