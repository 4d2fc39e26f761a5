"""Text conversion for Slack: incoming Slack text -> plain question, Markdown -> mrkdwn, splitting.

Slack's own markup ("mrkdwn", https://docs.slack.dev/messaging/formatting-message-text)
differs from the Markdown a model writes: ``*bold*`` instead of ``**bold**``,
``_italic_``, ``~strike~``, ``<url|label>`` links, no headings, no language tag on code
fences, and ``&``, ``<``, ``>`` must be sent escaped as ``&amp;``, ``&lt;``, ``&gt;``
(everywhere, code included; a leading ``>`` quote marker stays literal).

Limits (Block Kit reference, https://docs.slack.dev/reference/block-kit/blocks):
a section block's text holds at most 3000 characters and a message at most 50 blocks.
:func:`split_mrkdwn` cuts text into sections under a limit with the shared splitter
(:mod:`bot.chat.split`), so every section renders on its own.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from bot.chat.split import MRKDWN_FENCE, split_text
from bot.chat.text import Mention, Part, break_broadcasts, break_emoji_codes, compose, link_target, replace_links

FENCE = "```"
_FENCE_LINE = re.compile(r"^\s*(```|~~~)(.*)$")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")
_RULE = re.compile(r"^\s{0,3}([-*_])(\s*\1){2,}\s*$")
_BULLET = re.compile(r"^(\s*)[-*+]\s+(.*)$")
_TASK = re.compile(r"^\[( |x|X)\]\s+(.*)$")
_QUOTE = re.compile(r"^(\s*(?:>\s?)+)(.*)$")
_INLINE_CODE = re.compile(r"(`+)(.+?)\1")
# no "|" in it: ``<https://x|label>`` is Slack's masked link, shown as text, never a link
_AUTOLINK = re.compile(r"<((?:https?|mailto):[^>\s|]+)>")
_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*|(?<![\w_])__(?=\S)(.+?)(?<=\S)__(?![\w_])")
_ITALIC_STAR = re.compile(r"(?<![\w*])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?![\w*])")
_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")
# a Markdown backslash escape (``\[draft\]``) shows its character; mrkdwn has no escapes, so those
# of emphasis (``\*``, ``\_``, ``\~``, ``\```) are left as written rather than become formatting
_ESCAPED = re.compile(r"\\([!\"#$%&'()+,\-./:;<=>?@\[\\\]^{|}])")
_PLACEHOLDER = re.compile("\x02(\\d+)\x03")
_BOLD_MARK = "\x01"
_PROTECTED = re.compile(r"<[^<>\n]*>|&[a-z]+;")  # links and entities: a cut never falls inside

# incoming Slack text: <@U123>, <@U123|name>, <#C1|general>, <!here>, <!subteam^S1|@team>, <url|label>
_SLACK_TOKEN = re.compile(r"<([^<>\n]+)>")


def escape_code(text: str) -> str:
    """Escape the three characters Slack treats as markup: ``&``, ``<``, ``>`` (for code and
    link targets: Slack shows code as written, emoji codes included)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def escape(text: str) -> str:
    """Text from people, documents or models as mrkdwn prose that shows as written: ``&``,
    ``<``, ``>`` escaped (:func:`escape_code`), so ``<@U1>``, ``<!channel>``, ``<#C1>`` and
    ``<https://x|label>`` are text, and every emoji code ``:name:`` broken
    (:func:`bot.chat.text.break_emoji_codes`), so ``:x:`` is not an emoji."""
    return break_emoji_codes(escape_code(text))


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
    target = escape_code(target.replace("|", "%7C").replace(" ", "%20"))
    if not label or label == url:
        return f"<{target}>"
    return f"<{target}|{break_broadcasts(escape(label.replace('|', '/')))}>"


# what Slack shows as text: text objects, attachment fields, image alt texts
_SHOWN_KEYS = frozenset({"text", "alt_text", "fallback", "pretext", "title", "footer", "author_name"})
_JSON_KEYS = frozenset({"blocks", "attachments", "view"})  # sent as JSON strings in form posts
_BROADCAST_MARKUP = re.compile(r"<!(channel|here|everyone)(?:\|[^>]*)?>", re.I)


def inert_text(text: str) -> str:
    """``text`` (mrkdwn or plain text) with no broadcast left: ``<!channel>``, ``<!here>``
    and ``<!everyone>`` markup become the words, and every ``@channel`` / ``@here`` /
    ``@everyone`` is broken (:func:`bot.chat.text.break_broadcasts`). Idempotent; other
    markup (the mentions we build, links) is kept."""
    return break_broadcasts(_BROADCAST_MARKUP.sub(lambda m: "@" + m.group(1), text))


def inert_payload(value: Any) -> Any:
    """A Web API request's arguments with every text Slack shows passed through
    :func:`inert_text` (a new structure; ids, values and metadata unchanged). Applied to
    every call by :class:`bot.platforms.slack.client.InertWebClient`, so no post, update,
    ephemeral message or view can carry a broadcast, whatever built its text."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if key in _SHOWN_KEYS and isinstance(item, str):
                out[key] = inert_text(item)
            elif key in _JSON_KEYS and isinstance(item, str) and item[:1] in ("[", "{"):
                out[key] = json.dumps(inert_payload(json.loads(item)))
            else:
                out[key] = inert_payload(item)
        return out
    if isinstance(value, list):
        return [inert_payload(item) for item in value]
    return value


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
            return label or target[len("mailto:") :]
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
        return keep("`" + escape_code(match.group(2).strip("`")) + "`")

    text = text.replace("\x01", "").replace("\x02", "").replace("\x03", "")
    text = _INLINE_CODE.sub(code, text)
    text = replace_links(text, lambda url, words: keep(slack_link(url, words)))
    text = _ESCAPED.sub(r"\1", text)
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
                out.append(escape_code(line))
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


def split_mrkdwn(text: str, limit: int) -> list[str]:
    """Split mrkdwn into pieces of at most ``limit`` characters, in order (the shared
    :func:`bot.chat.split.split_text` with Slack's rules: ``` fences, never a cut inside a
    ``<link>`` or an ``&amp;`` entity).

    Args:
        text: mrkdwn (e.g. from :func:`markdown_to_mrkdwn`).
        limit: maximum characters per piece (Slack section text: 3000); at least 100.

    Raises:
        ValueError: ``limit`` is below 100.
    """
    return split_text(text, limit, fence=MRKDWN_FENCE, protected=_PROTECTED, min_limit=100)
