"""Finding source files and removing what is not content from Markdown.

:func:`clean_markdown` removes YAML/TOML front matter (keeping its ``title``), HTML
comments, admonition markers (MkDocs ``!!! note``/``??? note``, Docusaurus/VuePress
``:::tip`` ... ``:::``, GitHub ``> [!NOTE]``, reStructuredText ``.. note::``) while keeping the
admonitions' content and kind: their text opens with the label a reader sees on the box
("Warning: Deleting a project cannot be undone.", :func:`admonition_label`; a code block or
table first in the box gets the label on a line of its own), and a reStructuredText body is
dedented (indented deeper, it read as code),
link-only lines standing alone (navigation, badges, "edit this page"; in a list or inside
a paragraph only the addresses go).

Reference-style links are resolved last (:func:`resolve_references`): ``[text][label]``,
``[text][]`` and ``[text]`` become ``[text](address)`` with the address of the page's
``[label]: address`` definition, and a reference whose label is defined nowhere in the page
(a site-wide link map, or a list of links at the bottom) shows its text; footnote markers
``[^1]`` go and a footnote's text stays as a paragraph. A reader of an answer quoted from
the page then sees the words, not ``[fsync'd][fsync]``; the definitions go. Links, images
and autolinks to an address no reader can follow (70,000 characters, no address, ``data:``)
keep only their words (:mod:`graphs.link_targets`).
Fenced and indented code and inline code are never touched.

:func:`definition_lists` writes HTML definition lists (a man page's options) as Markdown
paragraphs, the terms first (last step of :func:`clean_markdown`: the index, its search and
the answers quoting it read the same text).
"""

from __future__ import annotations

import logging
import os
import posixpath
import re
from collections.abc import Iterator, Sequence
from pathlib import Path

import yaml
from markdown_it import MarkdownIt
from markdown_it.common.utils import normalizeReference

from graphs.file_formats import FILE_PATTERNS
from graphs.knowledge.common import KnowledgeBaseError, display_name
from graphs.link_targets import MAX_URL_CHARS, usable_address
from graphs.markdown_links import drop_unusable_targets, link_texts

log = logging.getLogger(__name__)


def discover_files(
    sources: Sequence[str | Path],
    patterns: Sequence[str],
    outside: list[str] | None = None,
) -> list[tuple[Path, str]]:
    """List the files to index: ``(path, display path)`` pairs of :func:`list_files` (see there)."""
    return [(path, shown) for path, shown, _ in list_files(sources, patterns, outside)]


def source_exists(src: str | Path) -> bool:
    """``src`` names something :func:`list_files` can walk: a folder, a file, or a glob
    pattern matching at least one file (a missing ``team [docs]`` folder is a pattern to
    glob, matching nothing: not found, like a ``docs/*.pdf`` naming no PDF). The walk stops
    at the first match."""
    p = Path(src).expanduser()
    if p.is_dir() or p.is_file():
        return True
    base, rest = _glob_split(str(p))
    if not rest or not os.path.isdir(base):
        return False
    return next(_walk(os.path.realpath(base), _patterns_regex([rest]), None), None) is not None


def source_argument_problem(src: str) -> str | None:
    """What is wrong with ``src`` as a ``--source`` argument, in one line naming the option, or
    None: it must name a folder holding a document of a format read (:data:`FILE_PATTERNS`), or a
    glob pattern matching a file. An empty or blank argument would be the current folder (``""``
    is ``.``), and a single file or an empty folder would give nothing to answer from: each is
    refused before any work. A path naming nothing keeps its line (:func:`_not_found`)."""
    if not src.strip():
        return "--source: an empty path: give the folder of documents to answer from (--source DIR)"
    if not source_exists(src):
        return _not_found(src)
    p = Path(src).expanduser()
    if p.is_file():
        return f"--source {src}: a file, not a folder: give the folder of documents it is in (--source DIR)"
    if p.is_dir() and next(_walk(os.path.realpath(p), _patterns_regex(FILE_PATTERNS), None), None) is None:
        kinds = ", ".join(pattern.removeprefix("**/*") for pattern in FILE_PATTERNS)
        return f"--source {src}: no document in this folder (--source DIR reads its {kinds} files)"
    return None


def list_files(
    sources: Sequence[str | Path],
    patterns: Sequence[str],
    outside: list[str] | None = None,
) -> list[tuple[Path, str, str]]:
    """List the files to index.

    A folder is walked without following links to folders (a link such as ``ln -s . current``
    would make the walk endless, and the files of a folder linked from inside the folder are
    listed under their own path anyway). A linked file is read only when its real path is
    inside the folder, and then once: a file reached by two names is listed by its own name.
    Anything whose real path is outside the folder is never read (the bot would serve any
    file its user can read to whoever can write a link into a synced folder); it is logged
    and named in ``outside``.

    Args:
        sources: folders (every file matching ``patterns`` below them) or glob patterns
            or single files. A glob is walked from its folder part like a folder.
        patterns: glob patterns relative to a source folder, e.g. ``"**/*.md"`` (``**`` any
            number of folders, hidden ones included; ``*``, ``?``, ``[...]`` inside one name).
        outside: when given, gets the display path of each link left out because it leads
            outside its folder.

    Returns:
        ``(path, display path, name)`` triples, sorted by display path. ``name`` is the path
        relative to its source folder (a single file: its name) as the file system holds it
        (bytes that are not UTF-8 as lone surrogates, ``os.fsdecode``); the display path is
        ``name`` with those bytes and control characters escaped (:func:`display_name`).

    Raises:
        KnowledgeBaseError: a source matches nothing that exists.
    """
    found: dict[str, tuple[str, str]] = {}
    for src in sources:
        p = Path(src).expanduser()
        if p.is_dir():
            base, matcher = os.path.realpath(p), _patterns_regex(patterns)
        elif p.is_file():
            # a file named in the configuration is read where it leads: the user chose it
            found.setdefault(os.path.abspath(p), (display_name(p.name), p.name))
            continue
        else:
            base, rest = _glob_split(str(p))
            if not rest or not os.path.isdir(base):
                raise KnowledgeBaseError(_not_found(src))
            base, matcher = os.path.realpath(base), _patterns_regex([rest])
        before = len(found)
        for full, rel in _walk(base, matcher, outside):
            found.setdefault(full, (display_name(rel), rel))
        if not p.is_dir() and len(found) == before:
            raise KnowledgeBaseError(_not_found(src))
    return sorted(((Path(k), shown, rel) for k, (shown, rel) in found.items()), key=lambda f: f[1])


def _not_found(src: str | Path) -> str:
    """The one line saying ``src`` names nothing, with where such a path is read from: config.toml's
    paths reach here resolved against its folder (absolute), ``--source`` paths as given."""
    if os.path.isabs(os.path.expanduser(src)):
        return f"knowledge source not found: {src} (a path in config.toml is relative to the config file's folder)"
    return f"knowledge source not found: {src} (a path given with --source is relative to the current folder)"


def _walk(base: str, matcher: re.Pattern[str], outside: list[str] | None) -> Iterator[tuple[str, str]]:
    """``(path, path relative to base with '/')`` of the files below the real folder ``base``
    whose relative path ``matcher`` matches; links to folders are not followed, linked files
    only when they stay inside ``base`` (each real file once, under its own name first)."""
    linked: dict[str, str] = {}
    seen: set[str] = set()
    inside = base.rstrip(os.sep) + os.sep
    stack = [("", base)]
    while stack:
        prefix, folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError as exc:
            log.warning("cannot list %s (%s)", display_name(folder), exc.strerror or exc)
            continue
        for entry in entries:
            rel = prefix + entry.name
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append((rel + "/", entry.path))
                    continue
                if not entry.is_symlink():
                    if entry.is_file(follow_symlinks=False) and matcher.fullmatch(rel):
                        seen.add(entry.path)
                        yield entry.path, rel
                    continue
            except OSError:
                continue
            target = os.path.realpath(entry.path)
            if target != base and not target.startswith(inside):
                log.warning(
                    "%s: not read: a link to %s, outside the folder %s",
                    display_name(rel),
                    display_name(target),
                    display_name(base),
                )
                if outside is not None:
                    outside.append(display_name(rel))
            elif os.path.isfile(target) and matcher.fullmatch(rel):  # a folder inside is walked already
                linked.setdefault(target, rel)
    for target, rel in sorted(linked.items(), key=lambda kv: kv[1]):
        if target not in seen:  # the real file was not listed by its own name (another pattern)
            yield target, rel


def _glob_split(pattern: str) -> tuple[str, str]:
    """``("/srv/policies", "*.pdf")`` for ``"/srv/policies/*.pdf"``: the folder before the
    first name holding a wildcard, and the rest ('' when there is no wildcard)."""
    parts = os.path.abspath(pattern).split(os.sep)
    for i, part in enumerate(parts):
        if any(c in part for c in "*?["):
            return os.sep.join(parts[:i]) or os.sep, "/".join(parts[i:])
    return pattern, ""


def _patterns_regex(patterns: Sequence[str]) -> re.Pattern[str]:
    """One regex matching a relative path (with '/') that any of the glob ``patterns`` matches
    as ``glob.glob(..., recursive=True, include_hidden=True)`` would."""
    return re.compile("|".join(f"(?:{_glob_regex(p)})" for p in patterns) or r"(?!)", re.S)


def _glob_regex(pattern: str) -> str:
    out = ""
    rel = pattern.replace(os.sep, "/").strip("/")
    # "./.github/**/*.md" is ".github/**/*.md": "." and ".." steps resolved, a dot-directory kept
    parts = (posixpath.normpath(rel) if rel else rel).split("/")
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if part == "**":
            out += ".*" if last else "(?:[^/]+/)*"
            continue
        out += _name_regex(part) + ("" if last else "/")
    return out


def _name_regex(name: str) -> str:
    """A glob of one path name (``*``, ``?``, ``[...]``, ``[!...]``) as a regex."""
    out, i = "", 0
    while i < len(name):
        c = name[i]
        i += 1
        if c == "*":
            out += "[^/]*"
        elif c == "?":
            out += "[^/]"
        elif c == "[":
            j = i + (name[i : i + 1] == "!")
            j = name.find("]", j + (name[j : j + 1] == "]"))
            if j < 0:  # no closing bracket: a plain "["
                out += re.escape(c)
                continue
            body, i = name[i:j], j + 1
            out += "[" + ("^" + body[1:] if body.startswith("!") else body).replace("\\", "\\\\") + "]"
        else:
            out += re.escape(c)
    return out


_FRONT_MATTER = re.compile(r"\A\ufeff?(---|\+\+\+)[ \t]*\n(.*?)\n(?:---|\.\.\.|\+\+\+)[ \t]*(?:\n|\Z)", re.S)
FENCE_RE = re.compile(r"^([ \t>]*)(`{3,}|~{3,})(.*)$")


def fence_opens(line: str) -> str | None:
    """The marker (```` ``` ````, ``~~~~``, ...) of the fenced code block ``line`` opens, else None
    (CommonMark: a backtick fence's info string holds no backtick)."""
    m = FENCE_RE.match(line)
    return m.group(2) if m and not (m.group(2)[0] == "`" and "`" in m.group(3)) else None


def fence_closes(line: str, fence: str) -> bool:
    """Whether ``line`` closes the block opened by ``fence``: the same character, at least as
    many, nothing after it (CommonMark)."""
    m = FENCE_RE.match(line)
    return m is not None and m.group(2)[0] == fence[0] and len(m.group(2)) >= len(fence) and not m.group(3).strip()


_MKDOCS_ADMONITION = re.compile(r"^([ \t]*)(?:!!!|\?\?\?\+?)[ \t]+([\w-]+)(?:[ \t]+\"(.*)\")?[ \t]*$")
_COLON_FENCE = re.compile(r"^[ \t]*:{3,}[ \t]*(?:[\w-]+)?[ \t]*(?:\[(.*)\]|(.*?))[ \t]*(?:\{.*\})?[ \t]*$")
_COLON_KIND = re.compile(r"^[ \t]*:{3,}[ \t]*([A-Za-z][\w-]*)")
# the kinds of Docusaurus / VuePress / Starlight ``:::`` containers that are admonitions (a
# ``:::python`` / ``:::js`` container is a language variant, not a box with a kind)
COLON_KINDS = frozenset(
    "note tip info warning danger caution important success error hint attention seealso abstract summary"
    " tldr todo question failure bug example".split()
)
_LABEL = "\ue010"  # marks a line holding an admonition's label until the next line of text takes it
_GITHUB_ALERT = re.compile(r"^([ \t]*>[ \t]*)\[!(NOTE|TIP|IMPORTANT|WARNING|CAUTION)\][ \t]*(.*)$", re.I)
# reStructuredText's admonition directives (docutils' "Admonitions" and Sphinx's ``seealso``,
# ``versionadded`` ...): ``.. note::`` with an indented body, its text maybe on the same line
_RST_ADMONITION = re.compile(
    r"^([ \t]*)\.\.[ \t]+(attention|caution|danger|error|hint|important|note|tip|warning|seealso|todo"
    r"|admonition|versionadded|versionchanged|deprecated)::[ \t]*(.*)$",
    re.I,
)
_LABELS = {"seealso": "See also", "versionadded": "New in version", "versionchanged": "Changed in version"}


def admonition_label(kind: str) -> str:
    """How a reader sees an admonition's kind, as the prefix of its text: ``"warning"`` ->
    ``"Warning:"``, ``"seealso"`` -> ``"See also:"``, ``"deprecated"`` -> ``"Deprecated:"``;
    ``""`` for no kind (a plain ``:::`` fence)."""
    kind = kind.strip().lower()
    if not kind:
        return ""
    return f"{_LABELS.get(kind, kind.replace('-', ' ').replace('_', ' ').capitalize())}:"


def _labelled(line: str, label: str) -> str:
    """``line`` opened by ``label`` after its indentation and list marker, as a reader sees an
    admonition's box: its kind, then its text."""
    lead = _LIST_MARK.match(line)
    at = lead.end() if lead else 0
    return f"{line[:at]}{label} {line[at:]}"


_LIST_MARK = re.compile(r"[ \t]*((?:[-*+]|\d+[.)])[ \t]+)?")
# an HTML block that is not text: a script or a style sheet, with its content (to its closing tag)
_HIDDEN_BLOCK = re.compile(r"^[ \t]{0,3}<(script|style)(?:[\s>]|$)", re.I)


def front_matter_title(text: str) -> tuple[str, str]:
    """Split off YAML (``---``) or TOML (``+++``) front matter.

    Returns:
        ``(title or '', text without the front matter)``. Front matter that is not a
        mapping is removed all the same.
    """
    m = _FRONT_MATTER.match(text)
    if not m:
        return "", text
    body, title = m.group(2), ""
    if m.group(1) == "---":
        try:
            data = yaml.safe_load(body)
            if isinstance(data, dict) and isinstance(data.get("title"), (str, int, float)):
                title = str(data["title"])
        except yaml.YAMLError:
            pass
    if not title:
        t = re.search(r"^title[ \t]*[:=][ \t]*(.+?)[ \t]*$", body, re.M)
        title = t.group(1).strip("\"'") if t else ""
    return " ".join(title.split()), text[m.end() :]


def clean_markdown(text: str) -> tuple[str, str]:
    """Remove what is not content from a Markdown document (see the module docstring).

    Args:
        text: the whole document.

    Returns:
        ``(front matter title or '', cleaned text)``. Lines inside fenced code are kept
        byte for byte; admonition bodies are de-indented by the 4 spaces MkDocs requires;
        HTML definition lists are written as Markdown (:func:`definition_lists`).
    """
    title, text = front_matter_title(text.replace("\r\n", "\n").replace("\r", "\n"))
    lines = _attach_labels(_clean_lines(text.replace(_LABEL, "").split("\n")))
    return title, definition_lists(resolve_references("\n".join(lines)))


_DEFINITION_TAG = re.compile(r"^[ \t]{0,3}</?(?:dl|dt|dd)(?:[\s>]|$)", re.I)
_LIST_OR_BLOCK = re.compile(r"^(?:[-*+]|\d+[.)])[ \t]|^```|^~~~|^\||^ {4}")


def definition_lists(text: str) -> str:
    """``text`` (Markdown) with each HTML definition list written as Markdown: one paragraph per
    definition, its terms first (``"`-d`, `--duplicates`: Show only dependencies which ..."``),
    the description's paragraphs joined to it, a list or code block inside the description kept
    after it as Markdown. A term asking a question (an FAQ written as a definition list: "Can I pay by
    invoice?") is written in bold on a line of its own, its reply on the next line, as an FAQ entry
    reads (:data:`graphs.extractive._FAQ_QUESTION`), not run into its reply ("Can I pay by invoice?: Yes").
    A list is a run of lines from one starting with ``<dl>``, ``<dt>`` or
    ``<dd>`` (outside code; a chunk of a long list starts at any of them) to a line of text
    after a blank line that is not a tag.

    Man pages made into Markdown (Cargo's command pages, generated by mdman) list every option
    this way; read as prose, the option's name lost its code and ran into its description
    ("--undo Undo a yank, ..."), and answers quoting an option did not say clearly which."""
    if "<dd" not in text and "<DD" not in text:
        return text
    lines = text.split("\n")
    out: list[str] = []
    fence: str | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        if fence:
            if fence_closes(line, fence):
                fence = None
        elif opened := fence_opens(line):
            fence = opened
        elif _DEFINITION_TAG.match(line):
            end = i + 1
            while end < len(lines) and (
                not lines[end].strip()
                or lines[end].lstrip().startswith("<")
                or (lines[end - 1].strip() and not FENCE_RE.match(lines[end]) and not lines[end].startswith("#"))
            ):
                end += 1
            converted = _definitions("\n".join(lines[i:end]))
            if converted is not None:
                out += ["", *converted, ""]
                i = end
                continue
        out.append(line)
        i += 1
    return "\n".join(out)


def _definitions(fragment: str) -> list[str] | None:
    """The Markdown lines of a run of ``<dl>``/``<dt>``/``<dd>`` lines (see :func:`definition_lists`),
    or None when it holds no ``<dd>`` (or cannot be read): then it stays as written."""
    try:
        from bs4 import BeautifulSoup
        from markdownify import MarkdownConverter

        soup = BeautifulSoup(f"<dl>{fragment}</dl>", "html.parser")
    except Exception:  # noqa: BLE001 - a list that cannot be read stays as written
        return None
    dl = soup.find("dl")
    if dl is None or dl.find("dd") is None:
        return None
    convert = MarkdownConverter(
        heading_style="ATX", bullets="-", escape_underscores=False, escape_asterisks=False, escape_misc=False
    ).convert
    out: list[str] = []
    terms: list[str] = []
    for el in dl.find_all(["dt", "dd"]):
        if el.find_parent("dd") is not None:
            continue  # a list inside a description: converted with it
        if el.name == "dt":
            for a in el.find_all("a"):
                a.unwrap()  # the option's own anchor: its name is the text
            terms.append(" ".join(convert(el.decode_contents()).split()))
            continue
        blocks = [b.strip("\n") for b in re.split(r"\n[ \t]*\n", convert(el.decode_contents())) if b.strip()]
        lead: list[str] = []
        while blocks and not _LIST_OR_BLOCK.match(blocks[0]):
            lead.append(" ".join(blocks.pop(0).split()))
        name = ", ".join(t for t in terms if t)
        terms = []
        first = " ".join(lead)
        if name.endswith("?") and first:  # an FAQ's question and its reply: the question in bold on its line
            out += [f"**{name}**", first, ""]
        else:
            head = f"{name}: {first}" if name and first else (f"{name}:" if name else first)
            out += [head, ""] if head else []
        for b in blocks:
            out += [*b.split("\n"), ""]
    if terms:
        out += [", ".join(terms), ""]
    return out[:-1] if out and out[-1] == "" else out


# block-level parse only (CommonMark: its reference definitions and its code blocks)
_BLOCKS = MarkdownIt("commonmark", {"html": True}).enable("table").disable(["inline", "text_join"])
_DEFINITION = re.compile(
    r"^[ \t]{0,3}\[([^\]]+)\]:[ \t]*<?([^\s>]+)>?(?:[ \t]+(?:\"[^\"]*\"|'[^']*'|\([^)]*\)))?[ \t]*$"
)
_FOOTNOTE_DEFINITION = re.compile(r"^([ \t]{0,3})\[\^[^\]\s]+\]:[ \t]*", re.M)
_FOOTNOTE_MARK = re.compile(r"\[\^[^\]\s]+\](?!:)")
# ``[text][label]``, ``[text][]`` or ``[text]`` not followed by ``(`` (an inline link) or ``:``
# (a definition), not right after a word, ``]`` or ``\`` (``x["a"]["b"]`` is an index, not a link);
# the text may hold one level of brackets and run over lines of one paragraph
_REFERENCE = re.compile(
    r"(?<![\w\]\\])(!?)\[((?:[^\[\]\\]|\\.|\[[^\[\]]*\])+?)\](?:\[([^\[\]\n]*)\](?![(\[])|(?![(:\[]))"
)
_INLINE_CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`).+?(?<!`)\1(?!`)", re.S)
_LABEL_LIKE = re.compile(r"[^\"'\s-][^\"']*", re.S)  # a name or a number, not a quoted key or "-1"


def resolve_references(text: str) -> str:
    """``text`` (Markdown) with its reference-style links written inline and footnotes unmarked.

    - ``[text][label]``, ``[text][]`` and ``[text]`` whose label (CommonMark's matching:
      case and runs of spaces ignored) a ``[label]: address`` line of the page defines become
      ``[text](address)`` (``![alt][label]`` likewise); the definition lines go.
    - ``[text][label]`` and ``[text][]`` with no definition in the page (a generator's site-wide
      link map, or addresses listed at the end) become ``text``: how the page reads when built;
      a ``[text]`` alone is left as it is (a checkbox, a literal bracket).
    - A link or image whose address no reader can follow (over
      :data:`~graphs.link_targets.MAX_URL_CHARS` characters, no address, ``data:``: defined
      inline or by a reference) becomes its text, such an autolink and such a bare address
      go (:func:`graphs.markdown_links.drop_unusable_targets`): a 70,000-character address
      or a megabyte of base64 would be dozens of chunks of junk.
    - Footnote markers ``[^1]`` go, and a footnote's definition ``[^1]: text`` stays as the
      paragraph ``text``.

    Code blocks (fenced or indented, markdown-it decides) and inline code spans are left
    byte for byte. Never raises."""
    if "[" not in text and "<" not in text and len(text) <= MAX_URL_CHARS:
        return text
    try:
        tokens = _BLOCKS.parse(text)
    except Exception:  # noqa: BLE001 - a page the parser cannot read keeps its links as written
        return text
    lines = text.split("\n")
    code = [False] * len(lines)
    for tok in tokens:
        if tok.type in ("fence", "code_block") and tok.map:
            for i in range(tok.map[0], min(tok.map[1], len(lines))):
                code[i] = True
    # the definitions, read line by line: generators (Hugo's goldmark, Python-Markdown) also take
    # one right after a paragraph or a footnote, where CommonMark reads it as the paragraph's text
    references: dict[str, str] = {}
    for at, line in enumerate(lines):
        d = None if code[at] else _DEFINITION.match(line)
        if d and not d.group(1).startswith("^"):
            references.setdefault(normalizeReference(d.group(1)), d.group(2))  # the first one counts
            lines[at], code[at] = "", True  # the definition is not text; nothing to resolve on its line
    out: list[str] = []
    i = 0
    while i < len(lines):  # runs of prose lines (whole paragraphs: a link may wrap) and of code lines
        j = i
        while j < len(lines) and code[j] == code[i]:
            j += 1
        run = "\n".join(lines[i:j])
        out.append(run if code[i] else _resolve_run(run, references))
        i = j
    return "\n".join(out)


def _resolve_run(text: str, references: dict[str, str]) -> str:
    """The rules of :func:`resolve_references` on prose (no code blocks); inline code spans
    are set aside first and put back after."""
    spans: list[str] = []

    def keep(m: re.Match[str]) -> str:
        spans.append(m.group(0))
        return f"\ue000{len(spans) - 1}\ue001"

    def back(s: str) -> str:
        return re.sub("\ue000(\\d+)\ue001", lambda m: spans[int(m.group(1))], s)

    text = _INLINE_CODE_SPAN.sub(keep, text)
    text = _FOOTNOTE_DEFINITION.sub(r"\1", text)
    text = _FOOTNOTE_MARK.sub("", text)

    def link(m: re.Match[str]) -> str:
        bang, body, label = m.group(1), m.group(2), m.group(3)
        if body.startswith("^"):
            return m.group(0)
        key = normalizeReference(back(label if label else body))
        ref = references.get(key) if key else None
        if ref is not None:
            # an address no reader can follow: the words (an image's alt text) stay
            return f"{bang}[{body}]({ref})" if usable_address(ref) else body
        if label is None:  # ``[text]`` alone, defined nowhere: not a link
            return m.group(0)
        words = back(body)
        if words.startswith(('"', "'")) or len(re.findall(r"\w", words)) < 2:
            return m.group(0)  # ``["messages"][0]``, ``[i][0]``: a key and an index, not a reference
        if not _LABEL_LIKE.fullmatch(back(label) or words):
            return m.group(0)
        return body

    for _ in range(2):  # twice: a reference inside another's text (a badge image in a link)
        text = _REFERENCE.sub(link, text)
    return back(drop_unusable_targets(text))


def _clean_lines(lines: list[str]) -> list[str]:
    out: list[str] = []
    fence: str | None = None  # the opening marker of the open fence, e.g. "```"
    in_comment = False
    in_alert: str | None = None  # the "> " prefix of a GitHub alert being unwrapped
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if fence:
            out.append(line)
            if fence_closes(line, fence):
                fence = None
            continue
        if in_comment:
            if "-->" not in line:
                continue
            line, in_comment = line.split("-->", 1)[1], False
            if not line.strip():
                continue
        if "<!--" in line:
            had_text = bool(line.strip())
            line, in_comment = _drop_comments(line)
            if had_text and not line.strip():
                continue
        if in_alert is not None:
            if line.lstrip().startswith(">"):
                out.append(re.sub(r"^[ \t]*>[ \t]?", "", line))
                continue
            in_alert = None
        if opened := fence_opens(line):
            fence = opened
            out.append(line)
            continue
        m = _RST_ADMONITION.match(line)
        if m:
            out += _rst_admonition(lines, i, m)
            while i < len(lines) and (not lines[i].strip() or _indent_width(lines[i]) > _indent_width(line)):
                i += 1
            while i > 0 and not lines[i - 1].strip():
                i -= 1
            continue
        m = _MKDOCS_ADMONITION.match(line)
        if m:
            indent, kind, head = m.group(1), m.group(2), m.group(3)
            width = len(indent.expandtabs(4)) + 4
            body: list[str] = []
            while i < len(lines) and (not lines[i].strip() or _indent_width(lines[i]) >= width):
                body.append(_dedent(lines[i], width))
                i += 1
            while body and not body[-1].strip():
                body.pop()
                i -= 1
            out.append(indent + _LABEL + _titled(kind, head))
            out += [indent + b if b.strip() else b for b in _clean_lines(body)]
            continue
        m = _COLON_FENCE.match(line)
        if m and line.strip().startswith(":::"):
            head = (m.group(1) or m.group(2) or "").strip()
            kind = _COLON_KIND.match(line)
            if kind and kind.group(1).lower() in COLON_KINDS:
                indent = line[: len(line) - len(line.lstrip())]
                end = _container_end(lines, i, len(line.strip()) - len(line.strip().lstrip(":")))
                body = lines[i:end]
                inner = min((_indent_width(b) for b in body if b.strip()), default=0)
                out.append(indent + _LABEL + _titled(kind.group(1), head))
                out += [indent + b if b.strip() else b for b in _clean_lines([_dedent(b, inner) for b in body])]
                i = min(end + 1, len(lines))
                continue
            if head:
                out.append(head)
            continue
        m = _GITHUB_ALERT.match(line)
        if m:
            in_alert = m.group(1)
            out.append(_LABEL + admonition_label(m.group(2)))
            if m.group(3).strip():
                out.append(m.group(3).strip())
            continue
        m = _HIDDEN_BLOCK.match(line)
        if m:
            close = f"</{m.group(1).lower()}"
            while close not in line.lower() and i < len(lines):
                line = lines[i]
                i += 1
            rest = line[line.lower().rfind(close) :].split(">", 1)[1] if close in line.lower() else ""
            if rest.strip():
                out.append(rest)
            continue  # a script or style sheet in the page: code the reader never sees
        only = _link_only(line)
        if only:
            marker, texts = only
            texts = [t for t in texts if t.strip()]
            before = lines[i - 2] if i >= 2 else ""
            after = lines[i] if i < len(lines) else ""
            if marker or not _stands_alone(before, after):
                # a list of links, or a link inside a paragraph: keep the titles, drop the addresses
                if texts:
                    out.append(line[: len(line) - len(line.lstrip())] + marker + ", ".join(texts))
            continue  # a line of its own holding only links or badges: navigation, not content
        out.append(line)
    return out


def _link_only(line: str) -> tuple[str, list[str]] | None:
    """``(list marker or "", the texts of its links)`` when ``line`` holds only links or
    images (badges, navigation; :func:`graphs.markdown_links.link_texts`), else None."""
    m = _LIST_MARK.match(line)
    rest = line[m.end() :] if m else line
    if not rest.startswith(("[", "![")):
        return None
    texts = link_texts(rest)
    return ((m.group(1) or "") if m else "", texts) if texts is not None else None


def _stands_alone(before: str, after: str) -> bool:
    """A line between these neighbours is a paragraph of its own (or part of a block of
    link-only lines), not a line inside a sentence."""
    return all(not n.strip() or _link_only(n) or n.lstrip().startswith(("#", "<")) for n in (before, after))


def _drop_comments(line: str) -> tuple[str, bool]:
    """``line`` without its HTML comments; True if a comment stays open at its end."""
    while "<!--" in line:
        before, rest = line.split("<!--", 1)
        if "-->" not in rest:
            return before, True
        line = before + rest.split("-->", 1)[1]
    return line, False


def _rst_admonition(lines: list[str], i: int, m: re.Match[str]) -> list[str]:
    """The lines of a reStructuredText admonition directive (``m``, matched on the line before
    ``lines[i]``) as Markdown: its label (:func:`admonition_label`; ``.. admonition:: Title``
    is labelled by its title, ``.. versionadded:: 2.1`` "New in version 2.1:"), then its
    text on the directive's line and its indented body, dedented to the directive's
    indentation (left indented, a nested note read as code), its options (``:class: tip``)
    left out; cleaned as any Markdown."""
    indent, kind, argument = m.group(1), m.group(2).lower(), m.group(3).strip()
    width = _indent_width(indent)
    body: list[str] = []
    while i < len(lines) and (not lines[i].strip() or _indent_width(lines[i]) > width):
        body.append(lines[i])
        i += 1
    inner = min((_indent_width(b) for b in body if b.strip()), default=width)
    body = [_dedent(b, inner) for b in body]
    while body and (not body[0].strip() or re.match(r"^:[\w-]+:", body[0])):
        body.pop(0)  # the directive's options, then the blank line before its content
    label = admonition_label(kind)
    if kind == "admonition":
        label, argument = (f"{argument}:" if argument else ""), ""
    elif kind in ("versionadded", "versionchanged", "deprecated") and argument:
        label, argument = f"{label[:-1]} {argument.split()[0]}:", " ".join(argument.split()[1:])
    text = ([argument] if argument else []) + body
    return [indent + _LABEL + label] + [indent + t if t.strip() else t for t in _clean_lines(text)] + [""]


def _titled(kind: str, title: str | None) -> str:
    """An admonition's label: its title when it has one (``:::info[Important]``, ``!!! note
    "Before you start"``: the box shows the title), else its kind (:func:`admonition_label`)."""
    title = " ".join((title or "").split()).rstrip(":")
    return f"{title}:" if title else admonition_label(kind)


def _container_end(lines: list[str], i: int, colons: int) -> int:
    """The index of the line closing the ``:::`` container whose body starts at ``lines[i]``
    (a line of ``colons`` or more colons alone, outside fenced code; a nested container with
    a kind is skipped whole), or ``len(lines)`` when it is never closed."""
    fence: str | None = None
    depth = 0
    while i < len(lines):
        line = lines[i]
        if fence:
            if fence_closes(line, fence):
                fence = None
        elif opened := fence_opens(line):
            fence = opened
        elif re.match(r"^[ \t]*:{3,}[ \t]*$", line):
            if depth == 0 and len(line.strip()) >= colons:
                return i
            depth = max(depth - 1, 0)
        elif _COLON_KIND.match(line):
            depth += 1
        i += 1
    return len(lines)


def _attach_labels(lines: list[str]) -> list[str]:
    """Each admonition's label (a line marked :data:`_LABEL`) put before the first line of text
    after it ("Warning: Deleting a project cannot be undone."), so the kind is read with the
    text wherever it is quoted; on a line of its own when a code block, table, heading or
    another label comes first, and dropped when nothing comes after it."""
    out: list[str] = []
    label: tuple[str, str] | None = None  # (indentation, label) waiting for its text
    for line in lines:
        stripped = line.lstrip()
        if stripped.startswith(_LABEL):
            if label is not None and label[1]:
                out.append(label[0] + label[1])
            label = (line[: len(line) - len(stripped)], stripped[len(_LABEL) :])
            continue
        if label is None or not stripped:
            out.append(line)
            continue
        if label[1]:
            if FENCE_RE.match(line) or stripped.startswith(("|", "#", "<")):
                out += [label[0] + label[1], ""]
                out.append(line)
            else:
                out.append(_labelled(line, label[1]))
        else:
            out.append(line)
        label = None
    return out


def _indent_width(line: str) -> int:
    """Columns of leading whitespace (a tab counts 4, as MkDocs reads it)."""
    lead = len(line) - len(line.lstrip(" \t"))
    return len(line[:lead].expandtabs(4))


def _dedent(line: str, width: int) -> str:
    """``line`` without its first ``width`` columns of leading whitespace (a tab counts
    up to the next multiple of 4); the rest of the line, tabs included, is kept as is."""
    col = idx = 0
    while col < width and idx < len(line) and line[idx] in " \t":
        col += 4 - col % 4 if line[idx] == "\t" else 1
        idx += 1
    return " " * max(col - width, 0) + line[idx:]
