"""How the bot reads a message before it is a question: the words in it, and the syntax
of what people say *to* the bot rather than ask it.

* :func:`has_words` - the one definition of a message with no words (it gets the empty-question
  reply on every platform and entry path, with no model call);
* :data:`REPLY_SYNTAX` / :func:`parse_human_reply` - an expert's text reply to a help request,
  shown (help requests, ``help``) and parsed here only;
* :func:`parse_remember` - ``remember: <text>``, an expert teaching the bot in a thread.
"""

from __future__ import annotations

import re
import unicodedata

from bot.protocol import HumanAction

# What is not words although it is made of letters: platform mention and channel markup
# (Slack ``<@U1|ann>``, ``<!channel>``, ``<#C1|general>``; Discord ``<@1>``, ``<@!1>``,
# ``<@&1>``, ``<#1>``, custom emoji ``<:name:1>`` / ``<a:name:1>``), mentions as the adapters
# render them (``@ann``, ``#general`` at the start of a word) and emoji shortcodes
# (``:slightly_smiling_face:``, ``:+1::skin-tone-2:``).
_NOT_WORDS = re.compile(r"<[@#!][^<>]*>|<a?:\w+:\d+>|(?<!\S)[@#][\w.\-]+|:[\w+\-']+:")


def has_words(text: str) -> bool:
    """True when ``text`` holds a letter or a digit of any script once mentions, channel
    links and emoji shortcodes are removed.

    A message of only emoji, symbols, punctuation, mentions, lone surrogates (they reach
    us as U+FFFD, a symbol, through :func:`bot.protocol.clean_text`) or control characters
    has no words: there is nothing to search for or answer, so it gets the empty-question
    reply (``[service] empty_question_reply``) and never reaches the model. "Letter or
    digit" is the Unicode general category L* or N* (so 日本, Ωμέγα, ٣ and ² count).
    """
    return any(unicodedata.category(ch)[0] in "LN" for ch in _NOT_WORDS.sub(" ", text or ""))


# The help-request reply syntax: how it is shown (Markdown; escaped like any other text by
# the renderers) and how it is read (parse_human_reply).
REPLY_SYNTAX = "`answer: <your answer>`, `retry: <a hint for a new search>` or `dismiss`"
_REPLY_RE = re.compile(r"^\s*(?:(answer|retry)\s*:\s*(.*)|(dismiss)\s*[:.!]?\s*)$", re.I | re.S)

#: What an expert is told when a message in a thread waiting for them is not in the reply syntax.
REPLY_HINT = f"This thread is waiting for an expert. Reply with {REPLY_SYNTAX}."

#: The reply to a message in the reply syntax in a thread that waits for no expert (nothing is
#: searched or saved: an answer to no question would be asked as a question, or learned as one).
NOTHING_WAITING = (
    "Nothing in this thread is waiting for an expert's answer, so I neither searched nor saved anything. To ask me, "
    "write just the question; to teach me the answer to this thread's question, write `remember: <the answer>`."
)


def parse_human_reply(text: str) -> tuple[HumanAction, str] | None:
    """Parse an expert's text reply to a help request (:data:`REPLY_SYNTAX`).

    ``answer: ...`` / ``retry: ...`` (with the colon) or ``dismiss`` alone
    (case-insensitive). Returns ``(action, text)``, or None for any other text (chatter
    such as "let me check" must not become the answer).
    """
    m = _REPLY_RE.match(text)
    if not m:
        return None
    if m.group(3):
        return HumanAction.DISMISS, ""
    return HumanAction(m.group(1).lower()), m.group(2).strip()


def is_help_reply(text: str) -> bool:
    """True when ``text`` is in the help-request reply syntax: such a message in a
    conversation is for the bot whatever the reply policy (:mod:`bot.chat.policy`)."""
    return parse_human_reply(text) is not None


_REMEMBER_RE = re.compile(r"^\s*/?remember\s*:\s*(.*)$", re.I | re.S)


def parse_remember(text: str) -> str | None:
    """The text of a ``remember: <text>`` message (also ``/remember:``), else None; ``""`` for a
    bare ``remember:``, which is still the command (answered with how to use it), not a question."""
    m = _REMEMBER_RE.match(text)
    return m.group(1).strip() if m else None
