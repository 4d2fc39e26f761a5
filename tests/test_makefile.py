"""The README's `make` targets, run by `make` itself on a copy of the Makefile: what a new user
sees before anything is installed."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_ask_without_a_question_prints_its_usage_and_installs_nothing(tmp_path: Path):
    """`make ask` with no Q printed the usage line only after building .venv (minutes of
    installing); it exits 2 with the usage line at once, and creates no .venv."""
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    result = subprocess.run(
        ["make", "ask"], cwd=tmp_path, capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin"}
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert 'usage: make ask Q="your question"' in result.stderr
    assert not (tmp_path / ".venv").exists()
