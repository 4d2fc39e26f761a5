"""Slack interactions: help-request buttons and forms, feedback votes, the slash command.

:class:`Interactions` is held by :class:`bot.platforms.slack.app.SlackBot`, whose bolt
listeners acknowledge each payload and hand it here in the background. It only reads the
payloads and lends Slack's transport: what a click, a form or a command does is decided by
:mod:`bot.chat.help`, :mod:`bot.interactions.votes` and :mod:`bot.interactions.commands`. Interactions from
another organisation get the same one refusal as messages (:meth:`Interactions.outsider_user`).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from bot.chat import vote_controls
from bot.chat.policy import is_outsider
from bot.chat.text import Mention, Part
from bot.chat.threads import parse_thread_key
from bot.interactions import help_replies, votes
from bot.interactions.commands import SlashCommand, on_command
from bot.logs import for_thread
from bot.platforms.slack.blocks import (
    ACTION_ANSWER,
    ACTION_RETRY,
    ACTION_VOTE_UP,
    MODAL_ANSWER,
    HelpRef,
    escalate_offer_blocks,
    expert_mentions,
    help_handled_message,
    help_modal,
    modal_text,
    question_block_of,
    vote_reason_modal,
)
from bot.platforms.slack.client import slack_error
from bot.platforms.slack.responder import SlackPlace, SlackResponder
from bot.protocol import HumanAction

if TYPE_CHECKING:
    from bot.platforms.slack.app import SlackBot

log = logging.getLogger(__name__)


class Interactions:
    """Buttons, modals and slash commands of one :class:`~bot.platforms.slack.app.SlackBot`.

    Args:
        bot: the adapter (its service, Slack settings, clients and directory).
    """

    def __init__(self, bot: SlackBot) -> None:
        self.bot = bot
        self.service = bot.service
        self.settings = bot.settings

    async def outsider_user(self, body: dict) -> bool:
        """The outsider rule (:func:`bot.chat.policy.is_outsider`) for a slash command or an
        interaction (button, modal): the user's team (``user.team_id``; a command's
        ``user_team`` or ``team_id``) against our own team (``auth.test``, else the payload's
        team) and ``[slack] allowed_teams``."""
        user = body.get("user")
        if not isinstance(user, dict):
            user = {}
        member_of = user.get("team_id") or body.get("user_team") or body.get("team_id")
        home = await self.bot.home_team() or str((body.get("team") or {}).get("id") or body.get("team_id") or "")
        return is_outsider(member_of, {home} if home else set(), self.settings.allowed_teams)

    def place(self, ref: HelpRef, user: str, **extra: Any) -> SlackPlace:
        """Where replies about the help request ``ref`` go, shown to ``user``."""
        key = parse_thread_key(ref.thread_key)
        team = key["team"] if key is not None and key.platform == "slack" else ""
        return SlackPlace(team=team, channel=ref.channel, thread_ts=ref.root, user=user, **extra)

    async def _help_click(
        self, body: dict, ref: HelpRef, user: str, action: HumanAction, text: str | None = None
    ) -> help_replies.HelpClick:
        """A help request's button (``text`` None) or submitted form as
        :class:`bot.interactions.help_replies.HelpClick`."""
        experts = self.bot.experts_for(ref.channel)
        return help_replies.HelpClick(
            action,
            ref.thread_key,
            user,
            expert=await self.bot.directory.is_expert(user, experts),
            admin=self.bot.directory.is_admin(user),
            outsider=await self.outsider_user(body),
            experts=expert_mentions(experts),
            text=text,
        )

    async def on_help_button(self, body: dict, action: dict) -> None:
        """A help request button: :func:`bot.interactions.help_replies.on_help_click` (Dismiss resumes at once;
        Answer/Retry open a modal)."""
        ref = HelpRef.loads(str(action.get("value") or ""))
        message = body.get("message") or {}
        ref = HelpRef(
            ref.thread_key,
            ref.channel,
            ref.root,
            ref.question_ts,
            ref.interrupt_id,
            help_ts=str(message.get("ts") or ""),
        )
        user = str((body.get("user") or {}).get("id") or "")
        kind = {ACTION_ANSWER: HumanAction.ANSWER, ACTION_RETRY: HumanAction.RETRY}.get(
            str(action.get("action_id")), HumanAction.DISMISS
        )
        await help_replies.on_help_click(
            await self._help_click(body, ref, user, kind),
            _SlackHelp(self.bot, self, body, ref, user, question_block_of(message.get("blocks"))),
        )

    async def on_modal(self, body: dict, view: dict) -> None:
        """A submitted Answer / Retry modal: :func:`bot.interactions.help_replies.on_help_click`."""
        ref = HelpRef.loads(str(view.get("private_metadata") or ""))
        user = str((body.get("user") or {}).get("id") or "")
        kind = HumanAction.ANSWER if view.get("callback_id") == MODAL_ANSWER else HumanAction.RETRY
        await help_replies.on_help_click(
            await self._help_click(body, ref, user, kind, modal_text(view)),
            _SlackHelp(self.bot, self, body, ref, user, question_block_of(view.get("blocks"))),
        )

    async def resume(
        self, ref: HelpRef, action: HumanAction, text: str, user: str, body: dict, question: dict | None
    ) -> None:
        """Resume the paused run once; a second attempt gets an ephemeral "already handled"."""
        fallback = str((body.get("user") or {}).get("name") or "")
        name = await self.bot.directory.display_name(user, fallback)
        waiting = str(self.settings.reactions.waiting_human).strip(":")
        out = self.bot.responder(self.place(ref, user, message_ts=ref.question_ts, shown=[waiting]))
        log.info("slack help request: %s by %s", action.value, user, extra=for_thread(ref.thread_key))

        async def close(note: list[Part]) -> None:
            msg = help_handled_message(question, note)
            try:
                await self.bot.client.chat_update(channel=ref.channel, ts=ref.help_ts, **msg)
            except Exception as exc:  # noqa: BLE001
                log.warning(
                    "slack chat.update of help request failed: %s", slack_error(exc), extra=for_thread(ref.thread_key)
                )

        if not await help_replies.resume(
            self.service,
            ref.thread_key,
            action,
            text,
            actor=Mention(user),
            actor_name=name,
            allowed=True,
            out=out,
            interrupt_id=ref.interrupt_id,
            channel=ref.channel,
            close=close if ref.help_ts else None,
        ):
            log.info(
                "slack help request: %s by %s not resumed (already handled)",
                action.value,
                user,
                extra=for_thread(ref.thread_key),
            )

    # ---- feedback ----------------------------------------------------------------------
    def _vote_place(self, body: dict) -> SlackPlace:
        container = body.get("container") or {}
        message = body.get("message") or {}
        channel = str(container.get("channel_id") or (body.get("channel") or {}).get("id") or "")
        return SlackPlace(
            team=str((body.get("team") or {}).get("id") or ""),
            channel=channel,
            thread_ts=str(message.get("thread_ts") or container.get("thread_ts") or ""),
            user=str((body.get("user") or {}).get("id") or ""),
        )

    async def on_vote(self, body: dict, action: dict) -> None:
        """👍 / 👎 under an answer: :func:`bot.interactions.votes.on_vote`."""
        place = self._vote_place(body)
        vote = vote_controls.UP if action.get("action_id") == ACTION_VOTE_UP else vote_controls.DOWN
        click = votes.VoteClick(
            str(action.get("value") or ""), place.user, vote, outsider=await self.outsider_user(body)
        )
        await votes.on_vote(self.service, click, _SlackFeedback(self.bot, body, place))

    async def on_escalate(self, body: dict, action: dict) -> None:
        """ "Ask the experts" after a 👎: :func:`bot.interactions.votes.on_escalate`."""
        user = str((body.get("user") or {}).get("id") or "")
        name = await self.bot.directory.display_name(user, str((body.get("user") or {}).get("name") or ""))
        click = votes.EscalateClick(str(action.get("value") or ""), user, name, outsider=await self.outsider_user(body))

        def responder_for(record: dict[str, Any]) -> SlackResponder:
            key = parse_thread_key(record["thread_key"])
            assert key is not None
            return self.bot.responder(
                SlackPlace(team=key["team"], channel=key["channel"], thread_ts=key["root"], user=user)
            )

        await votes.on_escalate(
            self.service,
            click,
            _SlackFeedback(self.bot, body, self._vote_place(body)),
            platform="slack",
            responder_for=responder_for,
        )

    async def on_vote_reason(self, body: dict, view: dict) -> None:
        """The 👎 reason modal was submitted: :func:`bot.interactions.votes.on_reason`."""
        user = str((body.get("user") or {}).get("id") or "")
        if await self.outsider_user(body):
            log.info("slack vote reason by %s refused: outside the workspace", user)
            return
        given = votes.ReasonGiven(str(view.get("private_metadata") or ""), user, modal_text(view))
        await votes.on_reason(self.service, given, _SlackFeedback(self.bot, body, self._vote_place(body)))

    # ---- admin -------------------------------------------------------------------------
    async def on_command(self, body: dict) -> None:
        """``/threadwise <words>``: :func:`bot.interactions.commands.on_command` (outsiders refused,
        :meth:`_outsider_user`)."""
        user, channel = str(body.get("user_id") or ""), str(body.get("channel_id") or "")
        place = SlackPlace(
            team=str(body.get("team_id") or ""),
            channel=channel,
            user=user,
            response_url=str(body.get("response_url") or ""),
        )
        command = SlashCommand(
            "slack",
            str(body.get("text") or ""),
            user,
            self.bot.directory.is_admin(user),
            outsider=await self.outsider_user(body),
            thread_key=place.thread_key,
        )
        await on_command(self.service, command, self.bot.responder(place))


class _SlackHelp:
    """:class:`bot.interactions.help_replies.HelpControls` on Slack: ephemeral notes, ``views.open`` and the resume."""

    def __init__(
        self, bot: SlackBot, interactions: Interactions, body: dict, ref: HelpRef, user: str, question: dict | None
    ) -> None:
        self.bot, self.interactions = bot, interactions
        self.body, self.ref, self.user, self.question = body, ref, user, question

    async def tell(self, text: list[Part]) -> None:
        await self.bot.responder(self.interactions.place(self.ref, self.user)).notify_private(text)

    async def open_form(self, action: HumanAction) -> None:
        key = self.ref.thread_key
        try:
            await self.bot.client.views_open(
                trigger_id=self.body["trigger_id"], view=help_modal(action, self.ref, self.question)
            )
            log.info("slack help modal (%s) opened by %s", action.value, self.user, extra=for_thread(key))
        except Exception as exc:  # noqa: BLE001
            log.warning("slack views.open failed: %s", slack_error(exc), extra=for_thread(key))
            await self.tell(
                [
                    (
                        f"I couldn't open the form ({slack_error(exc)}). Reply in the thread with "
                        f"`{action.value}: ...` instead."
                    )
                ]
            )

    async def resume(self, action: HumanAction, text: str) -> None:
        await self.interactions.resume(self.ref, action, text, self.user, self.body, self.question)


class _SlackFeedback:
    """:class:`bot.interactions.votes.FeedbackControls` on Slack: ephemeral messages and a modal.

    The reason modal opens once the vote is recorded (``views.open`` with the click's
    ``trigger_id``, valid 3 s), the offer to ask the experts next to it (``reason_first`` False).
    """

    reason_first = False

    def __init__(self, bot: SlackBot, body: dict, place: SlackPlace) -> None:
        self.bot, self.body, self.place = bot, body, place

    async def acknowledge(self) -> None:
        """Nothing to do: bolt acknowledged the request before the work started."""

    async def tell(self, text: str) -> None:
        await self.bot.responder(self.place).notify_private(text)

    async def ask_reason(self, answer_id: str) -> bool:
        if not self.body.get("trigger_id"):
            return False
        try:
            await self.bot.client.views_open(trigger_id=self.body["trigger_id"], view=vote_reason_modal(answer_id))
            return True
        except Exception as exc:  # noqa: BLE001
            log.warning("slack views.open (vote reason) failed in %s: %s", self.place.channel, slack_error(exc))
            return False

    async def offer_experts(self, answer_id: str, text: str) -> None:
        kwargs: dict[str, Any] = {
            "channel": self.place.channel,
            "user": self.place.user,
            "text": text,
            "blocks": escalate_offer_blocks(answer_id, text),
        }
        if self.place.thread_ts:
            kwargs["thread_ts"] = self.place.thread_ts
        try:
            await self.bot.client.chat_postEphemeral(**kwargs)
        except Exception as exc:  # noqa: BLE001
            log.info("slack expert offer not shown in %s: %s", self.place.channel, slack_error(exc))
