"""SlackResponder: the Responder protocol (bot.protocol) on top of the Slack Web API.

One responder is bound to one place: a channel, the thread to answer in (the root
``thread_ts``; none for a slash command) and the user's message that carries the status
reaction. Every method swallows Slack errors after logging them, so a failing reaction
never stops the rest of the turn; only :meth:`SlackResponder.post_answer` and
:meth:`SlackResponder.post_help_request` raise :class:`~bot.protocol.PostError` when
Slack refused the post after the client's retries (done means posted).

Every post sends ``unfurl_links=False, unfurl_media=False`` (no previews of URLs a model
wrote) and never ``link_names``/``parse=full``: text is escaped mrkdwn
(:mod:`bot.chat.text`), so only the mentions we build can notify anyone.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from bot.chat.help import duration
from bot.chat.reactions import ReactionState
from bot.chat.text import Part
from bot.config import SlackSettings
from bot.logs import for_thread
from bot.platforms.slack.blocks import (
    HelpRef,
    answer_messages,
    block_plain_text,
    help_request_message,
)
from bot.platforms.slack.client import InertWebhookClient, slack_error
from bot.platforms.slack.format import escape, inert_text, split_mrkdwn, to_mrkdwn
from bot.protocol import STEP_STATUSES, Answer, HelpRequest, PostError, Responder, Status

log = logging.getLogger(__name__)

# Statuses a message may rest in for long: these must land (reliable client).
_RESTING = {Status.DONE, Status.APOLOGY, Status.WAITING_HUMAN}
# A slash command's response_url accepts 5 posts within 30 minutes; progress uses at
# most 4, the final result always gets the last one.
RESPONSE_URL_USES = 5


@dataclass
class SlackPlace:
    """Where a responder writes.

    Attributes:
        team: workspace id. channel: channel id (``C``/``G``/``D``...).
        thread_ts: root ts of the thread to post in ("" = top level, slash commands).
        message_ts: ts of the user's message that gets the status reaction ("" = none).
        user: the user private notices go to.
        response_url: slash-command response URL, the fallback when the bot can't post
            in the channel (not a member); "" if none.
        shown: reactions the bot may have left on ``message_ts`` (removed on the next status).
        help_ts: ts of this thread's open help request message, if known; its buttons are
            replaced by a note once the run ends (answer or apology) or a newer request is posted.
    """

    team: str
    channel: str
    thread_ts: str = ""
    message_ts: str = ""
    user: str = ""
    response_url: str = ""
    shown: list[str] = field(default_factory=list)
    help_ts: str = ""

    @property
    def thread_key(self) -> str:
        base = f"slack:{self.team}:{self.channel}"
        return f"{base}:{self.thread_ts}" if self.thread_ts else base


class SlackResponder(Responder):
    """Implements :class:`bot.protocol.Responder` for one Slack place.

    Args:
        client: reliable AsyncWebClient (waits out rate limits): posts, final reactions.
        quiet_client: best-effort client for intermediate reactions (no rate-limit waits).
        settings: the ``[slack]`` settings (reaction names, size limits, experts).
        place: where to write (:class:`SlackPlace`).
        help_timeout_seconds: shown in help requests ("I'll apologise within ...").
        on_post: called with the thread key after every successful post in a thread.
        experts: who a help request mentions here (default ``[slack] experts``).
    """

    def __init__(
        self,
        client: AsyncWebClient,
        quiet_client: AsyncWebClient,
        settings: SlackSettings,
        place: SlackPlace,
        *,
        help_timeout_seconds: float = 0.0,
        on_post: Callable[[str], None] | None = None,
        experts: list[str] | None = None,
    ) -> None:
        self.client, self.quiet_client, self.settings, self.place = client, quiet_client, settings, place
        self.help_timeout_seconds = help_timeout_seconds
        self.experts = settings.experts if experts is None else experts  # the channel's, see [[channels]]
        self.on_post = on_post
        self.posted_answer = False
        self.last_error = ""
        self._progress_ts = ""
        self._progress_via_url = False
        self._progress_lock = asyncio.Lock()
        self._url_uses = 0
        self._reactions = ReactionState(place.shown, min_interval=settings.reactions.change_interval_seconds)

    # ---- reactions -----------------------------------------------------------------
    def reaction_for(self, status: Status) -> str:
        """The emoji name for ``status`` from ``[slack.reactions]`` (colons stripped)."""
        return str(getattr(self.settings.reactions, status.value)).strip().strip(":")

    async def set_status(self, status: Status) -> None:
        """Show ``status`` as the only bot reaction on the user's message.

        The shared state machine (:class:`bot.chat.reactions.ReactionState`) adds the new
        reaction, then removes the others even if the add failed, so a refused "done"
        never leaves "writing" behind. The steps of a run (searching, web, writing) return at
        once and are shown paced (``[slack.reactions] change_interval_seconds``): a step a
        newer status replaces sooner is never sent. ``already_reacted`` / ``no_reaction`` count as
        success; intermediate statuses use the best-effort client (skipped when rate
        limited), resting ones (done, apology, waiting for a human) wait out rate limits.
        """
        if not self.place.message_ts:
            return
        name = self.reaction_for(status)
        client = self.client if status in _RESTING else self.quiet_client
        shown = await self._reactions.move_to(
            name,
            add=lambda n: self._reaction(client, "add", n),
            remove=lambda n: self._reaction(client, "remove", n),
            settle=status not in STEP_STATUSES,
        )
        # resting statuses and failures at INFO; the steps of a run at DEBUG (log cost per question)
        log.log(
            logging.INFO if status in _RESTING or not shown else logging.DEBUG,
            "slack status %s (%s)%s on %s",
            status.value,
            name,
            "" if shown else " NOT shown",
            self.place.message_ts,
            extra=for_thread(self.place.thread_key),
        )

    async def may_show(self, status: Status) -> None:
        """An earlier delivery's ``status`` reaction may be on the message: the next status replaces it."""
        self._reactions.assume(self.reaction_for(status))

    async def clear_status(self) -> None:
        """Remove the status reactions from the user's message (best effort)."""
        if self.place.message_ts:
            await self._reactions.clear(remove=lambda n: self._reaction(self.quiet_client, "remove", n))

    async def _reaction(self, client: AsyncWebClient, op: str, name: str) -> bool:
        call = client.reactions_add if op == "add" else client.reactions_remove
        try:
            await call(channel=self.place.channel, timestamp=self.place.message_ts, name=name)
            return True
        except Exception as exc:  # noqa: BLE001 - reactions never stop the answer
            err = slack_error(exc)
            if (op, err) in {("add", "already_reacted"), ("remove", "no_reaction")}:
                return True
            log.warning("slack reactions.%s %s failed: %s", op, name, err, extra=for_thread(self.place.thread_key))
            return False

    # ---- posts ---------------------------------------------------------------------
    async def _post(self, text: str, blocks: list[dict[str, Any]] | None = None) -> str:
        """chat.postMessage in the place's thread; returns the new ts ("" on failure, logged)."""
        kwargs: dict[str, Any] = {
            "channel": self.place.channel,
            "text": text,
            "unfurl_links": False,
            "unfurl_media": False,
        }
        if blocks:
            kwargs["blocks"] = blocks
        if self.place.thread_ts:
            kwargs["thread_ts"] = self.place.thread_ts
        try:
            resp = await self.client.chat_postMessage(**kwargs)
        except Exception as exc:  # noqa: BLE001
            self.last_error = slack_error(exc)
            log.warning("slack chat.postMessage failed: %s", self.last_error, extra=for_thread(self.place.thread_key))
            return ""
        if self.on_post and self.place.thread_ts:
            self.on_post(self.place.thread_key)
        return str(resp.get("ts") or "")

    async def _respond(self, text: str, *, replace: bool = False) -> bool:
        """Fallback through the slash command's response_url (ephemeral; at most
        :data:`RESPONSE_URL_USES` posts per command)."""
        if not self.place.response_url or self._url_uses >= RESPONSE_URL_USES:
            return False
        self._url_uses += 1
        try:
            resp = await InertWebhookClient(self.place.response_url).send(
                text=text, response_type="ephemeral", replace_original=replace
            )
            return resp.status_code == 200
        except Exception as exc:  # noqa: BLE001
            log.warning(
                "slack response_url post failed: %s", type(exc).__name__, extra=for_thread(self.place.thread_key)
            )
            return False

    async def _post_chunks(self, mrkdwn: str) -> bool:
        """Post mrkdwn as text-only messages split under the section limit (the slash
        command's response_url takes a chunk the channel refuses). True if all landed."""
        ok = True
        for chunk in split_mrkdwn(mrkdwn, self.settings.max_section_characters):
            if not await self._post(chunk) and not await self._respond(chunk):
                ok = False
        return ok

    async def post_answer(self, answer: Answer) -> None:
        """Post the answer in the thread, split into messages under Slack's limits.

        Each message is tried with blocks; if Slack refuses the blocks, the same text
        is posted plain so the answer still lands.

        Raises:
            PostError: some part of the answer could not be posted (e.g. ``not_in_channel``,
                or rate limited after every retry).
        """
        messages = answer_messages(
            answer, max_section=self.settings.max_section_characters, max_message=self.settings.max_message_characters
        )
        posted = 0
        for msg in messages:
            if await self._post(msg["text"], msg["blocks"]):
                posted += 1
                continue
            text = "\n\n".join(t for t in map(block_plain_text, msg["blocks"]) if t)
            if await self._post_chunks(text):
                posted += 1
        self.posted_answer = self.posted_answer or posted > 0
        if posted:
            await self._close_help_request(_closing_note(answer))
        log.info(
            "slack answer (%s, %d message(s), %d posted)",
            answer.kind,
            len(messages),
            posted,
            extra=for_thread(self.place.thread_key),
        )
        if posted < len(messages):
            raise PostError(
                f"slack answer: {posted} of {len(messages)} message(s) posted in {self.place.thread_key}",
                self.last_error,
            )

    async def _close_help_request(self, note: str) -> None:
        """Replace the buttons of this thread's earlier help request by ``note`` (best effort)."""
        if not self.place.help_ts:
            return
        ts, self.place.help_ts = self.place.help_ts, ""
        try:
            await self.client.chat_update(
                channel=self.place.channel,
                ts=ts,
                text=note,
                blocks=[{"type": "context", "elements": [{"type": "mrkdwn", "text": note}]}],
            )
        except Exception as exc:  # noqa: BLE001
            log.info(
                "slack help request %s not closed: %s", ts, slack_error(exc), extra=for_thread(self.place.thread_key)
            )

    async def post_help_request(self, request: HelpRequest) -> None:
        """Post the help request with Answer / Retry with hint / Dismiss buttons, mentioning experts.

        Raises:
            PostError: Slack refused the post.
        """
        experts = list(dict.fromkeys(self.experts))
        ref = HelpRef(
            request.thread_key or self.place.thread_key,
            self.place.channel,
            self.place.thread_ts,
            self.place.message_ts,
            str(getattr(request, "interrupt_id", "") or ""),
        )
        timeout = request.timeout_seconds or self.help_timeout_seconds
        msg = help_request_message(request, experts=experts, ref=ref, timeout_text=duration(timeout))
        await self._close_help_request("A newer help request follows below.")
        self.place.help_ts = await self._post(msg["text"], msg["blocks"])
        log.info(
            "slack help request %s (experts: %s)",
            "posted" if self.place.help_ts else "NOT posted",
            ", ".join(experts) or "none",
            extra=for_thread(self.place.thread_key),
        )
        if not self.place.help_ts:
            raise PostError(f"slack help request not posted in {self.place.thread_key}", self.last_error)

    async def post_notice(self, text: str | list[Part]) -> None:
        """Post a short notice in the thread, or the channel for slash commands.

        Args:
            text: Markdown (escaped), or parts with :class:`~bot.chat.text.Mention` s.
        """
        await self._post_chunks(to_mrkdwn(text))

    async def update_progress(self, text: str, *, final: bool = False) -> None:
        """First call posts a message; later calls edit it (chat.update).

        When the bot may not post in the channel (slash command in a channel it is not
        in), the progress goes through the command's response_url instead, which takes 5
        posts: interim steps use at most 4 (later ones are skipped), ``final`` always lands.
        """
        mrkdwn = to_mrkdwn(text)[: self.settings.max_section_characters]
        async with self._progress_lock:  # edits land in call order (reindex progress comes from a thread)
            await self._update_progress(mrkdwn, final)

    async def _update_progress(self, mrkdwn: str, final: bool = False) -> None:
        if self._progress_via_url:
            if final or self._url_uses < RESPONSE_URL_USES - 1:
                await self._respond(mrkdwn, replace=True)
            else:
                log.debug(
                    "slack progress step skipped (response_url budget kept for the result)",
                    extra=for_thread(self.place.thread_key),
                )
            return
        if self._progress_ts:
            try:
                await self.client.chat_update(channel=self.place.channel, ts=self._progress_ts, text=mrkdwn)
                return
            except Exception as exc:  # noqa: BLE001
                log.warning("slack chat.update failed: %s", slack_error(exc), extra=for_thread(self.place.thread_key))
        self._progress_ts = await self._post(mrkdwn)
        if not self._progress_ts:
            self._progress_via_url = await self._respond(mrkdwn)

    async def notify_private(self, text: str | list[Part]) -> None:
        """An ephemeral message to the user only (chat.postEphemeral; response_url as fallback).

        Args:
            text: Markdown (escaped), or parts with :class:`~bot.chat.text.Mention` s (built
                as mentions after the text is escaped).
        """
        mrkdwn = to_mrkdwn(text)[:3000]
        kwargs: dict[str, Any] = {"channel": self.place.channel, "user": self.place.user, "text": mrkdwn}
        if self.place.thread_ts:
            kwargs["thread_ts"] = self.place.thread_ts
        try:
            await self.client.chat_postEphemeral(**kwargs)
        except Exception as exc:  # noqa: BLE001
            log.warning(
                "slack chat.postEphemeral failed: %s", slack_error(exc), extra=for_thread(self.place.thread_key)
            )
            await self._respond(mrkdwn)

    async def permalink(self) -> str:
        """A link to this thread (chat.getPermalink of its root message); "" when Slack gives none."""
        ts = self.place.thread_ts or self.place.message_ts
        if not ts:
            return ""
        try:
            resp = await self.client.chat_getPermalink(channel=self.place.channel, message_ts=ts)
            return str(resp.get("permalink") or "")
        except Exception as exc:  # noqa: BLE001
            log.info("slack chat.getPermalink failed: %s", slack_error(exc), extra=for_thread(self.place.thread_key))
            return ""

    def reference(self) -> dict[str, Any]:
        """JSON-able place of this responder; :func:`place_from_reference` rebuilds it."""
        return {
            "platform": "slack",
            "team": self.place.team,
            "channel": self.place.channel,
            "thread_ts": self.place.thread_ts,
            "message_ts": self.place.message_ts,
            "user": self.place.user,
            "shown": list(self.place.shown),
            "help_ts": self.place.help_ts,
        }


def place_from_reference(ref: dict[str, Any], also_shown: Sequence[str] = ()) -> SlackPlace:
    """Rebuild a :class:`SlackPlace` from :meth:`SlackResponder.reference` output.

    ``also_shown``: reaction names added to the reactions to clear (the reactions of
    :data:`bot.protocol.UNFINISHED_STATUSES`: the reference is stored when the message is
    received, so it does not name the status the run showed last, nor "waiting for a human").
    """
    shown = list(dict.fromkeys([*(str(s) for s in ref.get("shown") or []), *(s for s in also_shown if s)]))
    return SlackPlace(
        team=str(ref.get("team", "")),
        channel=str(ref.get("channel", "")),
        thread_ts=str(ref.get("thread_ts", "")),
        message_ts=str(ref.get("message_ts", "")),
        user=str(ref.get("user", "")),
        shown=shown,
        help_ts=str(ref.get("help_ts", "")),
    )


def _closing_note(answer: Answer) -> str:
    if answer.kind == "human":
        return f":white_check_mark: Help request answered by {inert_text(escape(answer.answered_by or 'a teammate'))}."
    if answer.kind == "apology":
        return ":heavy_minus_sign: Help request closed without an answer."
    return ":white_check_mark: Help request resolved: see the answer below."
