"""Discord interactions: the help request's buttons and modals, and the 👍 / 👎 feedback.

:class:`Interactions` is held by :class:`bot.platforms.discord.app.ThreadwiseBot`; the
components call it, and the client's ``on_interaction`` hands it modal submits. The components are persistent
(:mod:`bot.platforms.discord.views`: their custom ids carry the thread key, so they work
after a restart); every click is acknowledged at once and its work runs in the background.
Whether a click on a help request is refused, opens a modal or resumes is the shared decision
(:func:`bot.interactions.help_replies.on_help_click`); the resume and the edit of the help request
after it are the shared step (:func:`bot.interactions.help_replies.resume`).
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING, Any, cast

import discord

from bot.chat.text import Mention, Part
from bot.interactions import help_replies, votes
from bot.logs import for_thread
from bot.platforms.discord.auth import is_admin, is_expert, permissions_of
from bot.platforms.discord.responder import InteractionResponder, discord_text
from bot.platforms.discord.views import (
    escalate_view,
    help_modal,
    modal_text,
    parse_modal_id,
    parse_vote_reason_id,
    vote_reason_modal,
)
from bot.protocol import HumanAction

if TYPE_CHECKING:
    from bot.platforms.discord.app import ThreadwiseBot

log = logging.getLogger("threadwise.discord")


def channel_of(thread_key: str) -> int:
    """The id at the end of a Discord thread key: the thread or DM channel (or, for a
    question answered in its channel, the question message)."""
    return int(thread_key.rsplit(":", 1)[1])


class Interactions:
    """Component and modal handlers of :class:`~bot.platforms.discord.app.ThreadwiseBot`.

    Args:
        bot: the client (its ``service``, settings, task registry and the conversations' channels).
    """

    def __init__(self, bot: ThreadwiseBot) -> None:
        self.bot = bot

    def _help_click(
        self, interaction: discord.Interaction, action: HumanAction, thread_key: str, text: str | None = None
    ) -> help_replies.HelpClick:
        """A help request's button (``text`` None) or submitted modal as
        :class:`bot.interactions.help_replies.HelpClick`."""
        user, settings = interaction.user, self.bot.settings_for_thread(thread_key)
        permissions = permissions_of(interaction)
        experts = [Mention(str(r), "role") for r in settings.expert_role_ids]
        experts += [Mention(str(u)) for u in settings.expert_user_ids]
        return help_replies.HelpClick(
            action,
            thread_key,
            str(user.id),
            expert=is_expert(user, settings, permissions),
            admin=is_admin(user, settings, permissions),
            outsider=self.bot.outsider_guild(interaction.guild_id),
            experts=experts,
            text=text,
        )

    async def on_help_button(
        self, interaction: discord.Interaction, action: HumanAction, thread_key: str, interrupt_id: str
    ) -> None:
        """A click on Answer / Retry with hint / Dismiss of a help request:
        :func:`bot.interactions.help_replies.on_help_click` (refusals are the click's ephemeral reply; Answer and
        Retry open a modal, Dismiss resumes at once)."""
        log.info("discord: help button %s by user=%s", action.value, interaction.user.id, extra=for_thread(thread_key))
        await help_replies.on_help_click(
            self._help_click(interaction, action, thread_key), _DiscordHelp(self, interaction, thread_key, interrupt_id)
        )

    async def on_vote_button(self, interaction: discord.Interaction, vote: int, answer_id: str) -> None:
        """👍 / 👎 under an answer: :func:`bot.interactions.votes.on_vote` (a 👎's reason modal is the
        interaction's response, so it opens first)."""
        log.info("discord: vote %+d on answer %s by user=%s", vote, answer_id, interaction.user.id)
        click = votes.VoteClick(
            answer_id, str(interaction.user.id), vote, outsider=self.bot.outsider_guild(interaction.guild_id)
        )
        await self.bot.spawn(
            votes.on_vote(self.bot.service, click, _DiscordFeedback(interaction)), name=f"discord vote {answer_id}"
        )

    async def _on_vote_reason(self, interaction: discord.Interaction, answer_id: str) -> None:
        given = votes.ReasonGiven(answer_id, str(interaction.user.id), modal_text(interaction))
        await votes.on_reason(self.bot.service, given, _DiscordFeedback(interaction))

    async def on_escalate_button(self, interaction: discord.Interaction, answer_id: str) -> None:
        """ "Ask the experts" after a 👎: :func:`bot.interactions.votes.on_escalate`, in the answer's conversation."""
        user = interaction.user
        click = votes.EscalateClick(
            answer_id,
            str(user.id),
            getattr(user, "display_name", "") or user.name,
            outsider=self.bot.outsider_guild(interaction.guild_id),
        )

        def responder_for(record: dict[str, Any]) -> InteractionResponder:
            key = record["thread_key"]
            target = self.bot.get_channel(channel_of(key))
            # a thread or DM is the key's last id; an answer given in a channel is keyed on its question
            channel_id = channel_of(key) if target is not None else int(record["channel"] or channel_of(key))
            return InteractionResponder(
                self.bot,
                interaction,
                ephemeral=True,
                in_thread=True,
                thread_key=key,
                channel_id=channel_id,
                author_id=user.id,
            )

        await self.bot.spawn(
            votes.on_escalate(
                self.bot.service, click, _DiscordFeedback(interaction), platform="discord", responder_for=responder_for
            ),
            name=f"discord escalate {answer_id}",
        )

    async def on_interaction(self, interaction: discord.Interaction) -> None:
        """Handle help-modal submits (``tw:m:...``) and 👎 reasons (``tw:vr:...``); other
        interactions have their own handlers."""
        if interaction.type is not discord.InteractionType.modal_submit:
            return
        custom_id = str(cast(dict[str, Any], interaction.data or {}).get("custom_id", ""))
        answer_id = parse_vote_reason_id(custom_id)
        if answer_id is not None:
            await self.bot.spawn(self._on_vote_reason(interaction, answer_id), name=f"discord vote reason {answer_id}")
            return
        parsed = parse_modal_id(custom_id)
        if parsed is None:
            return
        action, thread_key, interrupt_id = parsed
        log.info(
            "discord: help modal %s submitted by user=%s",
            action.value,
            interaction.user.id,
            extra=for_thread(thread_key),
        )
        await help_replies.on_help_click(
            self._help_click(interaction, action, thread_key, modal_text(interaction)),
            _DiscordHelp(self, interaction, thread_key, interrupt_id),
        )

    async def _resume(
        self,
        interaction: discord.Interaction,
        action: HumanAction,
        text: str,
        thread_key: str,
        interrupt_id: str,
    ) -> None:
        """The shared post-resume step (:func:`bot.interactions.help_replies.resume`): resume once, then
        replace the help request's buttons by the handled note; the deferred interaction
        is answered with the private confirmation."""
        out = InteractionResponder(
            self.bot,
            interaction,
            ephemeral=True,
            in_thread=True,
            thread_key=thread_key,
            channel_id=interaction.channel_id or channel_of(thread_key),
            author_id=interaction.user.id,
        )
        user = interaction.user
        message = interaction.message

        async def close(note: list[Part]) -> None:
            if message is not None:  # the help request: its buttons are spent
                with contextlib.suppress(discord.HTTPException):
                    await message.edit(content=f"{message.content}\n\n-# {discord_text(note)}", view=None)

        channel = self.bot._thread_channels.get(thread_key, self.bot.channel_ref(interaction.channel))[0]
        await help_replies.resume(
            self.bot.service,
            thread_key,
            action,
            text,
            actor=Mention(str(user.id)),
            actor_name=getattr(user, "display_name", "") or user.name,
            allowed=True,
            out=out,
            interrupt_id=interrupt_id,
            channel=channel,
            close=close,
            confirm=True,
        )


class _DiscordHelp:
    """:class:`bot.interactions.help_replies.HelpControls` for one Discord interaction.

    An interaction is answered once, within 3 s: a refusal is that answer (ephemeral), or the
    modal; a resume defers it first (ephemeral "thinking" for a modal's submit) and runs in the
    background, its confirmation following up.
    """

    def __init__(
        self, owner: Interactions, interaction: discord.Interaction, thread_key: str, interrupt_id: str
    ) -> None:
        self.owner, self.interaction, self.thread_key, self.interrupt_id = owner, interaction, thread_key, interrupt_id

    async def tell(self, text: list[Part]) -> None:
        with contextlib.suppress(discord.HTTPException):
            if self.interaction.response.is_done():
                await self.interaction.followup.send(discord_text(text), ephemeral=True)
            else:
                await self.interaction.response.send_message(discord_text(text), ephemeral=True)

    async def open_form(self, action: HumanAction) -> None:
        try:
            await self.interaction.response.send_modal(help_modal(action, self.thread_key, self.interrupt_id))
        except discord.HTTPException as exc:
            log.warning("discord: could not open the help modal: %s", exc, extra=for_thread(self.thread_key))

    async def resume(self, action: HumanAction, text: str) -> None:
        submitted = self.interaction.type is discord.InteractionType.modal_submit
        with contextlib.suppress(discord.HTTPException):  # acknowledge; the replies follow up
            await self.interaction.response.defer(**({"ephemeral": True, "thinking": True} if submitted else {}))
        await self.owner.bot.spawn(
            self.owner._resume(self.interaction, action, text, self.thread_key, self.interrupt_id),
            name=f"discord resume {self.thread_key}",
        )


class _DiscordFeedback:
    """:class:`bot.interactions.votes.FeedbackControls` for one Discord interaction: ephemeral replies.

    An interaction is answered once, within 3 s: a 👎's reason modal is that answer, so it
    opens before the vote is recorded (``reason_first``); other clicks are deferred
    (``acknowledge``) and told by follow-up.
    """

    reason_first = True

    def __init__(self, interaction: discord.Interaction) -> None:
        self.interaction = interaction

    async def acknowledge(self) -> None:
        if not self.interaction.response.is_done():
            with contextlib.suppress(discord.HTTPException):
                await self.interaction.response.defer(ephemeral=True, thinking=True)

    async def tell(self, text: str) -> None:
        with contextlib.suppress(discord.HTTPException):
            if self.interaction.response.is_done():
                await self.interaction.followup.send(text, ephemeral=True)
            else:
                await self.interaction.response.send_message(text, ephemeral=True)

    async def ask_reason(self, answer_id: str) -> bool:
        try:
            await self.interaction.response.send_modal(vote_reason_modal(answer_id))
            return True
        except discord.HTTPException:
            return False

    async def offer_experts(self, answer_id: str, text: str) -> None:
        with contextlib.suppress(discord.HTTPException):
            await self.interaction.followup.send(text, view=escalate_view(answer_id), ephemeral=True)
