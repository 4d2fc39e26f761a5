"""SIGTERM in the terminal front ends (``ask``, ``console``) finishes the answer in flight
before exiting, as ``run`` does for Slack and Discord: nothing is dropped mid-answer."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest

from tests.fakes import write_platform_config
from tests.fakes.mistral_stall import mistral_server, models_section
from tests.fakes.slack_api import KB_FILES

ROOT = Path(__file__).resolve().parent.parent


async def start(args: list[str], cfg: Path) -> asyncio.subprocess.Process:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "DISCORD_", "MISTRAL_", "TAVILY_"))}
    env.update(HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT), MISTRAL_API_KEY="k")
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        *args,
        "--config",
        str(cfg),
        cwd=ROOT,
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


@pytest.mark.parametrize("command", ["ask", "console"])
async def test_sigterm_finishes_the_answer_in_flight(tmp_path, command):
    async with mistral_server(stall_on={"generate"}) as model:
        cfg = write_platform_config(tmp_path, KB_FILES, models_section(model))
        question = "how do I roll back a deploy?"
        proc = await start(["ask", question] if command == "ask" else ["console"], cfg)
        if command == "console":
            proc.stdin.write(f"{question}\n".encode())
            await proc.stdin.drain()  # stdin stays open: only the signal ends the session
        await asyncio.wait_for(model.stalled.wait(), 90)
        proc.send_signal(signal.SIGTERM)
        await asyncio.sleep(1.0)
        assert proc.returncode is None  # still finishing the answer
        model.release()
        out, err = await asyncio.wait_for(proc.communicate(), 60)
    output = (out + err).decode()
    assert proc.returncode == 0, output
    assert "make rollback" in output
