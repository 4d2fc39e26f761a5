"""The Slack adapter: slack-bolt's AsyncApp wired to the ChatService.

This module is the app and its listeners; the rest of the adapter is split by concern:

* :mod:`bot.platforms.slack.messages` - message events in: which are questions, their turn;
* :mod:`bot.platforms.slack.interactions` - help-request buttons and forms, votes, ``/threadwise``;
* :mod:`bot.platforms.slack.responder` - posting (answers, help requests, reactions);
* :mod:`bot.platforms.slack.blocks`, :mod:`~bot.platforms.slack.format`,
  :mod:`~bot.platforms.slack.client` - Block Kit, mrkdwn, the Web API client and directory;
* :mod:`bot.platforms.slack.http_server` - the Events API endpoint (HTTP mode);
* :mod:`bot.platforms.slack.run` - serving in Socket Mode or HTTP mode, and the stop.

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
them, others get an ephemeral notice (:func:`bot.interactions.help_replies.on_help_click` decides). ``/threadwise
reindex|status|help`` runs admin commands (``[slack] admins`` may reindex;
:mod:`bot.interactions.commands`). Slash commands and interactions (buttons, modals) from another
organisation get the same one refusal as messages: the user's team is compared with ours
(``auth.test``) and ``[slack] allowed_teams``. Votes and "Ask the experts" are handled by
:mod:`bot.interactions.votes`; this module only reads the payloads and lends Slack's transport.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from slack_bolt.async_app import AsyncApp
from slack_bolt.error import BoltUnhandledRequestError
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse

from bot.chat.channels import entry_for
from bot.chat.policy import may_answer_help
from bot.chat.tasks import BackgroundTasks
from bot.config import Secrets, Settings
from bot.platforms.slack.blocks import (
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
    modal_text,
)
from bot.platforms.slack.client import (
    InertWebClient,
    SlackDirectory,
    best_effort_copy,
    make_client,
    slack_error,
)
from bot.platforms.slack.interactions import Interactions
from bot.platforms.slack.messages import Messages
from bot.platforms.slack.responder import SlackPlace, SlackResponder, place_from_reference
from bot.protocol import UNFINISHED_STATUSES

if TYPE_CHECKING:
    from bot.runtime import Runtime

log = logging.getLogger(__name__)

COMMAND = "/threadwise"


def request_kind(body: Any) -> str:
    """A request's kind for a log line: its type and the id of what it is about (an action,
    a view's callback or an event type), never its text."""
    if not isinstance(body, dict):
        return "a request"
    parts = [str(body.get("type") or ("slash command" if "command" in body else "request"))]
    actions = body.get("actions")
    if isinstance(actions, list) and actions and isinstance(actions[0], dict):
        parts.append(str(actions[0].get("action_id")))
    for key, field in (("view", "callback_id"), ("event", "type")):
        if isinstance(body.get(key), dict):
            parts.append(str(body[key].get(field)))
    if isinstance(body.get("command"), str):
        parts.append(body["command"])
    return " ".join(parts)[:200]


def _quiet_token_warning(record: logging.LogRecord) -> bool:
    """Drop bolt's "token will be unused" warning: bolt reads SLACK_BOT_TOKEN from the
    environment by itself, while our client already carries that same token."""
    return "`token` will be unused" not in record.getMessage()


class SlackBot:
    """A bolt AsyncApp wired to the runtime's ChatService.

    Args:
        runtime: has ``.service`` (ChatService), ``.settings`` (Settings), ``.secrets`` (Secrets).
        client: a ready :class:`~bot.platforms.slack.client.InertWebClient` (the only client that
            posts: it makes every shown text inert); default: one built from
            ``SLACK_BOT_TOKEN`` and ``[slack] api_base_url`` with retry handlers.

    Use :meth:`dispatch` to deliver a request (HTTP body + headers), :meth:`drain` to
    wait for the background work, :func:`bot.platforms.slack.run.run_slack` to serve it.
    """

    def __init__(self, runtime: Runtime, *, client: InertWebClient | None = None) -> None:
        self.runtime = runtime
        self.service = runtime.service
        settings: Settings = runtime.settings
        secrets: Secrets = runtime.secrets
        self.settings = settings.slack
        self.help_timeout_seconds = settings.service.help_timeout_seconds
        self.client = client or make_client(
            secrets.slack_bot_token, self.settings.api_base_url, rate_limit_retries=self.settings.rate_limit_retries
        )
        self.quiet_client = best_effort_copy(self.client)
        self.directory = SlackDirectory(self.client, self.settings)
        bolt_log = logging.getLogger("slack_bolt")
        bolt_log.addFilter(_quiet_token_warning)
        self.app = AsyncApp(
            client=self.client,
            signing_secret=secrets.slack_signing_secret,
            process_before_response=True,
            raise_error_for_unhandled_request=True,  # answered by _on_error: 200 and one line, not bolt's 404
            logger=bolt_log,
            name="threadwise",
        )
        self._tasks = BackgroundTasks("slack", log)
        # threads this process posted in or was mentioned in (besides the store)
        self.threads_joined: set[str] = set()
        self.home_team_id: str | None = None  # our own team (auth.test), asked once
        self.messages = Messages(self)
        self.interactions = Interactions(self)
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

    async def shutdown(self, grace: float) -> None:
        """Give the background work up to ``grace`` seconds to finish, then cancel the rest."""
        await self._tasks.shutdown(grace)

    def responder(self, place: SlackPlace) -> SlackResponder:
        """A responder writing to ``place`` with this bot's clients and settings."""
        return SlackResponder(
            self.client,
            self.quiet_client,
            self.settings,
            place,
            help_timeout_seconds=self.help_timeout_seconds,
            on_post=self.threads_joined.add,
            experts=self.experts_for(place.channel),
        )

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
        app.error(self._on_error)

        @app.event("app_mention")
        async def on_mention(body: dict, event: dict, context: dict) -> None:
            self.messages.on_event(body, event, context, via="app_mention")

        @app.event("message")
        async def on_message(body: dict, event: dict, context: dict) -> None:
            self.messages.on_event(body, event, context, via="message")

        for action_id in (ACTION_ANSWER, ACTION_RETRY, ACTION_DISMISS):

            @app.action(action_id)
            async def on_button(ack: Callable, body: dict, action: dict) -> None:
                await ack()
                self.spawn(self.interactions.on_help_button(body, action), f"button {action.get('action_id')}")

        for callback_id in (MODAL_ANSWER, MODAL_RETRY):

            @app.view(callback_id)
            async def on_submit(ack: Callable, body: dict, view: dict) -> None:
                if not modal_text(view):
                    await ack(response_action="errors", errors={INPUT_BLOCK: "Please write something."})
                    return
                await ack()
                self.spawn(self.interactions.on_modal(body, view), f"modal {view.get('callback_id')}")

        for action_id in (ACTION_VOTE_UP, ACTION_VOTE_DOWN):

            @app.action(action_id)
            async def on_vote(ack: Callable, body: dict, action: dict) -> None:
                await ack()
                self.spawn(self.interactions.on_vote(body, action), f"vote {action.get('action_id')}")

        @app.action(ACTION_VOTE_ESCALATE)
        async def on_escalate(ack: Callable, body: dict, action: dict) -> None:
            await ack()
            self.spawn(self.interactions.on_escalate(body, action), "vote escalate")

        @app.view(MODAL_VOTE_REASON)
        async def on_reason(ack: Callable, body: dict, view: dict) -> None:
            await ack()
            self.spawn(self.interactions.on_vote_reason(body, view), "vote reason")

        @app.command(COMMAND)
        async def on_command(ack: Callable, body: dict) -> None:
            await ack()
            self.spawn(self.interactions.on_command(body), "command")

    async def _on_error(self, error: Exception, body: Any, request: AsyncBoltRequest) -> BoltResponse:
        """Bolt's error handler: a request no listener takes gets 200 (an event or a button we do
        not serve: Slack would retry a 404, and show the user an error), a request that failed in
        bolt or a listener gets 400 (in Socket Mode an acknowledgement: a redelivery would fail
        the same way); one log line each, naming the request kind, no traceback (the payload's
        shape is checked before: :mod:`bot.platforms.slack.payloads`)."""
        what = request_kind(body)
        if isinstance(error, BoltUnhandledRequestError):
            log.info("slack: no listener for %s; acknowledged", what)
            return BoltResponse(status=200, body="")
        status = 200 if request.mode == "socket_mode" else 400
        log.warning("slack: %s failed (%d): %s", what, status, type(error).__name__)
        return BoltResponse(status=status, body="")

    async def home_team(self) -> str:
        """Our own team id (``auth.test``, asked once; "" while Slack cannot be asked)."""
        if self.home_team_id is None:
            try:
                self.home_team_id = str((await self.client.auth_test()).get("team_id") or "")
            except Exception as exc:  # noqa: BLE001 - asked again next time
                log.warning("slack auth.test failed: %s", slack_error(exc))
                return ""
        return self.home_team_id

    async def may_answer_help(self, user: str, channel: str) -> bool:
        """:func:`bot.chat.policy.may_answer_help`: the channel's experts and ``[slack] admins``."""
        return may_answer_help(
            expert=await self.directory.is_expert(user, self.experts_for(channel)), admin=self.directory.is_admin(user)
        )


def build_slack_app(runtime: Runtime, *, client: InertWebClient | None = None) -> SlackBot:
    """Build the Slack adapter for ``runtime`` (see :class:`SlackBot`)."""
    return SlackBot(runtime, client=client)
