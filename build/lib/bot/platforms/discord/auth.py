"""Who may do what on Discord: admins (reindex) and experts (answer help requests).

Both come from config.toml ``[discord]``: user ids, role ids, and (``admins_with_manage_guild``)
the Manage Server permission. Who may answer help requests is the shared rule
(:func:`bot.chat.policy.may_answer_help`: experts and admins), applied by
:func:`may_answer_help`. In DMs there are no roles or permissions, so only the configured
user ids count.
"""

from __future__ import annotations

import discord

from bot.chat import policy
from bot.config import DiscordSettings


def permissions_of(interaction: discord.Interaction) -> discord.Permissions | None:
    """The user's resolved permissions in the interaction's channel (None in DMs)."""
    return interaction.permissions if interaction.guild_id else None


def role_ids(user: discord.abc.User) -> set[int]:
    """Role ids of a guild member (empty for a plain user, e.g. in DMs)."""
    return {role.id for role in getattr(user, "roles", [])}


def _manage_guild(user: discord.abc.User, permissions: discord.Permissions | None) -> bool:
    if permissions is not None:
        return permissions.manage_guild or permissions.administrator
    perms = getattr(user, "guild_permissions", None)  # Member only
    return bool(perms and (perms.manage_guild or perms.administrator))


def is_admin(user: discord.abc.User, settings: DiscordSettings, permissions: discord.Permissions | None = None) -> bool:
    """May ``user`` run admin commands (reindex)?

    Args:
        user: a ``discord.Member`` (guild) or ``discord.User`` (DM).
        settings: ``[discord]`` settings (admin_user_ids, admin_role_ids, admins_with_manage_guild).
        permissions: the user's resolved permissions when known (``Interaction.permissions``);
            otherwise a member's guild permissions are used.
    """
    if user.id in settings.admin_user_ids:
        return True
    if role_ids(user) & set(settings.admin_role_ids):
        return True
    return settings.admins_with_manage_guild and _manage_guild(user, permissions)


def is_expert(
    user: discord.abc.User, settings: DiscordSettings, permissions: discord.Permissions | None = None
) -> bool:
    """Is ``user`` one of the experts (``expert_user_ids`` or a role in ``expert_role_ids``)?

    ``permissions`` is unused (experts are named, never derived from permissions); it is
    accepted so both checks take the same arguments."""
    return user.id in settings.expert_user_ids or bool(role_ids(user) & set(settings.expert_role_ids))


def may_answer_help(
    user: discord.abc.User, settings: DiscordSettings, permissions: discord.Permissions | None = None
) -> bool:
    """May ``user`` answer, retry or dismiss a help request (buttons, modals, text replies)?
    :func:`bot.chat.policy.may_answer_help` with :func:`is_expert` and :func:`is_admin`.

    Args:
        settings: the conversation's ``[discord]`` settings (its channel's experts applied).
    """
    return policy.may_answer_help(
        expert=is_expert(user, settings, permissions), admin=is_admin(user, settings, permissions)
    )


def expert_mentions(settings: DiscordSettings) -> tuple[str, discord.AllowedMentions]:
    """The mention text for a help request and the AllowedMentions that lets exactly those ping.

    Returns:
        ``("<@&role> <@user>", AllowedMentions)``; an empty text when no experts are configured.
    """
    roles = list(settings.expert_role_ids)
    users = list(settings.expert_user_ids)
    text = " ".join([f"<@&{r}>" for r in roles] + [f"<@{u}>" for u in users])
    allowed = discord.AllowedMentions(
        everyone=False,
        roles=[discord.Object(r) for r in roles],
        users=[discord.Object(u) for u in users],
        replied_user=False,
    )
    return text, allowed
