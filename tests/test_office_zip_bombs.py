"""Office files are zip archives, and a small one can expand to gigabytes (a zip bomb): a
files source refuses such a file from its zip directory, before any converter opens it, with
one problem line naming it, reads the other files, and keeps the last good text of a file
indexed before. The bombs are real DOCX/XLSX files (python-docx, openpyxl) whose main part is
replaced by a highly compressible one, written in a stream (the test holds 1 MB at a time)."""

from __future__ import annotations

import io
import json
import time
import tracemalloc
import zipfile

import pytest

from graphs.knowledge.convert import MAX_UNZIPPED_BYTES, ConversionError, convert
from tests.conftest import write_config
from tests.fakes.bot_process import threadwise

pytestmark = pytest.mark.timeout(180)  # without the guard, python-docx parses a bomb for many minutes


def real_docx(text: str) -> bytes:
    from docx import Document as Docx

    d = Docx()
    d.add_heading("Budget", 1)
    d.add_paragraph(text)
    buf = io.BytesIO()
    d.save(buf)
    return buf.getvalue()


def real_xlsx() -> bytes:
    from openpyxl import Workbook

    wb = Workbook()
    wb.active.append(["Plan", "Price"])
    wb.active.append(["Pelican", 12])
    buf = io.BytesIO()
    wb.save(buf)
    return buf.getvalue()


def bomb(original: bytes, part: str, head: bytes, row: bytes, tail: bytes, size: int) -> bytes:
    """``original`` (an office file) with ``part`` replaced by ``head``, ``row`` repeated to
    about ``size`` bytes, and ``tail``: valid XML that expands ``size`` bytes, streamed into
    the archive 1 MB at a time."""
    out = io.BytesIO()
    chunk = row * (1_000_000 // len(row))
    with zipfile.ZipFile(io.BytesIO(original)) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            if info.filename != part:
                dst.writestr(info, src.read(info))
                continue
            with dst.open(part, "w", force_zip64=True) as f:
                f.write(head)
                for _ in range(size // len(chunk)):
                    f.write(chunk)
                f.write(tail)
    return out.getvalue()


W = b'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'


def docx_bomb(size: int) -> bytes:
    """A DOCX whose document.xml is ``size`` bytes of the same paragraph (~1000:1)."""
    return bomb(
        real_docx("placeholder"),
        "word/document.xml",
        b"<?xml version='1.0' encoding='UTF-8' standalone='yes'?><w:document " + W + b"><w:body>",
        b"<w:p><w:r><w:t>capybara capybara capybara</w:t></w:r></w:p>",
        b"</w:body></w:document>",
        size,
    )


def xlsx_bomb(size: int) -> bytes:
    """An XLSX whose first sheet is ``size`` bytes of the same row."""
    return bomb(
        real_xlsx(),
        "xl/worksheets/sheet1.xml",
        b'<?xml version="1.0" encoding="UTF-8"?><worksheet '
        b'xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>',
        b'<row><c t="inlineStr"><is><t>zero zero zero zero zero</t></is></c></row>',
        b"</sheetData></worksheet>",
        size,
    )


def test_a_zip_bomb_is_refused_from_its_zip_directory_in_milliseconds_holding_no_more_than_the_file():
    small = docx_bomb(20_000_000)  # 20 MB of XML (under the 200 MB cap): the ratio refuses it
    large = xlsx_bomb(MAX_UNZIPPED_BYTES + 100_000_000)  # 300 MB in all: the total refuses it
    assert len(small) < 100_000 and len(large) < 2_000_000, (len(small), len(large))
    for data, name, reason in [
        (small, "report.docx", "refused: its part word/document.xml expands "),
        (large, "prices.xlsx", "refused: this XLSX expands to 300 MB, over the 200 MB"),
    ]:
        tracemalloc.start()
        t0 = time.perf_counter()
        with pytest.raises(ConversionError) as refused:
            convert(data, name)
        took = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert str(refused.value).startswith(reason), str(refused.value)
        assert "zip bomb" in str(refused.value)
        # the old path parsed the whole part: minutes and gigabytes
        assert took < 0.5 and peak < 5_000_000, (name, took, peak)
    # the rule does not refuse ordinary files
    assert "Pelican" in convert(real_xlsx(), "p.xlsx").text
    assert "capybara" in convert(real_docx("The capybara budget is 40 euros."), "b.docx").text


def test_a_sync_refuses_office_zip_bombs_in_one_line_each_reads_the_rest_and_keeps_the_last_good_text(tmp_path):
    docs = tmp_path / "office"
    docs.mkdir()
    (docs / "leave.md").write_text("# Leave\n\nAsk your manager before booking leave.\n")
    (docs / "report.docx").write_bytes(real_docx("The capybara budget is forty euros a month."))
    cfg = write_config(tmp_path, extra='\n[graph]\ncomposer = "extractive"\ngraders = "lexical"\n', sources=[docs])
    kept = [line for line in cfg.read_text().splitlines() if not line.startswith("sources = ")]
    cfg.write_text("\n".join(kept) + '\n[[sources]]\nname = "office"\ntype = "files"\npath = ["office"]\n')
    first = threadwise("sync", "--config", str(cfg), cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-2000:]
    assert "office: 2 added" in first.stdout, first.stdout

    # the same report replaced by a bomb, and a spreadsheet bomb beside it
    (docs / "report.docx").write_bytes(docx_bomb(20_000_000))
    (docs / "prices.xlsx").write_bytes(xlsx_bomb(MAX_UNZIPPED_BYTES + 100_000_000))
    (docs / "travel.md").write_text("# Travel\n\nBook trains through the wombat portal.\n")
    t0 = time.monotonic()
    second = threadwise("sync", "--config", str(cfg), cwd=tmp_path, timeout=120)
    took = time.monotonic() - t0
    assert second.returncode == 0, second.stderr[-2000:]
    assert "office: 1 added, 0 updated, 0 removed, 2 unchanged" in second.stdout, second.stdout
    problems = [line.strip() for line in second.stdout.splitlines() if line.strip().startswith("– office:")]
    assert len(problems) == 2, second.stdout
    [docx_line] = [p for p in problems if "report.docx" in p]
    [xlsx_line] = [p for p in problems if "prices.xlsx" in p]
    assert "refused: its part word/document.xml expands" in docx_line and "100:1" in docx_line, docx_line
    assert "refused: this XLSX expands to 300 MB" in xlsx_line, xlsx_line
    assert took < 60, took  # CLI start and a sync of three small files; the bombs cost nothing
    assert "Traceback" not in second.stderr

    # the report's last good text is still what answers
    asked = threadwise("ask", "--json", "what is the capybara budget?", "--config", str(cfg), cwd=tmp_path)
    assert asked.returncode == 0, asked.stderr[-2000:]
    answer = json.loads(asked.stdout)
    assert answer["sources"] == ["report.docx"] and "forty euros" in answer["answer"], answer
    listed = json.loads(threadwise("sources", "--json", "--config", str(cfg), cwd=tmp_path).stdout.splitlines()[0])
    assert listed["documents"] == 3, listed
