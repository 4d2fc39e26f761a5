"""A deterministic chat model for tests and benchmarks: replies scripted per graph task
(the ``TASK:`` line of the system prompt, :mod:`graphs.prompts`). It stands in for a
hosted model in-process; the Mistral-shaped HTTP server (:mod:`tests.fakes.mistral_api`)
is the fake at the network boundary when the real client must be exercised."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import PrivateAttr

from graphs import prompts

Reply = str | Callable[[list[BaseMessage]], str]


class ScriptedChatModel(BaseChatModel):
    """A deterministic chat model for tests: replies are scripted per task.

    ``script`` maps a task name (the ``TASK:`` line of the system prompt, see
    :mod:`graphs.prompts`) to a reply or a list of replies (consumed in order, the last
    one repeats). A reply is a string or a callable ``messages -> str``. Tasks without a
    script get a default that makes the happy path work: route to the knowledge base,
    every document relevant, a cited answer, grounded and useful.

    ``calls`` records ``(task, messages)`` of every call.
    """

    script: dict[str, Any] = {}
    _calls: list[tuple[str, list[BaseMessage]]] = PrivateAttr(default_factory=list)
    _positions: dict[str, int] = PrivateAttr(default_factory=dict)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    @property
    def calls(self) -> list[tuple[str, list[BaseMessage]]]:
        return self._calls

    def tasks(self) -> list[str]:
        """The task names called so far, in order."""
        return [t for t, _ in self._calls]

    @staticmethod
    def default_reply(task: str, messages: list[BaseMessage]) -> str:
        last = str(messages[-1].content) if messages else ""
        if task == "route":
            q = last.rsplit("New message:", 1)[-1].strip()
            return json.dumps({"question": q, "route": "vectorstore", "query": q})
        if task == "rewrite":
            return json.dumps({"query": "rewritten query"})
        if task == "grade_documents":
            ids = [int(i) for i in re.findall(r"^\[(\d+)\]", last, re.M)]
            return json.dumps(
                {"documents": [{"id": i, "relevant": True, "facts": "relevant facts"} for i in ids], "feedback": ""}
            )
        if task == "generate":
            return "Here is the answer from the knowledge base [1]."
        if task == "grade_answer":
            return json.dumps({"grounded": True, "useful": True, "feedback": ""})
        if task == "direct":
            return "Hello! Ask me anything about the knowledge base."
        return "ok"

    def _next(self, task: str, messages: list[BaseMessage]) -> str:
        entry: Reply | list[Reply] | None = self.script.get(task)
        if entry is None:
            return self.default_reply(task, messages)
        if isinstance(entry, list):
            pos = self._positions.get(task, 0)
            self._positions[task] = pos + 1
            entry = entry[min(pos, len(entry) - 1)]
        return entry(messages) if callable(entry) else str(entry)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        system = next((str(m.content) for m in messages if isinstance(m, SystemMessage)), "")
        task = prompts.task_of(system)
        self._calls.append((task, list(messages)))
        reply = self._next(task, messages)
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=reply))])
