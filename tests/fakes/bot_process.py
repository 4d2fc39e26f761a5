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
