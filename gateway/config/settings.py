"""Settings: an optional `clawgate.toml`, overridden by `CLAWGATE_*` environment variables.

Every option has a safe default. A bad value fails at start with one line that names the
setting the way the person would type it (environment variable and TOML key) and how to fix it,
because a stack trace from pydantic is not an answer to "why won't it start".
"""

from __future__ import annotations

import difflib
import json
import os
import re
import tomllib
from collections.abc import Iterator, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
)

from gateway.config.errors import describe
from gateway.config.exec import ExecSettings
from gateway.config.heartbeat import HeartbeatSettings, check_zone
from gateway.config.mcp import McpSettings
from gateway.config.media import MediaSettings
from gateway.config.memory import MemorySettings
from gateway.config.models import (
    MAIN_ENDPOINT,
    EndpointSettings,
    ModelOverride,
    ModelRef,
    comma_list,
    parse_model_ref,
)
from gateway.config.panel import PanelSettings
from gateway.config.scheduler import SchedulerSettings
from gateway.config.skills import SkillsSettings
from gateway.config.tasks import TasksSettings
from gateway.config.usage import BudgetSettings, ModelPrice
from gateway.config.web import WebSettings
from gateway.config.zones import machine_zone
from memory.atomic import BrokenFile, read_bounded

ENV_PREFIX = "CLAWGATE_"
CONFIG_FILE_ENV = "CLAWGATE_CONFIG"
DEFAULT_CONFIG_FILE = Path("clawgate.toml")
MAX_CONFIG_BYTES = 1024 * 1024  # a config file is a few KiB; past this it is refused unread
DEFAULT_MODELS = {"anthropic": "claude-sonnet-5-5", "openai": "gpt-5.5"}
KEY_ENV = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}


def openai_style_url(url: str) -> bool:
    """A base URL that only an OpenAI-compatible client can use: its path ends in /v1
    (Ollama's http://127.0.0.1:11434/v1, vLLM's, LM Studio's, llama.cpp's, OpenRouter's
    .../api/v1). Anthropic's SDK is given the host alone and adds /v1/messages itself."""
    from urllib.parse import urlsplit

    try:
        path = urlsplit(url.strip()).path
    except ValueError:
        return False
    return path.rstrip("/").endswith("/v1")


def provider_hint(provider: str, base_url: str | None, inferred: bool = False) -> str:
    """What to set when a custom endpoint is spoken to in the wrong API: "" when nothing is
    to be said. Doctor's fix line; the chat's refusal (gateway/pipeline/replies.py) says the
    same in the person's words."""
    if not base_url:
        return ""
    if provider == "anthropic":
        return (
            f"if {base_url} is an OpenAI-compatible server (Ollama, vLLM, LM Studio, "
            'llama.cpp), set CLAWGATE_LLM__PROVIDER=openai ([llm] provider = "openai"), '
            "and end the URL in /v1"
        )
    if inferred:
        return (
            "provider openai was inferred from the /v1 URL; for an Anthropic-compatible "
            "server set CLAWGATE_LLM__PROVIDER=anthropic and drop the /v1"
        )
    return ""


class ConfigError(Exception):
    """A setting is missing or invalid. `str()` is the one line shown to the person."""


def _lower(value: Any) -> Any:
    return value.strip().lower() if isinstance(value, str) else value


def _upper(value: Any) -> Any:
    return value.strip().upper() if isinstance(value, str) else value


# Choices are accepted in any case (`OpenAI`, `debug`) and stored in their canonical case.
AnyCase = BeforeValidator(_lower)
UpperCase = BeforeValidator(_upper)


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LLMSettings(_Section):
    provider: Annotated[Literal["anthropic", "openai"], AnyCase] = "anthropic"
    model: str = ""  # empty: the provider's default in DEFAULT_MODELS
    base_url: str | None = None
    api_key: SecretStr | None = None
    context_window: int = Field(200_000, ge=1_000)
    max_output_tokens: int = Field(4_096, ge=1)
    timeout_seconds: float = Field(120.0, gt=0)
    max_attempts: int = Field(4, ge=1, le=10)
    max_tool_rounds: int = Field(20, ge=1, le=200)
    # Model routing (gateway/config/models.py has the reference syntax). Tried in order when
    # a model is overloaded, fails with a 5xx or times out (never on a refused key).
    fallbacks: Annotated[list[str], NoDecode] = Field(default_factory=list)
    # Heartbeats, memory flushes, compaction, tidying and tasks; empty: the model above.
    background_model: str = ""
    # Keyed by person id: `[llm.workspaces.<person>] model = "..."`.
    workspaces: dict[str, ModelOverride] = Field(default_factory=dict)
    # Other servers, used as `<name>:<model>`.
    endpoints: dict[str, EndpointSettings] = Field(default_factory=dict)

    _fallbacks = field_validator("fallbacks", mode="before")(comma_list)

    @model_validator(mode="after")
    def _provider_from_url(self) -> LLMSettings:
        """Only `base_url` given, ending in /v1: the server speaks the OpenAI API (the
        Anthropic SDK adds /v1 itself, so such a URL could never work for it). A person who
        points clawgate at Ollama or vLLM should not also have to know the provider switch."""
        if (
            "provider" not in self.model_fields_set
            and self.base_url
            and openai_style_url(self.base_url)
        ):
            self.provider = "openai"
            self.model_fields_set.discard("provider")  # still not the person's choice
        return self

    @property
    def provider_inferred(self) -> bool:
        """The provider was read from the base URL, not set (doctor and the banner say so)."""
        return "provider" not in self.model_fields_set and self.provider == "openai"

    @field_validator("endpoints")
    @classmethod
    def _endpoint_names(cls, value: dict[str, EndpointSettings]) -> dict[str, EndpointSettings]:
        for name in value:
            if name in DEFAULT_MODELS or not name.replace("-", "").replace("_", "").isalnum():
                raise ValueError(
                    f"endpoint name {name!r}: use letters, digits, - and _, and not a provider name"
                )
        return value

    @property
    def resolved_model(self) -> str:
        return self.model or DEFAULT_MODELS[self.provider]

    def ref(self, text: str) -> ModelRef:
        """A model reference from these settings; `anthropic:x` on the `[llm]` provider's own
        public endpoint is the `[llm]` endpoint (its key settings apply)."""
        ref = parse_model_ref(text, self.endpoints)
        if ref.endpoint == self.provider and not self.base_url:
            return ModelRef(MAIN_ENDPOINT, ref.model)
        return ref

    def main_ref(self) -> ModelRef:
        return ModelRef(MAIN_ENDPOINT, self.resolved_model)


class PromptSettings(_Section):
    file_max_chars: int = Field(20_000, ge=200)
    total_max_chars: int = Field(60_000, ge=500)


class ToolSettings(_Section):
    """The file tools, and the quotas on what one turn's tool calls may do
    (docs/configuration.md, "Quotas"; gateway/agent/tools/quota.py)."""

    max_file_bytes: int = Field(1_048_576, ge=1_024)
    # Disk a workspace may use (files, history, trash, transcripts; not the recall index).
    workspace_max_bytes: int = Field(1_073_741_824, ge=1_048_576)
    # Disk a group's own area may use (with what it deleted into the trash).
    group_area_max_bytes: int = Field(10_485_760, ge=65_536)
    # Bytes the tool calls of one turn may put into files.
    turn_write_max_bytes: int = Field(16_777_216, ge=1_024)
    # Tool calls one model step may ask for, and one turn may make.
    step_max_tool_calls: int = Field(32, ge=1)
    turn_max_tool_calls: int = Field(200, ge=1)


class CompactionSettings(_Section):
    """When and how long sessions are compacted; see docs/memory.md, "Long sessions"."""

    reserve_tokens: int = Field(20_000, ge=0)  # compaction at context_window - reserve
    flush_margin_tokens: int = Field(4_000, ge=0)  # memory flush this much before that
    keep_recent_tokens: int = Field(20_000, ge=1_000)  # kept verbatim after a compaction
    memory_flush: bool = True
    notify: bool = True  # tell the person in one short line when a compaction happened
    timeout_seconds: float = Field(90.0, gt=0)  # per summarization attempt


class LimitsSettings(_Section):
    """What one person may ask of the gateway; see docs/configuration.md, "Limits and delivery"."""

    # Messages of one account accepted but not yet answered; beyond it: a polite reply.
    queue_per_person: int = Field(50, ge=1)
    # Messages of one account per rolling minute (0: no limit); beyond it: a polite reply.
    messages_per_minute: int = Field(60, ge=0)
    # Wall time of one whole turn (flush, compaction, every model call and tool round).
    turn_deadline_seconds: float = Field(600.0, gt=0)


class VersioningSettings(_Section):
    """Each workspace is a git repository with a commit per change (gateway/ops/versioning.py)."""

    enabled: bool = True  # needs the git binary; without it: one warning, versioning off


class HealthSettings(_Section):
    """The HTTP server of `clawgate run`: /healthz, /readyz, /metrics (pipeline/health.py)."""

    enabled: bool = True
    host: str = "127.0.0.1"  # 0.0.0.0 to let a Prometheus outside a container scrape it
    port: int = Field(8787, ge=0, le=65535)  # 0: any free port (tests)


DmPolicy = Annotated[Literal["pairing", "allowlist", "open", "disabled"], AnyCase]


class ChannelSettings(_Section):
    """What Telegram and Discord share: the token, who may talk, and groups."""

    token: SecretStr | None = None
    dm_policy: DmPolicy = "pairing"
    # Platform user ids always allowed in DMs (TOML list, or JSON in the environment).
    allow_from: Annotated[list[str], NoDecode] = Field(default_factory=list)
    # Groups/servers are off unless enabled; then only these chat/channel ids, on mention.
    groups_enabled: bool = False
    groups: Annotated[list[str], NoDecode] = Field(default_factory=list)
    # Live previews of replies while the model writes them; false: replies
    # appear only when complete.
    streaming: bool = True

    @field_validator("allow_from", "groups", mode="before")
    @classmethod
    def _ids_as_strings(cls, value: Any) -> Any:
        if isinstance(value, str) and value.lstrip().startswith("["):
            try:
                value = json.loads(value)
            except json.JSONDecodeError as exc:
                raise ValueError(f"not a JSON list: {exc.msg}") from exc
        if isinstance(value, str):
            value = [part for part in value.replace(",", " ").split() if part]
        if isinstance(value, list):
            return [str(item) for item in value]
        return value

    @property
    def configured(self) -> bool:
        return self.token is not None and bool(self.token.get_secret_value())


def _token_of_shape(value: SecretStr | None, shape: re.Pattern[str], what: str) -> SecretStr | None:
    """A token that cannot be one (`hello`, a pasted `Bot ...`, half a token) is a mistake to
    name at start, not something to try against the platform forever. Surrounding
    whitespace (a token read from a file) is dropped; the token itself is never shown."""
    if value is None:
        return None
    token = value.get_secret_value().strip()
    if token and not shape.fullmatch(token):
        raise ValueError(f"this does not look like {what}")
    return SecretStr(token)


# Telegram: the bot's numeric id, ':', then about 35 URL-safe characters (from @BotFather).
TELEGRAM_TOKEN = re.compile(r"[0-9]{3,20}:[A-Za-z0-9_-]{30,80}")
# Discord: three dot-separated URL-safe base64 parts (the first is the bot's id).
DISCORD_TOKEN = re.compile(r"[A-Za-z0-9_-]{18,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{20,}")


class TelegramSettings(ChannelSettings):
    # A self-hosted Bot API server, e.g. http://localhost:8081/bot (the token is appended).
    base_url: str = ""
    poll_timeout_seconds: int = Field(25, ge=0, le=50)
    # Private chats stream into a draft (sendMessageDraft); false: into an edited message.
    streaming_drafts: bool = True

    @field_validator("token")
    @classmethod
    def _telegram_shape(cls, value: SecretStr | None) -> SecretStr | None:
        return _token_of_shape(
            value,
            TELEGRAM_TOKEN,
            "a Telegram bot token (digits, ':', "
            "then about 35 letters, digits, '-' or '_'; from @BotFather)",
        )


class DiscordSettings(ChannelSettings):
    @field_validator("token")
    @classmethod
    def _discord_shape(cls, value: SecretStr | None) -> SecretStr | None:
        return _token_of_shape(
            value,
            DISCORD_TOKEN,
            "a Discord bot token (three parts "
            "separated by '.'; developer portal, Bot tab, Reset Token)",
        )


class ChatSettings(_Section):
    """`clawgate chat`, the terminal chat."""

    streaming: bool = True  # print the reply as it is written; false: only when complete


class Settings(BaseSettings):
    # hide_input_in_errors: a refused value may be a token or key (`--debug` prints the error).
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter="__",
        extra="forbid",
        case_sensitive=False,
        hide_input_in_errors=True,
    )

    # Where the per-person workspaces live; default: a per-user data directory (see
    # default_workspaces_dir), so the same assistant answers wherever clawgate starts.
    workspaces_dir: Path = Field(default_factory=lambda: default_workspaces_dir())
    # IANA zone for daily notes and the time shown to the model; empty: the machine's zone.
    timezone: str = ""
    # The person the local terminal chat belongs to (their workspace directory name).
    owner: str = Field("owner", pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    # On SIGTERM / Ctrl-C: how long running turns may finish before they are left pending
    # for the next start (well under Docker's 10 s stop timeout).
    stop_grace_seconds: float = Field(5.0, ge=0, le=300)
    log_level: Annotated[Literal["DEBUG", "INFO", "WARNING", "ERROR"], UpperCase] = "INFO"
    log_format: Annotated[Literal["text", "json"], AnyCase] = "text"
    # Extra strings masked in every log line (tokens and provider keys always are); in the
    # environment a comma-separated list.
    log_redact: Annotated[list[str], NoDecode] = Field(default_factory=list)
    # Days the id of an answered or refused message is kept to recognise a redelivery (its
    # text is dropped once answered); each chat's newest id is kept for catch-up.
    inbox_retention_days: float = Field(7.0, gt=0, le=3650)
    llm: LLMSettings = Field(default_factory=LLMSettings)
    prompt: PromptSettings = Field(default_factory=PromptSettings)
    tools: ToolSettings = Field(default_factory=ToolSettings)
    memory: MemorySettings = Field(default_factory=MemorySettings)
    telegram: TelegramSettings = Field(default_factory=TelegramSettings)
    discord: DiscordSettings = Field(default_factory=DiscordSettings)
    chat: ChatSettings = Field(default_factory=ChatSettings)
    compaction: CompactionSettings = Field(default_factory=CompactionSettings)
    heartbeat: HeartbeatSettings = Field(default_factory=HeartbeatSettings)
    versioning: VersioningSettings = Field(default_factory=VersioningSettings)
    limits: LimitsSettings = Field(default_factory=LimitsSettings)
    health: HealthSettings = Field(default_factory=HealthSettings)
    skills: SkillsSettings = Field(default_factory=SkillsSettings)  # gateway/config/skills.py
    mcp: McpSettings = Field(default_factory=McpSettings)  # gateway/config/mcp.py
    panel: PanelSettings = Field(default_factory=PanelSettings)  # web control panel
    scheduler: SchedulerSettings = Field(default_factory=SchedulerSettings)  # reminders
    budget: BudgetSettings = Field(default_factory=BudgetSettings)  # gateway/config/usage.py
    # USD per million tokens, keyed by model name; on top of gateway/stores/prices.py's table.
    prices: dict[str, ModelPrice] = Field(default_factory=dict)
    media: MediaSettings = Field(default_factory=MediaSettings)  # voice, photos, documents
    web: WebSettings = Field(default_factory=WebSettings)  # web_fetch, web_search
    exec: ExecSettings = Field(default_factory=ExecSettings)  # the exec tool (docs/exec.md)
    tasks: TasksSettings = Field(default_factory=TasksSettings)  # background tasks (docs/tasks.md)

    @property
    def inbox_retention(self) -> timedelta:
        """How long a handled inbox entry is kept: what the state database is opened with
        (`StateDB.for_root(settings.workspaces_dir, inbox_retention=...)`; the settings stay
        below the stores, so they do not open it themselves)."""
        return timedelta(days=self.inbox_retention_days)

    @field_validator("log_redact", mode="before")
    @classmethod
    def _comma_list(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("workspaces_dir")
    @classmethod
    def _home(cls, value: Path) -> Path:
        return value.expanduser()  # "~/..." in clawgate.toml means the home directory

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        return check_zone(value) or ""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # The TOML file arrives as init kwargs; the environment must win over it.
        return (env_settings, init_settings)

    def zone(self) -> ZoneInfo:
        """The gateway's zone: `timezone`, else the machine's (named, so it follows DST)."""
        if self.timezone:
            return ZoneInfo(self.timezone)
        return machine_zone()

    def zone_of(self, person_id: str) -> ZoneInfo:
        """A person's zone: `[scheduler.workspaces.<id>] timezone`, else
        `[heartbeat.workspaces.<id>] timezone`, else the gateway's. Their reminders and their
        nightly memory passes (tidying, consolidation) follow it."""
        own = self.scheduler.workspaces.get(person_id)
        beat = self.heartbeat.workspaces.get(person_id)
        name = (own.timezone if own else None) or (beat.timezone if beat else None)
        return ZoneInfo(name) if name else self.zone()

    def endpoint_key(self, ref: ModelRef) -> str:
        """The key for a routed model's endpoint, or a ConfigError naming what to set."""
        if ref.endpoint == MAIN_ENDPOINT:
            return self.api_key()
        endpoint = self.llm.endpoints.get(ref.endpoint)
        provider = endpoint.provider if endpoint else ref.endpoint
        if (
            endpoint is not None
            and endpoint.api_key is not None
            and endpoint.api_key.get_secret_value()
        ):
            return endpoint.api_key.get_secret_value()
        value = os.environ.get(KEY_ENV[provider], "")
        if value:
            return value
        if endpoint is not None and endpoint.base_url:
            return "no-key"
        where = (
            f"[llm.endpoints.{ref.endpoint}] api_key"
            if endpoint is not None
            else f"{KEY_ENV[provider]}"
        )
        raise ConfigError(
            f"no API key for the model {ref.label()}: set {where} (it is named "
            "in [llm] fallbacks, background_model or workspaces)"
        )

    def api_key(self) -> str:
        """The provider key, or a ConfigError naming the variable to set."""
        if self.llm.api_key is not None and self.llm.api_key.get_secret_value():
            return self.llm.api_key.get_secret_value()
        env_name = KEY_ENV[self.llm.provider]
        value = os.environ.get(env_name, "")
        if value:
            return value
        if self.llm.base_url:
            return "no-key"  # local servers (Ollama, vLLM) ignore it, the SDKs want one
        other = "openai" if self.llm.provider == "anthropic" else "anthropic"
        raise ConfigError(
            f"no API key for the {self.llm.provider} provider: set {env_name}=... "
            f"(or CLAWGATE_LLM__PROVIDER={other} with {KEY_ENV[other]}, "
            f"or CLAWGATE_LLM__BASE_URL for a local OpenAI/Anthropic-compatible server)"
        )


# A workspaces root made by an older clawgate in the current directory (its old default).
LEGACY_WORKSPACES_DIR = Path("workspaces")


def user_workspaces_dir() -> Path:
    """The per-user default: `$XDG_DATA_HOME/clawgate/workspaces` on Linux
    (`~/.local/share/...`), the platform's application-data folder elsewhere."""
    from platformdirs import user_data_path

    return user_data_path("clawgate", appauthor=False) / "workspaces"


def _holds_workspaces(root: Path) -> bool:
    """A root with a state database or a seeded workspace (not just the repo's README)."""
    try:
        if (root / ".gateway").is_dir():
            return True
        return any(
            (child / ".clawgate-workspace").exists() for child in root.iterdir() if child.is_dir()
        )
    except OSError:
        return False


def default_workspaces_dir() -> Path:
    """The workspaces root when neither clawgate.toml nor CLAWGATE_WORKSPACES_DIR names one.

    The per-user data directory, independent of the current directory. One exception keeps
    an existing assistant: while that directory does not exist yet, a `./workspaces` holding
    workspaces made by an older clawgate (whose default it was) is used, and the start banner
    says so (see describe_workspaces_dir).
    """
    home = user_workspaces_dir()
    legacy = Path.cwd() / LEGACY_WORKSPACES_DIR
    if not home.exists() and _holds_workspaces(legacy):
        return legacy
    return home


def describe_workspaces_dir(settings: Settings) -> str:
    """For start banners: the root, and where that choice came from when it was not set."""
    root = settings.workspaces_dir.resolve()
    if "workspaces_dir" in settings.model_fields_set:
        return str(root)
    if root != user_workspaces_dir().resolve():
        return (
            f"{root} (found here, made by an older clawgate; set workspaces_dir = "
            f'"{root}" in clawgate.toml or CLAWGATE_WORKSPACES_DIR to use it from '
            "anywhere)"
        )
    return (
        f"{root} (the per-user default; set workspaces_dir in clawgate.toml or "
        "CLAWGATE_WORKSPACES_DIR to change it)"
    )


def config_path() -> Path:
    return Path(os.environ.get(CONFIG_FILE_ENV, "") or DEFAULT_CONFIG_FILE)


def load_settings(path: Path | None = None, **overrides: Any) -> Settings:
    """Read the TOML file (if present) and the environment; raise ConfigError on bad input.

    The error lists every problem at once, each where the person wrote it (the file, line and
    TOML key, or the variable; gateway/config/errors.py), and the `CLAWGATE_*` variables that
    are no setting (otherwise a warning at start)."""
    path = path or config_path()
    file_values: dict[str, Any] = {}
    text = ""
    if path.exists():
        try:
            text = read_bounded(path, MAX_CONFIG_BYTES).decode("utf-8")
            file_values = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(
                f"{path} is not valid TOML: {exc}. Fix the file or remove it."
            ) from exc
        except (UnicodeDecodeError, OSError, BrokenFile) as exc:
            raise ConfigError(f"cannot read {path}: {exc}. Fix the file or remove it.") from exc
        except (RecursionError, ValueError, MemoryError) as exc:  # nested 30,000 deep, a
            # 5,000-digit number: tomllib raises these rather than TOMLDecodeError
            reason = (
                "nested too deep"
                if isinstance(exc, RecursionError)
                else f"{type(exc).__name__}: {str(exc)[:120]}"
            )
            raise ConfigError(f"cannot read {path}: {reason}. Fix the file or remove it.") from None
    given = {**file_values, **overrides}  # overrides: from code (tests), not the file
    try:
        return Settings(**given)
    except ValidationError as exc:
        problems = describe(
            exc,
            model=Settings,
            prefix=ENV_PREFIX,
            file_values=file_values,
            file_text=text,
            path=path,
            environ=os.environ,
        )
        named = {problem.split(" ", 1)[0].split("=", 1)[0] for problem in problems}
        problems += [
            warning
            for warning in unknown_env_vars(os.environ)
            if warning.split(" ", 1)[0] not in named
        ]
        raise ConfigError(_problem_lines(problems)) from exc
    except SettingsError as exc:
        # pydantic-settings could not even decode a variable (bad JSON for a list, say).
        raise ConfigError(f"{exc}. Fix that environment variable or {path}.") from exc
    except (RecursionError, ValueError, TypeError, OverflowError) as exc:
        raise ConfigError(
            f"cannot use {path} or the environment: {type(exc).__name__}: {str(exc)[:160]}"
        ) from None


def _problem_lines(problems: list[str]) -> str:
    """One problem: one line. Several: a count, then one line each."""
    if len(problems) == 1:
        return f"invalid setting: {problems[0]} (every option: docs/configuration.md)"
    lines = "".join(f"\n  {problem}" for problem in problems)
    return f"{len(problems)} problems in the settings (every option: docs/configuration.md):{lines}"


def known_env_names(
    model: type[BaseModel] = Settings, prefix: str = ENV_PREFIX
) -> Iterator[tuple[str, bool]]:
    """(variable name, takes sub-keys) for every setting; sub-keys: a table of named entries
    such as `[heartbeat.workspaces.<person>]`."""
    for name, field in model.model_fields.items():
        env_name = f"{prefix}{name.upper()}"
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            yield from known_env_names(annotation, env_name + "__")
        else:
            origin = getattr(annotation, "__origin__", None)
            yield env_name, origin is dict


def unknown_env_vars(environ: Mapping[str, str]) -> list[str]:
    """One warning per `CLAWGATE_*` variable that is no setting, with the closest name."""
    known = dict(known_env_names())
    names = [*known, CONFIG_FILE_ENV]
    warnings = []
    for variable in sorted(environ):
        upper = variable.upper()
        if not upper.startswith(ENV_PREFIX) or upper in known or upper == CONFIG_FILE_ENV:
            continue
        if any(takes_keys and upper.startswith(name + "__") for name, takes_keys in known.items()):
            continue
        close = difflib.get_close_matches(upper, names, n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]}?)" if close else ""
        warnings.append(f"{variable} is not a setting and is ignored{hint}")
    return warnings
