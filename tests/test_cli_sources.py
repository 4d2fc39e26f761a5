"""The knowledge source commands as a new user meets them, through the real process:
``--source DIR`` folders, ``threadwise sources`` on a narrow terminal and in a pipe, and the
``[[sources]]`` front door's mistakes (an unknown name, key or type, an unreachable site, a
missing folder)."""

from __future__ import annotations

import io
import json
from pathlib import Path

from tests.conftest import write_config
from tests.fakes.bot_process import threadwise
from tests.test_sources import page


def offline_config(root: Path, extra: str = "") -> Path:
    """A config.toml that answers without any model: keyword search, extractive answers."""
    return write_config(root, extra='\n[graph]\ncomposer = "extractive"\ngraders = "lexical"\n' + extra)


def write_html_and_docx(folder: Path) -> None:
    """An HTML page and a Word file (written by python-docx), each holding one fact."""
    from docx import Document as Docx

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vpn.html").write_bytes(
        page("VPN guide", "<h1>VPN guide</h1><p>Connect to the quetzal gateway with WireGuard on port 51820.</p>")
    )
    d = Docx()
    d.add_heading("Parking", 1)
    d.add_paragraph("Visitors park their okapi carts in bay nine, behind the loading dock.")
    buf = io.BytesIO()
    d.save(buf)
    (folder / "parking.docx").write_bytes(buf.getvalue())


def test_ask_with_a_source_folder_reads_html_and_word_files_and_cites_them(tmp_path):
    write_html_and_docx(tmp_path / "team-docs")
    cfg = offline_config(tmp_path)
    for question, cited, fact in [
        ("where do visitors park their okapi carts?", "parking.docx", "bay nine"),
        ("how do I connect to the quetzal gateway?", "vpn.html", "WireGuard"),
    ]:
        result = threadwise("ask", "--json", question, "--source", "team-docs", "--config", str(cfg), cwd=tmp_path)
        assert result.returncode == 0, result.stderr[-2000:]
        answer = json.loads(result.stdout)
        assert answer["sources"] == [cited], answer
        assert fact in answer["answer"], answer
    # the same folder through reindex: both files are documents of one files source
    result = threadwise("reindex", "--source", "team-docs", "--config", str(cfg), cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "team-docs: 0 added, 0 updated, 0 removed, 2 unchanged" in result.stdout
