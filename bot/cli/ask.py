"""``threadwise ask QUESTION`` (one answer) and ``threadwise console`` (a chat in the terminal)."""

from __future__ import annotations

import argparse
import asyncio
import json
import shlex
import time
import uuid
from typing import TYPE_CHECKING

from bot.chat.syntax import REPLY_SYNTAX
from bot.cli.output import out
from bot.cli.session import with_runtime
from bot.cli.signals import graceful_stop
from bot.config import Settings
from bot.failures import advice
from bot.platforms.console import ConsoleResponder, format_answer, run_console, thread_for

if TYPE_CHECKING:
    from bot.runtime import Runtime


def add_parsers(
    sub: argparse._SubParsersAction, common: argparse.ArgumentParser, source: argparse.ArgumentParser
) -> None:
    """Add ``ask`` and ``console`` to the command parser ``sub``."""
    a = sub.add_parser("ask", parents=[common, source], help="answer one question")
    a.add_argument("question")
    a.add_argument("--thread", help="continue this thread (follow-ups keep context); default: a new thread")
    a.add_argument("--json", action="store_true", help="print the result as JSON")
    a.set_defaults(handler=cmd_ask)
    c = sub.add_parser("console", parents=[common, source], help="interactive chat in the terminal")
    c.add_argument("--thread", default="main")
    c.set_defaults(handler=cmd_console)


async def cmd_ask(args: argparse.Namespace, settings: Settings) -> int:
    """Answer ``args.question`` in a new thread (or ``--thread``'s: when that thread waits for an
    expert and the message is a new question, not a reply, in thread ``NAME-2``, the same one for
    every question while NAME waits, ``NAME-3`` once ``NAME-2`` waits too, and so on
    (:func:`~bot.platforms.console.thread_for`), saying how to
    answer the waiting one); exit code 1 when it failed, 2 when the question is empty or only
    blanks (a usage error, as a missing question is)."""
    if not args.question.strip():
        # an empty question would be routed as small talk and greeted: a script passing an
        # unset variable would read the greeting as an answer
        out.err.print('threadwise ask: the question is empty (usage: threadwise ask "QUESTION")', markup=False)
        return 2
    # each `ask` is its own conversation unless --thread names one to continue
    args.thread = args.thread or f"ask-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:4]}"

    async def body(rt: Runtime) -> int:
        # a new question on a thread that waits for an expert is answered in a thread of its own, as in
        # the console chat; the help request stays open, and how to answer it is said first
        waiting = args.thread
        args.thread, continued = await thread_for(rt.service, waiting, args.question)
        moved = (
            f"Thread {waiting} waits for an expert: answer it with threadwise ask --thread {shlex.quote(waiting)} "
            f'"<reply>", the reply being {REPLY_SYNTAX}. Your question is answered in thread {args.thread}'
            + (", after the questions asked there before." if continued else ".")
            if args.thread != waiting
            else ""
        )
        if moved and not args.json:
            out.console.print(moved, markup=False, highlight=False)
        # the bot's replies are the command's output (stdout); statuses and errors go to stderr
        responder = ConsoleResponder(
            args.thread,
            out.err,
            show_status=not args.json,
            show_answers=False,
            notice_console=out.err if args.json else out.console,
        )
        async with graceful_stop(
            settings.service.stop_grace_seconds, exit_code=1, unfinished="the question was not answered"
        ):
            result = await rt.service.ask(f"console:{args.thread}", args.question, responder)
        v = result.values if result else {}
        answer = result.answer if result else None
        failed = result.error if result else ""
        if args.json:
            kind = answer.kind if answer else ("help_request" if result and result.help_request else "notice")
            print(
                json.dumps(
                    {
                        # no graph run (a message with no words, one too long): the reply is the answer
                        "answer": answer.text if answer else (None if result else "\n".join(responder.notices) or None),
                        "kind": kind,
                        "sources": [s.location for s in (answer.sources if answer else [])],
                        "route_note": answer.route_note if answer else "",
                        "notices": [*([moved] if moved else []), *responder.notices],
                        "thread": args.thread,
                        "path": v.get("path", []),
                        "route": v.get("route"),
                        "llm_calls": v.get("llm_calls", 0),
                        "seconds": round(result.seconds, 2) if result else 0.0,
                        **({"error": failed} if failed else {}),
                    },
                    indent=1,
                )
            )
        elif answer and result:
            out.console.print(format_answer(answer, rate_hint=False), markup=False)
            out.console.print(f"{v.get('llm_calls', 0)} LLM calls, {result.seconds:.1f} s", style="dim")
        elif result and result.help_request:
            out.console.print(
                f"Paused for a human ({result.help_request.reason}). Resume it with: threadwise ask "
                f'--thread {shlex.quote(args.thread)} "<reply>", the reply being {REPLY_SYNTAX}',
                markup=False,
            )
        if failed:  # the apology was shown; say why, once, and fail the command
            out.err.print(f"threadwise ask failed: {failed}", style="red", markup=False)
            if advice(failed.split(":", 1)[0]):
                out.err.print(advice(failed.split(":", 1)[0]), markup=False)
            return 1
        return 0

    return await with_runtime(settings, args.source, body, check_model=True)


async def cmd_console(args: argparse.Namespace, settings: Settings) -> int:
    """Chat in the terminal in thread ``args.thread`` until end of input or a stop signal."""

    async def body(rt: Runtime) -> int:
        stop = asyncio.Event()
        async with graceful_stop(settings.service.stop_grace_seconds, on_stop=stop.set):
            await run_console(rt, thread=args.thread, stop=stop)
        return 0

    return await with_runtime(settings, args.source, body, check_model=True)
