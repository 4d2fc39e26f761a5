"""``threadwise slack manifest [--http URL]``: print the Slack app manifest to paste into
https://api.slack.com/apps (Create New App -> From a manifest), for Socket Mode or for HTTP
mode with every Request URL set, so nobody edits YAML by hand."""

from __future__ import annotations

import argparse
import sys
import urllib.parse
from importlib import resources
from typing import Any

import yaml

from bot.cli.output import out
from bot.config import Settings

#: The manifest (Socket Mode), shipped in the package; slack-manifest.yml at the top of the
#: repository is a link to it.
MANIFEST = ("bot.platforms.slack", "manifest.yml")


def add_parsers(
    sub: argparse._SubParsersAction, common: argparse.ArgumentParser, source: argparse.ArgumentParser
) -> None:
    """Add ``slack`` to the command parser ``sub``."""
    sl = sub.add_parser("slack", parents=[common], help="Slack: print the app manifest (Socket Mode or HTTP mode)")
    sl.add_argument("action", choices=["manifest"], help="manifest: the Slack app manifest as YAML")
    sl.add_argument(
        "--http",
        metavar="URL",
        help="HTTP mode (Events API): the bot's public https:// address; [slack] http_path is added "
        "unless the URL has a path",
    )
    sl.set_defaults(handler=cmd_slack)


def request_url(base: str, http_path: str) -> str:
    """The Request URL Slack posts to: ``base`` (https://host[:port]) plus ``http_path`` when
    ``base`` has no path of its own.

    Raises:
        ValueError: ``base`` is not an https:// URL with a host (Slack accepts only those).
    """
    parts = urllib.parse.urlsplit(base.strip())
    if parts.scheme != "https" or not parts.hostname:
        raise ValueError(f"{base!r} is not an https:// URL (Slack sends events only to HTTPS addresses)")
    if parts.path in ("", "/"):
        parts = parts._replace(path="/" + http_path.lstrip("/"))
    return urllib.parse.urlunsplit(parts)


def manifest(http_url: str | None = None) -> dict[str, Any]:
    """The app manifest: Socket Mode as shipped, or HTTP mode with ``http_url`` (a full
    Request URL, see :func:`request_url`) for events, interactivity and the slash command."""
    data = yaml.safe_load(resources.files(MANIFEST[0]).joinpath(MANIFEST[1]).read_text(encoding="utf-8"))
    if http_url:
        settings = data["settings"]
        settings["socket_mode_enabled"] = False
        settings["event_subscriptions"]["request_url"] = http_url
        settings["interactivity"]["request_url"] = http_url
        for command in data["features"].get("slash_commands", []):
            command["url"] = http_url
    return data


def cmd_slack(args: argparse.Namespace, settings: Settings) -> int:
    """Print the manifest as YAML on stdout; the next steps on stderr."""
    url = None
    if args.http:
        try:
            url = request_url(args.http, settings.slack.http_path)
        except ValueError as exc:
            out.err.print(f"threadwise slack manifest --http: {exc}", style="red", markup=False)
            return 2
    mode = f"HTTP mode, Request URL {url}" if url else "Socket Mode"
    sys.stdout.write(
        f"# Slack app manifest for Threadwise ({mode}): https://api.slack.com/apps -> Create New App -> "
        "From a manifest\n"
    )
    sys.stdout.write(yaml.safe_dump(manifest(url), sort_keys=False, allow_unicode=True, width=1000))
    if url:
        needs = 'set [slack] mode = "http" (THREADWISE_SLACK__MODE=http), SLACK_BOT_TOKEN and SLACK_SIGNING_SECRET'
    else:
        needs = "set SLACK_BOT_TOKEN and SLACK_APP_TOKEN (an app-level token with connections:write)"
    out.err.print(f"Then install the app to your workspace and {needs} (docs/slack.md).", markup=False)
    return 0
