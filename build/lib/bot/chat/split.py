"""One splitter for every platform: long text into messages under a size limit, code fences kept whole.

Slack (a section block's text: 3000 characters) and Discord (a message: 2000 UTF-16 code
units) both cap the text of one post, and both render a code fence only when it is closed
in the same post. :func:`split_text` is the one algorithm; the platforms pass their limit,
how they count (:data:`len`, or :func:`utf16_size` for Discord), their fence syntax and the
spans a cut must not fall into (Slack: ``<link|label>`` and ``&amp;`` entities):

* cuts prefer a blank line (paragraph) or the start of a code block in the second half of
  the piece, then any line end;
* a line longer than a piece is cut at a space (outside the protected spans), else anywhere
  outside them;
* a cut inside a fenced code block closes the fence at the end of the piece and reopens it
  (the same opener line, so a language tag survives) at the start of the next one;
* only whitespace at the cuts is lost; blank text gives ``[]``.

The fence rule (a closer uses the opener's character, at least as many of them, nothing
after) is CommonMark's (https://spec.commonmark.org/0.31.2/#fenced-code-blocks).
"""

from __future__ import annotations

import re
from collections.abc import Callable

# CommonMark fences: three or more backticks or tildes, up to three spaces of indent.
MARKDOWN_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})(.*)$")
# Slack mrkdwn knows only ``` blocks (no language tags; bot.platforms.slack.format drops them).
MRKDWN_FENCE = re.compile(r"^\s*(```)(.*)$")

Size = Callable[[str], int]


def utf16_size(text: str) -> int:
    """Length of ``text`` in UTF-16 code units (what Discord counts; never fewer than
    Python's code points, so an emoji-heavy text is not under-counted)."""
    return len(text.encode("utf-16-le")) // 2


def _cut_line(line: str, width: int, size: Size, protected: re.Pattern[str] | None) -> list[str]:
    """Cut one line longer than ``width`` into pieces of at most ``width``: at the last space
    in the second half that is outside a protected span, else at ``width`` moved back to
    the start of a protected span it would fall into. The space stays at the end of its
    piece, so joining the pieces gives back the line."""
    pieces: list[str] = []
    while size(line) > width:
        n = min(len(line), width)
        while size(line[:n]) > width:
            n -= 1
        spans = [m.span() for m in protected.finditer(line)] if protected else []
        cut = next((p for p in range(n, n // 2, -1) if line[p - 1] == " " and not any(a < p < b for a, b in spans)), -1)
        if cut < 0:
            cut = n
            for a, b in spans:
                if a < cut < b:
                    cut = a if a > 0 else min(b, n)
        pieces.append(line[:cut])
        line = line[cut:]
    pieces.append(line)
    return pieces


def split_text(
    text: str,
    limit: int,
    *,
    size: Size = len,
    fence: re.Pattern[str] = MARKDOWN_FENCE,
    protected: re.Pattern[str] | None = None,
    min_limit: int = 40,
) -> list[str]:
    """Split ``text`` into pieces of at most ``limit`` (as counted by ``size``), in order.

    Args:
        text: Markdown or Slack mrkdwn.
        limit: the most a piece may hold (Slack section: 3000 characters; Discord message:
            2000 UTF-16 units).
        size: how the platform counts (``len``, or :func:`utf16_size`).
        fence: a fence line; group 1 is the marker, group 2 what follows it
            (:data:`MARKDOWN_FENCE`, :data:`MRKDWN_FENCE`).
        protected: spans of a line a cut must not fall into (e.g. Slack links), or None.
        min_limit: smaller limits are refused (a piece must hold a fence pair and some text).

    Returns:
        Non-empty pieces; ``[]`` for blank text. Joining them (minus the added fence lines)
        gives back ``text`` except for whitespace at the cuts.

    Raises:
        ValueError: ``limit`` is below ``min_limit``.
    """
    if limit < min_limit:
        raise ValueError(f"limit {limit} is too small to split messages (at least {min_limit})")
    text = text.strip("\n")
    if not text.strip():
        return []
    if size(text) <= limit:
        return [text]

    def closer(opener: str) -> str:
        m = fence.match(opener)
        return m.group(1) if m else "```"

    raw = text.split("\n")
    longest_fence = max((size(ln.strip()) for ln in raw if fence.match(ln)), default=3)
    width = limit - 2 * (min(longest_fence, limit // 4) + 1)  # room for a reopened and a closing fence
    lines: list[str] = []
    for ln in raw:
        lines.extend(_cut_line(ln, width, size, protected) if size(ln) > width else [ln])

    # fence_before[i]: the opener line of the fence open before line i (None outside code)
    fence_before: list[str | None] = []
    opener: str | None = None
    for ln in lines:
        fence_before.append(opener)
        m = fence.match(ln)
        if m:
            if opener is None:
                opener = ln.strip()
            elif (
                m.group(1)[0] == closer(opener)[0] and len(m.group(1)) >= len(closer(opener)) and not m.group(2).strip()
            ):
                opener = None
    fence_before.append(opener)  # the state after the last line (an unclosed fence)

    sizes = [size(ln) for ln in lines]

    def wrap(start: int, end: int) -> int:
        """What a reopened and a closing fence add around lines[start:end]."""
        before, after = fence_before[start], fence_before[end]
        return (size(before) + 1 if before else 0) + (size(closer(after)) + 1 if after else 0)

    def piece(start: int, end: int) -> str:
        before, after = fence_before[start], fence_before[end]
        body = ([before] if before else []) + lines[start:end] + ([closer(after)] if after else [])
        joined = "\n".join(body)
        return joined if after else joined.rstrip()

    pieces: list[str] = []
    start, n = 0, len(lines)
    while start < n:
        while start < n and fence_before[start] is None and not lines[start].strip():
            start += 1  # blank lines at a cut outside code: only whitespace is dropped
        if start >= n:
            break
        end, body = start + 1, sizes[start]  # a single line always fits (lines were cut to `width`)
        while end < n and body + 1 + sizes[end] + wrap(start, end + 1) <= limit:
            body += 1 + sizes[end]
            end += 1
        if end < n:  # a better cut: a paragraph or a code block's start in the second half
            prefix = body
            for j in range(end, start + 1, -1):  # cut before line j
                if prefix + wrap(start, j) < limit // 2:
                    break
                prefix -= 1 + sizes[j - 1]
                outside = fence_before[j] is None
                paragraph = not lines[j - 1].strip() and fence_before[j - 1] is None
                if outside and (paragraph or fence.match(lines[j]) is not None):
                    end = j
                    break
        chunk = piece(start, end)
        if chunk.strip():
            pieces.append(chunk)
        start = end
    return pieces
