"""``threadwise db upgrade|status``: the PostgreSQL schema ([storage] backend = "postgres")."""

from __future__ import annotations

import argparse

from bot.cli.output import out
from bot.config import Settings


def add_parsers(
    sub: argparse._SubParsersAction, common: argparse.ArgumentParser, source: argparse.ArgumentParser
) -> None:
    """Add ``db`` to the command parser ``sub``."""
    d = sub.add_parser("db", parents=[common], help='the PostgreSQL schema ([storage] backend = "postgres")')
    d.add_argument("action", choices=["upgrade", "status"], help="upgrade: create or migrate it; status: its version")
    d.set_defaults(handler=cmd_db)


async def cmd_db(args: argparse.Namespace, settings: Settings) -> int:
    """``threadwise db upgrade``: create or upgrade the PostgreSQL schema (also done at every
    start); ``threadwise db status``: print its version. Both need [storage] backend = "postgres"."""
    # the storage libraries (langgraph's checkpointers, psycopg) load only here
    from bot.storage import database_url, open_storage
    from bot.storage.postgres import describe_dsn, migrations

    if settings.storage.backend != "postgres":
        out.console.print(
            '[storage] backend = "sqlite": the SQLite files are created and upgraded at start; nothing to do.',
            markup=False,
        )
        return 0
    url = database_url()
    if args.action == "status":
        from bot.storage.postgres.pools import probe

        # a wrong URL, an unknown host, a closed port or a missing database: one line (DatabaseError)
        conn = await probe(url, "threadwise-cli", settings.storage.connect_timeout_seconds)
        try:
            version = await migrations.current_version(conn)
        finally:
            await conn.close()
        out.console.print(
            f"{describe_dsn(url)}: schema version {version} (this program: {migrations.LATEST})", markup=False
        )
        return 0 if version == migrations.LATEST else 1
    async with open_storage(settings, url):  # upgrades the schema on open
        pass
    out.console.print(f"{describe_dsn(url)}: schema at version {migrations.LATEST}", markup=False)
    return 0
