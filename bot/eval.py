"""``threadwise eval``: run an eval set (format: README.md, "Evaluation") through the
real graph and measure route accuracy, retrieval recall@1/@5 of the expected source
files, facts found in the answers, LLM calls, input and output tokens (as the provider
counted them) and wall time per question.

Recall is measured on the graph's first knowledge-base search of the question. When the
router sent a kb/followup question elsewhere (so nothing was retrieved), recall is
measured on the same query variants the retrieve node would have used
(:func:`graphs.messages.kb_queries`), so the figure is about the retriever; the routing
error is counted in route accuracy.
"""

from __future__ import annotations

import asyncio
import json
import re
import statistics
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from bot.platforms.console import ConsoleResponder
from bot.protocol import clean_text
from bot.terminal import make_console
from graphs.messages import kb_queries

if TYPE_CHECKING:
    from bot.runtime import Runtime


@dataclass
class EvalRow:
    id: str
    kind: str
    expected_route: str
    route: str
    route_ok: bool
    retrieved: list[str]
    recall_at_1: float | None
    recall_at_5: float | None
    facts_found: float | None
    llm_calls: int
    first_pass: bool
    input_tokens: int
    output_tokens: int
    outcome: str
    seconds: float
    path: list[str] = field(default_factory=list)
    answer: str = ""
    answer_chars: int = 0  # characters of the answer ("" when there is none)
    first_fact_at: int | None = None  # character offset of the earliest expected fact found in the answer
    template_syntax: bool = False  # template syntax ({% %}, {{ }}, shortcodes, MDX imports) outside code


def load_eval(path: str | Path) -> list[dict[str, Any]]:
    """Read a JSONL eval file (one JSON object a line).

    Raises:
        ValueError: naming the line of a bad row ("line 3: not a valid eval row: ..."), or a file
            without a row.

    Questions and history turns are cleaned like chat input (:func:`bot.protocol.clean_text`:
    lone surrogates, NUL and control characters); bytes that are not UTF-8 become U+FFFD.
    """
    rows = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8", errors="replace").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            if not isinstance(row, dict):
                raise ValueError(f"a row is a JSON object, not {type(row).__name__} ({line.strip()[:40]})")
            if not isinstance(row.get("question"), str) or row.get("expected_route") not in (
                "vectorstore",
                "websearch",
                "direct",
            ):
                raise ValueError("needs a question and an expected_route of vectorstore, websearch or direct")
            for key in ("sources", "answer_facts"):
                if not all(isinstance(x, str) for x in row.get(key) or []) or isinstance(row.get(key), str):
                    raise ValueError(f"{key} must be a list of strings")
            for turn in row.get("history") or []:
                if (
                    not isinstance(turn, dict)
                    or turn.get("role") not in ("user", "assistant")
                    or not isinstance(turn.get("content"), str)
                ):
                    raise ValueError("history turns need a role (user or assistant) and a content")
            row["question"] = clean_text(row["question"])
            for turn in row.get("history") or []:
                turn["content"] = clean_text(turn["content"])
        except (json.JSONDecodeError, ValueError, AttributeError, TypeError) as exc:
            raise ValueError(f"line {n}: not a valid eval row: {exc}") from None
        rows.append(row)
    if not rows:
        raise ValueError("no question in the file (one JSON object a line: question, expected_route, ...)")
    return rows


TEMPLATE_SYNTAX = re.compile(
    r"\{%.*?%\}|\{\{.*?\}\}|\{#.*?#\}|^\s*(?:import|export)\s.*\bfrom\b|<[A-Z]\w*[\s/>]|\{/\*", re.S | re.M
)
"""Template syntax a reader should never see in an answer's prose (code may show it)."""


def first_fact_position(answer: str, facts: list[str]) -> int | None:
    """Offset (characters, case-insensitive) of the earliest of ``facts`` in ``answer``, or
    None when none is there."""
    low = answer.lower()
    found = [low.find(f.lower()) for f in facts if f and f.lower() in low]
    return min(found) if found else None


def prose_of(markdown: str) -> str:
    """``markdown`` without its fenced code blocks (a fence closes on a line of the same
    character, at least as long; an unclosed one runs to the end) and inline code spans."""
    out: list[str] = []
    fence = ""
    for line in markdown.split("\n"):
        m = re.match(r"^\s*(`{3,}|~{3,})(.*)$", line)
        if not fence and m:
            fence = m.group(1)
        elif fence and m and m.group(1).startswith(fence) and set(m.group(1)) == {fence[0]} and not m.group(2).strip():
            fence = ""
        elif not fence:
            out.append(line)
    return re.sub(r"`+[^`\n]*`+", "", "\n".join(out))


def has_template_syntax(answer: str) -> bool:
    """``answer`` shows template syntax outside code blocks and inline code."""
    return bool(TEMPLATE_SYNTAX.search(prose_of(answer)))


def _hit(retrieved: list[str], expected: list[str], k: int) -> float | None:
    if not expected:
        return None
    return 1.0 if any(loc in expected for loc in retrieved[:k]) else 0.0


async def run_eval(
    runtime: Runtime, rows: list[dict[str, Any]], console: Console | None = None, show_answers: bool = False
) -> dict[str, Any]:
    """Run every row on a fresh thread; returns ``{"rows": [...], "totals": {...}}`` (each
    row with its whole answer). ``show_answers``: print each question and its whole answer
    to ``console`` as it comes."""
    console = console or make_console()
    service, kb = runtime.service, runtime.knowledge
    out_rows: list[EvalRow] = []
    quiet = make_console(quiet=True)
    for i, row in enumerate(rows, start=1):
        key = f"eval:{row.get('id', i)}:{uuid.uuid4().hex[:8]}"
        await service.seed_history(key, row.get("history", []))
        t0 = time.perf_counter()
        result = await service.ask(
            key, row["question"], ConsoleResponder(key, quiet, show_status=False, show_answers=False), platform="eval"
        )
        seconds = time.perf_counter() - t0
        values = result.values if result else {}
        retrieved = list(values.get("first_retrieval") or [])
        expected = list(row.get("sources") or [])
        if not retrieved and row.get("kind") in ("kb", "followup") and kb.is_built():
            state = await service.thread_values(key)
            docs = await asyncio.to_thread(kb.search, kb_queries(state), runtime.settings.knowledge.k)
            retrieved = [d["location"] for d in docs]
        answer = result.answer.text if result and result.answer else ""
        facts = row.get("answer_facts") or []
        path = list(values.get("path", []))
        outcome = values.get("outcome", "") if result and result.answer else ("help_request" if result else "none")
        # first pass: answered from one knowledge-base search (redrafts allowed), no web, no human
        first_pass = (
            path.count("retrieve") == 1
            and "web_search" not in path
            and "human_review" not in path
            and outcome == "answer"
        )
        out_rows.append(
            EvalRow(
                id=str(row.get("id", i)),
                kind=row.get("kind", ""),
                expected_route=row["expected_route"],
                route=values.get("route", ""),
                route_ok=values.get("route", "") == row["expected_route"],
                retrieved=retrieved[:5],
                recall_at_1=_hit(retrieved, expected, 1) if row.get("kind") in ("kb", "followup") else None,
                recall_at_5=_hit(retrieved, expected, 5) if row.get("kind") in ("kb", "followup") else None,
                facts_found=(sum(f.lower() in answer.lower() for f in facts) / len(facts)) if facts else None,
                llm_calls=int(values.get("llm_calls", 0)),
                first_pass=first_pass,
                outcome=outcome,
                input_tokens=int(values.get("input_tokens", 0)),
                output_tokens=int(values.get("output_tokens", 0)),
                seconds=round(seconds, 2),
                path=path,
                answer=answer,
                answer_chars=len(answer),
                first_fact_at=first_fact_position(answer, facts),
                template_syntax=has_template_syntax(answer),
            )
        )
        r = out_rows[-1]
        route_ok = "ok" if r.route_ok else "expected " + r.expected_route
        console.print(
            f"[{i}/{len(rows)}] {r.id} route={r.route or '-'} ({route_ok}) "
            f"r@5={r.recall_at_5} calls={r.llm_calls} tokens={r.input_tokens}+{r.output_tokens} "
            f"{r.seconds:.1f}s",
            highlight=False,
        )
        if show_answers:
            console.print(
                f"Q: {row['question']}\n{r.outcome}: {answer or '(no answer)'}\n", markup=False, highlight=False
            )
    return {"rows": [asdict(r) for r in out_rows], "totals": totals(out_rows)}


def _mean(xs: list[float | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return round(sum(vals) / len(vals), 3) if vals else None


def totals(rows: list[EvalRow]) -> dict[str, Any]:
    """Aggregate figures; ``median_llm_calls_first_pass`` is over kb questions answered on
    the first pass (one knowledge-base search, no web search, no human)."""
    first = [r.llm_calls for r in rows if r.first_pass and r.expected_route == "vectorstore"]
    kb_rows = [r for r in rows if r.kind in ("kb", "followup")]
    answered = [r for r in kb_rows if r.outcome == "answer" and r.answer_chars]
    with_fact = [r for r in answered if r.facts_found is not None]
    return {
        "questions": len(rows),
        "route_accuracy": _mean([1.0 if r.route_ok else 0.0 for r in rows]),
        "route_accuracy_kb_followup_direct": _mean(
            [1.0 if r.route_ok else 0.0 for r in rows if r.kind in ("kb", "followup", "direct")]
        ),
        "recall_at_1": _mean([r.recall_at_1 for r in rows]),
        "recall_at_5": _mean([r.recall_at_5 for r in rows]),
        "recall_at_5_followup": _mean([r.recall_at_5 for r in rows if r.kind == "followup"]),
        "facts_found": _mean([r.facts_found for r in rows]),
        "median_llm_calls_first_pass": statistics.median(first) if first else None,
        "first_pass_questions": len(first),
        "median_llm_calls": statistics.median([r.llm_calls for r in rows]) if rows else None,
        "median_seconds": statistics.median([r.seconds for r in rows]) if rows else None,
        # cost per question, to compare models on a team's own questions (docs/choosing-a-model.md)
        "llm_calls_per_question": _mean([float(r.llm_calls) for r in rows]),
        "input_tokens_per_question": _mean([float(r.input_tokens) for r in rows]),
        "output_tokens_per_question": _mean([float(r.output_tokens) for r in rows]),
        "seconds_per_question": _mean([r.seconds for r in rows]),
        "input_tokens": sum(r.input_tokens for r in rows),
        "output_tokens": sum(r.output_tokens for r in rows),
        "outcomes": {o: sum(r.outcome == o for r in rows) for o in sorted({r.outcome for r in rows})},
        # help requests on kb/followup questions whose expected page was in the first search
        "help_requests_page_retrieved": sum(r.outcome == "help_request" and bool(r.recall_at_5) for r in kb_rows),
        "help_requests_web": sum(r.outcome == "help_request" for r in rows if r.kind == "web"),
        # the answer's shape (kb/followup questions answered)
        "answered_kb_followup": len(answered),
        "median_answer_chars": statistics.median([r.answer_chars for r in answered]) if answered else None,
        "median_first_fact_at": statistics.median([r.first_fact_at for r in with_fact if r.first_fact_at is not None])
        if any(r.first_fact_at is not None for r in with_fact)
        else None,
        # share of answered questions with expected facts whose first fact is in the first 300 characters
        "first_fact_within_300": _mean(
            [1.0 if r.first_fact_at is not None and r.first_fact_at < 300 else 0.0 for r in with_fact]
        ),
        "answers_with_template_syntax": sum(r.template_syntax for r in rows),
    }
