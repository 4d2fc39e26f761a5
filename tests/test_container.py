"""The container image and compose.yaml, really built and run with podman (marked ``container``:
`make test` leaves them out, .ci/run runs them after it, `make test-containers` alone).

The base images are built from Debian packages (scripts/build-base-image.sh, cached under
~/.cache/threadwise), the image from the Dockerfile; the bot in the container talks to the
fake Slack Web API and a fake Mistral API on the host, and gets signed Slack events over
HTTP, as Slack's Events API would send them.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
import uuid
from pathlib import Path

import aiohttp
import pytest

from tests.fakes.containers import (
    HOST_FROM_CONTAINER,
    IMAGE,
    ROOT,
    build_base_image,
    build_image,
    container_ip,
    logs,
    podman,
    podman_env,
    reachable,
    remove,
    require_podman,
    serve_everywhere,
)
from tests.fakes.replicas import ReplicaModel, add_users, replies_in
from tests.fakes.slack_api import BOT_TOKEN, BOT_USER_ID, SIGNING_SECRET, FakeSlackAPI, SlackEvents, all_text
from tests.test_slack_run import free_port

pytestmark = [pytest.mark.container, pytest.mark.timeout(1800)]
CHANNEL = "C0GENERAL"


@pytest.fixture(scope="module")
def image() -> str:
    require_podman()
    build_image()
    return IMAGE


@pytest.fixture
async def fake():
    f = FakeSlackAPI()
    await f.start()
    add_users(f)
    try:
        yield f
    finally:
        await f.stop()


def question(events: SlackEvents, fake: FakeSlackAPI, token: str) -> tuple[str, tuple[str, dict]]:
    """A signed app_mention asking about Socket Mode (the image's knowledge base is the user
    guide), carrying ``token`` so the answer names the question it answers."""
    ts = fake.next_ts()
    ev = events.message(
        user="UASKER",
        channel=CHANNEL,
        ts=ts,
        kind="app_mention",
        text=f"<@{BOT_USER_ID}> {token} how do I run the bot in Slack socket mode?",
    )
    return ts, events.event(ev, event_id=f"Ev{uuid.uuid4().hex[:10]}")


async def wait_healthy(session: aiohttp.ClientSession, url: str, name: str, timeout: float = 180) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        try:
            async with session.get(url, timeout=aiohttp.ClientTimeout(total=3)) as resp:
                if resp.status == 200:
                    return
        except (aiohttp.ClientError, TimeoutError):
            pass
        state = podman("inspect", "--format", "{{.State.Status}}", name, check=False).stdout.strip()
        assert state in ("running", "created", "configured", ""), f"{name} is {state}:\n{logs(name)[-3000:]}"
        await asyncio.sleep(0.5)
    raise TimeoutError(f"{url} not healthy within {timeout} s:\n{logs(name)[-3000:]}")


def test_image_is_lean_non_root_and_checks_its_health(image):
    """The lean image: no PyTorch, llama.cpp or compiler; a non-root user; HEALTHCHECK on
    /healthz; `threadwise run` by default; the data under one volume."""
    probe = (
        "import importlib.util, json, os, shutil; "
        "print(json.dumps({'modules': [m for m in ('torch', 'llama_cpp', 'sentence_transformers', "
        "'langchain_community', 'bot', 'slack_bolt', 'psycopg', 'prometheus_client') "
        "if importlib.util.find_spec(m)], 'compilers': [c for c in ('cc', 'gcc', 'g++', 'clang', 'make') "
        "if shutil.which(c)], 'uid': os.getuid()}))"
    )
    out = json.loads(podman("run", "--rm", "--entrypoint", "python", image, "-c", probe).stdout)
    assert out["modules"] == ["bot", "slack_bolt", "psycopg", "prometheus_client"]
    assert out["compilers"] == []
    assert out["uid"] != 0
    info = json.loads(podman("image", "inspect", image).stdout)[0]
    config = info["Config"]
    assert config["Entrypoint"] == ["threadwise"] and config["Cmd"] == ["run"]
    assert "/data" in config["Volumes"]
    assert "/healthz" in " ".join(info["Healthcheck"]["Test"])  # podman shows it beside Config
    assert config["User"] == "threadwise"
    # package data made it into the wheel: the Slack manifest command works in the image
    manifest = podman("run", "--rm", image, "slack", "manifest", "--http", "https://bot.example.com").stdout
    assert "request_url: https://bot.example.com/slack/events" in manifest


async def test_container_answers_slack_with_secrets_from_files(image, fake, tmp_path):
    """One container (host network): /healthz turns 200, podman's HEALTHCHECK says healthy, a
    signed event is answered in its thread; the bot token comes from a secret file in
    /run/secrets, the rest of the settings from THREADWISE_* variables; SIGTERM stops it
    with exit code 0."""
    name = f"tw-test-{uuid.uuid4().hex[:8]}"
    volume = f"{name}-data"
    secrets = tmp_path / "secrets"
    secrets.mkdir(mode=0o755)
    (secrets / "SLACK_BOT_TOKEN").write_text(BOT_TOKEN + "\n")
    (secrets / "SLACK_BOT_TOKEN").chmod(0o644)
    slack_port, health_port = free_port(), free_port()
    model = ReplicaModel()
    events = SlackEvents()
    async with serve_everywhere({"/v1/chat/completions": model.chat}) as model_port:
        env = {
            "SLACK_SIGNING_SECRET": SIGNING_SECRET,
            "MISTRAL_API_KEY": "test-key",
            "THREADWISE_SLACK__MODE": "http",
            "THREADWISE_SLACK__HTTP_PORT": str(slack_port),
            "THREADWISE_SLACK__API_BASE_URL": fake.base_url,
            "THREADWISE_MONITORING__HEALTH_PORT": str(health_port),
            "THREADWISE_MONITORING__METRICS_PORT": str(health_port),
            "THREADWISE_MODELS__PROVIDER": "mistral",
            "THREADWISE_MODELS__MISTRAL_BASE_URL": f"http://127.0.0.1:{model_port}/v1",
            "THREADWISE_MODELS__MAX_RETRIES": "0",
            "THREADWISE_KNOWLEDGE__EMBEDDINGS": "none",
            "THREADWISE_WEB__ENABLED": "false",
        }
        try:
            podman(
                "run",
                "--detach",
                "--name",
                name,
                "--network",
                "host",
                "--volume",
                f"{volume}:/data",
                "--volume",
                f"{secrets}:/run/secrets:ro",
                *[f"--env={k}={v}" for k, v in env.items()],
                image,
            )
            async with aiohttp.ClientSession() as session:
                await wait_healthy(session, f"http://127.0.0.1:{health_port}/healthz", name)
                health = podman("healthcheck", "run", name, check=False)
                assert health.returncode == 0, health.stdout + health.stderr
                ts, request = question(events, fake, "qtok-1-1")
                body, headers = request
                async with session.post(
                    f"http://127.0.0.1:{slack_port}/slack/events", data=body.encode(), headers=headers
                ) as resp:
                    assert resp.status == 200
                await fake.wait_for(lambda: replies_in(fake, ts), timeout=120)
                assert "qtok-1-1" in all_text(replies_in(fake, ts)[0]), logs(name)[-3000:]
                async with session.get(f"http://127.0.0.1:{health_port}/metrics") as resp:
                    assert resp.status == 200 and "threadwise" in await resp.text()
            podman("stop", "--time", "20", name, timeout=60)
            state = json.loads(podman("inspect", name).stdout)[0]["State"]
            assert state["ExitCode"] == 0, logs(name)[-3000:]
            # the data stayed in the volume: checkpoints, bookkeeping and the index
            listing = podman("run", "--rm", "--volume", f"{volume}:/data", "--entrypoint", "ls", image, "/data").stdout
            assert {"checkpoints.sqlite", "bookkeeping.sqlite", "index"} <= set(listing.split())
        finally:
            remove(name)
            podman("volume", "rm", "--force", volume, check=False)


def _compose(project: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        ["podman-compose", "-p", project.name, *args],
        cwd=project,
        env=podman_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if proc.returncode:
        raise AssertionError(f"podman-compose {' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


async def test_compose_two_replicas_on_postgres_answer_each_question_once(image, fake, tmp_path):
    """compose.yaml as shipped, with a .env from .env.example's variables: PostgreSQL in a
    container, the bot scaled to two replicas on it (Slack HTTP mode), each event delivered
    to both replicas (as Slack's retries can): every question is answered exactly once."""
    if shutil.which("podman-compose") is None:
        pytest.skip("needs podman-compose (apt-get install podman-compose; .ci/run does)")
    build_base_image("postgres")
    project = tmp_path / f"twc{uuid.uuid4().hex[:6]}"
    project.mkdir()
    shutil.copy(ROOT / "compose.yaml", project / "compose.yaml")
    model = ReplicaModel(delay=0.05)
    events = SlackEvents()
    async with (
        serve_everywhere({"/v1/chat/completions": model.chat}) as model_port,
        reachable(
            fake._runner  # type: ignore[arg-type]
        ) as slack_port,
    ):
        dotenv = {
            "THREADWISE_IMAGE": image,
            "THREADWISE_REPLICAS": "2",
            "POSTGRES_PASSWORD": "compose-test",
            "SLACK_BOT_TOKEN": BOT_TOKEN,
            "SLACK_SIGNING_SECRET": SIGNING_SECRET,
            "MISTRAL_API_KEY": "test-key",
            "THREADWISE_SLACK__MODE": "http",
            "THREADWISE_SLACK__API_BASE_URL": f"http://{HOST_FROM_CONTAINER}:{slack_port}/api/",
            "THREADWISE_MODELS__PROVIDER": "mistral",
            "THREADWISE_MODELS__MISTRAL_BASE_URL": f"http://{HOST_FROM_CONTAINER}:{model_port}/v1",
            "THREADWISE_MODELS__MAX_RETRIES": "0",
            "THREADWISE_KNOWLEDGE__EMBEDDINGS": "none",
            "THREADWISE_WEB__ENABLED": "false",
        }
        (project / ".env").write_text("".join(f"{k}={v}\n" for k, v in dotenv.items()))
        try:
            _compose(project, "up", "-d", timeout=600)
            names = sorted(
                n for n in podman("ps", "--format", "{{.Names}}").stdout.split() if n.startswith(f"{project.name}_bot_")
            )
            assert len(names) == 2, names
            urls = {n: f"http://{container_ip(n)}" for n in names}
            async with aiohttp.ClientSession() as session:
                await asyncio.gather(*(wait_healthy(session, f"{u}:8080/healthz", n) for n, u in urls.items()))
                asked = {}
                for i in range(4):
                    ts, (body, headers) = question(events, fake, f"qtok-{i}-1")
                    asked[ts] = f"qtok-{i}-1"
                    for n, u in urls.items():  # every event to both replicas
                        async with session.post(f"{u}:3000/slack/events", data=body.encode(), headers=headers) as resp:
                            assert resp.status == 200, (n, await resp.text())
                await fake.wait_for(lambda: all(replies_in(fake, ts) for ts in asked), timeout=180)
                await asyncio.sleep(3)  # a second answer would come within this
            for ts, token in asked.items():
                replies = replies_in(fake, ts)
                assert len(replies) == 1, [all_text(p) for p in replies]
                assert set(re.findall(r"qtok-\d+-\d+", all_text(replies[0]))) == {token}
            both = [logs(n) for n in names]
            assert all("Traceback" not in text for text in both), both
        finally:
            subprocess.run(
                ["podman-compose", "-p", project.name, "down", "-v"],
                cwd=project,
                env=podman_env(),
                capture_output=True,
                timeout=300,
            )
