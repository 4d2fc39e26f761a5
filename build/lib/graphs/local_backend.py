"""Self-check of the offline model's native backend (llama.cpp), in a child process.

llama-cpp-python is compiled from source. A build for another CPU (``-march=native`` on a
machine with AVX-512 or AMX) kills the process with SIGILL ("Illegal instruction") on
the first multi-token prompt; a one-token prompt may still work. The bot must never die
from its model backend, so before the first question :func:`check_backend` loads the
GGUF file and completes a short multi-token prompt in a child process
(``python -m graphs.local_backend MODEL``). A child that dies by a signal, fails or hangs
gives one line saying what failed and how to rebuild the backend portably; the caller
then serves extractive answers or refuses to start (see :mod:`bot.runtime`).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from functools import lru_cache

REBUILD_HINT = (
    "rebuild it for any x86-64-v3 CPU with `make rebuild-offline` "
    "(scripts/build-llama-portable.sh; see README, 'Offline model')"
)
# Several tokens through one forward pass: the batched matrix kernels (where AVX-512 and
# AMX code runs) are used only for prompts longer than one token.
PROMPT = "Question: what does a team question-answering bot do in a chat thread?\nAnswer:"


@dataclass(frozen=True)
class BackendCheck:
    """Result of :func:`check_backend`: ``ok`` and a one-line ``detail``."""

    ok: bool
    detail: str


def passive_openmp_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """``env`` (default ``os.environ``) with ``OMP_WAIT_POLICY=PASSIVE`` unless set.

    llama.cpp's OpenMP threads spin while they wait; on a shared 2-core machine SmolLM2
    decoded 1.3 tokens/s with spinning threads and 22.4 with a passive wait policy
    (platform notes, 2026-11).
    """
    out = dict(os.environ if env is None else env)
    out.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    return out


@lru_cache(maxsize=8)
def check_backend(model_path: str, threads: int = 2, timeout_seconds: float = 120.0) -> BackendCheck:
    """Load ``model_path`` (a GGUF file) and complete a multi-token prompt in a child.

    Args:
        model_path: the GGUF file the bot will load.
        threads: CPU threads for the child (as ``[models] threads``).
        timeout_seconds: wall-clock limit for the child (load + a few tokens).

    Returns:
        ``BackendCheck(True, "...")`` when the child completed, else ``ok=False`` and a
        one-line reason naming the signal or the error. Cached per process and arguments.
    """
    cmd = [sys.executable, "-m", "graphs.local_backend", model_path, "--threads", str(threads)]
    try:
        proc = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            timeout=timeout_seconds,
            env=passive_openmp_env(),
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return BackendCheck(
            False,
            f"the offline model's backend (llama.cpp) did not complete a test prompt "
            f"in {timeout_seconds:.0f} s; {REBUILD_HINT}",
        )
    if proc.returncode < 0:
        sig = -proc.returncode
        try:
            name = f"{signal.Signals(sig).name} ({signal.strsignal(sig)})"
        except ValueError:
            name = f"signal {sig}"
        return BackendCheck(
            False,
            f"the offline model's backend (llama.cpp) died with {name} in its self-check: "
            f"it was built for another CPU; {REBUILD_HINT}",
        )
    if proc.returncode != 0:
        lines = [ln.strip() for ln in (proc.stderr or proc.stdout).splitlines() if ln.strip()]
        cause = lines[-1][:300] if lines else f"exit code {proc.returncode}"
        return BackendCheck(False, f"the offline model's backend (llama.cpp) failed its self-check: {cause}")
    return BackendCheck(True, proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else "ok")


def _child(model_path: str, threads: int) -> int:
    """The child's work: load the model, complete :data:`PROMPT`, print one JSON line."""
    from llama_cpp import Llama

    llm = Llama(model_path=model_path, n_ctx=256, n_threads=threads, verbose=False)
    out = llm.create_completion(PROMPT, max_tokens=8, temperature=0.0)
    assert isinstance(out, dict)  # not streamed: one completion
    usage = out.get("usage", {})
    print(
        json.dumps(
            {
                "ok": True,
                "prompt_tokens": usage.get("prompt_tokens"),
                "completion_tokens": usage.get("completion_tokens"),
            }
        )
    )
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="self-check of the llama.cpp backend (run by the bot)")
    parser.add_argument("model_path")
    parser.add_argument("--threads", type=int, default=2)
    ns = parser.parse_args()
    sys.exit(_child(ns.model_path, ns.threads))
