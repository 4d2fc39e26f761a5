"""Slack messages in: which ``message`` / ``app_mention`` events are questions, and their turn.

:class:`Messages` is held by :class:`bot.platforms.slack.app.SlackBot`, whose listeners hand it
every message event. It filters without I/O (subtypes, edits, the bot's own and other bots'
posts: :func:`bot.chat.policy.ignore_reason`), applies the reply policy and the bot's part in
the thread (:func:`bot.chat.policy.decline_reason`), refuses people from other organisations
once (:func:`bot.chat.policy.is_outsider`), and hands the rest to the service as one
:class:`~bot.protocol.IncomingMessage` with the message's place in its thread's queue.
"""

from __future__ import annotations

import logging
import re
from dataclasses import replace
from typing import TYPE_CHECKING

from bot.chat.channels import reply_policy
from bot.chat.policy import (
    CHANNEL_CHATTER,
    NOT_TAKING_PART,
    Addressing,
    decline_reason,
    ignore_reason,
    is_outsider,
)
from bot.chat.syntax import is_help_reply
from bot.interactions.outsiders import refuse_outsider_once
from bot.logs import for_thread
from bot.platforms.slack.format import incoming_text
from bot.platforms.slack.responder import SlackPlace
from bot.protocol import IncomingMessage

if TYPE_CHECKING:
    from bot.platforms.slack.app import SlackBot
    from bot.service import Ticket

log = logging.getLogger(__name__)

# <@U1>, <@U1|name>, <!subteam^S1>, <!here>, <!channel>, <!everyone> in incoming text
_ADDRESS = re.compile(r"<(@[UW][A-Z0-9]+|!subteam\^[A-Z0-9]+|!here|!channel|!everyone)(?:\|[^>]*)?>")
# Message subtypes that are still a person writing a message; every other subtype
# (message_changed, message_deleted, bot_message, channel_join, ...) is ignored.
_USER_SUBTYPES = {None, "", "file_share", "thread_broadcast"}


class Messages:
    """The message listeners' work for one :class:`~bot.platforms.slack.app.SlackBot`.

    Args:
        bot: the adapter (its service, Slack settings, clients, directory and task registry).
    """

    def __init__(self, bot: SlackBot) -> None:
        self.bot = bot
        self.service = bot.service
        self.settings = bot.settings

    def on_event(self, body: dict, event: dict, context: dict, *, via: str) -> None:
        """Filter one message/app_mention event (no I/O) and start the turn in the background."""
        bot_user_id = str(context.get("bot_user_id") or "")
        channel, ts = str(event.get("channel") or ""), str(event.get("ts") or "")
        reason = self._ignore_reason(event, bot_user_id)
        if reason or not channel or not ts:
            log.debug("slack %s %s:%s ignored: %s", via, channel, ts, reason or "no channel/ts")
            return
        team = str(body.get("team_id") or context.get("team_id") or event.get("team") or "")
        place = SlackPlace(
            team=team,
            channel=channel,
            thread_ts=str(event.get("thread_ts") or ts),
            message_ts=ts,
            user=str(event["user"]),
        )
        addressing = self._addressing(event, bot_user_id, via)
        policy = reply_policy(self.bot.runtime.settings, "slack", self.settings.reply_policy, channel)
        self.bot.spawn(
            self._on_message(
                place, event, bot_user_id, addressing, policy, outsider=self._outsider(body, event, context), via=via
            ),
            f"message {place.thread_key}",
        )

    async def _on_message(
        self,
        place: SlackPlace,
        event: dict,
        bot_user_id: str,
        addressing: Addressing,
        policy: str,
        *,
        outsider: bool,
        via: str,
    ) -> None:
        """Answer a message the shared rule accepts (:func:`bot.chat.policy.decline_reason`: the
        reply policy, and follow-ups only in threads the bot takes part in); an outsider's gets
        one refusal instead. The message's place in its thread is taken first (before the
        lookups below, which could let a later message overtake it)."""
        key = place.thread_key
        ticket = self.service.ticket(key)
        if addressing.mentions_bot and not outsider:
            # the bot takes part from now on: a follow-up sent before this one is recorded is
            # not "a thread without the bot"
            self.bot.threads_joined.add(key)

        async def bot_in_thread() -> bool:
            return key in self.bot.threads_joined or await self.service.knows_thread(key)

        try:
            in_conversation = place.thread_ts != place.message_ts
            reason = await decline_reason(
                policy,
                addressing,
                in_conversation=in_conversation,
                bot_in_thread=bot_in_thread,
                waiting_for_expert=lambda: self.service.waits_for_expert(key),
            )
            if reason:
                quiet = reason in (NOT_TAKING_PART, CHANNEL_CHATTER)
                (log.debug if quiet else log.info)(
                    "slack message %s:%s ignored: %s", place.channel, place.message_ts, reason, extra=for_thread(key)
                )
            elif outsider:
                await self._refuse_outsider(place, event)
            else:
                await self._turn(place, event, bot_user_id, via=via, ticket=ticket)
        finally:
            self.service.release_ticket(ticket)

    @staticmethod
    def _addressing(event: dict, bot_user_id: str, via: str) -> Addressing:
        """Whom a message is for: DM, a mention of the bot, mentions of anyone else."""
        text = str(event.get("text") or "")
        targets = {m.group(1) for m in _ADDRESS.finditer(text)}
        mentions_bot = via == "app_mention" or bool(bot_user_id and f"@{bot_user_id}" in targets)
        others = bool(targets - {f"@{bot_user_id}"})
        return Addressing(
            direct=event.get("channel_type") == "im",
            mentions_bot=mentions_bot,
            others=others,
            help_reply=is_help_reply(incoming_text(text, bot_user_id)),
        )

    def _outsider(self, body: dict, event: dict, context: dict) -> bool:
        """True when the author belongs to another organisation (Slack Connect) that is
        not in ``[slack] allowed_teams``."""
        home = {str(a.get("team_id")) for a in body.get("authorizations") or [] if a.get("team_id")}
        home |= {str(x) for x in (body.get("team_id"), context.get("team_id")) if x}
        member_of = event.get("user_team") or (event.get("user_profile") or {}).get("team") or event.get("team")
        return is_outsider(member_of, home, self.settings.allowed_teams)

    async def _refuse_outsider(self, place: SlackPlace, event: dict) -> None:
        """One polite refusal per message (duplicate deliveries ignored), no LLM call."""
        key = place.thread_key
        if await refuse_outsider_once(
            self.service,
            f"slack:{place.channel}:{place.message_ts}",
            key,
            self.bot.responder(place).notify_private,
        ):
            log.info(
                "slack message %s from %s of team %s refused: outside the workspace",
                place.message_ts,
                place.user,
                event.get("user_team") or event.get("team"),
                extra=for_thread(key),
            )

    def _ignore_reason(self, event: dict, bot_user_id: str) -> str:
        """Why an event must not start an answer ("" when it may)."""
        subtype = event.get("subtype")
        if subtype not in _USER_SUBTYPES:
            return f"subtype {subtype}"
        if event.get("hidden") or event.get("edited"):
            return "edit or hidden"
        text = str(event.get("text") or "")
        return ignore_reason(
            author=event.get("user"),
            own_id=bot_user_id,
            is_bot=bool(event.get("bot_id") or event.get("bot_profile")),
            bot_id=event.get("bot_id"),
            allowed_bots=self.settings.allowed_bots,
            mentions_bot=bool(bot_user_id) and f"<@{bot_user_id}>" in text,
        )

    async def _turn(self, place: SlackPlace, event: dict, bot_user_id: str, *, via: str, ticket: Ticket) -> None:
        """One user message -> ChatService.handle (which never raises: a failing run ends in
        its own apology); ``ticket``: its place in the thread's queue."""
        key = place.thread_key
        user = place.user
        msg = IncomingMessage(
            platform="slack",
            thread_key=key,
            message_id=f"slack:{place.channel}:{place.message_ts}",
            author_id=user,
            text=incoming_text(str(event.get("text") or ""), bot_user_id),
            channel=place.channel,
        )
        out = self.bot.responder(place)
        await self.service.acknowledge(msg, out)  # the first reaction before the user lookups
        try:
            msg = replace(
                msg,
                author_name=await self.bot.directory.display_name(user),
                is_admin=self.bot.directory.is_admin(user),
                is_expert=await self.bot.may_answer_help(user, place.channel),
            )
            log.info("slack message %s from %s (via %s)", msg.message_id, user, via, extra=for_thread(key))
            await self.service.handle(msg, out, ticket)
        finally:
            self.service.release_acknowledgement(msg.message_id, out)
