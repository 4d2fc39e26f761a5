"""Admin commands from chat: ``reindex [SOURCE]`` (admins only), ``sources [SOURCE]``, ``status``, ``help``,
and ``learned list`` / ``learned forget ID`` (admins only: the experts' answers saved as knowledge).

The same words work as a slash command (``/threadwise reindex``) and as the whole text
after a mention. Every reindex attempt is written to the audit log; refusals are logged.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time

from bot.chat.syntax import REPLY_SYNTAX
from bot.protocol import Responder
from bot.storage import BookkeepingStore
from bot.sync import SYNC_LOCK, SourceAliases, SourceSync, SyncBusy, resolve_sources, sources_text, sync_summary
from graphs.knowledge import KnowledgeBase
from graphs.learned import LearnedEntry, LearnedStore

log = logging.getLogger(__name__)

COMMANDS = ("reindex", "sources", "status", "help")
_LEARNED = re.compile(r"^learned(?:\s+(list|forget)(?:\s+#?(\S+))?)?$")
_REINDEX = re.compile(r"^reindex\s+(\S+)$")
_SOURCES = re.compile(r"^sources\s+(\S+)$")
LIST_LIMIT = 30  # entries shown by `learned list` (a chat message stays readable)
REINDEX_LOCK = SYNC_LOCK  # the store's cross-replica lock of a reindex (bot.storage)

HELP_TEXT = (
    "I answer questions from {kb}. Ask me in words: mention me in a channel, write to me in a DM, "
    "or reply in a thread I'm part of (a reply that mentions someone else and not me is left to "
    "the people you talk to).\n"
    "• While I work, the reaction on your message shows what I'm doing (searching, writing, done).\n"
    "• When I can't find a grounded answer I ask the team's experts in the thread; they reply with "
    + REPLY_SYNTAX
    + " (or use the buttons).\n"
    "• Rate an answer with its 👍 / 👎 buttons. Experts can teach me with `remember: <the answer>` in a thread.\n"
    "• Admin commands: `reindex` or `reindex SOURCE`, `learned list`, `learned forget ID` (admins only), "
    "`sources` or `sources SOURCE`, `status`, `help`. "
    "This help is shown only to you."
)


class AdminCommands:
    """Runs admin commands against the knowledge base.

    Args:
        knowledge: the knowledge base to reindex and describe.
        store: bookkeeping (audit log, open help requests).
        describe: extra status facts (model, web search) as ``{label: value}``.
        progress_interval: seconds between progress message edits during a reindex.
        kb_description: ``[knowledge] description``.
        learned: the learned entries (``learned list|forget``); None when learning is off.
        sync: runs syncs one at a time (default: one over ``knowledge`` and ``store``).
        source_names: the knowledge base's names of a source as config.toml names it
            (:meth:`bot.config.Settings.source_names`: a ``[knowledge] sources`` folder as
            written); None: only the knowledge base's own names. A name typed in chat is
            matched by :func:`bot.sync.resolve_sources` (exactly, else without case).
    """

    def __init__(
        self,
        knowledge: KnowledgeBase,
        store: BookkeepingStore,
        *,
        kb_description: str,
        describe: dict[str, str] | None = None,
        progress_interval: float = 2.0,
        learned: LearnedStore | None = None,
        sync: SourceSync | None = None,
        source_names: SourceAliases | None = None,
    ):
        self.knowledge = knowledge
        self.store = store
        self.kb_description = kb_description
        self.describe = describe or {}
        self.progress_interval = progress_interval
        self.learned = learned
        self.sync = sync or SourceSync(knowledge, store)
        self.source_names = source_names

    @staticmethod
    def parse(text: str) -> str | None:
        """The admin command if ``text`` is exactly one of :data:`COMMANDS` (the command's
        case and a leading ``/`` or ``!`` ignored; a source name after ``reindex`` or
        ``sources`` keeps its case), else None: questions that merely contain the word are
        questions."""
        words = text.strip().lstrip("/!").split()
        if not words:
            return None
        word = " ".join([words[0].lower(), *words[1:]])
        if _REINDEX.match(word) or _SOURCES.match(word):
            return word
        word = word.lower()
        if word in COMMANDS or _LEARNED.match(word):
            return word
        return None

    async def run(self, command: str, *, actor_id: str, is_admin: bool, out: Responder) -> None:
        """Run ``command`` for ``actor_id``; refuses ``reindex`` to non-admins privately.
        ``help`` is private (ephemeral on Slack and Discord)."""
        if command == "help":
            await out.notify_private(HELP_TEXT.format(kb=self.kb_description))
        elif command == "status":
            await out.post_notice(await self.status_text())
        elif command == "sources" or _SOURCES.match(command):
            m = _SOURCES.match(command)
            names = await self._named(m.group(1), out) if m else None
            if m and not names:
                return
            await out.post_notice(sources_text(self.knowledge, self.sync.schedules, names))
        elif command == "reindex" or _REINDEX.match(command):
            await self.store.audit(actor_id, command, is_admin)
            if not is_admin:
                log.warning("reindex refused for non-admin %s", actor_id)
                await out.notify_private("Sorry, only admins can reindex the knowledge base.")
                return
            m = _REINDEX.match(command)
            if m:
                names = await self._named(m.group(1), out)
                if names:
                    await self.reindex(out, names)
            else:
                await self.reindex(out)
        elif _LEARNED.match(command):
            await self.store.audit(actor_id, command, is_admin)
            if not is_admin:
                log.warning("%s refused for non-admin %s", command, actor_id)
                await out.notify_private("Sorry, only admins can list or remove learned entries.")
                return
            await self.learned_command(command, out)
        else:
            await out.post_notice(f"Unknown command `{command}`. Try `help`.")

    async def _named(self, word: str, out: Responder) -> list[str]:
        """The sources ``word`` names (:func:`bot.sync.resolve_sources`); [] after telling the
        person privately that none is called so, and which ones there are."""
        names, unknown = resolve_sources([word], self.knowledge.sources, self.source_names)
        if unknown:
            await out.notify_private(
                f"There is no source `{word}`. Sources: " + ", ".join(f"`{s}`" for s in self.knowledge.sources)
            )
        return names

    async def learned_command(self, command: str, out: Responder) -> None:
        """``learned [list]`` lists the entries (newest first, at most :data:`LIST_LIMIT`),
        privately; ``learned forget ID`` removes one."""
        m = _LEARNED.match(command)
        action, arg = (m.group(1) or "list", m.group(2)) if m else ("list", None)
        if self.learned is None:
            await out.notify_private("Learning is turned off ([learning] enabled = false in config.toml).")
            return
        if action == "forget":
            if not arg or not arg.isdigit():
                await out.notify_private("Usage: `learned forget ID` (the number `learned list` shows).")
                return
            removed = await asyncio.to_thread(self.learned.forget, int(arg))
            log.info("learned entry %s %s", arg, "forgotten" if removed else "not found")
            await out.notify_private(
                f"Learned entry {arg} removed: I won't use it any more."
                if removed
                else f"There is no learned entry {arg}. `learned list` shows them."
            )
            return
        entries = await asyncio.to_thread(self.learned.entries)
        await out.notify_private(format_learned(entries))

    async def status_text(self) -> str:
        stats = self.knowledge.stats()
        pending = len(await self.store.open_help_requests())
        lines = [
            f"Knowledge base: {stats.get('files', 0)} files, {stats.get('chunks', 0)} chunks "
            f"(built {stats.get('built_at') or 'never'}, embeddings: {stats.get('embedder') or 'none'})",
            *(f"{k}: {v}" for k, v in self.describe.items()),
            f"Open help requests: {pending}",
            f"Reindex running: {'yes' if self.sync.running else 'no'}",
            *([f"Last index build failed: {stats['last_error']}"] if stats.get("last_error") else []),
        ]
        return "\n".join(lines)

    async def reindex(self, out: Responder, sources: list[str] | None = None) -> None:
        """Sync the sources (all, or those named) in a worker thread (questions keep being
        answered from the old index), editing one progress message, ending with the totals
        and one line per source (a failed source names its cause and keeps its documents)."""
        if self.sync.running:
            await out.post_notice("A reindex is already running.")
            return
        loop = asyncio.get_running_loop()
        last = [0.0]
        await out.update_progress(
            "Reindexing the knowledge base…" if not sources else f"Reindexing {', '.join(sources)}…"
        )

        def progress(phase: str, done: int, total: int) -> None:
            now = time.monotonic()
            if now - last[0] >= self.progress_interval:
                last[0] = now
                text = f"Reindexing… {phase}: {done}/{total}"
                asyncio.run_coroutine_threadsafe(out.update_progress(text), loop)

        try:
            stats = await self.sync.run(sources, progress)
        except SyncBusy as exc:
            text = (
                "A reindex is already running on another replica."
                if "replica" in str(exc)
                else f"Reindex not started: {exc}."
            )
            await out.update_progress(text, final=True)
            return
        except Exception as exc:  # noqa: BLE001
            log.error("reindex failed: %s", exc)
            log.debug("reindex failed", exc_info=True)
            await out.update_progress(f"Reindex failed: {exc}. The previous index is still in use.", final=True)
            return
        if len(stats.sources) <= 1 and not stats.failed and not any(r.problems for r in stats.sources):
            await out.update_progress(f"Reindex done: {stats.summary()}.", final=True)
            return
        await out.update_progress(sync_summary(stats).replace("Sync done:", "Reindex done:", 1), final=True)


def format_learned(entries: list[LearnedEntry], limit: int = LIST_LIMIT) -> str:
    """The learned entries as a short Markdown list, newest first (escaped by the renderers)."""
    if not entries:
        return "No learned entries yet: an expert's answer to a help request is saved as one."
    lines = [f"{len(entries)} learned entries (newest first):"]
    for e in list(reversed(entries))[:limit]:
        q = " ".join(e.question.split())[:80] or "(no question)"
        a = " ".join(e.answer.split())[:80]
        lines.append(f"• {e.id}: {q} → {a} ({e.citation})")
    if len(entries) > limit:
        lines.append(f"… and {len(entries) - limit} older ones (`threadwise learned list` shows all).")
    lines.append("Remove one with `learned forget ID`.")
    return "\n".join(lines)
