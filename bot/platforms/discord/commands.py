"""The ``/threadwise`` slash commands (an :class:`app_commands.Group`) and how they are published.

Commands: ``reindex``, ``status``, ``help``, ``learned [list|forget N]`` (the service's
admin words, :class:`bot.admin.AdminCommands`) and ``remember <text>`` (experts, in a thread).

Publishing ("syncing") tells Discord the commands' shape; it is rate limited and needed only
when the commands change, so, as discord.py's own examples advise, it is not done on every
start (https://discordpy.readthedocs.io/en/stable/interactions/api.html#discord.app_commands.CommandTree.sync):

* ``threadwise discord sync`` publishes them globally (once per upgrade; Discord may take
  up to an hour to show global changes), ``--guild ID`` (repeatable) to given servers only
  (shown at once);
* with ``[discord] command_guild_ids`` set, the bot publishes them to those servers at
  start-up (guild-scoped: cheap, shown at once; for test servers and single-team installs).

Slash commands arrive whether or not this process published them: Discord routes them by name.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Any, Literal

import discord
from discord import app_commands

from bot.interactions.commands import SlashCommand, on_command
from bot.logs import for_thread
from bot.platforms.discord import patches
from bot.platforms.discord.auth import is_admin, may_answer_help, permissions_of
from bot.platforms.discord.messages import thread_key_for
from bot.platforms.discord.responder import InteractionResponder
from bot.protocol import IncomingMessage

if TYPE_CHECKING:
    from bot.platforms.discord.app import ThreadwiseBot

log = logging.getLogger("threadwise.discord")


class ThreadwiseCommands(app_commands.Group):
    """``/threadwise ...``, bound to the bot that runs them.

    Args:
        bot: the running client; None for a group that is only published (``threadwise discord sync``).
    """

    def __init__(self, bot: ThreadwiseBot | None = None) -> None:
        super().__init__(name="threadwise", description="Threadwise: knowledge base Q&A bot")
        self.bot = bot

    @app_commands.command(name="reindex", description="Rebuild the knowledge index (admins only)")
    @app_commands.describe(source="one source to sync, by its name (default: every source)")
    async def reindex(self, interaction: discord.Interaction, source: str | None = None) -> None:
        await self.run_admin(interaction, f"reindex {source.strip()}" if source and source.strip() else "reindex")

    @app_commands.command(name="status", description="Show the knowledge base and bot status")
    async def status(self, interaction: discord.Interaction) -> None:
        await self.run_admin(interaction, "status")

    @app_commands.command(name="help", description="How to ask Threadwise questions")
    async def help_(self, interaction: discord.Interaction) -> None:
        await self.run_admin(interaction, "help")

    @app_commands.command(name="learned", description="List or remove what I learned from experts (admins only)")
    @app_commands.describe(action="list the entries, or forget one", entry="the entry number to forget")
    async def learned(
        self, interaction: discord.Interaction, action: Literal["list", "forget"] = "list", entry: int | None = None
    ) -> None:
        await self.run_admin(interaction, f"learned {action}" + (f" {entry}" if entry is not None else ""))

    @app_commands.command(name="remember", description="Experts: save an answer to this thread's question")
    @app_commands.describe(text="the answer, as you would give it to a teammate")
    async def remember(self, interaction: discord.Interaction, text: str) -> None:
        await self.run_remember(interaction, text)

    # ------------------------------------------------------------------ handlers
    def _bot(self) -> ThreadwiseBot:
        if self.bot is None:
            raise RuntimeError("these /threadwise commands are only for publishing")
        return self.bot

    async def run_admin(self, interaction: discord.Interaction, command: str) -> None:
        """``/threadwise <command>``: :func:`bot.interactions.commands.on_command` (outsiders refused).
        Non-admins see only ephemeral replies (a refused reindex is ephemeral)."""
        bot = self._bot()
        user = interaction.user
        admin = is_admin(user, bot.discord_settings, permissions_of(interaction))
        thread_key = thread_key_for(
            interaction.channel or discord.Object(interaction.channel_id or 0), interaction.guild_id
        )
        out = InteractionResponder(
            bot,
            interaction,
            ephemeral=not admin,
            thread_key=thread_key,
            channel_id=interaction.channel_id or 0,
            author_id=user.id,
        )
        slash = SlashCommand(
            "discord",
            command,
            str(user.id),
            admin,
            outsider=bot.outsider_guild(interaction.guild_id),
            thread_key=thread_key,
        )
        keep_alive = asyncio.create_task(out.keep_alive(bot.defer_after_seconds))
        try:
            await bot.spawn(on_command(bot.service, slash, out), name=f"discord admin {command}")  # tracked
        finally:
            keep_alive.cancel()

    async def run_remember(self, interaction: discord.Interaction, text: str) -> None:
        """``/threadwise remember <text>`` in a thread: the service saves a learned entry
        (experts and admins); the reply is ephemeral."""
        bot = self._bot()
        user = interaction.user
        channel = interaction.channel or discord.Object(interaction.channel_id or 0)
        thread_key = thread_key_for(channel, interaction.guild_id)
        channel_id, channel_name = bot.channel_ref(interaction.channel)
        here = bot.settings_for(channel_id, channel_name)
        msg = IncomingMessage(
            platform="discord",
            thread_key=thread_key,
            message_id=f"discord:{interaction.id}",
            author_id=str(user.id),
            text=f"remember: {text}",
            author_name=getattr(user, "display_name", "") or user.name,
            is_expert=may_answer_help(user, here, permissions_of(interaction)),
            channel=channel_id,
            channel_name=channel_name,
        )
        out = InteractionResponder(
            bot,
            interaction,
            ephemeral=True,
            thread_key=thread_key,
            channel_id=interaction.channel_id or 0,
            author_id=user.id,
        )
        log.info("discord: /threadwise remember by user=%s", user.id, extra=for_thread(thread_key))
        await bot.spawn(bot.service.remember(msg, text.strip(), out), name=f"discord remember {thread_key}")


async def on_command_error(interaction: discord.Interaction, error: app_commands.AppCommandError) -> None:
    """The command tree's error handler: logged, and the user told (ephemerally) if nothing answered yet."""
    log.error("discord: slash command failed: %r", error)
    with contextlib.suppress(discord.HTTPException):
        if not interaction.response.is_done():
            await interaction.response.send_message("Sorry, that command failed.", ephemeral=True)


async def publish(tree: app_commands.CommandTree[Any], guild_ids: list[int]) -> list[str]:
    """Publish the tree's commands: to each server of ``guild_ids``, or globally when empty.

    Returns:
        The published command names (per server, or once for global).

    Raises:
        discord.HTTPException: Discord refused (e.g. 403: the bot was invited without the
            ``applications.commands`` scope).
    """
    names: list[str] = []
    if guild_ids:
        for gid in guild_ids:
            guild = discord.Object(gid)
            tree.copy_global_to(guild=guild)
            names += [c.name for c in await tree.sync(guild=guild)]
    else:
        names += [c.name for c in await tree.sync()]
    return names


async def sync_commands(token: str, *, api_base_url: str = "", guild_ids: list[int] | None = None) -> list[str]:
    """``threadwise discord sync [--guild ID]``: log in over HTTP (no gateway) and publish
    ``/threadwise`` globally, or to ``guild_ids``.

    Args:
        token: DISCORD_TOKEN. api_base_url: ``[discord] api_base_url`` ("" : Discord's).
        guild_ids: servers to publish to; None or empty: global.

    Returns:
        The published command names.

    Raises:
        discord.LoginFailure: the token was rejected.
        discord.HTTPException: Discord refused the publication.
    """
    patches.apply(api_base_url)
    client = discord.Client(intents=discord.Intents.none())
    tree: app_commands.CommandTree[Any] = app_commands.CommandTree(client)
    tree.add_command(ThreadwiseCommands())
    async with client:
        await client.login(token)
        names = await publish(tree, list(guild_ids or []))
    log.info("discord: /threadwise published (%s)", f"servers {list(guild_ids or [])}" if guild_ids else "global")
    return names
