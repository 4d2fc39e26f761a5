"""Write the "topic switch" eval set: each kb question of an eval JSONL asked in a thread
whose previous turn is another kb question (with other sources) and a short answer to it,
as a ``followup`` row, so ``threadwise eval`` measures how much unrelated history pulls a
new question's search towards the old topic (bench/README.md "Offline search in a thread").

Usage: python bench/topic_switch.py [../shared/eval/dev.jsonl] > /tmp/switch.jsonl
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def switch_rows(rows: list[dict]) -> list[dict]:
    """The kb rows of ``rows``, each with the previous kb row (sharing no source) as history."""
    kb = [r for r in rows if r.get("kind") == "kb"]
    out = []
    for i, row in enumerate(kb):
        prev = next(p for p in (kb[i - k] for k in range(1, len(kb))) if not set(p["sources"]) & set(row["sources"]))
        facts = "; ".join(prev["answer_facts"])
        answer = f"From the documentation: {facts} [1]\n\nSources:\n  [1] {prev['sources'][0]}"
        out.append(
            {
                **row,
                "id": f"switch-{row['id']}",
                "kind": "followup",
                "history": [{"role": "user", "content": prev["question"]}, {"role": "assistant", "content": answer}],
            }
        )
    return out


if __name__ == "__main__":
    src = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[2] / "shared/eval/dev.jsonl")
    rows = [json.loads(line) for line in src.read_text().splitlines() if line.strip()]
    sys.stdout.write("".join(json.dumps(r) + "\n" for r in switch_rows(rows)))
