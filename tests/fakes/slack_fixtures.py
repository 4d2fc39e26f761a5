"""Pytest fixtures for the Slack tests (registered in tests/conftest.py):
``fake`` is a running fake Slack Web API, ``slack`` a harness running the real runtime
on a scripted model against it."""

from __future__ import annotations

import pytest

from tests.fakes.chat_model import ScriptedChatModel
from tests.fakes.slack_api import FakeSlackAPI, SlackHarness, write_config


@pytest.fixture
async def fake():
    server = await FakeSlackAPI().start()
    yield server
    await server.stop()


@pytest.fixture
async def slack(tmp_path, fake):
    harness = await SlackHarness(tmp_path, fake, write_config(tmp_path, fake), ScriptedChatModel()).open()
    yield harness
    await harness.close()
