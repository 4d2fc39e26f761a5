"""Soak of the default SQLite storage with graph worker processes: a burst of questions at one
``python -m bot run`` (Slack HTTP mode, the fake Slack server, a Mistral-shaped model) whose
chat process and graph workers all write the one checkpoint file; reports the time, the
answers, and any "database is locked" in the log (there must be none).

    python bench/bench_sqlite_soak.py                                 # 500 questions, 250 threads, 3 workers
    python bench/bench_sqlite_soak.py --questions 1000 --delay 0.05 --json bench/results/sqlite_soak.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fakes.soak import soak  # noqa: E402


async def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--questions", type=int, default=500)
    p.add_argument("--threads", type=int, default=250, help="threads the questions are spread over")
    p.add_argument("--workers", type=int, default=3, help="[service] graph_workers")
    p.add_argument("--delay", type=float, default=0.0, help="seconds per model call")
    p.add_argument("--durability", default="", help='[service] checkpoint_durability ("exit", the default, or "async")')
    p.add_argument("--json", help="write the result here")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        r = await soak(
            Path(tmp), questions=args.questions, threads=args.threads, workers=args.workers, delay=args.delay
        )
    print(json.dumps(r, indent=1))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(r, indent=1))
    return 0 if not r["locked_lines"] and r["answered"] == r["questions"] else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
