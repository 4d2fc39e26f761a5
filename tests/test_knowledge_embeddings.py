"""Hosted embeddings on dense text, against a local Mistral-shaped
server that refuses requests over its token budget with HTTP 400 "Too many tokens
overall": batches are sized conservatively, a refused batch is split in halves, and a
build that still fails never stops the bot from starting."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from bot.config import Secrets, load_settings
from bot.platforms.console import ConsoleResponder
from bot.runtime import open_runtime
from graphs.knowledge import KnowledgeBase
from tests.conftest import serve, write_config
from tests.fakes.chat_model import ScriptedChatModel

TOPICS = ["数据库", "缓存", "容器", "认证", "日志", "备份", "监控", "部署", "网络", "存储"]


def mistral_tokens(text: str) -> int:
    """The fake server's tokenizer: stricter than the client's character count (a CJK
    character is 2 tokens), other text 1 token per 4 characters."""
    cjk = len(re.findall(r"[\u3000-\u9fff]", text))
    return 2 * cjk + (len(text) - cjk + 3) // 4


class TokenBudgetMistral:
    """POST /v1/embeddings shaped like Mistral's; refuses a request whose inputs hold more
    than ``budget`` tokens with Mistral's 400 body."""

    def __init__(self, budget: int = 16384) -> None:
        self.budget = budget
        self.requests: list[tuple[int, int, int]] = []  # (inputs, tokens, status)

    async def embeddings(self, request: web.Request) -> web.Response:
        body = await request.json()
        tokens = sum(mistral_tokens(t) for t in body["input"])
        if tokens > self.budget:
            self.requests.append((len(body["input"]), tokens, 400))
            return web.json_response(
                {
                    "object": "error",
                    "message": "Too many tokens overall, split into more batches.",
                    "type": "invalid_request_message_error",
                    "param": None,
                    "code": "3210",
                },
                status=400,
            )
        self.requests.append((len(body["input"]), tokens, 200))
        data = [{"object": "embedding", "index": i, "embedding": _vector(t)} for i, t in enumerate(body["input"])]
        return web.json_response(
            {
                "id": "e1",
                "object": "list",
                "model": body["model"],
                "data": data,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )

    @property
    def refused(self) -> int:
        return sum(1 for r in self.requests if r[2] == 400)


def _vector(text: str) -> list[float]:
    """A deterministic 32-dim bag of the text's topic words."""
    v = [0.0] * 32
    for t in TOPICS:
        if t in text:
            v[int(hashlib.md5(t.encode()).hexdigest(), 16) % 32] += 1.0
    v[31] += 0.01
    return v


@pytest.fixture
async def mistral() -> AsyncIterator[tuple[TokenBudgetMistral, str]]:
    fake = TokenBudgetMistral()
    async with serve({"/v1/embeddings": fake.embeddings}) as base_url:
        yield fake, f"{base_url}/v1"


def chinese_pages(root: Path, n: int = 30) -> Path:
    """``n`` Chinese pages of ~1,800 characters each (no spaces: dense text)."""
    src = root / "zh"
    src.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        topic = TOPICS[i % len(TOPICS)]
        paras = [
            f"第{j}节：{topic}的配置说明。请先检查{topic}的状态，"
            "然后按照运维手册逐步操作，确认每一个步骤都已完成并记录结果。" * 10
            for j in range(4)
        ]
        (src / f"page{i:02d}.md").write_text(f"# {topic}指南 {i}\n\n" + "\n\n".join(paras) + "\n", encoding="utf-8")
    return src


def mistral_embeddings(base: str) -> Any:
    from langchain_mistralai import MistralAIEmbeddings

    return MistralAIEmbeddings(model="mistral-embed", api_key="test-key", endpoint=base, max_retries=None)


async def _reindex(kb: KnowledgeBase):
    return await asyncio.to_thread(kb.reindex)  # the fake server runs on this loop


async def test_thirty_chinese_pages_are_embedded_in_batches_the_api_accepts(tmp_path, mistral):
    fake, base = mistral
    kb = KnowledgeBase(
        tmp_path / "index",
        [chinese_pages(tmp_path)],
        embeddings=mistral_embeddings(base),
        embedder_id="mistral:mistral-embed",
    )
    stats = await _reindex(kb)
    assert stats.files == 30 and stats.embedded_chunks == stats.chunks > 30
    assert fake.refused == 0 and all(tokens <= fake.budget for _, tokens, _ in fake.requests)
    assert sum(n for n, _, _ in fake.requests) == stats.chunks  # every chunk embedded once
    assert kb.snapshot.vectors.shape == (stats.chunks, 32)


async def test_a_refused_batch_is_split_in_halves(tmp_path, mistral):
    fake, base = mistral
    kb = KnowledgeBase(
        tmp_path / "index",
        [chinese_pages(tmp_path)],
        embeddings=mistral_embeddings(base),
        embedder_id="mistral:mistral-embed",
        batch_tokens=1_000_000,
        batch_size=4096,
    )
    stats = await _reindex(kb)
    assert fake.refused >= 1  # the first, oversized request was refused...
    assert stats.embedded_chunks == stats.chunks  # ...and every chunk was embedded after splitting
    assert sum(n for n, _, status in fake.requests if status == 200) == stats.chunks
    hits = await asyncio.to_thread(kb.search, ["缓存的配置说明"], 3)  # the query is embedded too
    assert hits and "缓存" in hits[0]["text"]


def _config(tmp_path: Path, base: str, src: Path, chunk_size: int = 1000) -> Path:
    path = write_config(tmp_path, sources=[src])
    path.write_text(
        path.read_text()
        .replace('embeddings = "none"', f'embeddings = "mistral"\nchunk_size = {chunk_size}')
        .replace("[models]", f'[models]\nmistral_base_url = "{base}"')
    )
    return path


async def _status(rt) -> str:
    out = ConsoleResponder("s", show_status=False)
    await rt.service.admin("status", actor_id="ana", is_admin=False, out=out)
    return out.notices[0]


async def test_start_up_without_any_index_falls_back_to_keyword_only(tmp_path, mistral, caplog):
    fake, base = mistral
    fake.budget = 50  # refuses even a single chunk
    settings = load_settings(_config(tmp_path, base, chinese_pages(tmp_path, 3)))
    caplog.set_level(logging.INFO)
    async with open_runtime(settings, Secrets(mistral_api_key="test-key"), chat_model=ScriptedChatModel()) as rt:
        stats = rt.knowledge.stats()
        status = await _status(rt)
        hits = await asyncio.to_thread(rt.knowledge.search, ["缓存的配置"], 3)
    assert stats["files"] == 3 and stats["embedder"] == "none"  # keyword-only generation
    assert hits and hits[0]["location"] == "page01.md"
    assert "Last index build failed:" in status and "too large" in status
    failures = [r for r in caplog.records if "index build failed" in r.getMessage()]
    assert len(failures) == 1 and "\n" not in failures[0].getMessage()
    assert "keyword-only" in failures[0].getMessage()
    assert not [r for r in caplog.records if r.exc_info]  # one line, no tracebacks in the log


async def test_start_up_keeps_the_last_good_generation_when_a_rebuild_fails(tmp_path, mistral):
    fake, base = mistral
    src = chinese_pages(tmp_path, 4)
    settings = load_settings(_config(tmp_path, base, src))
    async with open_runtime(settings, Secrets(mistral_api_key="test-key"), chat_model=ScriptedChatModel()) as rt:
        good = rt.knowledge.stats()
    assert good["embedder"] == "mistral:mistral-embed"  # the id indexes were built under: kept on upgrade
    fake.budget = 50  # the API now refuses everything; the chunking changed, so a rebuild is due
    settings = load_settings(_config(tmp_path, base, src, chunk_size=500))
    async with open_runtime(settings, Secrets(mistral_api_key="test-key"), chat_model=ScriptedChatModel()) as rt:
        now = rt.knowledge.stats()
        status = await _status(rt)
        hits = await asyncio.to_thread(rt.knowledge.search, ["容器的状态"], 3)
    assert now["generation"] == good["generation"]  # still serving the last good one
    assert "Last index build failed:" in status
    assert hits and hits[0]["location"] == "page02.md"
