"""The 👍 / 👎 controls under an answer, as every platform shows them: their words, what a
vote says back, and the check of the answer id a control carries.

Every answer (not an apology) carries its ``answer_id`` (:attr:`bot.protocol.Answer.answer_id`);
the platform shows two controls (Slack Block Kit buttons, Discord persistent buttons, the
console's ``/good`` and ``/bad [reason]``). A click records the vote at once through
:meth:`bot.service.ChatService.vote` (one vote per user per answer, the latest counts); a 👎
then asks privately for an optional reason (Slack and Discord: a modal), saved with the vote,
and offers privately to ask the experts (:meth:`bot.service.ChatService.escalate`: a help
request in the answer's thread; the expert's answer is learned like any other).
Votes are summarised and exported by ``threadwise feedback`` (:mod:`bot.vote_report`).

What a click does is written once in :mod:`bot.interactions.votes`.
"""

from __future__ import annotations

import re

UP, DOWN = 1, -1
UP_LABEL = "👍"
DOWN_LABEL = "👎"
# Slack modal titles hold at most 24 characters (Block Kit reference); Discord's 45.
REASON_TITLE = "What was wrong?"
REASON_LABEL = "What was wrong with this answer? (optional)"
REASON_PLACEHOLDER = "e.g. the setting is called X now; the page it cited is outdated"
REASON_MAX_CHARACTERS = 1000
ESCALATE_LABEL = "Ask the experts"
ESCALATE_OFFER = "Should an expert look at this question? They are asked in the thread, and their answer is kept."
ANSWER_ID = re.compile(r"[0-9a-f]{6,32}")


def vote_reply(recorded: bool, vote: int, *, reason: str | None = None) -> str:
    """The private note after a vote (Markdown).

    Args:
        recorded: what :meth:`~bot.service.ChatService.vote` returned.
        vote: +1 or -1. reason: the 👎 reason just given (None: none was asked for yet).
    """
    if not recorded:
        return "Sorry, I couldn't record that vote (the answer is no longer known). Nothing was changed."
    if vote > 0:
        return "Thanks for the 👍: noted. You can change your vote any time."
    if reason:
        return "Thanks: your 👎 and the reason were recorded; the team reviews these to improve the answers."
    return "Thanks for the 👎: noted. The team reviews these to improve the answers."


def is_answer_id(text: str) -> bool:
    """True if ``text`` looks like an answer id we issued (lowercase hex, 6 to 32 characters)."""
    return bool(ANSWER_ID.fullmatch(text or ""))


NOT_FOUND = "I can't find that answer any more."
