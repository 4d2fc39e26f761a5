"""HTTP for the web source: addresses, the site's bounds, and one GET under a hard deadline.

- :func:`normalise`: one spelling per address (no fragment, no tracking parameters, the
  query's parameters sorted), so ``page?utm_source=x`` and ``page`` are one page.
- :class:`Scope`: which addresses belong to the site (one host and port; ``http`` and
  ``https`` of it are the same site, and after a redirect to ``https`` every address is
  read over ``https``).
- :class:`Fetcher`: a GET with redirects followed by hand (on the site only, a callback
  asked on every hop, so robots.txt is honoured after a redirect too), a byte cap that
  also bounds decompression, and a deadline from connection to last byte.

The deadline is enforced below httpx: httpx's own timeouts are per socket operation, so a
server sending one byte a second never trips them. Each socket operation of a request
(connect, TLS handshake, every read and write) is given at most the time left until the
request's deadline, and none starts after it; the request then fails with a timeout and
httpcore closes its connection. No thread is started and none is left waiting. Name
resolution (``getaddrinfo``) is not bounded by it: the system resolver's own timeouts apply.
"""

from __future__ import annotations

import contextvars
import re
import time
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote_plus, urldefrag, urljoin, urlsplit, urlunsplit

import httpx

from graphs.link_targets import MAX_URL_CHARS

USER_AGENT = "Threadwise/0.1 (+https://github.com/threadwise; knowledge sync)"
MAX_REDIRECTS = 5

#: Query parameters that only say where a visitor came from (analytics and ad click ids):
#: dropped by :func:`normalise`, so a page linked with them is the page.
TRACKING_PARAMETERS = frozenset(
    {
        "fbclid",
        "gclid",
        "dclid",
        "gbraid",
        "wbraid",
        "gclsrc",
        "msclkid",
        "yclid",
        "twclid",
        "ttclid",
        "li_fat_id",
        "igshid",
        "mc_cid",
        "mc_eid",
        "_ga",
        "_gl",
        "_hsenc",
        "_hsmi",
        "mkt_tok",
        "ref",
        "ref_src",
        "ref_url",
        "referrer",
    }
)
#: Prefixes of tracking parameter families: Google Analytics (utm_), Matomo (mtm_, pk_),
#: HubSpot ads (hsa_).
TRACKING_PREFIXES = ("utm_", "mtm_", "pk_", "hsa_")

#: Session ids (Java servlets, PHP, ASP, ColdFusion and generic names): a fresh one in every
#: link makes every visit new addresses; dropped from the query and from path parameters
#: (``page;jsessionid=...``) by :func:`normalise`.
SESSION_PARAMETERS = frozenset(
    {"jsessionid", "phpsessid", "sid", "sessionid", "session_id", "aspsessionid", "cfid", "cftoken", "oscsid", "zenid"}
)
_PATH_SESSION = re.compile(r";(?:" + "|".join(sorted(SESSION_PARAMETERS)) + r")=[^/;]*", re.I)
_COOKIELESS_SESSION = re.compile(r"/\((?:[A-Z]\([^()/]*\))+\)(?=/)")
"""ASP.NET's cookieless session segment, ``/(S(abc123))/`` or ``/(A(x)S(y)F(z))/`` (its
SessionStateModule puts the id in the path when cookies are off)."""

_DEFAULT_PORTS = {"http": 80, "https": 443}


class PageError(Exception):
    """One address cannot be read (the message says why)."""


class Disallowed(PageError):
    """A redirect leads to an address that robots.txt forbids."""


def _query(query: str) -> str:
    """``query`` without tracking parameters, its parameters sorted (each kept as written)."""
    kept = []
    for pair in query.split("&"):
        name = unquote_plus(pair.split("=", 1)[0]).strip().lower()
        if (
            pair
            and name not in TRACKING_PARAMETERS
            and name not in SESSION_PARAMETERS
            and not name.startswith(TRACKING_PREFIXES)
        ):
            kept.append(pair)
    return "&".join(sorted(kept))


def normalise(url: str) -> str:
    """``url`` without its fragment, tracking parameters (:data:`TRACKING_PARAMETERS`,
    :data:`TRACKING_PREFIXES`) and session ids (:data:`SESSION_PARAMETERS`, in the query or
    as a path parameter), the other parameters sorted, with a lower-case scheme and host and a
    path ('/' if empty)."""
    url, _ = urldefrag(url.strip())
    p = urlsplit(url)
    path = _PATH_SESSION.sub("", p.path) if ";" in p.path else p.path
    if "/(" in path:
        path = _COOKIELESS_SESSION.sub("", path)
    return urlunsplit((p.scheme.lower(), p.netloc.lower(), path or "/", _query(p.query), ""))


def resolve(base: str, href: str) -> str | None:
    r"""``href`` read against the address ``base``, :func:`normalise`\ d; None when it is no
    address (``http://[::1``, a port that is not a number) or longer than
    :data:`~graphs.link_targets.MAX_URL_CHARS` (the limit the conversion keeps addresses to as
    well): a link of a page is data, and a malformed one costs that link only."""
    try:
        url = normalise(urljoin(base, href))
    except ValueError:
        return None
    return url if len(url) <= MAX_URL_CHARS else None


class Scope:
    """The site an address must be on: the start address's host and port.

    ``http`` and ``https`` on that host are one site when they are on the same port, or
    each on its scheme's default port (``http://h/`` and ``https://h/``). Addresses are
    keyed on the scheme the site is read over: the start's, until a redirect upgrades it
    to ``https`` (:meth:`upgrade`); from then on every address of the site is read and
    keyed as ``https``, so one page is never two documents. ``www.host`` and ``host`` are
    different sites.

    Args:
        url: the start address (http or https, normalised).
    """

    def __init__(self, url: str) -> None:
        p = urlsplit(url)
        self.scheme = p.scheme
        self.host = p.hostname or ""
        self.port = p.port or _DEFAULT_PORTS[p.scheme]
        self.default_port = p.port is None or self.port == _DEFAULT_PORTS[p.scheme]

    @property
    def origin(self) -> str:
        """``scheme://host[:port]`` the site is read over now."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        port = "" if self.default_port else f":{self.port}"
        return f"{self.scheme}://{host}{port}"

    def key(self, url: str) -> str | None:
        """``url`` (normalised) on the site's current origin, or ``None`` when it is off the site."""
        p = urlsplit(url)
        if p.scheme not in _DEFAULT_PORTS or p.hostname != self.host:
            return None
        try:
            port = p.port or _DEFAULT_PORTS[p.scheme]
        except ValueError:  # a port that is not a number
            return None
        if port != self.port and not (self.default_port and port == _DEFAULT_PORTS[p.scheme]):
            return None
        return self.origin + urlunsplit(("", "", p.path or "/", p.query, ""))

    def upgrade(self) -> None:
        """Read the site over ``https`` from now on (a redirect said so)."""
        self.scheme = "https"
        if self.default_port:
            self.port = 443


@dataclass(frozen=True)
class Response:
    """What :meth:`Fetcher.get` read.

    Attributes:
        url: the address answered after redirects (keyed by :meth:`Scope.key`).
        status: the HTTP status code.
        headers: lower-case names.
        body: the bytes (after ``Content-Encoding``), read only for a 200.
    """

    url: str
    status: int
    headers: dict[str, str]
    body: bytes


# ---- the deadline ------------------------------------------------------------------------
_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("threadwise_http_deadline", default=None)


def _left(timeout: float | None, late: type[Exception]) -> float | None:
    """``timeout`` cut to the time left before the current request's deadline.

    Raises:
        late: the deadline has passed.
    """
    deadline = _DEADLINE.get()
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise late("the request's deadline passed")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream:
    """A network stream (httpcore's ``NetworkStream`` interface) whose every operation ends by
    the request's deadline. Its timeouts are httpx's exceptions: httpx passes them through
    as they are, and httpcore closes the connection on any exception."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        data: bytes = self._inner.read(max_bytes, _left(timeout, httpx.ReadTimeout))
        return data

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _left(timeout, httpx.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None) -> Any:
        return _DeadlineStream(
            self._inner.start_tls(ssl_context, server_hostname, _left(timeout, httpx.ConnectTimeout))
        )

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _DeadlineBackend:
    """httpcore's network backend (its ``NetworkBackend`` interface) with :class:`_DeadlineStream` streams."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> _DeadlineStream:
        timeout = _left(timeout, httpx.ConnectTimeout)
        return _DeadlineStream(self._inner.connect_tcp(host, port, timeout, local_address, socket_options))

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> _DeadlineStream:
        timeout = _left(timeout, httpx.ConnectTimeout)
        return _DeadlineStream(self._inner.connect_unix_socket(path, timeout, socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def _arm(client: httpx.Client) -> None:
    """Put :class:`_DeadlineBackend` under every transport of ``client`` (the direct one and
    any proxy from the environment). httpx (0.28) takes no network backend, so the one of
    each transport's httpcore pool is replaced before its first connection.

    Raises:
        RuntimeError: httpx or httpcore no longer look as expected (a request could then
            outlive its deadline, so none is made).
    """
    transports = [client._transport, *client._mounts.values()]  # noqa: SLF001 - see the docstring
    for transport in transports:
        if transport is None:
            continue
        pool = getattr(transport, "_pool", None)
        backend = getattr(pool, "_network_backend", None)
        if backend is None:
            raise RuntimeError(f"cannot bound web requests by a deadline with this httpx ({httpx.__version__})")
        if not isinstance(backend, _DeadlineBackend):
            pool._network_backend = _DeadlineBackend(backend)  # type: ignore[union-attr]  # noqa: SLF001


# ---- bounded decompression -----------------------------------------------------------------
class _Inflater:
    """zlib decompression that stops just past ``limit`` output bytes (a gzip bomb costs ``limit``)."""

    def __init__(self, wbits: int, limit: int) -> None:
        self._z = zlib.decompressobj(wbits)
        self._limit = limit
        self.size = 0

    def feed(self, data: bytes) -> bytes:
        """The bytes ``data`` decompresses to, cut once more than ``limit`` came out in all
        (the caller sees the total pass ``limit``).

        Raises:
            PageError: not valid compressed data.
        """
        out = bytearray()
        try:
            while data and self.size <= self._limit:
                # max_length 0 would mean "no limit": always ask for at least one byte
                piece = self._z.decompress(data, self._limit - self.size + 1)
                out += piece
                self.size += len(piece)
                data = self._z.unconsumed_tail
        except zlib.error as exc:
            raise PageError(f"corrupt compressed data ({exc})") from exc
        return bytes(out)


def gunzip(data: bytes, limit: int, too_large: str) -> bytes:
    """``data`` (gzip) decompressed, at most ``limit`` bytes.

    Raises:
        PageError: ``too_large`` past ``limit`` bytes, or corrupt data.
    """
    out = _Inflater(31, limit).feed(data)
    if len(out) > limit:
        raise PageError(too_large)
    return out


def _body(resp: httpx.Response, limit: int, too_large: str, cut: bool) -> bytes:
    """The body of ``resp`` after its ``Content-Encoding`` (gzip or deflate), at most ``limit``
    bytes (``cut``: its first ``limit`` bytes when it is longer).

    Raises:
        PageError: ``too_large`` (unless ``cut``), corrupt or unknown compression.
    """
    encoding = resp.headers.get("content-encoding", "").strip().lower()
    inflater = None
    if encoding in ("gzip", "x-gzip"):
        inflater = _Inflater(31, limit)
    elif encoding == "deflate":
        inflater = _Inflater(15, limit)
    elif encoding not in ("", "identity"):
        raise PageError(f"unsupported Content-Encoding {encoding!r}")
    body = bytearray()
    for piece in resp.iter_raw():
        body += inflater.feed(piece) if inflater is not None else piece
        if len(body) > limit:
            if cut:
                return bytes(body[:limit])
            raise PageError(too_large)
    return bytes(body)


class Fetcher:
    """GETs on one site, each bounded in time and size.

    Args:
        scope: the site (:class:`Scope`); redirects off it are refused, an ``http`` to
            ``https`` redirect upgrades it.
        timeout_seconds: the longest one request may take, connection to last byte,
            redirects included (enforced per socket operation, see the module).
        transport: an httpx transport to use instead of the network (it is used as given,
            without the deadline).

    Raises:
        RuntimeError: (constructor) httpx does not allow the deadline (:func:`_arm`).
    """

    def __init__(self, scope: Scope, timeout_seconds: float, transport: httpx.BaseTransport | None = None) -> None:
        self.scope = scope
        self.timeout_seconds = timeout_seconds
        self.client = httpx.Client(
            transport=transport,
            follow_redirects=False,
            # only encodings _body decodes within its cap (httpx would also ask for br/zstd)
            headers={"User-Agent": USER_AGENT, "Accept-Encoding": "gzip, deflate"},
            timeout=httpx.Timeout(timeout_seconds),
        )
        if transport is None:
            _arm(self.client)

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> Fetcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def get(
        self,
        url: str,
        *,
        limit: int,
        too_large: str = "",
        cut: bool = False,
        headers: dict[str, str] | None = None,
        allowed: Callable[[str], bool] | None = None,
    ) -> Response:
        """GET ``url`` (an address on the site), following up to :data:`MAX_REDIRECTS` redirects.

        Args:
            url: the address (keyed by :meth:`Scope.key`).
            limit: most body bytes (after ``Content-Encoding``).
            too_large: the error's message when the body is over ``limit``.
            cut: keep the first ``limit`` bytes of a longer body instead of failing.
            headers: extra request headers (validators).
            allowed: asked for every redirect target; ``False`` stops there (robots.txt).

        Raises:
            Disallowed: a redirect target that ``allowed`` refuses.
            PageError: redirect loop, too many redirects, a redirect off the site, over
                ``limit``, over the deadline, or a network error.
        """
        seen = [url]
        token = _DEADLINE.set(time.monotonic() + self.timeout_seconds)
        try:
            for _ in range(MAX_REDIRECTS + 1):
                with self.client.stream("GET", url, headers=headers or {}) as resp:
                    if not resp.has_redirect_location:
                        body = _body(resp, limit, too_large, cut) if resp.status_code == 200 else b""
                        return Response(url, resp.status_code, {k.lower(): v for k, v in resp.headers.items()}, body)
                    target = resolve(url, resp.headers.get("location", ""))
                    if target is None:
                        raise PageError("redirects to an address that cannot be read")
                # the redirect's connection is back in the pool before ``allowed`` may read a robots.txt
                url = self._redirect(seen, target, allowed)
            raise PageError(f"more than {MAX_REDIRECTS} redirects")
        except httpx.TimeoutException as exc:
            raise PageError(f"took over {self.timeout_seconds:g} s (timeout_seconds)") from exc
        except httpx.ConnectError as exc:  # no such host, nothing listening, TLS refused
            raise PageError(f"cannot connect ({exc})") from exc
        except (httpx.HTTPError, httpx.InvalidURL) as exc:  # InvalidURL is no HTTPError
            raise PageError(f"{type(exc).__name__}: {exc}") from exc
        finally:
            _DEADLINE.reset(token)

    def _redirect(self, seen: list[str], target: str, allowed: Callable[[str], bool] | None) -> str:
        """The next address of a redirect chain ``seen`` to ``target``; upgrades the scope on
        ``http`` -> ``https``.

        Raises:
            PageError: off the site, or a loop. Disallowed: ``allowed`` refuses it.
        """
        if target.startswith("https:") and self.scope.scheme == "http" and self.scope.key(target):
            self.scope.upgrade()
        keyed = self.scope.key(target)
        if keyed is None:
            raise PageError(f"redirects off the site to {target}")
        if keyed in seen:
            raise PageError(f"redirect loop ({' -> '.join([*seen, keyed])})")
        if allowed is not None and not allowed(keyed):
            raise Disallowed(f"redirects to {keyed}, which robots.txt disallows")
        seen.append(keyed)
        return keyed
