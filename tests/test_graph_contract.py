"""The typed contract between the graph and the runtime (graphs/state.py): the progress
phases a real graph run emits on LangGraph's custom stream, in order; the help request's
interrupt payload and the resume value; how the answer was found (``answer_route``);
and the graders as a strategy injected through the graph's dependencies."""

from __future__ import annotations

import json
import uuid

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from bot.platforms.console import ConsoleResponder
from bot.protocol import IncomingMessage
from bot.runtime import graph_config
from graphs.adaptive_rag import build_graph
from graphs.composers import Routing
from graphs.models import ModelCaller
from graphs.nodes import GraphDeps
from graphs.schemas import AnswerGrade, DocGrade, DocGrades, RouteDecision
from graphs.state import ContractError, Phase, help_payload, resume_value
from tests.conftest import scripted_runtime

NONE_RELEVANT = json.dumps({"documents": [{"id": 1, "relevant": False, "facts": ""}], "feedback": "nothing"})
QUESTION = "what does the standalone container need to boot?"


def cfg(thread: str) -> dict:
    return {"configurable": {"thread_id": thread}}


async def phases(graph, graph_input, config) -> list[Phase]:
    """The progress events of one run, as the runtime reads them."""
    return [event["phase"] async for event in graph.astream(graph_input, config, stream_mode="custom")]


async def test_a_knowledge_base_answer_emits_searching_then_writing(settings):
    async with scripted_runtime(settings) as (rt, _):
        got = await phases(rt.graph, {"messages": [HumanMessage(QUESTION)]}, cfg("kb"))
        values = (await rt.graph.aget_state(cfg("kb"))).values
    assert got == [Phase.SEARCHING, Phase.WRITING]
    assert all(isinstance(p, Phase) for p in got)
    assert (values["answer_route"], values["drafts"]) == ("kb", 1)


async def test_a_direct_answer_emits_writing_only(settings):
    route = json.dumps({"question": "hi", "route": "direct", "query": "hi"})
    async with scripted_runtime(settings, {"route": route, "direct": "Hello!"}) as (rt, _):
        got = await phases(rt.graph, {"messages": [HumanMessage("hi there")]}, cfg("d"))
        values = (await rt.graph.aget_state(cfg("d"))).values
    assert got == [Phase.WRITING]
    assert (values["answer_route"], values["drafts"]) == ("direct", 0)


async def test_a_help_request_emits_every_search_then_pauses_with_a_help_payload(settings):
    async with scripted_runtime(settings, {"grade_documents": NONE_RELEVANT}) as (rt, _):
        got = await phases(rt.graph, {"messages": [HumanMessage(QUESTION)]}, cfg("h"))
        state = await rt.graph.aget_state(cfg("h"))
        # retrieve, then rewrite_kb + retrieve: three starts of the same phase (the runtime shows it once)
        assert got == [Phase.SEARCHING, Phase.SEARCHING, Phase.SEARCHING]
        [intr] = state.interrupts
        payload = help_payload(intr.value)
        assert set(payload) == {"question", "reason", "attempts"}
        assert payload["question"] and len(payload["attempts"]) == 2
        assert "nothing relevant found" in payload["reason"]

        # the resume value is a ResumeValue: an expert's answer finishes the turn, writing nothing new
        after = await phases(
            rt.graph,
            Command(resume=resume_value({"action": "answer", "text": "It needs PORT.", "by": "Erik"})),
            cfg("h"),
        )
        values = (await rt.graph.aget_state(cfg("h"))).values
    assert after == []
    assert (values["outcome"], values["generation"], values["answered_by"]) == ("human", "It needs PORT.", "Erik")


async def test_a_resume_value_of_the_wrong_shape_is_a_clear_error_and_the_request_stays_open(settings):
    async with scripted_runtime(settings, {"grade_documents": NONE_RELEVANT}) as (rt, _):
        await rt.graph.ainvoke({"messages": [HumanMessage(QUESTION)]}, cfg("w"))
        [before] = (await rt.graph.aget_state(cfg("w"))).interrupts
        with pytest.raises(ContractError, match=r"ResumeValue.*action"):
            await rt.graph.ainvoke(Command(resume="the answer, as a bare string"), cfg("w"))
        [still] = (await rt.graph.aget_state(cfg("w"))).interrupts
    assert still.id == before.id


@pytest.mark.parametrize(
    "value, problem",
    [
        ({"action": "maybe", "text": "", "by": "a"}, "action"),
        ({"action": "answer", "text": "x"}, "by"),
        ({"action": "answer", "text": 42, "by": "a"}, "text"),
        (["answer", "x", "a"], "ResumeValue"),
    ],
)
def test_resume_value_names_what_is_wrong(value, problem):
    with pytest.raises(ContractError, match=problem):
        resume_value(value)


def test_help_payload_rejects_a_payload_without_its_fields():
    with pytest.raises(ContractError, match="HelpPayload.*reason"):
        help_payload({"question": "q", "attempts": []})


async def test_the_posted_answer_carries_the_route_not_the_node_path(settings):
    async with scripted_runtime(settings) as (rt, _):
        out = ConsoleResponder("r", show_status=False)
        await rt.service.handle(
            IncomingMessage(
                platform="console", thread_key="console:r", message_id=uuid.uuid4().hex, author_id="ana", text=QUESTION
            ),
            out,
        )
    [answer] = out.answers
    assert (answer.route, answer.drafts, answer.route_note) == ("kb", 1, "knowledge base")
    assert answer.path[:3] == ["start", "route", "retrieve"]  # for the console and the logs only


class RejectEverything:
    """A grader strategy that finds nothing relevant, without a model call."""

    facts_in_prompt = False

    def __init__(self) -> None:
        self.graded: list[int] = []

    async def grade_documents(self, state, retrieved):
        self.graded.append(len(retrieved))
        return DocGrades(documents=[DocGrade(id=i, relevant=False) for i in range(1, len(retrieved) + 1)]), 0

    async def grade_answer(self, state):
        return AnswerGrade(grounded=True, useful=True), 0

    def check_route(self, message, route):
        return route

    def redraft(self, state):
        return None


async def test_graders_are_a_strategy_injected_through_the_graph_dependencies(settings):
    graders = RejectEverything()
    async with scripted_runtime(settings) as (rt, model):
        deps = GraphDeps(
            caller=ModelCaller(model),
            knowledge=rt.knowledge,
            web=None,
            config=graph_config(settings, model),
            graders=graders,
        )
        graph = build_graph(deps, checkpointer=InMemorySaver())
        await graph.ainvoke({"messages": [HumanMessage(QUESTION)]}, cfg("g"))
        state = await graph.aget_state(cfg("g"))
    assert len(graders.graded) == 2 and all(graders.graded)  # both knowledge-base searches went to it
    assert "grade_documents" not in model.tasks()  # the chat model never graded
    assert state.interrupts  # nothing relevant: the experts are asked


class GreetEveryone:
    """A composer that answers everything directly with a fixed line."""

    async def route(self, state):
        return Routing(RouteDecision(question="hello", route="direct", query="hello"), 0, False)

    async def direct(self, state):
        return "Hello from the injected composer.", 0

    async def rewrite(self, state, target):  # pragma: no cover - never reached on the direct route
        raise AssertionError("not on the direct route")

    search = generate = rewrite


async def test_the_composer_is_a_strategy_injected_through_the_graph_dependencies(settings):
    async with scripted_runtime(settings) as (rt, model):
        deps = GraphDeps(
            caller=ModelCaller(model),
            knowledge=rt.knowledge,
            web=None,
            config=graph_config(settings, model),
            composer=GreetEveryone(),
        )
        graph = build_graph(deps, checkpointer=InMemorySaver())
        got = await phases(graph, {"messages": [HumanMessage(QUESTION)]}, cfg("c"))
        values = (await graph.aget_state(cfg("c"))).values
    assert got == [Phase.WRITING]
    assert (values["outcome"], values["generation"]) == ("direct", "Hello from the injected composer.")
    assert model.tasks() == []  # the chat model was never called
