"""The extractive offline path (``[graph] composer = "extractive"``) end to end: the real
graph, ChatService, SQLite checkpointer and the real local MiniLM embeddings, with a
scripted chat model that must never be called. Greetings get a canned reply, a
knowledge-base question an answer quoting the documents with citations and its code
block intact, a question no document answers the help request."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest

from bot.config import Secrets, load_settings
from bot.platforms.console import ConsoleResponder
from bot.protocol import IncomingMessage
from bot.runtime import open_runtime
from graphs import signals
from graphs.extractive import split_units, table_rows
from tests.fakes.chat_model import ScriptedChatModel

DOCS = {
    "deploy/container.md": """# How to deploy a standalone container

## Prerequisites

Build the image with `langgraph build` first.
The following environment variables are needed for a standalone container deployment:
`REDIS_URI` points to a Redis instance used as a pub-sub broker, and `DATABASE_URI` points
to a Postgres database that stores threads, runs and long term memory.

## Docker

Run the container with docker, passing the required environment variables:

```shell
docker run \\
    --env-file .env \\
    -p 8123:8000 \\
    -e REDIS_URI="foo" \\
    -e DATABASE_URI="bar" \\
    -e LANGSMITH_API_KEY="baz" \\
    my-image
```

Replace my-image with the name of the image you built.
""",
    "auth.md": """# Authentication

## Studio access
Custom auth handlers do not apply to Studio by default. Set disable_studio_auth to true in
langgraph.json to require tokens from Studio too.
""",
    "memory.md": """# Memory

## Trimming messages
A pre_model_hook that returns llm_input_messages only changes what the model sees.
To delete messages permanently from the thread, return RemoveMessage entries in messages.
""",
    "persistence.md": """# Persistence

## Checkpointers
Compile the graph with a checkpointer such as InMemorySaver to keep the state of every
thread between runs. In production use a database-backed checkpointer like PostgresSaver.
Every run needs a thread_id in its config so the checkpointer knows which thread to load.
""",
}


def msg(text: str, thread: str) -> IncomingMessage:
    return IncomingMessage(
        platform="console",
        thread_key=f"console:{thread}",
        message_id=uuid.uuid4().hex,
        author_id="ana",
        author_name="ana",
        text=text,
        is_expert=True,
        is_admin=False,
    )


def extractive_settings(root: Path, pages: dict[str, str]):
    """Settings of a bot answering offline (extractive composer, local embeddings) from
    ``pages`` (relative path -> Markdown) written under ``root/kb``."""
    for rel, text in pages.items():
        p = root / "kb" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    (root / "config.toml").write_text(f"""
[knowledge]
sources = ["{root / "kb"}"]
embeddings = "local"
[graph]
composer = "extractive"
[service]
help_timeout_seconds = 600
""")
    return load_settings(root / "config.toml")


@pytest.fixture(scope="module")
def offline_settings(tmp_path_factory):
    return extractive_settings(tmp_path_factory.mktemp("offline"), DOCS)


async def ask(rt, text: str, thread: str) -> tuple[ConsoleResponder, dict]:
    out = ConsoleResponder(thread, show_status=False, show_answers=False)
    await rt.service.handle(msg(text, thread), out)
    return out, await rt.service.thread_values(f"console:{thread}")


@pytest.mark.slow
async def test_extractive_mode_routes_answers_and_asks_for_help_without_the_chat_model(offline_settings):
    model = ScriptedChatModel()
    async with open_runtime(offline_settings, Secrets(), chat_model=model) as rt:
        # greetings and thanks: direct, a canned reply, no search
        for i, text in enumerate(["hi there!", "thanks a lot 🙏", "good morning team"]):
            out, values = await ask(rt, text, f"greet{i}")
            assert values["route"] == "direct" and "retrieve" not in values["path"], (text, values["path"])
            assert out.answers and out.answers[0].kind == "direct" and out.answers[0].text.strip()

        # knowledge-base questions: an extractive answer with citations, code kept whole
        out, values = await ask(
            rt, "what env vars does the standalone container need to boot? show me the docker command", "kb1"
        )
        [answer] = out.answers
        assert answer.kind == "answer", values["path"]
        assert "REDIS_URI" in answer.text and "[1]" in answer.text
        assert answer.sources[0].location == "deploy/container.md"
        # the whole code block, in one fence (the index keeps code lines, not their indentation)
        block = re.search(r"```shell\n(.*?)\n```", answer.text, re.S)
        assert block, answer.text
        assert [line.strip() for line in block.group(1).splitlines()] == [
            "docker run \\",
            "--env-file .env \\",
            "-p 8123:8000 \\",
            '-e REDIS_URI="foo" \\',
            '-e DATABASE_URI="bar" \\',
            '-e LANGSMITH_API_KEY="baz" \\',
            "my-image",
        ]
        assert answer.text.count("```") == 2

        out, values = await ask(
            rt, "studio can reach my server without a token, how do i require auth there too?", "kb2"
        )
        assert out.answers and out.answers[0].kind == "answer", values["path"]
        assert "disable_studio_auth" in out.answers[0].text and out.answers[0].sources[0].location == "auth.md"

        # the answer's shape: short, the answering sentence first, where to read more last
        more = re.findall(r"^More in (.*)\.$", answer.text, flags=re.M)
        body = answer.text.rsplit("\n\nMore in ", 1)[0]
        assert not more or not set(re.findall(r"\[\d+\]", more[0])) & set(re.findall(r"\[\d+\]", body))
        assert "…" not in answer.text

        # a question no document answers reaches the experts
        for i, text in enumerate(
            [
                "what's the weather in berlin tomorrow?",
                "how do I rebalance kafka consumer groups after adding partitions?",
            ]
        ):
            out, values = await ask(rt, text, f"none{i}")
            assert not out.answers and len(out.help_requests) == 1, (text, values["path"])
            assert values["path"].count("retrieve") == 2  # both searches spent, without a model
            # without web search, a question about the present moment says so instead of "nothing found"
            assert (
                "needs current information, which I cannot check (web search is not configured)"
                in out.help_requests[0].reason
            ) == (i == 0), out.help_requests[0].reason

    assert model.calls == []  # zero chat-model calls in the whole session


@pytest.mark.slow
async def test_each_turn_of_a_thread_computes_only_its_texts_own_word_pieces(offline_settings, monkeypatch):
    """A first question and its follow-ups in one thread, through the real graph: each turn
    embeds the retrieved passages' sentences, and the local model computes only their word
    pieces, no padding. Texts sent together used to be padded to the longest of them: about
    four times the work, 1-4 s of CPU a turn on the LangGraph docs (bench/README.md "A turn's
    CPU"), whichever turn of the thread it was."""
    ort = pytest.importorskip("onnxruntime")
    computed: list[tuple[int, int]] = []  # (positions computed, word pieces of the texts) per model call
    run = ort.InferenceSession.run

    def counted(self, output_names, feed, *args, **kwargs):
        if "input_ids" in feed:
            computed.append((int(feed["input_ids"].size), int(feed["attention_mask"].sum())))
        return run(self, output_names, feed, *args, **kwargs)

    monkeypatch.setattr(ort.InferenceSession, "run", counted)
    thread = f"turns-{uuid.uuid4().hex[:6]}"
    async with open_runtime(offline_settings, Secrets(), chat_model=ScriptedChatModel()) as rt:
        for text in (
            "how do I deploy a standalone container?",
            "and which environment variables does it need?",
            "what about the docker command, what port does it publish?",
            "ok and where do threads and runs get stored?",
        ):
            computed.clear()
            out, values = await ask(rt, text, thread)
            assert out.answers and values["route"] == "vectorstore", (text, values["path"])
            assert computed, "the turn embedded nothing: the local model did not run through ONNX Runtime"
            padded = sum(size - pieces for size, pieces in computed)
            assert padded == 0, f"{text!r}: {padded} padding positions computed of {sum(s for s, _ in computed)}"


def test_units_keep_code_blocks_whole_and_split_sentences():
    units = split_units(DOCS["deploy/container.md"])
    code = [u for u in units if u.code]
    assert len(code) == 1 and code[0].text.startswith("```shell\ndocker run") and code[0].text.endswith("```")
    prose = [u.text for u in units if not u.code]
    assert "Build the image with `langgraph build` first." in prose
    # hard-wrapped lines are joined into one sentence
    assert any(p.startswith("The following environment variables") and p.endswith("long term memory.") for p in prose)
    # indented fences (inside list items) and unterminated fences (a chunk cut mid-block)
    nested = split_units("1. Install:\n\n    ```bash\n    pip install x\n    ```\n\nThen run it now please.\n")
    assert [u.text for u in nested if u.code] == ["```bash\npip install x\n```"]
    cut = split_units("Run this command in your shell:\n```python\nprint(1)\n")
    assert cut[-1].code and cut[-1].text == "```python\nprint(1)\n```"


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            "LangGraph は状態を保存します。チェックポイントはスレッドごとに保存されます。再開できます！",
            ["LangGraph は状態を保存します。", "チェックポイントはスレッドごとに保存されます。", "再開できます！"],
        ),
        (
            "检查点按线程保存。中断会暂停图的执行？是的，可以恢复。",
            ["检查点按线程保存。", "中断会暂停图的执行？", "是的，可以恢复。"],
        ),
        (
            "Граф сохраняет состояние после каждого шага. Контрольные точки хранятся по потокам.",
            ["Граф сохраняет состояние после каждого шага.", "Контрольные точки хранятся по потокам."],
        ),
        (
            "Der Graph speichert den Zustand nach jedem Schritt. Über Threads wird fortgesetzt.",
            ["Der Graph speichert den Zustand nach jedem Schritt.", "Über Threads wird fortgesetzt."],
        ),
    ],
)
def test_sentences_split_in_any_script(text, expected):
    """Extractive answers quote sentences, not whole paragraphs, in any script."""
    assert [u.text for u in split_units(text, min_characters=8)] == expected


def test_tables_are_kept_whole_not_flattened_into_prose():
    text = (
        "Telemetry depends on the deployment. See the table below.\n\n"
        "| Option | Telemetry |\n| --- | --- |\n| Cloud SaaS | sent to LangSmith |\n"
        "| Standalone | self-reported |\n\n"
        "After the table comes more prose about it."
    )
    units = split_units(text, min_characters=8)
    tables = [u for u in units if u.text.startswith("|")]
    assert len(tables) == 1 and tables[0].code
    assert tables[0].text.splitlines() == [
        "| Option | Telemetry |",
        "| --- | --- |",
        "| Cloud SaaS | sent to LangSmith |",
        "| Standalone | self-reported |",
    ]
    assert not any("|" in u.text for u in units if not u.code)
    cut = split_units("| A | B |\n| --- | --- |\n| one | two |\n| thr", min_characters=8)
    assert cut[0].text.splitlines()[-1] == "| one | two |"  # a row cut by a length limit is dropped


def test_each_table_row_also_reads_as_a_sentence_with_its_header():
    text = (
        "| Team | On-call lead | Notes |\n| --- | --- | --- |\n"
        "| Search | Ana |  |\n| [Billing](b.md) | Ben \\| Bo | x |\n"
    )
    units = split_units(text, min_characters=8)
    [table] = [u for u in units if u.code]
    rows = [u for u in units if u.row >= 0]
    assert [u.text for u in rows] == [
        "Team: Search, On-call lead: Ana",
        "Team: Billing, On-call lead: Ben | Bo, Notes: x",
    ]
    assert all(u.row == table.pos and not u.code for u in rows)
    # a header row of empty cells (an HTML table without <th>) gives way to the first row
    assert table_rows(["|  |  |", "| --- | --- |", "| Service | Port |", "| Capybara gateway | 7443 |"]) == [
        "Service: Capybara gateway, Port: 7443"
    ]
    # a table without a header row: the cells alone
    assert table_rows(["| Capybara gateway | 7443 |"]) == ["Capybara gateway, 7443"]


@pytest.mark.parametrize(
    "doc, question, fact",
    [
        # the cause sits in the sentence before the one the question's words match
        (
            "Brave blocks plain-HTTP traffic on localhost when Brave Shields are enabled. When running Studio with "
            '`langgraph dev`, you may see "Failed to load assistants" errors. Other browsers work fine here.',
            "why does studio say failed to load assistants?",
            "Brave Shields",
        ),
        # the identifier is named just before the sentence that explains it
        (
            "Set `LANGSMITH_API_KEY` in your project's .env file. This enables tracing, which the run experiment "
            "button needs to be enabled in the studio.",
            "the run experiment button is not enabled in studio",
            "LANGSMITH_API_KEY",
        ),
        # a list item introducing the matching one
        (
            "- Use `BG_JOB_TIMEOUT_SECS` for that.\n- Long background runs can exceed the default maximum run time.\n",
            "what is the maximum run time of long background runs?",
            "BG_JOB_TIMEOUT_SECS",
        ),
    ],
)
def test_answers_quote_the_sentence_before_a_match(doc, question, fact):
    """An extractive answer quotes the sentence before each quoted one too, verbatim from
    the document, so a fact the question's words do not point to is not lost."""
    from graphs.extractive import Extractive, TextEmbedder

    answer = Extractive(TextEmbedder(None)).compose(
        [question], [{"id": "d#1", "location": "d.md", "title": "D", "text": doc}]
    )
    assert fact in answer
    assert "…" not in answer  # sentences are quoted whole, never joined by an ellipsis
    for para in answer.split("\n\n")[:-1]:  # the last one says where to read more
        for sentence in split_units(para.rsplit(" [", 1)[0], min_characters=1):
            assert sentence.text in " ".join(doc.replace("- ", "").split())


def test_a_table_row_answers_alone_and_other_rows_join_only_with_more_of_the_question():
    """A row that answers leads, read with its header; a row of the same table (also in the
    next chunk, which repeats the header) joins only when it holds a word of the question the
    rows quoted do not."""
    from graphs.extractive import Extractive, TextEmbedder

    header = "| Team | On-call rota lead |\n| --- | --- |\n"
    text = header + "| Search | Tomasz |\n| Billing | Benedikt |\n\n" + header + "| Payments | Oskar |\n"
    doc = {"id": "rota.xlsx#1", "location": "rota.xlsx", "title": "Rota", "text": text}
    brain = Extractive(TextEmbedder(None))
    one = brain.compose(["who leads the on-call rota for search?"], [doc])
    assert one == "Team: Search, On-call rota lead: Tomasz [1]", one
    both = brain.compose(["who leads the on-call rota for search and payments?"], [doc])
    assert "Team: Search, On-call rota lead: Tomasz [1]" in both and "Payments, On-call rota lead: Oskar" in both
    assert "Benedikt" not in both, both


@pytest.mark.parametrize(
    "question",
    [
        "is the plugin repo down right now?",
        "what's the latest stable release?",
        "did 10.12 come out yet?",
        "is v8.2 released yet or still rc",
        "when is the next version coming out",
        "any release date for 3.0?",
        "what's the latest release out?",
        "any news today on the outage?",
    ],
)
def test_questions_about_the_present_moment_are_told_from_documentation_questions(question):
    assert signals.asks_for_now(question)


@pytest.mark.parametrize(
    "question",
    [
        "what happens to waiting clients once the lock has been released?",
        "how do i roll out a release to staging",
        "i'm off sick today, who do i tell?",
        "how do i release a lock i hold",
        "which version of the api does the client use by default",
        "what version is currently supported?",
        "what's the latest version of the client library?",
        "how do i shut down the worker now",
    ],
)
def test_documentation_questions_are_not_taken_for_the_present_moment(question):
    assert not signals.asks_for_now(question)
