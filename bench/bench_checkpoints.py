"""Checkpoint storage per thread: N turns on one thread through the real ChatService
(scripted chat model, real SQLite files), then the bytes stored for that thread, the
conversation's own size and the checkpoint file's size.

    python bench/bench_checkpoints.py --turns 100
    python bench/bench_checkpoints.py --turns 1000 --every 100      # soak, figures every 100 turns
    python bench/bench_checkpoints.py --turns 100 --keep 20 --no-vacuum   # the old policy

Target (issue 8): stored bytes per thread <= 5 x conversation + 200 KB, bounded over a
1,000-turn soak.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bot.config import Secrets, load_settings  # noqa: E402
from bot.platforms.console import ConsoleResponder  # noqa: E402
from bot.runtime import open_runtime  # noqa: E402
from bot.storage import checkpoints  # noqa: E402
from tests.fakes.chat_model import ScriptedChatModel  # noqa: E402

DOCS = {
    f"topic{i}.md": f"# Topic {i}\n\n## Setting {i}\n"
    + (f"The setting number {i} is configured with KEY_{i}=on. " * 12)
    for i in range(20)
}
ANSWER = (
    "The setting is configured with KEY_{n}=on in the service file [1]. Restart the worker after the "
    "change so it picks it up, and check the logs for the line that confirms the new value. If several "
    "workers run, change all of them; the setting is read once at start [1]."
)


def write_config(root: Path, keep: int) -> Path:
    kb = root / "kb"
    kb.mkdir(parents=True, exist_ok=True)
    for name, text in DOCS.items():
        (kb / name).write_text(text)
    path = root / "config.toml"
    path.write_text(f"""
[knowledge]
sources = ["{kb}"]
index_dir = "{root}/data/index"
embeddings = "none"
k = 4

[web]
enabled = false

[service]
checkpoint_db = "{root}/data/checkpoints.sqlite"
bookkeeping_db = "{root}/data/bookkeeping.sqlite"
keep_checkpoints_per_thread = {keep}
""")
    return path


def file_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


async def run(turns: int, keep: int, vacuum: bool, every: int, root: Path) -> list[dict]:
    settings = load_settings(write_config(root, keep))
    n = {"i": 0}

    def generate(_messages):
        return ANSWER.format(n=n["i"])

    model = ScriptedChatModel(script={"generate": generate})
    rows = []
    async with open_runtime(settings, Secrets(), chat_model=model, embeddings=None) as rt:
        saver = rt.graph.checkpointer
        if not vacuum:  # the old behaviour: no auto-vacuum, no reclaiming
            async with saver.lock:
                await saver.conn.execute("PRAGMA auto_vacuum = NONE")
                await saver.conn.execute("VACUUM")
        key = "console:bench"
        out = ConsoleResponder("bench", show_status=False, show_answers=False)
        t0 = time.perf_counter()
        for i in range(1, turns + 1):
            n["i"] = i % 20
            await rt.service.ask(
                key,
                f"Turn {i}: how is setting {i % 20} configured, and what must I restart after changing KEY_{i % 20}?",
                out,
            )
            if i % every == 0 or i == turns:
                values = await rt.service.thread_values(key)
                conversation = sum(len(str(m.content).encode()) for m in values.get("messages", []))
                async with saver.lock:
                    await saver.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                stored = await checkpoints.thread_bytes(saver, key)
                path = settings.path(settings.service.checkpoint_db)
                rows.append(
                    {
                        "turns": i,
                        "conversation": conversation,
                        "stored": stored,
                        "ratio": stored / max(conversation, 1),
                        "file": file_bytes(path),
                        "checkpoints": len(await checkpoints_of(saver, key)),
                        "limit": 5 * conversation + 200_000,
                        "seconds": time.perf_counter() - t0,
                    }
                )
    return rows


async def checkpoints_of(saver, key: str) -> list[str]:
    async with saver.lock:
        rows = await (
            await saver.conn.execute("SELECT checkpoint_id FROM checkpoints WHERE thread_id = ?", (key,))
        ).fetchall()
    return [r[0] for r in rows]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--turns", type=int, default=100)
    p.add_argument("--every", type=int, default=0, help="print figures every N turns (default: only at the end)")
    p.add_argument("--keep", type=int, default=1, help="checkpoints kept per thread (config default: 1)")
    p.add_argument("--no-vacuum", action="store_true", help="no auto-vacuum (the old policy, for comparison)")
    args = p.parse_args()
    logging.basicConfig(level=logging.WARNING)
    with tempfile.TemporaryDirectory() as tmp:
        rows = asyncio.run(run(args.turns, args.keep, not args.no_vacuum, args.every or args.turns, Path(tmp)))
    print(f"keep={args.keep} vacuum={'off' if args.no_vacuum else 'incremental'}")
    print(
        f"{'turns':>6} {'conversation':>13} {'stored/thread':>14} {'ratio':>6} {'limit':>10} {'file':>10} "
        f"{'ckpts':>5} {'s':>6}"
    )
    for r in rows:
        print(
            f"{r['turns']:>6} {r['conversation']:>13,} {r['stored']:>14,} {r['ratio']:>6.1f} {r['limit']:>10,} "
            f"{r['file']:>10,} {r['checkpoints']:>5} {r['seconds']:>6.0f}"
        )
    bad = [r for r in rows if r["stored"] > r["limit"]]
    print("within target" if not bad else f"OVER TARGET at {[r['turns'] for r in bad]}")


if __name__ == "__main__":
    main()
