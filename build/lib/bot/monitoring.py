"""Health and metrics endpoints of ``threadwise run`` (``[monitoring]`` in config.toml).

- ``GET /healthz`` on ``health_port``: 200 when every platform the process started
  (Slack in either mode, Discord) is connected, else 503 (also while starting, and when
  none was started). The body is JSON: ``{"status": "ok" | "unavailable", "platforms":
  {"slack": {"connected": true}, "discord": {"connected": false}}}``, for a Kubernetes
  readiness probe or a load balancer.
- ``GET /metrics`` on ``metrics_port``: :class:`bot.metrics.PrometheusMetrics` in the
  Prometheus text format.

Both are served by one small aiohttp server per port (the same port may carry both).
Each platform adapter says how to tell whether it is connected
(:meth:`PlatformHealth.watch`); Slack HTTP mode also keeps its own ``/healthz`` on the
Events API port (:func:`bot.platforms.slack.http_server.serve_http`).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import socket
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

log = logging.getLogger(__name__)

Check = Callable[[], "bool | Awaitable[bool]"]


class PlatformHealth:
    """Whether each started platform is connected.

    :meth:`expect` a platform when it starts (not connected until its adapter says how
    to check), then the adapter calls :meth:`watch` with a check. A check that raises
    counts as not connected.
    """

    def __init__(self) -> None:
        self._checks: dict[str, Check] = {}

    def expect(self, platform: str) -> None:
        """``platform`` was started: reported as not connected until :meth:`watch`."""
        self._checks.setdefault(platform, lambda: False)

    def watch(self, platform: str, check: Check) -> None:
        """Use ``check()`` (sync or async, returning True when connected) for ``platform``."""
        self._checks[platform] = check

    async def report(self) -> dict[str, bool]:
        """``{platform: connected}`` for every expected or watched platform."""
        out: dict[str, bool] = {}
        for platform, check in list(self._checks.items()):
            try:
                value = check()
                if inspect.isawaitable(value):
                    value = await value
                out[platform] = bool(value)
            except Exception as exc:  # noqa: BLE001 - a broken check is "not connected", logged
                log.debug("health check of %s failed: %s", platform, exc)
                out[platform] = False
        return out


class MonitoringPortError(RuntimeError):
    """A ``[monitoring]`` port cannot be listened on; the message names the key and the port."""


def bind_monitoring(host: str, health_port: int, metrics_port: int) -> dict[int, socket.socket]:
    """Listen on the ``[monitoring]`` ports now, before the start-up work (index build,
    platform connections), so a port in use stops the program at once.

    Returns:
        ``{port: listening socket}`` for :func:`serve_monitoring` (empty when both are 0).

    Raises:
        MonitoringPortError: a port is in use or not allowed; the message names the key
            (``[monitoring] health_port`` / ``metrics_port``), the host and the port.
    """
    out: dict[int, socket.socket] = {}
    for key, port in (("health_port", health_port), ("metrics_port", metrics_port)):
        if not port or port in out:
            continue
        try:
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            out[port] = socket.create_server((host, port), family=family, backlog=128)
        except OSError as exc:
            for sock in out.values():
                sock.close()
            raise MonitoringPortError(
                f"[monitoring] {key} = {port}: cannot listen on {host}:{port}: {exc.strerror or exc}"
            ) from exc
    return out


async def serve_monitoring(
    host: str,
    health_port: int,
    metrics_port: int,
    *,
    health: PlatformHealth,
    metrics: Any | None,
    stop: asyncio.Event,
    started: asyncio.Event | None = None,
    sockets: dict[int, socket.socket] | None = None,
) -> None:
    """Serve ``/healthz`` on ``health_port`` and ``/metrics`` on ``metrics_port`` (0: that
    endpoint off; the same port: one server) on ``host`` until ``stop`` is set.

    Args:
        metrics: a :class:`bot.metrics.PrometheusMetrics` (needed when ``metrics_port`` is set).
        started: set once the ports listen (tests and callers that must not race them).
        sockets: ports already bound by :func:`bind_monitoring` (the others are bound here).

    Raises:
        OSError: a port cannot be bound (in use, no permission).
    """
    routes: dict[int, list[tuple[str, Callable[[web.Request], Awaitable[web.Response]]]]] = {}

    async def healthz(_: web.Request) -> web.Response:
        report = await health.report()
        ok = bool(report) and all(report.values())
        body = {
            "status": "ok" if ok else "unavailable",
            "platforms": {name: {"connected": up} for name, up in report.items()},
        }
        return web.Response(text=json.dumps(body), status=200 if ok else 503, content_type="application/json")

    async def metrics_page(_: web.Request) -> web.Response:
        assert metrics is not None  # only routed when given
        body, content_type = metrics.exposition()
        return web.Response(body=body, headers={"Content-Type": content_type})

    if health_port:
        routes.setdefault(health_port, []).append(("/healthz", healthz))
    if metrics_port:
        if metrics is None:
            raise ValueError("metrics_port is set but no metrics were given")
        routes.setdefault(metrics_port, []).append(("/metrics", metrics_page))
    runners: list[web.AppRunner] = []
    try:
        for port, pages in routes.items():
            app = web.Application()
            for path, page in pages:
                app.router.add_get(path, page)
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            runners.append(runner)
            site = (
                web.SockSite(runner, sockets[port]) if sockets and port in sockets else web.TCPSite(runner, host, port)
            )
            await site.start()
            log.info("monitoring: %s on http://%s:%d", ", ".join(p for p, _ in pages), host, port)
        if started is not None:
            started.set()
        await stop.wait()
    finally:
        for runner in runners:
            await runner.cleanup()
