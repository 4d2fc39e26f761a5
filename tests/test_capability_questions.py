"""A message asking what the bot is for ("what can you do?", "what are you for?", "help") is
answered with what the bot does and what its knowledge base holds (``[knowledge] description``),
offline and with a hosted chat model alike: never searched for (a user guide speaks of help and
of what the bot does on every page) nor sent to the experts. Through the real `threadwise ask`
process on a chat bot's guide written for the tests (tests/data/docsites/teambot)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from graphs import signals
from tests.cli_helpers import ask
from tests.fakes.model_apis import model_api, models_config
from tests.test_hosted_route import ask as hosted_ask
from tests.test_question_kinds import TEAMBOT

DESCRIPTION = "the Teambot guide: setting up and running the Teambot chat bot"


@pytest.mark.parametrize(
    "message, about_bot",
    [
        ("what can you do?", True),
        ("What are you for?", True),
        ("help", True),
        ("Help!", True),
        ("hi, how can you help me?", True),
        ("hey teambot what can I ask you?", False),  # another bot's name is a question's word
        ("hey threadwise, what can you do", True),
        ("who are you?", True),
        ("what do you know about?", True),
        ("help me set up the bot for Discord", False),
        ("what can you do about rate limits?", False),
        ("how do I get help from an expert?", False),
        ("what does the bot do when it cannot find an answer?", False),
    ],
)
def test_messages_asking_what_the_bot_is_for_are_told(message, about_bot):
    assert signals.asks_what_bot_does(message) == about_bot


@pytest.fixture
def described_guide(tmp_path: Path) -> Path:
    shutil.copytree(TEAMBOT, tmp_path / "guide")
    (tmp_path / "config.toml").write_text(
        f'[knowledge]\nsources = ["guide"]\nembeddings = "local"\ndescription = "{DESCRIPTION}"\n'
        '[graph]\ncomposer = "extractive"\n'
        '[service]\ncheckpoint_db = "data/checkpoints.sqlite"\nbookkeeping_db = "data/bookkeeping.sqlite"\n'
    )
    return tmp_path


@pytest.mark.slow
def test_what_can_you_do_is_answered_with_what_the_bot_does_offline(described_guide):
    for question in ("what can you do?", "what are you for?", "hi, how can you help me?"):
        result = ask(described_guide, question)
        assert result["kind"] == "direct" and "retrieve" not in result["path"], (question, result)
        assert DESCRIPTION in result["answer"] and "experts" in result["answer"], (question, result["answer"])
    asked = ask(described_guide, "help me set up the bot for Discord")  # a question: searched
    assert "retrieve" in asked["path"] and DESCRIPTION not in (asked["answer"] or ""), asked


@pytest.mark.slow
async def test_a_hosted_model_that_searches_for_what_are_you_for_is_overruled(described_guide):
    """The route prompt says such a message is answered directly; a model that routes it to the
    knowledge base all the same does not cost a search, and the answer says what the bot does
    without a model call."""
    message = "what are you for?"
    route = json.dumps({"question": message, "route": "vectorstore", "query": "purpose"})
    async with model_api("openai", {"route": [route]}) as (fake, base):
        config = (described_guide / "config.toml").read_text().replace('embeddings = "local"', 'embeddings = "none"')
        config = config.replace('[graph]\ncomposer = "extractive"\n', "")
        (described_guide / "config.toml").write_text(
            config + f"[web]\nenabled = false\n[models]\n{models_config('openai', base)}"
        )
        result = await hosted_ask(described_guide, message)
        system = fake.system_of(fake.bodies("route")[0])
    assert "what can you do?" in system, system
    assert result["path"] == ["start", "route", "direct", "finish"], result
    assert DESCRIPTION in result["answer"], result
    assert "route" in fake.tasks() and "direct" not in fake.tasks(), fake.tasks()  # no model call to write it
