"""The hosted chat model's HTTP client: httpx's interface (what langchain-mistralai calls) on
aiohttp's connection pool (httpx-aiohttp, the transport the OpenAI and Anthropic SDKs ship as
their ``DefaultAioHttpClient``).

Why not httpx's own pool (httpcore on anyio): under load it was the largest single
cost of the bot's event loop after LangGraph. httpcore checks *every* idle keep-alive
connection for a server-side close whenever a request is assigned or a response closed
(``AsyncHTTP11Connection.has_expired`` -> a ``poll()`` per idle connection), so each request
cost O(idle connections) system calls (a busy bot keeps dozens of idle connections to a model
API, so this grows with load), and its pure-Python HTTP/1.1 state
machine (h11) parses every response. aiohttp's pool learns of a server's close from the
socket itself (``connection_lost``), parses HTTP in C, and is the client the Slack adapter
already uses. Checked in tests/test_model_caller.py (connections the server closed while idle
are not reused; many calls at once).
"""

from __future__ import annotations

import contextlib
import urllib.request
from collections.abc import Iterator

import aiohttp
import httpx
import httpx_aiohttp.transport
from httpx_aiohttp import AiohttpTransport

#: aiohttp's exception -> the httpx exception raised instead: the first class of the
#: exception's MRO found here wins (the most specific). httpx-aiohttp 0.2's own map
#: (``AIOHTTP_EXC_MAP``) turns every ``ClientConnectionError`` (a refused connection, a
#: server that hung up, a reset) into ``httpx.ConnectTimeout``, so the logs named a timeout
#: that never happened.
HTTPX_ERROR_OF: dict[type[BaseException], type[httpx.TransportError]] = {
    aiohttp.ClientProxyConnectionError: httpx.ProxyError,
    aiohttp.ClientHttpProxyError: httpx.ProxyError,
    aiohttp.ConnectionTimeoutError: httpx.ConnectTimeout,
    aiohttp.SocketTimeoutError: httpx.ReadTimeout,
    aiohttp.ServerTimeoutError: httpx.TimeoutException,
    aiohttp.ServerDisconnectedError: httpx.RemoteProtocolError,
    aiohttp.ClientConnectorError: httpx.ConnectError,
    aiohttp.ClientOSError: httpx.ReadError,
    aiohttp.ClientConnectionError: httpx.NetworkError,
    aiohttp.ClientPayloadError: httpx.ReadError,
    # raised by aiohttp's HTTP parser for a response that is not HTTP ("Bad status line":
    # status 400 is aiohttp's, not the server's); the transport never calls raise_for_status
    aiohttp.ClientResponseError: httpx.RemoteProtocolError,
    aiohttp.NonHttpUrlClientError: httpx.UnsupportedProtocol,
    aiohttp.InvalidUrlClientError: httpx.UnsupportedProtocol,
}


@contextlib.contextmanager
def map_aiohttp_exceptions() -> Iterator[None]:
    """Raise an aiohttp error as its httpx counterpart (:data:`HTTPX_ERROR_OF`), the aiohttp
    error as its ``__cause__``; anything else passes unchanged. Replaces httpx-aiohttp's own
    (module global, looked up on every request and response read)."""
    try:
        yield
    except aiohttp.ClientError as exc:
        for cls in type(exc).__mro__:
            target = HTTPX_ERROR_OF.get(cls)
            if target is not None:
                raise target(str(exc) or type(exc).__name__) from exc
        raise


httpx_aiohttp.transport.map_aiohttp_exceptions = map_aiohttp_exceptions


def model_http_client(
    *, base_url: httpx.URL | str, headers: httpx.Headers | dict[str, str], timeout: float, connections: int
) -> httpx.AsyncClient:
    """An ``httpx.AsyncClient`` for a hosted model API whose requests go through aiohttp.

    Args:
        base_url: the API's base URL (e.g. ``https://api.mistral.ai/v1``).
        headers: sent with every request (the API key: never logged).
        timeout: seconds per request (connect, read, pool), a float.
        connections: keep-alive connections kept open to the API (no cap on connections
            in use: the caller's :class:`graphs.models.AdaptiveLimit` caps calls in flight).

    The aiohttp session is made on the first request (inside the running event loop), verifies
    TLS with httpx's default context, and is closed by ``await client.aclose()``. With any proxy
    variable in the environment (``urllib.request.getproxies()``: ``HTTP(S)_PROXY``,
    ``ALL_PROXY``...) the client is httpx's own, so proxies work exactly as httpx applies them.
    """
    if urllib.request.getproxies():
        # a proxy in the environment (HTTP(S)_PROXY, ALL_PROXY, NO_PROXY...): httpx's own
        # transport applies them exactly as before; aiohttp's trust_env ignores ALL_PROXY
        return httpx.AsyncClient(
            base_url=base_url,
            headers=headers,
            timeout=httpx.Timeout(timeout),
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=connections),
        )
    ssl_context = httpx.create_ssl_context()

    def session() -> aiohttp.ClientSession:
        connector = aiohttp.TCPConnector(limit=0, limit_per_host=0, ssl=ssl_context, keepalive_timeout=60.0)
        # trust_env=False: proxies are handled above; aiohttp's trust_env would read ~/.netrc and
        # the proxy variables in a worker thread on every request (two executor round trips for
        # every model call), and a netrc entry for the
        # API's host would clash with the Authorization header (aiohttp raises ValueError)
        return aiohttp.ClientSession(connector=connector, trust_env=False)

    transport = AiohttpTransport(limits=httpx.Limits(max_keepalive_connections=connections), client=session)
    return httpx.AsyncClient(base_url=base_url, headers=headers, timeout=httpx.Timeout(timeout), transport=transport)
