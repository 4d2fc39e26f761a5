"""Help requests as every platform shows them: the words, the expiry, the note after a resume.

When the graph cannot ground an answer it pauses for a human (a LangGraph interrupt) and the
service posts a help request (:class:`bot.protocol.HelpRequest`); the platform shows it with
its buttons (Slack Block Kit, Discord components) and these words:

* :data:`HELP_LEAD` - what the mentions of the experts are followed by;
* :func:`how_to_answer` - the buttons, the text reply syntax (:data:`bot.chat.syntax.REPLY_SYNTAX`),
  who may answer (:func:`bot.chat.policy.may_answer_help`) and how long the request stays
  open (:func:`expiry_note`; ``[service] help_timeout_seconds`` or the request's own);
* :func:`handled_note` - what replaces the buttons once someone resumed the run, and
  :func:`done_note` - the private confirmation to that person.

What a click on its buttons or a submitted form does is :mod:`bot.interactions.help_replies`.
"""

from __future__ import annotations

from bot.chat.syntax import REPLY_SYNTAX
from bot.chat.text import Mention, Part
from bot.protocol import HumanAction

HELP_LEAD = "I couldn't find a reliable answer and need a hand with this question:"

# What a resume did, as "the help request was <verb>".
HANDLED_VERB = {
    HumanAction.ANSWER: "answered",
    HumanAction.RETRY: "sent back with a hint",
    HumanAction.DISMISS: "dismissed",
}


def duration(seconds: float) -> str:
    """``seconds`` for people: ``"1 h"``, ``"1.5 h"``, ``"20 min"``, ``"45 s"``; "" for 0 or less."""
    if seconds <= 0:
        return ""
    if seconds >= 3600:
        hours = seconds / 3600
        return f"{hours:g} h" if hours == int(hours) else f"{hours:.1f} h"
    if seconds >= 60:
        return f"{round(seconds / 60)} min"
    return f"{round(seconds)} s"


def expiry_note(open_for: str) -> str:
    """How long a help request stays open (Markdown), "" when it never expires.

    Args:
        open_for: :func:`duration` of the request's ``timeout_seconds``, else of
            ``[service] help_timeout_seconds`` ("" : no expiry).
    """
    if not open_for:
        return ""
    return f"This request stays open for {open_for}: without a reply within {open_for} I'll apologise to the asker."


def how_to_answer(where: str, open_for: str) -> str:
    """The instructions under a help request (Markdown): buttons, the reply syntax, who may
    answer and the expiry.

    Args:
        where: where a text reply goes, e.g. ``"in this thread"``.
        open_for: see :func:`expiry_note`.
    """
    text = (
        f"Use the buttons, or reply {where} with {REPLY_SYNTAX}. "
        "Only the experts named for this channel, or an admin, can do this."
    )
    expiry = expiry_note(open_for)
    return f"{text} {expiry}" if expiry else text


def handled_note(action: HumanAction | str, actor: Mention) -> list[Part]:
    """What the help request says once ``actor`` resumed it ("Help request answered by @x.")."""
    return ["Help request " + HANDLED_VERB[HumanAction(action)] + " by ", actor, "."]


def done_note(action: HumanAction | str) -> str:
    """The private confirmation to whoever resumed a help request."""
    return f"Done: the help request was {HANDLED_VERB[HumanAction(action)]}."
