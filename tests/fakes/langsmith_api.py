"""A local LangSmith ingestion endpoint (``LANGSMITH_ENDPOINT``): answers ``GET /info`` and
records the runs the LangSmith client posts to ``/runs/multipart`` (parts named
``post.<run id>`` with the run, ``post.<run id>.extra`` with its metadata; ``patch.*`` for
ends) and to ``/runs/batch`` (``{"post": [...], "patch": [...]}``)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from aiohttp import web

from tests.conftest import serve


class FakeLangSmith:
    """``runs``: run id -> the run as posted (``name``, ``tags``, ``parent_run_id``,
    ``session_name``...) with ``extra`` merged in (``extra["metadata"]``)."""

    def __init__(self) -> None:
        self.runs: dict[str, dict[str, Any]] = {}
        self.base_url = ""

    def _add(self, op: str, run_id: str, field: str, value: Any) -> None:
        run = self.runs.setdefault(run_id, {"id": run_id})
        if field:
            run[field] = value
        elif op == "post":
            run.update(value)

    async def multipart(self, request: web.Request) -> web.Response:
        reader = await request.multipart()
        async for part in reader:
            op, _, rest = (part.name or "").partition(".")
            run_id, _, field = rest.partition(".")
            data = await part.read()
            if op in ("post", "patch") and run_id:
                self._add(op, run_id, field, json.loads(bytes(data)) if data else None)
        return web.json_response({})

    async def batch(self, request: web.Request) -> web.Response:
        body = await request.json()
        for op in ("post", "patch"):
            for run in body.get(op) or []:
                self._add(op, str(run["id"]), "", run)
        return web.json_response({})

    def roots(self) -> list[dict[str, Any]]:
        """Runs without a parent: one per graph run (a trace)."""
        return [r for r in self.runs.values() if "name" in r and not r.get("parent_run_id")]

    def metadata(self, run: dict[str, Any]) -> dict[str, Any]:
        return dict((run.get("extra") or {}).get("metadata") or {})


@asynccontextmanager
async def langsmith_server() -> AsyncIterator[FakeLangSmith]:
    """Serve a :class:`FakeLangSmith` on 127.0.0.1; ``.base_url`` is the LANGSMITH_ENDPOINT."""
    fake = FakeLangSmith()

    async def info(_: web.Request) -> web.Response:
        return web.json_response({})

    async with serve({"/runs/multipart": fake.multipart, "/runs/batch": fake.batch}, get={"/info": info}) as base:
        fake.base_url = base
        yield fake
