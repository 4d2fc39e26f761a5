"""Who the bot answers and who may do what: the rules every platform applies.

* :func:`wants_answer` - is a message for the bot (the reply policy, below), and
  :func:`decline_reason` - the same with the rule that a follow-up without a mention is only
  answered in a conversation the bot takes part in;
* :func:`ignore_reason` - messages from the bot itself and from bots not on the allow-list;
* :func:`is_outsider` - authors from another organisation (Slack Connect, other guilds)
  (the one refusal per message they get: :mod:`bot.interactions.outsiders`);
* :func:`may_answer_help` - who may answer a help request (experts and admins), and
  :func:`help_refusal` - what everyone else is told.

Both adapters call these with facts they read from their events, so Slack and Discord
decide the same way.

Reply policy (``[slack] reply_policy`` / ``[discord] reply_policy`` in config.toml):

* ``all`` - every message in a conversation the bot takes part in is for the bot;
* ``unless_addressed_to_others`` (default) - follow-ups without a mention are for the bot,
  unless they mention someone else (a person, a group/role, ``@here``...) or reply to
  someone else's message: people talking to each other in the bot's thread;
* ``mentions_only`` - only messages that mention the bot (and DMs).

A mention of the bot or a direct message is always for the bot; so is a reply to a help
request in its syntax (``answer: ...``, ``retry: ...``, ``dismiss``: :func:`bot.chat.syntax.is_help_reply`)
in a conversation, whatever the policy and whomever else it mentions (``answer: @here the
VPN is down`` is the expert's answer; its text is escaped when posted).
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, replace

from bot.chat.text import Part


class ReplyPolicy(str, enum.Enum):
    """Which follow-ups in a conversation the bot answers (see the module docstring)."""

    ALL = "all"
    UNLESS_ADDRESSED_TO_OTHERS = "unless_addressed_to_others"
    MENTIONS_ONLY = "mentions_only"


OUTSIDER_REFUSAL = (
    "Sorry, I only answer members of this workspace: my knowledge base is internal. "
    "Please ask someone from the team that runs me."
)


@dataclass(frozen=True)
class Addressing:
    """What a message says about whom it is for.

    Attributes:
        direct: a direct message to the bot.
        mentions_bot: mentions the bot (user or its role).
        others: mentions of, or a reply to, anyone other than the bot (people, groups,
            roles, ``@here``/``@channel``/``@everyone``).
        help_reply: the text (without the bot's mention) is in the help-request reply syntax
            (:func:`bot.chat.syntax.is_help_reply`): it goes to the help desk.
    """

    direct: bool = False
    mentions_bot: bool = False
    others: bool = False
    help_reply: bool = False


def wants_answer(policy: ReplyPolicy | str, addressing: Addressing, *, in_conversation: bool) -> bool:
    """Is this message for the bot?

    Args:
        policy: the platform's reply policy.
        addressing: see :class:`Addressing`.
        in_conversation: the message is in a thread/conversation (the caller still
            checks that the bot takes part in it).

    Returns:
        True for DMs and mentions of the bot, and for replies to a help request in a
        conversation; for other messages in a conversation, what the policy says; False for
        channel chatter.
    """
    if addressing.direct or addressing.mentions_bot:
        return True
    if not in_conversation:
        return False
    if addressing.help_reply:  # the help request asked for it in these words: the help desk decides
        return True
    policy = ReplyPolicy(policy)
    if policy is ReplyPolicy.ALL:
        return True
    if policy is ReplyPolicy.MENTIONS_ONLY:
        return False
    return not addressing.others


NOT_TAKING_PART = "not a conversation the bot takes part in"  # a :func:`decline_reason` (log it quietly)
CHANNEL_CHATTER = "channel chatter"  # a :func:`decline_reason` (log it quietly)


async def decline_reason(
    policy: ReplyPolicy | str,
    addressing: Addressing,
    *,
    in_conversation: bool,
    bot_in_thread: Callable[[], Awaitable[bool]],
    waiting_for_expert: Callable[[], Awaitable[bool]] | None = None,
) -> str:
    """Why the bot does not answer a message ("" when it does): :func:`wants_answer`, then, for a
    follow-up that neither mentions the bot nor is a DM, the bot must take part in the conversation.

    Args:
        policy, addressing, in_conversation: as for :func:`wants_answer`.
        bot_in_thread: the adapter's check that the bot takes part in the conversation (posted
            in it, started it, or the service knows its thread); awaited only when needed.
        waiting_for_expert: the service's check that the conversation waits for an expert
            (:meth:`bot.service.ChatService.waits_for_expert`): a help reply the policy alone would
            not let through is for the bot only then; awaited only when needed (None: not checked).
    """
    if not wants_answer(policy, addressing, in_conversation=in_conversation):
        return f"not for the bot (reply_policy {ReplyPolicy(policy).value})" if in_conversation else CHANNEL_CHATTER
    if addressing.direct or addressing.mentions_bot:
        return ""
    if not await bot_in_thread():
        return NOT_TAKING_PART
    if (
        addressing.help_reply
        and waiting_for_expert is not None
        and not wants_answer(policy, replace(addressing, help_reply=False), in_conversation=in_conversation)
        and not await waiting_for_expert()
    ):
        return f"not for the bot (reply_policy {ReplyPolicy(policy).value}; no help request waits here)"
    return ""


def is_outsider(member_of: str | int | None, home: Iterable[str | int], allowed: Iterable[str | int]) -> bool:
    """Is the author from outside the organisation the bot serves?

    Args:
        member_of: the author's team (Slack ``user_team``) or guild (Discord); None or ""
            when the event does not say (then the author is not an outsider).
        home: the bot's own team(s); empty for Discord (no home guild).
        allowed: the allow-list from config.toml (``[slack] allowed_teams``,
            ``[discord] allowed_guild_ids``).

    For Slack the home team is always allowed; for Discord an empty allow-list allows
    every guild the bot was invited to.
    """
    if member_of in (None, ""):
        return False
    ok = {str(x) for x in home} | {str(x) for x in allowed}
    if not ok:
        return False
    return str(member_of) not in ok


def ignore_reason(
    *,
    author: str | int | None,
    own_id: str | int | None,
    is_bot: bool,
    bot_id: str | int | None,
    allowed_bots: Iterable[str | int],
    mentions_bot: bool,
) -> str:
    """Why a message must not start an answer because of who wrote it ("" when it may).

    The bot never answers itself; other bots and webhooks only when their id is on the
    allow-list (``[slack] allowed_bots``, ``[discord] allowed_bot_ids``) *and* they mention
    the bot (two bots answering each other's follow-ups would never stop).

    Args:
        author: the author's user id (None or "": unknown, ignored).
        own_id: the bot's own user id.
        is_bot: the author is a bot or a webhook.
        bot_id: the id the allow-list holds for it (Slack ``bot_id``, Discord user id).
        allowed_bots: the allow-list. mentions_bot: the message mentions the bot.
    """
    if author in (None, "") or str(author) == str(own_id or ""):
        return "no author, or the bot itself"
    if is_bot and (str(bot_id) not in {str(b) for b in allowed_bots} or not mentions_bot):
        return f"bot {bot_id}"
    return ""


def may_answer_help(*, expert: bool, admin: bool) -> bool:
    """May someone answer, retry or dismiss a help request? Its channel's experts and the
    bot's admins may, on every platform (buttons, modals and text replies alike)."""
    return expert or admin


HELP_REFUSAL = "Only the experts named for this channel, or an admin, can answer help requests."


def help_refusal(experts: Sequence[Part] = ()) -> list[Part]:
    """:data:`HELP_REFUSAL` naming the experts (parts: text and the experts'
    :class:`~bot.chat.text.Mention` s, e.g. from the channel's settings)."""
    named: list[Part] = []
    for expert in experts:
        named += [", "] * bool(named) + [expert]
    if not named:
        return [HELP_REFUSAL]
    return ["Only the experts named for this channel (", *named, "), or an admin, can answer help requests."]
