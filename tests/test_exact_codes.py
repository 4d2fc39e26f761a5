"""A code the question names exactly ("AB-403") is found and answered from the page that holds that
code, not from a section about a neighbouring code ("AB-410") that reads more like the question: the
knowledge base's retrieval with the real local embeddings, and the real `threadwise ask --source DIR`
process, offline (the extractive composer), on a small product manual written for this test."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.config import ModelSettings
from graphs import extractive as ex
from graphs.knowledge import KnowledgeBase
from graphs.models import build_embeddings
from tests.cli_helpers import ask

ERRORS = """# Sync errors

Orbitly shows a code when a sync with the workspace server fails. The table lists the codes a sync
can end with.

| Code | What it means | What to do |
|---|---|---|
| AB-401 | Your session has expired. | Sign in again from the menu bar. |
| AB-403 | Your role may not write to this folder. | Ask a workspace admin for the Editor role. |
| AB-429 | The server is busy and asked Orbitly to wait. | Orbitly retries by itself after a minute. |

If a sync fails with no code, check your network connection first.
"""

RELAY = """# The Orbitly relay

The relay forwards sync traffic for offices behind a strict firewall. It runs as a small service on
one computer of the office.

## Installing the relay

Download the relay package from the admin console and run it on a computer that stays on. The relay
listens on port 7455.

## AB-410

AB-410 means the relay's certificate has expired, so clients refuse to talk to it. Renew the
certificate from the admin console and restart the relay service.

## Logs

The relay writes its log to the relay folder. Send the log to support when you report a problem.
"""

INSTALL = """# Installing Orbitly

Orbitly runs on Windows, macOS and Linux. Download the installer from the website and run it. Sign in
with your workspace account when Orbitly first starts.
"""


@pytest.fixture(scope="module")
def manual(tmp_path_factory) -> Path:
    """A folder with the manual under ``manual/`` and a config.toml keeping its data under ``data/``."""
    root = tmp_path_factory.mktemp("codes")
    (root / "manual").mkdir()
    for name, text in (("errors.md", ERRORS), ("relay.md", RELAY), ("install.md", INSTALL)):
        (root / "manual" / name).write_text(text)
    (root / "config.toml").write_text(
        '[knowledge]\nembeddings = "local"\n[graph]\ncomposer = "extractive"\n[service]\ndata_dir = "data"\n'
    )
    return root


@pytest.mark.slow
@pytest.mark.parametrize(
    "question, meaning, source",
    [
        ("What does AB-403 mean?", "Editor role", "errors.md"),
        ("getting ab403 on every sync, what do i do", "Editor role", "errors.md"),
        ("What does AB-410 mean?", "certificate has expired", "relay.md"),
    ],
)
def test_a_code_in_a_table_is_answered_from_its_row_not_from_a_neighbouring_codes_section(
    manual, question, meaning, source
):
    result = ask(manual, question, "--source", "manual")
    assert result["kind"] == "answer", result
    assert result["sources"][0] == source, result
    assert meaning in result["answer"], result["answer"]


@pytest.mark.slow
def test_the_page_holding_the_code_asked_about_is_found_first(manual, tmp_path):
    emb, eid = build_embeddings("local", ModelSettings())
    kb = KnowledgeBase(tmp_path / "index", [manual / "manual"], embeddings=emb, embedder_id=eid)
    kb.reindex()
    brain = ex.Extractive(ex.TextEmbedder(emb), kb)
    assert [d["location"] for d in brain.retrieve(["What does AB-403 mean?"], 3)][0] == "errors.md"
    assert [d["location"] for d in brain.retrieve(["what is AB-410?"], 3)][0] == "relay.md"
