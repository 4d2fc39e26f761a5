"""The lean path for hosted models: `threadwise run` with a hosted model (MISTRAL_API_KEY,
provider and embeddings "auto") starts, indexes with the hosted embeddings and answers a
Slack question without importing PyTorch, llama.cpp or the other offline libraries, in the
chat process and in its graph workers, even where those libraries are installed (as in
the development install). Imports are read from Python's own import log
(PYTHONPROFILEIMPORTTIME, inherited by the graph workers)."""

from __future__ import annotations

import re

import aiohttp

from tests.conftest import serve
from tests.fakes.bot_process import BotProcess
from tests.fakes.mistral_api import HeldEmbeddings
from tests.fakes.replicas import ReplicaModel, add_users, replies_in
from tests.fakes.slack_api import BOT_USER_ID, SlackEvents, all_text, write_config
from tests.test_slack_run import free_port

#: modules only the offline model and local embeddings need
OFFLINE_MODULES = ("torch", "llama_cpp", "sentence_transformers", "transformers", "onnxruntime", "langchain_community")


def imported(log: str) -> set[str]:
    """Modules named in a ``-X importtime`` log (``a.b.c`` also counts as ``a``)."""
    names = {m.group(1) for m in re.finditer(r"^import time:.*\|\s+(\S+)\s*$", log, re.M)}
    return names | {n.split(".")[0] for n in names}


async def test_hosted_start_imports_no_offline_library(tmp_path, fake):
    add_users(fake)
    port = free_port()
    model = ReplicaModel()
    embeddings = HeldEmbeddings(hold=lambda texts: False)  # answered at once
    async with serve({"/v1/chat/completions": model.chat, "/v1/embeddings": embeddings.embeddings}) as base:
        config = write_config(
            tmp_path,
            fake,
            slack=f'http_port = {port}\nhttp_host = "127.0.0.1"',
            extra=f'[models]\nmistral_base_url = "{base}/v1"\nmax_retries = 0\n',
        )
        env = {
            "MISTRAL_API_KEY": "test-key",
            "PYTHONPROFILEIMPORTTIME": "1",
            # as a hosted deployment leaves them: "auto" picks Mistral for both with a key
            "THREADWISE_MODELS__PROVIDER": "auto",
            "THREADWISE_KNOWLEDGE__EMBEDDINGS": "auto",
            "THREADWISE_SERVICE__GRAPH_WORKERS": "1",
        }
        bot = BotProcess(config, port, tmp_path / "threadwise.log", env)
        try:
            async with aiohttp.ClientSession() as session:
                await bot.wait_ready(session)
                events = SlackEvents()
                ts = fake.next_ts()
                ev = events.message(
                    user="UASKER",
                    channel="C0GENERAL",
                    ts=ts,
                    kind="app_mention",
                    text=f"<@{BOT_USER_ID}> qtok-7-1 what does the container need?",
                )
                body, headers = events.event(ev)
                async with session.post(bot.url + "/slack/events", data=body.encode(), headers=headers) as resp:
                    assert resp.status == 200
                await fake.wait_for(lambda: replies_in(fake, ts), timeout=60)
                assert "qtok-7-1" in all_text(replies_in(fake, ts)[0])
        finally:
            log = await bot.stop()
    modules = imported(log)
    assert {"bot", "langchain_mistralai", "slack_bolt"} <= modules, log[-2000:]
    # the graph worker (`python -m bot.graph_worker`) logged its imports too: the graph twice
    assert len(re.findall(r"\|\s+graphs\.adaptive_rag\s*$", log, re.M)) == 2, log[-2000:]
    assert not modules & set(OFFLINE_MODULES), sorted(modules & set(OFFLINE_MODULES))
