"""The Discord adapter: discord.py in the same event loop as everything else.

This module is the client and its lifecycle (connect, intents fallback, shutdown); the
rest of the adapter is split by concern:

* :mod:`bot.platforms.discord.messages` - gateway messages in: which are questions, where answered;
* :mod:`bot.platforms.discord.interactions` - help-request buttons and modals, feedback votes;
* :mod:`bot.platforms.discord.commands` - ``/threadwise`` (an app_commands Group) and its publishing;
* :mod:`bot.platforms.discord.responder` - posting (answers, help requests, reactions);
* :mod:`bot.platforms.discord.format`, :mod:`~bot.platforms.discord.views`,
  :mod:`~bot.platforms.discord.auth` - text, components, who is admin/expert;
* :mod:`bot.platforms.discord.patches` - the process-wide discord.py settings (endpoints, JSON).

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
* ``/threadwise reindex|status|help|learned|remember`` (application commands, published on demand);
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
import copy
import logging
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

import discord
from discord import app_commands

from bot.chat.channels import entry_for
from bot.chat.policy import is_outsider
from bot.chat.tasks import BackgroundTasks
from bot.config import DiscordSettings, Secrets, Settings
from bot.platforms.discord import patches
from bot.platforms.discord.commands import ThreadwiseCommands, on_command_error, publish
from bot.platforms.discord.interactions import Interactions, channel_of
from bot.platforms.discord.messages import Messages, thread_key_for
from bot.platforms.discord.responder import DiscordResponder
from bot.platforms.discord.views import EscalateButton, HelpButton, VoteButton

__all__ = ["ThreadwiseBot", "build_discord_bot", "channel_of", "discord_enabled", "run_discord", "thread_key_for"]

if TYPE_CHECKING:
    from bot.runtime import Runtime

log = logging.getLogger("threadwise.discord")

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
        self, runtime: Runtime, *, intents: discord.Intents | None = None, guild_ready_timeout: float = 2.0
    ) -> None:
        # Threadwise never joins voice: skip discord.py's warnings about missing voice libraries.
        discord.VoiceClient.warn_nacl = discord.VoiceClient.warn_dave = False
        ds = runtime.settings.discord
        # [discord] shard_id/shard_count (docs/deploy.md): this replica's shard of the gateway
        super().__init__(
            intents=intents or default_intents(),
            allowed_mentions=discord.AllowedMentions.none(),
            guild_ready_timeout=guild_ready_timeout,
            chunk_guilds_at_startup=False,
            shard_id=ds.shard_id if ds.shard_count else None,
            shard_count=ds.shard_count or None,
        )
        self.runtime = runtime
        self.service = runtime.service
        self.discord_settings = runtime.settings.discord
        self.message_content_enabled = self.intents.message_content
        self.tree = app_commands.CommandTree(self)
        self.messages = Messages(self)
        self.interactions = Interactions(self)
        self.commands = ThreadwiseCommands(self)
        self.tree.add_command(self.commands)
        self.tree.on_error = on_command_error  # type: ignore[method-assign]
        self._tasks = BackgroundTasks("discord", log)
        self._thread_channels: dict[str, tuple[str, str]] = {}  # thread key -> (channel id, name)
        self.service.register_platform(
            "discord", lambda ref: DiscordResponder.from_reference(self, ref), ready=self.wait_until_ready
        )

    # ------------------------------------------------------------------ per-channel settings
    @staticmethod
    def channel_ref(channel: Any) -> tuple[str, str]:
        """``(id, name)`` of the channel a conversation belongs to: a thread's parent
        channel, else the channel itself ("" name for DMs and uncached channels)."""
        parent = getattr(channel, "parent", None)
        if parent is not None or getattr(channel, "parent_id", None):
            parent_id = getattr(channel, "parent_id", "") or getattr(parent, "id", "")
            return str(parent_id), str(getattr(parent, "name", "") or "")
        return str(getattr(channel, "id", "") or ""), str(getattr(channel, "name", "") or "")

    def settings_for(self, channel_id: str, channel_name: str = "") -> DiscordSettings:
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

    def settings_for_thread(self, thread_key: str) -> DiscordSettings:
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

    def outsider_guild(self, guild_id: int | None) -> bool:
        """True for a server outside ``[discord] allowed_guild_ids`` (when that list is set;
        :func:`bot.chat.policy.is_outsider`)."""
        return is_outsider(guild_id, (), self.discord_settings.allowed_guild_ids)

    # ------------------------------------------------------------------ events
    async def on_message(self, message: discord.Message) -> None:
        """A gateway message: :meth:`bot.platforms.discord.messages.Messages.on_message`."""
        await self.messages.on_message(message)

    async def on_interaction(self, interaction: discord.Interaction) -> None:
        """Modal submits: :meth:`bot.platforms.discord.interactions.Interactions.on_interaction`
        (slash commands and buttons have their own handlers)."""
        await self.interactions.on_interaction(interaction)

    # ------------------------------------------------------------------ start-up
    async def setup_hook(self) -> None:
        """Register the persistent components; publish ``/threadwise`` to the servers of
        ``[discord] command_guild_ids`` when set (never globally on start: that is
        ``threadwise discord sync``, :mod:`bot.platforms.discord.commands`)."""
        self.add_dynamic_items(HelpButton, VoteButton, EscalateButton)
        guild_ids = list(self.discord_settings.command_guild_ids)
        if not guild_ids:
            log.info(
                "discord: slash commands not published on start; run `threadwise discord sync` once "
                "(or set [discord] command_guild_ids) if /threadwise is missing"
            )
            return
        try:
            await publish(self.tree, guild_ids)
            log.info("discord: slash commands published to servers %s", guild_ids)
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
                log.error(
                    "discord: gateway event could not be handled (%s: %s); reconnecting in %.0f s",
                    type(exc).__name__,
                    str(exc)[:200],
                    backoff,
                )
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


def build_discord_bot(
    runtime: Runtime, *, guild_ready_timeout: float = 2.0, intents: discord.Intents | None = None
) -> ThreadwiseBot:
    """Build the client for ``runtime`` (not connected yet).

    ``[discord] api_base_url`` / ``gateway_url`` (e.g. a local fake in tests) replace
    discord.py's endpoints for the whole process (:mod:`bot.platforms.discord.patches`).
    """
    s = runtime.settings.discord
    patches.apply(s.api_base_url, s.gateway_url)
    return ThreadwiseBot(runtime, intents=intents, guild_ready_timeout=guild_ready_timeout)


async def run_discord(runtime: Runtime, *, stop: asyncio.Event | None = None, bot: ThreadwiseBot | None = None) -> None:
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
    runtime.health.watch("discord", lambda: bot.is_ready() and not bot.is_closed() and bool(bot.ws and bot.ws.open))
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
