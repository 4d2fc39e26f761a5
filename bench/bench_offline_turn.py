"""Time per message of the offline graph, and how often the router compares a message with
every chunk vector (:meth:`graphs.offline_router.OfflineRouter.signals`), over an eval set
through the real graph (``threadwise eval``, one process, rows asked one after the other).

Prints one JSON line: rows, mean and median seconds per message (wall clock, and the process's
CPU seconds: steadier on a shared machine), signals calls per message and the seconds spent in
them. Use a set with threads (follow-ups, or ``bench/topic_switch.py``'s rows): a message of a
thread is where the offline path decides whether it continues it.

Usage:
    OMP_NUM_THREADS=1 PYTHONPATH=. python bench/bench_offline_turn.py EVAL.jsonl --source DIR [--config F]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.extra_corpora import corpus_argument  # noqa: E402
from bot.cli.main import main as threadwise  # noqa: E402
from graphs.offline_router import OfflineRouter  # noqa: E402


def run(eval_file: str, source: str, config: str) -> dict:
    """Run the eval set through the graph with the router's signals counted and timed."""
    calls: list[float] = []
    signals = OfflineRouter.signals

    def counted(self: OfflineRouter, message: str):  # type: ignore[no-untyped-def]
        t = time.perf_counter()
        try:
            return signals(self, message)
        finally:
            calls.append(time.perf_counter() - t)

    OfflineRouter.signals = counted  # type: ignore[method-assign]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "eval.json"
        cpu = time.process_time()
        code = threadwise(["eval", eval_file, "--source", source, "--config", config, "--json", str(out)])
        cpu = time.process_time() - cpu
        if code:
            raise SystemExit(f"threadwise eval exited {code}")
        rows = json.loads(out.read_text())["rows"]
    seconds = [r["seconds"] for r in rows]
    return {
        "rows": len(rows),
        "seconds_per_message": round(statistics.mean(seconds), 3),
        "median_seconds": round(statistics.median(seconds), 3),
        "cpu_seconds_per_message": round(cpu / len(rows), 3),  # the index's sync check included, once
        "signals_per_message": round(len(calls) / len(rows), 2),
        "signals_seconds_per_message": round(sum(calls) / len(rows), 4),
        "recall_at_1": statistics.mean([r["recall_at_1"] for r in rows if r["recall_at_1"] is not None]),
        "routes": {k: sum(r["route"] == k for r in rows) for k in sorted({r["route"] for r in rows})},
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("eval")
    ap.add_argument(
        "--source", required=True, type=corpus_argument, help="a folder, or a corpus name (bench/extra_corpora.py)"
    )
    ap.add_argument("--config", default=str(Path(__file__).resolve().parent.parent / "config.toml"))
    args = ap.parse_args()
    print(json.dumps(run(args.eval, str(args.source), args.config)))


if __name__ == "__main__":
    main()
