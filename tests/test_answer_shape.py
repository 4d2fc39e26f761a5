"""Answers a teammate reads in ten seconds: the sentence or step that answers first, then only
what supports it, within ``[graph] answer_characters``, steps and commands whole, "More in [n]"
last, a follow-up answered about what it asks now; the chat model is asked for the same shape
and its grader refuses a wall of text; the greeting names what the knowledge base holds."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bot.eval import first_fact_position, has_template_syntax
from bot.runtime import describe_sources
from graphs import prompts, signals
from graphs.extractive import Extractive, TextEmbedder, split_units
from graphs.graders import shape_problem
from graphs.knowledge.sources import clean_markdown, definition_lists
from graphs.knowledge.splitting import index_text, split_markdown
from graphs.settings import GraphSettings
from tests.cli_helpers import write_offline_config
from tests.conftest import fetched_corpus, requires_offline_model
from tests.test_cli_offline import threadwise

LEAVE = """# Leave

## Annual leave
Annual leave is booked in the HR system. You can carry over unused annual leave up to a cap of 240 hours
into the next year. Requests of more than two days need four weeks' notice. The holiday year runs from
January to December and your manager approves each request within a week. Bank holidays come on top of the
annual allowance and are booked for you.

## Sick leave
Sick leave accrues every pay period and there is no maximum on how much you can carry over.
Tell your manager before 10:00 on the first day you are off sick.
"""

STEPS = """# Publishing a release

Releases go out every second Tuesday, after the freeze. The release manager checks the changelog first and
writes the announcement; nobody else publishes a release.

To publish a release:

1. Bump the version in `pyproject.toml`.
2. Tag the commit with `git tag -s vX.Y.Z` and push the tag.
3. Wait for the CI job `publish` to upload the wheel.
4. Announce it in #releases.

If the CI job fails, run this from a clean checkout:

```bash
scripts/publish --retry
```
"""


def compose(question: str, text: str, **kw) -> str:
    doc = {"id": "d#1", "location": "d.md", "title": "D", "text": text}
    return Extractive(TextEmbedder(None)).compose([question], [doc], **kw)


def prose_of(answer: str) -> str:
    return re.sub(r"```.*?```", "", answer, flags=re.S)


def test_the_answering_sentence_comes_first_and_the_answer_stays_short():
    answer = compose("how much annual leave can I carry over, is there a cap?", LEAVE, budget=300)
    assert first_fact_position(answer, ["240 hours"]) < 150
    assert len(prose_of(answer)) < 300 + 200  # the budget, the citations and "More in [n]"
    assert answer.rstrip().endswith("[1]") and "More in" not in answer  # its one page is cited where quoted
    assert "…" not in answer and "..." not in answer  # whole sentences, never elided


def test_numbered_steps_are_quoted_whole_with_the_command_they_lead_to():
    answer = compose("how do I publish a release? which git tag command", STEPS)
    steps = re.findall(r"^(\d)\. ", answer, re.M)
    assert steps == ["1", "2", "3", "4"], answer  # every step, in order, none cut
    assert "2. Tag the commit with `git tag -s vX.Y.Z` and push the tag." in answer
    assert "To publish a release:\n1. Bump the version" in answer  # the sentence the steps complete, first
    answer = compose("the publish CI job failed, what do I run?", STEPS)
    assert "```bash\nscripts/publish --retry\n```" in answer  # the command whole, after its sentence
    assert answer.index("If the CI job fails") < answer.index("scripts/publish --retry")


def test_a_follow_up_is_answered_about_what_it_asks_now():
    """ "and sick leave, same cap?" after a question about annual leave: the sentence about
    sick leave leads (no maximum), not the annual cap that would read as "yes, 240"."""
    from graphs.composers import followup_focus

    state = {
        "messages": [
            {"role": "user", "content": "how much annual leave can I carry over, is there a cap?"},
            {"role": "assistant", "content": "You can carry over up to a cap of 240 hours. [1]"},
            {"role": "user", "content": "and sick leave, same cap?"},
        ]
    }
    from langchain_core.messages import AIMessage, HumanMessage

    state = {
        "messages": [
            HumanMessage(m["content"]) if m["role"] == "user" else AIMessage(m["content"]) for m in state["messages"]
        ]
    }
    focus = followup_focus(state, 6)
    assert focus == ["sick"]
    questions = [
        "and sick leave, same cap?",
        "how much annual leave can I carry over, is there a cap? and sick leave, same cap?",
    ]
    doc = {"id": "d#1", "location": "d.md", "title": "D", "text": LEAVE}
    answer = Extractive(TextEmbedder(None)).compose(questions, [doc], budget=250, focus=focus)
    assert answer.startswith("Sick leave accrues every pay period and there is no maximum"), answer
    # without the focus the heading "Sick leave" still names the sibling section asked for
    # (extractive.label_match), so both ways the sick-leave rule leads and the annual cap is left out
    unfocused = Extractive(TextEmbedder(None)).compose(questions, [doc], budget=250)
    assert unfocused.startswith("Sick leave") and "240" not in unfocused, unfocused


def test_the_budget_is_a_setting_and_the_chat_model_is_asked_for_the_shape():
    assert GraphSettings().answer_characters == 700
    with pytest.raises(ValueError):
        GraphSettings(answer_characters=10)
    system = prompts.generate_prompt(450)
    assert "about 450 characters" in system and "ANSWER_CHARACTERS" not in system
    assert "Open with the sentence or the step that answers" in system and "never shorten them" in system


def test_the_grader_refuses_a_wall_of_text_and_cut_commands():
    wall = "The configuration is described below in detail. " * 40
    assert "answer in about 700" in shape_problem(wall, 700)
    code = "Run this:\n\n```bash\n" + "echo hello\n" * 200 + "```\n\nThat is all. [1]"
    assert shape_problem(code, 700) == ""  # code blocks do not count against the budget
    assert "ellipsis" in shape_problem("1. Install it.\n2. Run `tool --flag …`\n", 700)
    assert shape_problem("Use `disable_studio_auth` in langgraph.json. [1]\n\nMore in [1].", 700) == ""


def test_eval_measures_the_first_fact_and_template_syntax():
    assert first_fact_position("Set REDIS_URI and DATABASE_URI.", ["database_uri", "REDIS_URI"]) == 4
    assert first_fact_position("nothing here", ["REDIS_URI"]) is None
    assert has_template_syntax('Ask in {% slack_channel "admins" %}.')
    assert has_template_syntax('See {{< ref "page.md" >}} for more.')
    assert not has_template_syntax("Liquid tags look like `{% raw %}`:\n\n```liquid\n{% if x %}{% endif %}\n```")


def test_the_greeting_names_the_knowledge_base_not_its_folder(tmp_path):
    docs = tmp_path / "handbook"
    docs.mkdir()
    (docs / "index.md").write_text("---\ntitle: Acme Staff Handbook\n---\n\n# Welcome\n")
    plain = tmp_path / "notes"
    plain.mkdir()
    (plain / "README.md").write_text("```\n# not a heading\n```\n\n# Team notes\n")
    assert describe_sources([str(docs), str(plain), str(tmp_path / "empty")]) == (
        "the documentation in Acme Staff Handbook (handbook), Team notes (notes), empty"
    )


async def test_a_chat_models_wall_of_text_is_sent_back_and_the_short_answer_posted(settings):
    """With a chat model (any provider): the writer is asked for the shape and the budget, and a
    draft far past it is checked as not useful (its shape), whatever the model's own grader says."""
    import uuid

    from bot.platforms.console import ConsoleResponder
    from bot.protocol import IncomingMessage
    from tests.conftest import scripted_runtime

    wall = "The container needs REDIS_URI and DATABASE_URI set before it boots [1]. " + (
        "It also reads many other settings, described at length in the sources [1]. " * 30
    )
    short = "Set REDIS_URI and DATABASE_URI before it boots [1].\n\nMore in [1]."
    async with scripted_runtime(settings, {"generate": [wall, short]}) as (rt, model):
        out = ConsoleResponder("t", show_status=False, show_answers=False)
        message = IncomingMessage(
            platform="console",
            thread_key="console:t",
            message_id=uuid.uuid4().hex,
            author_id="ana",
            author_name="ana",
            text="what does the container need to boot?",
            is_expert=True,
            is_admin=False,
        )
        await rt.service.handle(message, out)
        values = await rt.service.thread_values("console:t")
    [answer] = out.answers
    assert answer.text.startswith("Set REDIS_URI and DATABASE_URI") and len(answer.text) < 200, answer.text
    assert values["path"].count("generate") == 2, values["path"]
    generate_prompts = [str(m[0].content) for task, m in model.calls if task == "generate"]
    assert all("about 700 characters" in p for p in generate_prompts)


HOLIDAY = """# Holiday

Book your holiday in the HR system and tell your team about your holiday plans in the team channel.
Bank holidays are booked for you. The holiday year runs from January to December.

## Notice

Requests of more than two days need four weeks' notice before the first day off.
"""


def test_a_how_much_question_leads_with_the_sentence_stating_the_amount():
    """ "how much notice": the sentence with the amount ("four weeks' notice") opens the answer,
    though another sentence shares as many of the question's words; a question asking for no
    amount on the same page still leads with the sentence about what it asks."""
    answer = compose("how much notice do I need to book holiday", HOLIDAY, budget=100)
    assert answer.startswith("Requests of more than two days need four weeks' notice"), answer
    answer = compose("where do I book holiday", HOLIDAY, budget=100)
    assert answer.startswith("Book your holiday in the HR system"), answer


SABBATICAL = """Sabbaticals give you time away from work to rest, study or travel. Tell your line manager early
so the team can plan around your absence. Requests go to the People team, who reply within a month.

## Who can take one

- Fewer than 3 years with us - not eligible
- From 3 to 6 years - one to three months
- More than 6 years - up to six months
"""


def test_steps_numbered_1_1_1_in_the_source_are_quoted_1_2_3():
    """Markdown numbers a list written "1." on every step; the quoted steps read as it renders."""
    lazy = STEPS.replace("2. Tag", "1. Tag").replace("3. Wait", "1. Wait").replace("4. Announce", "1. Announce")
    answer = compose("how do I publish a release? which git tag command", lazy)
    assert re.findall(r"^(\d)\. ", answer, re.M) == ["1", "2", "3", "4"], answer


def test_a_short_bulleted_list_is_quoted_whole_as_a_list():
    """The cases of a short list are read together, each on its line, in the page's order (they
    were joined into one line of prose, from the matching case on, the earlier ones later)."""
    answer = compose("how long a sabbatical after 4 years with us", SABBATICAL)
    assert (
        "- Fewer than 3 years with us - not eligible\n- From 3 to 6 years - one to three months\n"
        "- More than 6 years - up to six months"
    ) in answer, answer


@requires_offline_model
def test_a_sentence_is_read_under_its_heading():
    """ "am I eligible for a sabbatical": the list under "Who can take one" answers it, though its
    lines never say "sabbatical"; read alone they lose to the page's opening sentence."""
    from bot.config import ModelSettings
    from graphs.models import build_embeddings

    embeddings, _ = build_embeddings("local", ModelSettings())
    brain = Extractive(TextEmbedder(embeddings))
    docs = [{"id": "d#1", "location": "leave.md", "title": "Sabbatical leave", "text": SABBATICAL}]
    question = "am I eligible for a sabbatical after a year"
    answer = brain.compose([question], docs, budget=200)
    assert first_fact_position(answer, ["not eligible"]) < 100, answer
    units = brain.doc_units(docs)
    alone = max(brain.score_units([question], units), key=lambda s: s.score)
    assert alone.unit.text.startswith("Sabbaticals give you time away")  # what the heading changes


def runbooks() -> Path:
    """The real Prometheus Operator runbooks (a fetched corpus: the test skips without it)."""
    return fetched_corpus("prometheus-runbooks") / "runbooks"


def introductions(text: str) -> list[tuple[str, str]]:
    """``(sentence, block)`` for every sentence of ``text`` right before a code block or table
    (the sentence that introduces it, whatever its last character)."""
    units = split_units(text, short_items=True)
    return [(a.text, b.text) for a, b in zip(units, units[1:], strict=False) if b.code and not a.code and not a.heading]


def orphans(answer: str, text: str) -> list[str]:
    """The sentences of ``answer`` that introduce a block in ``text`` and are quoted without it
    (neither the block whole right after it, nor a line saying where it is)."""
    out = []
    for sentence, block in introductions(text):
        at = answer.find(sentence)
        if at < 0:
            continue
        rest = re.sub(r"^ \[\d+\]", "", answer[at + len(sentence) :])
        if not rest.startswith((f"\n\n{block}", "\n\n(The code is in [", "\n\n(The table is in [")):
            out.append(sentence)
    return out


@pytest.mark.parametrize(
    "page, question",
    [
        ("etcd/etcdBackendQuotaLowSpace.md", "etcd db is at 96% of its quota, quickest way to claw back space?"),
        ("etcd/etcdBackendQuotaLowSpace.md", "how do I defragment etcd and check how much space it frees"),
        ("etcd/etcdHighFsyncDurations.md", "etcd fsync alert, how do I check the disk is fast enough"),
        ("etcd/etcdGRPCRequestsSlow.md", "etcd requests slow, defragment the db, what to run"),
        ("etcd/etcdMembersDown.md", "an etcd member is down, how do I check the members"),
        ("kubernetes/KubePersistentVolumeFillingUp.md", "a persistent volume is filling up, what to check"),
        ("node/NodeFilesystemSpaceFillingUp.md", "node filesystem filling up, how do I find what uses the space"),
        ("alertmanager/AlertmanagerFailedReload.md", "alertmanager failed to reload its config, how to see why"),
    ],
)
def test_a_sentence_introducing_a_command_is_quoted_with_it_on_real_pages(page, question):
    """As below, on the real Prometheus runbooks ("Run the following command in all etcd pods."
    and `etcdctl defrag`)."""
    quotes_each_block_with_its_sentence(runbooks() / page, question)


def quotes_each_block_with_its_sentence(page: Path, question: str) -> None:
    """Any sentence of the answer to ``question`` from ``page`` right before a code block or table
    on the page carries it, at budgets of 300 and 700 characters, and nothing is cut with "…"."""
    text = clean_markdown(page.read_text())[1]
    assert introductions(text)
    for budget in (300, 700):
        answer = compose(question, text, budget=budget)
        assert orphans(answer, text) == [], answer
        assert "…" not in answer


DOCSITES = Path(__file__).parent / "data" / "docsites"
OUR_RUNBOOKS = DOCSITES / "runbooks"


@pytest.mark.parametrize(
    "page, question",
    [
        ("queue/QueueDiskAlmostFull.md", "broker volume is 93% full, quickest way to free space?"),
        ("queue/QueueDiskAlmostFull.md", "how do I compact the segments and check how much space it frees"),
        ("queue/QueueDiskAlmostFull.md", "broker disk filling, how do I see which queues are largest"),
        ("queue/QueueLeaderElections.md", "broker leader elections alert, how do I check the writes are fast enough"),
        ("queue/QueueLeaderElections.md", "too many leader elections, compact the segments, what to run"),
        ("queue/QueueBacklogGrowing.md", "queue backlog growing, how do I find the consumer group falling behind"),
        ("node/NodeVolumeFillingUp.md", "node root volume filling up, how do I find what uses the space"),
        ("gateway/GatewayErrorsHigh.md", "gateway returns 502s, how do I reload the routes"),
        ("gateway/GatewayErrorsHigh.md", "how do I see which backends fail their health checks"),
    ],
)
def test_a_sentence_introducing_a_command_is_quoted_with_it(page, question):
    """Any quoted sentence right before a code block carries it ("Run the following command on
    every broker." and `brokerctl segments compact --all`), wherever it stands in the answer
    (lead or support), whether it ends with ":" or "."; the block whole, or named when it does
    not fit the budget (runbooks written like the Prometheus Operator's)."""
    quotes_each_block_with_its_sentence(OUR_RUNBOOKS / page, question)


SETUP = """# Worker setup

Workers pull jobs from the queue and report back to the scheduler every minute.

1. Install the agent:

   ```bash
   pip install worker-agent
   ```

2. Register the worker with the scheduler.

   ```bash
   worker-agent register --scheduler https://scheduler.internal
   ```

3. Start the service and check its status.

If a worker stops reporting, restart it with the new flag.

    worker-agent restart --resync

The scheduler then hands its jobs to the other workers.
"""


@pytest.mark.parametrize(
    "question, block",
    [
        (
            "how do I register a worker with the scheduler",
            "worker-agent register --scheduler https://scheduler.internal",
        ),
        ("how do I install the worker agent", "pip install worker-agent"),
        ("a worker stopped reporting, how do I restart it", "worker-agent restart --resync"),
    ],
)
def test_steps_keep_the_commands_inside_them_and_a_plain_sentence_its_indented_block(question, block):
    """A step's command (a block inside the list item) is quoted inside the steps, in place; an
    indented code block after a sentence ending with "." comes with that sentence."""
    answer = compose(question, SETUP)
    assert f"```bash\n{block}\n```" in answer or f"```\n{block}\n```" in answer, answer
    assert orphans(answer, SETUP) == [], answer
    if "register" in question:
        steps = answer[answer.index("1. Install") :]
        assert steps.index("pip install") < steps.index("2. Register") < steps.index("worker-agent register")
        assert steps.index("worker-agent register") < steps.index("3. Start the service")


def test_a_block_the_chunking_cut_in_two_is_quoted_whole_or_named(tmp_path):
    """A long command block split over two chunks (closed at the end of one, reopened in the next)
    is one block again in the answer: whole, or "(The code is in [n].)" past the code limit;
    never its first half alone."""
    from graphs.knowledge import KnowledgeBase

    lines = "\n".join(f"kubectl annotate node worker-{i:02d} drained=true --overwrite" for i in range(24))
    src = tmp_path / "src"
    src.mkdir()
    (src / "drain.md").write_text(
        f"# Draining\n\nRun the following commands to mark every worker drained.\n\n```bash\n{lines}\n```\n"
    )
    kb = KnowledgeBase(tmp_path / "index", [src], chunk_size=600, chunk_overlap=20)
    kb.reindex()
    assert len(kb.snapshot.file_chunks("drain.md")) >= 3  # the block is cut by the chunking
    brain = Extractive(TextEmbedder(None), kb)
    docs = brain.retrieve(["how do I mark every worker drained"], 3)
    answer = brain.compose(["how do I mark every worker drained"], docs)
    fences = re.findall(r"^```", answer, re.M)
    assert len(fences) in (0, 2), answer  # one block, not two halves
    assert (lines in answer) or "(The code is in [1].)" in answer, answer


def eval_answers(tmp_path: Path, src: Path, questions: dict[str, str]) -> dict[str, str]:
    """The answers of `threadwise eval --answers` offline over the folder ``src`` to
    ``questions`` (id -> question, all kb rows), by id."""
    write_offline_config(tmp_path)
    rows = [{"id": i, "kind": "kb", "expected_route": "vectorstore", "question": q} for i, q in questions.items()]
    (tmp_path / "q.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = threadwise(
        "eval",
        "q.jsonl",
        "--config",
        "config.toml",
        "--source",
        str(src),
        "--json",
        "out.json",
        cwd=tmp_path,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return {r["id"]: r["answer"] for r in json.loads((tmp_path / "out.json").read_text())["rows"]}


@pytest.mark.slow
@requires_offline_model
def test_runbook_answers_through_the_cli_carry_their_commands_and_no_raw_links(tmp_path):
    """`threadwise eval --answers` offline on runbooks: the compaction answer shows the command
    its sentence announces; the leader-election answer shows the words of its reference links
    (`[are recommended][hardware]` on the page, the address only listed at its end), no Markdown
    reference syntax."""
    answers = eval_answers(
        tmp_path,
        OUR_RUNBOOKS / "queue",
        {
            "compact": "broker disk is nearly full, how do I compact the segments?",
            "elections": "broker leader elections alert - why do the brokers care about write latency?",
        },
    )
    assert re.search(
        r"Run the following command (?:on|in) every broker(?: pod)?\. \[\d\]\n\n"
        r"```\w*\n\$ brokerctl segments compact --all\n```",
        answers["compact"],
    ), answers["compact"]
    assert "local SSDs are recommended." in answers["elections"], answers["elections"]  # [are recommended][hardware]
    for answer in answers.values():
        assert not re.search(r"\]\[|\[\^", prose_of(answer)), answer


@pytest.mark.slow
@requires_offline_model
def test_real_runbook_answers_through_the_cli_carry_their_commands_and_no_raw_links(tmp_path):
    """The same on the real etcd runbooks (`[fsync'd][fsync]` on the page)."""
    answers = eval_answers(
        tmp_path,
        runbooks() / "etcd",
        {
            "defrag": "etcd db is nearly at its quota, how do I defragment it?",
            "fsync": "etcd fsync latency alert - why does etcd care about disk latency?",
        },
    )
    assert re.search(
        r"Run the following command in all etcd pods\. \[\d\]\n\n```\w*\n\$ etcdctl defrag\n```", answers["defrag"]
    )
    assert "has to be fsync'd to disk" in answers["fsync"], answers["fsync"]
    for answer in answers.values():
        assert not re.search(r"\]\[|\[\^", prose_of(answer)), answer


def test_the_sentence_after_an_error_message_quoted_by_the_lead_follows_it():
    """The lead quotes an error message ("Pressroom stops with this error:" and the message, in
    a FAQ written as a definition list) and the sentence after it, which says what to do ("To fix
    it, download the theme ..."); the answer stopped at the message and quoted other questions of
    the FAQ instead."""
    text = clean_markdown((DOCSITES / "site" / "troubleshooting" / "faq.md").read_text())[1]
    answer = compose("error says 'theme harbor not found in the themes folder'", text)
    assert answer.startswith("The build stops with an error about a missing theme."), answer
    at = first_fact_position(answer, ["To fix it, download the theme into `themes/harbor`."])
    assert at is not None and at < 300, answer
    assert answer.index("not found in the themes folder\n```") < answer.index("To fix it")


def test_the_sentence_after_an_error_message_quoted_by_the_lead_follows_it_on_a_real_page():
    """The same on Hugo's FAQ ("To resolve, install a different edition.")."""
    hugo = fetched_corpus("hugo-docs")
    text = clean_markdown((hugo / "troubleshooting" / "faq.md").read_text())[1]
    answer = compose("error says 'this feature is not available in this edition of Hugo'", text)
    assert answer.startswith("An error message indicates that a feature is not available."), answer
    at = first_fact_position(answer, ["To resolve, install a different edition."])
    assert at is not None and at < 300, answer
    assert answer.index("this feature is not available in this edition of Hugo\n```") < answer.index("To resolve")


def _short_page_whole_long_page_by_section(
    tmp_path, root, pages: list[str], question: str, facts: tuple[str, str], said: tuple[str, str], long_question: str
) -> None:
    """Index ``pages`` (``root``-relative; the first short, the last long) and check that the short
    page comes back whole once, holding both ``facts``, that its answer says both ``said``, and that
    the long page is read by the section found."""
    from graphs.knowledge import KnowledgeBase

    for rel in pages:
        (tmp_path / "src" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "src" / rel).write_bytes((root / rel).read_bytes())
    kb = KnowledgeBase(tmp_path / "index", [tmp_path / "src"])
    kb.reindex()
    brain = Extractive(TextEmbedder(None), kb)
    docs = brain.retrieve([question], 5)
    assert docs[0]["location"] == pages[0]
    assert [d["location"] for d in docs].count(pages[0]) == 1
    assert all(f in docs[0]["text"] for f in facts), docs[0]["text"]
    answer = brain.compose([question], docs)
    assert all(w in answer for w in said), answer
    found = [d for d in brain.retrieve([long_question], 5) if d["location"] == pages[-1]]
    assert found and all(len(d["text"]) < len((root / pages[-1]).read_text()) - 200 for d in found)


def test_a_short_page_is_retrieved_whole_and_a_long_one_by_its_section(tmp_path):
    """A runbook of a few short sections is one document, whichever section the search found: "what
    can clock drift break and how do we fix it" is answered from its Impact and Mitigation sections,
    and the page is not listed twice. A page over ``PAGE_CHARACTERS`` is still read by the section
    found (keyword index)."""
    _short_page_whole_long_page_by_section(
        tmp_path,
        OUR_RUNBOOKS,
        ["node/NodeClockDrift.md", "node/NodeVolumeFillingUp.md", "gateway/GatewayErrorsHigh.md"],
        "clock drift on a node, what can that break and how do we fix it",
        ("Certificates look not yet valid", "Make sure the time service"),
        ("Certificates", "time service is running"),
        "gateway server errors, how do I reload the routes",
    )


def test_a_short_real_page_is_retrieved_whole_and_a_long_one_by_its_section(tmp_path):
    """The same on the real runbooks: "what can clock skew break and how do we fix it" (the search
    finds its Meaning, "Clock skew detected.")."""
    _short_page_whole_long_page_by_section(
        tmp_path,
        runbooks(),
        ["node/NodeClockSkewDetected.md", "node/NodeClockNotSynchronising.md", "etcd/etcdBackendQuotaLowSpace.md"],
        "clock skew detected on a node, what can that break and how do we fix it",
        ("handling TLS", "Ensure time synchronization service is running."),
        ("TLS", "time synchronization service"),
        "etcd database size quota, how do I defragment it",
    )


def test_a_man_page_option_list_reads_as_options_with_their_names():
    """Command pages made from man pages list every option as HTML (``<dt>`` with an anchor and
    ``<code>``, then ``<dd><p>``, as mdBook manuals generated by mdman do): converted when the page
    is split for the index, each option is a paragraph opening with its names in code ("`-d`,
    `--duplicates`: Print only ..."), a list inside a description stays a list, the index holds
    what an answer quotes, and the keyword search finds an option by its name in the same text the
    answer quotes (it searched the HTML, and the answer alone converted it)."""
    cli = DOCSITES / "cli"
    text = clean_markdown((cli / "commands" / "pallet-deps.md").read_text())[1]
    assert "<dt" not in text and "<dd" not in text and "option-anchor" not in text
    assert (
        "`-d`, `--duplicates`: Print only the packages the project depends on in more than one version "
        "(implies `--reverse`). Two versions" in text
    )
    assert "`-k` *kinds*, `--kinds` *kinds*: The kinds of dependency to print, separated by commas:" in text
    assert "\n- `all` — Print every kind.\n" in text and "\n\nThe default is `runtime,test`." in text
    page = (cli / "commands" / "pallet-unpublish.md").read_text()
    [undo] = [c for c in split_markdown(page, "commands/pallet-unpublish.md", "h", 1000, 100) if "`--undo`" in c.text]
    assert "<dd" not in index_text(undo) and "`--undo`: Bring a withdrawn version back" in index_text(undo)
    answer = compose("withdrew a version by mistake, how do i undo the unpublish", undo.text)  # as the index holds it
    assert "`--undo`: Bring a withdrawn version back, so that new projects can use it again." in answer, answer
    # a definition list inside a code block is code: left as written
    glossary = clean_markdown((DOCSITES / "site" / "content" / "glossary.md").read_text())[1]
    assert '<dl class="terms">\n  {{ range .Pages.ByWeight }}\n  <dt id="{{ .File.BaseFileName }}">' in glossary


def test_a_list_the_quoted_sentence_introduces_follows_it_as_a_list():
    """ "Caching these files and folders between runs is enough:" and its six items: quoted as the
    list it introduces, each item on its line (the items were joined to the sentence as prose, and
    the budget cut them after the second)."""
    text = clean_markdown((DOCSITES / "cli" / "guide" / "ci-caching.md").read_text())[1]
    answer = compose("which files and folders are enough to cache between CI runs", text)
    assert "between runs is enough:\n- `tools.lock`\n- `tools.json`\n- `bin/`\n- `index/`\n" in answer, answer
    assert "- `downloads/`\n- `sources/git/`" in answer


def test_a_real_man_page_option_list_reads_as_options_with_their_names():
    """The same on the Cargo Book's command pages (it read "--undo Undo a yank", or lost the name)."""
    cargo, hugo_docs = fetched_corpus("cargo-book"), fetched_corpus("hugo-docs")
    text = clean_markdown((cargo / "commands" / "cargo-tree.md").read_text())[1]
    assert "<dt" not in text and "<dd" not in text and "option-anchor" not in text
    assert "`-d`, `--duplicates`: Show only dependencies which come in multiple versions (implies `--invert`)." in text
    assert "`-e` *kinds*, `--edges` *kinds*: The dependency kinds to display." in text
    assert "\n- `all` — Show all edge kinds.\n" in text
    page = (cargo / "commands" / "cargo-yank.md").read_text()
    chunks = split_markdown(page, "commands/cargo-yank.md", "h", 1000, 100)
    [undo] = [c for c in chunks if "`--undo`" in c.text]
    assert "<dd" not in undo.text and "`--undo`: Undo a yank, putting a version back into the index." in undo.text
    assert "--undo" in index_text(undo) and "<dd" not in index_text(undo)
    answer = compose("pushed a bad version, how do i undo a yank", undo.text)  # the chunk, as the index holds it
    assert "`--undo`: Undo a yank, putting a version back into the index." in answer, answer
    # a definition list inside a code block is code: left as written
    hugo = clean_markdown((hugo_docs / "content-management" / "build-options.md").read_text())[1]
    assert "<dl>\n  {{ range .Pages }}\n    <dt>{{ .Title }}</dt>\n    <dd>{{ .Content }}</dd>" in hugo
    assert definition_lists(text) == text  # converted once: nothing left to convert


def test_a_list_the_quoted_sentence_introduces_follows_it_as_a_list_on_a_real_page():
    """The same on the Cargo Book: "It should be sufficient to cache the following files and
    directories across builds:" and its six items."""
    cargo = fetched_corpus("cargo-book")
    text = clean_markdown((cargo / "guide" / "cargo-home.md").read_text())[1]
    answer = compose("which files and directories are sufficient to cache across builds in CI", text)
    assert "across builds:\n- `.crates.toml`\n- `.crates2.json`\n- `bin/`\n- `registry/index/`\n" in answer, answer
    assert "- `registry/cache/`\n- `git/db/`" in answer


def test_a_section_named_only_by_its_heading_is_quoted_under_its_name():
    """A reference page's setting is named by its heading alone ("#### `fetch.attempts`", then its
    type, default and what it does): a passage from the section starts with the heading, so the
    answer says which setting it is about; a passage that names its subject itself does not."""
    section = (
        "* Type: integer\n* Default: 4\n* Environment: `WIDGET_FETCH_ATTEMPTS`\n\n"
        "How many times a download that failed on a network error is tried again.\n"
    )
    doc = {"id": "d#1", "location": "config.md", "title": "Settings > `[fetch]` > `fetch.attempts`", "text": section}
    question = "how many times does widget try a download again after a network error"
    answer = Extractive(TextEmbedder(None)).compose([question], [doc])
    assert answer.startswith("`fetch.attempts`:"), answer
    named = {**doc, "text": "The `fetch.attempts` setting is how often a failed download is tried, 4 by default.\n"}
    answer = Extractive(TextEmbedder(None)).compose([question], [named])
    assert answer.startswith("The `fetch.attempts` setting"), answer


DASHBOARDS = """# Dashboards

We use Grafana for metrics and Kibana for logs. Both are behind the VPN.

The main Grafana board is [Platform overview](https://grafana.internal.example/d/platform-overview), with one
row per service. The saved Kibana search for checkout errors is [Checkout errors](https://kibana.internal.example/app/discover#/view/checkout-errors).

See the [on-call page](../oncall.md) for who watches them.
"""


def test_a_question_asking_for_a_link_gets_the_addresses_of_the_quoted_links():
    asked = compose("where's the kibana link for checkout errors?", DASHBOARDS)
    assert "Checkout errors (https://kibana.internal.example/app/discover#/view/checkout-errors)" in asked, asked
    # other questions read the links as their words, and a relative page link never shows an address
    plain = compose("which tool do we use for logs, kibana?", DASHBOARDS)
    assert "https://" not in plain and "Kibana" in plain, plain
    assert "../oncall.md" not in compose("what is the url of the on-call page?", DASHBOARDS)
    support = "# IT\n\nLaptops are replaced every three years. Questions go to [IT support](mailto:it@example.com).\n"
    assert "IT support (mailto:it@example.com)" in compose("who do i email about a broken laptop?", support)


def test_the_link_asked_for_is_shown_through_the_cli(tmp_path):
    """`threadwise ask --json` offline on a folder: the answer names the dashboard's address."""
    src = tmp_path / "docs"
    src.mkdir()
    (src / "dashboards.md").write_text(DASHBOARDS)
    (src / "expenses.md").write_text("# Expenses\n\nClaim a taxi to the airport in the expenses tool within 30 days.\n")
    write_offline_config(tmp_path)
    question = "what's the link to the grafana platform board?"
    result = threadwise(
        "ask", "--config", "config.toml", "--source", str(src), "--json", question, cwd=tmp_path, timeout=600
    )
    assert result.returncode == 0, result.stderr[-2000:]
    answer = json.loads(result.stdout)["answer"]
    assert "Platform overview (https://grafana.internal.example/d/platform-overview)" in answer, answer


@pytest.mark.parametrize(
    "question, asks",
    [
        ("where's the kibana link for checkout errors?", True),
        ("what's the url of the expenses form", True),
        ("which website do we book travel on", True),
        ("who do i email for IT support?", True),
        ("what's the email address for payroll", True),
        ("how to set a base url on the client so i dont repeat the host", False),
        ("my script does a GET on an old url and gets a 301 back", False),
        ("how do i claim a taxi", False),
    ],
)
def test_questions_asking_for_a_link_are_told_apart(question, asks):
    assert signals.asks_for_link(question) is asks


def test_a_question_asking_for_a_link_is_searched_in_the_documents_not_answered_as_small_talk():
    from graphs.offline_router import OfflineRouter, RouteSignals

    router = OfflineRouter(TextEmbedder(None), None, margin=0.05, current_margin=0.05)
    looks_general = {"kb": 0.2, "small_talk": 0.1, "general": 0.5, "current": 0.1}
    assert router.decide(RouteSignals(**looks_general)) == "direct"
    assert router.decide(RouteSignals(**looks_general, asks_for_link=True)) == "vectorstore"
