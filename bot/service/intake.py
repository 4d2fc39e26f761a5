"""What an incoming message is, read from its text alone (no storage, no platform call):
no words, too long, ``remember:``, an admin command, an expert's reply to a help request,
or a question. The same reading serves the acknowledgement on receipt and the dispatch.
"""

from __future__ import annotations

import enum
from collections.abc import Callable

from bot.chat.syntax import has_words, parse_human_reply, parse_remember


class Kind(str, enum.Enum):
    """What a message is (see :meth:`Intake.kind`)."""

    NO_WORDS = "no_words"
    TOO_LONG = "too_long"
    REMEMBER = "remember"
    COMMAND = "command"
    HELP_REPLY = "help_reply"
    QUESTION = "question"


class Intake:
    """Reads messages.

    Args:
        max_question_characters: ``[service] max_question_characters``: longer messages get a
            polite refusal (they would not fit the model's context window).
        empty_question_reply: ``[service] empty_question_reply``: the reply to a message with no words.
        command_of: text -> the admin command it is, or None
            (:meth:`bot.admin.AdminCommands.parse`).
    """

    def __init__(
        self, *, max_question_characters: int, empty_question_reply: str, command_of: Callable[[str], str | None]
    ) -> None:
        self.max_question_characters = max_question_characters
        self.empty_question_reply = empty_question_reply
        self.command_of = command_of

    def kind(self, text: str) -> Kind:
        """What ``text`` is: :attr:`Kind.NO_WORDS` (:func:`bot.chat.syntax.has_words`),
        :attr:`Kind.TOO_LONG`, :attr:`Kind.REMEMBER`, :attr:`Kind.COMMAND`,
        :attr:`Kind.HELP_REPLY` (the syntax only: whether the thread waits for an expert and
        whether the author is one is decided later) or :attr:`Kind.QUESTION`."""
        text = text.strip()
        if not has_words(text):
            return Kind.NO_WORDS
        if len(text) > self.max_question_characters:
            return Kind.TOO_LONG
        if parse_remember(text) is not None:
            return Kind.REMEMBER
        if self.command_of(text):
            return Kind.COMMAND
        if parse_human_reply(text) is not None:
            return Kind.HELP_REPLY
        return Kind.QUESTION

    def too_long_notice(self, characters: int) -> str:
        """The polite refusal of a message of ``characters`` characters."""
        return (
            f"That message is too long for me ({characters:,} characters; the limit is "
            f"{self.max_question_characters:,}). Please shorten it or ask about one part at a time."
        )
