"""``threadwise sources`` lists the sources without loading the graph, the chat models or the
embedding model: through the real CLI, Python's own import log (``-X importtime``) names every
module the command loaded. LangGraph, LangChain, PyTorch, transformers and llama.cpp took
1.2 s of a 1.75 s start here (6.5-9 s on a slower machine)."""

from __future__ import annotations

import json

from tests.conftest import write_config
from tests.fakes.bot_process import threadwise

HEAVY = ("langgraph", "langchain", "langchain_core", "langchain_text_splitters", "torch", "transformers", "llama_cpp")


def test_sources_starts_without_the_graph_and_model_libraries(tmp_path):
    (tmp_path / "handbook").mkdir()
    (tmp_path / "handbook" / "leave.md").write_text("# Leave\n\nAsk your manager before booking leave.\n")
    cfg = write_config(tmp_path, extra='\n[graph]\ncomposer = "extractive"\ngraders = "lexical"\n')
    kept = [line for line in cfg.read_text().splitlines() if not line.startswith("sources = ")]
    cfg.write_text(
        "\n".join(kept)
        + '\n[[sources]]\nname = "handbook"\ntype = "files"\npath = "handbook"\n'
        + '\n[[sources]]\nname = "runbooks"\ntype = "git"\nrepo = "https://git.example/runbooks.git"\n'
        + '\n[[sources]]\nname = "site"\ntype = "web"\nurl = "https://docs.example/"\n'
    )
    synced = threadwise("sync", "handbook", "--config", str(cfg), cwd=tmp_path)
    # the first sync reads every source the index lacks: runbooks and site cannot be reached (exit 1)
    assert synced.returncode == 1 and "• handbook: 1 added" in synced.stdout, synced.stderr[-2000:]
    for args in (["sources"], ["sources", "--json"]):
        listed = threadwise(*args, "--config", str(cfg), cwd=tmp_path, env={"PYTHONPROFILEIMPORTTIME": "1"})
        assert listed.returncode == 0, listed.stderr[-2000:]
        loaded = {
            line.split("|")[-1].strip()
            for line in listed.stderr.splitlines()
            if line.startswith("import time:") and "|" in line
        }
        assert "graphs.knowledge.kb" in loaded, sorted(loaded)[:20]  # the log is real
        heavy = sorted(m for m in loaded if m.split(".")[0] in HEAVY)
        assert heavy == [], heavy[:20]
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [(r["name"], r["documents"]) for r in rows] == [("handbook", 1), ("runbooks", 0), ("site", 0)], rows
