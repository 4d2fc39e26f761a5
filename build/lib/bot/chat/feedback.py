"""Answer feedback shared by every platform: the 👍 / 👎 controls' words and what a vote says back.

Every answer (not an apology) carries its ``answer_id`` (:attr:`bot.protocol.Answer.answer_id`);
the platform shows two controls (Slack Block Kit buttons, Discord persistent buttons, the
console's ``/good`` and ``/bad [reason]``). A click records the vote at once through
:meth:`bot.service.ChatService.vote` (one vote per user per answer, the latest counts); a 👎
then asks privately for an optional reason (Slack and Discord: a modal), saved with the vote,
and offers privately to ask the experts (:meth:`bot.service.ChatService.escalate`: a help
request in the answer's thread; the expert's answer is learned like any other).
Votes are summarised and exported by ``threadwise feedback`` (:mod:`bot.feedback`).

The handling is written here once: :func:`on_vote`, :func:`on_reason` and :func:`on_escalate`
take a small typed value (:class:`VoteClick`, :class:`ReasonGiven`, :class:`EscalateClick`)
parsed by the adapter from its payload, and the adapter's :class:`FeedbackControls` to show
the outcome (Slack: ephemeral messages and modals; Discord: interaction replies and modals).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from bot.chat.policy import OUTSIDER_REFUSAL
from bot.chat.threads import parse_thread_key
from bot.logs import for_thread

log = logging.getLogger(__name__)

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


# ---- the shared handling of a vote, its reason and "Ask the experts" ---------------------------
# Adapters parse the platform's payload into one of these values, call the handler, and give it
# their :class:`FeedbackControls` (transport only: how to tell the user, open the reason form,
# show the offer). The order of the steps and what is said are decided here, once.


@dataclass(frozen=True)
class VoteClick:
    """A 👍 / 👎 click under an answer.

    Attributes:
        answer_id: the control's value (checked with :func:`is_answer_id`: values come from the user's client).
        user_id: the voter's platform user id. vote: :data:`UP` or :data:`DOWN`.
        outsider: the voter is from another organisation (:func:`bot.chat.policy.is_outsider`).
    """

    answer_id: str
    user_id: str
    vote: int
    outsider: bool = False


@dataclass(frozen=True)
class ReasonGiven:
    """The 👎 reason form was submitted (``reason`` as typed, possibly empty)."""

    answer_id: str
    user_id: str
    reason: str


@dataclass(frozen=True)
class EscalateClick:
    """ "Ask the experts" was clicked after a 👎 (``user_name``: the display name shown to experts)."""

    answer_id: str
    user_id: str
    user_name: str
    outsider: bool = False


class FeedbackControls(Protocol):
    """What an adapter does for the feedback handlers: transport only, every call private to the user.

    ``reason_first`` (attribute): True where the reason form must be the click's one reply and so
    opens *before* the vote is recorded (Discord: an interaction is answered once, within 3 s);
    then the thanks and the offer to ask the experts come with the form's submission. False
    (Slack): the form opens once the vote is recorded, with the offer next to it; its
    submission only stores the reason.
    """

    reason_first: bool

    async def acknowledge(self) -> None:
        """Acknowledge a click that the reason form does not answer (before slow work)."""

    async def tell(self, text: str) -> None:
        """A private note (Markdown) to the user."""

    async def ask_reason(self, answer_id: str) -> bool:
        """Open the optional-reason form; False when it could not be opened."""

    async def offer_experts(self, answer_id: str, text: str) -> None:
        """A private note ``text`` with the "Ask the experts" control for ``answer_id``."""


async def on_vote(service: Any, click: VoteClick, controls: FeedbackControls) -> bool:
    """Record a 👍 / 👎 (one per user and answer, the latest counts) and say what follows.

    A forged value is ignored; an outsider is refused (:data:`~bot.chat.policy.OUTSIDER_REFUSAL`);
    a 👎 opens the optional-reason form (see :class:`FeedbackControls` for when) and, where
    the form does not come first and human review is on, offers to ask the experts; every
    other outcome is told privately (:func:`vote_reply`).

    Args:
        service: the :class:`~bot.service.ChatService` (``vote``, ``human_review``).

    Returns:
        True when the vote was recorded. Never raises for a bad value.
    """
    if not is_answer_id(click.answer_id):
        log.info("vote with a foreign value ignored (user %s)", click.user_id)
        return False
    if click.outsider:
        log.info("vote on answer %s by %s refused: outside the workspace", click.answer_id, click.user_id)
        await controls.tell(OUTSIDER_REFUSAL)
        return False
    down = click.vote == DOWN
    if down and controls.reason_first:
        await controls.ask_reason(click.answer_id)
    else:
        await controls.acknowledge()
    ok = await service.vote(click.answer_id, click.user_id, click.vote)
    if ok and down and controls.reason_first:
        return True  # the form is the reply; its submission brings the thanks and the offer
    if ok and down and await controls.ask_reason(click.answer_id):
        if service.human_review:
            await controls.offer_experts(click.answer_id, ESCALATE_OFFER)
        return True  # the form is the private reply
    await controls.tell(vote_reply(ok, click.vote))
    return ok


async def on_reason(service: Any, given: ReasonGiven, controls: FeedbackControls) -> bool:
    """Store a 👎's reason (cut to :data:`REASON_MAX_CHARACTERS`; empty keeps the vote and any
    earlier reason). Where the form came first (:attr:`FeedbackControls.reason_first`), the
    submission is answered: thanks, and the offer to ask the experts when human review is on.

    Returns:
        True when the vote was recorded.
    """
    if not is_answer_id(given.answer_id):
        log.info("vote reason with a foreign value ignored (user %s)", given.user_id)
        return False
    reason = given.reason.strip()[:REASON_MAX_CHARACTERS]
    if controls.reason_first:
        await controls.acknowledge()
    ok = await service.vote(given.answer_id, given.user_id, DOWN, reason or None)
    if not controls.reason_first:
        return ok  # the offer came with the form
    text = vote_reply(ok, DOWN, reason=reason)
    if ok and service.human_review:
        await controls.offer_experts(given.answer_id, f"{text}\n{ESCALATE_OFFER}")
    else:
        await controls.tell(text)
    return ok


NOT_FOUND = "I can't find that answer any more."


async def on_escalate(
    service: Any,
    click: EscalateClick,
    controls: FeedbackControls,
    *,
    platform: str,
    responder_for: Callable[[dict[str, Any]], Any],
) -> bool:
    """ "Ask the experts" after a 👎: a help request in the answer's own thread
    (:meth:`bot.service.ChatService.escalate`, which tells the user privately when it cannot).

    Args:
        platform: the adapter's platform; an answer given on another platform is not found.
        responder_for: the answer's record (``thread_key``, ``channel``...) -> a responder
            writing to its thread and telling ``click.user_id`` privately; only called for a
            thread key of ``platform`` (:func:`bot.chat.threads.parse_thread_key`).

    Returns:
        True when a help request was posted.
    """
    await controls.acknowledge()
    if click.outsider:
        log.info("asking the experts about %s by %s refused: outside the workspace", click.answer_id, click.user_id)
        await controls.tell(OUTSIDER_REFUSAL)
        return False
    record = await service.store.answer_record(click.answer_id) if is_answer_id(click.answer_id) else None
    key = parse_thread_key(str(record["thread_key"])) if record else None
    if record is None or key is None or key.platform != platform:
        await controls.tell(NOT_FOUND)
        return False
    log.info("answer %s sent to the experts by %s", click.answer_id, click.user_id, extra=for_thread(str(key)))
    return bool(
        await service.escalate(
            click.answer_id, actor_id=click.user_id, actor_name=click.user_name, out=responder_for(record)
        )
    )
