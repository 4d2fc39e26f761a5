"""One rule for the text we post: what comes from people and models is data.

Text parts (answers, questions, reasons, our own notices) go through the platform's
renderer, which escapes everything that could act (Slack: ``&``, ``<``, ``>``); the
mentions we mean (experts in a help request, the user we refuse) are :class:`Mention`
parts, rendered by the platform's mention builder *after* the text is escaped, from ids
we validate. A model or a document therefore never produces ``<!channel>``, ``<@U…>``,
``<#C…>`` or ``<!subteam^…>``: links are only made for the schemes in
:data:`LINK_SCHEMES`, and broadcast words (``@channel``, ``@here``, ``@everyone``) are
broken with a word joiner so no client or setting turns them into a ping. Emoji codes
(``:x:``, ``:warning:``) in text are broken the same way (:func:`break_emoji_codes`): a
document that says ``:x:`` shows the colons and the word, not a red cross.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

from graphs.markdown_links import link_at, plain_links

# Link targets that may become a clickable link; anything else (``!channel``, ``@U1``,
# ``#C1``, ``!subteam^S1``, relative paths) is shown as text.
LINK_SCHEMES = ("http://", "https://", "mailto:")
WORD_JOINER = "\u2060"  # invisible, joins nothing: text reads the same, markup does not form
_BROADCAST = re.compile(r"(?<![\w@])@(channel|here|everyone)\b", re.I)
# ``:name:`` as Slack, Discord and Rich read an emoji code: letters, digits, ``_+-'``; a name of
# digits only is a time or a ratio ("10:30:00"), except the emoji 100 and 1234
_EMOJI_CODE = re.compile(r":(?=(?!\d+:)[\w+'-]+:|(?:100|1234):)")


@dataclass(frozen=True)
class Mention:
    """A mention the bot means to make (never built from user, document or model text).

    Attributes:
        id: a platform id (Slack ``U…``/``W…`` user, ``S…`` user group; Discord snowflake).
        kind: ``"user"``, ``"group"`` (Slack user group) or ``"role"`` (Discord role).
    """

    id: str
    kind: Literal["user", "group", "role"] = "user"


Part = str | Mention


def parts_of(text: str | Iterable[Part]) -> list[Part]:
    """``text`` as a list of parts (a plain string is one text part)."""
    return [text] if isinstance(text, str) else list(text)


def compose(text: str | Iterable[Part], *, render: Callable[[str], str], mention: Callable[[Mention], str]) -> str:
    """Render text parts with ``render`` (the platform's escaping Markdown converter) and
    :class:`Mention` parts with ``mention`` (the platform's mention builder), in order."""
    return "".join(mention(p) if isinstance(p, Mention) else render(p) for p in parts_of(text))


def link_target(url: str) -> str | None:
    """``url`` if it may become a link (http, https, mailto), else None (show it as text)."""
    u = url.strip()
    return u if u.lower().startswith(LINK_SCHEMES) and len(u) > len("mailto:") else None


def break_broadcasts(text: str) -> str:
    """Insert a word joiner into ``@channel`` / ``@here`` / ``@everyone`` (any case), so the
    word reads the same but can never become a broadcast ping."""
    return _BROADCAST.sub(lambda m: "@" + WORD_JOINER + m.group(1), text)


def break_emoji_codes(text: str) -> str:
    """Insert a word joiner after the first colon of every emoji code ``:name:`` (``:x:``,
    ``:warning:``, ``:+1:``, ``:100:``), so it reads the same but no client shows an emoji for
    it; a time such as ``10:30:00`` is left as it is. For prose only: code shows its text as
    written and is passed over by the callers."""
    return _EMOJI_CODE.sub(":" + WORD_JOINER, text)


def replace_links(markdown: str, render: Callable[[str, str], str]) -> str:
    """``markdown`` with each inline link and image replaced by ``render(address, words)``
    (an image's words are its alt text; a badge image inside a link gives the link its alt
    text). Links are scanned as CommonMark reads them (:func:`graphs.markdown_links.link_at`),
    so an address with parentheses (``https://en.wikipedia.org/wiki/Raft_(algorithm)``) is
    one link, not a link and a stray ``)``; an escaped ``\\[`` starts none. Set code spans aside
    first: a link inside one is text."""
    out: list[str] = []
    at, i = 0, markdown.find("[")
    while i >= 0:
        start = i - 1 if i and markdown[i - 1] == "!" else i
        backslashes = len(markdown[:start]) - len(markdown[:start].rstrip("\\"))
        found = None if backslashes % 2 else link_at(markdown, start)  # ``\[x](y)`` is text
        if found is None:
            i = markdown.find("[", i + 1)
            continue
        out += [markdown[at:start], render(found.url, plain_links(found.text))]
        at = found.end
        i = markdown.find("[", at)
    return "".join([*out, markdown[at:]])
