"""Several ``python -m bot run`` replicas (Slack HTTP mode) on one PostgreSQL database,
driven with signed events: shared by tests/test_postgres_replicas.py and
bench/bench_replicas.py.

The model is a Mistral-shaped server (:class:`ReplicaModel`) whose answers name the
question they answer (``qtok-<thread>-<n>`` in the question comes back in the answer) and
which grades nothing relevant for a question containing ``stuck`` (so the graph asks the
experts), with an optional delay per call and the stalls of :class:`StallingMistral`.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp

from tests.fakes.bot_process import BotProcess
from tests.fakes.mistral_stall import StallingMistral
from tests.fakes.slack_api import USERS, FakeSlackAPI, is_help_request, write_config

ROOT = Path(__file__).resolve().parent.parent.parent
TOKEN = re.compile(r"qtok-\d+-\d+")


class ReplicaModel(StallingMistral):
    """:class:`StallingMistral` answering ``... (qtok-i-j)`` and grading ``stuck`` questions
    as unanswerable; ``delay`` seconds per call (a model's latency)."""

    def __init__(self, *, delay: float = 0.0, **kw: Any) -> None:
        super().__init__(**kw)
        self.script = {}
        self.delay = delay

    @staticmethod
    def default(task: str, last: str) -> str:
        question = last.split("\n", 1)[0]
        if task == "generate":
            token = TOKEN.search(question)
            return f"Use `make rollback VERSION=x` [1]. ({token.group(0) if token else '-'})"
        if task == "grade_documents" and "stuck" in question:
            ids = re.findall(r"^\[(\d+)\]", last, re.M)
            return json.dumps(
                {
                    "documents": [{"id": int(i), "relevant": False, "facts": ""} for i in ids],
                    "feedback": "nothing about it",
                }
            )
        return StallingMistral.default(task, last)

    async def chat(self, request: Any) -> Any:
        if self.delay:
            await asyncio.sleep(self.delay)
        return await super().chat(request)


def storage_section(
    *, lease_seconds: float = 2.0, interval: float = 0.5, backend: str = "postgres", connect_timeout: float = 5.0
) -> str:
    return (
        f'[storage]\nbackend = "{backend}"\nlease_seconds = {lease_seconds}\n'
        f"recovery_interval_seconds = {interval}\nconnect_timeout_seconds = {connect_timeout}\n"
    )


class Replica(BotProcess):
    """One ``python -m bot run`` in Slack HTTP mode, its own port and folder under
    ``root``, the shared database ``db_url`` (or SQLite when ``db_url`` is empty)."""

    def __init__(
        self,
        root: Path,
        fake: FakeSlackAPI,
        model: StallingMistral,
        db_url: str,
        *,
        name: str,
        storage: str = "",
        service: str = "",
    ) -> None:
        from tests.test_slack_run import free_port

        self.name = name
        self.port = free_port()
        folder = root / name
        folder.mkdir(parents=True, exist_ok=True)
        models = "[models]\n" + f'provider = "mistral"\nmistral_base_url = "{model.base_url}"\nmax_retries = 0\n'
        config = write_config(
            folder,
            fake,
            slack=f'http_port = {self.port}\nhttp_host = "127.0.0.1"',
            extra=models + (storage or storage_section(backend="postgres" if db_url else "sqlite")),
        )
        for line in filter(str.strip, service.splitlines()):  # [service] lines replace the defaults
            key = line.split("=", 1)[0].strip()
            text = re.sub(rf"(?m)^{re.escape(key)} = .*\n", "", config.read_text())
            config.write_text(text.replace("[service]\n", f"[service]\n{line}\n", 1))
        super().__init__(
            config,
            self.port,
            folder / "threadwise.log",
            {"MISTRAL_API_KEY": "test-key", **({"THREADWISE_DATABASE_URL": db_url} if db_url else {})},
        )

    async def deliver(self, session: aiohttp.ClientSession, request: tuple[str, dict]) -> int:
        body, headers = request
        async with session.post(self.url + "/slack/events", data=body.encode(), headers=headers) as resp:
            await resp.read()
            return resp.status


def add_users(fake: FakeSlackAPI) -> None:
    """The users and the expert group the Slack harness knows, for subprocess replicas."""
    fake.users.update(
        {
            uid: {
                "id": uid,
                "name": uid.lower(),
                "real_name": name,
                "profile": {"display_name": name, "real_name": name},
            }
            for uid, name in USERS.items()
        }
    )
    fake.usergroups.setdefault("SEXPERTS", ["UGROUPEXPERT"])


def replies_in(fake: FakeSlackAPI, ts: str) -> list[dict]:
    """Posts in thread ``ts`` that are not help requests (answers and apologies), in order."""
    return [p for p in fake.posts() if p.get("thread_ts") == ts and not is_help_request(p)]


def help_posts(fake: FakeSlackAPI, ts: str) -> list[dict]:
    return [p for p in fake.posts() if p.get("thread_ts") == ts and is_help_request(p)]


@asynccontextmanager
async def model_server(**kw: Any) -> AsyncIterator[ReplicaModel]:
    """Serve a :class:`ReplicaModel` (``delay=``, ``stall_on=``) on 127.0.0.1."""
    from tests.conftest import serve

    model = ReplicaModel(**kw)
    async with serve({"/v1/chat/completions": model.chat}) as base:
        model.base_url = f"{base}/v1"
        try:
            yield model
        finally:
            model.release()
