"""Finding source files and removing what is not content from Markdown.

:func:`clean_markdown` removes YAML/TOML front matter (keeping its ``title``), HTML
comments, admonition markers (MkDocs ``!!! note``/``??? note``, Docusaurus/VuePress
``:::tip`` ... ``:::``, GitHub ``> [!NOTE]``) while keeping the admonitions' content,
link-only lines standing alone (navigation, badges, "edit this page"; in a list or inside
a paragraph only the addresses go) and reference link definitions.
Fenced code is never touched.
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Sequence
from pathlib import Path

import yaml

from graphs.knowledge.common import KnowledgeBaseError


def discover_files(sources: Sequence[str | Path], patterns: Sequence[str]) -> list[tuple[Path, str]]:
    """List the files to index.

    Args:
        sources: folders (every file matching ``patterns`` below them) or glob patterns
            or single files.
        patterns: glob patterns relative to a source folder, e.g. ``"**/*.md"``.

    Returns:
        ``(absolute path, display path)`` pairs, sorted; the display path is relative to
        its source folder.

    Raises:
        KnowledgeBaseError: a source matches nothing that exists.
    """
    found: dict[str, str] = {}
    for src in sources:
        p = Path(src).expanduser()
        if p.is_dir():
            # absolute, not resolved: realpath() makes system calls for every file, slow on large
            # folders; glob.glob on strings, not Path.glob: a third of the time on 100,000 files
            base = os.path.abspath(p)
            for pat in patterns:
                for rel in glob.glob(pat, root_dir=base, recursive=True, include_hidden=True):
                    full = os.path.join(base, rel)
                    if os.path.isfile(full):
                        found.setdefault(full, rel.replace(os.sep, "/"))
        elif p.is_file():
            found.setdefault(os.path.abspath(p), p.name)
        else:
            matches = [Path(m) for m in glob.glob(str(p), recursive=True)]
            if not matches:
                raise KnowledgeBaseError(
                    f"knowledge source not found: {src} (a path in config.toml is relative to "
                    "the config file's folder, one given with --source to the current folder)"
                )
            for f in matches:
                if f.is_file():
                    found.setdefault(os.path.abspath(f), f.name)
    return sorted(((Path(k), v) for k, v in found.items()), key=lambda kv: kv[1])


_FRONT_MATTER = re.compile(r"\A\ufeff?(---|\+\+\+)[ \t]*\n(.*?)\n(?:---|\.\.\.|\+\+\+)[ \t]*(?:\n|\Z)", re.S)
FENCE_RE = re.compile(r"^([ \t>]*)(`{3,}|~{3,})(.*)$")
_MKDOCS_ADMONITION = re.compile(r"^([ \t]*)(?:!!!|\?\?\?\+?)[ \t]+[\w-]+(?:[ \t]+\"(.*)\")?[ \t]*$")
_COLON_FENCE = re.compile(r"^[ \t]*:{3,}[ \t]*(?:[\w-]+)?[ \t]*(?:\[(.*)\]|(.*?))[ \t]*(?:\{.*\})?[ \t]*$")
_GITHUB_ALERT = re.compile(r"^([ \t]*>[ \t]*)\[!(?:NOTE|TIP|IMPORTANT|WARNING|CAUTION)\][ \t]*(.*)$", re.I)
_LINK = r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\([^)]*\)"
_LINK_ONLY = re.compile(rf"^[ \t]*((?:[-*+]|\d+[.)])[ \t]+)?((?:{_LINK}[ \t|·•,;–-]*)+)$")
_LINK_TEXT = re.compile(r"!?\[((?:[^\[\]]|\[[^\]]*\])*)\]\([^)]*\)")
_LINK_DEFINITION = re.compile(r"^[ \t]{0,3}\[[^\]]+\]:[ \t]*\S+.*$")


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
        byte for byte; admonition bodies are de-indented by the 4 spaces MkDocs requires.
    """
    title, text = front_matter_title(text.replace("\r\n", "\n").replace("\r", "\n"))
    return title, "\n".join(_clean_lines(text.split("\n")))


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
            m = FENCE_RE.match(line)
            if m and m.group(2)[0] == fence[0] and len(m.group(2)) >= len(fence) and not m.group(3).strip():
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
        m = FENCE_RE.match(line)
        if m and not (m.group(2)[0] == "`" and "`" in m.group(3)):  # CommonMark: no backtick in the info
            fence = m.group(2)
            out.append(line)
            continue
        m = _MKDOCS_ADMONITION.match(line)
        if m:
            indent, head = m.group(1), m.group(2)
            width = len(indent.expandtabs(4)) + 4
            body: list[str] = []
            while i < len(lines) and (not lines[i].strip() or _indent_width(lines[i]) >= width):
                body.append(_dedent(lines[i], width))
                i += 1
            while body and not body[-1].strip():
                body.pop()
                i -= 1
            if head and head.strip():
                out.append(indent + head.strip())
                out.append("")
            out += [indent + b if b.strip() else b for b in _clean_lines(body)]
            continue
        m = _COLON_FENCE.match(line)
        if m and line.strip().startswith(":::"):
            head = (m.group(1) or m.group(2) or "").strip()
            if head:
                out.append(head)
            continue
        m = _GITHUB_ALERT.match(line)
        if m:
            in_alert = m.group(1)
            if m.group(2).strip():
                out.append(m.group(2).strip())
            continue
        m = _LINK_ONLY.match(line)
        if m:
            texts = [t for t in (_link_text(x) for x in re.findall(_LINK, m.group(2))) if t.strip()]
            before = lines[i - 2] if i >= 2 else ""
            after = lines[i] if i < len(lines) else ""
            if m.group(1) or not _stands_alone(before, after):
                # a list of links, or a link inside a paragraph: keep the titles, drop the addresses
                if texts:
                    out.append(line[: len(line) - len(line.lstrip())] + (m.group(1) or "") + ", ".join(texts))
            continue  # a line of its own holding only links or badges: navigation, not content
        if _LINK_DEFINITION.match(line):
            continue
        out.append(line)
    return out


def _stands_alone(before: str, after: str) -> bool:
    """A line between these neighbours is a paragraph of its own (or part of a block of
    link-only lines), not a line inside a sentence."""
    return all(not n.strip() or _LINK_ONLY.match(n) or n.lstrip().startswith(("#", "<")) for n in (before, after))


def _link_text(link: str) -> str:
    """The visible text of a Markdown link or image (nested badge links unwrapped)."""
    prev = None
    while prev != link:
        prev, link = link, _LINK_TEXT.sub(r"\1", link)
    return link.strip()


def _drop_comments(line: str) -> tuple[str, bool]:
    """``line`` without its HTML comments; True if a comment stays open at its end."""
    while "<!--" in line:
        before, rest = line.split("<!--", 1)
        if "-->" not in rest:
            return before, True
        line = before + rest.split("-->", 1)[1]
    return line, False


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
