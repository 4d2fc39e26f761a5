"""The file formats a knowledge source reads: the one table of name endings.

:mod:`graphs.knowledge.convert` converts by it, a ``files`` source (``[[sources]]`` and the
command line's ``--source DIR``) and a ``git`` source list files by it, and
``[[sources]] patterns`` defaults to it. It lives outside :mod:`graphs.knowledge` so that
reading the settings (:mod:`bot.config`) does not load the index's libraries.
"""

from __future__ import annotations

TEXT_SUFFIXES = {
    ".md": "markdown",
    ".markdown": "markdown",
    ".mdx": "mdx",
    ".txt": "text",
    ".text": "text",
    ".rst": "rst",
}
"""Endings of text read as it is, and how (Markdown, MDX with its components, plain text,
reStructuredText: its roles and substitutions shown as their words)."""
HTML_SUFFIXES = (".html", ".htm", ".xhtml")
OFFICE_SUFFIXES = (".pdf", ".docx", ".pptx", ".xlsx")
SUPPORTED_SUFFIXES = frozenset(TEXT_SUFFIXES) | frozenset(HTML_SUFFIXES) | frozenset(OFFICE_SUFFIXES)
"""File name endings a knowledge source reads (lower case)."""
FILE_PATTERNS = tuple(f"**/*{s}" for s in (*TEXT_SUFFIXES, *HTML_SUFFIXES, *OFFICE_SUFFIXES))
"""The globs of a folder's files that a ``files`` source reads by default: every supported format."""
