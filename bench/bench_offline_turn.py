"""Time per message of the offline graph, and how often the router compares a message with
every chunk vector (:meth:`graphs.offline_router.OfflineRouter.signals`), over an eval set
through the real graph (``threadwise eval``, one process, rows asked one after the other).

Prints one JSON line: rows, mean and median seconds per message (wall clock, and the process's
CPU seconds: steadier on a shared machine), signals calls per message and the seconds spent in
them. Use a set with threads (follow-ups, or ``bench/topic_switch.py``'s rows): a message of a
thread is where the offline path decides whether it continues it.

``--thread FILE`` (one message a line: a first question, then what follows it) asks instead the
messages of FILE one after the other in one chat thread, ``--runs`` times in one process (a fresh
thread each time, the embedding caches emptied between runs so every run embeds what a fresh
process would; a warm-up question first loads the models), and prints one JSON line per turn:
the median over the runs of the process's CPU seconds, the texts the local model embedded and
the word pieces it computed (``pieces``) against those of the texts themselves (``text_pieces``:
the difference is padding), and the answer's characters.

Usage:
    OMP_NUM_THREADS=1 PYTHONPATH=. python bench/bench_offline_turn.py EVAL.jsonl --source DIR [--config F]
    OMP_NUM_THREADS=1 PYTHONPATH=. python bench/bench_offline_turn.py --thread bench/eval/thread-docs.txt \
        --source docs --runs 5
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import uuid
import weakref
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.extra_corpora import corpus_argument  # noqa: E402
from bot.cli.main import main as threadwise  # noqa: E402
from graphs.knowledge.embedding import TextEmbedder  # noqa: E402
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


class Counters:
    """Counts, while installed, the texts the :class:`TextEmbedder` caches miss (embedded by
    the model) and the word pieces ONNX Runtime computes for them (``pieces``: every input
    position, padding included; ``text_pieces``: the attention mask's ones), and keeps every
    text embedder built meanwhile so :meth:`empty_caches` can empty them."""

    def __init__(self) -> None:
        self.embedded = self.pieces = self.text_pieces = 0
        self.embedders: weakref.WeakSet[TextEmbedder] = weakref.WeakSet()

    def install(self) -> None:
        import onnxruntime as ort

        counters, init, call = self, TextEmbedder.__init__, TextEmbedder.__call__
        run = ort.InferenceSession.run

        def counted_init(self: TextEmbedder, *args: Any, **kwargs: Any) -> None:
            init(self, *args, **kwargs)
            counters.embedders.add(self)

        def counted_call(self: TextEmbedder, texts):  # type: ignore[no-untyped-def]
            if self.embeddings is not None:
                with self._lock:
                    counters.embedded += sum(t not in self._cache for t in dict.fromkeys(texts))
            return call(self, texts)

        def counted_run(self, output_names, feed, *args, **kwargs):  # type: ignore[no-untyped-def]
            if "input_ids" in feed:
                counters.pieces += int(feed["input_ids"].size)
                counters.text_pieces += int(feed["attention_mask"].sum())
            return run(self, output_names, feed, *args, **kwargs)

        TextEmbedder.__init__ = counted_init  # type: ignore[method-assign]
        TextEmbedder.__call__ = counted_call  # type: ignore[method-assign]
        ort.InferenceSession.run = counted_run  # type: ignore[method-assign]

    def take(self) -> dict[str, int]:
        """The counts since the last call, reset."""
        out = {"embedded": self.embedded, "pieces": self.pieces, "text_pieces": self.text_pieces}
        self.embedded = self.pieces = self.text_pieces = 0
        return out

    def empty_caches(self) -> None:
        for embedder in list(self.embedders):
            with embedder._lock:
                embedder._cache.clear()


def run_thread(messages: list[str], source: str, config: str, runs: int) -> list[dict]:
    """Ask ``messages`` in one thread ``runs`` times (see the module docstring); one row per turn."""
    from bot.cli.output import make_console
    from bot.cli.session import with_runtime
    from bot.config import load_settings
    from bot.platforms.console import ConsoleResponder

    counters = Counters()
    counters.install()
    per_run: list[list[dict]] = []

    async def body(rt) -> int:  # type: ignore[no-untyped-def]
        quiet = make_console(quiet=True)

        async def ask(key: str, text: str) -> int:
            result = await rt.service.ask(
                key, text, ConsoleResponder(key, quiet, show_status=False, show_answers=False), platform="eval"
            )
            return len(result.answer.text) if result and result.answer else 0

        await ask(f"bench:warm-up:{uuid.uuid4().hex[:8]}", messages[0])
        for _ in range(runs):
            counters.empty_caches()
            counters.take()
            key = f"bench:thread:{uuid.uuid4().hex[:8]}"
            turns = []
            for text in messages:
                cpu = time.process_time()
                chars = await ask(key, text)
                turns.append({"cpu_seconds": time.process_time() - cpu, "answer_chars": chars, **counters.take()})
            per_run.append(turns)
        return 0

    asyncio.run(with_runtime(load_settings(config), [source], body))
    rows = []
    for i, turns in enumerate(zip(*per_run, strict=True), start=1):
        rows.append(
            {
                "turn": i,
                "cpu_seconds": round(statistics.median(t["cpu_seconds"] for t in turns), 3),
                "cpu_seconds_runs": [round(t["cpu_seconds"], 3) for t in turns],
                **{k: int(statistics.median(t[k] for t in turns)) for k in ("embedded", "pieces", "text_pieces")},
                "answer_chars": sorted({t["answer_chars"] for t in turns}),
            }
        )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("eval", nargs="?", help="an eval set (JSONL), without --thread")
    ap.add_argument(
        "--source", required=True, type=corpus_argument, help="a folder, or a corpus name (bench/extra_corpora.py)"
    )
    ap.add_argument("--config", default=str(Path(__file__).resolve().parent.parent / "config.toml"))
    ap.add_argument("--thread", metavar="FILE", help="messages of one thread, one a line (instead of an eval set)")
    ap.add_argument("--runs", type=int, default=5, help="with --thread: times the thread is asked")
    args = ap.parse_args()
    if args.thread:
        messages = [m.strip() for m in Path(args.thread).read_text().splitlines() if m.strip()]
        for row in run_thread(messages, str(args.source), args.config, args.runs):
            print(json.dumps(row))
    elif args.eval:
        print(json.dumps(run(args.eval, str(args.source), args.config)))
    else:
        ap.error("give an eval set or --thread FILE")


if __name__ == "__main__":
    main()
