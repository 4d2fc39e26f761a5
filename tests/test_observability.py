"""What operators plug into: ``python -m threadwise``, JSON log lines carrying the thread
key, the health endpoint and Prometheus metrics of a real ``threadwise run`` process
(Slack HTTP mode and a Mistral-shaped model, both fakes at the network boundary)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import aiohttp

from tests.fakes.bot_process import BotProcess
from tests.fakes.mistral_api import task_of
from tests.fakes.mistral_stall import mistral_server, models_section
from tests.fakes.slack_api import (
    BOT_TOKEN,
    BOT_USER_ID,
    SIGNING_SECRET,
    TEAM_ID,
    FakeSlackAPI,
    SlackEvents,
    write_config,
)
from tests.test_slack_run import free_port, post, thread_posts

ROOT = Path(__file__).resolve().parent.parent
CHANNEL = "C0GENERAL"


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "DISCORD_", "MISTRAL_"))}
    env["PYTHONPATH"] = str(ROOT)
    return env


def test_python_m_threadwise_is_the_threadwise_command(tmp_path):
    """``python -m threadwise`` runs the same command line as ``python -m bot`` (the console
    script's module): same output, same exit codes."""
    graph = subprocess.run(
        [sys.executable, "-m", "threadwise", "graph"],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=tmp_path,
        timeout=120,
    )
    assert graph.returncode == 0, graph.stderr
    same = subprocess.run(
        [sys.executable, "-m", "bot", "graph"], capture_output=True, text=True, env=_env(), cwd=tmp_path, timeout=120
    )
    assert graph.stdout == same.stdout and "retrieve" in graph.stdout
    usage = subprocess.run(
        [sys.executable, "-m", "threadwise", "--help"],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=tmp_path,
        timeout=60,
    )
    assert usage.returncode == 0 and usage.stdout.startswith("usage: threadwise")
    bad = subprocess.run(
        [sys.executable, "-m", "threadwise", "threads", "--config", str(tmp_path / "nope.toml")],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=tmp_path,
        timeout=60,
    )
    assert bad.returncode == 2 and "config file not found" in bad.stderr


def _metric(text: str, name: str, **labels: str) -> float:
    """The value of one sample of a Prometheus text exposition (0 when absent)."""
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        m = re.match(r"^([a-z_]+)(?:\{([^}]*)\})? (\S+)$", line)
        if m and m.group(1) == name and ",".join(sorted((m.group(2) or "").split(","))).strip(",") == want:
            return float(m.group(3))
    return 0.0


async def test_run_process_json_logs_health_and_metrics(tmp_path, fake: FakeSlackAPI):
    """One question through ``threadwise run --log-format json``: every line the process
    writes is a JSON object; the lines of the turn carry its thread key, platform and
    message id; no secret and no document text is logged; /healthz says Slack is
    connected; /metrics counts the question, its outcome, its LLM calls and its latency."""
    port, monitor = free_port(), free_port()
    events = SlackEvents()
    async with mistral_server() as model:
        config = write_config(
            tmp_path,
            fake,
            slack=f'http_port = {port}\nhttp_host = "127.0.0.1"',
            extra=models_section(model) + f"\n[monitoring]\nhealth_port = {monitor}\nmetrics_port = {monitor}\n",
        )
        proc = BotProcess(
            config, port, tmp_path / "run.log", {"MISTRAL_API_KEY": "test-key-SECRET"}, args=["--log-format", "json"]
        )
        try:
            async with aiohttp.ClientSession() as session:
                await proc.wait_ready(session)
                async with session.get(f"http://127.0.0.1:{monitor}/healthz") as resp:
                    assert resp.status == 200
                    assert await resp.json() == {"status": "ok", "platforms": {"slack": {"connected": True}}}
                ts = fake.next_ts()
                event = SlackEvents.message(
                    user="UASKER",
                    channel=CHANNEL,
                    ts=ts,
                    kind="app_mention",
                    text=f"<@{BOT_USER_ID}> how do I roll back a deploy?",
                )
                status, _ = await post(session, proc.url + "/slack/events", events.event(event))
                assert status == 200
                await fake.wait_for(
                    lambda: thread_posts(fake, ts) and fake.reactions.get((CHANNEL, ts)) == ["white_check_mark"],
                    timeout=60,
                )
                for _ in range(100):  # the turn ends just after its last post (checkpoints pruned)
                    async with session.get(f"http://127.0.0.1:{monitor}/metrics") as resp:
                        assert resp.status == 200 and resp.content_type == "text/plain"
                        metrics = await resp.text()
                    if _metric(metrics, "threadwise_runs_in_flight") == 0:
                        break
                    await asyncio.sleep(0.1)
        finally:
            output = await proc.stop()
    assert "make rollback" in thread_posts(fake, ts)[0]["text"]

    lines = [json.loads(line) for line in output.splitlines() if line.strip()]  # every line is JSON
    assert all({"time", "level", "logger", "message"} <= set(rec) for rec in lines)
    key = f"slack:{TEAM_ID}:{CHANNEL}:{ts}"
    turn = [rec for rec in lines if rec.get("thread_key") == key]
    messages = " | ".join(rec["message"] for rec in turn)
    assert re.search(r"question from UASKER", messages), messages  # the service's line
    assert re.search(r"answer .* in \d", messages), messages  # the outcome line
    assert any(rec["logger"].startswith("bot.platforms.slack") for rec in turn), messages  # the adapter's lines
    assert all(
        rec["platform"] == "slack" and rec["message_id"] == f"slack:{CHANNEL}:{ts}"
        for rec in turn
        if rec["logger"] == "bot.service"
    )
    for secret in (BOT_TOKEN, SIGNING_SECRET, "test-key-SECRET", "ten minutes", "PagerDuty"):
        assert secret not in output  # no secrets, no document text

    assert _metric(metrics, "threadwise_questions_total", platform="slack") == 1
    assert _metric(metrics, "threadwise_outcomes_total", platform="slack", outcome="answer") == 1
    graph_calls = [r for r in model.requests if task_of(r) != "check"]  # `run` checked the model at start
    assert _metric(metrics, "threadwise_llm_calls_total") == len(graph_calls) > 0
    assert _metric(metrics, "threadwise_llm_tokens_total", direction="output") > 0
    assert _metric(metrics, "threadwise_turn_seconds_count", outcome="answer") == 1
    assert _metric(metrics, "threadwise_turn_seconds_sum", outcome="answer") > 0
    assert "threadwise_runs_waiting 0.0" in metrics and "threadwise_runs_in_flight 0.0" in metrics


async def test_text_logs_put_the_thread_key_in_one_place(tmp_path, fake: FakeSlackAPI):
    """The default text format: ``time LEVEL logger [thread key] message``, the key once."""
    port = free_port()
    events = SlackEvents()
    config = write_config(tmp_path, fake, slack=f'http_port = {port}\nhttp_host = "127.0.0.1"')
    proc = BotProcess(config, port, tmp_path / "run.log")
    try:
        async with aiohttp.ClientSession() as session:
            await proc.wait_ready(session)
            ts = fake.next_ts()
            event = SlackEvents.message(
                user="UASKER", channel=CHANNEL, ts=ts, kind="app_mention", text=f"<@{BOT_USER_ID}> "
            )
            status, _ = await post(session, proc.url + "/slack/events", events.event(event))
            assert status == 200
            await fake.wait_for(lambda: thread_posts(fake, ts), timeout=30)
    finally:
        output = await proc.stop()
    key = f"slack:{TEAM_ID}:{CHANNEL}:{ts}"
    empty = [line for line in output.splitlines() if "empty question" in line]
    assert len(empty) == 1 and re.match(
        r"^\S+ \S+ INFO bot\.service: \[" + re.escape(key) + r"\] empty question", empty[0]
    ), output[-2000:]
    assert empty[0].count(key) == 1


def test_metrics_without_prometheus_client_is_a_configuration_error(tmp_path):
    """``metrics_port`` set but the ``metrics`` extra not installed: exit 2 with one line
    saying what to install, before anything starts."""
    blocked = tmp_path / "site"
    (blocked / "prometheus_client").mkdir(parents=True)
    (blocked / "prometheus_client" / "__init__.py").write_text("raise ImportError('not installed')\n")
    config = tmp_path / "config.toml"
    # a knowledge folder that exists: the missing extra is the one thing wrong with this configuration
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "on-call.md").write_text("# On call\n\nThe on-call engineer answers within 15 minutes.\n")
    config.write_text("[monitoring]\nmetrics_port = 9\n")
    env = dict(_env(), PYTHONPATH=f"{blocked}{os.pathsep}{ROOT}")
    run = subprocess.run(
        [sys.executable, "-m", "threadwise", "run", "--config", str(config)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert run.returncode == 2, run.stderr
    assert run.stderr.strip().splitlines() == [
        "Configuration error: [monitoring] metrics_port needs prometheus-client: pip install 'threadwise[metrics]'"
    ]


async def test_a_json_line_keeps_a_traceback_and_the_context_of_tasks_a_turn_starts():
    """A traceback stays inside its one JSON line; a task started inside a turn logs with
    the turn's fields; a line outside any turn has none."""
    import io
    import logging

    from bot.logs import log_context, setup_logging

    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    stream = io.StringIO()
    setup_logging("INFO", "json", stream)
    log = logging.getLogger("threadwise.test")
    try:

        async def later() -> None:
            await asyncio.sleep(0)
            log.info("from a task")

        with log_context(thread_key="discord:1:2", platform="discord", message_id="3"):
            try:
                raise ValueError("boom")
            except ValueError:
                log.exception("it failed")
            task = asyncio.create_task(later())
        await task
        log.info("outside")
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
    failed, from_task, outside = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert failed["message"] == "it failed" and "ValueError: boom" in failed["exception"]
    assert failed["thread_key"] == from_task["thread_key"] == "discord:1:2"
    assert (from_task["platform"], from_task["message_id"]) == ("discord", "3")
    assert "thread_key" not in outside and outside["message"] == "outside"


def test_a_nested_context_for_another_thread_does_not_keep_the_outer_message_id():
    from bot.logs import current, log_context

    with log_context(thread_key="slack:T1:C1:1.0", platform="slack", message_id="slack:C1:1.5"):
        with log_context(thread_key="slack:T1:C1:1.0"):
            assert current()["message_id"] == "slack:C1:1.5"  # the same thread: the same turn
        with log_context(thread_key="slack:T1:C2:2.0", platform="slack"):
            assert current() == {"thread_key": "slack:T1:C2:2.0", "platform": "slack"}
    assert current() == {}


def _json_mode_stderr(
    tmp_path: Path, args: list[str], extra: str = "", env: dict[str, str] | None = None
) -> tuple[int, str]:
    from tests.conftest import write_config

    cfg = write_config(tmp_path, extra=extra)
    proc = subprocess.run(
        [sys.executable, "-m", "bot", *args, "--config", str(cfg), "--log-format", "json"],
        cwd=tmp_path,
        env={**_env(), **(env or {})},
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    return proc.returncode, proc.stderr


def _all_json(stderr: str) -> list[dict]:
    records = []
    for line in stderr.splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            raise AssertionError(f"not a JSON line: {line!r}\n{stderr}") from None
        assert records[-1].get("level") and records[-1].get("message"), line
    return records


def test_json_mode_every_stderr_line_of_ask_is_json(tmp_path):
    code, stderr = _json_mode_stderr(tmp_path, ["ask", "hello"])
    assert code == 0, stderr
    assert any(r["message"].strip().startswith("…") for r in _all_json(stderr)), stderr  # the status lines


def test_json_mode_the_final_error_lines_are_json(tmp_path):
    # a failing ask: the model server cannot be reached
    code, stderr = _json_mode_stderr(
        tmp_path,
        ["ask", "how do I deploy the container?"],
        extra=f'provider = "mistral"\nmistral_base_url = "http://127.0.0.1:{free_port()}/v1"\n',
        env={"MISTRAL_API_KEY": "k"},
    )
    assert code == 2, stderr  # found by the start-up call to the model
    records = _all_json(stderr)
    assert any(r["level"] == "ERROR" and "cannot connect at http://127.0.0.1:" in r["message"] for r in records), stderr
    # a configuration error
    cfg_dir = tmp_path / "bad"
    cfg_dir.mkdir()
    code, stderr = _json_mode_stderr(cfg_dir, ["ask", "hello"], extra="max_retries = -5\n")
    assert code == 2, stderr
    records = _all_json(stderr)
    assert [r["level"] for r in records] == ["ERROR"] and "Configuration error" in records[0]["message"], stderr
