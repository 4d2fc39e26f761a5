"""Any chat model: the bot configured as ``openai:``, ``anthropic:`` or ``ollama:`` with a
base URL answers through each provider's real LangChain client against a local server of
that API's wire shape (tests/fakes/model_apis.py), and each fault a provider shows (429
with Retry-After, 500, a stall, a reply cut at its token budget, a refusal or content
filter, a broken tool call or JSON) is handled the same way on each, at the network
boundary. Token usage reaches the turn's values as the provider counted it."""

from __future__ import annotations

import json
import time
from types import SimpleNamespace

import pytest

from bot.config import ConfigError, Secrets, load_settings
from bot.runtime import open_runtime
from graphs.models import (
    ModelCaller,
    ModelRefusedError,
    ModelUnavailableError,
    RetryableError,
    build_chat_model,
    resolve_chat_spec,
)
from graphs.schemas import RouteDecision
from tests.conftest import write_config
from tests.fakes.model_apis import KEYS, WIRES, model_api, models_config
from tests.test_slack_run import free_port

WIRE_NAMES = list(WIRES)
ROUTE_DEFAULT = RouteDecision(question="", route="direct", query="")
NOTHING_RELEVANT = json.dumps(
    {"documents": [{"id": i, "relevant": False, "facts": ""} for i in (1, 2, 3)], "feedback": "no document mentions it"}
)


@pytest.fixture(autouse=True)
def provider_keys(monkeypatch):
    for env in KEYS.values():
        for name, value in env.items():
            monkeypatch.setenv(name, value)


def caller_for(
    wire: str,
    base: str,
    method: str = "auto",
    timeout: float = 5.0,
    max_tokens: int = 64,
    max_retry_wait: float = 3.0,
    **kw,
) -> ModelCaller:
    cfg = SimpleNamespace(
        chat_model=f"{WIRES[wire][2]}:test-model",
        base_url=base,
        provider="auto",
        mistral_chat_model="",
        mistral_base_url="",
        gguf_path="",
        temperature=0.0,
        max_tokens=max_tokens,
        request_timeout_seconds=timeout,
    )
    return ModelCaller(
        build_chat_model(cfg), method, max_retries=2, timeout=timeout, max_retry_wait=max_retry_wait, **kw
    )


def max_tokens_of(wire: str, body: dict) -> int:
    if wire == "ollama":
        return body["options"]["num_predict"]
    return body["max_tokens"]


# ---- the graph, end to end, on each provider ---------------------------------------
@pytest.mark.parametrize("wire", WIRE_NAMES)
async def test_a_knowledge_base_question_is_answered_on_the_first_pass(tmp_path, wire):
    async with model_api(wire) as (fake, base):
        settings = load_settings(write_config(tmp_path, extra=models_config(wire, base)))
        async with open_runtime(settings, Secrets(), embeddings=None) as rt:
            from bot.platforms.console import ConsoleResponder

            out = ConsoleResponder("m", show_status=False, show_answers=False)
            result = await rt.service.ask("console:m", "what does the container need to boot?", out)
    assert result.answer is not None and result.answer.text == "It needs REDIS_URI and DATABASE_URI [1]."
    assert result.answer.sources[0].location == "deploy/container.md"
    assert fake.tasks() == ["route", "grade_documents", "generate", "grade_answer"]
    assert result.values["llm_calls"] == 4
    # the provider's own counts, as its API reported them, summed over the turn
    assert (result.values["input_tokens"], result.values["output_tokens"]) == (fake.input_tokens, fake.output_tokens)
    assert fake.input_tokens > 0 and not fake.refused
    assert all(r["model"] == "test-model" for r in fake.requests)


@pytest.mark.parametrize("wire", WIRE_NAMES)
async def test_nothing_relevant_ends_in_a_help_request(tmp_path, wire):
    script = {"grade_documents": [NOTHING_RELEVANT], "rewrite": [json.dumps({"query": "container boot needs"})]}
    async with model_api(wire, script) as (fake, base):
        settings = load_settings(write_config(tmp_path, extra=models_config(wire, base) + "\n[web]\nenabled = false"))
        async with open_runtime(settings, Secrets(), embeddings=None) as rt:
            from bot.platforms.console import ConsoleResponder

            out = ConsoleResponder("m", show_status=False, show_answers=False)
            result = await rt.service.ask("console:m", "what does the container need to boot?", out)
    assert result.answer is None and result.help_request is not None
    assert "generate" not in fake.tasks() and fake.tasks().count("grade_documents") == 2
    assert not fake.refused


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
@pytest.mark.parametrize("how", ["refusal", "filter"])
async def test_a_refused_answer_ends_in_the_apology_not_a_crash(tmp_path, wire, how):
    if wire == "anthropic" and how == "filter":
        pytest.skip("Anthropic reports both as stop_reason refusal")
    script = {"generate": [{"refuse": "filter" if how == "filter" else True}]}
    async with model_api(wire, script) as (fake, base):
        settings = load_settings(write_config(tmp_path, extra=models_config(wire, base)))
        async with open_runtime(settings, Secrets(), embeddings=None) as rt:
            from bot.platforms.console import ConsoleResponder

            out = ConsoleResponder("m", show_status=False, show_answers=False)
            result = await rt.service.ask("console:m", "what does the container need to boot?", out)
    assert result.answer is not None and result.answer.kind == "apology"
    assert result.answer.text == settings.service.apology
    assert fake.tasks().count("generate") == 1  # a refusal is not retried


async def test_anthropic_gets_a_valid_message_list_from_any_thread_history(tmp_path):
    """A thread whose history starts with the bot's message, has two user turns in a row
    and an empty turn: Anthropic's rules (first turn the user's, alternation, non-empty
    content, the system prompt apart) hold, so nothing is refused with 400."""
    direct = json.dumps({"question": "thanks, and hello", "route": "direct", "query": ""})
    async with model_api("anthropic", {"route": [direct]}) as (fake, base):
        settings = load_settings(write_config(tmp_path, extra=models_config("anthropic", base)))
        async with open_runtime(settings, Secrets(), embeddings=None) as rt:
            from bot.platforms.console import ConsoleResponder

            await rt.service.seed_history(
                "console:h",
                [
                    {"role": "assistant", "content": "Hi! I answer questions about the docs."},
                    {"role": "user", "content": "We deploy with containers."},
                    {"role": "user", "content": "   "},
                    {"role": "assistant", "content": ""},
                    {"role": "user", "content": "Something about Redis."},
                ],
            )
            out = ConsoleResponder("h", show_status=False, show_answers=False)
            result = await rt.service.ask("console:h", "thanks, and hello", out)
    assert result.answer is not None and result.answer.kind == "direct", result.error
    assert fake.tasks() == ["route", "direct"] and fake.refused == []
    sent = json.dumps(fake.bodies("direct")[0]["messages"])
    assert "I answer questions about the docs" in sent and "We deploy with containers" in sent  # nothing lost
    assert all(b["messages"][0]["role"] == "user" and "system" in b for b in fake.requests)


# ---- faults, at the network boundary, on each provider -------------------------------
@pytest.mark.parametrize("wire", WIRE_NAMES)
async def test_429_with_retry_after_is_waited_for_and_retried(wire):
    async with model_api(wire, {"direct": [{"status": 429, "headers": {"Retry-After": "1"}}, "Hello."]}) as (
        fake,
        base,
    ):
        assert await caller_for(wire, base).text("TASK: direct\nHi.", "hi") == "Hello."
    waited = fake.times[1] - fake.times[0]
    assert len(fake.requests) == 2 and 0.9 <= waited <= 3.5, waited


@pytest.mark.parametrize("wire", WIRE_NAMES)
async def test_429s_shrink_the_calls_in_flight(wire):
    script = {"direct": [{"status": 429, "headers": {"Retry-After": "0"}}, "Hello."]}
    async with model_api(wire, script) as (fake, base):
        c = caller_for(wire, base, max_concurrent=8)
        assert await c.text("TASK: direct\nHi.", "hi") == "Hello."
    assert c.limit.window < 8  # the adaptive cap learned from the provider's 429


@pytest.mark.parametrize("wire", WIRE_NAMES)
async def test_a_connection_refused_is_retried_then_raised(wire):
    """Each client's connection error (langchain-openai wraps the SDK's in its own class) is
    transient: retried, then raised as such, not taken for a bad request."""
    base = f"http://127.0.0.1:{free_port()}{WIRES[wire][3]}"
    c = caller_for(wire, base, max_retry_wait=0.0)
    started = time.monotonic()
    with pytest.raises(RetryableError):
        await c.text("TASK: direct\nHi.", "hi")
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("wire", WIRE_NAMES)
async def test_a_500_is_retried(wire):
    async with model_api(wire, {"direct": [{"status": 500}, "Hello."]}) as (fake, base):
        assert await caller_for(wire, base).text("TASK: direct\nHi.", "hi") == "Hello."
    assert len(fake.requests) == 2


@pytest.mark.parametrize("wire", WIRE_NAMES)
async def test_a_stalled_call_times_out_and_is_retried(wire):
    async with model_api(wire, {"direct": [{"delay": 6, "content": "late"}, "Hello."]}) as (fake, base):
        started = time.monotonic()
        assert await caller_for(wire, base, timeout=1.0).text("TASK: direct\nHi.", "hi") == "Hello."
        took = time.monotonic() - started
    assert len(fake.requests) == 2 and took < 5.5


@pytest.mark.parametrize("wire", WIRE_NAMES)
async def test_a_reply_cut_at_max_tokens_is_asked_again_with_more_room(wire):
    async with model_api(wire, {"generate": [{"cut": True}, "The whole answer [1]."]}) as (fake, base):
        text, calls = await caller_for(wire, base).complete("TASK: generate\nx", "q")
    assert text == "The whole answer [1]." and int(calls) == 2
    first, second = fake.requests
    assert max_tokens_of(wire, second) == 2 * max_tokens_of(wire, first) == 128
    # an OpenAI-compatible server gets the budget under the name every such server reads
    # (llama-cpp-python's ignores max_completion_tokens and writes until its context is full)
    assert wire != "openai" or "max_completion_tokens" not in first


@pytest.mark.parametrize("wire", WIRE_NAMES)
async def test_a_structured_reply_cut_short_is_not_a_verdict(wire):
    async with model_api(wire, {"route": [{"cut": True}, {}]}) as (fake, base):
        value, calls = await caller_for(wire, base).structured(
            "TASK: route\nx", "New message: boot?", RouteDecision, ROUTE_DEFAULT
        )
    assert value.route == "vectorstore" and int(calls) == 2


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
async def test_a_refusal_is_raised_not_retried(wire):
    async with model_api(wire, {"direct": [{"refuse": True}], "route": [{"refuse": True}]}) as (fake, base):
        c = caller_for(wire, base)
        with pytest.raises(ModelRefusedError):
            await c.text("TASK: direct\nHi.", "hi")
        with pytest.raises(ModelRefusedError):
            await c.structured("TASK: route\nx", "New message: boot?", RouteDecision, ROUTE_DEFAULT)
    assert len(fake.requests) == 2


@pytest.mark.parametrize(
    "wire,method", [("openai", "function_calling"), ("anthropic", "auto"), ("ollama", "function_calling")]
)
async def test_a_broken_tool_call_is_asked_for_again(wire, method):
    async with model_api(wire, {"route": [{"bad_tool_call": True}, {}]}) as (fake, base):
        c = caller_for(wire, base, method)
        value, calls = await c.structured("TASK: route\nx", "New message: boot?", RouteDecision, ROUTE_DEFAULT)
    assert value.route == "vectorstore" and int(calls) == 2
    assert all(r.get("tools") for r in fake.requests)  # asked by tool call both times
    assert not fake.refused  # the retry's message list is valid for the API


@pytest.mark.parametrize(
    "wire,method", [("openai", "auto"), ("openai", "json_mode"), ("ollama", "auto"), ("anthropic", "prompt")]
)
async def test_broken_json_is_asked_for_again_then_the_safe_default(wire, method):
    async with model_api(wire, {"route": [{"bad_json": True}, {}]}) as (fake, base):
        value, calls = await caller_for(wire, base, method).structured(
            "TASK: route\nx", "New message: boot?", RouteDecision, ROUTE_DEFAULT
        )
    assert value.route == "vectorstore" and int(calls) == 2 and not fake.refused
    async with model_api(wire, {"route": [{"bad_json": True}]}) as (fake, base):
        value, calls = await caller_for(wire, base, method).structured(
            "TASK: route\nx", "New message: boot?", RouteDecision, ROUTE_DEFAULT
        )
    assert value == ROUTE_DEFAULT and int(calls) == 2


async def test_a_server_without_json_schema_gets_the_next_method():
    """An OpenAI-compatible server refusing ``response_format`` json_schema (as
    llama-cpp-python's does) gets a tool call instead, from then on."""
    async with model_api("openai", unsupported=frozenset({"json_schema"})) as (fake, base):
        c = caller_for("openai", base)
        for _ in range(2):
            value, _ = await c.structured("TASK: route\nx", "New message: boot?", RouteDecision, ROUTE_DEFAULT)
            assert value.route == "vectorstore"
    assert c.json_mode == "function_calling"
    assert len(fake.refused) == 1 and len(fake.requests) == 3


# ---- configuration ---------------------------------------------------------------------
def test_a_provider_the_old_key_does_not_know_gets_one_line_saying_what_to_write(tmp_path):
    with pytest.raises(ConfigError) as caught:
        load_settings(write_config(tmp_path, extra='provider = "openai"'))
    assert len(str(caught.value).splitlines()) == 1
    assert 'chat_model = "openai:MODEL"' in str(caught.value)


def test_a_model_name_without_its_provider_is_named(tmp_path):
    with pytest.raises(ConfigError) as caught:
        load_settings(write_config(tmp_path, extra='chat_model = "gpt-4.1-mini"'))
    assert "models.chat_model" in str(caught.value) and '"openai:gpt-4.1-mini"' in str(caught.value)


def test_a_missing_key_or_package_is_one_line_with_the_fix(tmp_path, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    settings = load_settings(write_config(tmp_path, extra='chat_model = "anthropic:claude-haiku-4-5"'))
    with pytest.raises(ModelUnavailableError, match="ANTHROPIC_API_KEY is not set"):
        build_chat_model(settings.models)
    settings = load_settings(write_config(tmp_path, extra='chat_model = "no_such_provider:x"'))
    with pytest.raises(ModelUnavailableError) as caught:
        build_chat_model(settings.models)
    assert "no_such_provider" in str(caught.value) and len(str(caught.value).splitlines()) == 1


def test_auto_learns_the_other_providers_keys(tmp_path):
    settings = load_settings(write_config(tmp_path))
    assert resolve_chat_spec(settings.models, "", env={}).offline
    assert resolve_chat_spec(settings.models, "", env={"OPENAI_API_KEY": "k"}).name == "openai:gpt-4.1-mini"
    assert resolve_chat_spec(settings.models, "", env={"ANTHROPIC_API_KEY": "k"}).provider == "anthropic"
    assert resolve_chat_spec(settings.models, "m-key", env={"OPENAI_API_KEY": "k"}).name == (
        "mistralai:mistral-small-latest"
    )  # Mistral first, as before
    old = load_settings(write_config(tmp_path, extra='provider = "mistral"\nmistral_chat_model = "mistral-large"'))
    assert resolve_chat_spec(old.models, "m-key", env={}).name == "mistralai:mistral-large"


def test_provider_keys_come_from_secret_files_too(tmp_path, monkeypatch):
    """A key mounted as a file (Docker/Kubernetes secrets, THREADWISE_SECRETS_DIR) reaches the
    provider's client, and auto picks its provider, as the environment variable would."""
    from bot.config import export_model_keys

    monkeypatch.delenv("ANTHROPIC_API_KEY")
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "ANTHROPIC_API_KEY").write_text("sk-ant-from-file\n")
    env = {"THREADWISE_SECRETS_DIR": str(secrets)}
    assert export_model_keys(env) == ["ANTHROPIC_API_KEY"] and env["ANTHROPIC_API_KEY"] == "sk-ant-from-file"
    settings = load_settings(write_config(tmp_path))
    assert resolve_chat_spec(settings.models, "", env=env).name == "anthropic:claude-haiku-4-5"
    monkeypatch.setenv("THREADWISE_SECRETS_DIR", str(secrets))
    export_model_keys()
    build_chat_model(load_settings(write_config(tmp_path, extra='chat_model = "anthropic:claude-haiku-4-5"')).models)


@pytest.mark.parametrize("wire", WIRE_NAMES)
@pytest.mark.parametrize("bad", ["wall", "cut step"])
async def test_the_answer_shape_is_asked_for_and_a_wall_of_text_or_a_cut_step_is_sent_back(tmp_path, wire, bad):
    """On any provider the writer's system prompt asks for the shape a teammate reads in ten
    seconds (the answering sentence first, the length budget, steps whole); a draft far past the
    budget, or one that cuts a step with "…", goes back with the reason, and the short answer
    that follows is what is posted."""
    drafts = {
        "wall": "The container reads REDIS_URI and DATABASE_URI at boot [1]. "
        + "It also reads many other settings that the sources describe at length [1]. " * 30,
        "cut step": "1. Set REDIS_URI [1].\n2. Run `docker run -e DATABASE_URI=… image` [1].",
    }
    reasons = {"wall": "answer in about 700", "cut step": "cut with an ellipsis"}
    short = "It needs REDIS_URI and DATABASE_URI set before it boots [1].\n\nMore in [1]."
    async with model_api(wire, {"generate": [drafts[bad], short]}) as (fake, base):
        settings = load_settings(write_config(tmp_path, extra=models_config(wire, base)))
        async with open_runtime(settings, Secrets(), embeddings=None) as rt:
            from bot.platforms.console import ConsoleResponder

            out = ConsoleResponder("m", show_status=False, show_answers=False)
            result = await rt.service.ask("console:m", "what does the container need to boot?", out)
    assert result.answer is not None and result.answer.text.startswith("It needs REDIS_URI and DATABASE_URI")
    generate = fake.bodies("generate")
    assert len(generate) == 2, fake.tasks()
    system = fake.system_of(generate[0]) or str(generate[0].get("system", ""))
    assert "Open with the sentence or the step that answers" in system
    assert "about 700 characters" in system and "never shorten them" in system
    assert reasons[bad] not in fake.last_text(generate[0])
    assert reasons[bad] in fake.last_text(generate[1])  # the redraft is told why the draft went back
    assert not fake.refused
