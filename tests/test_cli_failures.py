"""A failing command says what failed in one line and exits non-zero: a refused API key,
an unreachable model server (both found at start, exit 2) and a storage problem are told apart (storage cases:
tests/test_storage.py)."""

from __future__ import annotations

import pytest

from tests.fakes import write_platform_config
from tests.fakes.mistral_stall import mistral_server, models_section
from tests.fakes.slack_api import KB_FILES
from tests.test_slack_run import free_port
from tests.test_storage import run_cli


async def test_a_refused_key_is_named_as_such(tmp_path):
    async with mistral_server() as model:
        model.status = 401
        cfg = write_platform_config(tmp_path, KB_FILES, models_section(model))
        code, output, _ = await run_cli(
            ["ask", "how do I roll back a deploy?", "--config", str(cfg)], {"MISTRAL_API_KEY": "wrong"}
        )
    # found by the start-up call, before any question is tried
    assert code == 2, output
    assert "the API key was refused (HTTP 401)" in output and "check MISTRAL_API_KEY" in output, output
    assert "storage" not in output and len(output.strip().splitlines()) == 1, output


async def test_an_unreachable_model_server_is_named_as_the_network(tmp_path):
    cfg = write_platform_config(
        tmp_path,
        KB_FILES,
        f'[models]\nprovider = "mistral"\nmistral_base_url = "http://127.0.0.1:{free_port()}/v1"\nmax_retries = 0\n',
    )
    code, output, _ = await run_cli(
        ["ask", "how do I roll back a deploy?", "--config", str(cfg)], {"MISTRAL_API_KEY": "k"}
    )
    assert code == 2, output
    assert "cannot connect at http://127.0.0.1:" in output and "check base_url" in output, output
    assert "storage" not in output and len(output.strip().splitlines()) == 1, output


@pytest.mark.parametrize("command", [["ask", "how do I deploy?"], ["console"], ["reindex"]])
@pytest.mark.parametrize(
    "setting, key",
    [
        ('data_dir = "{file}"', "[service] data_dir"),
        ('data_dir = "/proc/threadwise-data"', "[service] data_dir"),
        ('data_dir = "{file}/sub"', "[service] data_dir"),
        ('checkpoint_db = "{file}/c.sqlite"', "[service] checkpoint_db"),
    ],
)
async def test_an_unusable_data_dir_is_one_line_naming_its_key_and_exit_2(tmp_path, command, setting, key):
    (tmp_path / "afile").write_text("not a folder")
    cfg = write_platform_config(tmp_path, KB_FILES, "")
    text = cfg.read_text()
    text = "\n".join(
        line for line in text.splitlines() if not line.startswith(("checkpoint_db", "bookkeeping_db", "data_dir"))
    )
    cfg.write_text(
        text.replace("[service]", "[service]\n" + setting.format(file=tmp_path / "afile"), 1)
        if "[service]" in text
        else text + "\n[service]\n" + setting.format(file=tmp_path / "afile") + "\n"
    )
    code, output, _ = await run_cli([*command, "--config", str(cfg)], {})
    assert code == 2, output
    lines = output.strip().splitlines()
    assert len(lines) == 1 and output.startswith("Configuration error: "), output
    assert key in lines[0] and "checkpoint_db/bookkeeping_db" not in output, output
    if "data_dir" in key:
        assert "checkpoint_db" not in output and "bookkeeping_db" not in output, output


@pytest.mark.parametrize("target", ["/proc/x.json", "{tmp}"])
async def test_an_unwritable_export_path_is_named_not_the_storage(tmp_path, target):
    cfg = write_platform_config(tmp_path, KB_FILES, "")
    code, output, _ = await run_cli(["feedback", "--json", target.format(tmp=tmp_path), "--config", str(cfg)], {})
    assert code == 2, output
    assert output.strip().splitlines() == [output.strip()], output
    assert "--json" in output and "storage" not in output and "data folder" not in output, output
