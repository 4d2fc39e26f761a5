"""The ``threadwise`` command line: run, ask, console, reindex, graph, eval, threads, feedback,
learned, config, db, discord (one module each in :mod:`bot.cli`).

Every command takes ``--config PATH``; ``ask``, ``reindex`` and ``eval`` take
``--source DIR`` (repeatable) to use other knowledge sources than config.toml's.
Exit codes: 0 ok; 2 bad config or arguments, found before any work (an unknown source name, a
``files`` source of config.toml none of whose paths exists, a ``--source`` that is not a folder of
documents, a model or database that cannot be reached); 1 the
command failed (a knowledge source failed to sync, on a first sync too; a question not
answered); 130 Ctrl-C.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import warnings

from bot.cli.output import check_output, out
from bot.cli.parser import build_parser
from bot.cli.signals import StopGraceExpired, ctrl_c, interrupted
from bot.config import ConfigError, config_path, load_settings
from bot.event_loop import loop_factory, run_async
from bot.failures import advice, database_error, describe_failure, failure_kind
from bot.logs import setup_logging
from bot.protocol import clean_text

log = logging.getLogger("threadwise")

#: Commands that write data files: their paths are checked before any work.
WRITING_COMMANDS = ("run", "ask", "console", "reindex", "sync", "eval")
#: Commands that answer questions: Ctrl-C stops them at once with one line.
ONE_SHOT_COMMANDS = ("ask", "eval", "console")


def _setup_logging(level: str, fmt: str = "text") -> None:
    setup_logging(level, "json" if fmt == "json" else "text")
    if fmt == "json":  # every stderr line is a JSON object: Python's warnings become log records too
        logging.captureWarnings(True)
    if level != "DEBUG":
        warnings.filterwarnings("ignore", message="Could not download mistral tokenizer")
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def main(argv: list[str] | None = None) -> int:
    """Run the command line ``argv`` (default: ``sys.argv[1:]``) and return its exit code."""
    # Before torch or llama.cpp load OpenMP: idle OpenMP threads sleep instead of spinning,
    # which on a shared 2-core machine made the local embedding model several times slower.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    # no "Loading weights" progress bars from the local embedding model on every start
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

    # Arguments that are not valid UTF-8 reach Python as lone surrogates: clean them once, here.
    args = build_parser().parse_args([clean_text(a) for a in (sys.argv[1:] if argv is None else argv)])
    out.use_json_lines(args.log_format == "json")  # a configuration error's line too
    if not getattr(args, "needs_settings", True):  # `config`: how a config.toml is written
        return int(args.handler(args))
    try:
        settings = load_settings(args.config)
        if args.log_format:
            settings.logging.format = args.log_format
        if settings.logging.format == "json":
            out.use_json_lines(True)
        if args.command in WRITING_COMMANDS:
            if not getattr(args, "source", None):  # with --source, config.toml's sources are not read
                settings.check_source_paths(config_path(args.config).name)
            settings.check_data_paths()
        if getattr(args, "json", None) and args.command in ("eval", "feedback"):
            check_output(args.json)
        loop = loop_factory(settings.service.event_loop)
    except ConfigError as exc:
        out.err.print(f"Configuration error: {exc}", style="red")
        return 2
    if settings.storage.backend == "postgres":  # THREADWISE_DATABASE_URL unset or unparsable: one line
        from bot.storage import database_url  # langgraph's checkpointers load with it

        try:
            url = database_url()
        except Exception as exc:  # noqa: BLE001 - StorageError: one line
            out.err.print(f"Configuration error: {exc}", style="red", markup=False)
            return 2
        if args.command in WRITING_COMMANDS:  # before minutes of index building: is the database there?
            from bot.storage.postgres import check_reachable

            try:
                check_reachable(url, settings.storage.connect_timeout_seconds)
            except Exception as exc:  # noqa: BLE001 - DatabaseError: one line naming the cause
                out.err.print(f"threadwise {args.command}: {exc}", style="red", markup=False)
                return 2
    for src in getattr(args, "source", None) or []:  # an argument: checked before any work, as the config
        from graphs.knowledge.sources import source_argument_problem

        if problem := source_argument_problem(src):
            out.err.print(problem, style="red", markup=False)
            return 2
    level = "DEBUG" if args.verbose else (settings.service.log_level if args.command == "run" else "WARNING")
    _setup_logging(level, settings.logging.format)
    ctrl_c.asking = args.command in ("ask", "eval")
    if args.command in ONE_SHOT_COMMANDS:
        # Ctrl-C stops a one-shot command (or the console chat) at once, with one line; asyncio's own shutdown
        # would first wait for worker threads (a model or embedding call) to finish.
        # Committed SQLite writes are safe; an unfinished run is recovered at next start.
        signal.signal(signal.SIGINT, interrupted)
    try:
        result = args.handler(args, settings)
        return run_async(result, loop) if asyncio.iscoroutine(result) else result
    except KeyboardInterrupt:
        return 130
    except StopGraceExpired as exc:  # logged where it happened
        return exc.exit_code
    except Exception as exc:  # noqa: BLE001 - one clear line, no traceback for users
        from graphs.knowledge import KnowledgeBaseError, NothingIndexedError  # loaded by the commands raising them
        from graphs.models import ModelUnavailableError

        if isinstance(exc, NothingIndexedError):  # the sources were read and failed: not the configuration
            out.err.print(f"threadwise {args.command} failed: {exc}", style="red", markup=False)
            return 1
        if isinstance(exc, (KnowledgeBaseError, ModelUnavailableError)):
            out.err.print(str(exc), style="red")
            return 2
        if (db := database_error(exc)) is not None:  # a wrong URL, a missing database, a full server
            log.debug("threadwise %s failed", args.command, exc_info=True)
            out.err.print(f"threadwise {args.command}: {db}", style="red", markup=False)
            return 2
        log.debug("threadwise %s failed", args.command, exc_info=True)
        kind = failure_kind(exc)
        out.err.print(f"threadwise {args.command} failed: {describe_failure(exc)}", style="red", markup=False)
        if advice(kind):
            out.err.print(advice(kind), markup=False)
        if not args.verbose:
            out.err.print("Run again with -v for the details.", markup=False)
        return 1
