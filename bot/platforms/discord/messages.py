"""Discord messages in: which gateway messages are questions, and where they are answered.

:class:`Messages` is the client's ``on_message`` (:class:`bot.platforms.discord.app.ThreadwiseBot`
holds one and hands it every message). What it decides (see docs/discord.md):

* whether a message is for the bot: system messages, the bot itself and other bots are
  dropped by the shared rule (:func:`bot.chat.policy.ignore_reason`); follow-ups go through
  the reply policy and the bot's part in the thread (:func:`bot.chat.policy.decline_reason`); servers outside
  ``[discord] allowed_guild_ids`` get one refusal (:func:`bot.chat.policy.is_outsider`);
* where the answer goes: a new thread started from the question (named from it), the
  thread or DM it came from, or, where threads are not possible, the channel, as replies;
* the :class:`~bot.protocol.IncomingMessage` handed to the service, in arrival order per channel.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Any

import discord

from bot.chat import policy
from bot.chat.syntax import has_words, is_help_reply
from bot.chat.threads import thread_key
from bot.interactions.outsiders import refuse_outsider_once
from bot.logs import for_thread
from bot.platforms.discord.auth import is_admin, may_answer_help
from bot.platforms.discord.format import strip_mentions, thread_name
from bot.platforms.discord.responder import DiscordResponder
from bot.protocol import IncomingMessage, clean_text

if TYPE_CHECKING:
    from bot.platforms.discord.app import ThreadwiseBot

log = logging.getLogger("threadwise.discord")

_USER_MESSAGE_TYPES = (discord.MessageType.default, discord.MessageType.reply)


def thread_key_for(channel: Any, guild_id: int | None) -> str:
    """``discord:<guild id or dm>:<channel or thread id>``."""
    return thread_key("discord", guild_id or "dm", channel.id)


class Messages:
    """``on_message`` of :class:`~bot.platforms.discord.app.ThreadwiseBot` and what it needs.

    Args:
        bot: the client (its ``user``, ``service``, settings, task registry and the
            conversations' channels).
    """

    def __init__(self, bot: ThreadwiseBot) -> None:
        self.bot = bot
        self._chains: dict[int, asyncio.Future[None]] = {}  # channel id -> the last message being translated
        self._translating: dict[int, asyncio.Future[None]] = {}  # message id -> its translation (see on_message)

    def _own_role_id(self, message: discord.Message) -> int | None:
        """The bot's managed role in the message's server (clients often autocomplete
        "@Threadwise" to that role instead of the user)."""
        role = message.guild.self_role if message.guild else None
        return role.id if role else None

    def _mentions_me(self, message: discord.Message) -> bool:
        """Mentioned as a user (``<@id>`` or ``<@!id>``, via message.mentions) or by its role."""
        me = self.bot.user
        if me is None:
            return False
        if any(u.id == me.id for u in message.mentions):
            return True
        role_id = self._own_role_id(message)
        return role_id is not None and role_id in message.raw_role_mentions

    def _replied_bot_message(self, message: discord.Message) -> discord.Message | None:
        """The bot's message this message replies to (message reference), if any."""
        ref = message.reference
        resolved = (ref.resolved or ref.cached_message) if ref else None
        if isinstance(resolved, discord.Message) and self.bot.user and resolved.author.id == self.bot.user.id:
            return resolved
        return None

    def _addressing(self, message: discord.Message, to_bot: bool, text: str) -> policy.Addressing:
        """Whom a message is for: the bot, and/or other people (mentions of users or roles
        other than the bot's, @everyone/@here, or a reply to someone else's message); a reply
        to a help request in its syntax (``text``: without the bot's mention) is for the help desk."""
        me = self.bot.user.id if self.bot.user else 0
        own_role = self._own_role_id(message)
        others = any(u.id != me for u in message.mentions)
        others = others or any(r != own_role for r in message.raw_role_mentions) or message.mention_everyone
        ref = message.reference
        resolved = (ref.resolved or ref.cached_message) if ref else None
        if isinstance(resolved, discord.Message) and resolved.author.id != me:
            others = True
        return policy.Addressing(
            direct=message.guild is None, mentions_bot=to_bot, others=others, help_reply=is_help_reply(text)
        )

    async def _conversation_of(self, bot_message: discord.Message, guild_id: int) -> str:
        """The thread key of the conversation a bot message in a channel belongs to: the
        one its question (the message it replies to) was handled in."""
        question = bot_message.reference.message_id if bot_message.reference else None
        if question is None:
            return thread_key("discord", guild_id, bot_message.id)
        known = await self.bot.service.thread_of(f"discord:{question}")
        return known or thread_key("discord", guild_id, question)

    async def _refuse_outsider(self, message: discord.Message) -> None:
        """One polite refusal (a reply) per message addressed to the bot from a server outside
        the allow-list; no thread, no LLM call."""
        guild = message.guild.id if message.guild else "dm"
        out = DiscordResponder(
            self.bot,
            thread_key=thread_key("discord", guild, message.id),
            channel_id=message.channel.id,
            status_channel_id=message.channel.id,
            status_message_id=message.id,
            author_id=message.author.id,
        )
        if await refuse_outsider_once(self.bot.service, f"discord:{message.id}", out.thread_key, out.post_notice):
            log.info(
                "discord: message %s from user=%s in guild=%s refused: guild not allowed",
                message.id,
                message.author.id,
                guild,
            )

    def _wanted(self, message: discord.Message) -> bool:
        """Cheap filters: system messages, then the shared author rule
        (:func:`bot.chat.policy.ignore_reason`: the bot itself; bots and webhooks unless
        allow-listed in ``[discord] allowed_bot_ids`` and mentioning the bot)."""
        me = self.bot.user
        if me is None or message.type not in _USER_MESSAGE_TYPES or message.is_system():
            return False
        author = message.author
        is_bot = bool(author.bot or message.webhook_id)
        reason = policy.ignore_reason(
            author=author.id,
            own_id=me.id,
            is_bot=is_bot,
            bot_id=author.id,
            allowed_bots=self.bot.discord_settings.allowed_bot_ids,
            mentions_bot=is_bot and self._mentions_me(message),
        )
        if reason:
            log.debug("discord: ignored message %s from %s: %s", message.id, author.id, reason)
        return not reason

    async def on_message(self, message: discord.Message) -> None:
        """Turn a user message into ``ChatService.handle`` (in a background task).

        Messages of one channel are translated in arrival order (thread creation and the
        "does the bot take part here" check are awaited), so ``handle`` sees them in order; a
        message in a thread waits for the translation of the question that opened the thread.
        """
        if not self._wanted(message):
            return
        key = message.channel.id
        previous = self._chains.get(key)
        # a thread started from a message has that message's id: a message posted in it while
        # the question that opened it is still being translated (Discord sends THREAD_CREATE
        # before the bot's create_thread call returns) waits for that question, so it is handed
        # on after it and cannot overtake it
        opener = self._translating.get(key)
        mine: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._chains[key] = mine
        self._translating[message.id] = mine
        try:
            if previous is not None:
                await asyncio.wait([previous])
            if opener is not None:
                await asyncio.wait([opener])
            if self.bot.outsider_guild(message.guild.id if message.guild else None):
                if self._mentions_me(message) or self._replied_bot_message(message) is not None:
                    self.bot.spawn(self._refuse_outsider(message), name=f"discord refuse {message.id}")
                return
            translated = await self._translate(message)
            if translated is not None:
                incoming, out = translated
                self.bot.spawn(self.bot.service.handle(incoming, out), name=f"discord handle {incoming.message_id}")
        except Exception:  # noqa: BLE001 - one bad event must not stop the bot
            log.exception("discord: could not handle message %s", message.id)
        finally:
            mine.set_result(None)
            self._translating.pop(message.id, None)
            if self._chains.get(key) is mine:
                del self._chains[key]

    async def _translate(self, message: discord.Message) -> tuple[IncomingMessage, DiscordResponder] | None:
        """Decide whether and where to answer; start the thread for a new question."""
        assert self.bot.user is not None
        mentioned = self._mentions_me(message)
        own_role = self._own_role_id(message)
        text = strip_mentions(clean_text(message.content), [self.bot.user.id], [own_role] if own_role else [])
        channel = message.channel
        guild_id = message.guild.id if message.guild else None
        reply_channel = channel.id
        replied = self._replied_bot_message(message)
        addressing = self._addressing(message, mentioned or replied is not None, text)
        in_channel = False  # answering in a guild channel, as replies to the question
        if guild_id is None:
            key = thread_key_for(channel, None)
        elif isinstance(channel, (discord.Thread, discord.PartialMessageable)):
            # PartialMessageable: a guild channel missing from the cache, in practice a thread
            # that was archived (discord.py drops those) and just got a new message.
            key = thread_key_for(channel, guild_id)
            if not mentioned and not self.bot.message_content_enabled:
                return None  # the text is withheld by Discord: never answer an empty question
            replies = self.bot.settings_for(*self.bot.channel_ref(channel)).reply_policy
            own_id = self.bot.user.id

            async def bot_in_thread() -> bool:
                return getattr(channel, "owner_id", None) == own_id or await self.bot.service.knows_thread(key)

            reason = await policy.decline_reason(
                replies,
                addressing,
                in_conversation=True,
                bot_in_thread=bot_in_thread,
                waiting_for_expert=lambda: self.bot.service.waits_for_expert(key),
            )
            if reason:
                say = log.debug if reason == policy.NOT_TAKING_PART else log.info
                say("discord: message %s ignored: %s", message.id, reason, extra=for_thread(key))
                return None
        elif replied is not None:
            if not mentioned and not self.bot.message_content_enabled:
                return None  # the text is withheld by Discord: never answer an empty question
            key = await self._conversation_of(replied, guild_id)  # continue it where it is
            in_channel = True
        elif not mentioned:
            return None
        elif not has_words(text) or self.bot.service.command_of(text):
            key = thread_key("discord", guild_id, message.id)  # short replies stay in the channel
        else:
            thread = await self._start_thread(message, text)
            if thread is not None:
                key = thread_key_for(thread, guild_id)
                reply_channel = thread.id
            else:  # keyed on the question, not the channel: one conversation per question
                key = thread_key("discord", guild_id, message.id)
                in_channel = True
        author = message.author
        channel_id, channel_name = self.bot.channel_ref(channel)
        self.bot._thread_channels[key] = (channel_id, channel_name)
        here = self.bot.settings_for(channel_id, channel_name)
        incoming = IncomingMessage(
            platform="discord",
            thread_key=key,
            message_id=f"discord:{message.id}",
            author_id=str(author.id),
            text=text,
            author_name=getattr(author, "display_name", "") or author.name,
            is_admin=is_admin(author, self.bot.discord_settings),
            is_expert=may_answer_help(author, here),
            channel=channel_id,
            channel_name=channel_name,
        )
        out = DiscordResponder(
            self.bot,
            thread_key=key,
            channel_id=reply_channel,
            status_channel_id=channel.id,
            status_message_id=message.id,
            author_id=author.id,
            reply_always=in_channel,
        )
        log.info(
            "discord: message %s from user=%s accepted (%d chars, mention=%s)",
            message.id,
            author.id,
            len(text),
            mentioned,
            extra=for_thread(key),
        )
        return incoming, out

    async def _start_thread(self, message: discord.Message, question: str) -> discord.Thread | None:
        """Start a public thread from the question message (Discord: Start Thread from
        Message; the thread gets the message's id). On a redelivered message the thread
        already exists (code 160004) and is reused; if threads are not possible here
        (DM-like channel, missing permission) returns None and the answer goes in the channel."""
        name = thread_name(question, self.bot.discord_settings.thread_name_characters)
        try:
            thread = await message.create_thread(name=name, auto_archive_duration=1440)
            log.info("discord: started thread %s for message %s", thread.id, message.id)
            return thread
        except (discord.HTTPException, ValueError, TypeError, AttributeError) as exc:
            existing = message.guild.get_thread(message.id) if message.guild else None
            if existing is None and isinstance(exc, discord.HTTPException) and exc.code == 160004:
                with contextlib.suppress(discord.HTTPException):
                    fetched = await self.bot.fetch_channel(message.id)
                    existing = fetched if isinstance(fetched, discord.Thread) else None
            if existing is not None:
                return existing
            log.warning("discord: cannot start a thread for message %s (%s); answering in the channel", message.id, exc)
            return None
