"""The knowledge source commands as a new user meets them, through the real process:
``--source DIR`` folders, ``threadwise sources`` on a narrow terminal and in a pipe, and the
``[[sources]]`` front door's mistakes (an unknown name, key or type, an unreachable site, a
missing folder)."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

from tests.conftest import write_config
from tests.fakes.bot_process import threadwise
from tests.test_sources import page

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


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


def long_named_sources(tmp_path: Path) -> tuple[Path, str, str]:
    """A config with a files source of a long name and a git source whose last sync failed
    with a long error; returns (config, the long name, the error's repository path)."""
    (tmp_path / "handbook").mkdir()
    (tmp_path / "handbook" / "a.md").write_text("# Leave\n\nAsk your manager before booking leave.\n")
    name = "engineering-handbook-and-runbooks-for-the-platform-team"
    missing = tmp_path / "no" / "such" / "repository" / "anywhere" / "on" / "this" / "disk.git"
    cfg = offline_config(tmp_path)
    cfg.write_text(
        cfg.read_text()
        + f'\n[[sources]]\nname = "{name}"\ntype = "files"\npath = "handbook"\nschedule = "6h"\n'
        + f'\n[[sources]]\nname = "wiki"\ntype = "git"\nrepo = "{missing}"\n'
    )
    synced = threadwise("sync", "--config", str(cfg), cwd=tmp_path)
    assert synced.returncode == 1, synced.stderr  # the git source failed, the files source synced
    return cfg, name, str(missing)


def test_sources_shows_every_source_whole_on_a_narrow_terminal_and_in_a_pipe(tmp_path):
    cfg, name, missing = long_named_sources(tmp_path)
    tty = threadwise("sources", "--config", str(cfg), cwd=tmp_path, columns=80)
    assert tty.returncode == 0, tty.stderr
    shown = ANSI.sub("", tty.stdout)
    assert "…" not in shown, shown
    # a block per source: the whole name, the counts, the last sync and the whole error
    assert f"{name} (files)" in shown and "wiki (git)" in shown, shown
    assert "documents: 1" in shown and "chunks: 1" in shown and "schedule: 6h" in shown, shown
    assert f"repository not found: {missing}" in shown, shown
    assert re.search(r"last sync: \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", shown), shown
    # a wide terminal: the table, each cell whole
    wide = ANSI.sub("", threadwise("sources", "--config", str(cfg), cwd=tmp_path, columns=300).stdout)
    assert "┃ source" in wide and name in wide and f"repository not found: {missing}" in wide and "…" not in wide
    assert "not in the index; repository not found" in wide, wide
    # a pipe: one plain line per source
    piped = threadwise("sources", "--config", str(cfg), cwd=tmp_path)
    assert piped.returncode == 0 and "\x1b[" not in piped.stdout and "┃" not in piped.stdout
    lines = {line.split(" ", 2)[1]: line for line in piped.stdout.splitlines() if line.startswith("• ")}
    assert "1 document, 1 chunk," in lines[name] and "every 6h" in lines[name], piped.stdout
    assert f"FAILED: repository not found: {missing}" in lines["wiki"], piped.stdout
    assert "NOT IN THE INDEX (`threadwise sync wiki` reads it)" in lines["wiki"], piped.stdout


def test_a_sources_entry_with_a_wrong_or_missing_key_or_type_is_one_line_naming_the_key(tmp_path):
    (tmp_path / "handbook").mkdir()
    base = offline_config(tmp_path).read_text()
    cfg = tmp_path / "config.toml"
    for entry, line in [
        ('type = "files"\npath = "handbook"\nurl = "https://x.example/"', "url: not an option of a files"),
        ('type = "files"\npaths = ["handbook"]', "paths: not an option of a files source"),
        ('type = "web"\nurl = "https://x.example/"\nbranch = "main"', "branch: not an option of a web"),
        ('type = "files"\npath = "handbook"\ncolour = "red"', "colour: unknown key"),
        ('type = "web"', "url: missing (a web source needs it)"),
        ('type = "git"\nrepo = ""', "repo: missing (a git source needs it)"),
        ('path = "handbook"', "type: Field required"),
        ('type = "ftp"\npath = "handbook"', "type: Input should be 'files', 'web' or 'git' (got 'ftp')"),
        ('type = "files"\npath = "handbook"\nschedule = "often"', "schedule: 'often' is not a period"),
        ('type = "web"\nurl = "docs.example.com"', "url: an http:// or https:// address is needed"),
        ('type = "files"\npath = "handbook"\nweb_url = "https://x/{file}"', "web_url: {file} is not one"),
        ('type = "files"\npath = "handbook"\nweb_url = "https://x/{path"', "web_url: not a template"),
        ('type = "git"\nrepo = "r"\nweb_url = "https://x/{stem}"', "web_url: {stem} is not one of"),
    ]:
        cfg.write_text(base + f'\n[[sources]]\nname = "handbook"\n{entry}\n')
        result = threadwise("sources", "--config", str(cfg), cwd=tmp_path)
        assert result.returncode == 2, (entry, result.stdout)
        [shown] = result.stderr.strip().splitlines()  # one line
        # the entry as written: counted from 1, by its name (not "sources.0.url")
        assert shown.startswith(f'Configuration error: config.toml: [[sources]] entry 1 (name = "handbook"): {line}'), (
            entry,
            shown,
        )


def test_sync_of_sources_that_cannot_be_read_says_so_in_one_line_each_and_syncs_the_others(tmp_path):
    (tmp_path / "handbook").mkdir()
    (tmp_path / "handbook" / "leave.md").write_text("# Leave\n\nAsk your manager before booking leave.\n")
    (tmp_path / "notes.rtf").write_text("{\\rtf1 not read}")
    cfg = offline_config(tmp_path)
    cfg.write_text(
        cfg.read_text()
        + """
[[sources]]
name = "handbook"
type = "files"
path = "handbook"

[[sources]]
name = "site"
type = "web"
url = "http://127.0.0.1:9/"

[[sources]]
name = "notes"
type = "files"
path = "notes.rtf"
"""
    )
    unknown = threadwise("sync", "handbok", "--config", str(cfg), cwd=tmp_path)
    assert unknown.returncode == 2 and unknown.stderr.strip().splitlines() == [
        f"Unknown source handbok: the sources are {tmp_path / 'kb'}, handbook, site, notes "
        "(`threadwise sources` lists them)"
    ]
    result = threadwise("sync", "--config", str(cfg), cwd=tmp_path)
    assert result.returncode == 1, result.stderr  # sources failed; the rest synced
    report = result.stdout.splitlines()
    assert "• handbook: 1 added, 0 updated, 0 removed, 0 unchanged (1 document, 1 chunk" in result.stdout
    [site] = [line for line in report if line.startswith("• site:")]
    assert site.startswith("• site: FAILED: start page http://127.0.0.1:9/: cannot connect ("), site
    # a file named in the configuration that no converter reads is a problem, not a silent skip
    assert "  – notes: notes.rtf: unsupported file type .rtf (a files source reads .md," in result.stdout
    # stderr: one log line per source that failed, one per unreadable document, nothing else
    logged = [line for line in result.stderr.splitlines() if " ERROR " in line or " WARNING " in line]
    assert len([line for line in logged if "site" in line]) == 1, logged
    assert len([line for line in logged if "notes.rtf" in line]) == 1, logged
    assert "Traceback" not in result.stderr


def test_sync_takes_a_knowledge_folder_by_the_name_config_toml_gives_it(tmp_path):
    cfg = offline_config(tmp_path)
    cfg.write_text(cfg.read_text().replace(json.dumps([str(tmp_path / "kb")]), '["kb/"]'))
    for name in ("kb", "kb/", "KB"):  # as written, or in another case
        result = threadwise("sync", name, "--config", str(cfg), cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        assert f"• {tmp_path / 'kb'}: " in result.stdout, result.stdout
    wrong = threadwise("sync", "kbb", "--config", str(cfg), cwd=tmp_path)
    assert wrong.returncode == 2 and wrong.stderr.strip().splitlines() == [
        f"Unknown source kbb: the sources are {tmp_path / 'kb'} (`threadwise sources` lists them)"
    ]


def write_tables(folder: Path) -> None:
    """Documents that hold nothing but a short table, each written by its format's own writer:
    a spreadsheet (openpyxl), a Word table (python-docx), an HTML table and a Markdown table."""
    from docx import Document as Docx
    from openpyxl import Workbook

    folder.mkdir(parents=True, exist_ok=True)
    wb = Workbook()
    ws = wb.active
    ws.title = "Rota"
    for row in (["Team", "On-call rota lead"], ["Search", "Tomasz"], ["Billing", "Benedikt"]):
        ws.append(row)
    buf = io.BytesIO()
    wb.save(buf)
    (folder / "oncall.xlsx").write_bytes(buf.getvalue())
    d = Docx()
    table = d.add_table(rows=3, cols=3)
    for r, cells in enumerate(
        [("Room", "Floor", "Seats"), ("Quokka room", "third", "12"), ("Wombat room", "fifth", "4")]
    ):
        for c, text in enumerate(cells):
            table.cell(r, c).text = text
    buf = io.BytesIO()
    d.save(buf)
    (folder / "rooms.docx").write_bytes(buf.getvalue())
    (folder / "ports.html").write_bytes(
        page(
            "Ports",
            # no <th>: the first row is the header
            "<table><tr><td>Service</td><td>Port</td></tr><tr><td>Capybara gateway</td><td>7443</td></tr>"
            "<tr><td>Mongoose cache</td><td>6380</td></tr></table>",
        )
    )
    (folder / "budgets.md").write_text(
        "| Project | Budget owner |\n| --- | --- |\n| Narwhal launch | Ingrid |\n| Pelican audit | Oskar |\n"
    )


def test_a_document_holding_only_a_short_table_is_answered_from_the_row_that_answers(tmp_path):
    write_tables(tmp_path / "tables")
    cfg = offline_config(tmp_path)
    for question, cited, row in [
        ("who leads the on-call rota for search?", "oncall.xlsx", "Team: Search, On-call rota lead: Tomasz"),
        ("which floor is the quokka room on?", "rooms.docx", "Room: Quokka room, Floor: third, Seats: 12"),
        ("which port is the capybara gateway on?", "ports.html", "Service: Capybara gateway, Port: 7443"),
        (
            "who is the budget owner of the narwhal launch?",
            "budgets.md",
            "Project: Narwhal launch, Budget owner: Ingrid",
        ),
    ]:
        result = threadwise("ask", "--json", question, "--source", "tables", "--config", str(cfg), cwd=tmp_path)
        assert result.returncode == 0, result.stderr[-2000:]
        answer = json.loads(result.stdout)
        assert answer["sources"][:1] == [cited], (question, answer)
        # the row that answers opens the answer, read with its header
        assert answer["answer"].startswith(f"{row} [1]"), (question, answer)


def test_an_index_from_before_a_format_was_read_is_read_again_without_a_reindex(tmp_path):
    """An index written when office files were not read (its manifest, as an older release
    wrote it, names no readers) is synced again by the next command that uses it, and the
    files it passed over are answered from; with the readers recorded, the next command reads
    only what changed in the folder."""
    from docx import Document as Docx

    folder = tmp_path / "team-docs"
    folder.mkdir()
    (folder / "leave.md").write_text("# Leave\n\nAsk your manager before booking leave.\n")
    cfg = offline_config(tmp_path)
    first = threadwise(
        "ask", "--json", "how do I book leave?", "--source", "team-docs", "--config", str(cfg), cwd=tmp_path
    )
    assert first.returncode == 0 and json.loads(first.stdout)["sources"] == ["leave.md"], first.stderr[-2000:]
    d = Docx()
    d.add_paragraph("Visitors park their okapi carts in bay nine, behind the loading dock.")
    d.save(str(folder / "parking.docx"))
    # the live generation as a release that read Markdown only left it
    [manifest] = (tmp_path / "data").glob("index-*/gen-*/manifest.json")
    written = json.loads(manifest.read_text())
    assert "parking.docx" not in written["files"]
    written.pop("readers", None)
    manifest.write_text(json.dumps(written))
    question = ["ask", "--json", "where do visitors park their okapi carts?", "--source", "team-docs"]
    result = threadwise(*question, "--config", str(cfg), cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    answer = json.loads(result.stdout)
    assert answer["sources"] == ["parking.docx"] and "bay nine" in answer["answer"], answer
    assert "scan team-docs" in result.stderr  # synced again (its progress bar)
    # the readers are recorded now: the next command reads only the new file (a --source
    # folder is brought up to date before each command)
    (folder / "later.md").write_text("# Later\n\nThe aardvark lounge opens at noon.\n")
    again = threadwise(
        "ask",
        "--json",
        "when does the aardvark lounge open?",
        "--source",
        "team-docs",
        "--config",
        str(cfg),
        cwd=tmp_path,
    )
    assert again.returncode == 0, again.stderr[-2000:]
    assert json.loads(again.stdout)["sources"] == ["later.md"], again.stdout


def write_pdf(folder: Path, name: str, text: str) -> None:
    """A one-page text PDF (written by fpdf2) holding ``text``."""
    from fpdf import FPDF

    folder.mkdir(parents=True, exist_ok=True)
    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", size=11)
    pdf.multi_cell(0, 5, text)
    (folder / name).write_bytes(bytes(pdf.output()))


VACATION = "Every employee gets 27 vacation days per year, booked with the capybara form."


def write_pdfs(folder: Path) -> None:
    """A folder holding only PDFs: the vacation policy and two others (a search over one
    document finds nothing rare)."""
    write_pdf(folder, "policy.pdf", VACATION)
    write_pdf(folder, "vpn.pdf", "Connect to the quetzal gateway with WireGuard on port 51820.")
    write_pdf(folder, "parking.pdf", "Visitors park their okapi carts in bay nine, behind the loading dock.")


def test_a_folder_of_pdfs_in_knowledge_sources_is_read_as_a_source_folder_reads_it(tmp_path):
    write_pdfs(tmp_path / "pdfs")
    cfg = write_config(
        tmp_path, extra='\n[graph]\ncomposer = "extractive"\ngraders = "lexical"\n', sources=[Path("pdfs")]
    )
    reindexed = threadwise("reindex", "--config", str(cfg), cwd=tmp_path)
    assert reindexed.returncode == 0, reindexed.stdout + reindexed.stderr[-2000:]
    assert "(3 documents, " in reindexed.stdout, reindexed.stdout
    for extra in ([], ["--source", "pdfs"]):  # config.toml's folder, and the same folder named on the command line
        asked = threadwise(
            "ask",
            "--json",
            "how do I book vacation days with the capybara form?",
            *extra,
            "--config",
            str(cfg),
            cwd=tmp_path,
        )
        assert asked.returncode == 0, asked.stderr[-2000:]
        answer = json.loads(asked.stdout)
        assert answer["sources"] == ["policy.pdf"] and "27 vacation days" in answer["answer"], answer


def test_a_knowledge_source_giving_no_document_says_so_in_one_line(tmp_path):
    write_pdfs(tmp_path / "pdfs")
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "parking.md").write_text("# Parking\n\nVisitors park in bay nine, said the okapi.\n")
    graph = '\n[graph]\ncomposer = "extractive"\ngraders = "lexical"\n'
    cfg = write_config(tmp_path, extra=graph, sources=[Path("pdfs"), Path("notes")])
    first = threadwise("reindex", "--config", str(cfg), cwd=tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr[-2000:]
    # the folder's PDF is not among the files config.toml's patterns read any more
    cfg.write_text(cfg.read_text().replace("k = 3\n", 'k = 3\npatterns = ["**/*.md"]\n'))
    one_empty = threadwise("reindex", "--config", str(cfg), cwd=tmp_path)
    assert one_empty.returncode == 0, one_empty.stdout + one_empty.stderr[-2000:]
    said = [line for line in one_empty.stderr.splitlines() if "gave no document" in line]
    pdfs = tmp_path / "pdfs"  # a [knowledge] sources folder is named by its path
    assert len(said) == 1 and f"source {pdfs} gave no document (no file matches its patterns: **/*.md)" in said[0], (
        one_empty.stderr
    )
    # no source gives a document: exit 1 and one line, with or without an index before
    cfg.write_text(cfg.read_text().replace('["pdfs", "notes"]', '["pdfs"]'))
    for command in (["reindex"], ["ask", "how do I book vacation days with the capybara form?"]):
        result = threadwise(*command, "--config", str(cfg), cwd=tmp_path)
        assert result.returncode == 1, (command, result.stdout, result.stderr[-2000:])
        said = [
            line for line in result.stderr.splitlines() if f"no text found in the knowledge sources: {pdfs}" in line
        ]
        assert len(said) == 1 and "Traceback" not in result.stderr, result.stderr
