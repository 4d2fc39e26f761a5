"""``python -m bot run`` as a real subprocess in Slack HTTP mode, for tests that drive the
bot through its real boundary (signed events over HTTP, the fakes at the network edge).
One lifecycle (start, wait until /healthz answers, SIGKILL, graceful stop) for the Slack
run tests, the crash-recovery tests and the PostgreSQL replicas."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import aiohttp

from tests.fakes.slack_api import BOT_TOKEN, SIGNING_SECRET

ROOT = Path(__file__).resolve().parents[2]


def child_pids(pid: int) -> list[int]:
    """The child processes of ``pid`` (a bot's graph workers, ``[service] graph_workers``), from
    ``/proc/PID/task/*/children`` (Linux); [] once the process is gone."""
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            out += [int(p) for p in task.read_text().split()]
        except OSError:
            pass
    return out


class BotProcess:
    """Start ``python -m bot run --config config`` with the Slack HTTP endpoint on ``port``.

    Args:
        config: the config.toml to run with.
        port: the ``[slack] http_port`` written in it.
        log: file receiving stdout and stderr.
        env: extra environment (``MISTRAL_API_KEY``, ``THREADWISE_DATABASE_URL``...); the
            caller's SLACK_/DISCORD_/MISTRAL_/TAVILY_/THREADWISE_/LANGSMITH_/LANGCHAIN_ variables are
            dropped.
        args: more arguments after ``run`` (e.g. ``["--log-format", "json"]``).
    """

    def __init__(
        self, config: Path, port: int, log: Path, env: dict[str, str] | None = None, args: Sequence[str] = ()
    ) -> None:
        full = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(
                ("SLACK_", "DISCORD_", "MISTRAL_", "TAVILY_", "THREADWISE_", "LANGSMITH_", "LANGCHAIN_")
            )
        }
        full.update(
            SLACK_BOT_TOKEN=BOT_TOKEN,
            SLACK_SIGNING_SECRET=SIGNING_SECRET,
            HF_HUB_OFFLINE="1",
            PYTHONPATH=str(ROOT),
            **(env or {}),
        )
        self.port = port
        self.log = log
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bot", "run", "--config", str(config), *args],
            cwd=ROOT,
            env=full,
            stdout=log.open("w"),
            stderr=subprocess.STDOUT,
        )
        self.url = f"http://127.0.0.1:{port}"

    def text(self) -> str:
        """What the process printed so far."""
        return self.log.read_text(errors="replace")

    async def wait_ready(self, session: aiohttp.ClientSession, timeout: float = 120) -> None:
        """Wait until /healthz answers 200 (seconds); fail with the log if the process exits."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline:
            assert self.proc.poll() is None, self.text()[-3000:]
            try:
                async with session.get(self.url + "/healthz") as resp:
                    if resp.status == 200:
                        return
            except aiohttp.ClientConnectionError:
                pass
            await asyncio.sleep(0.2)
        raise TimeoutError(self.text()[-3000:])

    async def kill(self) -> None:
        """SIGKILL, as a crash."""
        self.proc.send_signal(signal.SIGKILL)
        while self.proc.poll() is None:
            await asyncio.sleep(0.05)

    async def stop(self) -> str:
        """SIGTERM (graceful drain), SIGKILL after 15 s; returns the log."""
        if self.proc.poll() is None:
            self.proc.terminate()
            for _ in range(300):
                if self.proc.poll() is not None:
                    break
                await asyncio.sleep(0.05)
            else:
                self.proc.kill()
        return self.text()


def cli_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a ``python -m bot`` command in a test: no chat tokens, model keys or
    THREADWISE_ settings of the caller, offline Hugging Face hub, this checkout first."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("MISTRAL_", "TAVILY_", "SLACK_", "DISCORD_", "THREADWISE_", "LANGSMITH_", "LANGCHAIN_"))
    }
    env.update(HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT), **(extra or {}))
    return env


def threadwise(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 300, columns: int | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m bot ARGS`` to its end, stdin closed, output captured.

    Args:
        env: more environment (:func:`cli_env` is the rest).
        timeout: seconds before the process is killed (the test fails).
        columns: run with stdout on a pseudo-terminal this many columns wide (``COLUMNS``),
            as a user's terminal; None: stdout is a pipe. stderr is a pipe either way.
    """
    command = [sys.executable, "-m", "bot", *args]
    if columns is None:
        return subprocess.run(
            command,
            cwd=cwd,
            env=cli_env(env),
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
    import pty

    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        command,
        cwd=cwd,
        env=cli_env({"COLUMNS": str(columns), "LINES": "50", "TERM": "xterm", **(env or {})}),
        stdin=subprocess.DEVNULL,
        stdout=follower,
        stderr=subprocess.PIPE,
        text=True,
    )
    os.close(follower)
    import select
    import time

    chunks, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not select.select([leader], [], [], 1.0)[0]:
            continue
        try:
            data = os.read(leader, 65536)
        except OSError:  # EIO: the process closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(leader)
    _, err = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
    text = b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n")
    return subprocess.CompletedProcess(command, proc.returncode, text, err)
