"""Console adapter: chat with the bot in a terminal, threads by name.

Lines are questions on the current thread (``console:<name>``). Commands:
``/thread NAME`` switch thread, ``/threads`` list them, ``/quit`` (or end of input).
When the graph pauses for a human, the help request is printed; a line on that thread in
the reply syntax of :data:`bot.chat.syntax.REPLY_SYNTAX` resumes it, and any other question
starts a new thread (``main-2``), as a new message does on Slack and Discord, leaving the
help request open in its own.
Works with piped input too.
"""

from __future__ import annotations

import asyncio
import re
import sys
import threading
import uuid
from collections.abc import AsyncIterator, Collection
from typing import TYPE_CHECKING, Any, TextIO

from rich.console import Console
from rich.text import Text

from bot.chat import sources, vote_controls
from bot.chat.syntax import REPLY_SYNTAX
from bot.protocol import (
    Answer,
    HelpRequest,
    IncomingMessage,
    PostError,
    Responder,
    Status,
    clean_text,
)
from bot.terminal import make_console, terminal_text

if TYPE_CHECKING:
    from bot.runtime import Runtime
    from bot.service import ChatService

_STATUS_TEXT = {
    Status.RECEIVED: "received",
    Status.QUEUED: "queued (other questions first)",
    Status.SEARCHING: "searching the knowledge base",
    Status.WEB: "searching the web",
    Status.WRITING: "writing",
    Status.WAITING_HUMAN: "waiting for a human",
    Status.DONE: "done",
    Status.APOLOGY: "could not answer",
}


async def thread_for(service: ChatService, thread: str, text: str, known: Collection[str] = ()) -> tuple[str, bool]:
    """The console thread a local message ``text`` typed on ``thread`` goes to, and whether that
    thread was in use before (its earlier questions are the context of this one).

    ``thread``, unless ``thread`` waits for an expert and ``text`` is a new question, not a reply
    to the help request (:meth:`~bot.service.ChatService.is_question`): then a fork of it, in one
    line of forks ``thread-2``, ``thread-3``, ... numbered without a gap (a saved thread or one of
    ``known`` uses the name; a thread named ``thread-9`` by the user with no ``thread-2`` is not
    in the line): the latest, so every question asked on the waiting thread continues one conversation;
    a new fork numbered one higher when the latest waits for an expert too (or none is open yet),
    holding the answered turns of the latest (of ``thread``'s line's first thread for the first fork)
    as its history (:func:`_carry_history`); never a
    fork of a fork (``thread-2-2``), so the user follows one line of threads however many of them
    wait. Asked on a fork itself (``thread-2``), the line is its thread's. As a new message starts
    its own thread on Slack and Discord, the help request stays open in its thread. The one rule
    of the console chat and of ``threadwise ask --thread``.
    """
    if not service.is_question(text) or not await service.waits_for_expert(f"console:{thread}"):
        return thread, False
    used = {*known, *[k.split(":", 1)[1] for k in await service.thread_keys("console:")]}
    root = thread
    while (m := _FORK.fullmatch(root)) and m.group(1) in used:  # a fork's line is its thread's
        root = m.group(1)
    numbers = {int(m.group(2)) for name in used if (m := _FORK.fullmatch(name)) and m.group(1) == root}
    # the line is root-2, root-3, ... without a gap: a thread the user named "root-9" themselves,
    # with no root-2 to root-8 before it, is their own conversation, never a fork to continue
    last = 1
    while last + 1 in numbers:
        last += 1
    latest = f"{root}-{last}" if last > 1 else ""
    if latest and latest != thread and not await service.waits_for_expert(f"console:{latest}"):
        return latest, True
    fork = f"{root}-{last + 1}"
    # the conversation goes on in the new fork: the answered turns of the one before (the waiting thread's
    # for the first fork) are its context, so "and for 20 people?" is read with the questions before
    await _carry_history(service, f"console:{latest or root}", f"console:{fork}")
    return fork, bool(latest)


async def _carry_history(service: ChatService, source: str, target: str) -> None:
    """Write the answered turns of thread ``source`` (its questions and answers, the question
    waiting for an expert left out) into the new thread ``target`` as its history."""
    history: list[dict[str, str]] = []
    for message in (await service.thread_values(source)).get("messages", []):
        role = {"human": "user", "ai": "assistant"}.get(message.type)
        if role and isinstance(message.content, str):
            history.append({"role": role, "content": message.content})
    while history and history[-1]["role"] == "user":  # the question the experts are asked stays there
        history.pop()
    if history:  # a thread whose first question waits has no answered turn to carry
        await service.seed_history(target, history)


#: a fork's name: its thread's and its number in the line (2 and up)
_FORK = re.compile(r"(.+)-([2-9]|[1-9][0-9]+)")


def format_answer(answer: Answer, rate_hint: bool = True) -> str:
    """Markdown text of an answer with its sources and route note (for terminals);
    ``rate_hint``: end with how to rate it (the console chat's ``/good`` and ``/bad``)."""
    lines = [answer.text.strip() or "(empty answer)"]
    lines += sources.render(
        answer,
        lambda s: f"  [{s.number}] {s.location}" + (f" — {s.title}" if s.title else ""),
        lambda heading: f"\n{heading}:",
    )
    lines.append(f"\n({sources.footer(answer).note}; path: {' -> '.join(answer.path) or 'n/a'})")
    if answer.answer_id and rate_hint:
        lines.append("Rate it: /good or /bad [what was wrong]")
    return "\n".join(lines)


class ConsoleResponder(Responder):
    """Prints statuses, answers and help requests for one console thread."""

    def __init__(
        self,
        thread: str,
        console: Console | None = None,
        show_status: bool = True,
        show_answers: bool = True,
        notice_console: Console | None = None,
    ):
        """``console``: where statuses, answers and help requests go; ``notice_console``: where the
        bot's short replies go (a "what would you like to know?", an apology), ``console`` if None."""
        self.thread = thread
        self.console = console or make_console()
        self.notice_console = notice_console or self.console
        self.show_status = show_status
        self.show_answers = show_answers  # False: answers are only recorded (the caller prints them)
        self.statuses: list[Status] = []
        self.answers: list[Answer] = []
        self.help_requests: list[HelpRequest] = []
        self.notices: list[str] = []

    async def set_status(self, status: Status) -> None:
        self.statuses.append(status)
        if self.show_status:
            self.console.print(f"  … {_STATUS_TEXT[status]}", style="dim")

    async def post_answer(self, answer: Answer) -> None:
        """Print the answer (or record it only, ``show_answers=False``).

        Raises:
            PostError: the terminal could not be written (closed pipe, full disk).
        """
        self.answers.append(answer)
        if not self.show_answers:
            return
        try:
            self.console.print(Text.assemble(("threadwise", "bold cyan"), " ", (f"({self.thread})", "dim")))
            self.console.print(format_answer(answer), markup=False, highlight=False)
        except OSError as exc:
            raise PostError(f"the answer could not be printed: {exc}") from exc

    async def post_help_request(self, request: HelpRequest) -> None:
        self.help_requests.append(request)
        self.console.print(
            Text.assemble(
                ("help needed", "bold yellow"),
                " ",
                (f"({self.thread})", "dim"),
                terminal_text(
                    f": I couldn't find a grounded answer to: {request.question!r}\n  reason: {request.reason}\n"
                    f"  Reply with {REPLY_SYNTAX}."
                ),
            )
        )

    async def post_notice(self, text: str) -> None:
        self.notices.append(text)
        self.notice_console.print(text, markup=False, highlight=False)

    async def update_progress(self, text: str, *, final: bool = False) -> None:
        await self.post_notice(text)

    async def notify_private(self, text: str) -> None:
        await self.post_notice(text)

    def reference(self) -> dict[str, Any]:
        return {"thread": self.thread}


_COMMANDS_HELP = (
    "Commands: /thread NAME (switch thread), /threads (list them), /good or /bad [reason] (rate the "
    "last answer), /help, /quit. Anything else is a question."
)
_COMMANDS = ("/thread", "/threads", "/good", "/bad", "/help", "/quit", "/exit")
#: what reads as a console command: ``/word`` (a path such as ``/etc/hosts`` is a question's text)
_COMMAND = re.compile(r"/[A-Za-z][\w-]*")


async def _read_lines(stdin: TextIO) -> AsyncIterator[str]:
    """Lines of ``stdin`` read by a daemon thread, so Ctrl-C at an idle prompt ends the
    program at once (a blocked ``readline`` in asyncio's default executor would be
    joined at shutdown)."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[str] = asyncio.Queue()

    reconfigure = getattr(stdin, "reconfigure", None)
    if reconfigure:  # bytes that are not UTF-8 arrive as lone surrogates (cleaned later), not as a crash
        try:
            reconfigure(errors="surrogateescape")
        except (ValueError, OSError):
            pass

    def pump() -> None:
        while True:
            try:
                line = stdin.readline()
            except Exception:  # noqa: BLE001 - an unreadable input ends the session, never hangs it
                line = ""
            try:
                loop.call_soon_threadsafe(queue.put_nowait, line)
            except RuntimeError:  # the loop is closed
                return
            if not line:
                return

    threading.Thread(target=pump, name="console-stdin", daemon=True).start()
    while True:
        line = await queue.get()
        if not line:
            return
        yield line


async def _until(lines: AsyncIterator[str], stop: asyncio.Event | None) -> AsyncIterator[str]:
    """``lines`` until ``stop`` is set (a line being answered is finished first)."""
    it = lines.__aiter__()
    while not (stop and stop.is_set()):
        nxt = asyncio.ensure_future(it.__anext__())
        # retrieved even when nobody awaits it (Ctrl-C, stop): else asyncio logs "Task
        # exception was never retrieved ... StopAsyncIteration" at shutdown
        nxt.add_done_callback(lambda f: f.cancelled() or f.exception())
        waits = {nxt} | ({asyncio.ensure_future(stop.wait())} if stop else set())
        done, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for p in pending:
            p.cancel()
        if nxt not in done:
            return
        try:
            yield nxt.result()
        except StopAsyncIteration:
            return


async def run_console(
    runtime: Runtime,
    thread: str = "main",
    stdin: TextIO | None = None,
    console: Console | None = None,
    stop: asyncio.Event | None = None,
) -> None:
    """Interactive chat loop on ``runtime.service`` until ``/quit``, end of input or ``stop``
    (set by SIGTERM in the CLI: the answer in flight is finished, then the loop ends)."""
    console = console or make_console()
    stdin = stdin or sys.stdin
    service = runtime.service
    user = runtime.settings.console.user
    responders: dict[str, ConsoleResponder] = {}
    service.register_platform(
        "console",
        lambda ref: responders.setdefault(
            ref.get("thread", thread), ConsoleResponder(ref.get("thread", thread), console)
        ),
    )
    await service.recover()
    interactive = stdin.isatty()
    console.print(Text.assemble("Threadwise console, thread ", (thread, "bold"), f". {_COMMANDS_HELP}"))

    def prompt() -> Text:
        return Text.assemble((user, "bold green"), " ", (f"({thread})", "dim"), "> ")

    if interactive:
        console.print(prompt(), end="")
    quit_typed = False
    async for raw in _until(_read_lines(stdin), stop):
        line = clean_text(raw).strip()
        if line in ("/quit", "/exit"):
            quit_typed = True
            break
        name, _, arg = line.partition(" ")
        if _COMMAND.fullmatch(name) and name not in _COMMANDS:
            console.print(f"Unknown command {name}. {_COMMANDS_HELP}", markup=False)
        elif name in ("/good", "/bad"):
            last = [a for a in (responders[thread].answers if thread in responders else []) if a.answer_id]
            if not last:
                console.print("No answer to rate in this thread yet.", markup=False)
            else:
                vote = vote_controls.UP if name == "/good" else vote_controls.DOWN
                reason = arg.strip() or None if vote == vote_controls.DOWN else None
                ok = await service.vote(last[-1].answer_id, user, vote, reason)
                console.print(vote_controls.vote_reply(ok, vote, reason=reason), markup=False)
        elif name in ("/thread", "/threads", "/help"):
            if name == "/thread" and arg.strip():
                thread = arg.strip()
                console.print(f"now on thread {thread}", style="dim")
            elif name == "/threads":
                names = sorted({*responders, *[k.split(":", 1)[1] for k in await service.thread_keys("console:")]})
                console.print(", ".join(names) or "(none yet)", markup=False)
            else:
                console.print(_COMMANDS_HELP, markup=False)
        else:
            waiting = thread
            thread, continued = await thread_for(service, thread, line, set(responders))
            if thread != waiting:
                console.print(
                    f"Thread {waiting} waits for an expert (/thread {waiting}, then reply with {REPLY_SYNTAX}); "
                    f"your question {'continues' if continued else 'starts'} thread {thread}.",
                    markup=False,
                    highlight=False,
                )
            if not interactive:
                console.print(prompt() + line)
            out = responders.setdefault(thread, ConsoleResponder(thread, console))
            msg = IncomingMessage(
                platform="console",
                thread_key=f"console:{thread}",
                message_id=f"console:{thread}:{uuid.uuid4().hex}",
                author_id=user,
                author_name=user,
                text=line,
                is_admin=True,
                is_expert=True,
            )
            await service.handle(msg, out)
            if stop and stop.is_set():
                console.print("stopping: the answer above was finished first", style="dim")
                break
        if interactive:
            console.print(prompt(), end="")
    if interactive and not quit_typed:
        console.print()  # end of input (Ctrl-D) or a stop: the shell's prompt on a line of its own
