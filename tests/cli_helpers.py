"""What the tests that ask the real `threadwise` command line offline share: a folder of pages
with a config.toml that answers from them offline, and `threadwise ask --json` with its reply."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.test_cli_offline import threadwise


def write_offline_config(root: Path, sources: Sequence[str] = (), k: int | None = 3) -> None:
    """``root/config.toml`` of a bot answering offline: local embeddings, the extractive
    composer, its databases under ``root/data``.

    Args:
        root: the folder the command runs in.
        sources: the ``[knowledge] sources`` folders, relative to ``root`` (none: each ask names
            its folder with ``--source``).
        k: ``[knowledge] k`` (None: the default).
    """
    knowledge = f"sources = {json.dumps(list(sources))}\n" if sources else ""
    knowledge += 'embeddings = "local"\n' + (f"k = {k}\n" if k is not None else "")
    (root / "config.toml").write_text(
        f'[knowledge]\n{knowledge}[graph]\ncomposer = "extractive"\n'
        '[service]\ncheckpoint_db = "data/checkpoints.sqlite"\nbookkeeping_db = "data/bookkeeping.sqlite"\n'
    )


def write_pages(folder: Path, pages: Mapping[str, str]) -> Path:
    """Write ``pages`` (file name -> Markdown or other text) into ``folder``, made if missing;
    returns ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in pages.items():
        (folder / name).write_text(text)
    return folder


def offline_folder(root: Path, pages: Mapping[str, str], folder: str = "docs") -> Path:
    """Write ``pages`` (file name -> text) under ``root/folder`` (:func:`write_pages`) and the
    offline config.toml (:func:`write_offline_config`; each ask names the folder with
    ``--source``); returns ``root``."""
    write_pages(root / folder, pages)
    write_offline_config(root)
    return root


def ask_logged(folder: Path, question: str, *extra: str, timeout: float = 600) -> tuple[dict[str, Any], str]:
    """``threadwise ask --config config.toml --json *extra QUESTION`` in ``folder``: the printed
    JSON and the log (stderr). Fails the test when the command exits other than 0."""
    result = threadwise("ask", "--config", "config.toml", "--json", *extra, question, cwd=folder, timeout=timeout)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout), result.stderr


def ask(folder: Path, question: str, *extra: str, timeout: float = 600) -> dict[str, Any]:
    """:func:`ask_logged` without the log: the printed JSON."""
    return ask_logged(folder, question, *extra, timeout=timeout)[0]


def teach(folder: Path, question: str, answer: str, *extra: str, thread: str = "taught") -> None:
    """Ask ``question`` on the console thread ``thread`` (no page may answer it: the run pauses for
    a human), then reply ``answer: ANSWER`` there as the console's expert, which the bot learns.
    ``extra``: more ``ask`` arguments for both (``--source DIR``). Fails the test when the question
    did not pause or the reply failed."""
    paused = threadwise("ask", "--config", "config.toml", *extra, "--thread", thread, question, cwd=folder)
    assert paused.returncode == 0 and "Paused for a human" in paused.stdout, paused.stdout + paused.stderr[-2000:]
    done = threadwise("ask", "--config", "config.toml", *extra, "--thread", thread, f"answer: {answer}", cwd=folder)
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
