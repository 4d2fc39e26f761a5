"""The output side of the Discord adapter: :class:`~bot.protocol.Responder` implementations.

* :class:`DiscordResponder` - bound to one user message: status reactions on that message,
  the typing indicator while the answer is written, answers / help requests / notices posted
  in the conversation channel (the thread, or the DM), private notes by DM.
* :class:`InteractionResponder` - bound to one interaction (slash command, button, modal):
  ephemeral replies and one progress message edited in place; answers go to the thread.

Every method swallows and logs Discord errors (HTTP 403 missing permissions, 50083 archived
thread, 404 unknown message...): a failed reaction never stops an answer; only
``post_answer`` and ``post_help_request`` raise :class:`~bot.protocol.PostError` when the
text could not be posted (done means posted). Every message is sent with no mentions
parsed except the ones we mean (``allowed_mentions``) and with link previews suppressed
(flag SUPPRESS_EMBEDS, 1 << 2): Discord's crawler never fetches a URL a model wrote.
Status reactions go through the shared :class:`bot.chat.reactions.ReactionState`. Messages are sent
one after another; discord.py's per-route rate limiter (X-RateLimit-* headers, 429 retry_after)
paces bursts - no extra sleeps or retry loops here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Any

import discord

from bot.chat.help import duration
from bot.chat.reactions import ReactionState
from bot.chat.text import Mention, Part, compose
from bot.logs import for_thread
from bot.platforms.discord.auth import expert_mentions
from bot.platforms.discord.format import (
    format_answer,
    format_help_request,
    inert_markdown,
    split_message,
)
from bot.platforms.discord.views import help_view, vote_view
from bot.protocol import STEP_STATUSES, UNFINISHED_STATUSES, Answer, HelpRequest, PostError, Responder, Status

if TYPE_CHECKING:
    from bot.platforms.discord.app import ThreadwiseBot

log = logging.getLogger("threadwise.discord")

NO_PINGS = discord.AllowedMentions.none()
TYPING_MAX_SECONDS = 300.0
# Reaction errors after which more reactions on the same message are pointless.
_GIVE_UP_CODES = {
    50013,
    50001,
    50083,
    10008,
    10003,
}  # missing permissions/access, archived thread, unknown message/channel


def discord_text(text: str | list[Part]) -> str:
    """Our Markdown with :class:`~bot.chat.text.Mention` parts as ``<@id>`` / ``<@&id>``
    (digits only; they ping only if the send's ``allowed_mentions`` names them); text parts
    (which may carry a display name, a source's name or a question) go through
    :func:`~bot.platforms.discord.format.inert_markdown`, so only the mentions we build act."""

    def mention(m: Mention) -> str:
        if not m.id.isdigit():
            return m.id
        return f"<@&{m.id}>" if m.kind == "role" else f"<@{m.id}>"

    return compose(text, render=inert_markdown, mention=mention)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, discord.HTTPException):
        return f"HTTP {exc.status} code {exc.code}: {exc.text[:120]}"
    return repr(exc)


class DiscordResponder(Responder):
    """Responder bound to one Discord message.

    Args:
        bot: the running client.
        thread_key: ``discord:<guild id or dm>:<thread or DM channel id>``.
        channel_id: where replies go (a thread, a text channel or a DM channel).
        status_channel_id, status_message_id: the user's message that carries the status
            reactions (for a question that started a thread, the message in the parent channel).
        author_id: the user to notify privately.
        stale_reactions: emoji that may still be shown on the status message by an earlier
            responder (a rebuilt one): removed when the next status is set.
    """

    platform = "discord"

    def __init__(
        self,
        bot: ThreadwiseBot,
        *,
        thread_key: str,
        channel_id: int,
        status_channel_id: int | None = None,
        status_message_id: int | None = None,
        author_id: int | None = None,
        stale_reactions: tuple[str, ...] = (),
        reply_always: bool = False,
    ) -> None:
        self.bot = bot
        self.thread_key = thread_key
        self.channel_id = channel_id
        self.status_channel_id = status_channel_id
        self.status_message_id = status_message_id
        self.author_id = author_id
        self.reply_always = reply_always  # every part replies to the question (answers in a channel)
        self._reactions = ReactionState(
            list(dict.fromkeys(e for e in stale_reactions if e)),
            min_interval=bot.discord_settings.reactions.change_interval_seconds,
        )
        self._typing: asyncio.Task[None] | None = None
        self._progress: discord.Message | None = None
        self.last_error = ""

    # ------------------------------------------------------------------ plumbing
    @property
    def settings(self):
        return self.bot.settings_for_thread(self.thread_key)

    def channel(self, channel_id: int | None = None) -> discord.abc.Messageable:
        """The channel object (cached, or a partial one that needs no cache)."""
        cid = channel_id or self.channel_id
        ch = self.bot.get_channel(cid)
        if ch is not None and isinstance(ch, discord.abc.Messageable):
            return ch
        return self.bot.get_partial_messageable(cid)

    def _status_message(self) -> discord.PartialMessage | None:
        if not self.status_message_id:
            return None
        ch = self.channel(self.status_channel_id or self.channel_id)
        # every Messageable a bot gets (text, voice, thread, DM, partial) has get_partial_message
        return ch.get_partial_message(self.status_message_id)  # type: ignore[attr-defined]

    async def permalink(self) -> str:
        """A link to this conversation (``https://discord.com/channels/<guild or @me>/<channel>``)."""
        parts = self.thread_key.split(":")
        if len(parts) != 3 or not parts[2].isdigit():
            return ""
        guild = "@me" if parts[1] == "dm" else parts[1]
        return f"https://discord.com/channels/{guild}/{self.channel_id or parts[2]}"

    def reference(self) -> dict[str, Any]:
        """JSON-serialisable ids from which :meth:`from_reference` rebuilds this responder."""
        return {
            "thread_key": self.thread_key,
            "channel_id": str(self.channel_id),
            "status_channel_id": str(self.status_channel_id or ""),
            "status_message_id": str(self.status_message_id or ""),
            "author_id": str(self.author_id or ""),
            "shown_reaction": self._reactions.current or "",
            "shown": list(self._reactions.shown),
            "reply_always": self.reply_always,
        }

    @classmethod
    def from_reference(cls, bot: ThreadwiseBot, ref: dict[str, Any]) -> DiscordResponder:
        """Rebuild a responder after a restart from :meth:`reference` output.

        The service stores the reference when the message is received, not at every status,
        so the rebuilt responder treats the recorded reactions and those of every
        :data:`bot.protocol.UNFINISHED_STATUSES` as possibly shown.

        Raises:
            KeyError, ValueError: ``ref`` is not a Discord reference.
        """

        def num(key: str) -> int | None:
            value = str(ref.get(key) or "")
            return int(value) if value else None

        return cls(
            bot,
            thread_key=str(ref["thread_key"]),
            channel_id=int(ref["channel_id"]),
            status_channel_id=num("status_channel_id"),
            status_message_id=num("status_message_id"),
            author_id=num("author_id"),
            stale_reactions=(
                *(str(e) for e in ref.get("shown") or []),
                str(ref.get("shown_reaction") or ""),
                *(str(getattr(bot.discord_settings.reactions, s.value)) for s in UNFINISHED_STATUSES),
            ),
            reply_always=bool(ref.get("reply_always")),
        )

    # ------------------------------------------------------------------ status
    async def may_show(self, status: Status) -> None:
        """An earlier delivery's ``status`` reaction may be on the message: the next status replaces it."""
        self._reactions.assume(str(getattr(self.settings.reactions, status.value)))

    async def set_status(self, status: Status) -> None:
        """Show ``status`` as the only Threadwise reaction on the user's message.

        Adds the new emoji (config ``discord.reactions``) and then removes the others, even
        when the add failed (shared :class:`~bot.chat.reactions.ReactionState`; the steps of a
        run are paced by ``[discord.reactions] change_interval_seconds``); WRITING also
        starts the typing indicator, any other status stops it. After a 403 / archived
        thread / unknown message, stops trying reactions for this message.
        """
        if status is Status.WRITING:
            self._start_typing()
        else:
            await self._stop_typing()
        emoji = getattr(self.settings.reactions, status.value)
        message = self._status_message()
        if message is None:
            return
        log.debug(
            "discord: status %s message=%s", status.value, self.status_message_id, extra=for_thread(self.thread_key)
        )

        async def add(e: str) -> bool:
            try:
                await message.add_reaction(e)
                return True
            except (discord.HTTPException, ValueError) as exc:
                self._reaction_failed("add", e, exc)
                return False

        async def remove(e: str) -> bool:
            try:
                await message.remove_reaction(e, discord.Object(self.bot.user.id))  # type: ignore[union-attr]
                return True
            except discord.NotFound:
                return True  # already gone
            except (discord.HTTPException, ValueError) as exc:
                self._reaction_failed("remove", e, exc)
                return False

        await self._reactions.move_to(emoji, add=add, remove=remove, settle=status not in STEP_STATUSES)

    def _reaction_failed(self, what: str, emoji: str, exc: BaseException) -> None:
        log.warning(
            "discord: could not %s reaction %s message=%s: %s",
            what,
            emoji,
            self.status_message_id,
            _describe(exc),
            extra=for_thread(self.thread_key),
        )
        if isinstance(exc, discord.HTTPException) and (exc.status in (403, 404) or exc.code in _GIVE_UP_CODES):
            self._reactions.disabled = True

    def _start_typing(self) -> None:
        if self._typing is None or self._typing.done():
            self._typing = asyncio.create_task(self._type(), name=f"typing {self.thread_key}")

    async def _type(self) -> None:
        """Keep the typing indicator on until cancelled (discord.py re-sends it every 5 s),
        for at most TYPING_MAX_SECONDS so a run that never posts cannot type forever."""
        try:
            async with asyncio.timeout(TYPING_MAX_SECONDS), self.channel().typing():
                await asyncio.Event().wait()
        except asyncio.CancelledError:
            raise
        except TimeoutError:
            log.info(
                "discord: typing indicator stopped after %ss", TYPING_MAX_SECONDS, extra=for_thread(self.thread_key)
            )
        except Exception as exc:  # noqa: BLE001 - typing is cosmetic
            log.info("discord: typing indicator failed: %s", _describe(exc), extra=for_thread(self.thread_key))

    async def _stop_typing(self) -> None:
        task, self._typing = self._typing, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    # ------------------------------------------------------------------ posting
    async def _send(
        self,
        text: str,
        *,
        allowed: discord.AllowedMentions = NO_PINGS,
        view: discord.ui.View | None = None,
        reply: bool = False,
    ) -> discord.Message | None:
        kwargs: dict[str, Any] = {"allowed_mentions": allowed, "suppress_embeds": True}
        if view is not None:
            kwargs["view"] = view
        if reply and self.status_message_id and (self.status_channel_id in (None, self.channel_id)):
            kwargs["reference"] = discord.MessageReference(
                message_id=self.status_message_id, channel_id=self.channel_id, fail_if_not_exists=False
            )
        try:
            return await self.channel().send(text, **kwargs)
        except discord.HTTPException as exc:
            self.last_error = f"HTTP {exc.status} code {exc.code}"
            if "reference" in kwargs:  # e.g. the question was deleted: post without the reply link
                kwargs.pop("reference")
                with contextlib.suppress(discord.HTTPException):
                    return await self.channel().send(text, **kwargs)
            log.error("discord: could not post: %s", _describe(exc), extra=for_thread(self.thread_key))
            return None

    async def post_answer(self, answer: Answer) -> None:
        """Post the answer (Discord Markdown, sources, route note) in messages of at most
        ``discord.max_message_characters`` (Discord: 2000), in order.

        Raises:
            PostError: a part could not be posted (discord.py already retried 429/5xx).
        """
        await self._stop_typing()
        chunks = format_answer(answer, self.settings.max_message_characters)
        log.info(
            "discord: posting %s (%d message(s), %d chars)",
            answer.kind,
            len(chunks),
            sum(map(len, chunks)),
            extra=for_thread(self.thread_key),
        )
        for i, chunk in enumerate(chunks):
            last = i == len(chunks) - 1
            view = vote_view(answer.answer_id) if last and answer.answer_id else None
            if await self._send(chunk, reply=(i == 0 or self.reply_always), view=view) is None:
                # the channel is gone or forbidden: later parts would fail too
                raise PostError(
                    f"discord answer: {i} of {len(chunks)} message(s) posted thread={self.thread_key}", self.last_error
                )

    async def post_help_request(self, request: HelpRequest) -> None:
        """Post the help request mentioning the configured expert roles/users, with Answer /
        Retry with hint / Dismiss buttons (persistent: they work after a restart).

        Raises:
            PostError: the help request could not be posted.
        """
        await self._stop_typing()
        mentions, allowed = expert_mentions(self.settings)
        timeout = request.timeout_seconds or self.bot.runtime.settings.service.help_timeout_seconds
        text = format_help_request(request, mentions, self.settings.max_message_characters, duration(timeout))
        sent = await self._send(
            text, allowed=allowed, view=help_view(self.thread_key, request.interrupt_id), reply=True
        )
        if sent is None:
            raise PostError(f"discord help request not posted thread={self.thread_key}", self.last_error)
        log.info(
            "discord: help request posted experts=%s",
            mentions or "(none configured)",
            extra=for_thread(self.thread_key),
        )

    async def post_notice(self, text: str | list[Part]) -> None:
        """Post a short notice in the conversation (split if ever too long)."""
        await self._stop_typing()
        for chunk in split_message(discord_text(text), self.settings.max_message_characters):
            await self._send(chunk, reply=True)

    async def update_progress(self, text: str, *, final: bool = False) -> None:
        """First call posts a progress message; later calls edit that same message."""
        text = inert_markdown(text)[: self.settings.max_message_characters]
        if self._progress is not None:
            try:
                await self._progress.edit(content=text)
                return
            except discord.HTTPException as exc:
                log.warning("discord: could not edit progress: %s", _describe(exc), extra=for_thread(self.thread_key))
        self._progress = await self._send(text, reply=True)

    async def notify_private(self, text: str | list[Part]) -> None:
        """Tell only the author: by DM; if their DMs are closed, as a reply mentioning them."""
        text = discord_text(text)
        if self.author_id is None:
            await self.post_notice(text)
            return
        try:
            dm = await self.bot.create_dm(discord.Object(self.author_id))  # POST /users/@me/channels
            await dm.send(text[: self.settings.max_message_characters], allowed_mentions=NO_PINGS, suppress_embeds=True)
            log.info("discord: private note sent user=%s", self.author_id, extra=for_thread(self.thread_key))
        except discord.HTTPException as exc:
            log.info(
                "discord: DM to user=%s failed (%s); replying in the thread",
                self.author_id,
                _describe(exc),
                extra=for_thread(self.thread_key),
            )
            mention = discord.AllowedMentions(users=[discord.Object(self.author_id)], everyone=False, roles=False)
            await self._send(
                f"<@{self.author_id}> {text}"[: self.settings.max_message_characters], allowed=mention, reply=True
            )


class InteractionResponder(DiscordResponder):
    """Responder for a slash command, button or modal: private things are ephemeral.

    The first output answers the interaction (Discord requires a response within 3 s, so
    :meth:`keep_alive` defers if the service is slower); progress edits the original response.
    Answers and help requests of a resumed run still go to the thread (``channel_id``).

    Args:
        interaction: the interaction being answered.
        ephemeral: make every interaction reply visible only to the user (non-admins).
        in_thread: answers/notices go to the thread (resume); else notices answer the interaction.
    """

    def __init__(
        self,
        bot: ThreadwiseBot,
        interaction: discord.Interaction,
        *,
        ephemeral: bool,
        in_thread: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(bot, **kwargs)
        self.interaction = interaction
        self.ephemeral = ephemeral
        self.in_thread = in_thread
        self._lock = asyncio.Lock()
        # "" nothing yet | "deferred" a thinking placeholder to replace | "sent" a reply
        thinking = interaction.response.type is discord.InteractionResponseType.deferred_channel_message
        self._original = "deferred" if thinking else ""
        self._progress_started = False

    async def keep_alive(self, after: float = 2.0) -> None:
        """Defer the interaction if nothing answered it within ``after`` seconds (Discord's
        limit is 3 s; a deferred interaction can be followed up for 15 minutes)."""
        await asyncio.sleep(after)
        async with self._lock:
            if not self.interaction.response.is_done():
                try:
                    await self.interaction.response.defer(ephemeral=self.ephemeral, thinking=True)
                    self._original = "deferred"
                except discord.HTTPException as exc:
                    log.warning(
                        "discord: could not defer interaction: %s", _describe(exc), extra=for_thread(self.thread_key)
                    )

    async def _reply(self, text: str | list[Part], *, ephemeral: bool, edit: bool = False) -> bool:
        """Answer the interaction: the first reply is its response (or replaces the "thinking"
        placeholder); ``edit`` rewrites that response; anything else is a follow-up.
        Returns False (logged) when Discord refused it."""
        text = discord_text(text)[: self.settings.max_message_characters]
        async with self._lock:
            try:
                if not self.interaction.response.is_done():
                    await self.interaction.response.send_message(
                        text, ephemeral=ephemeral, allowed_mentions=NO_PINGS, suppress_embeds=True
                    )
                    self._original = "sent"
                elif self._original == "deferred" or (edit and self._original == "sent"):
                    await self.interaction.edit_original_response(content=text, allowed_mentions=NO_PINGS)
                    self._original = "sent"
                else:
                    await self.interaction.followup.send(
                        text, ephemeral=ephemeral, allowed_mentions=NO_PINGS, suppress_embeds=True
                    )
                return True
            except discord.HTTPException as exc:
                self.last_error = f"HTTP {exc.status} code {exc.code}"
                log.warning("discord: interaction reply failed: %s", _describe(exc), extra=for_thread(self.thread_key))
                return False

    async def set_status(self, status: Status) -> None:
        if self.in_thread:
            await super().set_status(status)

    async def post_notice(self, text: str | list[Part]) -> None:
        if self.in_thread:
            await super().post_notice(text)
        else:
            await self._reply(text, ephemeral=self.ephemeral)

    async def post_answer(self, answer: Answer) -> None:
        if self.in_thread:
            await super().post_answer(answer)
            return
        for chunk in format_answer(answer, self.settings.max_message_characters):
            if not await self._reply(chunk, ephemeral=self.ephemeral):
                raise PostError(f"discord interaction answer not posted thread={self.thread_key}", self.last_error)

    async def update_progress(self, text: str, *, final: bool = False) -> None:
        """First call answers the interaction; later calls edit that response."""
        if self.in_thread:
            await super().update_progress(text, final=final)
            return
        await self._reply(text, ephemeral=self.ephemeral, edit=self._progress_started)
        self._progress_started = True

    async def notify_private(self, text: str | list[Part]) -> None:
        """An ephemeral reply only the user sees."""
        await self._reply(text, ephemeral=True)
