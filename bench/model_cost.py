"""What a question costs in chat-model calls and tokens, per provider wire shape, on an eval set.

Runs ``threadwise eval``'s loop (:func:`bot.eval.run_eval`) with the bot configured as
``openai:``, ``anthropic:`` or ``ollama:`` against the local fake of that API
(tests/fakes/model_apis.py), which answers every task on the happy path and counts tokens
as characters / 4 (input: the system prompt and every message; output: the reply). Input
tokens therefore measure our prompts as sent through each provider's client (the
structured-output method changes what is sent: a tool definition, a schema); output
tokens are the fake's fixed replies, so they are a floor, not a model's real verbosity.
Keyword search only (no embedding calls), web search off.

Usage: PYTHONPATH=. .venv/bin/python bench/model_cost.py [--eval FILE] [--corpus DIR] [--limit N]
Writes bench/results/model-cost.json and prints one line per provider.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from bot.config import Secrets, load_settings  # noqa: E402
from bot.eval import load_eval, run_eval  # noqa: E402
from bot.runtime import open_runtime  # noqa: E402
from bot.terminal import make_console  # noqa: E402
from tests.fakes.model_apis import KEYS, model_api, models_config  # noqa: E402

HERE = Path(__file__).resolve().parent
SHARED = HERE.parent.parent.parent / "shared"


async def measure(wire: str, rows: list[dict], corpus: Path, work: Path) -> dict:
    os.environ.update(KEYS[wire])
    async with model_api(wire) as (fake, base):
        cfg = work / f"{wire}.toml"
        cfg.write_text(
            f'[models]\n{models_config(wire, base)}\n[knowledge]\nsources = ["{corpus}"]\nembeddings = "none"\n'
            f'[service]\ndata_dir = "{work / wire}"\n[web]\nenabled = false\n'
        )
        settings = load_settings(cfg)
        started = time.perf_counter()
        async with open_runtime(settings, Secrets(), embeddings=None) as rt:
            report = await run_eval(rt, rows, make_console(quiet=True))
        seconds = time.perf_counter() - started
    t = report["totals"]
    return {
        "wire": wire,
        "questions": t["questions"],
        "llm_calls_per_question": t["llm_calls_per_question"],
        "input_tokens_per_question": t["input_tokens_per_question"],
        "output_tokens_per_question": t["output_tokens_per_question"],
        "median_llm_calls_first_pass": t["median_llm_calls_first_pass"],
        "fake_counted": [fake.input_tokens, fake.output_tokens],
        "requests": len(fake.requests),
        "wall_seconds": round(seconds, 1),
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--eval", default=str(SHARED / "eval" / "dev.jsonl"))
    parser.add_argument("--corpus", default=str(SHARED / "corpus" / "langgraph-docs"))
    parser.add_argument("--limit", type=int, default=0)
    args = parser.parse_args()
    rows = load_eval(args.eval)[: args.limit or None]
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for wire in ("openai", "anthropic", "ollama"):
            result = await measure(wire, rows, Path(args.corpus), Path(tmp))
            results.append(result)
            print(json.dumps(result))
    out = HERE / "results" / "model-cost.json"
    out.write_text(json.dumps({"eval": Path(args.eval).name, "results": results}, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    asyncio.run(main())
