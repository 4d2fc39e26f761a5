"""README's "Command line" list names every command ``threadwise --help`` offers, and each
line it lists is a command the real CLI accepts (``--help`` of it exits 0)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bot", *args], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )


def _readme_commands() -> list[list[str]]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split("## Command line", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    commands = []
    for line in block.splitlines():
        words = re.findall(r"[a-z][a-z-]*", line.split("#", 1)[0].split("[", 1)[0].split('"', 1)[0])
        if words and words[0] == "threadwise":
            commands.append([w for w in words[1:3] if "|" not in w])
    return commands


def test_every_command_is_in_the_readme_list_and_each_listed_one_exists():
    usage = _cli("--help").stdout
    offered = set(re.search(r"\{(run,[a-z,-]+)\}", usage).group(1).split(","))  # type: ignore[union-attr]
    listed = _readme_commands()
    assert offered - {c[0] for c in listed} == set(), "README's Command line list lacks these"
    for command in listed:
        words = command[:1] if command[0] in {"ask", "eval", "learned", "db"} else command
        done = _cli(*words, "--help")
        assert done.returncode == 0, (words, done.stderr)


def test_the_readme_config_of_two_lines_answers_from_the_folder_it_names(tmp_path: Path):
    """README's "Your own documents" config, with its folder replaced by one of ours, is a whole
    config.toml: the real ``ask`` answers from that folder and cites it."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split("## Your own documents", 1)[1].split("```toml", 1)[1].split("```", 1)[0]
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "install.md").write_text(
        "# Quillpad\n\n## Install on Linux\n\nRun `sudo snap install quillpad` to install Quillpad on Linux.\n",
        encoding="utf-8",
    )
    config = tmp_path / "config.toml"
    config.write_text(block.replace("/srv/team-docs", docs.as_posix()), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "bot", "--config", str(config), "ask", "how do I install quillpad on linux?"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "sudo snap install quillpad" in done.stdout
    assert "install.md" in done.stdout
