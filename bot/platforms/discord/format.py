"""Text for Discord: questions in, answers and help requests out.

Discord renders (a subset of) Markdown itself, so answers need little conversion; what it
does not take is messages over 2000 characters ("content: Must be 2000 or fewer in
length", https://discord.com/developers/docs/resources/message#create-message). This module:

* turns a message's text into a question (bot mentions ``<@id>`` / ``<@!id>`` / its role stripped),
* names a thread from a question (Discord: 1-100 characters),
* renders an :class:`~bot.protocol.Answer` with its sources and route note,
* shows text from people, documents and models as written (:func:`inert_markdown`: no
  mention, channel link, custom emoji, timestamp or emoji code of Discord's acts in it),
* renders a :class:`~bot.protocol.HelpRequest`,
* splits long text into messages of at most ``limit`` characters, in order, at paragraph or
  line boundaries, closing a code fence at a cut and reopening it (with its language) in the
  next message, so nothing but whitespace at the cuts is lost.

Lengths are counted in UTF-16 code units (what Discord's clients count; never fewer than
Python's code points), so an emoji-heavy answer is not rejected.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from typing import Any

from bot.chat import sources
from bot.chat.help import HELP_LEAD, how_to_answer
from bot.chat.sources import SourceLine
from bot.chat.split import MARKDOWN_FENCE, split_text, utf16_size
from bot.chat.text import WORD_JOINER, break_broadcasts, break_emoji_codes
from bot.protocol import Answer, HelpRequest

DISCORD_MESSAGE_LIMIT = 2000  # characters per message (Discord API: Create Message)
DISCORD_THREAD_NAME_LIMIT = 100  # characters per thread name (Discord API: Start Thread from Message)

_FENCE = MARKDOWN_FENCE
_HEADING = re.compile(r"^(\s{0,3})#{4,6}\s+(.*?)\s*#*\s*$")  # Discord renders only #, ##, ###


size = utf16_size  # how Discord counts a message's length


# what Discord shows as text: a message, an embed, a component, a modal, a thread's name
_SHOWN_KEYS = frozenset({"content", "title", "description", "label", "placeholder", "text", "name"})


def inert_payload(value: Any) -> Any:
    """A REST request's JSON with every text Discord shows made inert: ``@everyone`` and
    ``@here`` broken (:func:`bot.chat.text.break_broadcasts`); the mentions we build
    (``<@id>``, ``<@&id>``) stay, and ping only whom the send's ``allowed_mentions`` names.
    Applied to every request discord.py sends (:mod:`bot.platforms.discord.patches`)."""
    if isinstance(value, dict):
        return {
            key: break_broadcasts(item) if key in _SHOWN_KEYS and isinstance(item, str) else inert_payload(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [inert_payload(item) for item in value]
    return value


# Discord's markup in angle brackets: mentions <@1> <@!1> <@&1>, channels <#1>, slash commands
# </name:1>, custom emoji <:name:1> <a:name:1>, timestamps <t:1:R>, guide links <id:browse>
_DISCORD_MARKUP = re.compile(r"<(?=[@#:/]|a:|t:|id:)")
_INLINE_CODE = re.compile(r"(`+)(.+?)\1")


def _map_prose_lines(markdown: str, fn: Callable[[str], str]) -> str:
    """``markdown`` with ``fn`` applied to each line outside fenced code blocks (the fences
    and the code between them are left as written)."""
    out: list[str] = []
    in_code = False
    for line in markdown.split("\n"):
        if _FENCE.match(line):
            in_code = not in_code
        elif not in_code:
            line = fn(line)
        out.append(line)
    return "\n".join(out)


def _inert_prose(text: str) -> str:
    text = _DISCORD_MARKUP.sub("<" + WORD_JOINER, text)
    return break_emoji_codes(text)


def inert_markdown(markdown: str) -> str:
    """Markdown from people, documents or models as Discord shows it literally: a word joiner
    after the ``<`` of Discord's markup (``<@1>``, ``<@&1>``, ``<#1>``, ``</cmd:1>``,
    ``<:name:1>``, ``<t:1:R>``) and after the first colon of an emoji code (``:x:``,
    :func:`bot.chat.text.break_emoji_codes`), so it reads the same and is neither a mention
    (which ``allowed_mentions`` would keep from pinging but not from showing as one), nor
    an emoji, nor a timestamp. Code blocks and inline code are left as written (Discord
    shows them so)."""

    def inert_line(line: str) -> str:
        parts, at = [], 0
        for m in _INLINE_CODE.finditer(line):
            parts += [_inert_prose(line[at : m.start()]), m.group(0)]
            at = m.end()
        return "".join([*parts, _inert_prose(line[at:])])

    return _map_prose_lines(markdown, inert_line)


def inert_form(form: Any) -> Any:
    """discord.py's multipart form (a list of parts) with its ``payload_json`` part made inert."""
    if not isinstance(form, list):
        return form
    out = []
    for part in form:
        if isinstance(part, dict) and part.get("name") == "payload_json" and isinstance(part.get("value"), str):
            part = {**part, "value": json.dumps(inert_payload(json.loads(part["value"])))}
        out.append(part)
    return out


def strip_mentions(text: str, user_ids: Iterable[int], role_ids: Iterable[int] = ()) -> str:
    """Remove mentions of the given users (both ``<@id>`` and the nickname form ``<@!id>``)
    and roles (``<@&id>``).

    Args:
        text: raw message content.
        user_ids: ids whose mentions are removed (the bot's own id).
        role_ids: role ids whose mentions are removed (the bot's managed role).
    Returns:
        The text without those mentions, with whitespace runs inside lines collapsed and
        the whole stripped; newlines are kept (they matter for code blocks).
    """
    for uid in user_ids:
        text = re.sub(rf"<@!?{int(uid)}>", " ", text)
    for rid in role_ids:
        text = text.replace(f"<@&{int(rid)}>", " ")
    lines = [re.sub(r"[ \t]{2,}", " ", line).rstrip() for line in text.split("\n")]
    return "\n".join(lines).strip()


def thread_name(question: str, limit: int = 90) -> str:
    """A thread name from a question: its first non-empty line, without Markdown markers.

    Args:
        question: the question text (mentions already stripped).
        limit: maximum characters (config ``discord.thread_name_characters``, capped at
            Discord's 100).
    Returns:
        1..limit characters; cut at a word boundary with an ellipsis when too long;
        ``"Question"`` when nothing usable is left.
    """
    limit = max(10, min(limit, DISCORD_THREAD_NAME_LIMIT))
    first = next((ln.strip() for ln in question.splitlines() if ln.strip() and not _FENCE.match(ln)), "")
    first = re.sub(r"[`*_~|>#]+", "", first)
    first = re.sub(r"<[@#][!&]?\d+>", "", first)  # other mentions read badly in a thread title
    first = re.sub(r"\s+", " ", first).strip()
    if not first:
        return "Question"
    if size(first) <= limit:
        return first
    cut = first[: limit - 1]
    while size(cut) > limit - 1:
        cut = cut[:-1]
    if " " in cut[limit // 2 :]:
        cut = cut[: cut.rfind(" ")]
    return cut.rstrip(" ,.;:-") + "…"


def to_discord_markdown(markdown: str) -> str:
    """Adapt a model's Markdown to what Discord renders: headings deeper than ``###``
    become bold lines (Discord shows ``####`` literally); code blocks are left untouched."""

    def heading(line: str) -> str:
        m = _HEADING.match(line)
        return f"{m.group(1)}**{m.group(2)}**" if m else line

    return _map_prose_lines(markdown, heading)


def _source_line(src: SourceLine) -> str:
    label = inert_markdown(src.label.replace("[", "(").replace("]", ")").strip())
    if src.is_url:
        return f"{src.number}. [{label}](<{src.location}>)"
    return f"{src.number}. {label} — `{src.location}`" if src.title else f"{src.number}. `{label}`"


def format_sources(answer: Answer) -> str:
    """The sources block (:mod:`bot.chat.sources`): numbered like the answer's citations.

    URLs become masked links in angle brackets (no embed preview); file paths are shown as
    code. Followed by the route note as Discord subtext (``-# ...``).
    """
    lines = sources.render(answer, _source_line, lambda heading: f"**{heading}**")
    note = sources.footer(answer).note
    if note:
        lines.append(f"-# {inert_markdown(note)}")  # it may name the person who answered
    return "\n".join(lines)


def format_answer(answer: Answer, limit: int = DISCORD_MESSAGE_LIMIT) -> list[str]:
    """Render an answer (text + sources + route note) as Discord messages of at most ``limit``.

    Returns:
        One or more non-empty message texts, in posting order.
    """
    body = to_discord_markdown(inert_markdown(answer.text.strip())) or "…"
    tail = format_sources(answer)
    text = f"{body}\n\n{tail}" if tail else body
    return split_message(text, limit)


def format_help_request(
    request: HelpRequest, mentions: str, limit: int = DISCORD_MESSAGE_LIMIT, open_for: str = ""
) -> str:
    """Render a help request as one message of at most ``limit`` characters, in the shared
    words (:mod:`bot.chat.help`).

    Args:
        request: what the graph could not answer and why.
        mentions: the expert mentions (``<@&role> <@user>``), may be empty.
        limit: message limit; the question and attempts are shortened to fit.
        open_for: how long the request stays open (:func:`bot.chat.help.duration`); "" : not said.
    """
    question = inert_markdown(request.question.strip()) or "(no question text)"
    head = f"🙋 {mentions + ' ' if mentions else ''}{HELP_LEAD}"
    how = how_to_answer("in this thread (or to this message)", open_for)
    attempts = [inert_markdown(a.strip()) for a in request.attempts if a.strip()][:8]

    def render(q: str, tried: list[str]) -> str:
        parts = [head, "", "> " + q.replace("\n", "\n> ")]
        if request.reason:
            parts += ["", f"**Why:** {inert_markdown(request.reason.strip())}"]
        if tried:
            parts += ["**Tried:**"] + [f"- {a}" for a in tried]
        parts += ["", how]
        return "\n".join(parts)

    text = render(question, attempts)
    while size(text) > limit and attempts:
        attempts = attempts[:-1]
        text = render(question, attempts)
    if size(text) > limit:
        room = max(20, len(question) - (size(text) - limit) - 1)
        text = render(question[:room].rstrip() + "…", [])
    return text[:limit] if size(text) > limit else text


def split_message(text: str, limit: int = DISCORD_MESSAGE_LIMIT) -> list[str]:
    """Split ``text`` into messages of at most ``limit`` UTF-16 units (Discord's limit is
    2000, Create Message): the shared :func:`bot.chat.split.split_text` with CommonMark
    fences (reopened with their language).

    Raises:
        ValueError: ``limit`` is too small to hold a fence pair and some text (< 40).
    """
    return split_text(text, limit, size=size)
