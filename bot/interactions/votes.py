"""A vote, its reason and "Ask the experts", on every platform.

Adapters parse the platform's payload into a small typed value (:class:`VoteClick`,
:class:`ReasonGiven`, :class:`EscalateClick`), call the handler (:func:`on_vote`,
:func:`on_reason`, :func:`on_escalate`), and lend their transport
(:class:`FeedbackControls`: Slack ephemeral messages and modals, Discord interaction
replies and modals). The order of the steps and what is said are decided here, once; the
words are :mod:`bot.chat.vote_controls`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from bot.chat.policy import OUTSIDER_REFUSAL
from bot.chat.threads import parse_thread_key
from bot.chat.vote_controls import DOWN, ESCALATE_OFFER, NOT_FOUND, REASON_MAX_CHARACTERS, is_answer_id, vote_reply
from bot.logs import for_thread
from bot.protocol import Responder
from bot.service import ChatService

log = logging.getLogger(__name__)


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


async def on_vote(service: ChatService, click: VoteClick, controls: FeedbackControls) -> bool:
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


async def on_reason(service: ChatService, given: ReasonGiven, controls: FeedbackControls) -> bool:
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


async def on_escalate(
    service: ChatService,
    click: EscalateClick,
    controls: FeedbackControls,
    *,
    platform: str,
    responder_for: Callable[[dict[str, Any]], Responder],
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
    record = await service.answer_record(click.answer_id) if is_answer_id(click.answer_id) else None
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
