"""Every question set in bench/eval names pages that exist in its corpus and expects facts that
those pages state verbatim, checked by running bench/check_facts.py as a process (it reads the
pages only: no index, no search, so it is safe on held-out corpora). The corpora are fetched
from other projects and kept outside the repository: the sets of a corpus are checked when
THREADWISE_EXTRA_CORPORA names the folder holding it (bench/corpora/README.md)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench.extra_corpora import ENV, find_corpus, missing_corpus

ROOT = Path(__file__).resolve().parent.parent
EVAL = ROOT / "bench" / "eval"
# eval sets named after a shorter word than their corpus folder
FOLDERS = {"httpx": "httpx-docs", "hugo": "hugo-docs", "dxw": "dxw-playbook"}


def corpus_name(path: Path) -> str:
    """The corpus folder of an eval set: its name without "crosslang-" and "-heldout" (or
    "-heldout3" ... "-heldout8")."""
    name = re.sub(r"-heldout\d*$", "", path.stem.removeprefix("crosslang-"))
    return FOLDERS.get(name, name)


def corpus_of(path: Path) -> Path | None:
    """The corpus folder of an eval set in a folder of THREADWISE_EXTRA_CORPORA (pages fetched
    from other projects are never kept in the repository); None when it is not on this machine."""
    return find_corpus(corpus_name(path))


SETS = sorted(p for p in EVAL.glob("*.jsonl") if corpus_of(p) is not None)


def test_every_set_names_a_corpus_whose_source_is_recorded():
    """Each set's corpus is described in bench/corpora/README.md (repository, commit, licence),
    or is the LangGraph docs of the shared folder."""
    readme = (ROOT / "bench" / "corpora" / "README.md").read_text()
    for path in EVAL.glob("*.jsonl"):
        name = corpus_name(path)
        assert name == "langgraph" or f"`{name}/`" in readme, path.name


@pytest.mark.parametrize(
    "corpus, suffix",
    [
        ("cargo-book", "heldout"),
        ("engineering-playbook", "heldout"),
        ("redis-commands", "heldout3"),
        ("jellyfin-docs", "heldout3"),
        ("mattermost-handbook", "heldout4"),
        ("discord-api-docs", "heldout4"),
        ("readthedocs-docs", "heldout5"),
        ("cloudnative-pg-docs", "heldout5"),
        ("darktable-docs", "heldout6"),
        ("jupiterone-policies", "heldout6"),
        ("syncthing-docs", "heldout7"),
        ("logseq-docs", "heldout7"),
        ("plausible-docs", "heldout8"),
        ("zmk-docs", "heldout8"),
    ],
)
def test_the_sets_of_each_held_out_corpus_are_checked(corpus, suffix):
    sets = (f"{corpus}-{suffix}.jsonl", f"crosslang-{corpus}-{suffix}.jsonl")
    assert all((EVAL / name).is_file() for name in sets)
    if find_corpus(corpus) is None:
        pytest.skip(missing_corpus(corpus))
    assert set(sets) <= {p.name for p in SETS}


NO_CORPUS = f"no corpus of the sets in bench/eval is here: set {ENV} to the folder of corpora (bench/corpora/README.md)"
NO_SETS = pytest.param(None, marks=pytest.mark.skip(reason=NO_CORPUS), id="none")


@pytest.mark.parametrize("path", SETS or [NO_SETS], ids=[p.stem for p in SETS] or None)
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


def test_a_fact_on_a_restructuredtext_page_is_found(tmp_path: Path):
    # Sphinx manuals are .rst pages, which the bot indexes like Markdown ones
    corpus = tmp_path / "docs"
    (corpus / "guides").mkdir(parents=True)
    (corpus / "guides" / "builds.rst").write_text(
        "Build limits\n============\n\n* 20 minutes of build time\n", encoding="utf-8"
    )
    rows = tmp_path / "q.jsonl"
    rows.write_text(
        '{"id": "a", "kind": "kb", "question": "how long can a build run", "history": [], "expected_route": '
        '"vectorstore", "sources": ["guides/builds.rst"], "answer_facts": ["20 minutes"]}\n',
        encoding="utf-8",
    )
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "check_facts.py"), str(corpus), str(rows)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert " 0 failures" in proc.stdout
