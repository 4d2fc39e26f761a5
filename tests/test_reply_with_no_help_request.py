"""A message in the help-request reply syntax (``answer:``, ``retry:``, ``dismiss``) in a thread
that waits for no expert was asked as a question (quotes of unrelated pages), and a later
``remember:`` saved "answer: ..." as the learned entry's question. Now it gets one line saying
nothing waits and how to ask or teach instead, nothing is searched or saved, and the entry
learns the thread's real question. Through the real `threadwise console`, `ask` and `learned
list` processes, offline, on a page written for the test."""

from __future__ import annotations

import json

from tests.test_cli_offline import threadwise

NOTHING_WAITING = "Nothing in this thread is waiting for an expert's answer"


def folder(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "scanner.md").write_text(
        "# Scanner\n\n## Installing the scanner agent\n\nInstall the scanner agent with `apt install scanagent`.\n\n"
        "## Removing the scanner agent\n\nRemove the scanner agent with `apt remove scanagent`.\n"
    )
    (tmp_path / "config.toml").write_text(
        '[knowledge]\nembeddings = "local"\nk = 3\n[graph]\ncomposer = "extractive"\n'
        '[service]\ncheckpoint_db = "data/checkpoints.sqlite"\nbookkeeping_db = "data/bookkeeping.sqlite"\n'
        '[learning]\nindex_db = "data/learned.sqlite"\n'
    )
    return tmp_path


def test_an_answer_in_a_thread_waiting_for_no_one_is_refused_and_remember_learns_the_question(tmp_path):
    cwd = folder(tmp_path)
    lines = [
        "how do I install the scanner agent?",  # answered from the page: nothing waits
        "answer: Use the mirror at apt.internal with apt install scanagent.",
        "remember: Use the mirror at apt.internal with apt install scanagent.",
    ]
    result = threadwise(
        "console", "--config", "config.toml", "--source", "docs", cwd=cwd, stdin="\n".join(lines) + "\n"
    )
    assert result.returncode == 0, result.stderr[-2000:]
    replied = result.stdout.split(f"you (main)> {lines[1]}\n", 1)[1].split("you (main)> remember:", 1)[0]
    [line] = replied.strip().splitlines()  # one line, no search, no quotes, no sources
    assert line.startswith(NOTHING_WAITING) and "`remember: <the answer>`" in line, result.stdout
    assert "Saved as the answer to “how do I install the scanner agent?”" in result.stdout, result.stdout
    listed = threadwise("learned", "list", "--config", "config.toml", cwd=cwd)
    assert listed.returncode == 0, listed.stderr[-2000:]
    assert "1: how do I install the scanner agent?" in listed.stdout, listed.stdout
    assert "answer:" not in listed.stdout and "2:" not in listed.stdout, listed.stdout


def test_ask_with_a_reply_on_a_thread_waiting_for_no_one_searches_nothing(tmp_path):
    cwd = folder(tmp_path)
    for reply in ("answer: it is apt install scanagent", "retry: look at the install page", "dismiss"):
        done = threadwise(
            "ask", "--config", "config.toml", "--source", "docs", "--thread", "t", "--json", reply, cwd=cwd
        )
        assert done.returncode == 0, done.stderr[-2000:]
        shown = json.loads(done.stdout)
        assert shown["kind"] == "notice" and shown["answer"].startswith(NOTHING_WAITING), shown
        assert shown["path"] == [] and shown["sources"] == [] and shown["llm_calls"] == 0, shown


def test_a_bare_remember_says_how_to_use_it_and_is_not_asked(tmp_path):
    cwd = folder(tmp_path)
    done = threadwise("ask", "--config", "config.toml", "--source", "docs", "--json", "remember:", cwd=cwd)
    assert done.returncode == 0, done.stderr[-2000:]
    shown = json.loads(done.stdout)
    assert "Please include what to remember" in shown["answer"], shown
    assert shown["path"] == [] and shown["llm_calls"] == 0 and shown["sources"] == [], shown


def test_remember_on_a_thread_that_asked_nothing_saves_nothing_and_says_to_ask_first(tmp_path):
    """``remember: <text>`` as a thread's first message saved a learned entry answering no
    question ("1: (no question) -> ..."), which no one's question would ever find."""
    cwd = folder(tmp_path)
    result = threadwise(
        "console",
        "--config",
        "config.toml",
        "--source",
        "docs",
        cwd=cwd,
        stdin="remember: The scanner agent logs to /var/log/scanagent.\n",
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "no question for me to remember an answer to" in result.stdout, result.stdout
    assert "Ask the question first" in result.stdout and "Saved" not in result.stdout, result.stdout
    listed = threadwise("learned", "list", "--config", "config.toml", cwd=cwd)
    assert listed.returncode == 0, listed.stderr[-2000:]
    assert "1:" not in listed.stdout and "scanagent" not in listed.stdout, listed.stdout
