"""Experts' answers become knowledge: an answer to a help request, or ``remember: <text>``
in a thread, is saved as a learned entry (:mod:`graphs.learned`) when learning is on for
the channel."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from bot.failures import describe_failure
from bot.logs import for_thread
from bot.protocol import IncomingMessage, Responder
from graphs.learned import LearnedEntry
from graphs.state import scope_of

if TYPE_CHECKING:
    from bot.service.chat_service import ChatService

log = logging.getLogger("bot.service")  # one logger for the chat runtime: log filters name it


async def learn(
    svc: ChatService,
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
    channel), with a link to the thread where the responder can give one. Best effort:
    a failure is logged, the answer is already posted."""
    if svc.learned is None or not scope_of(values)["learning"]:
        return None
    try:
        permalink = ""
        make_link = getattr(out, "permalink", None)
        if callable(make_link):
            permalink = str(await make_link() or "")
        entry = await asyncio.to_thread(
            svc.learned.add,
            question,
            text,
            by,
            thread_key=thread_key,
            permalink=permalink,
            platform=platform,
            channel=channel,
        )
    except Exception as exc:  # noqa: BLE001
        log.warning(
            "expert answer not saved as a learned entry: %s", describe_failure(exc), extra=for_thread(thread_key)
        )
        return None
    log.info("learned entry %d saved (answered by %s)", entry.id, by, extra=for_thread(thread_key))
    return entry


async def remember(svc: ChatService, msg: IncomingMessage, text: str, out: Responder) -> None:
    """``remember: <text>`` from an expert in a thread: a learned entry answering the
    thread's last question (or standing alone). Others are refused privately."""
    key = msg.thread_key
    if not msg.is_expert:
        await out.notify_private("Only the experts named for this channel can add to what I've learned.")
        return
    if svc.learned is None:
        await out.notify_private("Learning is turned off ([learning] enabled = false in config.toml).")
        return
    values = await svc.thread_values(key) if await svc.knows_thread(key) else {}
    scope = svc.scope_for(msg.platform, msg.channel, msg.channel_name) if svc.scope_for else {}
    entry = await learn(
        svc,
        str(values.get("question") or ""),
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
        f"Saved{about} (learned entry {entry.id}, {entry.citation}). Admins can remove it "
        f"with `learned forget {entry.id}`."
    )
