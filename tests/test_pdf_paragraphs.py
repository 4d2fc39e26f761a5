"""PDFs written by a real writer (fpdf2) at the line spacings documents use (1.0, 1.15, 1.5,
2.0), left-aligned and justified, with and without space between paragraphs: a paragraph's
printed lines are read as one paragraph, paragraphs stay apart, the title is a heading; and an
answer through the real CLI quotes the whole sentence, not the part after a line break."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from fpdf import FPDF

from graphs.knowledge.convert import convert
from tests.conftest import write_config
from tests.fakes.bot_process import threadwise

PT = 0.3528  # mm per point: fpdf2 measures in mm
PARAGRAPHS = [
    "Employees may work remotely up to three days per week after their probation period ends. "
    "The home office stipend is 300 euros per year and is paid with the January salary. "
    "Requests for working abroad for more than two weeks need approval by the People team.",
    "Core hours are 10:00 to 15:00 local time, during which everyone should be reachable on chat. "
    "Meetings should not be scheduled on Friday afternoons, and a well-run meeting has an agenda.",
]


def policy_pdf(spacing: float, *, align: str = "L", space_after: bool = True, title_pt: float = 16) -> bytes:
    """A one-page policy: a title (``title_pt``, bold), a section heading in the body's type,
    and two 11 pt paragraphs at ``spacing`` times single spacing (1.15 x the type size), each
    followed by an empty line when ``space_after``."""
    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", "B", size=title_pt)
    pdf.multi_cell(0, title_pt * PT * 1.2, "Remote Work Policy", new_x="LMARGIN", new_y="NEXT")
    pdf.ln(4)
    pdf.set_font("Helvetica", size=11)
    line = 11 * PT * 1.15 * spacing
    pdf.multi_cell(0, line, "Eligibility", new_x="LMARGIN", new_y="NEXT")
    pdf.ln(line)
    for text in PARAGRAPHS:
        pdf.multi_cell(0, line, text, align=align, new_x="LMARGIN", new_y="NEXT")
        if space_after:
            pdf.ln(line)
    return bytes(pdf.output())


@pytest.mark.parametrize("spacing", [1.0, 1.15, 1.5, 2.0])
@pytest.mark.parametrize(("align", "space_after"), [("L", True), ("J", True), ("L", False), ("J", False)])
def test_wrapped_lines_are_one_paragraph_and_the_title_a_heading(spacing, align, space_after):
    data = policy_pdf(spacing, align=align, space_after=space_after)
    text = convert(data, "remote.pdf").text
    assert text.split("\n\n") == ["# Remote Work Policy", "## Eligibility", *PARAGRAPHS], text
    # each paragraph was printed on several lines (or this test would prove nothing)
    from pdfminer.high_level import extract_text

    printed = [ln for ln in extract_text(io.BytesIO(data)).splitlines() if ln.strip()]
    assert len(printed) >= 2 + 2 * 2, printed


def test_a_title_in_the_body_type_is_a_heading_and_lists_stay_items():
    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", size=12)
    step = 12 * PT * 1.5
    pdf.multi_cell(0, step, "Travel and Expense Policy", new_x="LMARGIN", new_y="NEXT")
    pdf.ln(step)
    pdf.multi_cell(0, step, "Bring these to the office:", new_x="LMARGIN", new_y="NEXT")
    for item in ("- your passport", "- the signed NDA", "- a photo for the badge"):
        pdf.multi_cell(0, step, item, new_x="LMARGIN", new_y="NEXT")
    text = convert(bytes(pdf.output()), "travel.pdf").text
    assert text.split("\n\n") == [
        "# Travel and Expense Policy",
        "Bring these to the office:",
        "- your passport",
        "- the signed NDA",
        "- a photo for the badge",
    ], text


def test_an_answer_quotes_the_whole_sentence_of_a_pdf_at_one_and_a_half_spacing(tmp_path):
    folder = tmp_path / "pdfs"
    folder.mkdir()
    (folder / "remote.pdf").write_bytes(policy_pdf(1.5, align="J"))
    # other documents, as a real folder has (a search over one document finds nothing rare)
    (folder / "vpn.md").write_text("# VPN\n\nConnect to the quetzal gateway with WireGuard on port 51820.\n")
    (folder / "leave.md").write_text("# Leave\n\nBook leave in the HR portal two weeks ahead.\n")
    cfg = write_config(tmp_path, extra='\n[graph]\ncomposer = "extractive"\ngraders = "lexical"\n')
    result = threadwise(
        "ask",
        "--json",
        "What is the home office stipend?",
        "--source",
        str(folder),
        "--config",
        str(cfg),
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    answer = json.loads(result.stdout)
    assert "The home office stipend is 300 euros per year and is paid with the January salary." in answer["answer"], (
        answer
    )
    assert answer["sources"] == ["remote.pdf"], answer


def test_the_line_spacing_of_the_pdf_is_what_the_test_says(tmp_path: Path):
    """The PDFs above really differ in line pitch: 1.0 -> ~12.7 pt, 2.0 -> ~25.3 pt."""
    from pdfminer.high_level import extract_pages
    from pdfminer.layout import LTTextBox

    def pitch(spacing: float) -> float:
        lines = [
            ln
            for page in extract_pages(io.BytesIO(policy_pdf(spacing, space_after=False)))
            for box in page
            if isinstance(box, LTTextBox)
            for ln in box
        ]
        body = [ln for ln in lines if round(ln.height) <= 12]
        return min(a.y0 - b.y0 for a, b in zip(body, body[1:], strict=False) if a.y0 > b.y0)

    assert 12 < pitch(1.0) < 13.5 and 24.5 < pitch(2.0) < 26.5
