"""The CLI as a new user meets it, as tests through the real process."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import write_config

ROOT = Path(__file__).resolve().parent.parent


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MISTRAL_", "TAVILY_", "SLACK_", "DISCORD_"))}
    env.update(HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT))
    return env


def _cli(*args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "bot", *args],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def _scripted_config(tmp_path: Path) -> Path:
    """A config whose chat model is a Mistral-shaped... not needed: keyword-only, extractive."""
    cfg = write_config(tmp_path)
    cfg.write_text(cfg.read_text() + '\n[graph]\ncomposer = "extractive"\ngraders = "lexical"\n')
    return cfg


def test_each_ask_is_its_own_thread_unless_named(tmp_path):
    """Two `ask` commands do not share history (one paused question cannot block the next)."""
    cfg = _scripted_config(tmp_path)
    first = _cli(
        "ask", "--json", "what does the standalone container need before it boots?", "--config", str(cfg), cwd=tmp_path
    )
    second = _cli("ask", "--json", "how do I delete messages permanently?", "--config", str(cfg), cwd=tmp_path)
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    threads = _cli("threads", "--config", str(cfg), cwd=tmp_path).stdout
    assert threads.count("console:ask-") == 2, threads
    named = _cli(
        "ask", "--json", "--thread", "mine", "what does the container need?", "--config", str(cfg), cwd=tmp_path
    )
    again = _cli("ask", "--json", "--thread", "mine", "and the API key?", "--config", str(cfg), cwd=tmp_path)
    assert named.returncode == 0 and again.returncode == 0
    assert "console:mine" in _cli("threads", "--config", str(cfg), cwd=tmp_path).stdout


@pytest.mark.parametrize(
    "body, key",
    [
        ("[knowledge]\nchunk_size = 500\nchunk_overlap = 500\n", "knowledge.chunk_overlap"),
        ("[knowledge]\nk = 20\ncandidates = 5\n", "knowledge.candidates"),
        ("[service]\nhelp_timeout_seconds = inf\n", "service.help_timeout_seconds"),
        ("[web]\ntimeout_seconds = nan\n", "web.timeout_seconds"),
    ],
)
def test_settings_that_cannot_work_name_their_key(tmp_path, body, key):
    cfg = tmp_path / "config.toml"
    cfg.write_text(body)
    result = _cli("ask", "hello", "--config", str(cfg), cwd=tmp_path)
    assert result.returncode == 2 and key in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_config_that_is_not_utf8_is_a_config_error(tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_bytes(b"\xff\xfe[models]\n")
    result = _cli("ask", "hello", "--config", str(cfg), cwd=tmp_path)
    assert result.returncode == 2 and "not UTF-8" in result.stderr and "Traceback" not in result.stderr


def test_config_option_before_or_after_the_command(tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text("[knowledge]\nk = -1\n")
    for args in (("--config", str(cfg), "ask", "hi"), ("ask", "hi", "--config", str(cfg))):
        result = _cli(*args, cwd=tmp_path)
        assert result.returncode == 2 and "knowledge.k" in result.stderr, (args, result.stderr)


async def test_ctrl_c_during_ask_exits_at_once_with_one_line(tmp_path):
    """Ctrl-C while the model call is in flight (a Mistral-shaped server that stalls)."""
    from tests.fakes.mistral_api import mistral_config
    from tests.fakes.mistral_stall import mistral_server

    async with mistral_server(stall_on={"route"}) as fake:
        cfg = write_config(tmp_path, extra=mistral_config(fake.base_url))
        env = {**_env(), "MISTRAL_API_KEY": "test-key"}
        proc = subprocess.Popen(
            [sys.executable, "-m", "bot", "ask", "what does the container need?", "--config", str(cfg)],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(1200):  # the question is in the graph, waiting on the model
            if fake.stalled.is_set() or proc.poll() is not None:
                break
            await asyncio.sleep(0.1)
        assert fake.stalled.is_set(), proc.communicate(timeout=30)[1][-2000:] if proc.poll() is not None else "no call"
        proc.send_signal(signal.SIGINT)
        t0 = time.monotonic()
        out, errtext = await asyncio.to_thread(proc.communicate, timeout=60)
        waited = time.monotonic() - t0
    assert proc.returncode == 130, errtext
    assert "Traceback" not in errtext and "Event loop is closed" not in errtext, errtext
    assert "interrupted" in errtext
    assert waited < 10, waited


def test_a_message_of_invisible_characters_is_an_empty_question(tmp_path):
    cfg = _scripted_config(tmp_path)
    result = _cli("ask", "--json", "\u3000\u00a0\u200b\ufeff", "--config", str(cfg), cwd=tmp_path)
    # invisible characters ask nothing, as an empty question: exit 2, one line, no answer
    assert result.returncode == 2, result.stderr
    assert result.stdout == "", result.stdout
    assert result.stderr.strip() == 'threadwise ask: the question is empty (usage: threadwise ask "QUESTION")'


def test_a_missing_local_embedding_model_names_its_setting(tmp_path):
    cfg = write_config(tmp_path)
    cfg.write_text(
        cfg.read_text().replace('embeddings = "none"', 'embeddings = "local"')
        + f'local_embedding_model = "{tmp_path / "no-such-model"}"\n'
    )
    result = _cli("ask", "hello there, what is this?", "--config", str(cfg), cwd=tmp_path)
    assert result.returncode == 2 and "models.local_embedding_model" in result.stderr, result.stderr


def _first_own_import_seen(stderr, package: str, seen: threading.Event, lines: list[str]) -> None:
    """Reads a ``python -X importtime`` child's stderr: sets ``seen`` at the second import line
    after ``package``'s own (``package/__main__.py`` imports ``signal``, installs the SIGINT
    handler, then imports the rest); keeps every other line in ``lines``."""
    after_package = -1
    for line in stderr:
        if not line.startswith("import time:"):
            lines.append(line)
            continue
        name = line.rsplit("|", 1)[-1].strip()
        if after_package >= 0:
            after_package += 1
            if after_package == 2:
                seen.set()
        elif name == package:
            after_package = 0


@pytest.mark.parametrize("module, command", [("threadwise", "ask"), ("bot", "console"), ("threadwise", "console")])
def test_ctrl_c_at_any_moment_of_start_is_one_line_and_130(tmp_path, module, command):
    """Ctrl-C while Python imports the program and loads config.toml (the first ~1 s).

    Not sooner than the first line of our ``__main__`` (seen with ``-X importtime``): before it,
    CPython itself is starting (``site``, ``runpy``) and no program can catch the signal; CI
    once sent it 110 ms after exec, inside ``site``, on a loaded machine."""
    cfg = write_config(tmp_path)
    args = [command, "what is this?"] if command == "ask" else [command]
    for delay in (0.8, 0.5, 0.25, 0.0):  # seconds after exec; the first run also compiles .pyc files
        t0 = time.monotonic()
        proc = subprocess.Popen(
            [sys.executable, "-X", "importtime", "-m", module, *args, "--config", str(cfg)],
            cwd=tmp_path,
            env=_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        seen, lines = threading.Event(), []
        reader = threading.Thread(target=_first_own_import_seen, args=(proc.stderr, module, seen, lines))
        reader.start()
        assert seen.wait(timeout=60), lines
        time.sleep(max(0.0, delay - (time.monotonic() - t0)))
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
        reader.join(timeout=60)
        errtext = "".join(lines).strip()
        assert proc.returncode == 130, (delay, errtext)
        assert errtext.splitlines() == [errtext] and "interrupted" in errtext, (delay, errtext)


@pytest.mark.parametrize("command", ["console", "run"])
def test_ctrl_c_at_an_idle_console_prompt_is_one_line(tmp_path, command):
    """``console``, and ``run`` without platform tokens (the README's first command), which
    starts the same chat: Ctrl-C at the prompt is one line and 130 (``run`` was killed
    silently), and no INFO event lines are mixed into the chat."""
    cfg = write_config(tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "bot", command, "--config", str(cfg)],
        cwd=tmp_path,
        env=_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    banner = proc.stdout.readline()  # the console is up, waiting for a line
    assert "Threadwise console" in banner
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    _, errtext = proc.communicate(timeout=60)
    assert proc.returncode == 130, errtext
    assert errtext.strip().splitlines()[-1] == "interrupted (Ctrl-C)", errtext  # after the index build's bars
    assert "Traceback" not in errtext and "never retrieved" not in errtext and "ERROR" not in errtext, errtext
    chat_part = errtext.split("starting the console chat", 1)[-1]
    assert " INFO " not in chat_part, errtext
    if command == "run":  # offline, the documents are quoted: the small model does not write answers
        # offline routing is by embedding similarity: the start line names no model that "routes"
        start = next(line for line in errtext.splitlines() if "starting the console chat" in line)
        assert start == (
            "No SLACK_* or DISCORD_TOKEN set: starting the console chat. Answers quote the documents; no chat "
            "model is called. From here on only warnings are logged (-v: every event)."
        ), errtext


def test_code_in_the_knowledge_base_reaches_the_answer_as_written(tmp_path):
    """Indented code blocks (CommonMark's other code block) come out of an answer as one
    fenced block, line for line with their inner indentation, and ``[123]`` in them is code,
    not a citation; a list item's indented continuation stays prose (the docs' Discord config
    must not come back as one flattened line with the role ids dropped)."""
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "roles.md").write_text(
        "# Roles\n\nConfigure the expert roles of the bot in config.toml like this:\n\n"
        "    [roles]\n    expert_role_ids = [112233445566]   # who answers help requests\n"
        "    [roles.limits]\n        nested = [7, 8]\n\n"
        "1. Restart the bot after you configure the expert roles.\n\n"
        "    The expert roles are read at start, so a restart applies them.\n"
    )
    cfg = write_config(tmp_path, sources=[kb])
    cfg.write_text(cfg.read_text() + '\n[graph]\ncomposer = "extractive"\ngraders = "lexical"\n')
    result = _cli(
        "ask", "--json", "how do I configure the expert roles in config.toml?", "--config", str(cfg), cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    text = json.loads(result.stdout)["answer"]
    assert (
        "```\n[roles]\nexpert_role_ids = [112233445566]   # who answers help requests\n"
        "[roles.limits]\n    nested = [7, 8]\n```"
    ) in text, text
    assert "```\nThe expert roles" not in text, text  # the list item's continuation is not code


def test_console_commands_it_does_not_know_are_named_not_asked(tmp_path):
    """``/bogus`` is an unknown command (not a question costing a run); a question that
    starts with a path is still a question."""
    cfg = _scripted_config(tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "bot", "console", "--config", str(cfg)],
        cwd=tmp_path,
        env=_env(),
        input="/bogus\n/etc/hosts: what is that file for?\n/quit\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "Unknown command /bogus." in result.stdout, result.stdout
    assert "'/bogus'" not in result.stdout and "/bogus\n" not in result.stdout.split("Unknown command")[0]
    assert "you (main)> /etc/hosts: what is that file for?" in result.stdout, result.stdout


def test_eval_of_a_missing_file_says_so_in_one_line(tmp_path):
    cfg = write_config(tmp_path)
    result = _cli("eval", str(tmp_path / "no-such.jsonl"), "--config", str(cfg), cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip() == f"threadwise eval: no such file: {tmp_path / 'no-such.jsonl'}", result.stderr


def test_eval_of_a_file_without_valid_rows_says_which_line_in_one_line(tmp_path):
    """A row that is no JSON object crashed the check with "'list' object has no attribute 'get'"
    and named the file twice; an empty file ran nothing and exited 0."""
    cfg = write_config(tmp_path)
    good = '{"question": "how do I book leave?", "expected_route": "vectorstore"}'
    cases = {
        "list.jsonl": (f"{good}\n[1, 2]\n", "line 2: not a valid eval row: a row is a JSON object, not list ([1, 2])"),
        "text.jsonl": ('"how do I book leave?"\n', "line 1: not a valid eval row: a row is a JSON object, not str"),
        "turn.jsonl": (
            '{"question": "and?", "expected_route": "direct", "history": ["hi"]}\n',
            "line 1: not a valid eval row: history turns need a role (user or assistant) and a content",
        ),
        "empty.jsonl": ("\n\n", "no question in the file (one JSON object a line: question, expected_route, ...)"),
    }
    for name, (text, cause) in cases.items():
        (tmp_path / name).write_text(text)
        result = _cli("eval", str(tmp_path / name), "--config", str(cfg), cwd=tmp_path)
        assert result.returncode == 2, (name, result.returncode, result.stderr[-2000:])
        assert result.stderr.strip().splitlines()[0].startswith(f"threadwise eval: {tmp_path / name}: {cause}"), (
            name,
            result.stderr,
        )
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_eval_shows_whole_answers_and_reports_their_length_and_first_fact(tmp_path):
    """`threadwise eval --answers` prints each whole answer (not cut at 500 characters) and the
    report gives each answer's length and where its first expected fact is."""
    cfg = _scripted_config(tmp_path)
    rows = [
        {
            "id": "a",
            "kind": "kb",
            "question": "what does the container need set before it boots?",
            "expected_route": "vectorstore",
            "sources": ["deploy/container.md"],
            "answer_facts": ["REDIS_URI", "no such fact anywhere"],
        }
    ]
    eval_file = tmp_path / "eval.jsonl"
    eval_file.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    report = tmp_path / "report.json"
    result = _cli(
        "eval", str(eval_file), "--answers", "--json", str(report), "--config", str(cfg), cwd=tmp_path, timeout=300
    )
    assert result.returncode == 0, result.stderr
    [row] = json.loads(report.read_text())["rows"]
    totals = json.loads(report.read_text())["totals"]
    assert row["outcome"] == "answer" and row["answer_chars"] == len(row["answer"]) > 0
    assert row["first_fact_at"] == row["answer"].lower().index("redis_uri")
    printed = result.stdout + result.stderr
    assert all(line in printed for line in row["answer"].splitlines() if line.strip()), printed[-3000:]
    assert totals["median_answer_chars"] == row["answer_chars"] and totals["answers_with_template_syntax"] == 0
    assert f"first_fact_within_300: {1.0 if row['first_fact_at'] < 300 else 0.0}" in printed
