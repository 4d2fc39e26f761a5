"""Check a question set against its corpus without running the bot.

Usage::

    python bench/check_facts.py CORPUS QUESTIONS.jsonl [QUESTIONS.jsonl ...]

CORPUS is a folder, or the name of a corpus in a folder of ``THREADWISE_EXTRA_CORPORA``
(bench/extra_corpora.py: ``httpx-docs``).

For every row of kind ``kb`` or ``followup`` it checks that each expected fact occurs
verbatim (case-insensitively) on one line of at least one listed source page and that every
listed source exists. It notes (without failing) a listed source that holds none of the facts
verbatim, and the other pages of the corpus that hold all the facts of the row (candidates to
list as sources too, since a page that states the same fact is a right answer). Rows of kind
``web`` and ``direct`` must list no sources and no facts. Only the text of the pages is read:
nothing is indexed or searched, so it is safe on held-out corpora.

Exit status: 0 when every row passes, 1 when any fails (the failures are printed), 2 on a
usage error. Pages are the ``.md``/``.mdx``/``.rst`` files below CORPUS, named by their path
relative to it with ``/`` separators, as the eval rows name them.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.extra_corpora import corpus_folder  # noqa: E402

REQUIRED_KEYS = ("id", "kind", "question", "history", "expected_route", "sources", "answer_facts")
ROUTES = {"kb": "vectorstore", "followup": "vectorstore", "web": "websearch", "direct": "direct"}


def load_pages(corpus: Path) -> dict[str, list[str]]:
    """Read every Markdown, MDX and reStructuredText page below ``corpus``.

    Args:
        corpus: the corpus folder.

    Returns:
        relative POSIX path -> the page's lines, lower-cased.
    """
    pages: dict[str, list[str]] = {}
    for path in sorted(corpus.rglob("*")):
        if path.is_file() and path.suffix.lower() in (".md", ".mdx", ".rst"):
            text = path.read_text(encoding="utf-8", errors="replace")
            pages[path.relative_to(corpus).as_posix()] = text.lower().splitlines()
    return pages


def holds(lines: list[str], fact: str) -> bool:
    """Whether ``fact`` occurs on one of ``lines`` (already lower-cased), case-insensitively."""
    needle = fact.lower()
    return any(needle in line for line in lines)


def check_rows(pages: dict[str, list[str]], rows: list[dict]) -> tuple[list[str], list[str]]:
    """Check eval rows against the corpus pages.

    Args:
        pages: as returned by :func:`load_pages`.
        rows: the decoded JSONL rows.

    Returns:
        (failures, notes): failures make the set invalid; notes name other pages that hold
        all of a row's facts.
    """
    failures: list[str] = []
    notes: list[str] = []
    seen: set[str] = set()
    for row in rows:
        rid = str(row.get("id", "?"))
        missing = [k for k in REQUIRED_KEYS if k not in row]
        if missing:
            failures.append(f"{rid}: missing keys {missing}")
            continue
        if rid in seen:
            failures.append(f"{rid}: duplicate id")
        seen.add(rid)
        kind = row["kind"]
        if ROUTES.get(kind) != row["expected_route"]:
            failures.append(f"{rid}: kind {kind!r} with route {row['expected_route']!r}")
        sources, facts = row["sources"], row["answer_facts"]
        if kind in ("web", "direct"):
            if sources or facts:
                failures.append(f"{rid}: {kind} rows list no sources or facts")
            continue
        if not sources or not facts:
            failures.append(f"{rid}: needs sources and answer_facts")
            continue
        for source in sources:
            if source not in pages:
                failures.append(f"{rid}: no page {source}")
            elif not any(holds(pages[source], f) for f in facts):
                # a page may answer in other words (older sets list such pages for recall)
                notes.append(f"{rid}: {source} holds none of the facts verbatim")
        for fact in facts:
            if not any(holds(pages[s], fact) for s in sources if s in pages):
                failures.append(f"{rid}: fact {fact!r} is on no listed source")
        others = [p for p, lines in pages.items() if p not in sources and all(holds(lines, f) for f in facts)]
        if others:
            notes.append(f"{rid}: {facts} also on {others}")
    return failures, notes


def main(argv: list[str]) -> int:
    """Run the check on the command line; see the module docstring."""
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        corpus = corpus_folder(argv[1])
    except FileNotFoundError as e:
        print(e, file=sys.stderr)
        return 2
    pages = load_pages(corpus)
    status = 0
    for name in argv[2:]:
        rows = [json.loads(line) for line in Path(name).read_text(encoding="utf-8").splitlines() if line.strip()]
        failures, notes = check_rows(pages, rows)
        kinds = Counter(str(r.get("kind")) for r in rows)
        print(f"{name}: {len(rows)} rows {dict(kinds)}, {len(failures)} failures")
        for line in notes:
            print(f"  note {line}")
        for line in failures:
            print(f"  FAIL {line}")
        status = status or (1 if failures else 0)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
