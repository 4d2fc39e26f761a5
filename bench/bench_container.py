"""Shipping numbers: the image sizes, the container's cold start to /healthz 200, and the lean
install for hosted models (time and size of `pip install threadwise[postgres,metrics]`).

    python bench/bench_container.py                      # lean image, 3 cold starts, lean install
    python bench/bench_container.py --offline-image      # also build and measure VARIANT=offline
    python bench/bench_container.py --json bench/results/container.json

Cold start: `podman run` of the lean image (host network, a fresh volume, Slack in HTTP mode
against the fake Slack API, a hosted model configured, the image's own knowledge base
indexed keyword-only at start) until GET /healthz answers 200, measured from the moment
`podman run` is called; repeated with a fresh volume each time (every start builds the
index). The lean install: a new virtual environment, `pip install --only-binary=:all:
.[postgres,metrics]` with pip's cache off (the wheels come from the package index), its
time and the environment's size on disk. Needs podman (see tests/fakes/containers.py).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import aiohttp  # noqa: E402

from tests.fakes.containers import IMAGE, build_image, image_size, podman, remove  # noqa: E402
from tests.fakes.slack_api import BOT_TOKEN, SIGNING_SECRET, FakeSlackAPI  # noqa: E402
from tests.test_slack_run import free_port  # noqa: E402


def du(path: Path) -> int:
    return int(subprocess.run(["du", "-sb", str(path)], capture_output=True, text=True).stdout.split()[0])


async def cold_start(image: str) -> float:
    """Seconds from `podman run` to the first 200 of /healthz (fresh volume)."""
    fake = await FakeSlackAPI().start()
    name = f"tw-bench-{uuid.uuid4().hex[:8]}"
    slack_port, health_port = free_port(), free_port()
    env = {
        "SLACK_BOT_TOKEN": BOT_TOKEN,
        "SLACK_SIGNING_SECRET": SIGNING_SECRET,
        "MISTRAL_API_KEY": "bench-key",
        "THREADWISE_SLACK__MODE": "http",
        "THREADWISE_SLACK__HTTP_PORT": str(slack_port),
        "THREADWISE_SLACK__API_BASE_URL": fake.base_url,
        "THREADWISE_MONITORING__HEALTH_PORT": str(health_port),
        "THREADWISE_MONITORING__METRICS_PORT": str(health_port),
        "THREADWISE_KNOWLEDGE__EMBEDDINGS": "none",
    }
    try:
        start = time.monotonic()
        podman(
            "run",
            "--detach",
            "--name",
            name,
            "--network",
            "host",
            "--volume",
            f"{name}:/data",
            *[f"--env={k}={v}" for k, v in env.items()],
            image,
        )
        async with aiohttp.ClientSession() as session:
            while time.monotonic() - start < 300:
                try:
                    async with session.get(f"http://127.0.0.1:{health_port}/healthz") as resp:
                        if resp.status == 200:
                            return time.monotonic() - start
                except aiohttp.ClientError:
                    pass
                await asyncio.sleep(0.05)
        raise TimeoutError(podman("logs", name, check=False).stderr[-2000:])
    finally:
        remove(name)
        podman("volume", "rm", "--force", name, check=False)
        await fake.stop()


def lean_install() -> dict:
    """Time and size of the hosted install into a new venv (pip's cache off)."""
    with tempfile.TemporaryDirectory() as tmp:
        venv = Path(tmp) / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        start = time.monotonic()
        proc = subprocess.run(
            [
                str(venv / "bin" / "pip"),
                "install",
                "--no-cache-dir",
                "--only-binary=:all:",
                f"{ROOT}[postgres,metrics]",
            ],
            capture_output=True,
            text=True,
        )
        seconds = time.monotonic() - start
        if proc.returncode:
            raise RuntimeError(proc.stdout[-2000:] + proc.stderr[-2000:])
        listed = subprocess.run([str(venv / "bin" / "pip"), "list", "--format=json"], capture_output=True, text=True)
        names = {p["name"].lower() for p in json.loads(listed.stdout)}
        return {
            "seconds": round(seconds, 1),
            "venv_bytes": du(venv),
            "packages": len(names),
            "offline_packages": sorted(
                names & {"torch", "llama-cpp-python", "sentence-transformers", "langchain-community", "onnxruntime"}
            ),
        }


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--starts", type=int, default=3)
    ap.add_argument("--offline-image", action="store_true", help="also build and size the offline variant")
    ap.add_argument("--no-install", action="store_true", help="skip the lean install measurement")
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    if shutil.which("podman") is None:
        sys.exit("needs podman")
    result: dict = {"build_seconds": round(build_image(), 1), "lean_image_bytes": image_size(IMAGE)}
    base = podman("image", "inspect", "--format", "{{.Size}}", "docker.io/library/python:3.11-slim-bookworm")
    result["base_image_bytes"] = int(base.stdout.strip())
    starts = [await cold_start(IMAGE) for _ in range(args.starts)]
    result["cold_start_seconds"] = [round(s, 2) for s in starts]
    result["cold_start_median"] = round(statistics.median(starts), 2)
    if args.offline_image:
        tag = "localhost/threadwise:offline-bench"
        result["offline_build_seconds"] = round(build_image(tag, "VARIANT=offline"), 1)
        result["offline_image_bytes"] = image_size(tag)
    if not args.no_install:
        result["lean_install"] = lean_install()
    print(json.dumps(result, indent=1))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    asyncio.run(main())
