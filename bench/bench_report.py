"""Render bench/results/load-*.json as the tables of bench/README.md.

The load table (one column per results file, newest last, at most ``--columns``) goes
between ``<!-- bench:load:begin -->`` and ``<!-- bench:load:end -->``; the profile of the
newest file that has one between ``<!-- bench:profile:begin -->`` and
``<!-- bench:profile:end -->``. Everything else in the README is kept. Missing markers are
appended at the end.

Usage: python bench/bench_report.py [--columns 4] [--readme bench/README.md]
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"


def fmt(x: Any, nd: int = 2) -> str:
    if x is None:
        return "–"
    if isinstance(x, float):
        if abs(x) >= 100:
            return f"{x:.0f}"
        return f"{x:.{nd}f}".rstrip("0").rstrip(".") if "." in f"{x:.{nd}f}" else f"{x:.{nd}f}"
    return str(x)


def pair(a: Any, b: Any, sep: str = " / ") -> str:
    return f"{fmt(a)}{sep}{fmt(b)}" if a is not None or b is not None else "–"


def get(d: dict[str, Any], *path: str) -> Any:
    for p in path:
        if not isinstance(d, dict) or p not in d:
            return None
        d = d[p]
    return d


def reindex_pairs(r: dict[str, Any], key: str) -> str:
    """``full / unchanged [CLI full / CLI unchanged]`` reindex seconds of a run's ``key`` section."""

    def s(name: str) -> Any:
        return get(r, key, "summary", name)

    return (
        f"{pair(s('reindex_full_s'), s('reindex_unchanged_s'))} "
        f"[{pair(s('reindex_full_cli_s'), s('reindex_unchanged_cli_s'))}]"
    )


def rows_for(sizes: list[str]) -> list[tuple[str, Callable[[dict[str, Any]], str]]]:
    def lv(n: str, *path: str) -> Callable[[dict[str, Any]], Any]:
        return lambda r: get(r, "load", "summary", "levels", n, *path)

    rows: list[tuple[str, Callable[[dict[str, Any]], str]]] = []
    for n in sizes:
        what = "1 at a time" if n == "1" else f"{n} at once"
        rows.append(
            (
                f"HTTP ack to Slack p50 / p95, {what} (ms)",
                lambda r, n=n: pair(lv(n, "ack_p50_ms")(r), lv(n, "ack_p95_ms")(r)),
            )
        )
    big = sizes[-1]
    rows.append((f"acks over 3 s (Slack retries), {big} at once", lambda r: fmt(lv(big, "acks_over_3s")(r))))
    for n in sizes:
        what = "1 at a time" if n == "1" else f"{n} at once"
        rows.append(
            (
                f"first reaction after the event p50 / p95, {what} (ms)",
                lambda r, n=n: pair(lv(n, "first_reaction_p50_ms")(r), lv(n, "first_reaction_p95_ms")(r)),
            )
        )
    rows.append(("answer, 1 question alone (s, median)", lambda r: fmt(get(r, "load", "summary", "answer_one_s"))))
    rows.append(("first answer of a fresh process (s)", lambda r: fmt(get(r, "load", "summary", "cold_answer_s"))))
    for n in sizes[1:]:
        rows.append(
            (
                f"answer p50 / p95 within {n} at once (s)",
                lambda r, n=n: pair(lv(n, "answer_p50_s")(r), lv(n, "answer_p95_s")(r)),
            )
        )
        goal = " (goal ≤ 5x)" if n == sizes[-1] else ""
        rows.append(
            (
                f"**total for {n} at once (s) / ratio to one question**{goal}",
                lambda r, n=n: f"{fmt(lv(n, 'total_s')(r))} / **{fmt(lv(n, 'ratio_to_one')(r))}x**",
            )
        )
    for n in sizes[1:]:
        rows.append(
            (
                f"LLM calls in flight at the model, {n} at once: max / mean (mean while busy)",
                lambda r, n=n: (
                    f"{pair(lv(n, 'llm_in_flight_max')(r), lv(n, 'llm_in_flight_mean')(r))} "
                    f"({fmt(lv(n, 'llm_in_flight_mean_while_busy')(r))})"
                ),
            )
        )
    rows.append(("LLM calls per question", lambda r: fmt(lv(big, "llm_calls_per_question")(r))))
    rows.append(
        (
            f"Slack Web API calls per question, {big} at once",
            lambda r: (
                fmt(lv(big, "slack_calls_per_question_total")(r))
                + ": "
                + ", ".join(f"{m} {fmt(v)}" for m, v in (lv(big, "slack_calls_per_question")(r) or {}).items())
            ),
        )
    )
    rows.append(
        (
            "product CPU s per question, " + " / ".join("1" if n == "1" else n for n in sizes),
            lambda r: " / ".join(fmt(lv(n, "cpu_s_per_question")(r), 3) for n in sizes),
        )
    )
    rows.append(
        (
            "of which the event loop (main thread), " + " / ".join(sizes),
            lambda r: " / ".join(fmt(lv(n, "loop_cpu_s_per_question")(r), 3) for n in sizes),
        )
    )
    rows.append(("unanswered (all runs)", lambda r: " / ".join(fmt(lv(n, "unanswered")(r)) for n in sizes)))
    rows.append(
        (
            "RSS idle / after 1 question / peak (MB)",
            lambda r: " / ".join(
                fmt(get(r, "load", "summary", k)) for k in ("rss_idle_mb", "rss_after_warmup_mb", "rss_peak_mb")
            ),
        )
    )
    rows.append(("start to ready, keyword index built (s)", lambda r: fmt(get(r, "load", "summary", "ready_s"))))
    rows.append(
        (
            "checkpoint bytes per thread after the run (checkpoints kept per thread)",
            lambda r: (
                f"{fmt(get(r, 'load', 'summary', 'checkpoint_bytes_per_thread'))} "
                f"({fmt(get(r, 'load', 'summary', 'checkpoint_rows_per_thread'))})"
            ),
        )
    )
    for key, name in (("kb", "keyword only"), ("kb_embeddings", "local MiniLM")):
        rows.append(
            (
                f"reindex {name}: full / unchanged, `threadwise reindex` wall (s) [CLI's own figure]",
                lambda r, key=key: reindex_pairs(r, key) if get(r, key) else "–",
            )
        )
    for key, name in (("kb", "keyword"), ("kb_embeddings", "hybrid (MiniLM + keyword)")):
        rows.append(
            (
                f"search latency per query, {name}: p50 / p95 (ms)",
                lambda r, key=key: pair(
                    get(r, key, "summary", "search", "p50_ms"), get(r, key, "summary", "search", "p95_ms")
                ),
            )
        )
    rows.append(
        (
            "load average of the machine before / after (2 cores)",
            lambda r: pair(
                (get(r, "load", "machine", "loadavg_before") or [None])[0],
                (get(r, "load", "machine", "loadavg_after") or [None])[0],
            ),
        )
    )
    return rows


def load_table(files: list[dict[str, Any]]) -> str:
    sizes = sorted({n for r in files for n in (get(r, "load", "summary", "levels") or {})}, key=int) or ["1"]
    head = ["metric"] + [f"{r['label']}<br>{(get(r, 'load', 'created') or r.get('updated', ''))[:16]}" for r in files]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, fn in rows_for(sizes):
        cells = []
        for r in files:
            try:
                cells.append(fn(r))
            except (TypeError, ZeroDivisionError, KeyError):
                cells.append("–")
        lines.append("| " + " | ".join([name] + cells) + " |")
    settings = [get(r, "load", "settings") for r in files if get(r, "load", "settings")]
    if settings:
        s = settings[-1]
        lines.append("")
        lines.append(
            f"Settings of the newest column: {s['repeats']} runs (medians), sizes {s['sizes']}, "
            f"{s['singles']} single questions per run, model delay {s['llm_delay_s']} s per call, "
            f"events per question: {s['events']}."
        )
    return "\n".join(lines)


def profile_table(r: dict[str, Any]) -> str:
    p = r["profile"]
    s = p["summary"]
    out = [
        f"`{r['label']}`, {p['burst']} questions at once, py-spy at {p['rate']} Hz: "
        f"{s['samples']} samples with the bot running Python or C code ({s['waiting_samples']} more in blocking "
        f"waits, left out); the burst took {fmt(p.get('burst_cpu_s'))} CPU s in {fmt(p.get('burst_wall_s'))} s. "
        f"Raw stacks: `{p.get('raw')}` (collapsed format, gunzip for speedscope or flamegraph.pl).",
        "",
    ]
    blocks = [
        ("thread", "threads", 6),
        ("running frame's package (self)", "self_by_package", 12),
        ("event-loop task or thread the sample ran in", "event_loop_callback", 10),
        ("innermost bot/ or graphs/ function on the stack", "innermost_product_frame", 10),
        ("running frame (self)", "top_self_frames", 12),
    ]
    for title, key, k in blocks:
        out.append(f"| {title} | share |")
        out.append("|---|---|")
        for name, _, pct in s[key][:k]:
            out.append(f"| `{name}` | {pct}% |")
        out.append("")
    return "\n".join(out).rstrip()


def replace_section(text: str, name: str, body: str, heading: str) -> str:
    begin, end = f"<!-- bench:{name}:begin -->", f"<!-- bench:{name}:end -->"
    block = f"{begin}\n{body}\n{end}"
    if begin in text and end in text:
        return re.sub(re.escape(begin) + r".*?" + re.escape(end), lambda _: block, text, flags=re.S)
    return text.rstrip() + f"\n\n{heading}\n\n{block}\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--columns", type=int, default=4)
    ap.add_argument("--readme", default=str(HERE / "README.md"))
    args = ap.parse_args()
    files = [json.loads(p.read_text()) for p in sorted(RESULTS.glob("load-*.json"))]
    files = [f for f in files if f.get("load") or f.get("kb") or f.get("kb_embeddings")]
    files.sort(key=lambda f: get(f, "load", "created") or f.get("updated", ""))
    files = files[-args.columns :]
    readme = Path(args.readme)
    text = readme.read_text() if readme.exists() else "# Benchmarks\n"
    text = replace_section(text, "load", load_table(files), "## Under load: `make bench` (figures)")
    profiled = [f for f in files if f.get("profile")]
    if profiled:
        text = replace_section(text, "profile", profile_table(profiled[-1]), "## Profile (figures)")
    readme.write_text(text)
    print(f"updated {readme} ({len(files)} result file(s))")


if __name__ == "__main__":
    main()
