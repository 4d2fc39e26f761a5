"""What the CLI prints: its two consoles, the reindex progress bar, and output paths checked early.

Commands print through :data:`out` (``out.console`` for results on stdout, ``out.err`` for
errors and status on stderr); :func:`bot.cli.main.main` switches ``out.err`` to JSON lines
when ``--log-format json`` or ``[logging] format = "json"`` asks for it.
"""

from __future__ import annotations

from pathlib import Path
from types import TracebackType

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from bot.config import ConfigError
from bot.terminal import make_console


class Output:
    """The CLI's consoles: ``console`` (stdout) and ``err`` (stderr, text or JSON lines)."""

    def __init__(self) -> None:
        self.console: Console = make_console()
        self.err: Console = make_console(stderr=True)

    def use_json_lines(self, json_lines: bool) -> None:
        """Make ``err`` print one JSON object per line (``json_lines`` True) or plain text."""
        self.err = make_console(stderr=True, json_lines=json_lines)


out = Output()


class ProgressBar:
    """Rich progress bar for reindex phases on stderr: ``progress(phase, done, total)``."""

    def __init__(self) -> None:
        self.bar = Progress(
            TextColumn("{task.description:>8}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=out.err,
            transient=False,
        )
        self.tasks: dict[str, TaskID] = {}

    def __enter__(self) -> ProgressBar:
        return self  # started at the first phase: an empty bar would leave a blank line on stderr

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.tasks:
            self.bar.__exit__(exc_type, exc, tb)

    def __call__(self, phase: str, done: int, total: int) -> None:
        if not self.tasks:
            self.bar.start()
        if phase not in self.tasks:
            self.tasks[phase] = self.bar.add_task(phase, total=total)
        self.bar.update(self.tasks[phase], completed=done, total=total)


def check_output(path: str) -> None:
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
