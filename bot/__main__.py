"""The ``threadwise`` command line: run, ask, console, reindex, graph, eval, threads, config.

Every command takes ``--config PATH``; ``ask``, ``reindex`` and ``eval`` take
``--source DIR`` (repeatable) to use other knowledge sources than config.toml's.
Exit codes: 0 ok, 2 bad config or arguments, 1 other failure.
"""

from __future__ import annotations

import os
import signal
import sys


def _interrupted_at_start(signum: int, frame: object) -> None:
    """SIGINT while the program is still importing and loading its config (up to ~1 s on a
    busy machine): one line, exit code 130, no KeyboardInterrupt traceback. Only ``os`` is
    used here: nothing else may be imported yet."""
    os.write(2, b"interrupted (Ctrl-C)\n")
    os._exit(130)


# Installed before the other imports on purpose (they are what a Ctrl-C at start interrupts),
# only when this is the program (`python -m bot`, `python -m threadwise`, the `threadwise`
# script), not when a test or another program imports the module.
if __name__ == "__main__" or os.path.basename(sys.argv[0]) in ("threadwise", "__main__.py"):
    signal.signal(signal.SIGINT, _interrupted_at_start)

import argparse  # noqa: E402
import asyncio  # noqa: E402
import contextlib  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import shlex  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402
import warnings  # noqa: E402
from collections.abc import Awaitable, Callable, Coroutine  # noqa: E402
from pathlib import Path  # noqa: E402
from types import TracebackType  # noqa: E402
from typing import TYPE_CHECKING, Any  # noqa: E402

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn  # noqa: E402
from rich.table import Table  # noqa: E402

from bot.config import ConfigError, Secrets, Settings, load_settings  # noqa: E402
from bot.event_loop import loop_factory, run_async  # noqa: E402
from bot.terminal import make_console  # noqa: E402

if TYPE_CHECKING:
    from bot.runtime import Runtime

console = make_console()
err = make_console(stderr=True)
log = logging.getLogger("threadwise")


def _setup_logging(level: str, fmt: str = "text") -> None:
    from bot.logs import setup_logging

    setup_logging(level, "json" if fmt == "json" else "text")
    if fmt == "json":  # every stderr line is a JSON object: Python's warnings become log records too
        logging.captureWarnings(True)
    if level != "DEBUG":
        warnings.filterwarnings("ignore", message="Could not download mistral tokenizer")
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


class _ProgressBar:
    """Rich progress bar for reindex phases: ``progress(phase, done, total)``."""

    def __init__(self) -> None:
        self.bar = Progress(TextColumn("{task.description:>8}"), BarColumn(), MofNCompleteColumn(),
                            TimeElapsedColumn(), console=err, transient=False)
        self.tasks: dict[str, TaskID] = {}

    def __enter__(self) -> _ProgressBar:
        return self  # started at the first phase: an empty bar would leave a blank line on stderr

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self.tasks:
            self.bar.__exit__(exc_type, exc, tb)

    def __call__(self, phase: str, done: int, total: int) -> None:
        if not self.tasks:
            self.bar.start()
        if phase not in self.tasks:
            self.tasks[phase] = self.bar.add_task(phase, total=total)
        self.bar.update(self.tasks[phase], completed=done, total=total)


async def _with_runtime(settings: Settings, sources: list[str] | None, body: Callable[[Runtime], Awaitable[int]],
                        *, build_index: bool = True, graph_workers: bool = False) -> int:
    from bot.runtime import open_runtime

    # JSON logs: stderr holds only JSON lines, so no progress bar (the index build is logged)
    with (_ProgressBar() if settings.logging.format == "text" else contextlib.nullcontext()) as bar:
        cm = open_runtime(settings, Secrets.from_env(), sources=sources, build_index=build_index, progress=bar,
                          graph_workers=graph_workers)
        runtime = await cm.__aenter__()
    try:
        return await body(runtime)
    finally:
        await cm.__aexit__(None, None, None)


# ---- commands -------------------------------------------------------------------------
@contextlib.contextmanager
def _graceful_stop(on_stop=None):
    """While inside: SIGTERM (and SIGHUP) do not kill the process at once; the answer in
    flight is finished first (the same graceful stop ``run`` gives Slack and Discord).
    ``on_stop`` is called once on the first signal (e.g. stop reading input). Yields a
    ``list`` that holds the signal numbers received."""
    import signal

    received: list[int] = []
    loop = asyncio.get_running_loop()
    sigs = [sig for sig in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None)) if sig]

    def handler(sig: int) -> None:
        first = not received
        received.append(sig)
        log.warning("signal %s: finishing the answer in flight, then exiting", sig)
        if first and on_stop:
            on_stop()

    installed = []
    for sig in sigs:
        try:
            loop.add_signal_handler(sig, handler, sig)
            installed.append(sig)
        except (NotImplementedError, RuntimeError, ValueError):
            pass
    try:
        yield received
    finally:
        for sig in installed:
            try:
                loop.remove_signal_handler(sig)
            except (NotImplementedError, RuntimeError, ValueError):
                pass


async def cmd_ask(args: argparse.Namespace, settings: Settings) -> int:
    from bot.platforms.console import ConsoleResponder, format_answer

    # each `ask` is its own conversation unless --thread names one to continue
    args.thread = args.thread or f"ask-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:4]}"

    async def body(rt: Runtime) -> int:
        out = ConsoleResponder(args.thread, err, show_status=not args.json, show_answers=False)
        with _graceful_stop():
            result = await rt.service.ask(f"console:{args.thread}", args.question, out)
        v = result.values if result else {}
        answer = result.answer if result else None
        failed = result.error if result else ""
        if args.json:
            kind = answer.kind if answer else ("help_request" if result and result.help_request else "notice")
            print(json.dumps({"answer": answer.text if answer else None, "kind": kind,
                              "sources": [s.location for s in (answer.sources if answer else [])],
                              "route_note": answer.route_note if answer else "",
                              "notices": out.notices, "path": v.get("path", []), "route": v.get("route"),
                              "llm_calls": v.get("llm_calls", 0),
                              "seconds": round(result.seconds, 2) if result else 0.0,
                              **({"error": failed} if failed else {})}, indent=1))
        elif answer and result:
            console.print(format_answer(answer, rate_hint=False), markup=False)
            console.print(f"{v.get('llm_calls', 0)} LLM calls, {result.seconds:.1f} s", style="dim")
        elif result and result.help_request:
            from bot.chat.text import REPLY_SYNTAX

            console.print(f"Paused for a human ({result.help_request.reason}). Resume it with: threadwise ask "
                          f"--thread {shlex.quote(args.thread)} \"<reply>\", the reply being {REPLY_SYNTAX}",
                          markup=False)
        if failed:  # the apology was shown; say why, once, and fail the command
            from bot.failures import advice

            err.print(f"threadwise ask failed: {failed}", style="red", markup=False)
            if advice(failed.split(":", 1)[0]):
                err.print(advice(failed.split(":", 1)[0]), markup=False)
            return 1
        return 0

    return await _with_runtime(settings, args.source, body)


async def cmd_console(args: argparse.Namespace, settings: Settings) -> int:
    from bot.platforms.console import run_console

    async def body(rt: Runtime) -> int:
        stop = asyncio.Event()
        with _graceful_stop(on_stop=stop.set):
            await run_console(rt, thread=args.thread, stop=stop)
        return 0

    return await _with_runtime(settings, args.source, body)


def slack_partial_tokens(secrets: Secrets) -> bool:
    """Some SLACK_* secret is set (whether or not they are enough for the configured mode)."""
    return bool(secrets.slack_bot_token or secrets.slack_app_token or secrets.slack_signing_secret)


async def cmd_run(args: argparse.Namespace, settings: Settings) -> int:
    from bot.metrics import MetricsUnavailable, PrometheusMetrics
    from bot.platforms.console import run_console

    secrets = Secrets.from_env()
    try:
        metrics = PrometheusMetrics() if settings.monitoring.metrics_port else None
    except MetricsUnavailable as exc:
        err.print(f"Configuration error: {exc}", style="red", markup=False)
        return 2

    from bot.monitoring import MonitoringPortError, bind_monitoring

    m = settings.monitoring
    sockets: dict = {}
    if m.health_port or m.metrics_port:
        if _platforms_enabled(settings, secrets):  # bound before the start-up work: a port in use stops at once
            try:
                sockets = bind_monitoring(m.host, m.health_port, m.metrics_port)
            except MonitoringPortError as exc:
                err.print(f"Configuration error: {exc}", style="red", markup=False)
                return 2
        else:
            log.warning("monitoring is off in console mode: [monitoring] health_port/metrics_port serve only "
                        "with Slack or Discord")

    async def body(rt: Runtime) -> int:
        import signal

        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        log.info("event loop: %s", type(loop).__module__.split(".")[0])  # uvloop or asyncio ([service] event_loop)
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(sig, stop.set)  # graceful: answers in flight are finished
            except (NotImplementedError, RuntimeError):
                pass
        starts = []
        try:
            from bot.platforms import slack as slack_mod

            if slack_mod.slack_enabled(settings, secrets):
                starts.append(("slack", lambda: slack_mod.run_slack(rt, stop=stop)))
        except ImportError:
            log.warning("Slack support is not installed")
        try:
            from bot.platforms import discord_ as discord_mod

            if discord_mod.discord_enabled(settings, secrets):
                starts.append(("discord", lambda: discord_mod.run_discord(rt, stop=stop)))
        except ImportError:
            log.warning("Discord support is not installed")
        if slack_partial_tokens(secrets) and not any(name == "slack" for name, _ in starts):
            needed = ("SLACK_BOT_TOKEN and SLACK_APP_TOKEN" if settings.slack.mode == "socket"
                      else "SLACK_BOT_TOKEN and SLACK_SIGNING_SECRET")
            err.print(f"Slack tokens are set but incomplete: [slack] mode = \"{settings.slack.mode}\" needs {needed}. "
                      "Set them (or change the mode in config.toml), or unset SLACK_* to use the console.",
                      markup=False)
            return 2
        if starts:
            # the runs the last process left unanswered take their threads' places before
            # the platforms deliver anything new (redeliveries come at once after a restart)
            await rt.service.recover()
        tasks = [asyncio.create_task(start(), name=name) for name, start in starts]
        from bot.runtime import freeze_startup_objects

        freeze_startup_objects()  # long-lived process: start-up objects out of the collector's walks
        if not tasks:
            for sig in (signal.SIGTERM, signal.SIGINT):
                try:
                    loop.remove_signal_handler(sig)
                except (NotImplementedError, RuntimeError):
                    pass
            # Ctrl-C at the prompt: one line and 130, as in `console` (removing the loop's handler
            # left SIGINT at SIG_DFL: a silent kill)
            signal.signal(signal.SIGINT, _interrupted)
            err.print("No SLACK_* or DISCORD_TOKEN set: starting the console chat (offline default; only warnings "
                      "are logged here, -v logs every event).")
            if not args.verbose:  # the chat and the event log would share one terminal
                logging.getLogger().setLevel(max(logging.WARNING, logging.getLogger().level))
            stop_console = asyncio.Event()
            with _graceful_stop(on_stop=stop_console.set):
                await run_console(rt, stop=stop_console)
            return 0
        for t in tasks:
            rt.health.expect(t.get_name())
        monitoring = _start_monitoring(settings, rt, metrics, stop, sockets)
        done, _ = await asyncio.wait(tasks + monitoring, return_when=asyncio.FIRST_EXCEPTION)
        # a recovered run (bot.service.recovery) is finished too; after a stop it already had the
        # adapters' grace (10 s, in parallel), so the whole stop stays within ~12 s
        await rt.service.drain(2 if stop.is_set() else 10)
        for t in done:
            if t.exception():
                log.error("%s stopped: %s", t.get_name(), t.exception())
                return 1
        return 0

    try:
        return await _with_runtime(settings, None, body, graph_workers=True)
    finally:
        for sock in sockets.values():
            sock.close()


def _platforms_enabled(settings: Settings, secrets: Secrets) -> bool:
    """Slack or Discord will be served (their tokens are set and their support installed)."""
    for module, check in (("bot.platforms.slack", "slack_enabled"), ("bot.platforms.discord_", "discord_enabled")):
        try:
            import importlib

            if getattr(importlib.import_module(module), check)(settings, secrets):
                return True
        except ImportError:
            pass
    return False


def _start_monitoring(settings: Settings, rt, metrics, stop: asyncio.Event, sockets=None) -> list[asyncio.Task]:
    """Start ``[monitoring]``'s health and metrics endpoints until ``stop`` (none when both
    ports are 0); ``metrics`` (a :class:`bot.metrics.PrometheusMetrics` or None) becomes
    the service's observer. Returns the serving task in a list."""
    from bot.monitoring import serve_monitoring

    m = settings.monitoring
    if not (m.health_port or m.metrics_port):
        return []
    if metrics is not None:
        rt.service.observer = metrics
    return [asyncio.create_task(serve_monitoring(m.host, m.health_port, m.metrics_port, health=rt.health,
                                                 metrics=metrics, stop=stop, sockets=sockets),
                                name="monitoring")]


async def cmd_reindex(args: argparse.Namespace, settings: Settings) -> int:
    from bot.runtime import build_knowledge_base
    from graphs.models import build_embeddings

    secrets = Secrets.from_env()
    emb, emb_id = build_embeddings(settings.knowledge.embeddings, settings.models, secrets.mistral_api_key)
    kb = build_knowledge_base(settings, emb, emb_id, args.source)
    if settings.storage.backend == "postgres" and not args.source:  # replicas: once, and recorded for all
        from bot.admin import REINDEX_LOCK
        from bot.storage import open_storage

        async with open_storage(settings) as storage, storage.bookkeeping.exclusive(REINDEX_LOCK) as ours:
            if not ours:
                err.print("A reindex is already running on a replica; try again when it is done.", markup=False)
                return 1
            with _ProgressBar() as bar:
                stats = await asyncio.to_thread(kb.reindex, bar)
            await storage.bookkeeping.set_index_generation(stats.generation)
    else:
        with _ProgressBar() as bar:
            stats = await asyncio.to_thread(kb.reindex, bar)
    console.print(f"Indexed {stats.summary()} -> {kb.index_dir / stats.generation}")
    return 0


def cmd_graph(args: argparse.Namespace, settings: Settings) -> int:
    from bot.runtime import graph_config
    from graphs.adaptive_rag import build_graph
    from graphs.knowledge import KnowledgeBase
    from graphs.models import ModelCaller, UnavailableChatModel
    from graphs.nodes import GraphDeps

    # drawing needs the nodes, not a model: no model is built or called
    model = UnavailableChatModel(reason="the graph is only drawn")
    deps = GraphDeps(ModelCaller(model), KnowledgeBase(settings.path("data/none"), []), None,
                     graph_config(settings, model))
    print(build_graph(deps).get_graph().draw_mermaid())
    return 0


async def cmd_eval(args: argparse.Namespace, settings: Settings) -> int:
    from bot.eval import load_eval, run_eval

    try:
        rows = load_eval(args.file)
    except FileNotFoundError:
        err.print(f"threadwise eval: no such file: {args.file}", style="red", markup=False)
        return 2
    except (OSError, ValueError) as exc:
        err.print(f"threadwise eval: {args.file}: {exc}", style="red", markup=False)
        return 2
    if args.limit:
        rows = rows[: args.limit]

    async def body(rt: Runtime) -> int:
        report = await run_eval(rt, rows, err)
        t = report["totals"]
        table = Table(title=f"eval: {args.file} ({t['questions']} questions)")
        for col in ("id", "kind", "route", "r@1", "r@5", "facts", "calls", "outcome", "s"):
            table.add_column(col)
        for r in report["rows"]:
            table.add_row(r["id"], r["kind"], r["route"] + ("" if r["route_ok"] else f" (exp {r['expected_route']})"),
                          str(r["recall_at_1"] if r["recall_at_1"] is not None else "-"),
                          str(r["recall_at_5"] if r["recall_at_5"] is not None else "-"),
                          f"{r['facts_found']:.2f}" if r["facts_found"] is not None else "-",
                          str(r["llm_calls"]), r["outcome"], f"{r['seconds']:.1f}")
        console.print(table)
        for k, v in t.items():
            console.print(f"{k}: {v}")
        if args.json:
            Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            Path(args.json).write_text(json.dumps(report, indent=1))
            console.print(f"wrote {args.json}")
        return 0

    return await _with_runtime(settings, args.source, body)


async def cmd_db(args: argparse.Namespace, settings: Settings) -> int:
    """``threadwise db upgrade``: create or upgrade the PostgreSQL schema (also done at every
    start); ``threadwise db status``: print its version. Both need [storage] backend = "postgres"."""
    from bot.storage import database_url, describe_dsn, migrations, open_storage

    if settings.storage.backend != "postgres":
        console.print('[storage] backend = "sqlite": the SQLite files are created and upgraded at start; '
                      "nothing to do.", markup=False)
        return 0
    url = database_url()
    if args.action == "status":
        import psycopg

        async with await psycopg.AsyncConnection.connect(url, connect_timeout=10) as conn:
            version = await migrations.current_version(conn)
        console.print(f"{describe_dsn(url)}: schema version {version} (this program: {migrations.LATEST})",
                      markup=False)
        return 0 if version == migrations.LATEST else 1
    async with open_storage(settings, url):  # upgrades the schema on open
        pass
    console.print(f"{describe_dsn(url)}: schema at version {migrations.LATEST}", markup=False)
    return 0


async def cmd_discord(args: argparse.Namespace, settings: Settings) -> int:
    """``threadwise discord sync [--guild ID ...]``: publish the /threadwise slash commands
    (globally, or to the given servers) without starting the bot
    (:func:`bot.platforms.discord_commands.sync_commands`)."""
    import discord

    from bot.platforms.discord_commands import sync_commands

    token = Secrets.from_env().discord_token
    if not token:
        err.print("threadwise discord sync: DISCORD_TOKEN is not set", style="red", markup=False)
        return 2
    guilds = args.guild or list(settings.discord.command_guild_ids)
    try:
        names = await sync_commands(token, api_base_url=settings.discord.api_base_url, guild_ids=guilds)
    except discord.LoginFailure:
        err.print("threadwise discord sync: Discord rejected DISCORD_TOKEN (401)", style="red", markup=False)
        return 1
    except discord.HTTPException as exc:
        err.print(f"threadwise discord sync: Discord refused (HTTP {exc.status}, code {exc.code}); invite the bot "
                  "with the applications.commands scope", style="red", markup=False)
        return 1
    where = f"server(s) {', '.join(map(str, guilds))}" if guilds else "all servers (global; may take up to an hour)"
    console.print(f"published /{' /'.join(sorted(set(names)))} to {where}", markup=False)
    return 0


def cmd_threads(args: argparse.Namespace, settings: Settings) -> int:
    from bot.checkpoints import list_threads

    if settings.storage.backend == "postgres":
        from bot.storage import database_url
        from bot.storage.pg_checkpoints import list_threads as list_pg_threads

        rows = list_pg_threads(database_url())
    else:
        rows = list_threads(settings.path(settings.service.checkpoint_db))
    if not rows:
        console.print("(no threads yet)")
        return 0
    for thread, n in rows:
        console.print(f"{thread}  ({n} checkpoints)", markup=False)
    return 0


async def cmd_feedback(args: argparse.Namespace, settings: Settings) -> int:
    """Summarise the 👍/👎 votes (or export them as eval-shaped JSONL with ``--json``)."""
    from bot.feedback import export_rows, format_summary, summarise
    from bot.store import Bookkeeping

    path = settings.path(settings.service.bookkeeping_db)
    if settings.storage.backend == "postgres":  # replicas: the votes are in the database
        from bot.storage import open_storage

        async with open_storage(settings) as storage:
            rows = await storage.bookkeeping.feedback_rows()
    elif not path.exists():
        rows = []
    else:
        store = await Bookkeeping.open(path)
        try:
            rows = await store.feedback_rows()
        finally:
            await store.close()
    if args.json:
        text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in export_rows(rows))
        if args.json == "-":
            sys.stdout.write(text)
        else:
            Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            Path(args.json).write_text(text, encoding="utf-8")
            console.print(f"wrote {len(export_rows(rows))} answers to {args.json}", markup=False)
        return 0
    console.print(format_summary(summarise(rows)), markup=False, highlight=False)
    return 0


def cmd_learned(args: argparse.Namespace, settings: Settings) -> int:
    """``threadwise learned list|forget ID``: the experts' answers saved as knowledge."""
    from graphs.learned import LearnedStore

    store = LearnedStore(settings.path(settings.learning.index_db))
    if args.action == "forget":
        if args.id is None:
            err.print("Usage: threadwise learned forget ID (the number `threadwise learned list` shows)", markup=False)
            return 2
        if not store.forget(args.id):
            err.print(f"There is no learned entry {args.id}.", markup=False)
            return 1
        console.print(f"Learned entry {args.id} removed.", markup=False)
        return 0
    entries = store.entries()
    if args.json:
        sys.stdout.write("".join(json.dumps(e.as_dict(), ensure_ascii=False) + "\n" for e in entries))
        return 0
    if not entries:
        console.print("No learned entries yet.", markup=False)
    for e in entries:
        console.print(f"{e.id}: {e.question or '(no question)'}\n    -> {' '.join(e.answer.split())}\n"
                      f"    ({e.citation}{'; ' + e.permalink if e.permalink else ''})", markup=False, highlight=False)
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="threadwise", description="Threadwise: team Q&A bot (adaptive RAG).")
    # --config and -v work before the command and after it (SUPPRESS: an option not given
    # after the command does not overwrite one given before it)
    p.add_argument("--config", help="config.toml to use (default: $THREADWISE_CONFIG or the project's)")
    p.add_argument("-v", "--verbose", action="store_true", help="log every event, with tracebacks (DEBUG)")
    p.add_argument("--log-format", choices=["text", "json"],
                   help="log lines as text or one JSON object per line (default: [logging] format)")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", default=argparse.SUPPRESS, help="config.toml to use")
    common.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                        help="log every event, with tracebacks (DEBUG)")
    common.add_argument("--log-format", choices=["text", "json"], default=argparse.SUPPRESS,
                        help="log lines as text or one JSON object per line")
    src = argparse.ArgumentParser(add_help=False)
    src.add_argument("--source", action="append", metavar="DIR",
                     help="knowledge source folder instead of config.toml's (repeatable)")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("run", parents=[common],
                   help="run the bot: Slack/Discord when their tokens are set, else the console")
    a = sub.add_parser("ask", parents=[common, src], help="answer one question")
    a.add_argument("question")
    a.add_argument("--thread", help="continue this thread (follow-ups keep context); default: a new thread")
    a.add_argument("--json", action="store_true", help="print the result as JSON")
    c = sub.add_parser("console", parents=[common, src], help="interactive chat in the terminal")
    c.add_argument("--thread", default="main")
    sub.add_parser("reindex", parents=[common, src], help="rebuild the knowledge index")
    sub.add_parser("graph", parents=[common], help="print the graph as Mermaid text")
    e = sub.add_parser("eval", parents=[common, src], help="run an eval set (JSONL)")
    e.add_argument("file")
    e.add_argument("--json", metavar="PATH", help="write per-question rows and totals as JSON")
    e.add_argument("--limit", type=int, default=0, help="only the first N questions")
    sub.add_parser("threads", parents=[common], help="list saved threads")
    f = sub.add_parser("feedback", parents=[common], help="summarise the 👍/👎 votes on answers")
    f.add_argument("--json", metavar="PATH", help="export the voted answers as eval-shaped JSONL ('-': stdout)")
    lr = sub.add_parser("learned", parents=[common], help="list or remove what the bot learned from experts")
    lr.add_argument("action", choices=["list", "forget"], nargs="?", default="list")
    lr.add_argument("id", type=int, nargs="?", help="the entry to forget")
    lr.add_argument("--json", action="store_true", help="list as JSON lines")
    cf = sub.add_parser("config", parents=[common], help="config.toml: show-defaults prints every key with its "
                                                         "default and description")
    cf.add_argument("action", choices=["show-defaults"],
                    help="show-defaults: config.toml at its defaults (`threadwise config show-defaults > config.toml`)")
    d = sub.add_parser("db", parents=[common], help="the PostgreSQL schema ([storage] backend = \"postgres\")")
    d.add_argument("action", choices=["upgrade", "status"], help="upgrade: create or migrate it; status: its version")
    ds = sub.add_parser("discord", parents=[common], help="Discord: publish the /threadwise slash commands")
    ds.add_argument("action", choices=["sync"], help="sync: publish the commands (after install or upgrade)")
    ds.add_argument("--guild", type=int, action="append", metavar="ID",
                    help="only to this server (repeatable; default: [discord] command_guild_ids, else global)")
    return p


def _check_output(path: str) -> None:
    """Check that ``--json PATH`` can be written before the command does its work (its
    folder is created). ``-`` is stdout.

    Raises:
        ConfigError: one line naming the option and the path (exit code 2: an argument).
    """
    if path == "-":
        return
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        existed = target.exists()
        with open(target, "a", encoding="utf-8"):  # a real open: os.access says yes to root
            pass
        if not existed:
            target.unlink()
    except OSError as exc:
        raise ConfigError(f"--json {path}: cannot write there: {exc.strerror or exc}") from exc


_asking = False  # the command answers questions (ask, eval): the Ctrl-C line says one was not answered


def _interrupted(signum: int, frame: object) -> None:
    """SIGINT during ask/eval/console: one line, exit code 130 now."""
    err.print("interrupted (Ctrl-C)" + (": the question was not answered" if _asking else ""), style="red")
    sys.stderr.flush()
    sys.stdout.flush()
    os._exit(130)


def main(argv: list[str] | None = None) -> int:
    # Before torch or llama.cpp load OpenMP: idle OpenMP threads sleep instead of spinning.
    # On a shared 2-core machine spinning threads made MiniLM 5-10x slower (issue 11: a
    # query embedding 190-280 ms p50 with the default, 23 ms with PASSIVE).
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    from bot.protocol import clean_text

    # no "Loading weights" progress bars from the local embedding model on every start
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

    # Arguments that are not valid UTF-8 reach Python as lone surrogates: clean them once, here.
    args = build_parser().parse_args([clean_text(a) for a in (sys.argv[1:] if argv is None else argv)])
    global err  # JSON log mode: every stderr line a JSON object, a configuration error's too
    err = make_console(stderr=True, json_lines=args.log_format == "json")
    if args.command == "config":  # needs no (valid) config.toml: it is how one is written
        from bot.config_template import render_defaults

        sys.stdout.write(render_defaults())
        return 0
    try:
        settings = load_settings(args.config)
        if args.log_format:
            settings.logging.format = args.log_format
        if settings.logging.format == "json":
            err = make_console(stderr=True, json_lines=True)
        if args.command in ("run", "ask", "console", "reindex", "eval"):  # they write: checked before any work
            settings.check_data_paths()
        if getattr(args, "json", None) and args.command in ("eval", "feedback"):
            _check_output(args.json)
        loop = loop_factory(settings.service.event_loop)
    except ConfigError as exc:
        err.print(f"Configuration error: {exc}", style="red")
        return 2
    if settings.storage.backend == "postgres" and not os.environ.get("THREADWISE_DATABASE_URL", "").strip():
        from bot.storage import database_url

        try:
            database_url()
        except Exception as exc:  # noqa: BLE001 - StorageError: one line
            err.print(f"Configuration error: {exc}", style="red", markup=False)
            return 2
    level = "DEBUG" if args.verbose else (settings.service.log_level if args.command == "run" else "WARNING")
    _setup_logging(level, settings.logging.format)
    handlers: dict[str, Callable[[argparse.Namespace, Settings], int | Coroutine[Any, Any, int]]] = {
        "run": cmd_run, "ask": cmd_ask, "console": cmd_console, "reindex": cmd_reindex, "graph": cmd_graph,
        "eval": cmd_eval, "threads": cmd_threads, "feedback": cmd_feedback, "learned": cmd_learned, "db": cmd_db,
        "discord": cmd_discord}
    handler = handlers[args.command]
    global _asking
    _asking = args.command in ("ask", "eval")
    if args.command in ("ask", "eval", "console"):
        # Ctrl-C stops a one-shot command (or the console chat) at once, with one line; asyncio's own shutdown
        # would first wait for worker threads (a model or embedding call) to finish.
        # Committed SQLite writes are safe; an unfinished run is recovered at next start.
        signal.signal(signal.SIGINT, _interrupted)
    try:
        result = handler(args, settings)
        return run_async(result, loop) if asyncio.iscoroutine(result) else result
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # noqa: BLE001 - one clear line, no traceback for users
        from graphs.knowledge import KnowledgeBaseError
        from graphs.models import ModelUnavailableError

        if isinstance(exc, (KnowledgeBaseError, ModelUnavailableError)):
            err.print(str(exc), style="red")
            return 2
        from bot.failures import advice, describe_failure, failure_kind

        log.debug("threadwise %s failed", args.command, exc_info=True)
        kind = failure_kind(exc)
        err.print(f"threadwise {args.command} failed: {describe_failure(exc)}", style="red", markup=False)
        if advice(kind) and (kind == "storage" or os.environ.get("MISTRAL_API_KEY") or kind == "auth"):
            err.print(advice(kind), markup=False)
        if not args.verbose:
            err.print("Run again with -v for the details.", markup=False)
        return 1


if __name__ == "__main__":
    sys.exit(main())
