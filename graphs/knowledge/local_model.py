"""The local embedding model (all-MiniLM-L6-v2, sentence-transformers) on the CPU, through
ONNX Runtime when it is installed, else through torch.

Why ONNX: a full reindex in torch is slow on a small CPU. The
same model exported to ONNX, its attention, GELU and layer norms fused by ONNX Runtime's
transformer optimizer, gives torch's vectors (fp32, the default: same recall) faster, and
needs neither torch nor sentence-transformers once exported (a query ~3x faster, a third
of the memory). With its matrix products quantized to int8 (``onnx-int8``, opt-in) a
reindex is ~2-3x faster than torch, at a small recall cost.

sentence-transformers' own ``backend="onnx"`` (optimum-onnx) would be the library route,
but optimum-onnx 0.1.0 requires ``transformers<4.58`` and sentence-transformers 6 requires
``transformers>=5``, so they cannot be installed together; the export below follows the
same recipe (export, ``optimum``'s O1-level fusions, ``avx512_vnni``-style dynamic int8)
with ``torch.onnx`` and ``onnxruntime`` directly.

The export runs once, from the model files on disk (no download), into a cache folder
(``$XDG_CACHE_HOME/threadwise/embeddings`` or ``~/.cache/threadwise/embeddings``), keyed
by the model files' content and the library versions, so installations sharing the cache
share an export and never remove one another's while it is in use; it is checked against
torch on sample texts before it is used. A failed export or load falls back to torch, with one log line.

Vectors: torch and fp32 ONNX give the same vectors (max difference ~2e-7); int8 vectors
differ slightly (cosine ~0.99 to torch's), so they carry another embedder id and an index
is rebuilt when the backend changes between them (:attr:`LocalEmbeddings.embedder_id`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
import threading
import time
import warnings
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any, cast

import numpy as np
from langchain_core.embeddings import Embeddings

log = logging.getLogger(__name__)

#: ``[models] local_embedding_backend`` values. ``auto``: ``onnx`` when onnxruntime is installed, else ``torch``.
BACKENDS = ("auto", "torch", "onnx", "onnx-int8")

#: Bumped when the export recipe changes: older exports are then redone.
EXPORT_RECIPE = 2

#: Operators quantized to int8 (``quantize_dynamic``'s ``op_types_to_quantize``), per channel.
#: Why MatMul only, per channel: quantizing every operator per tensor moves the vectors far
#: from torch's; MatMul per channel keeps them closest, keeps torch's recall at five results
#: and gives the fastest reindex.
QUANTIZED_OPS = ["MatMul"]

#: Least cosine between an export's vectors and torch's on the check texts (fp32 / int8).
#: Measured on 200 chunks of the LangGraph docs: fp32 1.0000 (max abs difference 2e-7);
#: int8 per channel mean 0.994, min 0.983 (per tensor it was mean 0.94, min 0.86: rejected).
MIN_COSINE = {"onnx": 0.9999, "onnx-int8": 0.97}

#: Most word pieces of a text the local model reads by default: ``None``, the model's own
#: ``max_seq_length`` (256 for all-MiniLM-L6-v2, which was trained on 128). Cutting at 128
#: (``[models] local_embedding_max_tokens = 128``) made a full reindex of the LangGraph docs
#: (2,885 chunks, median 218 word pieces, 73% over 128) much faster but lost recall
#: (most chunks are longer than 128 word pieces, and their tails were no longer seen), so it is opt-in.
MAX_TOKENS: int | None = None

_CHECK_TEXTS = [
    "How do I add memory to a LangGraph agent?",
    "deploy standalone container\nDeploy > Standalone container\nThe container needs REDIS_URI and DATABASE_URI "
    "set before it boots, and a LANGSMITH_API_KEY. Start Redis and Postgres first, then run the image.",
    "Interrupts pause a graph run and wait for a human; resume it with Command(resume=...).",
    "短い日本語の文です。",
    "checkpointer",
]


def onnx_available() -> bool:
    """True when onnxruntime and the ``tokenizers`` library can be imported (not imported here)."""
    import importlib.util

    return all(importlib.util.find_spec(m) is not None for m in ("onnxruntime", "tokenizers"))


def resolve_backend(backend: str) -> str:
    """``auto`` -> ``onnx`` when :func:`onnx_available`, else ``torch``; others unchanged.

    Not ``onnx-int8``: its vectors lost one question of 49 at recall@1 on the LangGraph
    docs (0.735 vs 0.755; recall@5 equal), and the default keeps torch's recall exactly.

    Raises:
        ValueError: not one of :data:`BACKENDS`.
    """
    if backend not in BACKENDS:
        raise ValueError(f"unknown local embedding backend {backend!r} (one of {', '.join(BACKENDS)})")
    if backend == "auto":
        return "onnx" if onnx_available() else "torch"
    return backend


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/threadwise/embeddings`` (``~/.cache`` when unset)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "threadwise" / "embeddings"


#: Days an export of another key stays in the shared cache after its last use: another
#: installation (a second checkout, a bot and an admin CLI in two virtualenvs, the previous
#: release during an upgrade) may still load it. A month outlives any such overlap.
KEEP_UNUSED_DAYS = 30

_DIGESTS = ".digests.json"  # in the cache folder: content digests by path, size and mtime


def export_key(model_path: str | Path, backend: str, cache_dir: Path | None = None) -> str:
    """Names an export: the model folder's files (relative name, size and SHA-256 of the
    content), the backend, the recipe and the versions of torch, transformers and
    onnxruntime (16 hex digits). The same model files with the same libraries give the same
    key in every installation, whatever their paths and modification times, so installations
    sharing the cache share one export.

    ``cache_dir``: where the files' digests are remembered (by real path, size and mtime), so
    the ~90 MB of model files are hashed once per installation, not at every start."""
    ops = ",".join(QUANTIZED_OPS) if backend == "onnx-int8" else ""
    h = hashlib.sha256(f"{EXPORT_RECIPE}|{backend}|{ops}".encode())
    known: dict[str, str] = {}
    if cache_dir is not None:
        try:
            loaded = json.loads((cache_dir / _DIGESTS).read_text())
            known = loaded if isinstance(loaded, dict) else {}
        except (OSError, ValueError):
            pass
    learned = False
    for p in sorted(Path(model_path).rglob("*")):
        if p.is_file() and not p.name.startswith("."):
            st = p.stat()
            stamp = f"{os.path.realpath(p)}:{st.st_size}:{st.st_mtime_ns}"
            digest = known.get(stamp)
            if not isinstance(digest, str):
                with p.open("rb") as f:
                    digest = hashlib.file_digest(f, "sha256").hexdigest()
                known[stamp], learned = digest, True
            h.update(f"|{p.relative_to(model_path).as_posix()}:{st.st_size}:{digest}".encode())
    if learned and cache_dir is not None:
        try:
            cache_dir.mkdir(parents=True, exist_ok=True)
            _write_atomically(cache_dir / _DIGESTS, json.dumps(known, indent=0))
        except OSError:  # a read-only cache: the digests are computed again next time
            pass
    for dist in ("torch", "transformers", "onnxruntime"):
        try:
            h.update(f"|{dist}={metadata.version(dist)}".encode())
        except metadata.PackageNotFoundError:
            h.update(f"|{dist}=-".encode())
    return h.hexdigest()[:16]


class OnnxEncoder:
    """Unit vectors of texts from an exported model folder (:func:`export_onnx`): the
    ``tokenizers`` tokenizer, then one ONNX Runtime session whose output is already mean
    pooled and normalised. Thread-safe (ONNX Runtime sessions are).

    Args:
        folder: the export folder (``model.onnx``, ``tokenizer.json``, ``export.json``).
        threads: ONNX Runtime intra-op threads. Idle threads sleep instead of spinning
            (``session.intra_op.allow_spinning = 0``): on a shared 2-core machine
            spinning threads took the cores the other thread needed.
        max_length: most word pieces per text (the rest is cut off); ``None`` or more than
            the model's ``max_seq_length`` (256 for all-MiniLM-L6-v2): the model's.

    Raises:
        Exception: onnxruntime or tokenizers cannot load the files.
    """

    def __init__(self, folder: Path, threads: int = 1, max_length: int | None = None) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self.folder = folder
        meta = json.loads((folder / "export.json").read_text())
        self.max_length = min(int(meta["max_seq_length"]), int(max_length or meta["max_seq_length"]))
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.enable_truncation(self.max_length)
        self.tokenizer.no_padding()  # one text per call (:meth:`encode`): nothing to pad
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = max(1, int(threads))
        opts.inter_op_num_threads = 1
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = ort.InferenceSession(str(folder / "model.onnx"), opts, providers=["CPUExecutionProvider"])
        self.inputs = {i.name for i in self.session.get_inputs()}

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """``len(texts) x dim`` float32 unit vectors (as sentence-transformers: whitespace
        stripped, at most ``max_length`` word pieces), one ONNX Runtime call per text.

        Why one text a call: texts of one call are padded to the longest, and the model
        computes every padded word piece. The texts a turn embeds (the retrieved passages'
        sentences and table rows, in no order of length) were padded about four-fold: with
        one text a call a turn on the LangGraph docs takes about a quarter of the CPU, and a
        sorted reindex is faster too (bench/README.md "A turn's CPU"). A text's vector no longer
        depends on the texts sent with it."""
        out = []
        for enc in self.tokenizer.encode_batch([t.strip() for t in texts]):
            feed = {
                "input_ids": np.array([enc.ids], dtype=np.int64),
                "attention_mask": np.array([enc.attention_mask], dtype=np.int64),
            }
            if "token_type_ids" in self.inputs:
                feed["token_type_ids"] = np.array([enc.type_ids], dtype=np.int64)
            out.append(self.session.run(None, feed)[0])
        return np.vstack(out).astype(np.float32) if out else np.zeros((0, 0), dtype=np.float32)


class _DropOnnxRuntimeChatter(logging.Filter):
    """onnxruntime's optimizer and quantizer log hundreds of INFO lines (and a WARNING
    suggesting "pre-processing") through the root logger while exporting; the export is
    logged in one line by us instead. Installed on the root handlers only during an
    export, it drops records below ERROR coming from onnxruntime's files."""

    _marker = f"{os.sep}onnxruntime{os.sep}"

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.ERROR or self._marker not in (record.pathname or "")


class _QuietExport:
    def __enter__(self) -> None:
        self.filter = _DropOnnxRuntimeChatter()
        self.handlers = list(logging.getLogger().handlers) or ([logging.lastResort] if logging.lastResort else [])
        for h in self.handlers:
            h.addFilter(self.filter)

    def __exit__(self, *exc: object) -> None:
        for h in self.handlers:
            h.removeFilter(self.filter)


def _mean_pooling(pooling: Any) -> bool:
    """True for a sentence-transformers ``Pooling`` module that takes the plain mean of the
    token vectors (``pooling_mode = "mean"`` in sentence-transformers 6, the
    ``pooling_mode_*`` flags before)."""
    if hasattr(pooling, "get_pooling_mode_str"):
        return pooling.get_pooling_mode_str() == "mean"
    return getattr(pooling, "pooling_mode", None) == "mean" and getattr(pooling, "include_prompt", True)


def export_onnx(model_path: str | Path, backend: str, cache_dir: Path) -> Path:
    """Export the sentence-transformers model at ``model_path`` to ONNX in
    ``cache_dir/<name>-<key>`` (:func:`export_key`), unless that folder exists already.

    Steps: load the model with torch (eager attention, so ONNX Runtime's optimizer
    recognises the attention pattern); ``torch.onnx.export`` of the transformer with mean
    pooling and normalisation, dynamic batch and sequence axes; ONNX Runtime's BERT
    optimizer (fused embedding layer norm, attention, GELU, skip layer norms); for
    ``onnx-int8`` dynamic int8 quantization of the weights, per channel
    (``onnxruntime.quantization.quantize_dynamic``); then the vectors of a few texts are
    compared with torch's (:data:`MIN_COSINE`). Written to a temporary folder and renamed,
    so no process ever sees half a folder; processes exporting the same key at once take
    turns on a lock file beside it (``flock``): the second one uses the first one's export.

    The cache may be shared by several installations: an export of another key (other model
    files or library versions) is removed only when unused for :data:`KEEP_UNUSED_DAYS`
    (each load marks its export as used).

    Args:
        model_path: a sentence-transformers folder (Transformer, mean Pooling, optional Normalize).
        backend: ``onnx`` or ``onnx-int8``.
        cache_dir: where exports are kept (created if missing).

    Returns:
        The export folder.

    Raises:
        ValueError: the model is not Transformer + mean pooling (+ Normalize).
        RuntimeError: the export's vectors differ from torch's.
        ImportError, OSError: a library is missing, the cache folder is not writable.
    """
    model_path = Path(model_path)
    final = (
        cache_dir / f"{model_path.parent.name if model_path.name == 'model' else model_path.name}-{backend}-"
        f"{export_key(model_path, backend, cache_dir)}"
    )
    if _use(final):
        return final
    cache_dir.mkdir(parents=True, exist_ok=True)
    # one export of a key at a time across processes: a second process waits for the first
    # one's folder instead of exporting the same model again beside it
    with _ExportLock(cache_dir / f".{final.name}.lock"):
        if _use(final):
            return final
        _export(model_path, backend, cache_dir, final)
    _prune(cache_dir, final)
    return final


def _use(folder: Path) -> bool:
    """True when ``folder`` holds a finished export; its ``export.json`` is touched then, so
    :func:`_prune` in any installation sees it is in use."""
    try:
        os.utime(folder / "export.json")
        return True
    except FileNotFoundError:
        return False
    except OSError:  # a read-only cache: usable, only not marked
        return (folder / "export.json").exists()


def _prune(cache_dir: Path, final: Path) -> None:
    """Remove exports of the same model and backend as ``final`` not used for
    :data:`KEEP_UNUSED_DAYS` (an export another installation still loads is touched at each
    load, so it stays), and temporary folders of exports that died halfway as long ago."""
    prefix = final.name[: -len(final.name.rsplit("-", 1)[-1])]
    horizon = time.time() - KEEP_UNUSED_DAYS * 86400
    for stale in cache_dir.glob(prefix + "*"):
        if stale == final or not stale.is_dir() or not re.fullmatch(r"[0-9a-f]{16}", stale.name[len(prefix) :]):
            continue
        try:
            if (stale / "export.json").stat().st_mtime >= horizon:
                continue
        except FileNotFoundError:
            pass
        log.info("removing the local embedding export %s: unused for %d days", stale, KEEP_UNUSED_DAYS)
        shutil.rmtree(stale, ignore_errors=True)
    for tmp in cache_dir.glob(f".{prefix}*"):
        try:
            if tmp.is_dir() and tmp.stat().st_mtime < horizon:
                shutil.rmtree(tmp, ignore_errors=True)
        except OSError:
            pass


class _ExportLock:
    """An exclusive ``flock`` on ``path`` (created if missing) while held; waits for it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd = -1

    def __enter__(self) -> None:
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            import fcntl

            fcntl.flock(self.fd, fcntl.LOCK_EX)
        except ImportError:  # not POSIX: the atomic rename alone keeps the cache whole
            pass

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)  # releases the lock


def _write_atomically(path: Path, text: str) -> None:
    """``path`` holds ``text`` whole or keeps what it held: a temporary file beside it, renamed."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}-", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _export(model_path: Path, backend: str, cache_dir: Path, final: Path) -> None:
    """The export itself (see :func:`export_onnx`), into a temporary folder renamed to ``final``."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.transformers import optimizer
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(model_path), device="cpu", model_kwargs={"attn_implementation": "eager"})
    mods = list(st)
    kinds = [type(m).__name__ for m in mods]
    if not (
        len(mods) >= 2
        and kinds[:2] == ["Transformer", "Pooling"]
        and _mean_pooling(mods[1])
        and all(k == "Normalize" for k in kinds[2:])
    ):
        raise ValueError(f"not exportable (needs Transformer + mean Pooling [+ Normalize]): {kinds}")
    bert: Any = mods[0].auto_model  # a transformers PreTrainedModel
    bert.eval()
    tok = st.tokenizer

    class Pooled(torch.nn.Module):
        def __init__(self, model: Any) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            h = self.model(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(h.dtype)
            mean = (h * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(mean, p=2, dim=1)

    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}-", dir=cache_dir))
    try:
        sample = getattr(st, "preprocess", st.tokenize)(_CHECK_TEXTS[:2])  # two lengths: the padding path is traced too
        args = (
            sample["input_ids"],
            sample["attention_mask"],
            sample.get("token_type_ids", torch.zeros_like(sample["input_ids"])),
        )
        names = ["input_ids", "attention_mask", "token_type_ids"]
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                Pooled(bert),
                args,
                str(tmp / "raw.onnx"),
                dynamo=False,
                opset_version=17,
                input_names=names,
                output_names=["sentence_embedding"],
                dynamic_axes={**{n: {0: "batch", 1: "sequence"} for n in names}, "sentence_embedding": {0: "batch"}},
            )
        cfg = bert.config
        with _QuietExport():
            fused = optimizer.optimize_model(
                str(tmp / "raw.onnx"),
                model_type="bert",
                num_heads=cfg.num_attention_heads,
                hidden_size=cfg.hidden_size,
                opt_level=1,
            )
            fused.save_model_to_file(str(tmp / "fused.onnx"))
            fusions = {k: v for k, v in fused.get_fused_operator_statistics().items() if v}
            if backend == "onnx-int8":
                quantize_dynamic(
                    str(tmp / "fused.onnx"),
                    str(tmp / "model.onnx"),
                    weight_type=QuantType.QInt8,
                    per_channel=True,
                    op_types_to_quantize=QUANTIZED_OPS,
                    extra_options={"DefaultTensorType": 1},
                )  # 1 = FLOAT
        if backend != "onnx-int8":
            (tmp / "fused.onnx").rename(tmp / "model.onnx")
        for leftover in ("raw.onnx", "fused.onnx"):
            (tmp / leftover).unlink(missing_ok=True)
        tok.backend_tokenizer.save(str(tmp / "tokenizer.json"))
        meta = {
            "source": str(model_path),
            "backend": backend,
            "recipe": EXPORT_RECIPE,
            "max_seq_length": int(cast(int, st.max_seq_length)),
            "pad_id": int(tok.pad_token_id or 0),
            "pad_token": str(tok.pad_token or "[PAD]"),
            "fused": fusions,
        }
        (tmp / "export.json").write_text(json.dumps(meta, indent=1))
        reference = st.encode(
            [t.replace("\n", " ") for t in _CHECK_TEXTS], normalize_embeddings=True, show_progress_bar=False
        )
        got = OnnxEncoder(tmp).encode([t.replace("\n", " ") for t in _CHECK_TEXTS])
        cosine = float(np.min(np.sum(reference * got, axis=1)))
        if cosine < MIN_COSINE[backend]:
            raise RuntimeError(f"the {backend} export's vectors differ from torch's (least cosine {cosine:.4f})")
        meta["check_cosine"] = round(cosine, 5)
        (tmp / "export.json").write_text(json.dumps(meta, indent=1))
        try:
            tmp.rename(final)
        except OSError:  # another process (without the lock: not POSIX) finished the same export first
            if not (final / "export.json").exists():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    log.info("exported the local embedding model to %s (%s, least cosine to torch %.4f)", final, backend, cosine)


class LocalEmbeddings(Embeddings):
    """The local sentence-transformers model (all-MiniLM-L6-v2) on the CPU, loaded on first use.

    Building it costs nothing: the model is loaded by the first embedding call, so a start
    with a built index, an unchanged reindex or a keyword-only search load neither torch
    nor ONNX Runtime (loading torch alone takes seconds).

    Backends (``[models] local_embedding_backend``): ``onnx-int8`` / ``onnx`` run the
    cached export (:func:`export_onnx`, made on first use) with ONNX Runtime, without
    torch; ``torch`` runs sentence-transformers (via langchain-huggingface) with at most
    ``threads`` torch threads and ``OMP_WAIT_POLICY=PASSIVE`` (set before torch loads, so
    idle OpenMP threads sleep instead of spinning on cores other processes need). An ONNX
    export or load that fails falls back to torch, logged in one line.

    Args:
        path: the model folder (:func:`graphs.models.local_embedding_path`).
        threads: inference threads (``[models] threads``), >= 1.
        backend: one of :data:`BACKENDS`.
        cache_dir: where ONNX exports are kept (default :func:`default_cache_dir`).
        name: the model's name in :attr:`embedder_id`.
        max_tokens: most word pieces read per text (:data:`MAX_TOKENS`), both backends;
            ``None``: the model's own ``max_seq_length`` (256). Recorded in :attr:`embedder_id`.

    Raises:
        ValueError: ``backend`` is unknown, ``max_tokens`` below 8.
    """

    in_process = True
    """The model computes in this process on its ``threads``: requests in flight at once
    would only share the same cores (a sync sends them one at a time)."""

    def __init__(
        self,
        path: str,
        threads: int = 1,
        backend: str = "auto",
        cache_dir: Path | None = None,
        name: str = "all-MiniLM-L6-v2",
        max_tokens: int | None = MAX_TOKENS,
    ) -> None:
        if max_tokens is not None and int(max_tokens) < 8:
            raise ValueError(f"local embeddings: max_tokens {max_tokens} is below 8 word pieces")
        self.max_tokens = int(max_tokens) if max_tokens is not None else None
        self.path = path
        self.threads = max(1, int(threads))
        self.backend = resolve_backend(backend)
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self.name = name
        self._model: Any = None
        self._lock = threading.Lock()

    @property
    def embedder_id(self) -> str:
        """Names the vector space: ``local:<name>`` for torch and fp32 ONNX (the same
        vectors), ``+int8`` for int8, ``@<max_tokens>`` when texts are cut at
        ``max_tokens`` word pieces (``local:all-MiniLM-L6-v2@128``): an index built with
        other vectors (another backend family, another cut) is then rebuilt, not reused.
        Known without loading the model; changes if a fallback to torch happened."""
        return (
            f"local:{self.name}"
            + ("+int8" if self.backend == "onnx-int8" else "")
            + (f"@{self.max_tokens}" if self.max_tokens is not None else "")
        )

    def load(self) -> None:
        """Load the model now (exporting it first if needed); see :attr:`embedder_id` afterwards."""
        self._loaded()

    def _loaded(self) -> Any:
        with self._lock:
            if self._model is None:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
                if self.backend != "torch":
                    try:
                        self._model = OnnxEncoder(
                            export_onnx(self.path, self.backend, self.cache_dir), self.threads, self.max_tokens
                        )
                    except Exception as exc:  # noqa: BLE001 - any failure: torch still works
                        log.warning(
                            "local embeddings: %s export/load failed (%s: %s); using torch instead",
                            self.backend,
                            type(exc).__name__,
                            (str(exc).splitlines() or [""])[0][:200],
                        )
                        self.backend = "torch"
                if self._model is None:
                    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # read when torch loads OpenMP
                    import torch
                    from langchain_huggingface import HuggingFaceEmbeddings

                    torch.set_num_threads(min(self.threads, torch.get_num_threads()))
                    model = HuggingFaceEmbeddings(
                        model_name=self.path,
                        model_kwargs={"device": "cpu"},
                        encode_kwargs={"normalize_embeddings": True},
                    )
                    if self.max_tokens is not None:  # the same cut as the ONNX encoder: the same vectors
                        client = model._client
                        client.max_seq_length = min(int(client.max_seq_length or self.max_tokens), self.max_tokens)
                    self._model = model
            return self._model

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Unit vectors of ``texts`` (loads the model on the first call)."""
        model = self._loaded()
        if isinstance(model, OnnxEncoder):
            # as langchain-huggingface does for the torch backend: the same vectors
            return model.encode([t.replace("\n", " ") for t in texts]).tolist()
        return model.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        """Unit vector of one query (loads the model on the first call)."""
        model = self._loaded()
        if isinstance(model, OnnxEncoder):
            return self.embed_documents([text])[0]
        return model.embed_query(text)
