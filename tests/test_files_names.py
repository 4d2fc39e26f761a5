"""A files source's ids and links, through real folders and the real ``threadwise sync``: two
folders of one source that both hold a README.md both stay in the index (each id starts with
its folder's name; a source of one path keeps ids relative to it), and a file name that is not
UTF-8 is linked with its real bytes percent-encoded."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

from graphs.knowledge.connectors import FilesConnector
from tests.conftest import write_config
from tests.fakes.bot_process import threadwise


def config(root: Path, paths: list[str], web_url: str) -> Path:
    """A config answering without a model, with one files source ``team`` of ``paths``."""
    cfg = write_config(root, extra='\n[graph]\ncomposer = "extractive"\ngraders = "lexical"\n')
    kept = [line for line in cfg.read_text().splitlines() if not line.startswith("sources = ")]
    cfg.write_text(
        "\n".join(kept)
        + f'\n[[sources]]\nname = "team"\ntype = "files"\npath = {json.dumps(paths)}\nweb_url = "{web_url}"\n'
    )
    return cfg


def live_chunks(root: Path) -> dict[str, tuple[str, str]]:
    """``{file: (url, text)}`` of the live generation's chunks under ``root/data``."""
    [index] = [p for p in (root / "data").iterdir() if p.name.startswith("index")]
    live = (index / "CURRENT").read_text().strip()
    with sqlite3.connect(index / live / "chunks.sqlite") as db:
        return {f: (u, t) for f, u, t in db.execute("SELECT file, url, text FROM chunks")}


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_two_folders_holding_a_readme_both_stay_and_a_latin1_name_links_to_its_bytes(tmp_path):
    write(tmp_path / "eng" / "README.md", "# Engineering\n\nThe otter deploy window is Tuesday.\n")
    write(tmp_path / "sales" / "README.md", "# Sales\n\nThe pelican discount is ten percent.\n")
    write(tmp_path / "policies" / "README.md", "# Policies\n\nThe lynx badge opens the lab.\n")
    write(tmp_path / "en" / "docs" / "README.md", "# Docs\n\nThe heron manual is in English.\n")
    write(tmp_path / "de" / "docs" / "README.md", "# Doku\n\nDas Reiher-Handbuch ist auf Deutsch.\n")
    with open(os.fsencode(tmp_path / "eng") + b"/caf\xe9.md", "wb") as f:
        f.write(b"# Cafe\n\nThe espresso machine descales on Fridays.\n")
    paths = ["eng", "sales", "policies/*.md", "en/docs", "de/docs/"]
    cfg = config(tmp_path, paths, "https://intranet.test/kb/{folder}/{path}")
    result = threadwise("sync", "--config", str(cfg), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr[-2000:]
    assert "• team: 6 added, 0 updated, 0 removed, 0 unchanged (" in result.stdout, result.stdout
    chunks = live_chunks(tmp_path)
    assert {f: u for f, (u, _) in chunks.items()} == {
        "eng/README.md": "https://intranet.test/kb/eng/README.md",
        "sales/README.md": "https://intranet.test/kb/sales/README.md",
        "policies/README.md": "https://intranet.test/kb/policies/README.md",
        "en/docs/README.md": "https://intranet.test/kb/en/docs/README.md",
        "de/docs/README.md": "https://intranet.test/kb/de/docs/README.md",
        "eng/caf\\xe9.md": "https://intranet.test/kb/eng/caf%E9.md",
    }
    assert "pelican" in chunks["sales/README.md"][1] and "otter" in chunks["eng/README.md"][1]

    again = threadwise("sync", "--config", str(cfg), cwd=tmp_path)
    assert "• team: 0 added, 0 updated, 0 removed, 6 unchanged (" in again.stdout, again.stdout

    asked = threadwise("ask", "--json", "What is the pelican discount?", "--config", str(cfg), cwd=tmp_path)
    assert asked.returncode == 0, asked.stderr[-2000:]
    answer = json.loads(asked.stdout)
    assert "ten percent" in answer["answer"] and answer["sources"][0] == "https://intranet.test/kb/sales/README.md", (
        answer
    )


def test_a_source_of_one_folder_keeps_ids_relative_to_it(tmp_path):
    write(tmp_path / "eng" / "README.md", "# Engineering\n\nThe otter deploy window is Tuesday.\n")
    write(tmp_path / "eng" / "ops" / "README.md", "# Ops\n\nThe yak rota.\n")
    listing = FilesConnector("team", [str(tmp_path / "eng")]).scan({}, {})
    assert sorted(d.id for d in listing.changed) == ["README.md", "ops/README.md"]
    two = FilesConnector("team", [str(tmp_path / "eng"), str(tmp_path / "eng" / "ops")]).folders()
    assert list(two.values()) == ["eng", "ops"]
