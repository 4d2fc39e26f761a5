"""``threadwise eval FILE``: answer an eval set (JSONL) and report recall, facts and outcomes."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from rich.table import Table

from bot.cli.output import out
from bot.cli.session import with_runtime
from bot.config import Settings

if TYPE_CHECKING:
    from bot.runtime import Runtime


def add_parsers(
    sub: argparse._SubParsersAction, common: argparse.ArgumentParser, source: argparse.ArgumentParser
) -> None:
    """Add ``eval`` to the command parser ``sub``."""
    e = sub.add_parser("eval", parents=[common, source], help="run an eval set (JSONL)")
    e.add_argument("file")
    e.add_argument("--json", metavar="PATH", help="write per-question rows and totals as JSON")
    e.add_argument("--limit", type=int, default=0, help="only the first N questions")
    e.add_argument("--answers", action="store_true", help="print each question and its whole answer as it comes")
    e.set_defaults(handler=cmd_eval)


async def cmd_eval(args: argparse.Namespace, settings: Settings) -> int:
    """Run ``args.file``'s questions and print the table (and ``--json`` the report); exit
    code 2 when the file cannot be read."""
    from bot.eval import load_eval, run_eval  # the graph and model libraries load only here

    try:
        rows = load_eval(args.file)
    except FileNotFoundError:
        out.err.print(f"threadwise eval: no such file: {args.file}", style="red", markup=False)
        return 2
    except (OSError, ValueError) as exc:
        out.err.print(f"threadwise eval: {args.file}: {exc}", style="red", markup=False)
        return 2
    if args.limit:
        rows = rows[: args.limit]

    async def body(rt: Runtime) -> int:
        report = await run_eval(rt, rows, out.err, show_answers=args.answers)
        t = report["totals"]
        table = Table(title=f"eval: {args.file} ({t['questions']} questions)")
        for col in (
            "id",
            "kind",
            "route",
            "r@1",
            "r@5",
            "facts",
            "chars",
            "1st fact",
            "calls",
            "tokens in/out",
            "outcome",
            "s",
        ):
            table.add_column(col)
        for r in report["rows"]:
            table.add_row(
                r["id"],
                r["kind"],
                r["route"] + ("" if r["route_ok"] else f" (exp {r['expected_route']})"),
                str(r["recall_at_1"] if r["recall_at_1"] is not None else "-"),
                str(r["recall_at_5"] if r["recall_at_5"] is not None else "-"),
                f"{r['facts_found']:.2f}" if r["facts_found"] is not None else "-",
                str(r["answer_chars"]),
                str(r["first_fact_at"]) if r["first_fact_at"] is not None else "-",
                str(r["llm_calls"]),
                f"{r['input_tokens']}/{r['output_tokens']}",
                r["outcome"],
                f"{r['seconds']:.1f}",
            )
        out.console.print(table)
        for k, v in t.items():
            out.console.print(f"{k}: {v}")
        if args.json:
            Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            Path(args.json).write_text(json.dumps(report, indent=1))
            out.console.print(f"wrote {args.json}")
        return 0

    return await with_runtime(settings, args.source, body)
