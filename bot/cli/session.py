"""The runtime a command works with, opened for its duration (a progress bar while the index builds)."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from bot.cli.output import ProgressBar, out
from bot.config import Secrets, Settings

if TYPE_CHECKING:
    from bot.metrics import TurnObserver
    from bot.runtime import Runtime


async def with_runtime(
    settings: Settings,
    sources: list[str] | None,
    body: Callable[[Runtime], Awaitable[int]],
    *,
    build_index: bool = True,
    graph_workers: bool = False,
    observer: TurnObserver | None = None,
    check_model: bool = False,
) -> int:
    """Open the runtime (:func:`bot.runtime.open_runtime`), run ``body`` with it, close it.

    Args:
        settings: the loaded settings.
        sources: ``--source`` folders instead of config.toml's (None: config.toml's).
        body: the command's work; its result is the exit code.
        build_index: build the knowledge index first when it is missing or stale.
        graph_workers: start ``[service] graph_workers`` worker processes and the sources'
            sync schedule (``run`` only: a long-lived server).
        observer: the service's metrics (``run`` with ``[monitoring] metrics_port``); None: none kept.
        check_model: call a hosted chat model once before the index build (``run``, ``ask``,
            ``console``): a wrong key, base URL or model name stops at once, exit code 2.

    Returns:
        ``body``'s exit code.
    """
    # bot.runtime loads langgraph and the model libraries: imported when a command needs them,
    # so that `--help`, `config` and argument errors answer at once
    from bot.runtime import open_runtime

    say_own_index(settings, sources)

    # JSON logs: stderr holds only JSON lines, so no progress bar (the index build is logged)
    with ProgressBar() if settings.logging.format == "text" else contextlib.nullcontext() as bar:
        cm = open_runtime(
            settings,
            Secrets.from_env(),
            sources=sources,
            build_index=build_index,
            progress=bar,
            graph_workers=graph_workers,
            sync_schedule=graph_workers,
            observer=observer,
            check_model=check_model,
        )
        runtime = await cm.__aenter__()
    try:
        return await body(runtime)
    finally:
        await cm.__aexit__(None, None, None)


def say_own_index(settings: Settings, sources: list[str] | None) -> None:
    """One line on stderr per ``--source`` folder inside a folder config.toml indexes
    (:func:`bot.knowledge.enclosing_sources`): it is searched alone, from an index of its own."""
    from bot.knowledge import configured_names, enclosing_sources

    if not sources or configured_names(settings, sources):
        return  # config.toml's index answers for those folders
    for folder, configured in enclosing_sources(settings, sources or []):
        out.err.print(
            f"{folder} is inside {configured}, which config.toml indexes: it is searched alone, from an "
            f"index of its own kept apart from config.toml's (without --source, {configured} is searched whole)",
            markup=False,
            highlight=False,
        )
