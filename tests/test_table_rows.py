"""A long table on a page with prose around it (a team's service catalogue) answers a question by the
row that answers, first, and is never shown as its first rows alone."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from graphs.extractive import Extractive, TextEmbedder
from graphs.knowledge import KnowledgeBase
from graphs.state import Doc

SERVICES = [
    ("billing-api", "Payments", "Amara", 8000, "Kotlin", 1),
    ("checkout-api", "Search", "Mateo", 8010, "TypeScript", 2),
    ("search-indexer", "Search", "Tomasz", 8020, "Go", 2),
    ("search-query", "Payments", "Sofia", 8030, "TypeScript", 3),
    ("auth-gateway", "Payments", "Mateo", 8040, "Kotlin", 3),
    ("user-profile", "Checkout", "Olu", 8050, "Go", 2),
    ("session-store", "Payments", "Priya", 8060, "Go", 3),
    ("email-sender", "Payments", "Sofia", 8070, "Python", 2),
    ("sms-sender", "Payments", "Ines", 8080, "Python", 2),
    ("push-notify", "Mobile", "Ines", 8090, "Python", 2),
    ("image-resizer", "Checkout", "Jonas", 8100, "TypeScript", 2),
    ("pdf-renderer", "Payments", "Sofia", 8110, "Go", 1),
    ("ledger", "Data", "Tomasz", 8120, "Kotlin", 3),
    ("fraud-scorer", "Growth", "Ines", 8130, "Python", 2),
    ("recommendations", "Data", "Olu", 8140, "Python", 2),
    ("feature-flags", "Growth", "Olu", 8150, "Go", 1),
    ("config-service", "Checkout", "Sofia", 8160, "Go", 2),
    ("audit-log", "Identity", "Kenji", 8170, "Kotlin", 2),
    ("export-worker", "Mobile", "Ines", 8180, "Python", 3),
    ("import-worker", "Growth", "Kenji", 8190, "Python", 3),
    ("invoice-generator", "Payments", "Mateo", 8200, "Kotlin", 2),
    ("tax-calculator", "Growth", "Amara", 8210, "Kotlin", 1),
    ("cart-service", "Checkout", "Priya", 8220, "TypeScript", 1),
    ("inventory-sync", "Checkout", "Sofia", 8230, "Go", 2),
    ("shipping-quotes", "Platform", "Mateo", 8240, "Go", 3),
    ("returns-service", "Payments", "Sofia", 8250, "Python", 2),
    ("analytics-ingest", "Checkout", "Sofia", 8260, "Go", 3),
    ("event-bus", "Platform", "Olu", 8270, "Go", 1),
    ("rate-limiter", "Growth", "Mateo", 8280, "Go", 1),
    ("webhook-relay", "Platform", "Priya", 8290, "Python", 2),
    ("admin-console", "Payments", "Jonas", 8300, "TypeScript", 3),
    ("status-page", "Identity", "Tomasz", 8310, "TypeScript", 2),
    ("geo-lookup", "Search", "Tomasz", 8320, "Go", 2),
    ("currency-rates", "Payments", "Lea", 8330, "Kotlin", 2),
    ("loyalty-points", "Search", "Olu", 8340, "Python", 2),
]

PAGE = (
    "# Service catalogue\n\nEvery service we run, who owns it, and where to ask about it. The owner is the person to "
    "ask first; the on-call channel is for anything urgent. Keep this table sorted as it is: the order matches the "
    "ArgoCD app list.\n\n| Service | Team | Owner | On-call channel | Port | Language | Tier |\n"
    "|---|---|---|---|---|---|---|\n"
    + "".join(
        f"| `{s}` | {team} | {owner} | #{team.lower()}-oncall | {port} | {lang} | tier {tier} |\n"
        for s, team, owner, port, lang, tier in SERVICES
    )
    + "\nTier 1 services page at any hour; tier 2 page during working hours; tier 3 only open a ticket.\n"
)

DASHBOARDS = """# Dashboards and logs

## Grafana
We use Grafana for metrics and Kibana for logs. The main Grafana board is Platform overview. Each service has its
own board named after it, e.g. `checkout-api / RED`. Alert rules live in the `alerts/` folder of the
`platform-monitoring` repository. Change them by pull request; the on-call reviews them.
"""


@pytest.fixture(scope="module")
def brain(tmp_path_factory) -> Extractive:
    src = tmp_path_factory.mktemp("handbook")
    (src / "services.md").write_text(PAGE)
    (src / "dashboards.md").write_text(DASHBOARDS)
    kb = KnowledgeBase(tmp_path_factory.mktemp("index"), [src])
    kb.reindex()
    return Extractive(TextEmbedder(None), kb)


def ask(brain: Extractive, question: str) -> str:
    docs = brain.retrieve([question], 5)
    assert any(d["location"] == "services.md" for d in docs)
    return brain.compose([question], docs)


def shown_tables(answer: str) -> list[str]:
    return [p for p in answer.split("\n\n") if p.startswith("|")]


@pytest.mark.parametrize(
    ("question", "service"),
    [
        ("who owns billing-api?", "billing-api"),
        ("what port does search-indexer run on", "search-indexer"),
        ("who owns loyalty-points?", "loyalty-points"),
        ("which team looks after geo-lookup", "geo-lookup"),
        ("what language is the currency-rates service written in", "currency-rates"),
    ],
)
def test_the_row_that_answers_a_long_table_leads_the_answer(brain, question, service):
    """The page's table is cut into pieces by the chunking (each starting with its header); the row is
    found wherever it is (rows 1, 3, 33-35), and leads, read with its header."""
    answer = ask(brain, question)
    s, team, owner, port, lang, tier = next(x for x in SERVICES if x[0] == service)
    first = answer.split("\n\n", 1)[0]
    assert first.startswith(f"Service: `{s}`, Team: {team}, Owner: {owner},"), answer
    assert f"Port: {port}, Language: {lang}, Tier: tier {tier}" in first, answer
    # the table is not quoted again as its first rows
    assert not shown_tables(answer), answer
    assert "More in [1]" not in answer, answer  # the page is cited where it is quoted


@pytest.mark.parametrize(
    "question", ["which services do we run and who owns them?", "what is in the service catalogue"]
)
def test_a_long_table_is_never_shown_as_its_first_rows_alone(brain, question):
    """No row answers on its own: the table shown after the sentence introducing it says it goes on."""
    answer = ask(brain, question)
    for table in shown_tables(answer):
        rest = answer.split(table, 1)[1]
        assert table.count("\n") >= len(SERVICES) + 1 or rest.lstrip().startswith("(The table goes on in ["), answer


def test_a_short_table_that_fits_is_still_quoted_whole_after_its_sentence():
    page = (
        "# Rota\n\nThe on-call rota for each team is below; swap shifts in the team channel.\n\n"
        "| Team | Lead |\n|---|---|\n| Search | Tomasz |\n| Payments | Amara |\n| Mobile | Ines |\n"
    )
    doc: Doc = {"id": "r#1", "location": "rota.md", "title": "Rota", "text": page}
    answer = Extractive(TextEmbedder(None)).compose(["who leads the on-call rota for each team?"], [doc])
    assert "| Search | Tomasz |\n| Payments | Amara |\n| Mobile | Ines |" in answer, answer


GAMMA_PAGE = PAGE.replace("| Checkout |", "| team-gamma |").replace("#checkout-oncall", "#gamma-oncall")


@pytest.fixture(scope="module")
def catalogue(tmp_path_factory) -> Path:
    from tests.cli_helpers import offline_folder

    return offline_folder(
        tmp_path_factory.mktemp("catalogue"), {"services.md": GAMMA_PAGE, "dashboards.md": DASHBOARDS}
    )


@pytest.mark.parametrize(
    ("question", "column", "value"),
    [
        ("which services does team-gamma own?", 1, "team-gamma"),
        ("which services does the Growth team own?", 1, "Growth"),
        ("which of our services are written in Kotlin?", 4, "Kotlin"),
        ("what does the Data team own?", 1, "Data"),
    ],
)
def test_a_value_many_rows_share_is_answered_with_those_rows(catalogue, question, column, value):
    """`threadwise ask` on the catalogue: a value several rows share (a team owning six services)
    is answered with the table of those rows, every one of them, and no other row; not with the
    table's first rows (where they are not)."""
    from tests.cli_helpers import ask

    answer = ask(catalogue, question, "--source", "docs")["answer"] or ""
    teams = {"Checkout": "team-gamma"}
    rows = [(s, teams.get(team, team), owner, port, lang, tier) for s, team, owner, port, lang, tier in SERVICES]
    matching = [r[0] for r in rows if r[column] == value]
    shown = re.findall(r"^\| `([\w-]+)` \|", answer, re.M)
    assert shown == matching, answer  # every row of that value, in the table's order, and only those
    assert answer.index(f"`{matching[0]}`") < 300, answer  # they lead the answer
