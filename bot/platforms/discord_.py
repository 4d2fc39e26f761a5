"""The Discord adapter: discord.py in the same event loop as everything else.

Triggers (see docs/discord.md):

* an @mention (``<@id>``, ``<@!id>`` or the bot's own role) in a channel starts a public
  thread from the question (named from it) and answers there; admin words
  (``reindex``/``status``/``help``) and a bare mention are answered in the channel. Where
  the bot may not start threads (403), it answers in the channel as a reply to the
  question, and the conversation is keyed on the question message, as its thread would
  have been: other people's questions in that channel are other conversations;
* a reply (message reference) to one of the bot's messages in a channel continues that
  message's conversation;
* any message in a thread the bot takes part in continues the conversation, no mention
  needed, as ``[discord] reply_policy`` allows (default: not when it mentions or replies
  to someone else and not the bot; :mod:`bot.chat.policy`);
* DMs work without a mention;
* servers outside ``[discord] allowed_guild_ids`` (when set) get one polite refusal;
* ``/threadwise reindex|status|help`` (application commands);
* the Answer / Retry with hint / Dismiss buttons and modals of a help request.

Thread keys: ``discord:<guild id>:<thread id>`` (for a question answered in its channel, the
question message's id, which is also the id its thread would have had) and
``discord:dm:<DM channel id>``. Message ids are ``discord:<message id>``; the ChatService
deduplicates on them, persisted across restarts.

Ignored: the bot's own messages, other bots and webhooks (unless their id is in
``discord.allowed_bot_ids`` and they mention us), system messages (joins, pins, thread
created...), edits and deletions (no handlers for them). The text answered is the text
the message was created with: an edit that arrives in the same socket read as the
MESSAGE_CREATE updates discord.py's cached message before ``on_message`` runs, so
:meth:`ThreadwiseBot.dispatch` hands ``on_message`` a copy taken at creation.

Without the privileged MESSAGE_CONTENT intent Discord closes the gateway with 4014; the bot
logs what to enable in the developer portal and reconnects without it, answering mentions
and DMs only (guild messages without a mention arrive with empty text then).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
from collections.abc import Coroutine
from typing import Any, Literal

import discord
import yarl
from discord import app_commands

from bot.admin import AdminCommands
from bot.chat.channels import entry_for
from bot.chat.tasks import BackgroundTasks
from bot.chat.policy import OUTSIDER_REFUSAL, Addressing, is_outsider, wants_answer
from bot.config import Secrets, Settings
from bot.platforms.discord_auth import is_admin, is_expert
from bot.platforms.discord_format import strip_mentions, thread_name
from bot.platforms.discord_responder import DiscordResponder, InteractionResponder
from bot.chat import feedback
from bot.platforms.discord_views import (EscalateButton, HelpButton, VoteButton, escalate_view, help_modal,
                                         modal_text, parse_modal_id, parse_vote_reason_id, vote_reason_modal)
from bot.protocol import HumanAction, IncomingMessage, clean_text

log = logging.getLogger("threadwise.discord")

_DEFAULT_API_BASE = discord.http.Route.BASE


def _tolerant_from_json(raw: Any, _strict: Any = discord.utils._from_json) -> Any:
    """discord.py parses gateway frames with orjson when it is installed, and orjson
    refuses lone UTF-16 surrogates (``"\\ud83d"``: half an emoji, which Discord does
    send). Parse such a frame with the standard library instead; the text is cleaned
    later, in :class:`bot.protocol.IncomingMessage`."""
    try:
        return _strict(raw)
    except ValueError:
        import json

        return json.loads(raw)


discord.utils._from_json = _tolerant_from_json  # the one place discord.py's gateway and HTTP parse JSON
_DEFAULT_GATEWAY = discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY
_USER_MESSAGE_TYPES = (discord.MessageType.default, discord.MessageType.reply)
SHUTDOWN_GRACE_SECONDS = 10.0  # in-flight answers may finish this long after a stop request

INTENT_HELP = (
    "Discord refused the privileged MESSAGE CONTENT intent (gateway close code 4014). "
    "Enable it in the Discord developer portal: Applications > your application > Bot > "
    "Privileged Gateway Intents > MESSAGE CONTENT INTENT, then restart Threadwise. "
    "Until then Threadwise answers only @mentions and DMs (follow-ups in threads need a mention)."
)


def discord_enabled(settings: Settings, secrets: Secrets) -> bool:
    """True when Discord should start: ``DISCORD_TOKEN`` is set in the environment."""
    return bool(secrets.discord_token)


def default_intents() -> discord.Intents:
    """Guilds, guild and DM messages, reactions, plus the privileged MESSAGE_CONTENT intent
    (needed to read follow-ups in threads without a mention). No members or presences."""
    intents = discord.Intents.default()
    intents.message_content = True
    return intents


def thread_key_for(channel: Any, guild_id: int | None) -> str:
    """``discord:<guild id or dm>:<channel or thread id>``."""
    return f"discord:{guild_id if guild_id else 'dm'}:{channel.id}"


def channel_of(thread_key: str) -> int:
    """The id at the end of a Discord thread key: the thread or DM channel (or, for a
    question answered in its channel, the question message)."""
    return int(thread_key.rsplit(":", 1)[1])


class ThreadwiseBot(discord.Client):
    """discord.py client wired to the runtime's ChatService.

    Args:
        runtime: the opened runtime (``.service``, ``.settings``).
        intents: gateway intents; default :func:`default_intents`.
        guild_ready_timeout: seconds discord.py waits for GUILD_CREATEs before on_ready
            (its default is 2; tests lower it).
    """

    defer_after_seconds = 2.0  # Discord wants an interaction response within 3 s; defer if slower

    def __init__(
        self, runtime: Any, *, intents: discord.Intents | None = None, guild_ready_timeout: float = 2.0
    ) -> None:
        # Threadwise never joins voice: skip discord.py's warnings about missing voice libraries.
        discord.VoiceClient.warn_nacl = discord.VoiceClient.warn_dave = False
        ds = runtime.settings.discord
        # [discord] shard_id/shard_count (docs/deploy.md): this replica's shard of the gateway
        shards = {"shard_id": ds.shard_id, "shard_count": ds.shard_count} if ds.shard_count else {}
        super().__init__(
            intents=intents or default_intents(),
            allowed_mentions=discord.AllowedMentions.none(),
            guild_ready_timeout=guild_ready_timeout,
            chunk_guilds_at_startup=False,
            **shards,
        )
        self.runtime = runtime
        self.service = runtime.service
        self.discord_settings = runtime.settings.discord
        self.message_content_enabled = self.intents.message_content
        self.tree = app_commands.CommandTree(self)
        self.tree.add_command(_admin_group(self))
        self.tree.on_error = self._on_tree_error  # type: ignore[method-assign]
        self._tasks = BackgroundTasks("discord", log)
        self._chains: dict[int, asyncio.Future[None]] = {}
        self._thread_channels: dict[str, tuple[str, str]] = {}  # thread key -> (channel id, name)
        self.service.register_platform("discord", lambda ref: DiscordResponder.from_reference(self, ref),
                                       ready=self.wait_until_ready)

    # ------------------------------------------------------------------ per-channel settings
    @staticmethod
    def channel_ref(channel: Any) -> tuple[str, str]:
        """``(id, name)`` of the channel a conversation belongs to: a thread's parent
        channel, else the channel itself ("" name for DMs and uncached channels)."""
        parent = getattr(channel, "parent", None)
        if parent is not None or getattr(channel, "parent_id", None):
            return str(getattr(channel, "parent_id", "") or parent.id), str(getattr(parent, "name", "") or "")
        return str(getattr(channel, "id", "") or ""), str(getattr(channel, "name", "") or "")

    def settings_for(self, channel_id: str, channel_name: str = "") -> Any:
        """``[discord]`` with the channel's ``[[channels]]`` entry applied (experts, reply policy)."""
        entry = entry_for(self.runtime.settings, "discord", channel_id, channel_name)
        if entry is None:
            return self.discord_settings
        update: dict[str, Any] = {}
        if entry.expert_role_ids is not None:
            update["expert_role_ids"] = list(entry.expert_role_ids)
        if entry.expert_user_ids is not None:
            update["expert_user_ids"] = list(entry.expert_user_ids)
        if entry.reply_policy:
            update["reply_policy"] = entry.reply_policy
        return self.discord_settings.model_copy(update=update)

    def settings_for_thread(self, thread_key: str) -> Any:
        """:meth:`settings_for` the channel of a conversation (remembered when its message
        arrived, else looked up in the cache; the defaults when unknown)."""
        ref = self._thread_channels.get(thread_key)
        if ref is None:
            try:
                channel = self.get_channel(channel_of(thread_key))
            except ValueError:
                channel = None
            if channel is None:
                return self.discord_settings
            ref = self.channel_ref(channel)
        return self.settings_for(*ref)

    # ------------------------------------------------------------------ start-up
    async def setup_hook(self) -> None:
        """Register the persistent help buttons and publish the slash commands."""
        self.add_dynamic_items(HelpButton, VoteButton, EscalateButton)
        try:
            guild_ids = self.discord_settings.command_guild_ids
            if guild_ids:
                for gid in guild_ids:
                    guild = discord.Object(gid)
                    self.tree.copy_global_to(guild=guild)
                    await self.tree.sync(guild=guild)
            else:
                await self.tree.sync()
            log.info("discord: slash commands published (%s)", f"servers {guild_ids}" if guild_ids else "global")
        except discord.HTTPException as exc:
            log.warning(
                "discord: could not publish /threadwise (HTTP %s, code %s); invite the bot with the "
                "applications.commands scope. Mentions and DMs still work.",
                exc.status,
                exc.code,
            )

    async def on_ready(self) -> None:
        log.info(
            "discord: connected as %s (id %s) to %d server(s); message content intent %s",
            self.user,
            self.user.id if self.user else "?",
            len(self.guilds),
            "on" if self.message_content_enabled else "OFF (mentions and DMs only)",
        )

    async def connect_with_fallback(self) -> None:
        """``connect()``, and if Discord refuses the MESSAGE_CONTENT intent (4014), explain
        what to enable and reconnect without it.

        Raises:
            discord.PrivilegedIntentsRequired: refused although message content was already off.
            discord.ConnectionClosed, discord.GatewayNotFound: unrecoverable gateway errors.
        """
        backoff = 1.0
        while True:
            try:
                await self.connect(reconnect=True)
                return
            except discord.PrivilegedIntentsRequired:
                if not self._connection._intents.message_content:
                    log.error("discord: a privileged intent was refused (4014) although message content is off")
                    raise
                log.error("discord: %s", INTENT_HELP)
                # The client stays open after a 4014; reconnect with the intent dropped.
                self._connection._intents.message_content = False
                self.message_content_enabled = False
            except (discord.LoginFailure, discord.ConnectionClosed, discord.GatewayNotFound):
                raise
            except Exception as exc:  # noqa: BLE001 - discord.py ends connect() on any error parsing one event
                if self.is_closed():
                    return
                log.error("discord: gateway event could not be handled (%s: %s); reconnecting in %.0f s",
                          type(exc).__name__, str(exc)[:200], backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 60.0)

    def dispatch(self, event: str, /, *args: Any, **kwargs: Any) -> None:
        """discord.py's event dispatch, with ``on_message`` given a copy of the message as
        created: discord.py calls this synchronously while parsing MESSAGE_CREATE, but runs
        the handler later, after a MESSAGE_UPDATE from the same socket read may have edited
        the cached message (an edit could otherwise add a mention or change the question)."""
        if event == "message" and args and isinstance(args[0], discord.Message):
            args = (copy.copy(args[0]), *args[1:])
        super().dispatch(event, *args, **kwargs)

    # ------------------------------------------------------------------ background work
    def spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        """Run ``coro`` in the background (:class:`bot.chat.tasks.BackgroundTasks`)."""
        return self._tasks.spawn(coro, name)

    async def wait_idle(self, timeout: float = 20.0) -> None:
        """Wait until no answer, resume or admin command is running (including ones started
        meanwhile).

        Raises:
            TimeoutError: still busy after ``timeout`` seconds.
        """
        await self._tasks.wait_idle(timeout)

    async def drain(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for in-flight answers, then cancel the rest."""
        await self._tasks.shutdown(timeout)

    # ------------------------------------------------------------------ messages
    def _own_role_id(self, message: discord.Message) -> int | None:
        """The bot's managed role in the message's server (clients often autocomplete
        "@Threadwise" to that role instead of the user)."""
        role = message.guild.self_role if message.guild else None
        return role.id if role else None

    def _mentions_me(self, message: discord.Message) -> bool:
        """Mentioned as a user (``<@id>`` or ``<@!id>``, via message.mentions) or by its role."""
        me = self.user
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
        if isinstance(resolved, discord.Message) and self.user and resolved.author.id == self.user.id:
            return resolved
        return None

    def _addressing(self, message: discord.Message, to_bot: bool) -> Addressing:
        """Whom a message is for: the bot, and/or other people (mentions of users or roles
        other than the bot's, @everyone/@here, or a reply to someone else's message)."""
        me = self.user.id if self.user else 0
        own_role = self._own_role_id(message)
        others = any(u.id != me for u in message.mentions)
        others = others or any(r != own_role for r in message.raw_role_mentions) or message.mention_everyone
        ref = message.reference
        resolved = (ref.resolved or ref.cached_message) if ref else None
        if isinstance(resolved, discord.Message) and resolved.author.id != me:
            others = True
        return Addressing(direct=message.guild is None, mentions_bot=to_bot, others=others)

    async def _conversation_of(self, bot_message: discord.Message, guild_id: int) -> str:
        """The thread key of the conversation a bot message in a channel belongs to: the
        one its question (the message it replies to) was handled in."""
        question = bot_message.reference.message_id if bot_message.reference else None
        if question is None:
            return f"discord:{guild_id}:{bot_message.id}"
        known = await self.service.store.thread_of(f"discord:{question}")
        return known or f"discord:{guild_id}:{question}"

    def _outsider_guild(self, guild_id: int | None) -> bool:
        """True for a server outside ``[discord] allowed_guild_ids`` (when that list is set)."""
        return is_outsider(guild_id, (), self.discord_settings.allowed_guild_ids)

    async def _refuse_outsider(self, message: discord.Message) -> None:
        """One polite refusal (a reply) per message addressed to the bot from a server outside
        the allow-list; no thread, no LLM call."""
        out = DiscordResponder(self, thread_key=f"discord:{message.guild.id if message.guild else 'dm'}:{message.id}",
                               channel_id=message.channel.id, status_channel_id=message.channel.id,
                               status_message_id=message.id, author_id=message.author.id)
        if not await self.service.store.mark_seen(f"discord:{message.id}", out.thread_key):
            return
        log.info("discord: message %s from user=%s in guild=%s refused: guild not allowed", message.id,
                 message.author.id, message.guild.id if message.guild else "dm")
        await out.post_notice(OUTSIDER_REFUSAL)

    def _wanted(self, message: discord.Message) -> bool:
        """Cheap filters: own messages, system messages, bots and webhooks."""
        me = self.user
        if me is None or message.author.id == me.id:
            return False
        if message.type not in _USER_MESSAGE_TYPES or message.is_system():
            return False
        if message.author.bot or message.webhook_id:
            allowed = message.author.id in self.discord_settings.allowed_bot_ids and self._mentions_me(message)
            if not allowed:
                log.debug("discord: ignored bot/webhook message %s from %s", message.id, message.author.id)
            return allowed
        return True

    async def on_message(self, message: discord.Message) -> None:
        """Turn a user message into ``ChatService.handle`` (in a background task).

        Messages of one channel are translated in arrival order (thread creation and the
        "does the bot take part here" check are awaited), so ``handle`` sees them in order.
        """
        if not self._wanted(message):
            return
        key = message.channel.id
        previous = self._chains.get(key)
        mine: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._chains[key] = mine
        try:
            if previous is not None:
                await asyncio.wait([previous])
            if self._outsider_guild(message.guild.id if message.guild else None):
                if self._mentions_me(message) or self._replied_bot_message(message) is not None:
                    self.spawn(self._refuse_outsider(message), name=f"discord refuse {message.id}")
                return
            translated = await self._translate(message)
            if translated is not None:
                incoming, out = translated
                self.spawn(self.service.handle(incoming, out), name=f"discord handle {incoming.message_id}")
        except Exception:  # noqa: BLE001 - one bad event must not stop the bot
            log.exception("discord: could not handle message %s", message.id)
        finally:
            mine.set_result(None)
            if self._chains.get(key) is mine:
                del self._chains[key]

    async def _translate(self, message: discord.Message) -> tuple[IncomingMessage, DiscordResponder] | None:
        """Decide whether and where to answer; start the thread for a new question."""
        assert self.user is not None
        mentioned = self._mentions_me(message)
        own_role = self._own_role_id(message)
        text = strip_mentions(clean_text(message.content), [self.user.id], [own_role] if own_role else [])
        channel = message.channel
        guild_id = message.guild.id if message.guild else None
        reply_channel = channel.id
        replied = self._replied_bot_message(message)
        addressing = self._addressing(message, mentioned or replied is not None)
        in_channel = False  # answering in a guild channel, as replies to the question
        if guild_id is None:
            thread_key = thread_key_for(channel, None)
        elif isinstance(channel, (discord.Thread, discord.PartialMessageable)):
            # PartialMessageable: a guild channel missing from the cache, in practice a thread
            # that was archived (discord.py drops those) and just got a new message.
            thread_key = thread_key_for(channel, guild_id)
            if not mentioned and not self.message_content_enabled:
                return None  # the text is withheld by Discord: never answer an empty question
            if not addressing.mentions_bot:
                policy = self.settings_for(*self.channel_ref(channel)).reply_policy
                if not wants_answer(policy, addressing, in_conversation=True):
                    log.info("discord: message %s in thread=%s not for the bot (reply_policy %s)", message.id,
                             thread_key, policy)
                    return None
                ours = getattr(channel, "owner_id", None) == self.user.id
                if not ours and not await self.service.knows_thread(thread_key):
                    return None
        elif replied is not None:
            if not mentioned and not self.message_content_enabled:
                return None  # the text is withheld by Discord: never answer an empty question
            thread_key = await self._conversation_of(replied, guild_id)  # continue it where it is
            in_channel = True
        elif not mentioned:
            return None
        elif not text or AdminCommands.parse(text):
            thread_key = f"discord:{guild_id}:{message.id}"  # short replies stay in the channel
        else:
            thread = await self._start_thread(message, text)
            if thread is not None:
                thread_key = thread_key_for(thread, guild_id)
                reply_channel = thread.id
            else:  # keyed on the question, not the channel: one conversation per question
                thread_key = f"discord:{guild_id}:{message.id}"
                in_channel = True
        author = message.author
        channel_id, channel_name = self.channel_ref(channel)
        self._thread_channels[thread_key] = (channel_id, channel_name)
        here = self.settings_for(channel_id, channel_name)
        incoming = IncomingMessage(
            platform="discord",
            thread_key=thread_key,
            message_id=f"discord:{message.id}",
            author_id=str(author.id),
            text=text,
            author_name=getattr(author, "display_name", "") or author.name,
            is_admin=is_admin(author, self.discord_settings),
            is_expert=is_expert(author, here),
            channel=channel_id,
            channel_name=channel_name,
        )
        out = DiscordResponder(
            self,
            thread_key=thread_key,
            channel_id=reply_channel,
            status_channel_id=channel.id,
            status_message_id=message.id,
            author_id=author.id,
            reply_always=in_channel,
        )
        log.info(
            "discord: message %s from user=%s accepted thread=%s (%d chars, mention=%s)",
            message.id,
            author.id,
            thread_key,
            len(text),
            mentioned,
        )
        return incoming, out

    async def _start_thread(self, message: discord.Message, question: str) -> discord.Thread | None:
        """Start a public thread from the question message (Discord: Start Thread from
        Message; the thread gets the message's id). On a redelivered message the thread
        already exists (code 160004) and is reused; if threads are not possible here
        (DM-like channel, missing permission) returns None and the answer goes in the channel."""
        name = thread_name(question, self.discord_settings.thread_name_characters)
        try:
            thread = await message.create_thread(name=name, auto_archive_duration=1440)
            log.info("discord: started thread %s for message %s", thread.id, message.id)
            return thread
        except (discord.HTTPException, ValueError, TypeError, AttributeError) as exc:
            existing = message.guild.get_thread(message.id) if message.guild else None
            if existing is None and isinstance(exc, discord.HTTPException) and exc.code == 160004:
                with contextlib.suppress(discord.HTTPException):
                    fetched = await self.fetch_channel(message.id)
                    existing = fetched if isinstance(fetched, discord.Thread) else None
            if existing is not None:
                return existing
            log.warning("discord: cannot start a thread for message %s (%s); answering in the channel", message.id, exc)
            return None

    # ------------------------------------------------------------------ interactions
    def _perms(self, interaction: discord.Interaction) -> discord.Permissions | None:
        return interaction.permissions if interaction.guild_id else None

    async def on_help_button(
        self, interaction: discord.Interaction, action: HumanAction, thread_key: str, interrupt_id: str
    ) -> None:
        """A click on Answer / Retry with hint / Dismiss of a help request.

        Non-experts are refused ephemerally by the service; for experts Answer and Retry
        open a modal, Dismiss resumes at once.
        """
        user = interaction.user
        expert = is_expert(user, self.settings_for_thread(thread_key), self._perms(interaction))
        log.info("discord: help button %s by user=%s expert=%s thread=%s", action.value, user.id, expert, thread_key)
        if expert and action is not HumanAction.DISMISS:
            try:
                await interaction.response.send_modal(help_modal(action, thread_key, interrupt_id))
            except discord.HTTPException as exc:
                log.warning("discord: could not open the help modal thread=%s: %s", thread_key, exc)
            return
        with contextlib.suppress(discord.HTTPException):
            await interaction.response.defer()  # acknowledge the click; replies follow up
        await self.spawn(
            self._resume(interaction, action, "", thread_key, interrupt_id, expert), name=f"discord resume {thread_key}"
        )

    async def on_vote_button(self, interaction: discord.Interaction, vote: int, answer_id: str) -> None:
        """👍 / 👎 under an answer: the vote is recorded at once (one per user, the latest
        counts); a 👎 opens the optional-reason modal as the interaction's response, a 👍
        gets an ephemeral thanks."""
        user = interaction.user
        if self._outsider_guild(interaction.guild_id):
            with contextlib.suppress(discord.HTTPException):
                await interaction.response.send_message(OUTSIDER_REFUSAL, ephemeral=True)
            return
        log.info("discord: vote %+d on answer %s by user=%s", vote, answer_id, user.id)
        if vote == feedback.DOWN:
            with contextlib.suppress(discord.HTTPException):
                await interaction.response.send_modal(vote_reason_modal(answer_id))
        else:
            with contextlib.suppress(discord.HTTPException):
                await interaction.response.defer(ephemeral=True, thinking=True)

        async def record() -> None:
            ok = await self.service.vote(answer_id, str(user.id), vote)
            if vote == feedback.UP or not ok:
                with contextlib.suppress(discord.HTTPException):
                    await interaction.followup.send(feedback.vote_reply(ok, vote), ephemeral=True)

        await self.spawn(record(), name=f"discord vote {answer_id}")

    async def _on_vote_reason(self, interaction: discord.Interaction, answer_id: str) -> None:
        reason = modal_text(interaction)[: feedback.REASON_MAX_CHARACTERS]
        with contextlib.suppress(discord.HTTPException):
            await interaction.response.defer(ephemeral=True, thinking=True)
        ok = await self.service.vote(answer_id, str(interaction.user.id), feedback.DOWN, reason or None)
        text = feedback.vote_reply(ok, feedback.DOWN, reason=reason)
        offer = ok and self.service.human_review
        with contextlib.suppress(discord.HTTPException):
            if offer:
                await interaction.followup.send(f"{text}\n{feedback.ESCALATE_OFFER}", view=escalate_view(answer_id),
                                                ephemeral=True)
            else:
                await interaction.followup.send(text, ephemeral=True)

    async def on_escalate_button(self, interaction: discord.Interaction, answer_id: str) -> None:
        """"Ask the experts" after a 👎: a help request in the answer's conversation."""
        user = interaction.user
        with contextlib.suppress(discord.HTTPException):
            await interaction.response.defer(ephemeral=True, thinking=True)
        record = await self.service.store.answer_record(answer_id)
        parts = str(record["thread_key"]).split(":") if record else []
        if record is None or len(parts) != 3 or parts[0] != "discord":
            with contextlib.suppress(discord.HTTPException):
                await interaction.followup.send("I can't find that answer any more.", ephemeral=True)
            return
        key = record["thread_key"]
        target = self.get_channel(channel_of(key))
        # a thread or DM is the key's last id; an answer given in a channel is keyed on its question
        channel_id = channel_of(key) if target is not None else int(record["channel"] or channel_of(key))
        out = InteractionResponder(self, interaction, ephemeral=True, in_thread=True, thread_key=key,
                                   channel_id=channel_id, author_id=user.id)
        log.info("discord: answer %s sent to the experts by user=%s thread=%s", answer_id, user.id, key)
        await self.spawn(self.service.escalate(answer_id, actor_id=str(user.id),
                                               actor_name=getattr(user, "display_name", "") or user.name, out=out),
                         name=f"discord escalate {answer_id}")

    async def on_interaction(self, interaction: discord.Interaction) -> None:
        """Handle help-modal submits (``tw:m:...``) and 👎 reasons (``tw:vr:...``); other
        interactions have their own handlers."""
        if interaction.type is not discord.InteractionType.modal_submit:
            return
        custom_id = str((interaction.data or {}).get("custom_id", ""))
        answer_id = parse_vote_reason_id(custom_id)
        if answer_id is not None:
            await self.spawn(self._on_vote_reason(interaction, answer_id), name=f"discord vote reason {answer_id}")
            return
        parsed = parse_modal_id(custom_id)
        if parsed is None:
            return
        action, thread_key, interrupt_id = parsed
        expert = is_expert(interaction.user, self.settings_for_thread(thread_key), self._perms(interaction))
        log.info(
            "discord: help modal %s submitted by user=%s expert=%s thread=%s",
            action.value,
            interaction.user.id,
            expert,
            thread_key,
        )
        with contextlib.suppress(discord.HTTPException):
            await interaction.response.defer(ephemeral=True, thinking=True)
        text = modal_text(interaction)
        await self.spawn(
            self._resume(interaction, action, text, thread_key, interrupt_id, expert),
            name=f"discord resume {thread_key}",
        )

    async def _resume(
        self,
        interaction: discord.Interaction,
        action: HumanAction,
        text: str,
        thread_key: str,
        interrupt_id: str,
        expert: bool,
    ) -> None:
        out = InteractionResponder(
            self,
            interaction,
            ephemeral=True,
            in_thread=True,
            thread_key=thread_key,
            channel_id=interaction.channel_id or channel_of(thread_key),
            author_id=interaction.user.id,
        )
        user = interaction.user
        ok = await self.service.resume(
            thread_key,
            action,
            text,
            actor_id=str(user.id),
            actor_name=getattr(user, "display_name", "") or user.name,
            is_expert=expert,
            out=out,
            interrupt_id=interrupt_id or None,
            channel=self._thread_channels.get(thread_key, self.channel_ref(interaction.channel))[0],
        )
        if not ok:
            return
        done = {
            HumanAction.ANSWER: "answered",
            HumanAction.RETRY: "retried with a hint",
            HumanAction.DISMISS: "dismissed",
        }[action]
        if interaction.message is not None:  # the help request: its buttons are spent
            with contextlib.suppress(discord.HTTPException):
                await interaction.message.edit(
                    content=f"{interaction.message.content}\n\n-# {done.capitalize()} by {user.mention}.", view=None
                )
        await out.notify_private(f"Done: the help request was {done}.")

    async def run_admin(self, interaction: discord.Interaction, command: str) -> None:
        """``/threadwise <command>``: authorise, then let the service run it. Non-admins see
        only ephemeral replies (a refused reindex is ephemeral)."""
        user = interaction.user
        if self._outsider_guild(interaction.guild_id):
            log.info("discord: /threadwise %s by user=%s in guild=%s refused: guild not allowed", command, user.id,
                     interaction.guild_id)
            with contextlib.suppress(discord.HTTPException):
                await interaction.response.send_message(OUTSIDER_REFUSAL, ephemeral=True)
            return
        admin = is_admin(user, self.discord_settings, self._perms(interaction))
        thread_key = thread_key_for(
            interaction.channel or discord.Object(interaction.channel_id or 0), interaction.guild_id
        )
        log.info("discord: /threadwise %s by user=%s admin=%s thread=%s", command, user.id, admin, thread_key)
        out = InteractionResponder(
            self,
            interaction,
            ephemeral=not admin,
            thread_key=thread_key,
            channel_id=interaction.channel_id or 0,
            author_id=user.id,
        )
        keep_alive = asyncio.create_task(out.keep_alive(self.defer_after_seconds))
        try:
            work = self.service.admin(command, actor_id=str(user.id), is_admin=admin, out=out)
            await self.spawn(work, name=f"discord admin {command}")  # tracked: shutdown waits for it
        finally:
            keep_alive.cancel()

    async def run_remember(self, interaction: discord.Interaction, text: str) -> None:
        """``/threadwise remember <text>`` in a thread: the service saves a learned entry
        (experts only); the reply is ephemeral."""
        user = interaction.user
        channel = interaction.channel or discord.Object(interaction.channel_id or 0)
        thread_key = thread_key_for(channel, interaction.guild_id)
        channel_id, channel_name = self.channel_ref(interaction.channel)
        here = self.settings_for(channel_id, channel_name)
        msg = IncomingMessage(platform="discord", thread_key=thread_key, message_id=f"discord:{interaction.id}",
                              author_id=str(user.id), text=f"remember: {text}",
                              author_name=getattr(user, "display_name", "") or user.name,
                              is_expert=is_expert(user, here, self._perms(interaction)),
                              channel=channel_id, channel_name=channel_name)
        out = InteractionResponder(self, interaction, ephemeral=True, thread_key=thread_key,
                                   channel_id=interaction.channel_id or 0, author_id=user.id)
        log.info("discord: /threadwise remember by user=%s thread=%s", user.id, thread_key)
        await self.spawn(self.service.remember(msg, msg.text.split(":", 1)[1].strip(), out),
                         name=f"discord remember {thread_key}")

    async def _on_tree_error(self, interaction: discord.Interaction, error: app_commands.AppCommandError) -> None:
        log.error("discord: slash command failed: %r", error)
        with contextlib.suppress(discord.HTTPException):
            if not interaction.response.is_done():
                await interaction.response.send_message("Sorry, that command failed.", ephemeral=True)


def _admin_group(bot: ThreadwiseBot) -> app_commands.Group:
    """``/threadwise reindex|status|help``."""
    group = app_commands.Group(name="threadwise", description="Threadwise: knowledge base Q&A bot")

    @group.command(name="reindex", description="Rebuild the knowledge index (admins only)")
    async def reindex(interaction: discord.Interaction) -> None:
        await bot.run_admin(interaction, "reindex")

    @group.command(name="status", description="Show the knowledge base and bot status")
    async def status(interaction: discord.Interaction) -> None:
        await bot.run_admin(interaction, "status")

    @group.command(name="help", description="How to ask Threadwise questions")
    async def help_(interaction: discord.Interaction) -> None:
        await bot.run_admin(interaction, "help")

    @group.command(name="learned", description="List or remove what I learned from experts (admins only)")
    @app_commands.describe(action="list the entries, or forget one", entry="the entry number to forget")
    async def learned(interaction: discord.Interaction, action: Literal["list", "forget"] = "list",
                      entry: int | None = None) -> None:
        await bot.run_admin(interaction, f"learned {action}" + (f" {entry}" if entry is not None else ""))

    @group.command(name="remember", description="Experts: save an answer to this thread's question")
    @app_commands.describe(text="the answer, as you would give it to a teammate")
    async def remember(interaction: discord.Interaction, text: str) -> None:
        await bot.run_remember(interaction, text)

    return group


def build_discord_bot(
    runtime: Any, *, guild_ready_timeout: float = 2.0, intents: discord.Intents | None = None
) -> ThreadwiseBot:
    """Build the client for ``runtime`` (not connected yet).

    ``[discord] api_base_url`` / ``gateway_url`` (e.g. a local fake in tests) replace
    discord.py's endpoints for the whole process (``discord.http.Route.BASE`` and
    ``DiscordWebSocket.DEFAULT_GATEWAY``); empty values restore Discord's.
    """
    s = runtime.settings.discord
    discord.http.Route.BASE = s.api_base_url.rstrip("/") if s.api_base_url else _DEFAULT_API_BASE
    discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(s.gateway_url) if s.gateway_url else _DEFAULT_GATEWAY
    return ThreadwiseBot(runtime, intents=intents, guild_ready_timeout=guild_ready_timeout)


async def run_discord(runtime: Any, *, stop: asyncio.Event | None = None, bot: ThreadwiseBot | None = None) -> None:
    """Run the Discord bot until ``stop`` is set (or forever), in the current event loop.

    Args:
        runtime: the opened runtime; ``runtime.secrets.discord_token`` must be set.
        stop: set it to disconnect; in-flight answers get SHUTDOWN_GRACE_SECONDS to finish.
        bot: a client from :func:`build_discord_bot` (tests); default: a new one.
    Raises:
        ValueError: no DISCORD_TOKEN.
        discord.LoginFailure: Discord rejected the token (logged with what to do).
        discord.PrivilegedIntentsRequired, discord.ConnectionClosed: the gateway gave up.
    """
    token = runtime.secrets.discord_token
    if not token:
        raise ValueError("DISCORD_TOKEN is not set")
    bot = bot or build_discord_bot(runtime)
    async with bot:
        try:
            await bot.login(token)
        except discord.LoginFailure:
            log.error(
                "discord: Discord rejected DISCORD_TOKEN (401). Copy the token again from the developer "
                "portal (Bot > Reset Token) into DISCORD_TOKEN."
            )
            raise
        runner = asyncio.create_task(bot.connect_with_fallback(), name="discord gateway")
        waits: set[asyncio.Task[Any]] = {runner}
        if stop is not None:
            waits.add(asyncio.create_task(stop.wait(), name="discord stop"))
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            if runner.done():
                runner.result()  # re-raise a fatal gateway error
            log.info("discord: stopping")
            await bot.drain(SHUTDOWN_GRACE_SECONDS)
        finally:
            for task in waits:
                task.cancel()
            await bot.close()
            await asyncio.gather(*waits, return_exceptions=True)
