"""The Mistral fake (:mod:`tests.fakes.mistral_api`) for tests that run ``python -m bot`` as a
subprocess and need the model to hang: ``stall_on`` names tasks whose requests wait until
:meth:`StallingMistral.release` (to kill or signal the bot mid-run). It also records bodies
that are not valid UTF-8 JSON (a correct client never sends a lone surrogate) and can
answer every request with one HTTP status (401: a refused key).

The answers suit the Slack/Discord test knowledge base (``deploy.md``): the route query is
the question itself and the answer cites ``make rollback``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from aiohttp import web

from tests.fakes.mistral_api import FakeMistral, mistral_config, task_of

ANSWER = "Use `make rollback VERSION=x` to go back to an earlier release [1]."


class StallingMistral(FakeMistral):
    """:class:`FakeMistral` plus ``stall_on`` / :meth:`release`, ``stalled`` (an Event set
    when a request stalls), ``stalling`` (requests held now), ``bad_requests`` and ``status``."""

    def __init__(self, *, stall_on: set[str] | None = None, answer: str = ANSWER) -> None:
        super().__init__(script={"generate": [answer]})
        self.stall_on = set(stall_on or ())
        self.stalled = asyncio.Event()
        self.stalling = 0
        self._release = asyncio.Event()
        self.bad_requests: list[bytes] = []
        self.status = 200
        self.base_url = ""

    def release(self) -> None:
        self.stall_on.clear()
        self._release.set()

    async def chat(self, request: web.Request) -> web.Response:
        raw = await request.read()
        try:
            body = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            self.bad_requests.append(raw)
            return web.json_response({"object": "error", "message": "invalid JSON body"}, status=400)
        if self.status != 200:
            self.requests.append(body)
            return web.json_response({"message": "Unauthorized" if self.status == 401 else "error"}, status=self.status)
        if task_of(body) in self.stall_on:
            self.stalled.set()
            self.stalling += 1
            try:
                await self._release.wait()
            finally:
                self.stalling -= 1
        return await super().chat(request)


@asynccontextmanager
async def mistral_server(**kw: Any) -> AsyncIterator[StallingMistral]:
    """Serve a :class:`StallingMistral` on 127.0.0.1; ``.base_url`` ends in ``/v1``."""
    from tests.conftest import serve

    fake = StallingMistral(**kw)
    async with serve({"/v1/chat/completions": fake.chat}) as base:
        fake.base_url = f"{base}/v1"
        try:
            yield fake
        finally:
            fake.release()


def models_section(fake: StallingMistral) -> str:
    """A ``[models]`` section pointing the bot at ``fake`` (set MISTRAL_API_KEY too)."""
    return "[models]\n" + mistral_config(fake.base_url, "max_retries = 0\n")
