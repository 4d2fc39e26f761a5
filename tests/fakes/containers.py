"""Podman for the container tests (tests/test_container.py, bench/bench_container.py): build the
base images from Debian packages (scripts/build-base-image.sh) and the project's image from
the Dockerfile, run containers, and serve the fakes where containers reach them.

podman reads .ci/containers.conf (runc, cgroupfs, no default ulimits: what works on hosts
with hybrid cgroups, harmless elsewhere) unless CONTAINERS_CONF is already set. Build logs
go to ~/.cache/threadwise/logs/.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

ROOT = Path(__file__).resolve().parents[2]
IMAGE = "localhost/threadwise:test"
LOGS = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "threadwise" / "logs"
#: how a container reaches a server on the host over podman's bridge network
HOST_FROM_CONTAINER = "host.containers.internal"


def podman_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("CONTAINERS_CONF", str(ROOT / ".ci" / "containers.conf"))
    return env


def require_podman() -> None:
    """Skip (saying how to get it) when podman is not installed; .ci/run installs it."""
    if shutil.which("podman") is None:
        pytest.skip("needs podman: apt-get install podman runc debootstrap podman-compose (.ci/run does)")


def podman(
    *args: str, check: bool = True, timeout: float = 120, input: str | None = None
) -> subprocess.CompletedProcess:
    """``podman ARGS``; raises with its output when it fails and ``check``."""
    proc = subprocess.run(
        ["podman", *args], env=podman_env(), capture_output=True, text=True, timeout=timeout, input=input
    )
    if check and proc.returncode:
        raise AssertionError(f"podman {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def _logged(cmd: Sequence[str], log_name: str, timeout: float) -> float:
    """Run ``cmd`` with its output in LOGS/log_name; returns the seconds it took."""
    LOGS.mkdir(parents=True, exist_ok=True)
    log = LOGS / log_name
    start = time.monotonic()
    with log.open("w") as out:
        proc = subprocess.run(cmd, cwd=ROOT, env=podman_env(), stdout=out, stderr=subprocess.STDOUT, timeout=timeout)
    if proc.returncode:
        raise AssertionError(f"{' '.join(cmd)} failed ({proc.returncode}); end of {log}:\n{log.read_text()[-4000:]}")
    return time.monotonic() - start


def build_base_image(kind: str = "python") -> float:
    """The Debian-package stand-in of the official image the Dockerfile or compose.yaml uses
    (cached: a few seconds once made). Returns the seconds it took."""
    return _logged(["bash", "scripts/build-base-image.sh", kind], f"base-image-{kind}.log", 900)


def build_image(tag: str = IMAGE, *build_args: str) -> float:
    """``podman build`` of the Dockerfile (layers cached: the dependencies are installed again
    only when pyproject.toml changes). Returns the seconds it took."""
    build_base_image("python")
    args = [f"--build-arg={a}" for a in build_args]
    # docker format: OCI images have no HEALTHCHECK; host network: pip reaches the package index
    return _logged(
        ["podman", "build", "--network=host", "--format=docker", *args, "-t", tag, "."], "image-build.log", 1500
    )


def image_size(tag: str = IMAGE) -> int:
    """The image's size in bytes, as ``podman images`` shows it."""
    return int(podman("image", "inspect", "--format", "{{.Size}}", tag).stdout.strip())


def logs(name: str) -> str:
    proc = podman("logs", name, check=False)
    return proc.stdout + proc.stderr


def remove(*names: str) -> None:
    for name in names:
        podman("rm", "--force", "--time", "2", name, check=False, timeout=60)


def container_ip(name: str) -> str:
    """The address of a container on its bridge network (routable from the host as root)."""
    out = podman("inspect", "--format", "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}", name).stdout
    return out.split()[0]


@asynccontextmanager
async def reachable(runner: web.AppRunner) -> AsyncIterator[int]:
    """Serve ``runner`` (already set up) on every interface too, with a new free port, so that
    containers on a bridge network reach it at ``HOST_FROM_CONTAINER``; yields the port."""
    site = web.TCPSite(runner, "0.0.0.0", 0)
    await site.start()
    try:
        yield site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    finally:
        await site.stop()


@asynccontextmanager
async def serve_everywhere(routes: dict[str, Any]) -> AsyncIterator[int]:
    """Serve ``{path: POST handler}`` on 0.0.0.0 with a free port; yields the port."""
    app = web.Application()
    for path, handler in routes.items():
        app.router.add_post(path, handler)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        async with reachable(runner) as port:
            yield port
    finally:
        await runner.cleanup()
