"""``threadwise discord sync``: publish the /threadwise slash commands without starting the bot."""

from __future__ import annotations

import argparse

from bot.cli.output import out
from bot.config import Secrets, Settings


def add_parsers(
    sub: argparse._SubParsersAction, common: argparse.ArgumentParser, source: argparse.ArgumentParser
) -> None:
    """Add ``discord`` to the command parser ``sub``."""
    ds = sub.add_parser("discord", parents=[common], help="Discord: publish the /threadwise slash commands")
    ds.add_argument("action", choices=["sync"], help="sync: publish the commands (after install or upgrade)")
    ds.add_argument(
        "--guild",
        type=int,
        action="append",
        metavar="ID",
        help="only to this server (repeatable; default: [discord] command_guild_ids, else global)",
    )
    ds.set_defaults(handler=cmd_discord)


async def cmd_discord(args: argparse.Namespace, settings: Settings) -> int:
    """``threadwise discord sync [--guild ID ...]``: publish the /threadwise slash commands
    (globally, or to the given servers) without starting the bot
    (:func:`bot.platforms.discord.commands.sync_commands`)."""
    # discord.py loads only here (and in `run` with DISCORD_TOKEN set)
    import discord

    from bot.platforms.discord.commands import sync_commands

    token = Secrets.from_env().discord_token
    if not token:
        out.err.print("threadwise discord sync: DISCORD_TOKEN is not set", style="red", markup=False)
        return 2
    guilds = args.guild or list(settings.discord.command_guild_ids)
    try:
        names = await sync_commands(token, api_base_url=settings.discord.api_base_url, guild_ids=guilds)
    except discord.LoginFailure:
        out.err.print("threadwise discord sync: Discord rejected DISCORD_TOKEN (401)", style="red", markup=False)
        return 1
    except discord.HTTPException as exc:
        out.err.print(
            f"threadwise discord sync: Discord refused (HTTP {exc.status}, code {exc.code}); invite the "
            "bot with the applications.commands scope",
            style="red",
            markup=False,
        )
        return 1
    where = f"server(s) {', '.join(map(str, guilds))}" if guilds else "all servers (global; may take up to an hour)"
    out.console.print(f"published /{' /'.join(sorted(set(names)))} to {where}", markup=False)
    return 0
