"""Where the benchmark corpora fetched from other projects are on this machine.

Pages fetched from other public repositories are not kept in this repository (the tool
library's rule): each corpus of ``bench/corpora/README.md`` is a folder outside it, restored
from its repository at the recorded commit with ``bench/restore_corpus.py`` and the manifest
``bench/corpora/<name>.files``. One setting names where those folders are:

    THREADWISE_EXTRA_CORPORA=/work/corpora            # a folder holding httpx-docs/, hugo-docs/, ...
    THREADWISE_EXTRA_CORPORA=/work/corpora:/elsewhere  # several, separated like PATH

The bench scripts take a corpus by its folder name (``--corpus httpx-docs``) or by a path, and
the tests that read a fetched corpus skip, saying why, when it is not there.

Import it after the script has put the project on ``sys.path``.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from pathlib import Path

ENV = "THREADWISE_EXTRA_CORPORA"
MANIFESTS = Path(__file__).resolve().parent / "corpora"
"""``bench/corpora``: the provenance (README.md) and one manifest a corpus (``<name>.files``)."""


def corpora_roots(environ: Mapping[str, str] = os.environ) -> list[Path]:
    """The folders :data:`ENV` names, in its order (``os.pathsep``-separated; empty entries
    are left out). An empty list when it is unset."""
    return [Path(p).expanduser() for p in environ.get(ENV, "").split(os.pathsep) if p.strip()]


def find_corpus(name: str, environ: Mapping[str, str] = os.environ) -> Path | None:
    """The folder of the corpus ``name`` (``httpx-docs``): the first ``ROOT/name`` that is a
    folder, ROOT taken from :func:`corpora_roots`; None when no root holds it."""
    for root in corpora_roots(environ):
        if (root / name).is_dir():
            return root / name
    return None


def missing_corpus(name: str) -> str:
    """What to do when the corpus ``name`` is not here (one sentence for a skip or an error)."""
    manifest = MANIFESTS / f"{name}.files"
    restore = (
        f"restore it with python bench/restore_corpus.py GIT_DIR bench/corpora/{name}.files"
        if manifest.is_file()
        else "bench/corpora/README.md says where its pages come from"
    )
    return f"the corpus {name!r} is not here: set {ENV} to the folder holding it ({restore})"


def corpus_folder(value: str | Path, environ: Mapping[str, str] = os.environ) -> Path:
    """A bench script's corpus argument as a folder: ``value`` itself when it is a folder,
    else the corpus of that name found by :func:`find_corpus`.

    Raises:
        FileNotFoundError: neither (the message says how to get the corpus).
    """
    path = Path(value).expanduser()
    if path.is_dir():
        return path
    found = find_corpus(str(value), environ)
    if found is None:
        raise FileNotFoundError(f"not a folder: {value}; {missing_corpus(path.name)}")
    return found


def corpus_argument(value: str) -> Path:
    """:func:`corpus_folder` as an argparse ``type`` (a missing corpus is a usage error, exit 2)."""
    try:
        return corpus_folder(value)
    except FileNotFoundError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
