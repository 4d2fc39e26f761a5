"""A message from outside the organisation the bot serves (Slack Connect, another guild,
:func:`bot.chat.policy.is_outsider`) gets one polite refusal and no answer."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from bot.chat.policy import OUTSIDER_REFUSAL
from bot.service import ChatService


async def refuse_outsider_once(
    service: ChatService, message_id: str, thread_key: str, say: Callable[[str], Awaitable[None]]
) -> bool:
    """Refuse an outsider's message once: a redelivery (Slack retries, the Slack mention and
    its twin message event, a Discord gateway replay) is not refused again. No LLM call.

    Args:
        service: the service (:meth:`~bot.service.ChatService.mark_handled`: the same dedup
            record as answered messages, persisted across restarts).
        message_id: the platform message id (``slack:<channel>:<ts>``, ``discord:<id>``).
        say: the platform's way to tell the author (:data:`~bot.chat.policy.OUTSIDER_REFUSAL` is passed).

    Returns:
        True when this call refused it (False: refused before).
    """
    if not await service.mark_handled(message_id, thread_key):
        return False
    await say(OUTSIDER_REFUSAL)
    return True
