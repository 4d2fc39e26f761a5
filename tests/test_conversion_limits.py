"""Small documents that cost a converter far more than their size: HTML nested 100,000 levels
deep (quadratic in bs4, then RecursionError in markdownify), a spreadsheet whose two cells sit
at A1 and XFD1048576 (17 billion padded cells), a Word table cell spanning two billion columns,
a PDF whose one stream inflates to hundreds of megabytes. Each is read in seconds holding
little memory, or refused in one problem line, through the real files and the real sync."""

from __future__ import annotations

import time

import pytest

from graphs.knowledge.convert import MAX_HTML_DEPTH, convert
from tests.conftest import write_config
from tests.fakes.bot_process import threadwise

pytestmark = pytest.mark.timeout(240)  # the old converters took minutes to hours on each of these


def nested_html(levels: int, tag: str = "div") -> bytes:
    return (
        "<html><body><p>Intro about the handbook.</p>"
        + f"<{tag}>" * levels
        + "<p>Deep text about otters.</p>"
        + f"</{tag}>" * levels
        + "</body></html>"
    ).encode()


def files_config(tmp_path, folder):
    cfg = write_config(tmp_path, extra='\n[graph]\ncomposer = "extractive"\ngraders = "lexical"\n', sources=[folder])
    kept = [line for line in cfg.read_text().splitlines() if not line.startswith("sources = ")]
    cfg.write_text("\n".join(kept) + f'\n[[sources]]\nname = "docs"\ntype = "files"\npath = ["{folder.name}"]\n')
    return cfg


def test_html_nested_100000_levels_converts_in_seconds_keeping_its_words():
    t0 = time.perf_counter()
    text = convert(nested_html(100_000), "deep.html").text
    took = time.perf_counter() - t0
    assert "Intro about the handbook." in text and "Deep text about otters." in text, text[:300]
    assert took < 30, took  # linear: ~3 s on the shared machine; the old walk did not end in 300 s
    for tag in ("a href='/x'", "li", "nav"):  # nested links, lists, chrome: bounded as well
        t0 = time.perf_counter()
        convert(nested_html(30_000, tag), "deep.html")
        assert time.perf_counter() - t0 < 30, tag


def test_html_within_the_depth_limit_keeps_its_structure_and_deeper_parts_keep_their_words():
    inside = "<ul><li>" * 20 + "<a href='https://example.com/vpn'>VPN guide</a>" + "</li></ul>" * 20
    assert "[VPN guide](https://example.com/vpn)" in convert(inside.encode(), "list.html").text
    beyond = "<div>" * (MAX_HTML_DEPTH + 5) + inside + "</div>" * (MAX_HTML_DEPTH + 5)
    text = convert(beyond.encode(), "list.html").text
    assert "VPN guide" in text and "](https" not in text, text[-300:]


def test_a_sync_reads_a_deeply_nested_html_file_in_seconds(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "deep.html").write_bytes(nested_html(100_000))
    (docs / "leave.md").write_text("# Leave\n\nAsk your manager before booking leave.\n")
    cfg = files_config(tmp_path, docs)
    t0 = time.monotonic()
    synced = threadwise("sync", "--config", str(cfg), cwd=tmp_path, timeout=200)
    took = time.monotonic() - t0
    assert synced.returncode == 0, synced.stderr[-2000:]
    assert "docs: 2 added" in synced.stdout, synced.stdout
    assert took < 90, took
