"""A failing command says what failed in one line and exits non-zero: a refused API key,
an unreachable model server and a storage problem are told apart (storage cases:
tests/test_storage.py)."""

from __future__ import annotations

from tests.fakes import write_platform_config
from tests.fakes.mistral_stall import mistral_server, models_section
from tests.fakes.slack_api import KB_FILES
from tests.test_slack_run import free_port
from tests.test_storage import run_cli


async def test_a_refused_key_is_named_as_such(tmp_path):
    async with mistral_server() as model:
        model.status = 401
        cfg = write_platform_config(tmp_path, KB_FILES, models_section(model))
        code, output, _ = await run_cli(["ask", "how do I roll back a deploy?", "--config", str(cfg)],
                                        {"MISTRAL_API_KEY": "wrong"})
    assert code == 1, output
    assert "failed: auth:" in output and "refused the key" in output, output
    assert "storage" not in output


async def test_an_unreachable_model_server_is_named_as_the_network(tmp_path):
    cfg = write_platform_config(tmp_path, KB_FILES, f'[models]\nprovider = "mistral"\n'
                                f'mistral_base_url = "http://127.0.0.1:{free_port()}/v1"\nmax_retries = 0\n')
    code, output, _ = await run_cli(["ask", "how do I roll back a deploy?", "--config", str(cfg)],
                                    {"MISTRAL_API_KEY": "k"})
    assert code == 1, output
    assert "failed: network:" in output and "check the network" in output, output
    assert "storage" not in output
