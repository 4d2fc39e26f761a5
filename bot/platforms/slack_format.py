"""Text conversion for Slack: incoming Slack text -> plain question, Markdown -> mrkdwn, splitting.

Slack's own markup ("mrkdwn", https://docs.slack.dev/messaging/formatting-message-text)
differs from the Markdown a model writes: ``*bold*`` instead of ``**bold**``,
``_italic_``, ``~strike~``, ``<url|label>`` links, no headings, no language tag on code
fences, and ``&``, ``<``, ``>`` must be sent escaped as ``&amp;``, ``&lt;``, ``&gt;``
(everywhere, code included; a leading ``>`` quote marker stays literal).

Limits (Block Kit reference, https://docs.slack.dev/reference/block-kit/blocks):
a section block's text holds at most 3000 characters and a message at most 50 blocks.
:func:`split_mrkdwn` cuts text into sections under a limit, preferring paragraph
breaks, then line breaks, then spaces; a code fence open at a cut is closed at the end
of the section and reopened at the start of the next one, so every section renders on
its own. Nothing is dropped except the blank line at a paragraph cut.
"""

from __future__ import annotations

import re
from typing import Iterable

from bot.chat.text import Mention, Part, break_broadcasts, compose, link_target

FENCE = "```"
_FENCE_LINE = re.compile(r"^\s*(```|~~~)(.*)$")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")
_RULE = re.compile(r"^\s{0,3}([-*_])(\s*\1){2,}\s*$")
_BULLET = re.compile(r"^(\s*)[-*+]\s+(.*)$")
_TASK = re.compile(r"^\[( |x|X)\]\s+(.*)$")
_QUOTE = re.compile(r"^(\s*(?:>\s?)+)(.*)$")
_INLINE_CODE = re.compile(r"(`+)(.+?)\1")
_MD_LINK = re.compile(r"!?\[([^\]\n]*)\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_AUTOLINK = re.compile(r"<((?:https?|mailto):[^>\s]+)>")
_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*|(?<![\w_])__(?=\S)(.+?)(?<=\S)__(?![\w_])")
_ITALIC_STAR = re.compile(r"(?<![\w*])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?![\w*])")
_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")
_PLACEHOLDER = re.compile("\x02(\\d+)\x03")
_BOLD_MARK = "\x01"

# incoming Slack text: <@U123>, <@U123|name>, <#C1|general>, <!here>, <!subteam^S1|@team>, <url|label>
_SLACK_TOKEN = re.compile(r"<([^<>\n]+)>")


def escape(text: str) -> str:
    """Escape the three characters Slack treats as markup: ``&``, ``<``, ``>``."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


_SLACK_ID = re.compile(r"^[A-Z0-9]{2,30}$")


def slack_mention(mention: Mention) -> str:
    """The mrkdwn of a mention we mean: ``<@U1>`` (user) or ``<!subteam^S1>`` (user group).

    Ids are checked (upper-case letters and digits only); anything else is shown escaped,
    so a malformed id in config.toml can never become other markup.
    """
    raw = mention.id.strip().lstrip("@")
    if not _SLACK_ID.match(raw):
        return escape(mention.id)
    if mention.kind == "group" or (mention.kind != "user" and raw.startswith("S")):
        return f"<!subteam^{raw}>"
    return f"<@{raw}>"


def to_mrkdwn(text: str | Iterable[Part]) -> str:
    """Markdown parts (escaped and converted by :func:`markdown_to_mrkdwn`) and
    :class:`~bot.chat.text.Mention` parts (built by :func:`slack_mention`) as mrkdwn."""
    return compose(text, render=markdown_to_mrkdwn, mention=slack_mention)


def slack_link(url: str, label: str = "") -> str:
    """``<url|label>`` for a link target we allow (http, https, mailto), else the escaped
    text ``label (url)``: a target like ``!channel`` or ``@U1`` never becomes markup."""
    target = link_target(url)
    label = label.strip()
    if target is None:
        shown = url if not label or label == url else f"{label} ({url})"
        return break_broadcasts(escape(shown))
    target = escape(target.replace("|", "%7C"))
    if not label or label == url:
        return f"<{target}>"
    return f"<{target}|{break_broadcasts(escape(label.replace('|', '/')))}>"


def incoming_text(text: str, bot_user_id: str = "") -> str:
    """Turn the text of a Slack message into a plain question.

    Removes mentions of the bot (``<@BOT>``), renders other mentions, channels and links
    readably (``<@U1|ann>`` -> ``@ann``, ``<#C1|general>`` -> ``#general``,
    ``<https://x|docs>`` -> ``docs (https://x)``), then undoes Slack's escapes
    (``&amp;`` ``&lt;`` ``&gt;``). Leading/trailing whitespace is stripped.

    Args:
        text: the ``text`` field of a message or app_mention event (may be empty).
        bot_user_id: the bot's user id (``U...``) whose mentions are removed.
    """

    def render(match: re.Match[str]) -> str:
        body = match.group(1)
        target, _, label = body.partition("|")
        if target.startswith("@"):
            if bot_user_id and target[1:] == bot_user_id:
                return ""
            return "@" + (label or target[1:])
        if target.startswith("#"):
            return "#" + (label or target[1:])
        if target.startswith("!"):
            name = target[1:]
            if name.startswith("subteam^"):
                return label or "@" + name.split("^", 1)[1]
            return label or "@" + name.split("^", 1)[0]
        if target.startswith("mailto:"):
            return label or target[len("mailto:"):]
        if label and label != target:
            return f"{label} ({target})"
        return target

    rendered = _SLACK_TOKEN.sub(render, text or "")
    rendered = rendered.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    return re.sub(r"[ \t]{2,}", " ", rendered).strip()


def _convert_inline(text: str) -> str:
    """Convert emphasis and links of one line of Markdown (outside code) to escaped mrkdwn."""
    saved: list[str] = []

    def keep(value: str) -> str:
        saved.append(value)
        return f"\x02{len(saved) - 1}\x03"

    def code(match: re.Match[str]) -> str:
        return keep("`" + escape(match.group(2).strip("`")) + "`")

    def link(match: re.Match[str]) -> str:
        return keep(slack_link(match.group(2), match.group(1)))

    text = text.replace("\x01", "").replace("\x02", "").replace("\x03", "")
    text = _INLINE_CODE.sub(code, text)
    text = _MD_LINK.sub(link, text)
    text = _AUTOLINK.sub(lambda m: keep(slack_link(m.group(1))), text)
    text = break_broadcasts(escape(text))
    text = _BOLD.sub(lambda m: _BOLD_MARK + (m.group(1) or m.group(2)) + _BOLD_MARK, text)
    text = _ITALIC_STAR.sub(lambda m: "_" + m.group(1) + "_", text)
    text = _STRIKE.sub(lambda m: "~" + m.group(1) + "~", text)
    text = text.replace(_BOLD_MARK, "*")
    while _PLACEHOLDER.search(text):  # links may hold code placeholders
        text = _PLACEHOLDER.sub(lambda m: saved[int(m.group(1))], text)
    return text


def markdown_to_mrkdwn(markdown: str) -> str:
    """Convert a model's Markdown answer to Slack mrkdwn.

    Bold, italic, strikethrough, links, images (as links), headings (bold lines), bullet
    and task lists (``•``, ``☐``/``☑``), rules and quotes are converted; code fences and
    inline code are kept verbatim apart from Slack's escaping, and a fence's language tag
    is dropped (Slack would print it as code). An unclosed fence is closed at the end.
    """
    out: list[str] = []
    in_fence = False
    for line in (markdown or "").replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        fence = _FENCE_LINE.match(line)
        if in_fence:
            if fence and not fence.group(2).strip():
                out.append(FENCE)
                in_fence = False
            else:
                out.append(escape(line))
            continue
        if fence:
            out.append(FENCE)
            in_fence = True
            continue
        if m := _HEADING.match(line):
            title = _convert_inline(m.group(1)).strip()
            out.append(f"*{title.strip('*')}*" if title else "")
        elif _RULE.match(line):
            out.append("──────────")
        elif m := _BULLET.match(line):
            indent, item = m.group(1), m.group(2)
            if t := _TASK.match(item):
                mark = "☑" if t.group(1).lower() == "x" else "☐"
                out.append(f"{indent}{mark} {_convert_inline(t.group(2))}")
            else:
                out.append(f"{indent}• {_convert_inline(item)}")
        elif m := _QUOTE.match(line):
            marker = ">" if m.group(1).strip() else ""
            out.append(f"{marker} {_convert_inline(m.group(2))}".rstrip() if marker else _convert_inline(line))
        else:
            out.append(_convert_inline(line))
    if in_fence:
        out.append(FENCE)
    return "\n".join(out).strip("\n")


def _protected_spans(line: str) -> list[tuple[int, int]]:
    """Spans a cut must not fall into: ``<...>`` links and ``&...;`` entities."""
    return [m.span() for m in re.finditer(r"<[^<>\n]*>|&[a-z]+;", line)]


def _cut_long_line(line: str, width: int) -> list[str]:
    """Cut one over-long line into pieces of at most ``width`` characters, at spaces if possible."""
    pieces: list[str] = []
    while len(line) > width:
        spans = _protected_spans(line)
        cut = -1
        for pos in range(width, width // 2, -1):
            if line[pos - 1] == " " and not any(a < pos < b for a, b in spans):
                cut = pos
                break
        if cut < 0:
            cut = width
            for a, b in spans:
                if a < cut < b:
                    cut = a if a > 0 else min(b, width)
        pieces.append(line[:cut].rstrip(" ") or line[:cut])
        line = line[cut:]
    pieces.append(line)
    return pieces


def split_mrkdwn(text: str, limit: int) -> list[str]:
    """Split mrkdwn into pieces of at most ``limit`` characters, in order.

    Prefers to cut at a blank line (paragraph), then at a line break; a single line
    longer than a section is cut at a space (never inside a ``<link>`` or ``&amp;``).
    When a cut falls inside a code fence, the piece gets a closing fence and the next
    piece starts with an opening fence, so every piece has balanced fences.

    Args:
        text: mrkdwn (e.g. from :func:`markdown_to_mrkdwn`).
        limit: maximum characters per piece (Slack section text: 3000); at least 100.

    Returns:
        Non-empty pieces; ``[]`` for blank text.

    Raises:
        ValueError: ``limit`` is below 100.
    """
    if limit < 100:
        raise ValueError("limit must be at least 100 characters")
    reserve = 2 * (len(FENCE) + 1)  # a reopened fence at the start + a closing fence at the end
    lines: list[str] = []
    for line in text.split("\n"):
        lines.extend(_cut_long_line(line, limit - reserve) if len(line) > limit - reserve else [line])

    pieces: list[str] = []
    current: list[tuple[str, bool]] = []  # (line, inside a fence after this line)
    reopened = False  # the current piece starts inside a fence
    in_fence = False

    def size(items: list[tuple[str, bool]], starts_open: bool) -> int:
        body = [FENCE] * starts_open + [line for line, _ in items]
        if items and items[-1][1]:
            body.append(FENCE)
        return len("\n".join(body))

    def flush(upto: int) -> None:
        nonlocal current, reopened
        head, tail = current[:upto], current[upto:]
        while tail and not tail[0][0].strip() and not (head and head[-1][1]):
            tail = tail[1:]  # the blank line at a paragraph cut
        body = [FENCE] * reopened + [line for line, _ in head]
        ends_open = bool(head) and head[-1][1]
        if ends_open:
            body.append(FENCE)
        piece = "\n".join(body).strip("\n")
        if piece.strip() and piece.strip() != FENCE + "\n" + FENCE:
            pieces.append(piece)
        reopened = ends_open if head else reopened
        current = tail

    for line in lines:
        fence = _FENCE_LINE.match(line)
        if fence and (not in_fence or not fence.group(2).strip()):
            in_fence = not in_fence
        current.append((line, in_fence))
        while size(current, reopened) > limit and len(current) > 1:
            # best cut: the last blank line outside a fence in the second half, else the line before
            cut = len(current) - 1
            for i in range(len(current) - 1, 0, -1):
                line_i, open_i = current[i]
                if not line_i.strip() and not open_i and size(current[:i], reopened) >= limit // 2:
                    cut = i
                    break
            flush(cut)
    if current:
        flush(len(current))
    return pieces
