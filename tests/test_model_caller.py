"""ModelCaller: a local llama.cpp model is never called concurrently, even when a call
times out and is retried (the timed-out call keeps running in its thread)."""

from __future__ import annotations

import asyncio
import threading
import time

from langchain_core.messages import BaseMessage

from graphs.models import ModelCaller
from tests.fakes.chat_model import ScriptedChatModel


async def test_local_model_calls_never_overlap_even_after_timeouts():
    inside = threading.Lock()
    overlaps: list[int] = []
    calls: list[int] = []

    def slow(messages: list[BaseMessage]) -> str:
        if not inside.acquire(blocking=False):
            overlaps.append(1)
            return "overlap"
        try:
            calls.append(1)
            time.sleep(2.5 if len(calls) == 1 else 0.01)  # the first call outlives its timeout and the backoff
            return "fine"
        finally:
            inside.release()

    caller = ModelCaller(
        ScriptedChatModel(script={"generate": slow}), json_mode="llamacpp", max_concurrent=4, max_retries=3, timeout=0.1
    )
    results = await asyncio.gather(
        *[caller.text("TASK: generate\nx", f"q{i}") for i in range(3)], return_exceptions=True
    )
    assert overlaps == []
    assert "fine" in results  # later calls still get through after the timed-out one


async def test_hosted_model_connections_closed_by_the_server_while_idle_are_not_reused():
    """The hosted model's keep-alive pool (aiohttp's, graphs/http_pool.py): a connection the
    server closed while idle is dropped, not used for the next call, and many calls at once
    keep working on reused connections."""
    from types import SimpleNamespace

    from aiohttp import web
    from langchain_core.messages import HumanMessage

    from graphs.models import build_chat_model

    peers: list[object] = []

    async def chat(request: web.Request) -> web.Response:
        await request.read()
        peers.append(request.transport)
        await asyncio.sleep(0.02)
        return web.json_response(
            {
                "id": "x",
                "object": "chat.completion",
                "model": "m",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
        )

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    runner = web.AppRunner(app, keepalive_timeout=0.1)  # the server closes idle connections after 0.1 s
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    try:
        cfg = SimpleNamespace(
            provider="mistral",
            mistral_chat_model="m",
            mistral_base_url=f"http://127.0.0.1:{port}/v1",
            temperature=0.0,
            max_tokens=64,
            request_timeout_seconds=10,
        )
        model = build_chat_model(cfg, "key")
        for _ in range(3):
            replies = await asyncio.gather(*[model.ainvoke([HumanMessage("hi")]) for _ in range(12)])
            assert [r.content for r in replies] == ["ok"] * 12
            await asyncio.sleep(0.3)  # every idle connection is closed by the server meanwhile
        for _ in range(3):  # back to back: keep-alive connections are reused, not one per call
            replies = await asyncio.gather(*[model.ainvoke([HumanMessage("hi")]) for _ in range(12)])
            assert [r.content for r in replies] == ["ok"] * 12
        assert len({id(t) for t in peers[-36:]}) <= 24, "back-to-back calls opened a connection each"
    finally:
        await model.async_client.aclose()
        await runner.cleanup()


async def test_a_proxy_in_the_environment_is_used_by_the_hosted_model_client(monkeypatch):
    """ALL_PROXY (which aiohttp ignores) still sends model calls through the proxy: with a dead
    proxy the call to a live local API fails instead of going straight to it."""
    import httpx
    import pytest
    from aiohttp import web

    from graphs.http_pool import model_http_client

    app = web.Application()
    app.router.add_post("/v1/chat/completions", lambda request: web.json_response({"ok": True}))
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    base = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}/v1"
    for name in (
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
        "NO_PROXY",
        "no_proxy",
    ):
        monkeypatch.delenv(name, raising=False)
    try:
        client = model_http_client(base_url=base, headers={}, timeout=5, connections=4)
        assert (await client.post("/chat/completions", json={})).json() == {"ok": True}  # no proxy: direct
        await client.aclose()
        monkeypatch.setenv("ALL_PROXY", "http://127.0.0.1:9")
        client = model_http_client(base_url=base, headers={}, timeout=5, connections=4)
        with pytest.raises(httpx.HTTPError):
            await client.post("/chat/completions", json={})
        await client.aclose()
    finally:
        await runner.cleanup()


async def test_hosted_model_client_failures_are_named_for_what_happened():
    """Each way a model API connection fails reaches the caller (retries, logs) as the httpx
    error that says what happened, not httpx-aiohttp's ``ConnectTimeout`` for all of them."""
    import socket

    import httpx
    import pytest

    from bot.failures import describe_failure
    from graphs.http_pool import model_http_client

    async def serve(conn: asyncio.StreamReader, w: asyncio.StreamWriter, how: str) -> None:
        await conn.readuntil(b"\r\n\r\n")
        if how == "hang up":
            w.close()
        elif how == "cut body":
            w.write(b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"ok":')
            await w.drain()
            w.close()
        elif how == "not http":
            w.write(b"SSH-2.0-OpenSSH_9.2\r\n")
            await w.drain()
            w.close()
        else:  # silent
            await asyncio.sleep(5)
            w.close()

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        closed_port = s.getsockname()[1]
    cases = {
        "refused": (None, httpx.ConnectError),
        "hang up": ("hang up", httpx.RemoteProtocolError),
        "cut body": ("cut body", httpx.ReadError),
        "not http": ("not http", httpx.RemoteProtocolError),
        "silent": ("silent", httpx.ReadTimeout),
    }
    for name, (how, expected) in cases.items():
        server = None
        port = closed_port
        if how is not None:
            server = await asyncio.start_server(lambda r, w, how=how: serve(r, w, how), "127.0.0.1", 0)
            port = server.sockets[0].getsockname()[1]
        client = model_http_client(base_url=f"http://127.0.0.1:{port}/v1", headers={}, timeout=0.5, connections=4)
        try:
            with pytest.raises(httpx.TransportError) as caught:
                await client.post("/chat/completions", json={})
            assert type(caught.value) is expected, (name, type(caught.value), caught.value)
            line = describe_failure(caught.value)  # what the logs and the CLI say
            assert line.startswith("network: ") and ("Timeout" in line) == (name == "silent"), (name, line)
        finally:
            await client.aclose()
            if server is not None:
                server.close()


async def test_a_netrc_entry_for_the_model_host_does_not_replace_or_break_the_api_key(tmp_path, monkeypatch):
    """~/.netrc (or $NETRC) naming the model API's host: the call still goes out with the API
    key's Authorization header (aiohttp's trust_env would add the netrc login and refuse the
    request with ValueError)."""
    from aiohttp import web

    from graphs.http_pool import model_http_client

    seen: list[str] = []

    async def chat(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization", ""))
        return web.json_response({"ok": True})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    netrc = tmp_path / "netrc"
    netrc.write_text("machine 127.0.0.1 login someone password not-the-key\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    client = model_http_client(
        base_url=f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}/v1",
        headers={"Authorization": "Bearer the-key"},
        timeout=5,
        connections=4,
    )
    try:
        assert (await client.post("/chat/completions", json={})).json() == {"ok": True}
        assert seen == ["Bearer the-key"]
    finally:
        await client.aclose()
        await runner.cleanup()
