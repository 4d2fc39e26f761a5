"""The local embedding model through ONNX Runtime (a full reindex with torch takes minutes
on two cores): the int8 export is made once into a cache folder, used instead of torch, finds
the same documents as torch, answers queries without loading torch, and a failed export
falls back to torch in one log line. An index built under one backend is rebuilt when the
vectors of the other would not match (int8 vs torch), and kept when they do."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from graphs.knowledge import KnowledgeBase
from tests.conftest import requires_offline_model

ROOT = Path(__file__).resolve().parent.parent

DOCS = {
    "persistence/checkpointers.md": "# Checkpointers\n\nA checkpointer saves the graph state after every step, "
    "so a thread can resume after a crash. Use SqliteSaver or PostgresSaver.",
    "human/interrupts.md": "# Interrupts\n\nCall interrupt() inside a node to pause the run and wait for a "
    "human decision; resume it with Command(resume=value).",
    "deploy/docker.md": "# Docker deployment\n\nBuild the image with langgraph build, then run it with docker "
    "run; the container needs REDIS_URI and DATABASE_URI.",
    "streaming.md": "# Streaming\n\nstream_mode='messages' yields LLM tokens as they are generated; "
    "stream_mode='updates' yields the state changes of each node.",
    "memory/store.md": "# Long-term memory\n\nThe store keeps facts about a user across threads, in "
    "namespaces, searchable by meaning.",
    "tools.md": "# Tool calling\n\nBind tools to the chat model with bind_tools and route to a ToolNode "
    "when the model asks for a tool.",
}
QUERIES = {
    "how do I pause a run until a person approves": "human/interrupts.md",
    "resume after the process crashed": "persistence/checkpointers.md",
    "which environment variables does the container need": "deploy/docker.md",
    "show tokens while the model is still writing": "streaming.md",
    "remember user preferences between conversations": "memory/store.md",
    "let the model call a function": "tools.md",
}


def write_docs(root: Path) -> Path:
    for rel, text in DOCS.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


@pytest.fixture(scope="module")
def export_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("onnx-cache")


def _local(backend: str, cache: Path):
    from graphs.knowledge.local_model import LocalEmbeddings
    from graphs.models import local_embedding_path

    return LocalEmbeddings(local_embedding_path(), threads=1, backend=backend, cache_dir=cache)


def _ranking(emb, tmp: Path, name: str) -> tuple[KnowledgeBase, dict[str, list[str]]]:
    kb = KnowledgeBase(tmp / name, [write_docs(tmp / "docs")], embeddings=emb, embedder_id="ignored")
    kb.reindex()
    snap = kb.snapshot
    out = {}
    for q in QUERIES:
        qv = _vector(emb, q)
        out[q] = [snap.chunks([cid])[cid][0] for cid in snap.dense(qv, 3)]
    return kb, out


def _vector(emb, text: str):
    import numpy as np

    return np.asarray(emb.embed_query(text), dtype=np.float32)


@requires_offline_model
def test_onnx_int8_export_is_used_and_ranks_like_torch(tmp_path: Path, export_cache: Path) -> None:
    onnx = _local("onnx-int8", export_cache)
    kb, onnx_rank = _ranking(onnx, tmp_path, "int8")
    assert onnx.backend == "onnx-int8"  # no fallback happened
    exports = [p for p in export_cache.iterdir() if p.name.endswith(tuple("0123456789abcdef")) and "int8" in p.name]
    assert len(exports) == 1 and (exports[0] / "model.onnx").exists()
    meta = json.loads((exports[0] / "export.json").read_text())
    assert meta["backend"] == "onnx-int8" and meta["check_cosine"] >= 0.97
    manifest = kb.snapshot.manifest
    assert manifest["embedder"] == "local:all-MiniLM-L6-v2+int8" and manifest["embedder_backend"] == "onnx-int8"

    torch_rank = _ranking(_local("torch", export_cache), tmp_path, "torch")[1]
    for q, expected in QUERIES.items():  # the best document is the same (ranks 2-3 are near ties here)
        assert onnx_rank[q][0] == torch_rank[q][0] == expected, (q, onnx_rank[q], torch_rank[q])
    # the hybrid search a user gets names the same best document with either backend
    assert [d["location"] for d in kb.search([next(iter(QUERIES))], 1)] == ["human/interrupts.md"]


@requires_offline_model
def test_fp32_onnx_gives_torchs_vectors_and_keeps_the_torch_index(tmp_path: Path, export_cache: Path) -> None:
    import numpy as np

    torch_emb, onnx = _local("torch", export_cache), _local("onnx", export_cache)
    texts = list(DOCS.values()) + list(QUERIES)
    diff = np.abs(np.asarray(torch_emb.embed_documents(texts)) - np.asarray(onnx.embed_documents(texts))).max()
    assert onnx.backend == "onnx" and diff < 1e-4
    assert onnx.embedder_id == torch_emb.embedder_id == "local:all-MiniLM-L6-v2"
    kb = KnowledgeBase(tmp_path / "index", [write_docs(tmp_path / "docs")], embeddings=torch_emb, embedder_id="x")
    kb.reindex()
    again = KnowledgeBase(tmp_path / "index", kb.sources, embeddings=onnx, embedder_id="x")
    assert not again.needs_rebuild()
    assert again.reindex().embedded_chunks == 0
    int8 = KnowledgeBase(tmp_path / "index", kb.sources, embeddings=_local("onnx-int8", export_cache), embedder_id="x")
    assert int8.needs_rebuild()  # other vectors: the index is rebuilt, not mixed
    stats = int8.reindex()
    assert stats.embedded_chunks == stats.chunks


@requires_offline_model
def test_queries_on_the_cached_export_do_not_load_torch(tmp_path: Path, export_cache: Path) -> None:
    _local("onnx-int8", export_cache).load()  # exported (or reused from the test above)
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from graphs.knowledge.local_model import LocalEmbeddings\n"
        "from graphs.models import local_embedding_path\n"
        f"e = LocalEmbeddings(local_embedding_path(), backend='onnx-int8', cache_dir=Path({str(export_cache)!r}))\n"
        "v = e.embed_query('how do I resume a thread')\n"
        "print(e.backend, len(v), 'torch' in sys.modules, 'sentence_transformers' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["onnx-int8", "384", "False", "False"]


@requires_offline_model
def test_a_failed_export_falls_back_to_torch_in_one_log_line(tmp_path: Path, caplog) -> None:
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the export cache should be")
    emb = _local("onnx-int8", blocked)
    with caplog.at_level(logging.WARNING, logger="graphs.knowledge.local_model"):
        kb = KnowledgeBase(tmp_path / "index", [write_docs(tmp_path / "docs")], embeddings=emb, embedder_id="x")
        kb.reindex()
        docs = kb.search(["how do I pause a run until a person approves"], 1)
    lines = [r.getMessage() for r in caplog.records if r.name == "graphs.knowledge.local_model"]
    assert len(lines) == 1 and "onnx-int8" in lines[0] and "using torch instead" in lines[0]
    assert emb.backend == "torch"
    manifest = kb.snapshot.manifest
    # the manifest names the vectors actually stored: torch's, not int8's
    assert manifest["embedder"] == "local:all-MiniLM-L6-v2" and manifest["embedder_backend"] == "torch"
    assert [d["location"] for d in docs] == ["human/interrupts.md"]


class SettlingEmbeddings:
    """An embedding model whose vector space is known only once loaded (as the local
    model's: configured int8, but its export may fail and leave torch)."""

    def __init__(self, configured: str, settles_to: str) -> None:
        self.embedder_id, self._settles_to = configured, settles_to
        self.backend = configured
        self.loads = 0
        self.embedded = 0

    def load(self) -> None:
        self.loads += 1
        self.embedder_id = self.backend = self._settles_to

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.load()
        self.embedded += len(texts)
        return [[1.0, float(len(t) % 7), 0.5] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


def test_an_unchanged_reindex_does_not_load_the_model(tmp_path: Path) -> None:
    docs = write_docs(tmp_path / "docs")
    built = SettlingEmbeddings("space-a", "space-a")
    KnowledgeBase(tmp_path / "index", [docs], embeddings=built, embedder_id="x").reindex()
    fresh = SettlingEmbeddings("space-a", "space-a")
    stats = KnowledgeBase(tmp_path / "index", [docs], embeddings=fresh, embedder_id="x").reindex()
    assert stats.embedded_chunks == 0 and fresh.loads == 0


def test_a_model_settling_on_the_stored_space_reuses_the_stored_vectors(tmp_path: Path) -> None:
    """Configured for space b, but loading leaves space a (the index's): after one changed
    file only that file is embedded; the manifest says a."""
    docs = write_docs(tmp_path / "docs")
    KnowledgeBase(tmp_path / "index", [docs], embeddings=SettlingEmbeddings("a", "a"), embedder_id="x").reindex()
    (docs / "tools.md").write_text(DOCS["tools.md"] + "\n\nParallel tool calls run at once.")
    emb = SettlingEmbeddings("b", "a")
    kb = KnowledgeBase(tmp_path / "index", [docs], embeddings=emb, embedder_id="x")
    stats = kb.reindex()
    assert emb.loads >= 1 and stats.changed_files == ["tools.md"] and stats.embedded_chunks == 1
    assert kb.snapshot.manifest["embedder"] == "a"


def test_a_start_with_a_hosted_model_loads_no_local_model_library(tmp_path: Path) -> None:
    """MISTRAL_API_KEY set, keyword or Mistral embeddings: torch, sentence-transformers,
    transformers, ONNX Runtime and llama.cpp stay unimported (start-up is import-bound)."""
    code = (
        "import asyncio, sys\n"
        "from pathlib import Path\n"
        "from bot.config import Secrets, load_settings\n"
        "from bot.runtime import open_runtime\n"
        "from tests.conftest import write_config\n"
        f"cfg = write_config(Path({str(tmp_path)!r}))\n"
        "async def main():\n"
        "    async with open_runtime(load_settings(cfg), Secrets.from_env()) as rt:\n"
        "        await asyncio.to_thread(rt.knowledge.search, ['how do I deploy the container'], 3)\n"
        "asyncio.run(main())\n"
        "heavy = ('torch', 'sentence_transformers', 'transformers', 'onnxruntime', 'llama_cpp',"
        " 'langchain_huggingface')\n"
        "print([m for m in heavy if m in sys.modules])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={
            "PYTHONPATH": str(ROOT),
            "HF_HUB_OFFLINE": "1",
            "PATH": "/usr/bin:/bin",
            "HOME": str(tmp_path),
            "MISTRAL_API_KEY": "test-key",
        },
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"


LOAD = (
    "import logging, sys\n"
    "from pathlib import Path\n"
    "from graphs.knowledge.local_model import LocalEmbeddings\n"
    "logging.basicConfig(level=logging.INFO, format='%(message)s')\n"
    "e = LocalEmbeddings(sys.argv[1], backend='onnx-int8', cache_dir=Path(sys.argv[2]))\n"
    "v = e.embed_query('how do I resume a thread')\n"
    "print(e.backend, len(v), e._model.folder)\n"
)


@requires_offline_model
def test_installations_sharing_the_cache_share_one_export_and_never_remove_each_others(tmp_path: Path) -> None:
    """Two installations (the same model files at two paths, written at other times), starting
    at once on one cache folder: one export, made once, used by both; an export another
    installation still uses stays, one unused for over 30 days goes."""
    import os
    import shutil
    import time

    from graphs.models import local_embedding_path

    model = Path(local_embedding_path())
    installs = []
    for n, when in (("a", 1_700_000_000), ("b", 1_750_000_000)):
        copy = tmp_path / n / model.parent.name / "model"
        shutil.copytree(model, copy)
        for f in copy.rglob("*"):
            os.utime(f, (when, when))
        installs.append(copy)
    cache = tmp_path / "cache"
    cache.mkdir()
    prefix = f"{model.parent.name}-onnx-int8-"
    in_use, abandoned = cache / (prefix + "0123456789abcdef"), cache / (prefix + "fedcba9876543210")
    for old, age_days in ((in_use, 29), (abandoned, 31)):
        old.mkdir()
        (old / "export.json").write_text("{}")
        then = time.time() - age_days * 86400
        os.utime(old / "export.json", (then, then))

    env = {"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", LOAD, str(path), str(cache)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for path in installs
    ]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err[-3000:]
    used = {out.split()[2] for out, _ in outs}
    assert [out.split()[:2] for out, _ in outs] == [["onnx-int8", "384"]] * 2, outs
    assert len(used) == 1, outs  # the same export, whatever the paths and file times
    exports = sorted(p.name for p in cache.iterdir() if p.is_dir())
    assert exports == sorted([in_use.name, Path(used.pop()).name]), exports
    assert sum("exported the local embedding model" in err for _, err in outs) == 1, [e[-2000:] for _, e in outs]
    assert any("removing the local embedding export" in err and abandoned.name in err for _, err in outs)


@requires_offline_model
def test_a_cut_at_fewer_word_pieces_is_recorded_and_rebuilds_the_index(tmp_path: Path, export_cache: Path) -> None:
    """``[models] local_embedding_max_tokens``: texts cut at 128 word pieces give other
    vectors for long texts (both backends alike), so the manifest records the cut and an
    index built without it is rebuilt, not mixed; the same cut again reuses the vectors."""
    import numpy as np

    from bot.config import ModelSettings
    from graphs.knowledge.local_model import LocalEmbeddings
    from graphs.models import build_embeddings, local_embedding_path

    def cut(backend: str) -> LocalEmbeddings:
        return LocalEmbeddings(
            local_embedding_path(), threads=1, backend=backend, cache_dir=export_cache, max_tokens=128
        )

    long_text = " ".join(DOCS.values()) * 2  # ~300 word pieces
    full, cut_onnx, cut_torch = _local("onnx", export_cache), cut("onnx"), cut("torch")
    v_full, v_cut, v_torch = (np.asarray(e.embed_documents([long_text])[0]) for e in (full, cut_onnx, cut_torch))
    assert float(v_full @ v_cut) < 0.999  # the end of the text is no longer read
    assert np.abs(v_cut - v_torch).max() < 1e-4  # torch cuts at the same place
    assert cut_onnx.backend == "onnx" and cut_onnx.embedder_id == "local:all-MiniLM-L6-v2@128"
    configured, eid = build_embeddings("local", ModelSettings(local_embedding_max_tokens=128))
    assert eid == "local:all-MiniLM-L6-v2@128" and configured is not None

    docs = write_docs(tmp_path / "docs")
    KnowledgeBase(tmp_path / "index", [docs], embeddings=full, embedder_id="x").reindex()
    again = KnowledgeBase(tmp_path / "index", [docs], embeddings=cut_onnx, embedder_id="x")
    assert again.needs_rebuild()
    stats = again.reindex()
    assert stats.embedded_chunks == stats.chunks
    assert again.snapshot.manifest["embedder"] == "local:all-MiniLM-L6-v2@128"
    same = KnowledgeBase(tmp_path / "index", [docs], embeddings=cut("onnx"), embedder_id="x")
    assert not same.needs_rebuild() and same.reindex().embedded_chunks == 0


@requires_offline_model
def test_a_texts_vector_does_not_depend_on_the_texts_embedded_with_it(export_cache: Path) -> None:
    """The same sentence gets the same vector alone or embedded with a long passage (texts sent
    together used to be padded to the longest, which moved the vector's last digits: an answer
    could change with what the process had embedded before)."""
    import numpy as np

    emb = _local("onnx", export_cache)
    sentence = "Call interrupt() inside a node to pause the run."
    passage = " ".join(DOCS.values()) * 3
    alone = np.asarray(emb.embed_documents([sentence])[0])
    together = np.asarray(emb.embed_documents([passage, sentence, "hi"])[1])
    assert np.array_equal(alone, together)
