"""One source for every setting: the settings models of bot/config.py. config.toml is
generated from them and must not drift (keys, defaults, descriptions); data files go
under ``[service] data_dir``; the replies a user sees are the configured ones."""

from __future__ import annotations

import asyncio
import difflib
import json
import os
import sys
import uuid
from pathlib import Path

import httpx
import pytest

from bot.config import ServiceSettings, Settings, load_settings
from bot.config_template import missing_descriptions, render_defaults
from bot.platforms.console import ConsoleResponder
from bot.protocol import IncomingMessage
from tests.conftest import scripted_runtime, write_kb

ROOT = Path(__file__).resolve().parent.parent
REGENERATE = "threadwise config show-defaults > config.toml"
NONE_RELEVANT = json.dumps({"documents": [{"id": 1, "relevant": False, "facts": ""}], "feedback": "nothing"})


def test_config_toml_is_the_settings_models_rendered():
    """A key, default or description changed in bot/config.py (or graphs/settings.py) and not
    in config.toml, or the other way round, fails here with the difference."""
    shipped = (ROOT / "config.toml").read_text(encoding="utf-8")
    expected = render_defaults()
    diff = "".join(
        difflib.unified_diff(shipped.splitlines(True), expected.splitlines(True), "config.toml", "the settings models")
    )
    assert shipped == expected, f"config.toml differs from the settings models; run `{REGENERATE}`:\n{diff}"


def test_every_setting_has_a_description():
    assert missing_descriptions() == []


def test_config_toml_holds_the_defaults():
    """Loading the shipped config.toml gives exactly the models' defaults."""
    assert load_settings(ROOT / "config.toml") == Settings(base_dir=str(ROOT))


async def test_show_defaults_prints_config_toml_even_when_the_config_is_broken(tmp_path):
    broken = tmp_path / "config.toml"
    broken.write_text("[graph]\nmax_generations = 'x'\n")
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        "config",
        "show-defaults",
        cwd=ROOT,
        env={**os.environ, "THREADWISE_CONFIG": str(broken)},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, err.decode()
    assert out.decode() == (ROOT / "config.toml").read_text(encoding="utf-8")


def _config(root: Path, service: str = "", extra: str = "") -> Path:
    path = root / "config.toml"
    path.write_text(
        f"""
[knowledge]
sources = {json.dumps([str(write_kb(root))])}
embeddings = "none"

[service]
{service}

[graph]
human_review = false
{extra}
""",
        encoding="utf-8",
    )
    return path


def _msg(text: str) -> IncomingMessage:
    return IncomingMessage(
        platform="console",
        thread_key="console:t",
        message_id=uuid.uuid4().hex,
        author_id="ana",
        author_name="ana",
        text=text,
        is_expert=True,
    )


async def test_every_data_file_goes_under_data_dir(tmp_path):
    settings = load_settings(_config(tmp_path, 'data_dir = "state"'))
    async with scripted_runtime(settings) as (rt, _):
        out = ConsoleResponder("t", show_status=False)
        await rt.service.handle(_msg("what does the standalone container need to boot?"), out)
        assert out.answers and out.answers[0].kind == "answer"
    state = tmp_path / "state"
    assert (state / "checkpoints.sqlite").is_file()
    assert (state / "bookkeeping.sqlite").is_file()
    assert (state / "index" / "CURRENT").is_file()
    assert (state / "learned.sqlite").is_file()
    assert not (tmp_path / "data").exists()


def test_a_data_file_named_explicitly_stays_where_it_is_named(tmp_path):
    settings = load_settings(_config(tmp_path, 'data_dir = "state"\ncheckpoint_db = "elsewhere/cp.sqlite"'))
    assert settings.path(settings.service.checkpoint_db) == (tmp_path / "elsewhere" / "cp.sqlite").resolve()
    assert settings.path(settings.service.bookkeeping_db) == (tmp_path / "state" / "bookkeeping.sqlite").resolve()
    assert settings.path(settings.knowledge.index_dir) == (tmp_path / "state" / "index").resolve()
    assert settings.path(settings.learning.index_db) == (tmp_path / "state" / "learned.sqlite").resolve()


@pytest.mark.parametrize("custom", [False, True])
async def test_the_apology_and_the_empty_question_reply_are_the_configured_ones(tmp_path, custom):
    """One default each (ServiceSettings), or the configured text, wherever the bot says it:
    the graph's apology, the apology for a failed run, the reply to an empty message."""
    defaults = ServiceSettings()
    apology = "Nobody here knows that yet, sorry." if custom else defaults.apology
    empty = "Ask me something in words, please." if custom else defaults.empty_question_reply
    service = f"apology = {json.dumps(apology)}\nempty_question_reply = {json.dumps(empty)}" if custom else ""
    settings = load_settings(_config(tmp_path, service, "[models]\nmax_retries = 0"))

    def down(messages):
        request = httpx.Request("POST", "http://mistral.local/v1/chat/completions")
        raise httpx.HTTPStatusError("503", request=request, response=httpx.Response(503, request=request))

    async with scripted_runtime(settings, {"grade_documents": NONE_RELEVANT}) as (rt, model):
        nothing_found, failed, blank = (ConsoleResponder("t", show_status=False) for _ in range(3))
        await rt.service.handle(_msg("what does the standalone container need to boot?"), nothing_found)
        model.script["generate"] = down
        model.script.pop("grade_documents")  # back to the default: relevant, so generate runs and fails
        await rt.service.handle(_msg("and how do I lock down studio auth?"), failed)
        await rt.service.handle(_msg("   "), blank)
    assert [(a.kind, a.text) for a in nothing_found.answers] == [("apology", apology)]
    assert [(a.kind, a.text) for a in failed.answers] == [("apology", apology)]
    assert blank.notices == [empty]
