"""Every question set in bench/eval names pages that exist in its corpus and expects facts that
those pages state verbatim, checked by running bench/check_facts.py as a process (it reads the
pages only: no index, no search, so it is safe on held-out corpora)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EVAL = ROOT / "bench" / "eval"
CORPORA = ROOT / "bench" / "corpora"
# eval sets named after a shorter word than their corpus folder
FOLDERS = {"httpx": "httpx-docs", "hugo": "hugo-docs", "dxw": "dxw-playbook"}
# The fourth held-out pair's pages are not committed (pages fetched from other projects stay out
# of the repository); they are looked for in these folders too, separated like PATH.
EXTRA_CORPORA = [Path(p) for p in os.environ.get("THREADWISE_EXTRA_CORPORA", "").split(os.pathsep) if p]


def corpus_of(path: Path) -> Path:
    """The corpus folder of an eval set: its name without "crosslang-" and "-heldout" (or
    "-heldout3", "-heldout4"), in bench/corpora or else in a folder of THREADWISE_EXTRA_CORPORA."""
    name = re.sub(r"-heldout\d*$", "", path.stem.removeprefix("crosslang-"))
    folder = FOLDERS.get(name, name)
    for root in (CORPORA, *EXTRA_CORPORA):
        if (root / folder).is_dir():
            return root / folder
    return CORPORA / folder


SETS = sorted(p for p in EVAL.glob("*.jsonl") if corpus_of(p).is_dir())


def test_the_sets_of_both_new_held_out_corpora_are_checked():
    names = {p.name for p in SETS}
    for corpus in ("cargo-book", "engineering-playbook"):
        assert f"{corpus}-heldout.jsonl" in names
        assert f"crosslang-{corpus}-heldout.jsonl" in names


def test_the_sets_of_the_third_held_out_corpora_are_checked():
    names = {p.name for p in SETS}
    for corpus in ("redis-commands", "jellyfin-docs"):
        assert f"{corpus}-heldout3.jsonl" in names
        assert f"crosslang-{corpus}-heldout3.jsonl" in names


def test_the_sets_of_the_fourth_held_out_corpora_are_checked():
    names = {p.name for p in SETS}
    for corpus in ("mattermost-handbook", "discord-api-docs"):
        sets = (f"{corpus}-heldout4.jsonl", f"crosslang-{corpus}-heldout4.jsonl")
        assert all((EVAL / name).is_file() for name in sets)
        if not corpus_of(EVAL / sets[0]).is_dir():
            pytest.skip(f"the {corpus} pages are not here: set THREADWISE_EXTRA_CORPORA to the folder holding them")
        assert set(sets) <= names


@pytest.mark.parametrize("path", SETS, ids=[p.stem for p in SETS])
def test_each_expected_fact_is_on_a_listed_page(path: Path):
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "check_facts.py"), str(corpus_of(path)), str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert " 0 failures" in proc.stdout


def test_a_fact_missing_from_its_page_fails_the_check(tmp_path: Path):
    corpus = tmp_path / "docs"
    corpus.mkdir()
    (corpus / "leave.md").write_text("# Leave\n\nYou get 25 days of\nannual leave.\n", encoding="utf-8")
    rows = tmp_path / "q.jsonl"
    rows.write_text(
        '{"id": "a", "kind": "kb", "question": "how much leave", "history": [], "expected_route": '
        '"vectorstore", "sources": ["leave.md"], "answer_facts": ["25 days"]}\n'
        '{"id": "b", "kind": "kb", "question": "how much leave", "history": [], "expected_route": '
        '"vectorstore", "sources": ["leave.md"], "answer_facts": ["25 days of annual leave"]}\n',
        encoding="utf-8",
    )
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "check_facts.py"), str(corpus), str(rows)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    # the second fact spans two lines of the page, so no single line states it
    assert proc.returncode == 1
    assert "b: fact '25 days of annual leave' is on no listed source" in proc.stdout
    assert "FAIL a:" not in proc.stdout
