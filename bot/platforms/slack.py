"""The Slack adapter: slack-bolt's AsyncApp wired to the ChatService, in Socket Mode or HTTP mode.

Triggers: an @mention in a channel (``app_mention``), any message in a DM with the bot
(``message.im``), and a reply in a thread the bot already takes part in
(``message.channels`` / ``.groups`` / ``.mpim``, no re-mention needed) unless
``[slack] reply_policy`` says it is not for the bot (default: a reply that mentions
someone else and not the bot is people talking to each other; :mod:`bot.chat.policy`).
People from another organisation in a Slack Connect channel (the event's ``user_team``
is neither our team nor in ``[slack] allowed_teams``) get one polite refusal, no answer
and no LLM call. An @mention in a
channel arrives twice (app_mention and message): both become the same
:class:`IncomingMessage` (``message_id = slack:<channel>:<ts>``), and the service answers
a message id once, persisted across restarts. Edits, deletions, unfurls, joins and other
message subtypes, the bot's own posts and other bots' posts (unless allow-listed in
``[slack] allowed_bots`` and mentioning us) never start an answer.

Every listener only filters and acknowledges; the work (service calls, Slack posts)
runs in background tasks, so Slack gets its acknowledgement well within 3 seconds
(https://docs.slack.dev/apis/events-api/#responding). Answers always go to the thread of
the question: ``thread_ts`` is the root ts (the message's ``thread_ts`` if it has one,
else its ``ts``), and the thread key is ``slack:<team>:<channel>:<root ts>``.

Help requests carry buttons (Answer / Retry with hint -> a modal; Dismiss); the channel's
experts (``[slack] experts`` or its ``[[channels]]`` entry) and ``[slack] admins`` may use
them, others get an ephemeral notice (:func:`bot.chat.help.on_help_click` decides). ``/threadwise
reindex|status|help`` runs admin commands (``[slack] admins`` may reindex;
:mod:`bot.chat.commands`). Slash commands and interactions (buttons, modals) from another
organisation get the same one refusal as messages: the user's team is compared with ours
(``auth.test``) and ``[slack] allowed_teams``. Votes and "Ask the experts" are handled by
:mod:`bot.chat.feedback`; this module only reads the payloads and lends Slack's transport.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable, Coroutine
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response
from slack_bolt.async_app import AsyncApp
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse
from slack_sdk.signature import SignatureVerifier
from slack_sdk.web.async_client import AsyncWebClient

from bot.chat import feedback, help
from bot.chat.channels import entry_for, reply_policy
from bot.chat.commands import SlashCommand, on_command
from bot.chat.policy import (
    CHANNEL_CHATTER,
    NOT_TAKING_PART,
    Addressing,
    decline_reason,
    ignore_reason,
    is_outsider,
    may_answer_help,
    refuse_outsider_once,
)
from bot.chat.tasks import BackgroundTasks
from bot.chat.text import Mention, Part
from bot.chat.threads import parse_thread_key
from bot.config import Secrets, Settings
from bot.logs import for_thread
from bot.platforms.slack_blocks import (
    ACTION_ANSWER,
    ACTION_DISMISS,
    ACTION_RETRY,
    ACTION_VOTE_DOWN,
    ACTION_VOTE_ESCALATE,
    ACTION_VOTE_UP,
    INPUT_BLOCK,
    MODAL_ANSWER,
    MODAL_RETRY,
    MODAL_VOTE_REASON,
    HelpRef,
    escalate_offer_blocks,
    expert_mentions,
    help_handled_message,
    help_modal,
    modal_text,
    question_block_of,
    vote_reason_modal,
)
from bot.platforms.slack_client import (
    SlackDirectory,
    best_effort_copy,
    make_client,
    open_shared_session,
    slack_error,
)
from bot.platforms.slack_format import incoming_text
from bot.platforms.slack_responder import (
    SlackPlace,
    SlackResponder,
    place_from_reference,
)
from bot.protocol import UNFINISHED_STATUSES, HumanAction, IncomingMessage

if TYPE_CHECKING:
    from bot.runtime import Runtime
    from bot.service.threads import Ticket

log = logging.getLogger(__name__)

COMMAND = "/threadwise"
#: Listen backlog of the Events API server (connections the kernel holds before the event
#: loop accepts them; listen(2), capped by net.core.somaxconn). aiohttp's default is 128:
#: a burst of 200 questions (400 deliveries, as Slack sends an app_mention and a message
#: event each) overflowed it, the kernel dropped SYNs and those acks took 1 s longer (TCP's
#: initial retransmission timeout, RFC 6298), bench/README.md "Sixth round".
HTTP_BACKLOG = 2048
# <@U1>, <@U1|name>, <!subteam^S1>, <!here>, <!channel>, <!everyone> in incoming text
_ADDRESS = re.compile(r"<(@[UW][A-Z0-9]+|!subteam\^[A-Z0-9]+|!here|!channel|!everyone)(?:\|[^>]*)?>")
# Message subtypes that are still a person writing a message; every other subtype
# (message_changed, message_deleted, bot_message, channel_join, ...) is ignored.
_USER_SUBTYPES = {None, "", "file_share", "thread_broadcast"}


def _quiet_token_warning(record: logging.LogRecord) -> bool:
    """Drop bolt's "token will be unused" warning: bolt reads SLACK_BOT_TOKEN from the
    environment by itself, while our client already carries that same token."""
    return "`token` will be unused" not in record.getMessage()


class SlackBot:
    """A bolt AsyncApp wired to the runtime's ChatService.

    Args:
        runtime: has ``.service`` (ChatService), ``.settings`` (Settings), ``.secrets`` (Secrets).
        client: a ready AsyncWebClient (tests); default: one built from
            ``SLACK_BOT_TOKEN`` and ``[slack] api_base_url`` with retry handlers.

    Use :meth:`dispatch` to deliver a request (HTTP body + headers), :meth:`drain` to
    wait for the background work, :func:`run_slack` to serve it.
    """

    def __init__(self, runtime: Runtime, *, client: AsyncWebClient | None = None) -> None:
        self.runtime = runtime
        self.service = runtime.service
        settings: Settings = runtime.settings
        secrets: Secrets = runtime.secrets
        self.settings = settings.slack
        self.help_timeout_seconds = settings.service.help_timeout_seconds
        self.client = client or make_client(secrets.slack_bot_token, self.settings.api_base_url,
                                            rate_limit_retries=self.settings.rate_limit_retries)
        self.quiet_client = best_effort_copy(self.client)
        self.directory = SlackDirectory(self.client, self.settings)
        bolt_log = logging.getLogger("slack_bolt")
        bolt_log.addFilter(_quiet_token_warning)
        self.app = AsyncApp(client=self.client, signing_secret=secrets.slack_signing_secret,
                            process_before_response=True, logger=bolt_log, name="threadwise")
        self._tasks = BackgroundTasks("slack", log)
        self._threads: set[str] = set()  # threads this process posted in or was mentioned in (besides the store)
        self._team_id: str | None = None  # our own team (auth.test), asked once
        self._register()
        self.service.register_platform("slack", self.responder_from_reference)

    # ---- plumbing ------------------------------------------------------------------
    async def dispatch(self, body: str, headers: dict[str, str]) -> BoltResponse:
        """Deliver one signed request from Slack (Events API, interactivity, slash command)."""
        return await self.app.async_dispatch(AsyncBoltRequest(body=body, headers={**headers}))

    def spawn(self, coro: Coroutine[Any, Any, Any], what: str) -> asyncio.Task:
        """Run ``coro`` in the background (:class:`bot.chat.tasks.BackgroundTasks`)."""
        return self._tasks.spawn(coro, what)

    async def drain(self, timeout: float | None = None) -> None:
        """Wait until no background task is left (tasks started meanwhile included).

        Raises:
            TimeoutError: work still running after ``timeout`` seconds.
        """
        await self._tasks.wait_idle(timeout)

    def responder(self, place: SlackPlace) -> SlackResponder:
        """A responder writing to ``place`` with this bot's clients and settings."""
        return SlackResponder(self.client, self.quiet_client, self.settings, place,
                              help_timeout_seconds=self.help_timeout_seconds, on_post=self._threads.add,
                              experts=self.experts_for(place.channel))

    def experts_for(self, channel: str) -> list[str]:
        """The experts of a channel: its ``[[channels]] experts``, else ``[slack] experts``."""
        entry = entry_for(self.runtime.settings, "slack", channel)
        return list(entry.experts) if entry is not None and entry.experts is not None else list(self.settings.experts)

    def responder_from_reference(self, ref: dict[str, Any]) -> SlackResponder:
        """Rebuild a responder from ``SlackResponder.reference()`` (after a restart)."""
        statuses = [str(getattr(self.settings.reactions, s.value)).strip().strip(":") for s in UNFINISHED_STATUSES]
        return self.responder(place_from_reference(ref, also_shown=statuses))

    # ---- listeners -------------------------------------------------------------------
    def _register(self) -> None:
        app = self.app

        @app.event("app_mention")
        async def on_mention(body: dict, event: dict, context: dict) -> None:
            self._on_message_event(body, event, context, via="app_mention")

        @app.event("message")
        async def on_message(body: dict, event: dict, context: dict) -> None:
            self._on_message_event(body, event, context, via="message")

        for action_id in (ACTION_ANSWER, ACTION_RETRY, ACTION_DISMISS):
            @app.action(action_id)
            async def on_button(ack: Callable, body: dict, action: dict) -> None:
                await ack()
                self.spawn(self._on_help_button(body, action), f"button {action.get('action_id')}")

        for callback_id in (MODAL_ANSWER, MODAL_RETRY):
            @app.view(callback_id)
            async def on_submit(ack: Callable, body: dict, view: dict) -> None:
                if not modal_text(view):
                    await ack(response_action="errors", errors={INPUT_BLOCK: "Please write something."})
                    return
                await ack()
                self.spawn(self._on_modal(body, view), f"modal {view.get('callback_id')}")

        for action_id in (ACTION_VOTE_UP, ACTION_VOTE_DOWN):
            @app.action(action_id)
            async def on_vote(ack: Callable, body: dict, action: dict) -> None:
                await ack()
                self.spawn(self._on_vote(body, action), f"vote {action.get('action_id')}")

        @app.action(ACTION_VOTE_ESCALATE)
        async def on_escalate(ack: Callable, body: dict, action: dict) -> None:
            await ack()
            self.spawn(self._on_escalate(body, action), "vote escalate")

        @app.view(MODAL_VOTE_REASON)
        async def on_reason(ack: Callable, body: dict, view: dict) -> None:
            await ack()
            self.spawn(self._on_vote_reason(body, view), "vote reason")

        @app.command(COMMAND)
        async def on_command(ack: Callable, body: dict) -> None:
            await ack()
            self.spawn(self._on_command(body), "command")

    def _on_message_event(self, body: dict, event: dict, context: dict, *, via: str) -> None:
        """Filter one message/app_mention event (no I/O) and start the turn in the background."""
        bot_user_id = str(context.get("bot_user_id") or "")
        channel, ts = str(event.get("channel") or ""), str(event.get("ts") or "")
        reason = self._ignore_reason(event, bot_user_id)
        if reason or not channel or not ts:
            log.debug("slack %s %s:%s ignored: %s", via, channel, ts, reason or "no channel/ts")
            return
        team = str(body.get("team_id") or context.get("team_id") or event.get("team") or "")
        place = SlackPlace(team=team, channel=channel, thread_ts=str(event.get("thread_ts") or ts), message_ts=ts,
                           user=str(event["user"]))
        addressing = self._addressing(event, bot_user_id, via)
        policy = reply_policy(self.runtime.settings, "slack", self.settings.reply_policy, channel)
        self.spawn(self._on_message(place, event, bot_user_id, addressing, policy,
                                    outsider=self._outsider(body, event, context), via=via),
                   f"message {place.thread_key}")

    async def _on_message(self, place: SlackPlace, event: dict, bot_user_id: str, addressing: Addressing,
                          policy: str, *, outsider: bool, via: str) -> None:
        """Answer a message the shared rule accepts (:func:`bot.chat.policy.decline_reason`: the
        reply policy, and follow-ups only in threads the bot takes part in); an outsider's gets
        one refusal instead. The message's place in its thread is taken first (before the
        lookups below, which could let a later message overtake it)."""
        key = place.thread_key
        ticket = self.service.ticket(key)
        if addressing.mentions_bot and not outsider:
            # the bot takes part from now on: a follow-up sent before this one is recorded is
            # not "a thread without the bot"
            self._threads.add(key)

        async def bot_in_thread() -> bool:
            return key in self._threads or await self.service.knows_thread(key)

        try:
            in_conversation = place.thread_ts != place.message_ts
            reason = await decline_reason(policy, addressing, in_conversation=in_conversation,
                                          bot_in_thread=bot_in_thread)
            if reason:
                quiet = reason in (NOT_TAKING_PART, CHANNEL_CHATTER)
                (log.debug if quiet else log.info)("slack message %s:%s ignored: %s", place.channel,
                                                   place.message_ts, reason, extra=for_thread(key))
            elif outsider:
                await self._refuse_outsider(place, event)
            else:
                await self._turn(place, event, bot_user_id, via=via, ticket=ticket)
        finally:
            self.service.threads.release(ticket)

    @staticmethod
    def _addressing(event: dict, bot_user_id: str, via: str) -> Addressing:
        """Whom a message is for: DM, a mention of the bot, mentions of anyone else."""
        text = str(event.get("text") or "")
        targets = {m.group(1) for m in _ADDRESS.finditer(text)}
        mentions_bot = via == "app_mention" or bool(bot_user_id and f"@{bot_user_id}" in targets)
        others = bool(targets - {f"@{bot_user_id}"})
        return Addressing(direct=event.get("channel_type") == "im", mentions_bot=mentions_bot, others=others)

    def _outsider(self, body: dict, event: dict, context: dict) -> bool:
        """True when the author belongs to another organisation (Slack Connect) that is
        not in ``[slack] allowed_teams``."""
        home = {str(a.get("team_id")) for a in body.get("authorizations") or [] if a.get("team_id")}
        home |= {str(x) for x in (body.get("team_id"), context.get("team_id")) if x}
        member_of = event.get("user_team") or (event.get("user_profile") or {}).get("team") or event.get("team")
        return is_outsider(member_of, home, self.settings.allowed_teams)

    async def home_team(self) -> str:
        """Our own team id (``auth.test``, asked once; "" while Slack cannot be asked)."""
        if self._team_id is None:
            try:
                self._team_id = str((await self.client.auth_test()).get("team_id") or "")
            except Exception as exc:  # noqa: BLE001 - asked again next time
                log.warning("slack auth.test failed: %s", slack_error(exc))
                return ""
        return self._team_id

    async def _outsider_user(self, body: dict) -> bool:
        """The outsider rule (:func:`bot.chat.policy.is_outsider`) for a slash command or an
        interaction (button, modal): the user's team (``user.team_id``; a command's
        ``user_team`` or ``team_id``) against our own team (``auth.test``, else the payload's
        team) and ``[slack] allowed_teams``."""
        user = body.get("user")
        if not isinstance(user, dict):
            user = {}
        member_of = user.get("team_id") or body.get("user_team") or body.get("team_id")
        home = await self.home_team() or str((body.get("team") or {}).get("id") or body.get("team_id") or "")
        return is_outsider(member_of, {home} if home else set(), self.settings.allowed_teams)

    async def _refuse_outsider(self, place: SlackPlace, event: dict) -> None:
        """One polite refusal per message (duplicate deliveries ignored), no LLM call."""
        key = place.thread_key
        if await refuse_outsider_once(self.service.store, f"slack:{place.channel}:{place.message_ts}", key,
                                      self.responder(place).notify_private):
            log.info("slack message %s from %s of team %s refused: outside the workspace", place.message_ts,
                     place.user, event.get("user_team") or event.get("team"), extra=for_thread(key))

    def _ignore_reason(self, event: dict, bot_user_id: str) -> str:
        """Why an event must not start an answer ("" when it may)."""
        subtype = event.get("subtype")
        if subtype not in _USER_SUBTYPES:
            return f"subtype {subtype}"
        if event.get("hidden") or event.get("edited"):
            return "edit or hidden"
        text = str(event.get("text") or "")
        return ignore_reason(author=event.get("user"), own_id=bot_user_id,
                             is_bot=bool(event.get("bot_id") or event.get("bot_profile")), bot_id=event.get("bot_id"),
                             allowed_bots=self.settings.allowed_bots,
                             mentions_bot=bool(bot_user_id) and f"<@{bot_user_id}>" in text)

    async def _turn(self, place: SlackPlace, event: dict, bot_user_id: str, *, via: str, ticket: Ticket) -> None:
        """One user message -> ChatService.handle (which never raises: a failing run ends in
        its own apology); ``ticket``: its place in the thread's queue."""
        key = place.thread_key
        user = place.user
        msg = IncomingMessage(
            platform="slack", thread_key=key, message_id=f"slack:{place.channel}:{place.message_ts}",
            author_id=user, text=incoming_text(str(event.get("text") or ""), bot_user_id), channel=place.channel)
        out = self.responder(place)
        await self.service.acknowledge(msg, out)  # the first reaction before the user lookups (issue 11)
        try:
            msg = replace(msg, author_name=await self.directory.display_name(user),
                          is_admin=self.directory.is_admin(user),
                          is_expert=await self.may_answer_help(user, place.channel))
            log.info("slack message %s from %s (via %s)", msg.message_id, user, via, extra=for_thread(key))
            await self.service.handle(msg, out, ticket)
        finally:
            self.service.release_acknowledgement(msg.message_id, out)

    # ---- help requests ---------------------------------------------------------------
    def _place(self, ref: HelpRef, user: str, **extra: Any) -> SlackPlace:
        key = parse_thread_key(ref.thread_key)
        team = key["team"] if key is not None and key.platform == "slack" else ""
        return SlackPlace(team=team, channel=ref.channel, thread_ts=ref.root, user=user, **extra)

    async def may_answer_help(self, user: str, channel: str) -> bool:
        """:func:`bot.chat.policy.may_answer_help`: the channel's experts and ``[slack] admins``."""
        return may_answer_help(expert=await self.directory.is_expert(user, self.experts_for(channel)),
                               admin=self.directory.is_admin(user))

    async def _help_click(self, body: dict, ref: HelpRef, user: str, action: HumanAction,
                          text: str | None = None) -> help.HelpClick:
        """A help request's button (``text`` None) or submitted form as :class:`bot.chat.help.HelpClick`."""
        experts = self.experts_for(ref.channel)
        return help.HelpClick(action, ref.thread_key, user, expert=await self.directory.is_expert(user, experts),
                              admin=self.directory.is_admin(user), outsider=await self._outsider_user(body),
                              experts=expert_mentions(experts), text=text)

    async def _on_help_button(self, body: dict, action: dict) -> None:
        """A help request button: :func:`bot.chat.help.on_help_click` (Dismiss resumes at once;
        Answer/Retry open a modal)."""
        ref = HelpRef.loads(str(action.get("value") or ""))
        message = body.get("message") or {}
        ref = HelpRef(ref.thread_key, ref.channel, ref.root, ref.question_ts, ref.interrupt_id,
                      help_ts=str(message.get("ts") or ""))
        user = str((body.get("user") or {}).get("id") or "")
        kind = {ACTION_ANSWER: HumanAction.ANSWER, ACTION_RETRY: HumanAction.RETRY}.get(
            str(action.get("action_id")), HumanAction.DISMISS)
        await help.on_help_click(await self._help_click(body, ref, user, kind),
                                 _SlackHelp(self, body, ref, user, question_block_of(message.get("blocks"))))

    async def _on_modal(self, body: dict, view: dict) -> None:
        """A submitted Answer / Retry modal: :func:`bot.chat.help.on_help_click`."""
        ref = HelpRef.loads(str(view.get("private_metadata") or ""))
        user = str((body.get("user") or {}).get("id") or "")
        kind = HumanAction.ANSWER if view.get("callback_id") == MODAL_ANSWER else HumanAction.RETRY
        await help.on_help_click(await self._help_click(body, ref, user, kind, modal_text(view)),
                                 _SlackHelp(self, body, ref, user, question_block_of(view.get("blocks"))))

    async def _resume(self, ref: HelpRef, action: HumanAction, text: str, user: str, body: dict,
                      question: dict | None) -> None:
        """Resume the paused run once; a second attempt gets an ephemeral "already handled"."""
        fallback = str((body.get("user") or {}).get("name") or "")
        name = await self.directory.display_name(user, fallback)
        waiting = str(self.settings.reactions.waiting_human).strip(":")
        out = self.responder(self._place(ref, user, message_ts=ref.question_ts, shown=[waiting]))
        log.info("slack help request: %s by %s", action.value, user, extra=for_thread(ref.thread_key))

        async def close(note: list[Part]) -> None:
            msg = help_handled_message(question, note)
            try:
                await self.client.chat_update(channel=ref.channel, ts=ref.help_ts, **msg)
            except Exception as exc:  # noqa: BLE001
                log.warning("slack chat.update of help request failed: %s", slack_error(exc),
                            extra=for_thread(ref.thread_key))

        if not await help.resume(self.service, ref.thread_key, action, text, actor=Mention(user), actor_name=name,
                                 allowed=True, out=out, interrupt_id=ref.interrupt_id, channel=ref.channel,
                                 close=close if ref.help_ts else None):
            log.info("slack help request: %s by %s not resumed (already handled)",
                     action.value, user, extra=for_thread(ref.thread_key))

    # ---- feedback ----------------------------------------------------------------------
    def _vote_place(self, body: dict) -> SlackPlace:
        container = body.get("container") or {}
        message = body.get("message") or {}
        channel = str(container.get("channel_id") or (body.get("channel") or {}).get("id") or "")
        return SlackPlace(team=str((body.get("team") or {}).get("id") or ""), channel=channel,
                          thread_ts=str(message.get("thread_ts") or container.get("thread_ts") or ""),
                          user=str((body.get("user") or {}).get("id") or ""))

    async def _on_vote(self, body: dict, action: dict) -> None:
        """👍 / 👎 under an answer: :func:`bot.chat.feedback.on_vote`."""
        place = self._vote_place(body)
        vote = feedback.UP if action.get("action_id") == ACTION_VOTE_UP else feedback.DOWN
        click = feedback.VoteClick(str(action.get("value") or ""), place.user, vote,
                                   outsider=await self._outsider_user(body))
        await feedback.on_vote(self.service, click, _SlackFeedback(self, body, place))

    async def _on_escalate(self, body: dict, action: dict) -> None:
        """"Ask the experts" after a 👎: :func:`bot.chat.feedback.on_escalate`."""
        user = str((body.get("user") or {}).get("id") or "")
        name = await self.directory.display_name(user, str((body.get("user") or {}).get("name") or ""))
        click = feedback.EscalateClick(str(action.get("value") or ""), user, name,
                                       outsider=await self._outsider_user(body))

        def responder_for(record: dict[str, Any]) -> SlackResponder:
            key = parse_thread_key(record["thread_key"])
            assert key is not None
            return self.responder(SlackPlace(team=key["team"], channel=key["channel"], thread_ts=key["root"],
                                             user=user))

        await feedback.on_escalate(self.service, click, _SlackFeedback(self, body, self._vote_place(body)),
                                   platform="slack", responder_for=responder_for)

    async def _on_vote_reason(self, body: dict, view: dict) -> None:
        """The 👎 reason modal was submitted: :func:`bot.chat.feedback.on_reason`."""
        user = str((body.get("user") or {}).get("id") or "")
        if await self._outsider_user(body):
            log.info("slack vote reason by %s refused: outside the workspace", user)
            return
        given = feedback.ReasonGiven(str(view.get("private_metadata") or ""), user, modal_text(view))
        await feedback.on_reason(self.service, given, _SlackFeedback(self, body, self._vote_place(body)))

    # ---- admin -------------------------------------------------------------------------
    async def _on_command(self, body: dict) -> None:
        """``/threadwise <words>``: :func:`bot.chat.commands.on_command` (outsiders refused,
        :meth:`_outsider_user`)."""
        user, channel = str(body.get("user_id") or ""), str(body.get("channel_id") or "")
        place = SlackPlace(team=str(body.get("team_id") or ""), channel=channel, user=user,
                           response_url=str(body.get("response_url") or ""))
        command = SlashCommand("slack", str(body.get("text") or ""), user, self.directory.is_admin(user),
                               outsider=await self._outsider_user(body), thread_key=place.thread_key)
        await on_command(self.service, command, self.responder(place))


class _SlackHelp:
    """:class:`bot.chat.help.HelpControls` on Slack: ephemeral notes, ``views.open`` and the resume."""

    def __init__(self, bot: SlackBot, body: dict, ref: HelpRef, user: str, question: dict | None) -> None:
        self.bot, self.body, self.ref, self.user, self.question = bot, body, ref, user, question

    async def tell(self, text: list[Part]) -> None:
        await self.bot.responder(self.bot._place(self.ref, self.user)).notify_private(text)

    async def open_form(self, action: HumanAction) -> None:
        key = self.ref.thread_key
        try:
            await self.bot.client.views_open(trigger_id=self.body["trigger_id"],
                                             view=help_modal(action, self.ref, self.question))
            log.info("slack help modal (%s) opened by %s", action.value, self.user, extra=for_thread(key))
        except Exception as exc:  # noqa: BLE001
            log.warning("slack views.open failed: %s", slack_error(exc), extra=for_thread(key))
            await self.tell([(f"I couldn't open the form ({slack_error(exc)}). Reply in the thread with "
                              f"`{action.value}: ...` instead.")])

    async def resume(self, action: HumanAction, text: str) -> None:
        await self.bot._resume(self.ref, action, text, self.user, self.body, self.question)


class _SlackFeedback:
    """:class:`bot.chat.feedback.FeedbackControls` on Slack: ephemeral messages and a modal.

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
        kwargs: dict[str, Any] = {"channel": self.place.channel, "user": self.place.user, "text": text,
                                  "blocks": escalate_offer_blocks(answer_id, text)}
        if self.place.thread_ts:
            kwargs["thread_ts"] = self.place.thread_ts
        try:
            await self.bot.client.chat_postEphemeral(**kwargs)
        except Exception as exc:  # noqa: BLE001
            log.info("slack expert offer not shown in %s: %s", self.place.channel, slack_error(exc))


def build_slack_app(runtime: Runtime, *, client: AsyncWebClient | None = None) -> SlackBot:
    """Build the Slack adapter for ``runtime`` (see :class:`SlackBot`)."""
    return SlackBot(runtime, client=client)


def slack_enabled(settings: Settings, secrets: Secrets) -> bool:
    """True when the tokens for the configured mode are present.

    Socket mode needs SLACK_BOT_TOKEN and SLACK_APP_TOKEN; HTTP mode needs SLACK_BOT_TOKEN
    and SLACK_SIGNING_SECRET. A bot token without its partner logs a warning naming the
    missing variable and returns False.
    """
    if not secrets.slack_bot_token:
        return False
    need = "SLACK_APP_TOKEN" if settings.slack.mode == "socket" else "SLACK_SIGNING_SECRET"
    have = secrets.slack_app_token if settings.slack.mode == "socket" else secrets.slack_signing_secret
    if not have:
        log.warning("Slack disabled: SLACK_BOT_TOKEN is set but %s is missing ([slack] mode = %r)",
                    need, settings.slack.mode)
        return False
    return True


async def verified_request(request: web.Request, verifier: SignatureVerifier) -> AsyncBoltRequest | web.Response:
    """Check the Slack signature of ``request`` before bolt sees its body.

    Works around a slack-bolt fault (1.x): ``AsyncBoltRequest`` parses the body (JSON or form)
    in its constructor, before the app's signature middleware runs, so an unsigned request
    with a malformed body raised out of bolt as a 500 with a traceback. Here the signature
    (``X-Slack-Signature`` / ``X-Slack-Request-Timestamp``, HMAC-SHA256 with the signing
    secret, 5-minute window; https://api.slack.com/authentication/verifying-requests-from-slack)
    is checked on the raw bytes first.

    Args:
        request: the incoming aiohttp request (body up to aiohttp's ``client_max_size``,
            1 MiB by default; larger bodies get aiohttp's 413).
        verifier: holds the signing secret.

    Returns:
        The bolt request to dispatch, or the response to send: 401 when the signature
        headers are missing or wrong (no body read when the headers are missing), 400 when
        a correctly signed body is not valid UTF-8 / JSON / form data. One log line each.
    """
    timestamp = request.headers.get("X-Slack-Request-Timestamp")
    signature = request.headers.get("X-Slack-Signature")
    if not timestamp or not signature or not timestamp.strip().isdigit():
        log.warning("slack HTTP: refused a request without valid signature headers (401)")
        return web.Response(status=401, text="invalid request")
    raw = await request.read()
    if not verifier.is_valid(raw, timestamp, signature):
        log.warning("slack HTTP: refused a request with an invalid or stale signature (401)")
        return web.Response(status=401, text="invalid request")
    try:
        return AsyncBoltRequest(body=raw.decode("utf-8"), query=request.query_string,
                                headers=request.headers)  # type: ignore[arg-type]
    except (UnicodeDecodeError, ValueError) as exc:  # JSONDecodeError is a ValueError
        log.warning("slack HTTP: signed request with an unreadable body (400): %s", type(exc).__name__)
        return web.Response(status=400, text="bad request")


async def serve_http(bot: SlackBot, stop: asyncio.Event) -> None:
    """Serve the Events API / interactivity / slash commands on ``[slack] http_host:http_port``
    at ``http_path`` until ``stop`` is set. Requests are verified with SLACK_SIGNING_SECRET."""
    cfg = bot.settings
    verifier = SignatureVerifier(bot.runtime.secrets.slack_signing_secret)

    async def handle(request: web.Request) -> web.Response:
        bolt_request = await verified_request(request, verifier)
        if isinstance(bolt_request, web.Response):
            return bolt_request
        return await to_aiohttp_response(await bot.app.async_dispatch(bolt_request))

    async def health(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    web_app = web.Application()
    web_app.router.add_post(cfg.http_path, handle)
    web_app.router.add_get("/healthz", health)
    runner = web.AppRunner(web_app, access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, cfg.http_host, cfg.http_port, backlog=HTTP_BACKLOG).start()
        log.info("slack HTTP mode listening on %s:%d%s", cfg.http_host, cfg.http_port, cfg.http_path)
        bot.runtime.health.watch("slack", lambda: not stop.is_set())  # serving = reachable by Slack
        await stop.wait()
    finally:
        await runner.cleanup()


async def serve_socket(bot: SlackBot, app_token: str, stop: asyncio.Event) -> None:
    """Connect with Socket Mode (SLACK_APP_TOKEN) and serve until ``stop`` is set."""
    from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler

    handler = AsyncSocketModeHandler(bot.app, app_token, logger=logging.getLogger("slack_sdk.socket_mode"))
    await handler.connect_async()
    log.info("slack Socket Mode connected")
    bot.runtime.health.watch("slack", handler.client.is_connected)
    try:
        await stop.wait()
    finally:
        await handler.close_async()


async def run_slack(runtime: Runtime, *, stop: asyncio.Event | None = None,
                    client: AsyncWebClient | None = None) -> None:
    """Run the Slack adapter in the current event loop until ``stop`` is set (or cancelled).

    Checks the bot token with auth.test first, then serves in ``[slack] mode`` ("socket"
    or "http"). On the way out, waits up to 10 s for answers in progress.

    Raises:
        slack_sdk.errors.SlackApiError: the bot token is refused (e.g. ``invalid_auth``).
    """
    stop = stop or asyncio.Event()
    bot = build_slack_app(runtime, client=client)
    session = open_shared_session(bot.client, bot.quiet_client)  # keep-alive, not a connection per call
    try:
        await _serve(bot, runtime, stop)
    finally:
        await session.close()


async def _serve(bot: SlackBot, runtime: Runtime, stop: asyncio.Event) -> None:
    auth = await bot.client.auth_test()
    log.info("slack connected as %s (%s) in team %s, mode %s", auth.get("user"), auth.get("user_id"),
             auth.get("team_id"), bot.settings.mode)
    bot._team_id = str(auth.get("team_id") or "") or None
    try:
        if bot.settings.mode == "http":
            await serve_http(bot, stop)
        else:
            await serve_socket(bot, runtime.secrets.slack_app_token, stop)
    finally:
        await bot._tasks.shutdown(grace=10)
