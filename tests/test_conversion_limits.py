"""Small documents that cost a converter far more than their size: HTML nested 100,000 levels
deep (quadratic in bs4, then RecursionError in markdownify), a spreadsheet whose two cells sit
at A1 and XFD1048576 (17 billion padded cells), a Word table cell spanning two billion columns,
a PDF whose one stream inflates to hundreds of megabytes. Each is read in seconds holding
little memory, or refused in one problem line, through the real files and the real sync."""

from __future__ import annotations

import io
import time
import tracemalloc

import pytest

from graphs.knowledge.convert import (
    MAX_HTML_DEPTH,
    MAX_PDF_INFLATED_BYTES,
    MAX_SHEET_CELLS,
    ConversionError,
    convert,
    convert_here,
)
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


def xlsx(cells: dict[str, object]) -> bytes:
    from openpyxl import Workbook

    book = Workbook()
    for ref, value in cells.items():
        book.active[ref] = value
    buf = io.BytesIO()
    book.save(buf)
    return buf.getvalue()


def sparse_xlsx() -> bytes:
    """A 5 KB spreadsheet with values in its first and its last cell."""
    return xlsx({"A1": "VPN guide", "B1": "Port", "A2": "office", "B2": 443, "XFD1048576": "end"})


def gridspan_docx(span: int) -> bytes:
    """A real python-docx file with a 2-column table whose first cell says it spans ``span``
    columns."""
    import zipfile

    from docx import Document as Docx

    d = Docx()
    d.add_paragraph("Network guide")
    table = d.add_table(rows=2, cols=2)
    table.cell(0, 0).text, table.cell(0, 1).text = "Host", "Port"
    table.cell(1, 0).text, table.cell(1, 1).text = "vpn.example", "443"
    buf = io.BytesIO()
    d.save(buf)
    out = io.BytesIO()
    with zipfile.ZipFile(buf) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            part = src.read(info)
            if info.filename == "word/document.xml":
                part = part.replace(b"<w:tcPr>", b'<w:tcPr><w:gridSpan w:val="%d"/>' % span, 1)
                assert b"gridSpan" in part
            dst.writestr(info, part)
    return out.getvalue()


def flate_pdf(size: int, truncate: int = 0) -> bytes:
    """A one-page PDF whose content stream (FlateDecode) inflates to about ``size`` bytes: the
    words "VPN port 443" shown once, then spaces; compressed in a stream, 1 MB at a time.
    ``truncate`` cuts that many bytes off the compressed stream's end (a damaged stream)."""
    import zlib

    text = b"BT /F1 12 Tf 72 712 Td (VPN port 443) Tj ET\n"
    pad = b" " * 1_000_000
    comp = zlib.compressobj(9)
    parts = [comp.compress(text)] + [comp.compress(pad) for _ in range(size // len(pad))] + [comp.flush()]
    stream = b"".join(parts)
    stream = stream[: len(stream) - truncate]
    objs = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    buf = io.BytesIO()
    buf.write(b"%PDF-1.4\n")
    offsets = []
    for k, obj in enumerate(objs, 1):
        offsets.append(buf.tell())
        buf.write(b"%d 0 obj\n" % k + obj + b"\nendobj\n")
    xref = buf.tell()
    buf.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1))
    for off in offsets:
        buf.write(b"%010d 00000 n \n" % off)
    buf.write(b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objs) + 1, xref))
    return buf.getvalue()


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


def sync_folder(tmp_path, files: dict[str, bytes]):
    """``threadwise sync`` in a real process of a files source holding ``files`` and a
    Markdown page beside them; returns ``(completed process, seconds)`` after checking it
    exited 0."""
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, data in files.items():
        (docs / name).write_bytes(data)
    (docs / "leave.md").write_text("# Leave\n\nAsk your manager before booking leave.\n")
    cfg = files_config(tmp_path, docs)
    t0 = time.monotonic()
    synced = threadwise("sync", "--config", str(cfg), cwd=tmp_path, timeout=200)
    took = time.monotonic() - t0
    assert synced.returncode == 0, synced.stderr[-2000:]
    return synced, took


def test_a_sync_reads_a_deeply_nested_html_file_in_seconds(tmp_path):
    synced, took = sync_folder(tmp_path, {"deep.html": nested_html(100_000)})
    assert "docs: 2 added" in synced.stdout, synced.stdout
    assert took < 90, took


def test_a_sheet_with_values_in_its_first_and_last_cell_reads_only_the_cells_it_holds():
    data = sparse_xlsx()
    assert len(data) < 10_000
    convert_here(xlsx({"A1": "warm"}), "xlsx")  # openpyxl's first import is not what is measured
    tracemalloc.start()
    t0 = time.perf_counter()
    text = convert_here(data, "xlsx").text  # in this process: its memory is what is measured
    took = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    # the old reader padded 1,048,576 rows to 16,384 columns: 11 GB before it was stopped
    assert took < 10 and peak < 20_000_000, (took, peak)
    assert text == ("## Sheet\n\n| VPN guide | Port |  |\n| --- | --- | --- |\n| office | 443 |  |\n|  |  | end |\n"), (
        text
    )


def test_a_sheet_whose_table_would_exceed_the_cell_limit_is_refused_in_one_line():
    side = int(MAX_SHEET_CELLS**0.5) + 1  # a diagonal: few cells, a table of over a million
    from openpyxl.utils import get_column_letter

    data = xlsx({f"{get_column_letter(i)}{i}": "x" for i in range(1, side + 1)})
    with pytest.raises(ConversionError, match=r"^refused: sheet Sheet would be a table of 1,001 rows by 1,001 columns"):
        convert(data, "diagonal.xlsx")


def test_a_word_table_cell_spanning_two_billion_columns_is_read_within_the_table_grid():
    convert_here(gridspan_docx(1), "docx")  # python-docx's first import is not what is measured
    tracemalloc.start()
    t0 = time.perf_counter()
    text = convert_here(gridspan_docx(2_000_000_000), "docx").text  # in this process, measured
    took = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    # python-docx repeats a spanning cell per column: 10.9 GB before it was stopped
    assert took < 10 and peak < 20_000_000, (took, peak)
    # the span stops at the grid's 2 columns; the next cell still gives its text once
    want = "Network guide\n\n| Host | Host | Port |\n| --- | --- | --- |\n| vpn.example | 443 |  |\n"
    assert text == want, text
    # a span the grid holds repeats the cell over the columns it covers, as before
    assert convert(gridspan_docx(2), "span.docx").text == want


def test_a_sync_reads_the_small_office_files_that_expand_in_the_converter_and_refuses_a_pdf_bomb_in_one_line(tmp_path):
    synced, took = sync_folder(
        tmp_path,
        {
            "sparse.xlsx": sparse_xlsx(),
            "span.docx": gridspan_docx(2_000_000_000),
            "bomb.pdf": flate_pdf(MAX_PDF_INFLATED_BYTES + 50_000_000),
        },
    )
    assert "docs: 3 added" in synced.stdout, synced.stdout
    problems = [line.strip() for line in synced.stdout.splitlines() if line.strip().startswith("– docs:")]
    assert len(problems) == 1 and "bomb.pdf" in problems[0] and "inflate past 200 MB" in problems[0], synced.stdout
    assert took < 90, took


def test_a_pdf_whose_stream_inflates_past_the_limit_is_refused_holding_at_most_the_limit():
    assert "VPN port 443" in convert(flate_pdf(1_000_000), "small.pdf").text  # an ordinary one reads
    convert_here(flate_pdf(1_000), "pdf")  # pdfminer's first import in this process is not what is measured
    big = MAX_PDF_INFLATED_BYTES + 50_000_000
    for data in (flate_pdf(big), flate_pdf(big, truncate=20)):  # whole, and damaged (pdfminer's other path)
        assert len(data) < 1_000_000
        tracemalloc.start()
        t0 = time.perf_counter()
        with pytest.raises(ConversionError, match=r"^refused: this PDF's streams inflate past 200 MB"):
            convert_here(data, "pdf")  # in this process: its memory is what is measured
        took = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        # pdfminer inflated it whole and parsed it: 1.5 GB and 3 minutes for 400 MB
        assert took < 60 and peak < MAX_PDF_INFLATED_BYTES + 20_000_000, (took, peak)


def test_a_conversion_over_the_time_limit_costs_that_document_and_the_worker_starts_again(monkeypatch):
    from graphs.knowledge import convert as module

    html = nested_html(100_000) + b" " * module.ISOLATED_HTML_BYTES  # large: converted in the worker
    monkeypatch.setattr(module, "MAX_CONVERT_SECONDS", 0.3)
    t0 = time.monotonic()
    with pytest.raises(ConversionError, match=r"^stopped: converting this HTML took over 0.3 s"):
        convert(html, "deep.html")
    assert time.monotonic() - t0 < 10
    monkeypatch.setattr(module, "MAX_CONVERT_SECONDS", 120.0)
    assert "Pelican" in convert(xlsx({"A1": "Pelican"}), "next.xlsx").text


def test_a_conversion_over_the_memory_limit_costs_that_document_and_the_worker_starts_again(monkeypatch):
    from graphs.knowledge import convert as module

    module._WORKER._stop()  # a worker started with this test's limit
    monkeypatch.setattr(module, "MAX_CONVERT_MEMORY_BYTES", 100_000_000)
    with pytest.raises(ConversionError, match=r"^stopped: this PDF needed more than the 0.1 GB of memory"):
        convert(flate_pdf(150_000_000), "big.pdf")  # under the inflate limit, over this memory limit
    assert "VPN port 443" in convert(flate_pdf(1_000_000), "small.pdf").text
    module._WORKER._stop()
