"""Per-channel settings (``[[channels]]`` in config.toml) as every platform applies them.

An entry is matched by platform and channel id (Discord: or name); channels without an
entry use the defaults. What an entry changes:

* what the graph may use in a run there (:func:`run_scope`: knowledge sources, web
  search, learned entries), passed in the run's LangGraph ``configurable["scope"]`` so
  one compiled graph serves every channel;
* who answers help requests there and which follow-ups are for the bot
  (:func:`reply_policy`; the experts are read by each adapter from the entry, as their
  id shapes differ).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bot.config import ChannelSettings, Settings


def entry_for(settings: Settings, platform: str, channel: str, channel_name: str = "") -> ChannelSettings | None:
    """The ``[[channels]]`` entry of a channel, or None."""
    if not channel and not channel_name:
        return None
    return settings.channel(platform, channel, channel_name)


def run_scope(
    settings: Settings,
    platform: str,
    channel: str,
    channel_name: str = "",
    *,
    restrict_sources: bool = True,
    only: Sequence[str] | None = None,
) -> dict[str, Any]:
    """What a run in this channel may use, for ``configurable["scope"]``.

    Returns:
        ``{"sources": [resolved source paths] | None (all), "web": bool, "learning": bool,
        "platform": str, "channel": str}`` (a channel restricted to some sources uses only
        the learned entries learned in it).
        ``restrict_sources=False`` (the CLI's ``--source`` replaced the knowledge base)
        drops the source restriction; ``only`` (``--source`` folders config.toml's index
        holds) searches those sources of it only.
    """
    entry = entry_for(settings, platform, channel, channel_name)
    web = settings.web.enabled if entry is None or entry.web is None else entry.web
    learning = settings.learning.enabled if entry is None or entry.learning is None else entry.learning
    sources = sorted(only) if only else settings.channel_sources(entry) if restrict_sources else None
    return {"sources": sources, "web": bool(web), "learning": bool(learning), "platform": platform, "channel": channel}


def reply_policy(settings: Settings, platform: str, default: str, channel: str, channel_name: str = "") -> str:
    """The channel's reply policy (its entry's, else the platform's ``default``)."""
    entry = entry_for(settings, platform, channel, channel_name)
    return entry.reply_policy if entry is not None and entry.reply_policy else default
