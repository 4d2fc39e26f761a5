"""``threadwise run``: serve Slack and/or Discord (those whose tokens are set), else the console chat.

The chat platforms are listed once, in :data:`PLATFORMS`; each is imported only when its
tokens are set, so a missing optional library (or a slow import) costs nothing elsewhere.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import logging
import signal
import socket
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bot.cli.output import out
from bot.cli.session import with_runtime
from bot.cli.signals import graceful_stop, interrupted
from bot.config import Secrets, Settings
from bot.platforms.console import run_console

if TYPE_CHECKING:
    from bot.runtime import Runtime

log = logging.getLogger("threadwise")


@dataclass(frozen=True)
class Platform:
    """A chat platform ``run`` can serve: ``module`` has ``enabled(settings, secrets) -> bool``
    under the name ``enabled`` and ``serve(runtime, stop=Event)`` under the name ``serve``."""

    name: str
    module: str
    enabled: str
    serve: str


PLATFORMS = (
    Platform("slack", "bot.platforms.slack.run", "slack_enabled", "run_slack"),
    Platform("discord", "bot.platforms.discord.app", "discord_enabled", "run_discord"),
)


def enabled_platforms(
    settings: Settings, secrets: Secrets, *, warn: bool = True
) -> list[tuple[str, Callable[..., Coroutine[Any, Any, None]]]]:
    """The platforms whose tokens are set, as ``(name, serve)``; ``warn``: log one warning
    for a platform whose library is not installed."""
    found = []
    for platform in PLATFORMS:
        try:
            module = importlib.import_module(platform.module)
        except ImportError:
            if warn:
                log.warning("%s support is not installed", platform.name.capitalize())
            continue
        if getattr(module, platform.enabled)(settings, secrets):
            found.append((platform.name, getattr(module, platform.serve)))
    return found


def slack_partial_tokens(secrets: Secrets) -> bool:
    """Some SLACK_* secret is set (whether or not they are enough for the configured mode)."""
    return bool(secrets.slack_bot_token or secrets.slack_app_token or secrets.slack_signing_secret)


def add_parsers(
    sub: argparse._SubParsersAction, common: argparse.ArgumentParser, source: argparse.ArgumentParser
) -> None:
    """Add ``run`` to the command parser ``sub``."""
    sub.add_parser(
        "run", parents=[common], help="run the bot: Slack/Discord when their tokens are set, else the console"
    ).set_defaults(handler=cmd_run)


async def cmd_run(args: argparse.Namespace, settings: Settings) -> int:
    """Serve until SIGTERM/SIGINT (answers in flight are finished first); exit code 1 when a
    platform stopped with an error, 2 for a configuration error found at start."""
    # aiohttp (the monitoring server) loads only here: the other commands start faster without it
    from bot.metrics import MetricsUnavailable, PrometheusMetrics
    from bot.monitoring import MonitoringPortError, bind_monitoring

    secrets = Secrets.from_env()
    try:
        metrics = PrometheusMetrics() if settings.monitoring.metrics_port else None
    except MetricsUnavailable as exc:
        out.err.print(f"Configuration error: {exc}", style="red", markup=False)
        return 2

    m = settings.monitoring
    sockets: dict[int, socket.socket] = {}
    if m.health_port or m.metrics_port:
        # bound before the start-up work: a port in use stops at once
        if enabled_platforms(settings, secrets, warn=False):
            try:
                sockets = bind_monitoring(m.host, m.health_port, m.metrics_port)
            except MonitoringPortError as exc:
                out.err.print(f"Configuration error: {exc}", style="red", markup=False)
                return 2
        else:
            log.warning(
                "monitoring is off in console mode: [monitoring] health_port/metrics_port serve only "
                "with Slack or Discord"
            )

    async def body(rt: Runtime) -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        log.info("event loop: %s", type(loop).__module__.split(".")[0])  # uvloop or asyncio ([service] event_loop)
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(sig, stop.set)  # graceful: answers in flight are finished
            except (NotImplementedError, RuntimeError):
                pass
        starts = enabled_platforms(settings, secrets)
        if slack_partial_tokens(secrets) and not any(name == "slack" for name, _ in starts):
            needed = (
                "SLACK_BOT_TOKEN and SLACK_APP_TOKEN"
                if settings.slack.mode == "socket"
                else "SLACK_BOT_TOKEN and SLACK_SIGNING_SECRET"
            )
            out.err.print(
                f'Slack tokens are set but incomplete: [slack] mode = "{settings.slack.mode}" needs '
                f"{needed}. Set them (or change the mode in config.toml), or unset SLACK_* to use the "
                "console.",
                markup=False,
            )
            return 2
        if starts:
            # the runs the last process left unanswered take their threads' places before
            # the platforms deliver anything new (redeliveries come at once after a restart)
            await rt.service.recover()
        tasks = [asyncio.create_task(serve(rt, stop=stop), name=name) for name, serve in starts]
        from bot.runtime import freeze_startup_objects  # loaded by with_runtime already

        freeze_startup_objects()  # long-lived process: start-up objects out of the collector's walks
        if not tasks:
            for sig in (signal.SIGTERM, signal.SIGINT):
                try:
                    loop.remove_signal_handler(sig)
                except (NotImplementedError, RuntimeError):
                    pass
            # Ctrl-C at the prompt: one line and 130, as in `console` (removing the loop's handler
            # left SIGINT at SIG_DFL: a silent kill)
            signal.signal(signal.SIGINT, interrupted)
            from graphs.models import model_name

            logged = (
                "Every event is logged." if args.verbose else "From here on only warnings are logged (-v: every event)."
            )
            from bot.runtime import resolve_composer

            if resolve_composer(settings.graph.composer, rt.chat_model) == "extractive":
                # the extractive graph routes by embedding similarity and quotes: naming the chat
                # model here would say it does work it never does
                writer = ". Answers quote the documents; no chat model is called."
            else:
                writer = f" with the chat model {model_name(rt.chat_model)}."
            out.err.print(
                f"No SLACK_* or DISCORD_TOKEN set: starting the console chat{writer} {logged}",
                markup=False,
            )
            if not args.verbose:  # the chat and the event log would share one terminal
                logging.getLogger().setLevel(max(logging.WARNING, logging.getLogger().level))
            stop_console = asyncio.Event()
            async with graceful_stop(settings.service.stop_grace_seconds, on_stop=stop_console.set):
                await run_console(rt, stop=stop_console)
            return 0
        for t in tasks:
            rt.health.expect(t.get_name())
        monitoring = _start_monitoring(settings, rt, metrics, stop, sockets)
        done, _ = await asyncio.wait(tasks + monitoring, return_when=asyncio.FIRST_EXCEPTION)
        # a recovered run (bot.service.recovery) is finished too; after a stop it already had the
        # adapters' grace ([service] stop_grace_seconds, in parallel), so the whole stop stays within it + 2 s
        await rt.service.drain(2 if stop.is_set() else 10)
        for t in done:
            if t.exception():
                log.error("%s stopped: %s", t.get_name(), t.exception())
                return 1
        return 0

    try:
        return await with_runtime(settings, None, body, graph_workers=True, observer=metrics, check_model=True)
    finally:
        for sock in sockets.values():
            sock.close()


def _start_monitoring(
    settings: Settings, rt: Runtime, metrics: Any, stop: asyncio.Event, sockets: dict[int, socket.socket] | None = None
) -> list[asyncio.Task]:
    """Start ``[monitoring]``'s health and metrics endpoints until ``stop`` (none when both
    ports are 0); ``metrics``: the service's observer (a :class:`bot.metrics.PrometheusMetrics`
    given to the runtime when it opened), or None. Returns the serving task in a list."""
    from bot.monitoring import serve_monitoring

    m = settings.monitoring
    if not (m.health_port or m.metrics_port):
        return []
    return [
        asyncio.create_task(
            serve_monitoring(
                m.host, m.health_port, m.metrics_port, health=rt.health, metrics=metrics, stop=stop, sockets=sockets
            ),
            name="monitoring",
        )
    ]
