"""A new question typed in the console while its thread waits for an expert is answered, in a new
thread, as a new message is on Slack and Discord; the help request stays open in its own thread and
a reply there still resumes it. Through the real `threadwise console` process, offline, on files."""

from __future__ import annotations

from tests.test_answer_shape import write_offline_config
from tests.test_cli_offline import threadwise


def test_a_new_question_after_a_help_request_is_answered_and_the_request_stays_open(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "expenses.md").write_text(
        "# Expenses\n\nClaim a taxi to the airport in the expenses tool within 30 days.\n"
    )
    (tmp_path / "docs" / "vpn.md").write_text("# VPN\n\nConnect to the VPN with the WireGuard app before deploying.\n")
    write_offline_config(tmp_path)
    lines = [
        "is the API down right now?",  # no web search: the experts are asked
        "how do I claim a taxi to the airport?",  # a new question, not a reply
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
    # back on the paused thread, the expert's reply still resumes the help request
    assert "Sorry, I couldn't find a reliable answer" in out.split("you (main)> dismiss", 1)[1], out


def test_ask_on_a_thread_waiting_for_an_expert_answers_a_new_question_and_says_how_to_resume(tmp_path):
    """`threadwise ask --thread T "new question"` while T waits for an expert printed only the reply
    hint; now it says T waits, how to answer it, and answers the question in a thread of its own
    (as the console chat does); a reply in the reply syntax still resumes T."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "expenses.md").write_text(
        "# Expenses\n\nClaim a taxi to the airport in the expenses tool within 30 days.\n"
    )
    write_offline_config(tmp_path)

    def ask(*args: str):
        result = threadwise("ask", "--config", "config.toml", "--source", "docs", *args, cwd=tmp_path)
        assert result.returncode == 0, result.stderr[-2000:]
        return result.stdout

    assert "Paused for a human" in ask("--thread", "t", "is the API down right now?")
    out = ask("--thread", "t", "how do I claim a taxi to the airport?")
    first, _, rest = out.partition("\n")
    assert first.startswith("Thread t waits for an expert: answer it with threadwise ask --thread t"), out
    assert "`dismiss`" in first and "Your question is answered in thread t-2." in first, out
    assert "Claim a taxi to the airport in the expenses tool within 30 days." in rest, out
    assert "This thread is waiting for an expert. Reply with" not in out, out
    assert "Sorry, I couldn't find a reliable answer" in ask("--thread", "t", "dismiss")
