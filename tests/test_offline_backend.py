"""The bot never dies from its offline model backend.

A llama.cpp built for another CPU dies by SIGILL on the first multi-token prompt. These
tests put a stand-in ``llama_cpp`` package first on PYTHONPATH (the library boundary)
that kills its own process with a signal, and run the real CLI against it: the self-check
child dies, the bot prints one line naming the signal and the rebuild command, and
either exits 2 (offline model chosen explicitly) or keeps answering extractively.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from graphs.local_backend import check_backend
from tests.conftest import requires_offline_model, write_config

ROOT = Path(__file__).resolve().parent.parent


def _shim(tmp_path: Path, package: str, body: str) -> Path:
    folder = tmp_path / "shim"
    (folder / package).mkdir(parents=True, exist_ok=True)
    (folder / package / "__init__.py").write_text(body)
    return folder


def _dying_llama(tmp_path: Path, signal_name: str = "SIGILL") -> Path:
    return _shim(tmp_path, "llama_cpp", f"import os, signal\nos.kill(os.getpid(), signal.{signal_name})\n")


def _cli(*args: str, cwd: Path, shim: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MISTRAL_", "TAVILY_", "SLACK_", "DISCORD_"))}
    env["HF_HUB_OFFLINE"] = "1"
    env["PYTHONPATH"] = os.pathsep.join([*([str(shim)] if shim else []), str(ROOT)])
    return subprocess.run(
        [sys.executable, "-m", "bot", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize("signal_name, shown", [("SIGILL", "SIGILL"), ("SIGSEGV", "SIGSEGV"), ("SIGABRT", "SIGABRT")])
def test_self_check_reports_a_child_killed_by_a_signal(tmp_path, monkeypatch, signal_name, shown):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(_dying_llama(tmp_path, signal_name)), str(ROOT)]))
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    check = check_backend.__wrapped__(str(model), 1, 60)
    assert not check.ok
    assert shown in check.detail and "make rebuild-offline" in check.detail
    assert "\n" not in check.detail


def test_self_check_reports_a_failing_backend_in_one_line(tmp_path, monkeypatch):
    shim = _shim(tmp_path, "llama_cpp", "raise OSError('libggml-cpu.so: cannot open shared object file')\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(shim), str(ROOT)]))
    check = check_backend.__wrapped__(str(tmp_path / "model.gguf"), 1, 60)
    assert not check.ok and "libggml-cpu.so" in check.detail and "\n" not in check.detail


@requires_offline_model
def test_explicit_offline_model_with_a_dying_backend_exits_2_with_one_line(tmp_path):
    cfg = write_config(tmp_path, extra='provider = "llamacpp"')
    result = _cli(
        "ask", "what does the container need to boot?", "--config", str(cfg), cwd=tmp_path, shim=_dying_llama(tmp_path)
    )
    assert result.returncode == 2, (result.returncode, result.stderr[-2000:])
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, result.stderr
    assert "SIGILL" in lines[0] and "make rebuild-offline" in lines[0]
    assert "Traceback" not in result.stderr
    assert "Illegal instruction" not in result.stderr.replace("(Illegal instruction)", "")


@requires_offline_model
def test_auto_offline_model_with_a_dying_backend_answers_extractively(tmp_path):
    cfg = write_config(tmp_path)  # provider = "auto", no key: the offline model
    cfg.write_text(cfg.read_text().replace('embeddings = "none"', 'embeddings = "local"'))
    result = _cli(
        "ask",
        "--json",
        "what does the standalone container need before it boots?",
        "--config",
        str(cfg),
        cwd=tmp_path,
        shim=_dying_llama(tmp_path),
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "SIGILL" in result.stderr and "make rebuild-offline" in result.stderr
    out = json.loads(result.stdout)
    assert out["kind"] == "answer" and "deploy/container.md" in out["sources"], out
    assert "REDIS_URI" in out["answer"]
    assert out["llm_calls"] == 0
    assert "chat model is unavailable" in out["route_note"], out


@requires_offline_model
def test_real_offline_backend_passes_its_self_check():
    from graphs.models import default_gguf_path

    check = check_backend.__wrapped__(str(default_gguf_path()), 2, 300)
    assert check.ok, check.detail
    assert json.loads(check.detail)["prompt_tokens"] > 1  # a multi-token prompt, not a one-token smoke test


def test_messages_keep_square_brackets(tmp_path):
    """User and exception text is printed as it is, never read as Rich markup."""
    cfg = tmp_path / "config.toml"
    cfg.write_text('[slack]\nmode = "[sock]"\n')
    result = _cli("ask", "hello", "--config", str(cfg), cwd=tmp_path)
    assert result.returncode == 2 and "[sock]" in result.stderr, result.stderr
    missing = tmp_path / "team [docs]"
    result = _cli("reindex", "--config", str(write_config(tmp_path)), "--source", str(missing), cwd=tmp_path)
    assert result.returncode == 2 and "team [docs]" in result.stderr, result.stderr
