"""Settings from the environment: THREADWISE_<SECTION>__<KEY> variables override config.toml,
a .env file in the working directory is read, secrets come from variables, .env or secret
files (/run/secrets, a Kubernetes Secret mount), and a bad variable is named like a bad key."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import BaseModel

from bot.config import ConfigError, Secrets, Settings, load_settings

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch, tmp_path):
    """No THREADWISE_/secret variables of the caller, and a working directory without .env."""
    for name in list(os.environ):
        if name.startswith("THREADWISE_") or name in (
            "MISTRAL_API_KEY",
            "TAVILY_API_KEY",
            "SLACK_BOT_TOKEN",
            "SLACK_APP_TOKEN",
            "SLACK_SIGNING_SECRET",
            "DISCORD_TOKEN",
        ):
            monkeypatch.delenv(name)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)


def config(tmp_path: Path, text: str = "[graph]\nmax_generations = 2\n") -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_variable_overrides_the_file_and_keeps_its_other_keys(tmp_path, monkeypatch):
    path = config(tmp_path, "[graph]\nmax_generations = 2\nmax_kb_searches = 3\n[knowledge]\nk = 4\n")
    monkeypatch.setenv("THREADWISE_GRAPH__MAX_GENERATIONS", "3")
    monkeypatch.setenv("THREADWISE_KNOWLEDGE__SOURCES", '["handbook", "/srv/wiki"]')
    monkeypatch.setenv("THREADWISE_SLACK__REACTIONS__DONE", "tada")
    monkeypatch.setenv("THREADWISE_SERVICE__DATA_DIR", "/data")
    s = load_settings(path)
    assert type(s) is Settings
    assert (s.graph.max_generations, s.graph.max_kb_searches, s.knowledge.k) == (3, 3, 4)
    assert s.knowledge.sources == ["handbook", "/srv/wiki"]
    assert s.slack.reactions.done == "tada"
    # the data files follow the overridden data_dir
    assert s.service.checkpoint_db == "/data/checkpoints.sqlite"
    assert s.knowledge.index_dir == "/data/index"


def _leaf_keys(model: type[BaseModel], prefix: tuple[str, ...] = ()):
    for name, field in model.model_fields.items():
        if name == "base_dir":
            continue
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            yield from _leaf_keys(ann, prefix + (name,))
        else:
            yield prefix + (name,), field


def test_every_config_key_has_a_variable(tmp_path, monkeypatch):
    """Each key of config.toml, set by its variable to its default, is taken from the variable."""
    defaults = Settings()
    keys = list(_leaf_keys(Settings))
    assert len(keys) > 80
    for path, _field in keys:
        value = defaults
        for part in path:
            value = getattr(value, part)
        if value is None:
            continue
        text = (
            json.dumps(value)
            if isinstance(value, list | dict)
            else str(value).lower()
            if isinstance(value, bool)
            else str(value)
        )
        monkeypatch.setenv("THREADWISE_" + "__".join(path).upper(), text)
    s = load_settings(config(tmp_path, ""))
    for path, _field in keys:
        section = s
        for part in path[:-1]:
            section = getattr(section, part)
        if len(path) > 1 and getattr(section, path[-1]) is not None:
            assert path[-1] in section.model_fields_set, path  # set by the variable, not left at the default


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        (
            "THREADWISE_GRAPH__MAX_GENERATIONS",
            "x",
            "THREADWISE_GRAPH__MAX_GENERATIONS: Input should be a valid integer, unable to parse string as an integer "
            "(got 'x')",
        ),
        (
            "THREADWISE_GRAPH__MAX_GENERATIONS",
            "99",
            "THREADWISE_GRAPH__MAX_GENERATIONS: Input should be less than or equal to 10 (got '99')",
        ),
        ("THREADWISE_GRAPH__MAX_GENERATION", "3", "THREADWISE_GRAPH__MAX_GENERATION: unknown setting"),
        ("THREADWISE_GRAPHS__MAX_GENERATIONS", "3", "THREADWISE_GRAPHS__MAX_GENERATIONS: unknown setting"),
        ("THREADWISE_BASE_DIR", "/", "THREADWISE_BASE_DIR: unknown setting"),
        ("THREADWISE_KNOWLEDGE__SOURCES", "docs", "THREADWISE_KNOWLEDGE__SOURCES: not valid JSON"),
        (
            "THREADWISE_GRAPH",
            '{"max_generations": "y"}',
            "THREADWISE_GRAPH: graph.max_generations: Input should be a valid integer",
        ),
        (
            "THREADWISE_CHANNELS",
            '[{"platform": "slack"}]',
            "THREADWISE_CHANNELS: [[channels]] entry 1: a [[channels]] entry needs an id or a name",
        ),
    ],
)
def test_bad_variable_names_itself(tmp_path, monkeypatch, name, value, message):
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError) as exc:
        load_settings(config(tmp_path))
    assert str(exc.value).startswith(message), str(exc.value)


def test_bad_key_in_the_file_is_still_named_as_a_key(tmp_path, monkeypatch):
    monkeypatch.setenv("THREADWISE_GRAPH__MAX_KB_SEARCHES", "2")
    with pytest.raises(ConfigError, match=r"^config.toml: graph.max_generations: Input should be a valid integer"):
        load_settings(config(tmp_path, '[graph]\nmax_generations = "x"\n'))


def test_dotenv_file_is_read_and_the_environment_wins(tmp_path, monkeypatch):
    Path(".env").write_text(
        "# settings and secrets\nTHREADWISE_GRAPH__MAX_GENERATIONS=4\n"
        "THREADWISE_WEB__MAX_RESULTS=7\nMISTRAL_API_KEY=from-dotenv\nOTHER_TOOL_SETTING=1\n"
    )
    monkeypatch.setenv("THREADWISE_WEB__MAX_RESULTS", "3")
    s = load_settings(config(tmp_path))
    assert (s.graph.max_generations, s.web.max_results) == (4, 3)
    assert Secrets.from_env().mistral_api_key == "from-dotenv"
    Path(".env").write_text("THREADWISE_WEB__MAX_RESULT=7\n")
    with pytest.raises(ConfigError, match=r"^\.env: THREADWISE_WEB__MAX_RESULT: unknown setting"):
        load_settings(config(tmp_path))


def test_secrets_from_files(tmp_path, monkeypatch):
    """A Kubernetes Secret mount: one file per key, through ..data symlinks; a file's last
    newline is not part of the secret; a variable wins over a file."""
    mount = tmp_path / "secrets"
    data = mount / "..2026_12_03"
    data.mkdir(parents=True)
    (data / "SLACK_BOT_TOKEN").write_text("xoxb-from-file\n")
    (data / "THREADWISE_DATABASE_URL").write_text("postgresql://bot@db/threadwise")
    (mount / "..data").symlink_to(data.name)
    for name in ("SLACK_BOT_TOKEN", "THREADWISE_DATABASE_URL"):
        (mount / name).symlink_to(f"..data/{name}")
    compose = tmp_path / "compose-secrets"  # Compose/Docker secrets: lower-case file names
    compose.mkdir()
    (compose / "mistral_api_key").write_text("mk-from-file\n")
    monkeypatch.setenv("THREADWISE_SECRETS_DIR", f"{mount}{os.pathsep}{compose}")
    monkeypatch.setenv("SLACK_SIGNING_SECRET", "from-env")
    s = Secrets.from_env()
    assert (s.slack_bot_token, s.database_url, s.mistral_api_key, s.slack_signing_secret) == (
        "xoxb-from-file",
        "postgresql://bot@db/threadwise",
        "mk-from-file",
        "from-env",
    )
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-from-env")
    assert Secrets.from_env().slack_bot_token == "xoxb-from-env"
    assert "xoxb" not in repr(Secrets.from_env())


def test_database_url_from_a_secret_file(tmp_path, monkeypatch):
    from bot.storage import database_url

    (tmp_path / "THREADWISE_DATABASE_URL").write_text("postgresql://bot@db:5432/tw\n")
    monkeypatch.setenv("THREADWISE_SECRETS_DIR", str(tmp_path))
    assert database_url() == "postgresql://bot@db:5432/tw"


def test_cli_bad_variable_exit_code_and_one_line(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("THREADWISE_")}
    env.update(PYTHONPATH=str(ROOT), THREADWISE_GRAPH__MAX_GENERATIONS="many")
    proc = subprocess.run(
        [sys.executable, "-m", "bot", "graph", "--config", str(config(tmp_path))],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert "THREADWISE_GRAPH__MAX_GENERATIONS: Input should be a valid integer" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_settings_that_cannot_work_together_name_the_variable(tmp_path, monkeypatch):
    monkeypatch.setenv("THREADWISE_GRAPH__MAX_GENERATIONS", "10")
    with pytest.raises(ConfigError) as exc:
        load_settings(config(tmp_path, "[graph]\nrecursion_limit = 20\n"))
    assert "graph.recursion_limit = 20 is below" in str(exc.value)
    assert str(exc.value).endswith("(set by THREADWISE_GRAPH__MAX_GENERATIONS)")
