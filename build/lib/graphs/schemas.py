"""The structured outputs the chat model is asked for (one pydantic model per task;
:meth:`graphs.models.ModelCaller.structured` parses and validates them)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class RouteDecision(BaseModel):
    """``route``: the standalone question, where to look, and the first search query."""

    question: str = Field(description="standalone question")
    route: Literal["vectorstore", "websearch", "direct"]
    query: str = Field(description="search keywords")


class RewrittenQuery(BaseModel):
    """``rewrite``: a new search query after query feedback."""

    query: str


class DocGrade(BaseModel):
    """One retrieved document's grade: ``id`` is its 1-based number in the prompt."""

    id: int
    relevant: bool
    facts: str = ""


class DocGrades(BaseModel):
    """``grade_documents``: every document's grade, and why none helps (``feedback``)."""

    documents: list[DocGrade]
    feedback: str = ""


class AnswerGrade(BaseModel):
    """``grade_answer``: is the draft grounded in the sources, and does it answer?"""

    grounded: bool
    useful: bool
    feedback: str = ""
