"""``/threadwise <words>`` on every platform: who may run it, which command it is, what runs.

The adapter parses its payload (a Slack slash command's text, a Discord subcommand and its
options) into a :class:`SlashCommand` and calls :func:`on_command` with a responder whose
private notes reach only the user (Slack: ephemeral or ``response_url``; Discord: the
interaction's ephemeral reply). The admin commands themselves (``reindex``, ``status``,
``help``, ``learned ...``) and who may run them are :class:`bot.admin.AdminCommands`, reached
through :meth:`bot.service.ChatService.admin`.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from bot.chat.policy import OUTSIDER_REFUSAL
from bot.logs import for_thread
from bot.protocol import Responder
from bot.service import ChatService

log = logging.getLogger(__name__)

REMEMBER_IN_THREAD = "To teach me, mention me in the thread of the question: `@threadwise remember: <the answer>`."


@dataclass(frozen=True)
class SlashCommand:
    """One ``/threadwise`` command as the adapter read it.

    Attributes:
        platform: ``"slack"`` or ``"discord"`` (for the log).
        words: what follows ``/threadwise`` (e.g. ``"reindex"``, ``"learned forget 3"``, ``""``).
        user_id: who ran it. is_admin: the platform's admin rule for that user.
        outsider: the user is from another organisation (:func:`bot.chat.policy.is_outsider`).
        thread_key: where it ran (the thread, or on Slack ``slack:<team>:<channel>``), for the log.
    """

    platform: str
    words: str
    user_id: str
    is_admin: bool
    outsider: bool = False
    thread_key: str = ""


def command_name(service: ChatService, words: str) -> str:
    """The admin command ``words`` name: an exact admin command (:meth:`bot.admin.AdminCommands.parse`),
    else its first word (an unknown one is answered "Unknown command"), ``"help"`` when empty."""
    words = words.strip()
    return service.command_of(words) or (re.split(r"\s+", words)[0].lower() if words else "help")


async def on_command(service: ChatService, command: SlashCommand, out: Responder) -> str:
    """Run ``/threadwise <words>``: outsiders get the one refusal; ``remember`` (which needs the
    thread of a question: Slack runs no slash command in a thread) is explained; anything
    else goes to :meth:`bot.service.ChatService.admin` (never raises).

    Returns:
        The command's name, "" when nothing ran.
    """
    name = command_name(service, command.words)
    if command.outsider:
        log.info(
            "%s command %s by %s refused: outside the workspace",
            command.platform,
            name,
            command.user_id,
            extra=for_thread(command.thread_key),
        )
        await out.notify_private(OUTSIDER_REFUSAL)
        return ""
    if name.startswith("remember"):
        await out.notify_private(REMEMBER_IN_THREAD)
        return ""
    log.info(
        "%s command %s by %s (admin %s)",
        command.platform,
        name,
        command.user_id,
        command.is_admin,
        extra=for_thread(command.thread_key),
    )
    await service.admin(name, actor_id=command.user_id, is_admin=command.is_admin, out=out)
    return name
