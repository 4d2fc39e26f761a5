"""Graph-level failures: web queries over the search API's limit, a web search that finds
nothing (the knowledge base is tried before a human), and budgets against LangGraph's
recursion limit (checked on the real graph)."""

from __future__ import annotations

import json
import re

import pytest
from langchain_core.messages import HumanMessage
from langgraph.errors import GraphRecursionError

from bot.config import Secrets, load_settings
from bot.platforms.console import ConsoleResponder
from graphs.adaptive_rag import worst_case_steps
from graphs.web import MAX_QUERY_CHARACTERS
from tests.conftest import FakeTavily, scripted_runtime, serve, write_config

LOG_QUESTION = "Why does the worker crash on start? Here is the log:\n" + "\n".join(
    f"2026-11-29 10:{i % 60:02d}:00 ERROR worker.py:{i} RedisConnectionError: "
    f"Error 111 connecting to cache:6379. Connection refused."
    for i in range(28)
)
BLOB_QUESTION = "error: " + "QUJDRA" * 600  # one 3,600-character word
NONE_RELEVANT = json.dumps({"documents": [{"id": 1, "relevant": False}], "feedback": "nothing relevant"})
HALLUCINATED = json.dumps({"grounded": False, "useful": True, "feedback": "unsupported"})


class StrictTavily(FakeTavily):
    """Refuses queries over 400 characters, as the real API does (HTTP 400)."""

    async def search(self, request):
        from aiohttp import web

        body = await request.json()
        if len(body.get("query", "")) > MAX_QUERY_CHARACTERS:
            self.requests.append(body)
            return web.json_response(
                {"detail": {"error": "Query is too long. Max query length is 400 characters."}}, status=400
            )
        request._read_bytes = json.dumps(body).encode()  # let the parent read it again
        return await super().search(request)


async def web_runtime(tmp_path, tavily, script, sections=""):
    settings = load_settings(write_config(tmp_path, extra=f'\n[web]\napi_base_url = "{tavily.base_url}"\n{sections}'))
    return scripted_runtime(settings, script, secrets=Secrets(tavily_api_key="tvly-test"))


def route_to_web(query: str | None):
    def reply(messages):
        q = str(messages[-1].content).rsplit("New message:", 1)[-1].strip()
        return json.dumps({"question": q, "route": "websearch", "query": q if query is None else query})

    return reply


@pytest.fixture
async def strict_tavily():
    fake = StrictTavily()
    async with serve({"/search": fake.search}) as base_url:
        fake.base_url = base_url
        yield fake


# ---- web queries -------------------------------------------------------------------------
@pytest.mark.parametrize(
    "question,route_reply",
    [
        (LOG_QUESTION, route_to_web(None)),  # the model copies the pasted log into the query
        (LOG_QUESTION, route_to_web("")),  # no query: the (long) question is searched
        (LOG_QUESTION, "not json at all"),  # nothing parses: the raw message is the query
        (BLOB_QUESTION, route_to_web(None)),  # no word boundary to cut at
        ("short question?", route_to_web("keywords " * 80)),  # a long query for a short question
    ],
    ids=["log-copied", "empty-query", "defaults", "one-long-word", "long-query"],
)
async def test_every_web_query_fits_the_search_api(tmp_path, strict_tavily, question, route_reply):
    script = {"route": [route_reply]}
    if route_reply == "not json at all":  # the knowledge base finds nothing, no rewrite parses: the web gets
        script.update(grade_documents=[NONE_RELEVANT], rewrite=["not json either"])  # the raw message
    async with await web_runtime(tmp_path, strict_tavily, script) as (rt, model):
        out = ConsoleResponder("t", show_status=False)
        await rt.service.ask("console:t", question, out)
        values = await rt.service.thread_values("console:t")
    assert strict_tavily.requests, "the web was searched"
    for body in strict_tavily.requests:
        query = body["query"]
        assert 0 < len(query) <= MAX_QUERY_CHARACTERS
        assert query == query.strip() and "\n" not in query
    if question == LOG_QUESTION:
        assert strict_tavily.requests[0]["query"] == "Why does the worker crash on start?"
    assert all(body["query"] in values["queries"] for body in strict_tavily.requests)  # the help request shows them


async def test_a_rewritten_web_query_is_clipped_too(tmp_path, strict_tavily):
    long_rewrite = json.dumps({"query": "redis connection refused worker " * 30})
    script = {"grade_documents": [NONE_RELEVANT, NONE_RELEVANT, NONE_RELEVANT], "rewrite": [long_rewrite]}
    async with await web_runtime(tmp_path, strict_tavily, script) as (rt, model):
        out = ConsoleResponder("t", show_status=False)
        await rt.service.ask("console:t", "why is the worker refused by redis?", out)
        values = await rt.service.thread_values("console:t")
    assert "rewrite_web" in values["path"]
    [body] = strict_tavily.requests
    assert len(body["query"]) <= MAX_QUERY_CHARACTERS and body["query"].startswith("redis connection refused")
    assert not body["query"].endswith(" ") and body["query"].split()[-1] in {"redis", "connection", "refused", "worker"}


# ---- web finds nothing: the knowledge base is tried ---------------------------------------
def web_docs_irrelevant(messages):
    """Grades web results (URLs) irrelevant and knowledge-base chunks relevant."""
    last = str(messages[-1].content)
    ids = [int(i) for i in re.findall(r"^\[(\d+)\]", last, re.M)]
    web = "https://" in last
    return json.dumps({"documents": [{"id": i, "relevant": not web, "facts": "REDIS_URI"} for i in ids]})


@pytest.mark.parametrize("web_failure", ["no results", "HTTP 500", "irrelevant results"])
async def test_web_that_finds_nothing_falls_back_to_the_knowledge_base(tmp_path, tavily, web_failure):
    if web_failure == "no results":
        tavily.results = []
    elif web_failure == "HTTP 500":
        tavily.status = 500
    script = {"route": [route_to_web("container boot requirements")], "grade_documents": [web_docs_irrelevant]}
    async with await web_runtime(tmp_path, tavily, script) as (rt, model):
        out = ConsoleResponder("t", show_status=False)
        await rt.service.ask("console:t", "what does the standalone container need to boot?", out)
        values = await rt.service.thread_values("console:t")
    assert values["path"][:5] == ["start", "route", "web_search", "grade_documents", "retrieve"]
    assert values["kb_searches"] == 1 and values["web_searches"] == 1
    [answer] = out.answers
    assert answer.kind == "answer" and answer.sources[0].location == "deploy/container.md"
    assert not out.help_requests


async def test_help_request_after_web_and_knowledge_base_says_both_were_searched(tmp_path, tavily):
    tavily.results = []
    script = {"route": [route_to_web("container boot requirements")], "grade_documents": [NONE_RELEVANT]}
    async with await web_runtime(tmp_path, tavily, script) as (rt, model):
        out = ConsoleResponder("t", show_status=False)
        await rt.service.ask("console:t", "what does the standalone container need to boot?", out)
        values = await rt.service.thread_values("console:t")
    [request] = out.help_requests
    assert "0 searches" not in request.reason
    assert "the knowledge base (2 searches)" in request.reason and "the web (1 searches)" in request.reason
    assert values["path"].count("retrieve") == 2 and values["path"].count("web_search") == 1


# ---- budgets and the recursion limit ------------------------------------------------------
@pytest.mark.parametrize("generations,kb,web", [(1, 1, 0), (2, 2, 1), (3, 2, 2), (1, 3, 1)])
async def test_worst_case_steps_is_the_least_recursion_limit_that_works(tmp_path, tavily, generations, kb, web):
    """Every draft ungrounded, every search used, no human: the longest run there is."""
    sections = (
        f"[graph]\nmax_generations = {generations}\nmax_kb_searches = {kb}\nmax_web_searches = {web}\n"
        "human_review = false\nrecursion_limit = 1000"
    )
    async with await web_runtime(tmp_path, tavily, {"grade_answer": [HALLUCINATED]}, sections) as (rt, model):
        steps = worst_case_steps(generations, kb, web)
        ok = await rt.graph.ainvoke(
            {"messages": [HumanMessage("what does the container need?")]},
            {"recursion_limit": steps, "configurable": {"thread_id": "enough"}},
        )
        assert ok["outcome"] == "apology" and ok["path"].count("generate") == generations * (kb + web)
        with pytest.raises(GraphRecursionError):
            await rt.graph.ainvoke(
                {"messages": [HumanMessage("what does the container need?")]},
                {"recursion_limit": steps - 1, "configurable": {"thread_id": "short"}},
            )
