"""A reply to a help request by button or form, on every platform: who is refused (and with
which words), when the form opens, and the one post-resume step (resume once, then close the
help request message).

* :func:`on_help_click` - a click on Answer / Retry with hint / Dismiss, or a submitted form
  (:class:`HelpClick`): refuse (an outsider, or neither expert nor admin: :func:`refusal`),
  open the form, or resume. Adapters parse the payload and lend their transport (:class:`HelpControls`);
* :func:`resume` - resume the run through :meth:`bot.service.ChatService.resume`, then show
  :func:`bot.chat.help.handled_note` on the help request.

Text replies (``answer: ...`` in the thread) reach the same service method through
:meth:`bot.service.ChatService.handle`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from bot.chat.help import done_note, handled_note
from bot.chat.policy import OUTSIDER_REFUSAL, help_refusal, may_answer_help
from bot.chat.text import Mention, Part
from bot.logs import for_thread
from bot.protocol import HumanAction, Responder
from bot.service import ChatService

log = logging.getLogger(__name__)


CloseHelpRequest = Callable[[list[Part]], Awaitable[None]]


async def resume(
    service: ChatService,
    thread_key: str,
    action: HumanAction | str,
    text: str,
    *,
    actor: Mention,
    actor_name: str,
    allowed: bool,
    out: Responder,
    interrupt_id: str = "",
    channel: str = "",
    close: CloseHelpRequest | None = None,
    confirm: bool = False,
) -> bool:
    """Resume a paused run from a button or modal, then close its help request: the one
    post-resume step of every platform.

    Args:
        service: the :class:`~bot.service.ChatService` (its ``resume`` claims the help
            request exactly once and refuses those not ``allowed``, privately).
        thread_key, action, text, interrupt_id, channel: what to resume, as for ``resume``.
        actor: who clicked (user mention). actor_name: their display name.
        allowed: :func:`bot.chat.policy.may_answer_help` for the actor.
        out: the responder (``notify_private`` reaches the actor only).
        close: the platform's edit of the help request message (buttons removed, the
            :func:`handled_note` shown); failures are the platform's to log. None: no message to edit.
        confirm: also tell the actor :func:`done_note` privately (platforms whose
            interaction must be answered, e.g. a deferred Discord button).

    Returns:
        True if this call resumed the run.
    """
    resumed = await service.resume(
        thread_key,
        HumanAction(action),
        text,
        actor_id=actor.id,
        actor_name=actor_name,
        is_expert=allowed,
        out=out,
        interrupt_id=interrupt_id or None,
        channel=channel,
    )
    if not resumed:  # the service told the actor privately why
        return False
    if close is not None:
        await close(handled_note(action, actor))
    if confirm:
        await out.notify_private(done_note(action))
    return True


# ---- a click on a help request's buttons, or its submitted form ---------------------------------
# Adapters parse the payload into a HelpClick, and lend their transport (HelpControls); whether
# the click is refused (and with which words), opens the form or resumes is decided here, once.


@dataclass(frozen=True)
class HelpClick:
    """A click on a help request's Answer / Retry with hint / Dismiss button, or its submitted form.

    Attributes:
        action: the button's (or the form's) :class:`~bot.protocol.HumanAction`.
        thread_key: the paused conversation. user_id: who clicked (platform user id).
        expert: the user is one of the channel's experts. admin: one of the bot's admins.
        outsider: the user is from another organisation (:func:`bot.chat.policy.is_outsider`).
        experts: the channel's experts, named in the refusal (:class:`~bot.chat.text.Mention` s
            built from configured ids, never from user text).
        text: the form's text (None: a button click, not a form).
    """

    action: HumanAction
    thread_key: str
    user_id: str
    expert: bool = False
    admin: bool = False
    outsider: bool = False
    experts: Sequence[Mention] = ()
    text: str | None = None


class HelpControls(Protocol):
    """What an adapter does for :func:`on_help_click`: transport only."""

    async def tell(self, text: list[Part]) -> None:
        """A private note to the user who clicked (text parts and mentions)."""

    async def open_form(self, action: HumanAction) -> None:
        """Open the Answer / Retry form (the adapter tells the user itself when it cannot)."""

    async def resume(self, action: HumanAction, text: str) -> None:
        """Resume the run (:func:`resume`, with ``allowed`` True)."""


def refusal(click: HelpClick) -> list[Part]:
    """What a user who may not use a help request is told: :data:`~bot.chat.policy.OUTSIDER_REFUSAL`
    for an outsider, else :func:`~bot.chat.policy.help_refusal` naming the channel's experts;
    an empty list when the user may use it."""
    if click.outsider:
        return [OUTSIDER_REFUSAL]
    if may_answer_help(expert=click.expert, admin=click.admin):
        return []
    return help_refusal(click.experts)


async def on_help_click(click: HelpClick, controls: HelpControls) -> bool:
    """Handle a help request's button or form, on every platform the same way.

    Outsiders and those neither expert nor admin are refused privately (:func:`refusal`);
    Dismiss and a submitted form resume the run at once; Answer and Retry with hint open the form.

    Returns:
        True unless the click was refused.
    """
    refused = refusal(click)
    if refused:
        log.info(
            "help request %s by %s refused (%s)",
            click.action.value,
            click.user_id,
            "outside the workspace" if click.outsider else "neither expert nor admin",
            extra=for_thread(click.thread_key),
        )
        await controls.tell(refused)
        return False
    if click.text is None and click.action is not HumanAction.DISMISS:
        await controls.open_form(click.action)
    else:
        await controls.resume(click.action, click.text or "")
    return True
