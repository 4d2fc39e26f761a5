"""The hosted chat model's HTTP connection pool: cheap checks of idle keep-alive connections.

httpcore checks every idle connection of a pool for a server-side close whenever a
request is assigned or a response closed (``AsyncHTTP11Connection.has_expired`` ->
``get_extra_info("is_readable")``). With the anyio backend each check rebuilds the
socket's attribute table, which calls ``getpeername()`` (anyio's
``_SocketProvider.extra_attributes``), so every request cost O(idle connections)
system calls: with ~30 keep-alive connections to the model API (one per call in flight,
issue 11) that was ~6% of the bot's CPU under load (py-spy, ``bench/README.md``), and
0.8-1.4 ms of CPU per request in a micro-benchmark with 30 idle connections.

:func:`cheap_idle_checks` gives an ``httpx.AsyncClient``'s default transport a network
backend whose streams keep their raw socket and answer ``is_readable`` with httpcore's
own ``is_socket_readable`` on it (the same poll, without the attribute table). Everything
else goes to httpcore's anyio backend unchanged. Checked in tests/test_model_caller.py.
"""

from __future__ import annotations

import logging
from typing import Any

import httpcore
import httpx
from httpcore._utils import is_socket_readable

log = logging.getLogger(__name__)


class _Stream(httpcore.AsyncNetworkStream):
    """An anyio stream of httpcore that answers ``is_readable`` from its kept raw socket."""

    def __init__(self, inner: httpcore.AsyncNetworkStream) -> None:
        self._inner = inner
        self._socket = inner.get_extra_info("socket")

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return await self._inner.read(max_bytes, timeout)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        await self._inner.write(buffer, timeout)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def start_tls(self, *args: Any, **kwargs: Any) -> httpcore.AsyncNetworkStream:
        return _Stream(await self._inner.start_tls(*args, **kwargs))

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable" and self._socket is not None:
            return is_socket_readable(self._socket)
        return self._inner.get_extra_info(info)


class _Backend(httpcore.AsyncNetworkBackend):
    """httpcore's anyio backend, its streams wrapped in :class:`_Stream`."""

    def __init__(self) -> None:
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(self, *args: Any, **kwargs: Any) -> httpcore.AsyncNetworkStream:
        return _Stream(await self._inner.connect_tcp(*args, **kwargs))

    async def connect_unix_socket(self, *args: Any, **kwargs: Any) -> httpcore.AsyncNetworkStream:
        return _Stream(await self._inner.connect_unix_socket(*args, **kwargs))

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def cheap_idle_checks(client: httpx.AsyncClient) -> bool:
    """Give ``client``'s default transport the backend of this module (proxy transports
    are left alone). Returns False, changing nothing, when httpx/httpcore are not laid out
    as expected (another version): the client then works as before, only slower."""
    pool = getattr(getattr(client, "_transport", None), "_pool", None)
    if type(pool) is not httpcore.AsyncConnectionPool or not hasattr(pool, "_network_backend"):
        log.debug("httpx pool not recognised: idle connection checks unchanged")
        return False
    pool._network_backend = _Backend()
    return True
