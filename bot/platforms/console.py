"""Console adapter: chat with the bot in a terminal, threads by name.

Lines are questions on the current thread (``console:<name>``). Commands:
``/thread NAME`` switch thread, ``/threads`` list them, ``/quit`` (or end of input).
When the graph pauses for a human, the help request is printed; your next line on that
thread resumes it: ``answer: ...``, ``retry: <hint>`` or ``dismiss``.
Works with piped input too.
"""

from __future__ import annotations

import asyncio
import itertools
import uuid
import sys
from typing import Any, TextIO

from rich.console import Console

from bot.protocol import Answer, HelpRequest, IncomingMessage, Status

_STATUS_TEXT = {
    Status.RECEIVED: "received",
    Status.SEARCHING: "searching the knowledge base",
    Status.WEB: "searching the web",
    Status.WRITING: "writing",
    Status.WAITING_HUMAN: "waiting for a human",
    Status.DONE: "done",
    Status.APOLOGY: "could not answer",
}


def format_answer(answer: Answer) -> str:
    """Markdown text of an answer with its sources and route note (for terminals)."""
    lines = [answer.text.strip() or "(empty answer)"]
    if answer.sources:
        lines.append("\nSources:")
        lines += [f"  [{i}] {s.location}" + (f" — {s.title}" if s.title and s.title != s.location else "")
                  for i, s in enumerate(answer.sources, start=1)]
    lines.append(f"\n({answer.route_note}; path: {' -> '.join(answer.route) or 'n/a'})")
    return "\n".join(lines)


class ConsoleResponder:
    """Prints statuses, answers and help requests for one console thread."""

    def __init__(self, thread: str, console: Console | None = None, show_status: bool = True):
        self.thread = thread
        self.console = console or Console(highlight=False)
        self.show_status = show_status
        self.statuses: list[Status] = []
        self.answers: list[Answer] = []
        self.help_requests: list[HelpRequest] = []
        self.notices: list[str] = []

    async def set_status(self, status: Status) -> None:
        self.statuses.append(status)
        if self.show_status:
            self.console.print(f"[dim]  … {_STATUS_TEXT[status]}[/dim]")

    async def post_answer(self, answer: Answer) -> None:
        self.answers.append(answer)
        self.console.print(f"[bold cyan]threadwise[/bold cyan] [dim]({self.thread})[/dim]")
        self.console.print(format_answer(answer), markup=False, highlight=False)

    async def post_help_request(self, request: HelpRequest) -> None:
        self.help_requests.append(request)
        self.console.print(
            f"[bold yellow]help needed[/bold yellow] [dim]({self.thread})[/dim]: I couldn't find a grounded "
            f"answer to: {request.question!r}\n  reason: {request.reason}\n"
            "  Reply with `answer: ...`, `retry: <hint>` or `dismiss`.", markup=True, highlight=False)

    async def post_notice(self, text: str) -> None:
        self.notices.append(text)
        self.console.print(text, markup=False, highlight=False)

    async def update_progress(self, text: str) -> None:
        await self.post_notice(text)

    async def notify_private(self, text: str) -> None:
        await self.post_notice(text)

    def reference(self) -> dict[str, Any]:
        return {"thread": self.thread}


async def run_console(runtime: Any, thread: str = "main", stdin: TextIO | None = None,
                      console: Console | None = None) -> None:
    """Interactive chat loop on ``runtime.service`` until ``/quit`` or end of input."""
    console = console or Console(highlight=False)
    stdin = stdin or sys.stdin
    service = runtime.service
    user = runtime.settings.console.user
    responders: dict[str, ConsoleResponder] = {}
    service.register_platform("console", lambda ref: responders.setdefault(
        ref.get("thread", thread), ConsoleResponder(ref.get("thread", thread), console)))
    await service.recover()
    interactive = stdin.isatty()
    console.print(f"Threadwise console. Thread [bold]{thread}[/bold]. Ask a question; /thread NAME, /threads, /quit.")
    counter = itertools.count(1)
    while True:
        if interactive:
            console.print(f"[bold green]{user}[/bold green] [dim]({thread})[/dim]> ", end="")
        line = await asyncio.to_thread(stdin.readline)
        if not line:
            break
        line = line.strip()
        if line in ("/quit", "/exit"):
            break
        if line.startswith("/thread "):
            thread = line.split(None, 1)[1].strip() or thread
            console.print(f"[dim]now on thread {thread}[/dim]")
            continue
        if line == "/threads":
            console.print(", ".join(sorted(responders)) or "(none yet)")
            continue
        if not interactive:
            console.print(f"[bold green]{user}[/bold green] [dim]({thread})[/dim]> {line}", markup=True)
        out = responders.setdefault(thread, ConsoleResponder(thread, console))
        msg = IncomingMessage(platform="console", thread_key=f"console:{thread}",
                              message_id=f"console:{thread}:{next(counter)}:{uuid.uuid4().hex}", author_id=user,
                              author_name=user, text=line, is_admin=True, is_expert=True)
        await service.handle(msg, out)
