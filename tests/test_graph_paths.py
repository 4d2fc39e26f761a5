"""Every path of the adaptive RAG graph, driven by a scripted chat model through the real
ChatService, SQLite checkpointer and console adapter. Assertions are on what a user
would notice: what was posted, the statuses, the node sequence and the saved state."""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import inspect
import json
import threading
import uuid

import httpx
import pytest

from bot.config import Secrets, load_settings
from bot.platforms.console import ConsoleResponder
from bot.protocol import IncomingMessage, Status
from tests.conftest import scripted_runtime, write_config
from tests.fakes.chat_model import ScriptedChatModel

NONE_RELEVANT = json.dumps(
    {"documents": [{"id": 1, "relevant": False, "facts": ""}], "feedback": "nothing about the topic"}
)
GROUNDED = json.dumps({"grounded": True, "useful": True, "feedback": ""})
HALLUCINATED = json.dumps({"grounded": False, "useful": True, "feedback": "the port number is not in the sources"})
NOT_USEFUL = json.dumps({"grounded": True, "useful": False, "feedback": "it does not say which variables"})


def msg(
    text: str,
    thread: str = "t",
    *,
    expert: bool = True,
    admin: bool = False,
    mid: str | None = None,
    author: str = "ana",
) -> IncomingMessage:
    return IncomingMessage(
        platform="console",
        thread_key=f"console:{thread}",
        message_id=mid or uuid.uuid4().hex,
        author_id=author,
        author_name=author,
        text=text,
        is_expert=expert,
        is_admin=admin,
    )


async def ask(rt, text: str, thread: str = "t", **kw) -> ConsoleResponder:
    out = ConsoleResponder(thread, show_status=False)
    await rt.service.handle(msg(text, thread, **kw), out)
    return out


async def test_useful_first_time(settings):
    async with scripted_runtime(settings) as (rt, model):
        out = await ask(rt, "what does the standalone container need to boot?")
        values = await rt.service.thread_values("console:t")
    assert out.statuses == [Status.RECEIVED, Status.SEARCHING, Status.WRITING, Status.DONE]
    [answer] = out.answers
    assert answer.kind == "answer"
    assert answer.sources and answer.sources[0].location == "deploy/container.md"
    assert values["path"] == ["start", "route", "retrieve", "grade_documents", "generate", "grade_answer", "finish"]
    assert model.tasks() == ["route", "grade_documents", "generate", "grade_answer"]
    assert values["llm_calls"] == 4
    # the saved thread holds the question and the answer; heavy per-turn fields are dropped
    assert [m.type for m in values["messages"]] == ["human", "ai"]
    assert values["documents"] == [] and values["retrieved"] == []


async def test_hallucination_regenerates_with_feedback(settings):
    async with scripted_runtime(settings, {"grade_answer": [HALLUCINATED, GROUNDED]}) as (rt, model):
        out = await ask(rt, "what does the standalone container need to boot?")
        values = await rt.service.thread_values("console:t")
    assert values["path"].count("generate") == 2 and values["path"].count("retrieve") == 1
    assert values["generation_feedback"] == ["the port number is not in the sources"]
    second_generate = [m for t, m in model.calls if t == "generate"][1]
    assert "the port number is not in the sources" in second_generate[-1].content  # data: the user message
    assert out.answers[0].kind == "answer" and "2 drafts" in out.answers[0].route_note
    assert values["llm_calls"] == 6


async def test_not_useful_rewrites_query_and_searches_again(settings):
    async with scripted_runtime(settings, {"grade_answer": [NOT_USEFUL, GROUNDED]}) as (rt, model):
        out = await ask(rt, "what does the standalone container need to boot?")
        values = await rt.service.thread_values("console:t")
    assert values["path"] == [
        "start",
        "route",
        "retrieve",
        "grade_documents",
        "generate",
        "grade_answer",
        "rewrite_kb",
        "retrieve",
        "grade_documents",
        "generate",
        "grade_answer",
        "finish",
    ]
    assert values["kb_searches"] == 2
    assert any("does not say which variables" in f for f in values["query_feedback"])
    rewrite_prompt = [m for t, m in model.calls if t == "rewrite"][0][-1].content
    assert "does not say which variables" in rewrite_prompt
    assert out.answers[0].kind == "answer"
    assert out.statuses == [
        Status.RECEIVED,
        Status.SEARCHING,
        Status.WRITING,
        Status.SEARCHING,
        Status.WRITING,
        Status.DONE,
    ]  # rewrite_kb + retrieve show one "searching", not two


async def test_knowledge_base_exhausted_falls_back_to_web(tmp_path, tavily):
    settings = load_settings(write_config(tmp_path, f'[web]\napi_base_url = "{tavily.base_url}"\n'))
    script = {
        "grade_documents": [
            NONE_RELEVANT,
            NONE_RELEVANT,
            json.dumps({"documents": [{"id": 1, "relevant": True, "facts": "version 9"}]}),
        ]
    }
    async with scripted_runtime(settings, script, secrets=Secrets(tavily_api_key="tvly-test")) as (rt, _):
        out = await ask(rt, "what does the standalone container need to boot?")
        values = await rt.service.thread_values("console:t")
    assert values["path"][:9] == [
        "start",
        "route",
        "retrieve",
        "grade_documents",
        "rewrite_kb",
        "retrieve",
        "grade_documents",
        "rewrite_web",
        "web_search",
    ]
    assert values["kb_searches"] == 2 and values["web_searches"] == 1
    assert tavily.requests and tavily.requests[0]["query"] == "rewritten query"
    assert Status.WEB in out.statuses and out.statuses[-1] == Status.DONE
    assert out.answers[0].sources[0].location == "https://example.com/news"


async def test_web_failure_counts_as_no_documents_then_help(tmp_path, tavily):
    tavily.status = 500
    settings = load_settings(write_config(tmp_path, f'[web]\napi_base_url = "{tavily.base_url}"\n'))
    script = {"grade_documents": NONE_RELEVANT}
    async with scripted_runtime(settings, script, secrets=Secrets(tavily_api_key="tvly-test")) as (rt, model):
        out = await ask(rt, "what does the standalone container need to boot?")
        values = await rt.service.thread_values("console:t")
    assert tavily.requests, "the web was searched"
    assert values["path"][-2:] == ["web_search", "grade_documents"]  # then paused in human_review
    assert model.tasks().count("grade_documents") == 2  # web docs were empty: no grading call
    assert out.help_requests and out.statuses[-1] == Status.WAITING_HUMAN


async def paused(rt) -> ConsoleResponder:
    out = await ask(rt, "what does the standalone container need to boot?")
    assert out.help_requests, "the run should pause for a human"
    assert await rt.service.pending_interrupt("console:t") is not None
    return out


async def test_web_unavailable_asks_humans(settings):
    async with scripted_runtime(settings, {"grade_documents": NONE_RELEVANT}) as (rt, _):
        out = await paused(rt)
        values = await rt.service.thread_values("console:t")
    req = out.help_requests[0]
    assert req.question == "what does the standalone container need to boot?"
    assert values["kb_searches"] == 2 and "web_search" not in values["path"]
    assert out.statuses == [Status.RECEIVED, Status.SEARCHING, Status.WAITING_HUMAN]
    assert not out.answers


async def test_resume_with_answer_posts_the_humans_answer(settings):
    async with scripted_runtime(settings, {"grade_documents": NONE_RELEVANT}) as (rt, model):
        original = await paused(rt)
        rt.service.register_platform("console", lambda ref: original)
        calls_before = len(model.calls)
        reply = await ask(rt, "answer: set REDIS_URI and DATABASE_URI", author="bob")
        values = await rt.service.thread_values("console:t")
    [answer] = original.answers
    assert answer.kind == "human" and answer.text == "set REDIS_URI and DATABASE_URI"
    assert answer.answered_by == "bob"
    assert original.statuses[-1] == Status.DONE
    assert not reply.answers  # posted to the original question's thread responder
    assert len(model.calls) == calls_before  # no LLM call to relay a human answer
    assert values["messages"][-1].content == "set REDIS_URI and DATABASE_URI"
    assert values["path"][-2:] == ["human_review", "finish"]


async def test_resume_with_retry_uses_hint_with_fresh_budget(settings):
    script = {
        "grade_documents": [
            NONE_RELEVANT,
            NONE_RELEVANT,
            json.dumps({"documents": [{"id": 1, "relevant": True, "facts": "x"}]}),
        ]
    }
    async with scripted_runtime(settings, script) as (rt, model):
        original = await paused(rt)
        rt.service.register_platform("console", lambda ref: original)
        await ask(rt, "retry: look for REDIS_URI", author="bob")
        values = await rt.service.thread_values("console:t")
    rewrite_prompt = [m for t, m in model.calls if t == "rewrite"][-1][-1].content
    assert "Hint from bob: look for REDIS_URI" in rewrite_prompt
    assert values["path"][-7:] == [
        "human_review",
        "rewrite_kb",
        "retrieve",
        "grade_documents",
        "generate",
        "grade_answer",
        "finish",
    ]
    assert values["kb_searches"] == 1  # fresh budget after the hint
    assert original.answers[-1].kind == "answer"
    assert original.statuses[-1] == Status.DONE


async def test_resume_with_dismiss_apologises(settings):
    async with scripted_runtime(settings, {"grade_documents": NONE_RELEVANT}) as (rt, _):
        original = await paused(rt)
        rt.service.register_platform("console", lambda ref: original)
        await ask(rt, "dismiss", author="bob")
        assert await rt.service.pending_interrupt("console:t") is None
    assert original.answers[-1].kind == "apology"
    assert original.statuses[-1] == Status.APOLOGY


async def test_non_expert_cannot_resume(settings):
    async with scripted_runtime(settings, {"grade_documents": NONE_RELEVANT}) as (rt, _):
        original = await paused(rt)
        rt.service.register_platform("console", lambda ref: original)
        reply = await ask(rt, "answer: guess", expert=False, author="eve")
        still = await rt.service.pending_interrupt("console:t")
        ok = await rt.service.resume(
            "console:t", "answer", "guess", actor_id="eve", actor_name="eve", is_expert=False, out=reply
        )
        assert still is not None and not ok
        assert await rt.service.pending_interrupt("console:t") is not None
    assert "expert" in reply.notices[0]
    assert not original.answers


async def test_resume_happens_exactly_once(settings):
    async with scripted_runtime(settings, {"grade_documents": NONE_RELEVANT}) as (rt, _):
        original = await paused(rt)
        rt.service.register_platform("console", lambda ref: original)
        intr = await rt.service.pending_interrupt("console:t")
        clicks = [
            rt.service.resume(
                "console:t",
                "answer",
                f"answer {i}",
                actor_id="bob",
                actor_name="bob",
                is_expert=True,
                out=ConsoleResponder("t", show_status=False),
                interrupt_id=intr.id,
            )
            for i in range(3)
        ]
        results = await asyncio.gather(*clicks)
    assert results.count(True) == 1
    assert len(original.answers) == 1


async def test_no_human_in_time_ends_in_apology(tmp_path):
    path = write_config(tmp_path)
    path.write_text(path.read_text().replace("help_timeout_seconds = 600", "help_timeout_seconds = 0.3"))
    settings = load_settings(path)
    async with scripted_runtime(settings, {"grade_documents": NONE_RELEVANT}) as (rt, _):
        original = ConsoleResponder("t", show_status=False)
        rt.service.register_platform("console", lambda ref: original)
        await rt.service.handle(msg("what does the standalone container need to boot?"), original)
        assert original.help_requests
        for _ in range(50):
            if original.answers:
                break
            await asyncio.sleep(0.1)
        assert await rt.service.pending_interrupt("console:t") is None
    assert original.answers and original.answers[-1].kind == "apology"
    assert original.statuses[-1] == Status.APOLOGY


async def test_direct_route(settings):
    route = json.dumps({"question": "hi", "route": "direct", "query": "hi"})
    async with scripted_runtime(settings, {"route": route}) as (rt, model):
        out = await ask(rt, "hi there!")
        values = await rt.service.thread_values("console:t")
    assert values["path"] == ["start", "route", "direct", "finish"]
    assert model.tasks() == ["route", "direct"]
    assert out.answers[0].kind == "direct" and not out.answers[0].sources
    assert out.statuses == [Status.RECEIVED, Status.WRITING, Status.DONE]


async def test_follow_up_uses_the_earlier_turn(settings):
    async with scripted_runtime(settings) as (rt, model):
        await ask(rt, "what does the standalone container need to boot?")
        await ask(rt, "and which one is for the cache?")
        values = await rt.service.thread_values("console:t")
    route_prompts = [m[-1].content for t, m in model.calls if t == "route"]
    assert "standalone container need to boot" in route_prompts[1]
    assert "Here is the answer from the knowledge base" in route_prompts[1]  # the earlier answer too
    assert [m.type for m in values["messages"]] == ["human", "ai", "human", "ai"]
    # the follow-up's retrieval still finds the container page (previous question joined in)
    assert values["first_retrieval"][0] == "deploy/container.md"


async def test_per_turn_fields_reset(settings):
    async with scripted_runtime(settings, {"grade_answer": [NOT_USEFUL, GROUNDED, GROUNDED]}) as (rt, _):
        await ask(rt, "what does the standalone container need to boot?")
        first = await rt.service.thread_values("console:t")
        await ask(rt, "how do I lock down studio auth?")
        second = await rt.service.thread_values("console:t")
    assert first["kb_searches"] == 2 and first["query_feedback"]
    assert second["kb_searches"] == 1 and second["query_feedback"] == []
    assert second["path"][0] == "start" and second["path"].count("retrieve") == 1
    assert second["llm_calls"] == 4


@pytest.mark.parametrize("bad", ["not json at all", json.dumps({"route": "somewhere"})])
async def test_malformed_structured_output_retried_then_default(settings, bad):
    async with scripted_runtime(settings, {"route": [bad, bad]}) as (rt, model):
        out = await ask(rt, "what does the standalone container need to boot?")
        values = await rt.service.thread_values("console:t")
    assert model.tasks()[:2] == ["route", "route"]  # retried once
    assert values["route"] == "vectorstore"  # then the safe default
    assert "did not parse" not in out.answers[0].text and out.answers[0].kind == "answer"
    assert "That was not valid" in model.calls[1][1][-1].content


async def test_malformed_once_then_valid(settings):
    good = json.dumps({"question": "hello", "route": "direct", "query": "hello"})
    async with scripted_runtime(settings, {"route": ["{oops", good]}) as (rt, _):
        out = await ask(rt, "hello")
    assert out.answers[0].kind == "direct"


async def test_rate_limited_model_is_retried(settings):
    attempts = []

    def flaky(messages):
        attempts.append(1)
        if len(attempts) < 3:
            request = httpx.Request("POST", "http://mistral.local/v1/chat/completions")
            raise httpx.HTTPStatusError("429", request=request, response=httpx.Response(429, request=request))
        return "An answer [1]."

    async with scripted_runtime(settings, {"generate": flaky}) as (rt, _):
        out = await ask(rt, "what does the standalone container need to boot?")
    assert len(attempts) == 3 and out.answers[0].kind == "answer"


async def test_model_down_ends_in_apology_not_traceback(settings):
    def down(messages):
        request = httpx.Request("POST", "http://mistral.local/v1/chat/completions")
        raise httpx.HTTPStatusError("503", request=request, response=httpx.Response(503, request=request))

    async with scripted_runtime(settings, {"generate": down}) as (rt, _):
        out = await ask(rt, "what does the standalone container need to boot?")
        again = await ask(rt, "what does the standalone container need to boot?")  # thread still usable
    assert out.answers[0].kind == "apology" and out.statuses[-1] == Status.APOLOGY
    assert again.answers and again.statuses[-1] == Status.APOLOGY


async def test_empty_message_gets_a_short_reply_without_llm(settings):
    async with scripted_runtime(settings) as (rt, model):
        out = await ask(rt, "   ")
    assert out.notices and "question" in out.notices[0].lower()
    assert model.calls == [] and not out.answers


async def test_repeated_delivery_answered_once_even_after_restart(settings):
    async with scripted_runtime(settings) as (rt, _):
        out1 = await ask(rt, "what does the standalone container need to boot?", mid="m-1")
        out2 = await ask(rt, "what does the standalone container need to boot?", mid="m-1")
    async with scripted_runtime(settings) as (rt, model):
        out3 = await ask(rt, "what does the standalone container need to boot?", mid="m-1")
    assert len(out1.answers) == 1 and not out2.answers and not out3.answers
    assert model.calls == []


class RoutingTogether:
    """A ``route`` reply that records which questions are being routed at the same moment.
    Each call waits (up to ``patience`` seconds) until another question is being routed
    too, so runs that do run concurrently are seen overlapping even on a loaded machine,
    and runs that are serialized are seen alone."""

    def __init__(self, patience: float = 3.0) -> None:
        self.patience = patience
        self.in_flight: list[str] = []
        self.together: list[tuple[str, ...]] = []  # the questions in flight, at every arrival
        self._lock = threading.Lock()
        self._two = threading.Event()

    def __call__(self, messages) -> str:
        question = str(messages[-1].content).rsplit("New message:", 1)[-1].strip()
        with self._lock:
            self.in_flight.append(question)
            self.together.append(tuple(self.in_flight))
            if len(self.in_flight) >= 2:
                self._two.set()
        self._two.wait(self.patience)
        with self._lock:
            self.in_flight.remove(question)
        return ScriptedChatModel.default_reply("route", messages)


async def test_one_thread_in_order_other_threads_concurrently(settings):
    routing = RoutingTogether()
    async with scripted_runtime(settings, {"route": routing}) as (rt, _):
        outs = [ConsoleResponder("t", show_status=False) for _ in range(2)]
        others = [ConsoleResponder(f"o{i}", show_status=False) for i in range(5)]
        await asyncio.gather(
            rt.service.handle(msg("first: container requirements?"), outs[0]),
            rt.service.handle(msg("second: studio auth?"), outs[1]),
            *[rt.service.handle(msg(f"memory trimming {i}?", f"o{i}"), o) for i, o in enumerate(others)],
        )
        values = await rt.service.thread_values("console:t")
    humans = [m.content for m in values["messages"] if m.type == "human"]
    assert humans == ["first: container requirements?", "second: studio auth?"]
    assert [m.type for m in values["messages"]] == ["human", "ai", "human", "ai"]
    assert all(len(o.answers) == 1 for o in outs + others)
    # other threads ran at the same time: questions of different threads were routed together
    assert max(len(set(t)) for t in routing.together) >= 2, routing.together
    # the thread's own questions never did: the second waited for the first to finish
    assert not any({"first: container requirements?", "second: studio auth?"} <= set(t) for t in routing.together)


async def test_checkpoints_stay_bounded_in_long_threads(tmp_path):
    path = write_config(tmp_path, "")
    path.write_text(path.read_text().replace("[service]", "[service]\nkeep_checkpoints_per_thread = 5"))
    settings = load_settings(path)
    import sqlite3

    async with scripted_runtime(settings) as (rt, _):
        for i in range(6):
            await ask(rt, f"question {i} about the container?")
        values = await rt.service.thread_values("console:t")
    db = sqlite3.connect(settings.path(settings.service.checkpoint_db))
    (count,) = db.execute("SELECT COUNT(*) FROM checkpoints WHERE thread_id = 'console:t'").fetchone()
    assert count <= 5
    assert len(values["messages"]) == 12  # the history itself is intact


async def test_each_thread_keeps_one_checkpoint_holding_what_was_posted(settings):
    """The default policy (one checkpoint kept, saved when the run ends): a new thread's
    first turn leaves exactly one, follow-ups prune the older one, and what was posted is
    what the saved state holds (the answer is read from the run's own stream, not the file)."""
    import sqlite3

    def count(thread: str) -> int:
        with sqlite3.connect(settings.path(settings.service.checkpoint_db)) as db:
            return db.execute(
                "SELECT COUNT(*) FROM checkpoints WHERE thread_id = ?", (f"console:{thread}",)
            ).fetchone()[0]

    async with scripted_runtime(settings) as (rt, _):
        for turn in range(3):
            out = await ask(rt, f"question {turn} about the container?")
            values = await rt.service.thread_values("console:t")
            [answer] = out.answers
            assert values["messages"][-1].content == answer.text and values["outcome"] == answer.kind == "answer"
            assert [s.location for s in answer.sources] == [s["location"] for s in values["sources"]]
            assert count("t") == 1, turn
        await ask(rt, "another thread's question about the container?", thread="u")
        assert count("u") == 1 and count("t") == 1
        assert len((await rt.service.thread_values("console:t"))["messages"]) == 6


async def test_expert_chatter_in_a_paused_thread_does_not_become_the_answer(settings):
    async with scripted_runtime(settings, {"grade_documents": NONE_RELEVANT}) as (rt, _):
        original = await paused(rt)
        rt.service.register_platform("console", lambda ref: original)
        reply = await ask(rt, "hmm, let me check with the infra team", author="bob")
        assert await rt.service.pending_interrupt("console:t") is not None
    assert not original.answers
    assert "answer:" in reply.notices[0] and "dismiss" in reply.notices[0]


def test_citations_renumbered_to_match_listed_sources():
    from graphs.citations import cite_sources

    docs = [
        {"location": "slack.md", "title": "Slack > Create"},
        {"location": "slack.md", "title": "Slack > Run"},
        {"location": "discord.md", "title": "Discord"},
    ]
    text, sources = cite_sources("Create the app [1]. Run it [2]. Discord too [3]. Bogus [9].", docs)
    assert text == "Create the app [1]. Run it [1]. Discord too [2]. Bogus ."
    assert [s["location"] for s in sources] == ["slack.md", "discord.md"]
    text, sources = cite_sources("No citations.", docs)
    assert text == "No citations." and [s["location"] for s in sources] == ["slack.md", "discord.md"]
    # a list naming two chunks of one file names that file once, in the list's own form
    for answer, expected in [
        ("More in [3], [1], [2].", "More in [1], [2]."),
        ("More in [1], [2].", "More in [1]."),
        ("See [2],[1] and [3, 1].", "See [1] and [2][1]."),
    ]:
        assert cite_sources(answer, docs)[0] == expected


async def test_lexical_graders_for_a_small_model(tmp_path):
    """graders = "lexical" (the offline default): no grading calls; an ungrounded draft is
    replaced by the documents' own sentences; greetings go direct whatever the router says."""
    path = write_config(tmp_path)
    path.write_text(path.read_text() + '\n[graph]\ngraders = "lexical"\n')
    settings = load_settings(path)
    script = {
        "generate": "Install kubernetes and run helm upgrade on port 8080 [1].",
        "route": json.dumps({"question": "q", "route": "direct", "query": "q"}),
    }
    async with scripted_runtime(settings, script) as (rt, model):
        out = await ask(rt, "what does the standalone container need to boot?")
        values = await rt.service.thread_values("console:t")
        hello = await ask(rt, "hi there!", thread="g")
    assert values["route"] == "vectorstore"  # "direct" is not trusted for a real question
    assert model.tasks()[:2] == ["route", "generate"] and "grade_documents" not in model.tasks()
    assert values["path"].count("generate") == 2 and values["llm_calls"] == 2
    [answer] = out.answers
    assert "REDIS_URI and DATABASE_URI" in answer.text and "kubernetes" not in answer.text
    assert answer.sources[0].location == "deploy/container.md"
    assert hello.answers[0].kind == "direct"


def test_grouped_citations_and_code_are_handled():
    from graphs.citations import cite_sources

    docs = [{"location": "a.md"}, {"location": "b.md"}, {"location": "c.md"}]
    text, sources = cite_sources("Use X [3]. Also Y [1, 2]. Code: `xs[1]` and\n```\narr[0]\n```", docs)
    assert text == "Use X [1]. Also Y [2][3]. Code: `xs[1]` and\n```\narr[0]\n```"
    assert [s["location"] for s in sources] == ["c.md", "a.md", "b.md"]


async def test_help_request_says_why_the_budget_ran_out(settings):
    async with scripted_runtime(settings, {"grade_answer": HALLUCINATED}) as (rt, _):
        out = await ask(rt, "what does the standalone container need to boot?")
    [request] = out.help_requests
    assert request.reason.startswith("drafts were not supported by the sources")
    assert "knowledge base (2 searches)" in request.reason and "web search is not configured" in request.reason


def _functions_in(obj: object, depth: int = 0) -> list:
    """The plain functions inside an executor work item (through partials and closures)."""
    if depth > 6:
        return []
    found = []
    if isinstance(obj, functools.partial):
        found += _functions_in(obj.func, depth + 1)
        for arg in obj.args:
            found += _functions_in(arg, depth + 1)
    elif inspect.isfunction(obj):
        found.append(obj)
        for cell in obj.__closure__ or ():
            found += _functions_in(cell.cell_contents, depth + 1)
    elif inspect.ismethod(obj):
        found += _functions_in(obj.__func__, depth + 1)
    return found


async def test_no_step_of_the_graph_waits_for_a_thread(settings):
    """LangGraph runs a plain (non-async) node or path function on the default executor's
    threads in an async run: a thread hop per edge, which under load is CPU and latency for
    nothing. Every step and path function of the graph is a coroutine; only the
    knowledge search goes to a thread (by design: SQLite and numpy off the event loop)."""
    submitted: list[object] = []

    class Recording(concurrent.futures.ThreadPoolExecutor):
        def submit(self, fn, /, *args, **kwargs):
            submitted.append(functools.partial(fn, *args))
            return super().submit(fn, *args, **kwargs)

    asyncio.get_running_loop().set_default_executor(Recording(max_workers=4))
    async with scripted_runtime(settings, {"grade_answer": [NOT_USEFUL, GROUNDED]}) as (rt, _model):
        await ask(rt, "what does the standalone container need to boot?")
        values = await rt.service.thread_values("console:t")
    # the path crosses every kind of conditional edge: after route, grading, the answer check
    assert values["path"].count("grade_answer") == 2 and values["path"].count("grade_documents") == 2
    modules = {f.__module__ for item in submitted for f in _functions_in(item)}
    assert "graphs.adaptive_rag" not in modules and "graphs.nodes" not in modules
    assert any(f.__qualname__ == "KnowledgeBase.search" for item in submitted for f in _functions_in(item))
