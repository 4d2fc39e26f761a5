"""Experts' answers become knowledge: an answer to a help request, or ``remember: <text>``
in a thread, is saved as a learned entry (:mod:`graphs.learned`) when learning is on for
the channel."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langchain_core.messages import HumanMessage

from bot.chat.syntax import has_words, parse_human_reply, parse_remember
from bot.failures import describe_failure
from bot.logs import for_thread
from bot.protocol import IncomingMessage, Responder
from bot.service.conversations import Conversations
from graphs import signals
from graphs.learned import LearnedEntry, LearnedStore
from graphs.messages import message_text
from graphs.state import scope_of

log = logging.getLogger("bot.service")

#: ``(platform, channel id, channel name) -> dict``: what a run in that channel may use
#: (``[[channels]]``, :func:`bot.chat.channels.run_scope`).
ScopeFor = Callable[[str, str, str], dict[str, Any]]


def _asked(values: Mapping[str, Any]) -> str:
    """The question a thread's state (``values``) last asked: its turn's standalone question, or
    (when that is a line of reply or ``remember:`` syntax, as a thread saved by an earlier version
    may hold) the newest human message that is not; "" for none. An entry's question is what
    users ask, never a command."""
    asked = [values.get("question") or ""]
    asked += [message_text(m) for m in reversed(values.get("messages") or []) if isinstance(m, HumanMessage)]
    for text in asked:
        if has_words(text) and parse_human_reply(text) is None and parse_remember(text) is None:
            return text.strip()
    return ""


#: The reply to ``remember: <text>`` on a thread that asked no question: an entry is found by the
#: question it answers, so one with none would never be used.
NO_QUESTION = (
    "This thread has no question for me to remember an answer to, so I saved nothing. Ask the question "
    "first, then reply `remember: <the answer>` in its thread."
)


#: The reply to ``remember: <text>`` on a thread whose question is about the present moment
#: (:func:`graphs.signals.holds_for_now`): the answer would be stale for the next person who asks.
FOR_NOW = (
    "This thread asks about the present moment (“{question}”), so I saved nothing: the answer would be "
    "out of date for the next person who asks. The experts will be asked again next time."
)


class Learning:
    """Saves experts' answers as learned entries.

    Args:
        learned: where they are saved; None when learning is off (``[learning] enabled``).
        conversations: the threads (the question a ``remember:`` answers).
        scope_for: the channel's settings (:data:`ScopeFor`; ``learning`` may be off there); None: everything on.
        knowledge: the knowledge base's source names (what a thread searches where its channel
            restricts nothing); None: not known (entries are then saved without their knowledge).
    """

    def __init__(
        self,
        learned: LearnedStore | None,
        conversations: Conversations,
        scope_for: ScopeFor | None,
        knowledge: Sequence[str] | None = None,
    ) -> None:
        self.learned = learned
        self._conversations = conversations
        self._scope_for = scope_for
        self._knowledge = None if knowledge is None else list(knowledge)

    def searched(self, values: dict[str, Any]) -> list[str]:
        """The knowledge a thread searched (its turn's scope, ``values["scope"]``; its channel's
        sources, else the whole knowledge base, for a thread no turn has run in), which an
        expert's answer in it is learned under (:attr:`graphs.learned.LearnedEntry.sources`)."""
        scope = scope_of(values)
        for names in (scope["knowledge"], scope["sources"], self._knowledge):
            if names is not None:
                return sorted(names)
        return []

    async def learn(
        self,
        question: str,
        text: str,
        by: str,
        values: dict[str, Any],
        out: Responder,
        *,
        thread_key: str,
        platform: str,
        channel: str,
    ) -> LearnedEntry | None:
        """Save an expert's answer as a learned entry (when learning is on for the turn's
        channel, ``values["scope"]``), with a link to the thread where the responder can give
        one (:meth:`bot.protocol.Responder.permalink`) and the knowledge the thread searched
        (:meth:`searched`). An answer to a question about the present moment ("is the API down right
        now?", :func:`graphs.signals.holds_for_now`) is not saved: it would answer later askers with
        what was true then. Best effort: a failure is logged, the answer is already posted."""
        if self.learned is None or not scope_of(values)["learning"]:
            return None
        if signals.holds_for_now(question):
            log.info(
                "expert answer not learned: its question is about the present moment", extra=for_thread(thread_key)
            )
            return None
        try:
            permalink = str(await out.permalink() or "")
            entry = await asyncio.to_thread(
                self.learned.add,
                question,
                text,
                by,
                thread_key=thread_key,
                permalink=permalink,
                platform=platform,
                channel=channel,
                sources=self.searched(values),
            )
        except Exception as exc:  # noqa: BLE001
            log.warning(
                "expert answer not saved as a learned entry: %s", describe_failure(exc), extra=for_thread(thread_key)
            )
            return None
        log.info("learned entry %d saved (answered by %s)", entry.id, by, extra=for_thread(thread_key))
        return entry

    async def remember(self, msg: IncomingMessage, text: str, out: Responder) -> None:
        """``remember: <text>`` from an expert in a thread: a learned entry answering the
        thread's last question. On a thread that has asked none, nothing is saved and the expert
        is told to ask the question first (:data:`NO_QUESTION`). Others are refused privately."""
        key = msg.thread_key
        if not msg.is_expert:
            await out.notify_private("Only the experts named for this channel can add to what I've learned.")
            return
        if self.learned is None:
            await out.notify_private("Learning is turned off ([learning] enabled = false in config.toml).")
            return
        if not has_words(text):
            await out.notify_private("Please include what to remember, e.g. `remember: the setting is X`.")
            return
        values = await self._conversations.values(key) if await self._conversations.knows(key) else {}
        scope = self._scope_for(msg.platform, msg.channel, msg.channel_name) if self._scope_for else {}
        searched = (values.get("scope") or {}).get("knowledge")  # what the thread's last turn searched
        if searched is not None:
            scope = {**scope, "knowledge": searched}
        question = _asked(values)
        if not question:
            # an entry answering no question is never found by anyone's question: nothing to save
            await out.notify_private(NO_QUESTION)
            return
        if signals.holds_for_now(question):
            await out.notify_private(FOR_NOW.format(question=question))
            return
        entry = await self.learn(
            question,
            text,
            msg.author_name or msg.author_id,
            {"scope": scope},
            out,
            thread_key=key,
            platform=msg.platform,
            channel=msg.channel,
        )
        if entry is None:
            await out.notify_private(
                "Sorry, I couldn't save that (learning is off in this channel, or the storage failed: see the logs)."
            )
            return
        about = f" as the answer to “{entry.question}”" if entry.question else ""
        await out.notify_private(
            f"Saved{about} (learned entry {entry.id}, {entry.citation}). Admins can remove "
            f"it with `learned forget {entry.id}`."
        )
