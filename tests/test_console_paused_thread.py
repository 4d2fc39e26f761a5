"""A new question typed in the console while its thread waits for an expert is answered, in a new
thread, as a new message is on Slack and Discord; the help request stays open in its own thread and
a reply there still resumes it. Through the real `threadwise console` process, offline, on files."""

from __future__ import annotations

import functools
from pathlib import Path

from tests.cli_helpers import offline_folder
from tests.test_cli_offline import threadwise

EXPENSES = "# Expenses\n\nClaim a taxi to the airport in the expenses tool within 30 days.\n"
SCANNER = (
    "# Scanner\n\n## Installing the scanner agent\n\nInstall the scanner agent with `apt install scanagent`.\n\n"
    "## Removing the scanner agent\n\nRemove the scanner agent with `apt remove scanagent`; "
    "its settings stay in /etc/scanagent.\n"
)


def test_a_new_question_after_a_help_request_is_answered_and_the_request_stays_open(tmp_path):
    vpn = "# VPN\n\nConnect to the VPN with the WireGuard app before deploying.\n"
    offline_folder(tmp_path, {"expenses.md": EXPENSES, "vpn.md": vpn})
    lines = [
        "is the API down right now?",  # no web search: the experts are asked
        "how do I claim a taxi to the airport?",  # a new question, not a reply
        "/thread main",
        "and a bus to the airport?",  # main still waits: this continues main-2
        "/thread main",
        "dismiss",  # the help request was kept: this resumes it
    ]
    result = threadwise(
        "console", "--config", "config.toml", "--source", "docs", cwd=tmp_path, stdin="\n".join(lines) + "\n"
    )
    assert result.returncode == 0, result.stderr[-2000:]
    out = result.stdout
    assert "help needed (main)" in out, out
    assert "your question starts thread main-2." in out, out
    answered = out.split("you (main-2)> how do I claim a taxi", 1)[1]
    assert "Claim a taxi to the airport in the expenses tool within 30 days." in answered, out
    assert "This thread is waiting for an expert" not in out, out
    assert "your question continues thread main-2." in out and "main-3" not in out, out
    # back on the paused thread, the expert's reply still resumes the help request
    assert "Sorry, I couldn't find a reliable answer" in out.split("you (main)> dismiss", 1)[1], out


def ask_in(folder: Path, *args: str) -> str:
    """``threadwise ask`` on the folder's ``docs/`` (its printed output; the process must succeed)."""
    result = threadwise("ask", "--config", "config.toml", "--source", "docs", *args, cwd=folder)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def test_ask_on_a_thread_waiting_for_an_expert_answers_a_new_question_and_says_how_to_resume(tmp_path):
    """`threadwise ask --thread T "new question"` while T waits for an expert printed only the reply
    hint; now it says T waits, how to answer it, and answers the question in a thread of its own
    (as the console chat does); a reply in the reply syntax still resumes T."""
    offline_folder(tmp_path, {"expenses.md": EXPENSES})

    ask = functools.partial(ask_in, tmp_path)

    assert "Paused for a human" in ask("--thread", "t", "is the API down right now?")
    out = ask("--thread", "t", "how do I claim a taxi to the airport?")
    first, _, rest = out.partition("\n")
    assert first.startswith("Thread t waits for an expert: answer it with threadwise ask --thread t"), out
    assert "`dismiss`" in first and "Your question is answered in thread t-2." in first, out
    assert "Claim a taxi to the airport in the expenses tool within 30 days." in rest, out
    assert "This thread is waiting for an expert. Reply with" not in out, out
    assert "Sorry, I couldn't find a reliable answer" in ask("--thread", "t", "dismiss")


def test_ask_keeps_every_later_question_on_a_waiting_thread_in_one_conversation(tmp_path):
    """While T waits for an expert, `threadwise ask --thread T` answered each new question in yet
    another thread (T-2, then T-3), so a follow-up lost its context and got a greeting; now every
    question on T continues T-2, the notice says so, and once T is answered T takes questions again."""
    offline_folder(tmp_path, {"scanner.md": SCANNER})

    ask = functools.partial(ask_in, tmp_path)

    assert "Paused for a human" in ask("--thread", "t", "is the API down right now?")
    out = ask("--thread", "t", "how do I install the scanner agent?")
    assert "Your question is answered in thread t-2." in out, out
    out = ask("--thread", "t", "how do I remove it then?")  # "it": the agent of the question before
    first, _, rest = out.partition("\n")
    assert first.startswith("Thread t waits for an expert: answer it with threadwise ask --thread t"), out
    assert first.endswith("Your question is answered in thread t-2, after the questions asked there before."), out
    assert rest.startswith("Remove the scanner agent with `apt remove scanagent`"), out
    assert "Hi!" not in out and "t-3" not in out, out
    assert "Sorry, I couldn't find a reliable answer" in ask("--thread", "t", "dismiss")
    out = ask("--thread", "t", "how do I install the scanner agent?")  # t waits no more: asked there
    assert "waits for an expert" not in out and out.startswith("Install the scanner agent with"), out


def test_ask_stays_in_one_line_of_forks_when_the_fork_waits_for_an_expert_too(tmp_path):
    """When T's fork T-2 itself waited for an expert, the next question on T opened a fork of the
    fork, T-2-2, and lost the conversation; now it goes on in T-3, with T-2's answered questions as
    its context, and both help requests stay open where they were asked."""
    offline_folder(tmp_path, {"scanner.md": SCANNER})

    ask = functools.partial(ask_in, tmp_path)

    assert "Paused for a human" in ask("--thread", "t", "is the API down right now?")
    assert "Your question is answered in thread t-2." in ask("--thread", "t", "how do I install the scanner agent?")
    out = ask("--thread", "t", "is the status page down right now?")
    assert "Paused for a human" in out and "--thread t-2 " in out, out  # the fork waits for an expert too
    out = ask("--thread", "t", "how do I remove it then?")  # "it": the agent asked about in t-2
    first, _, rest = out.partition("\n")
    assert "Your question is answered in thread t-3" in first, out
    assert rest.startswith("Remove the scanner agent with `apt remove scanagent`"), out
    assert "t-2-2" not in out, out
    out = ask("--thread", "t-2", "and where do its settings stay?")  # asked on the waiting fork: the same line
    assert "t-3" in out.partition("\n")[0] and "t-2-2" not in out and "/etc/scanagent" in out, out
    assert "Sorry, I couldn't find a reliable answer" in ask("--thread", "t-2", "dismiss")
    assert "Sorry, I couldn't find a reliable answer" in ask("--thread", "t", "dismiss")


def test_a_thread_the_user_named_like_a_fork_is_never_taken_as_one(tmp_path):
    """While T waited for an expert, a question on T was answered in the user's own thread "T-9"
    (a name like a fork's), with that thread's history, and a later help request was left waiting
    there; forks are numbered without a gap, so the question goes to T-2 and T-9 is left as it was."""
    scanner = (
        "# Scanner\n\n## Installing the scanner agent\n\nInstall the scanner agent with `apt install scanagent`.\n\n"
        "## Lunch\n\nThe canteen serves lunch from noon to two.\n"
    )
    offline_folder(tmp_path, {"scanner.md": scanner})

    ask = functools.partial(ask_in, tmp_path)

    assert "canteen serves lunch" in ask("--thread", "team-9", "when is lunch served in the canteen?")
    assert "Paused for a human" in ask("--thread", "team", "is the API down right now?")
    out = ask("--thread", "team", "how do I install the scanner agent?")
    first, _, rest = out.partition("\n")
    assert "Your question is answered in thread team-2." in first, out
    assert rest.startswith("Install the scanner agent with"), out
    assert "team-9" not in out, out


def test_a_follow_up_in_the_first_fork_keeps_the_conversation_before_the_help_request(tmp_path):
    """The first question asked while a console thread waited for an expert opened ``main-2`` without
    the thread's history, so a follow-up pointing back ("how do I remove it then?") lost what "it"
    was; now the fork holds the answered turns before the help request as its context, and the help
    request stays open in ``main``."""
    printer = (
        "# Printer\n\n## Installing the printer driver\n\nInstall the printer driver with `apt install printdrv`.\n\n"
        "## Removing the printer driver\n\nRemove the printer driver with `apt remove printdrv`.\n"
    )
    offline_folder(tmp_path, {"scanner.md": SCANNER, "printer.md": printer})
    lines = [
        "how do I install the scanner agent?",
        "is the API down right now?",  # no web search: the experts are asked, main waits
        "how do I remove it then?",  # "it": the agent asked about before the help request
        "/thread main",
        "dismiss",
    ]
    result = threadwise(
        "console", "--config", "config.toml", "--source", "docs", cwd=tmp_path, stdin="\n".join(lines) + "\n"
    )
    assert result.returncode == 0, result.stderr[-2000:]
    out = result.stdout
    assert "help needed (main)" in out and "thread main-2." in out, out
    followed = out.split("you (main-2)> how do I remove it then?", 1)[1].split("you (main)>", 1)[0]
    assert "threadwise (main-2)\nRemove the scanner agent with `apt remove scanagent`" in followed, out
    assert "Sorry, I couldn't find a reliable answer" in out.split("you (main)> dismiss", 1)[1], out
