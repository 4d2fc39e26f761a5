"""``threadwise models check`` reaches the configured chat model (one structured call) and
embedder (one embedding) and says how long each took; a wrong key, base URL or model name,
or a provider package that is not installed, is one line with its cause and exit code 2,
and ``threadwise run`` stops at start the same way instead of at the first question."""

from __future__ import annotations

import pytest

from tests.fakes import write_platform_config
from tests.fakes.model_apis import model_api
from tests.fakes.slack_api import KB_FILES
from tests.test_slack_run import free_port
from tests.test_storage import run_cli

KEY = {"OPENAI_API_KEY": "sk-test"}


def config(tmp_path, models: str):
    return write_platform_config(tmp_path, KB_FILES, f"[models]\nmax_retries = 0\n{models}")


async def test_check_reaches_both_models_and_times_them(tmp_path):
    async with model_api("openai") as (fake, base):
        cfg = config(
            tmp_path, f'chat_model = "openai:test-model"\nbase_url = "{base}"\nembedding_model = "openai:test-embed"\n'
        )
        code, output, _ = await run_cli(["models", "check", "--config", str(cfg)], KEY)
    assert code == 0, output
    assert f"chat model: openai:test-model at {base} (set by [models] chat_model)" in output
    assert "chat model openai:test-model: ok, structured output by json_schema (" in output
    assert "embeddings openai:test-embed: ok, 3 dimensions (" in output
    assert fake.tasks() == ["check"] and len(fake.embedding_requests) == 1
    assert fake.embedding_requests[0]["model"] == "test-embed"


@pytest.mark.parametrize(
    "status, said",
    [
        (401, "the API key was refused (HTTP 401) at {base}: check OPENAI_API_KEY"),
        (404, "not found (HTTP 404) at {base}: check the model name 'test-model' and base_url"),
    ],
)
@pytest.mark.parametrize("command", [["models", "check"], ["run"]])
async def test_a_wrong_key_or_model_is_one_line_and_exit_2(tmp_path, status, said, command):
    async with model_api("openai", {"check": [{"status": status}]}) as (fake, base):
        cfg = config(tmp_path, f'chat_model = "openai:test-model"\nbase_url = "{base}"\n')
        code, output, _ = await run_cli([*command, "--config", str(cfg)], KEY)
    assert code == 2, output
    assert said.format(base=base) in output, output
    assert fake.tasks() == ["check"]  # run stopped at start: no question was tried
    assert "Traceback" not in output


@pytest.mark.parametrize("command", [["models", "check"], ["run"], ["ask", "how do I deploy?"], ["console"]])
async def test_a_wrong_base_url_is_one_line_and_exit_2(tmp_path, command):
    """Before the knowledge index is built or a graph worker started: one line, exit 2."""
    base = f"http://127.0.0.1:{free_port()}/v1"
    cfg = config(tmp_path, f'chat_model = "openai:test-model"\nbase_url = "{base}"\n')
    code, output, _ = await run_cli([*command, "--config", str(cfg)], KEY)
    assert code == 2, output
    assert f"cannot connect at {base}" in output and "check base_url" in output, output
    assert ".:" not in output, output
    if command[0] != "models":  # `models check` reports each part on its line
        assert len(output.strip().splitlines()) == 1, output
    assert not (tmp_path / "data" / "index").exists() or not any((tmp_path / "data" / "index").iterdir())


async def test_a_provider_package_not_installed_is_named_with_its_pip_command(tmp_path):
    cfg = config(tmp_path, 'chat_model = "google_genai:gemini-2.5-flash"\n')
    code, output, _ = await run_cli(["models", "check", "--config", str(cfg)], {"GOOGLE_API_KEY": "k"})
    assert code == 2, output
    assert "needs langchain-google-genai: pip install 'threadwise[google]'" in output, output


async def test_a_busy_provider_at_start_does_not_stop_run(tmp_path):
    """A 503 at start is the provider's moment, not a wrong setting: run starts (and, with no
    chat platform configured, opens the console, which ends at once on empty input)."""
    async with model_api("openai", {"check": [{"status": 503}]}) as (fake, base):
        cfg = config(tmp_path, f'chat_model = "openai:test-model"\nbase_url = "{base}"\n')
        code, output, _ = await run_cli(["run", "--config", str(cfg)], KEY)
    assert code == 0, output
    assert fake.tasks() == ["check"]
    # the console's banner names the model in use and is true about the log
    assert "starting the console chat with the chat model openai:test-model" in output, output
    assert "offline default" not in output and "From here on only warnings are logged" in output, output
