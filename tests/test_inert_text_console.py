"""Document text prints as written in the terminal, through the real CLI (``threadwise ask``
and ``threadwise console`` with piped input): Rich markup (``[bold]``, ``[link=…]``) and emoji
codes (``:x:``) are text, and a document's escape sequences (colours, an OSC 8 hyperlink
hiding an address behind words) never reach the terminal."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ESC = "\x1b"
DOC = (
    "# Release checks\n\n"
    "Failed release checks are marked :x: and flaky ones :warning: at 10:30:00 in the [bold]weekly[/bold] report.\n\n"
    "The release checks board is [link=https://evil.test]the board[/link] and "
    f"{ESC}]8;;https://evil.test{ESC}\\the release dashboard{ESC}]8;;{ESC}\\ shows them in {ESC}[31mred{ESC}[0m.\n"
)
SHOWN = [
    "Failed release checks are marked :x: and flaky ones :warning: at 10:30:00 in the [bold]weekly[/bold] report.",
    "The release checks board is [link=https://evil.test]the board[/link] and ]8;;https://evil.test\\the release "
    "dashboard]8;;\\ shows them in [31mred[0m.",
]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "checks.md").write_text(DOC)
    (tmp_path / "config.toml").write_text(
        '[service]\ndata_dir = "data"\ncheckpoint_db = "data/checkpoints.sqlite"\n'
        'bookkeeping_db = "data/bookkeeping.sqlite"\n'
        '[knowledge]\nsources = ["kb"]\nindex_dir = "data/index"\nembeddings = "none"\n'
        '[web]\nenabled = false\n[graph]\ncomposer = "extractive"\ngraders = "lexical"\n'
    )
    return tmp_path


def cli(folder: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1", COLUMNS="400")
    return subprocess.run(
        [sys.executable, "-m", "bot", *args, "--config", "config.toml"],
        cwd=folder,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.parametrize("command", ["ask", "console"])
def test_document_markup_emoji_codes_and_escapes_print_as_text(folder, command):
    question = "how are failed release checks marked?"
    result = cli(folder, "ask", question) if command == "ask" else cli(folder, "console", stdin=question + "\n/quit\n")
    assert result.returncode == 0, result.stderr[-2000:]
    for line in SHOWN:
        assert line in result.stdout, result.stdout
    assert ESC not in result.stdout + result.stderr
    assert "❌" not in result.stdout and "⚠" not in result.stdout
