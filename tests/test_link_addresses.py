"""A question asking for a link shows each quoted link's own address, through the real `threadwise
ask` process, offline, on files: two links with the same words ("wiki") each show theirs, and an
address too long to show is named (its site, its length), never silently left out."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.cli_helpers import ask_logged, offline_folder

KIBANA = (
    "https://kibana.internal.example/app/discover#/view/checkout-errors?_g=(filters:!(),refreshInterval:"
    "(pause:!t,value:0),time:(from:now-24h,to:now))&_a=(columns:!(message,service,trace_id),filters:!((meta:"
    "(alias:!n,disabled:!f,key:service,negate:!f,params:(query:checkout-api),type:phrase),query:(match_phrase:"
    "(service:checkout-api)))),index:logs-star,interval:auto,query:(language:kuery,query:'level:error'),sort:"
    "!(!('@timestamp',desc)))"
)

DASHBOARDS = f"""# Dashboards and runbooks

## Runbooks
The payments runbook is in the [wiki](https://wiki.example.com/payments/runbook). The search runbook is in the
[wiki](https://wiki.example.com/search/runbook) too.

## Logs
The saved Kibana search for checkout errors is [Checkout errors]({KIBANA}).
"""

EXPENSES = "# Expenses\n\nClaim a taxi to the airport in the expenses tool within 30 days.\n"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return offline_folder(tmp_path_factory.mktemp("links"), {"dashboards.md": DASHBOARDS, "expenses.md": EXPENSES})


def answer(root: Path, question: str) -> str:
    reply, stderr = ask_logged(root, question, "--source", "docs")
    assert reply["kind"] == "answer", (reply, stderr[-1500:])
    return reply["answer"]


@pytest.mark.parametrize(
    "question",
    ["where are the links to the payments and search runbooks?", "where's the kibana link for checkout errors?"],
)
def test_links_with_the_same_words_each_show_their_own_address(workdir, question):
    text = answer(workdir, question)
    sentences = re.split(r"(?<=\.) ", text)
    for team in ("payments", "search"):
        about = [s for s in sentences if f"The {team} runbook" in s]
        for sentence in about:  # each sentence shows its own link's address, never the other's
            assert f"wiki (https://wiki.example.com/{team}/runbook)" in sentence, text
    if "runbooks" in question:
        assert "wiki (https://wiki.example.com/payments/runbook)" in text, text
        assert "wiki (https://wiki.example.com/search/runbook)" in text, text


def test_an_address_too_long_to_show_is_named_not_dropped(workdir):
    text = answer(workdir, "where's the kibana link for checkout errors?")
    assert KIBANA not in text, text
    assert (
        f"Checkout errors (a {len(KIBANA)}-character address on kibana.internal.example, too long to show here" in text
    ), text
