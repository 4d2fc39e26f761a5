"""Restart survival, admin commands, config errors and the knowledge base index."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from bot.config import ConfigError, Secrets, load_settings
from bot.platforms.console import ConsoleResponder
from bot.protocol import IncomingMessage, Status
from bot.runtime import open_runtime
from graphs.knowledge import KnowledgeBase, KnowledgeBaseError
from tests.conftest import scripted_runtime, serve, write_config, write_kb
from tests.fakes.chat_model import ScriptedChatModel
from tests.fakes.mistral_api import HeldEmbeddings

NONE_RELEVANT = json.dumps({"documents": [{"id": 1, "relevant": False}], "feedback": "nothing"})


def msg(text: str, *, expert: bool = True, admin: bool = False, author: str = "ana") -> IncomingMessage:
    return IncomingMessage(
        platform="console",
        thread_key="console:t",
        message_id=uuid.uuid4().hex,
        author_id=author,
        author_name=author,
        text=text,
        is_expert=expert,
        is_admin=admin,
    )


async def test_paused_thread_resumes_after_restart(settings):
    async with scripted_runtime(settings, {"grade_documents": NONE_RELEVANT}) as (rt, _):
        first = ConsoleResponder("t", show_status=False)
        await rt.service.handle(msg("what does the standalone container need to boot?"), first)
        assert first.help_requests
    # a new process: a new saver and bookkeeping on the same files
    async with scripted_runtime(settings) as (rt, model):
        original = ConsoleResponder("t", show_status=False)
        rebuilt: list[dict] = []
        rt.service.register_platform("console", lambda ref: rebuilt.append(ref) or original)
        assert await rt.service.recover() == 1
        assert await rt.service.pending_interrupt("console:t") is not None
        await rt.service.handle(
            msg("answer: REDIS_URI and DATABASE_URI", author="bob"), ConsoleResponder("t", show_status=False)
        )
        values = await rt.service.thread_values("console:t")
    assert rebuilt == [{"thread": "t"}]  # the original question's responder was rebuilt from its reference
    assert original.answers[0].kind == "human" and original.answers[0].text == "REDIS_URI and DATABASE_URI"
    assert original.statuses[-1] == Status.DONE
    assert model.calls == []
    assert [m.type for m in values["messages"]] == ["human", "ai"]


async def test_a_reply_in_a_thread_without_pending_interrupt_starts_no_run(settings):
    """The reply syntax where no help request waits is neither asked nor learned: one notice."""
    async with scripted_runtime(settings) as (rt, model):
        out = ConsoleResponder("t", show_status=False)
        await rt.service.handle(msg("answer: what does the standalone container need to boot?"), out)
        assert await rt.service.thread_values("console:t") == {}
    assert out.answers == [] and model.calls == []
    assert len(out.notices) == 1 and out.notices[0].startswith("Nothing in this thread is waiting"), out.notices


async def test_remember_learns_the_threads_question_not_a_reply_an_older_version_asked(settings):
    """A thread saved when a reply with no help request was still asked holds it as its newest
    human message: ``remember:`` learns the question before it, never the reply line."""
    async with scripted_runtime(settings) as (rt, _):
        await rt.service.seed_history(
            "console:t",
            [
                {"role": "user", "content": "what is the warranty on the scanners?"},
                {"role": "assistant", "content": "Scan data is kept for 18 months."},
                {"role": "user", "content": "answer: Scanners have a two-year warranty."},
                {"role": "assistant", "content": "Scan data is kept for 18 months."},
            ],
        )
        out = ConsoleResponder("t", show_status=False)
        await rt.service.handle(msg("remember: Scanners have a two-year warranty."), out)
        assert rt.learned is not None
        [entry] = rt.learned.entries()
    assert entry.question == "what is the warranty on the scanners?", entry
    assert out.notices and "“what is the warranty on the scanners?”" in out.notices[0], out.notices


async def test_admin_reindex_and_refusal(settings):
    async with scripted_runtime(settings) as (rt, model):
        refused = ConsoleResponder("t", show_status=False)
        await rt.service.handle(msg("reindex", admin=False, author="eve"), refused)
        allowed = ConsoleResponder("t", show_status=False)
        await rt.service.handle(msg("reindex", admin=True, author="root"), allowed)
        status = ConsoleResponder("t", show_status=False)
        await rt.service.handle(msg("status"), status)
        audit = await rt.bookkeeping.audit_rows()
    assert refused.notices == ["Sorry, only admins can reindex the knowledge base."]
    assert allowed.notices[0].startswith("Reindexing")
    assert "Reindex done: 3 documents" in allowed.notices[-1] and " s." in allowed.notices[-1]
    assert "3 files" in status.notices[0]
    assert [(a[0], a[2]) for a in audit] == [("eve", 0), ("root", 1)]
    assert model.calls == []


async def test_questions_answered_during_reindex(tmp_path: Path):
    """Questions are answered while a reindex is in progress: the reindex is held inside
    its embedding call (a new file to embed) until every question has its answer."""
    marker = "RELEASE-TRAIN-SCHEDULE"
    held = HeldEmbeddings(hold=lambda texts: any(marker in t for t in texts))
    async with serve({"/v1/embeddings": held.embeddings}) as base:
        config = write_config(tmp_path, extra=f'mistral_base_url = "{base}/v1"')
        config.write_text(config.read_text().replace('embeddings = "none"', 'embeddings = "mistral"'))
        settings = load_settings(config)
        async with open_runtime(settings, Secrets(mistral_api_key="test-key"), chat_model=ScriptedChatModel()) as rt:
            (tmp_path / "kb" / "release.md").write_text(f"# Releases\n\n## Schedule\n{marker}: every Tuesday.\n")
            admin_out = ConsoleResponder("a", show_status=False)
            reindex = asyncio.create_task(rt.service.admin("reindex", actor_id="root", is_admin=True, out=admin_out))
            await asyncio.wait_for(held.arrived.wait(), 60)  # the reindex is embedding the new file, held there
            outs = [ConsoleResponder(f"q{i}", show_status=False) for i in range(4)]
            await asyncio.wait_for(
                asyncio.gather(
                    *[
                        rt.service.handle(
                            IncomingMessage(
                                "console", f"console:q{i}", uuid.uuid4().hex, "u", "container boot requirements?"
                            ),
                            o,
                        )
                        for i, o in enumerate(outs)
                    ],
                ),
                60,
            )
            reindexing = not reindex.done()
            held.release.set()
            await asyncio.wait_for(reindex, 60)
    assert reindexing  # every question was answered while the reindex was still running
    assert all(o.answers and o.answers[0].kind == "answer" for o in outs)
    assert admin_out.notices[0].startswith("Reindexing") and "Reindex done: 4 documents" in admin_out.notices[-1]


def test_config_errors_name_the_key(tmp_path: Path):
    bad = tmp_path / "config.toml"
    bad.write_text('[graph]\nmax_generations = "two"\n')
    with pytest.raises(ConfigError, match=r"graph\.max_generations: .*integer"):
        load_settings(bad)
    bad.write_text("[graph]\nmax_generaitons = 2\n")
    with pytest.raises(ConfigError, match=r"graph\.max_generaitons: unknown key"):
        load_settings(bad)
    bad.write_text("[graph\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_settings(bad)
    with pytest.raises(ConfigError, match="not found"):
        load_settings(tmp_path / "missing.toml")


def test_shipped_config_is_valid_and_holds_no_secrets():
    root = Path(__file__).resolve().parent.parent
    settings = load_settings(root / "config.toml")
    assert settings.legacy_sources() == ["docs"] and "user guide" in settings.kb_description()
    text = (root / "config.toml").read_text().lower()
    for word in ("xoxb-", "xapp-", "tvly-", "api_key =", "token ="):
        assert word not in text


def _kb(tmp_path: Path, src: Path, emb=None) -> KnowledgeBase:
    return KnowledgeBase(
        tmp_path / "index",
        [src],
        embeddings=emb,
        embedder_id="fake" if emb else "none",
        chunk_size=300,
        chunk_overlap=30,
    )


def test_reindex_reuses_unchanged_files_and_swaps_atomically(tmp_path: Path):
    src = write_kb(tmp_path)
    kb = _kb(tmp_path, src, DeterministicFakeEmbedding(size=32))
    first = kb.reindex()
    assert first.files == 3 and first.embedded_chunks == first.chunks
    (src / "auth.md").write_text((src / "auth.md").read_text() + "\n## Tokens\nBearer tokens expire after 1 hour.\n")
    old_gen = (tmp_path / "index" / "CURRENT").read_text()
    second = kb.reindex()
    assert second.changed_files == ["auth.md"]
    assert 0 < second.embedded_chunks < second.chunks and second.reused_chunks > 0
    assert (tmp_path / "index" / "CURRENT").read_text() == second.generation != old_gen
    # a new KnowledgeBase (a restart) reads the swapped generation
    again = _kb(tmp_path, src, DeterministicFakeEmbedding(size=32))
    hits = again.search(["bearer expire hour"], 3)
    assert hits[0]["location"] == "auth.md" and "Tokens" in hits[0]["title"]


def test_search_keeps_heading_path_and_file(tmp_path: Path):
    src = write_kb(tmp_path)
    kb = _kb(tmp_path, src)
    kb.reindex()
    hits = kb.search(["REDIS_URI DATABASE_URI container boot", "docker run"], 3)
    assert hits[0]["location"] == "deploy/container.md"
    assert hits[0]["title"] == "Standalone container > Requirements"
    assert len({h["location"] for h in hits}) == len(hits)  # per-file cap (chunks are small here)
    assert kb.search(['"; DROP TABLE chunks; -- OR NEAR('], 3) is not None  # user text cannot break FTS


def test_missing_source_and_no_index_are_clear(tmp_path: Path):
    kb = KnowledgeBase(tmp_path / "index", [tmp_path / "nope"])
    with pytest.raises(KnowledgeBaseError, match="no index yet"):
        kb.search(["x"], 3)
    with pytest.raises(KnowledgeBaseError, match="not found"):
        kb.reindex()
