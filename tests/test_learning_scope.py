"""An expert's answer is knowledge about what the thread searched: it is used only where a thread
searches that knowledge too. Through the real `threadwise ask` process, offline, on two folders
written for the tests (tests/data/docsites/teambot, a chat bot's guide, and
tests/data/docsites/zephyrix, a laboratory sample tracker): an answer learned on one is not
given for the other (`--source`, or a config.toml naming both), and entries saved before entries
kept their knowledge still answer."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from tests.cli_helpers import ask, teach
from tests.test_cli_offline import threadwise

DOCSITES = Path(__file__).parent / "data" / "docsites"
LEARNED = "The guest wifi is teambot-guest; the password is on the fridge door."


def folder(tmp_path: Path, sources: str = '["guide"]') -> Path:
    """``tmp_path`` with the Teambot guide in ``guide/``, Zephyrix's manual in ``zephyrix/`` and a
    config.toml reading ``sources`` offline."""
    shutil.copytree(DOCSITES / "teambot", tmp_path / "guide")
    shutil.copytree(DOCSITES / "zephyrix", tmp_path / "zephyrix")
    (tmp_path / "config.toml").write_text(
        f'[knowledge]\nsources = {sources}\nembeddings = "local"\n[graph]\ncomposer = "extractive"\n'
        '[service]\ncheckpoint_db = "data/checkpoints.sqlite"\nbookkeeping_db = "data/bookkeeping.sqlite"\n'
        '[learning]\nindex_db = "data/learned.sqlite"\n'
    )
    return tmp_path


def answer(cwd: Path, question: str, *extra: str) -> str:
    return ask(cwd, question, *extra)["answer"] or ""


def learn(cwd: Path, *extra: str) -> None:
    """The guest wifi question pauses for a human (no page answers it); the console's answer is learned."""
    teach(cwd, "what is the guest wifi password?", LEARNED, *extra, thread="wifi")


@pytest.mark.slow
def test_an_answer_learned_on_one_folder_is_not_given_for_another(tmp_path):
    cwd = folder(tmp_path)
    learn(cwd)
    listed = threadwise("learned", "list", "--config", "config.toml", cwd=cwd)
    assert f"learned on: {(cwd / 'guide').resolve()}" in listed.stdout, listed.stdout  # what admins see
    assert answer(cwd, "wifi password pls").startswith(LEARNED)  # where it was learned
    other = answer(cwd, "wifi password pls", "--source", "zephyrix")
    assert "teambot-guest" not in other, other


@pytest.mark.slow
def test_an_answer_learned_on_one_source_is_not_given_when_another_is_searched_alone(tmp_path):
    """config.toml names both folders; the answer was learned while the guide alone was searched
    (``--source guide``): asked of Zephyrix alone it is not given, asked of both it is."""
    cwd = folder(tmp_path, '["guide", "zephyrix"]')
    learn(cwd, "--source", "guide")
    other = answer(cwd, "wifi password pls", "--source", "zephyrix")
    assert "teambot-guest" not in other, other
    assert answer(cwd, "wifi password pls").startswith(LEARNED)


# the learned entries' file as Threadwise wrote it before entries kept their knowledge
OLD_SCHEMA = """
CREATE TABLE entries (
    id INTEGER PRIMARY KEY AUTOINCREMENT, question TEXT NOT NULL, answer TEXT NOT NULL,
    answered_by TEXT NOT NULL, answered_at REAL NOT NULL, thread_key TEXT NOT NULL DEFAULT '',
    permalink TEXT NOT NULL DEFAULT '', platform TEXT NOT NULL DEFAULT '', channel TEXT NOT NULL DEFAULT '');
CREATE VIRTUAL TABLE entries_fts USING fts5(question, answer, tokenize='unicode61 remove_diacritics 2');
"""


@pytest.mark.slow
def test_entries_saved_before_entries_kept_their_knowledge_still_answer(tmp_path):
    cwd = folder(tmp_path)
    (cwd / "data").mkdir()
    with sqlite3.connect(cwd / "data" / "learned.sqlite") as conn:
        conn.executescript(OLD_SCHEMA)
        conn.execute(
            "INSERT INTO entries (question, answer, answered_by, answered_at) VALUES (?, ?, 'Erik', 1780000000)",
            ("what is the guest wifi password?", LEARNED),
        )
        conn.execute(
            "INSERT INTO entries_fts (rowid, question, answer) VALUES (1, ?, ?)",
            ("what is the guest wifi password", LEARNED),
        )
    listed = threadwise("learned", "list", "--config", "config.toml", cwd=cwd)
    assert listed.returncode == 0 and "1: what is the guest wifi password?" in listed.stdout, listed.stderr[-2000:]
    assert answer(cwd, "wifi password pls").startswith(LEARNED)
    with sqlite3.connect(cwd / "data" / "learned.sqlite") as conn:  # upgraded in place, the entry kept
        assert conn.execute("SELECT id, sources FROM entries").fetchall() == [(1, "")]


@pytest.mark.slow
def test_an_expert_answer_about_one_product_does_not_answer_a_question_about_the_guide(tmp_path):
    """'No. Zephyrix runs on CPU only.' was answered on a thread searching Zephyrix's manual
    (``--source zephyrix``); the same question about the guide of config.toml is not answered by it."""
    cwd = folder(tmp_path)
    question = "Does Zephyrix need a GPU?"
    teach(cwd, question, "No. Zephyrix runs on CPU only.", "--source", "zephyrix", thread="gpu")
    assert answer(cwd, question, "--source", "zephyrix").startswith("No. Zephyrix runs on CPU only.")
    assert "CPU only" not in answer(cwd, "Does Teambot need a GPU?")
