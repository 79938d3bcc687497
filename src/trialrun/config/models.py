"""The records of suite.yaml and case files: every key RunLedger accepts, plus our extensions.

Unknown keys are errors everywhere (the loader adds a did-you-mean). Numbers are strict enough that
a typo cannot pass silently: budgets are non-negative, ids are strings. ``config.spec`` explains
the field metadata and why these are not pydantic models.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

from trialrun.config.spec import (
    AnyValue,
    Bool,
    Float,
    Int,
    ListOf,
    MapOf,
    Nested,
    OneOf,
    Optional,
    Record,
    Str,
    key,
)

Mode = Literal["replay", "record", "live"]
AgentChannel = Literal["stdio", "fd"]
# The model gateway's built-in providers (gateway/providers/), in its order.
ModelProvider = Literal["openai", "anthropic", "azure", "gemini", "bedrock"]

# MCP server names become file names and tool-name prefixes: keep them plain.
SERVER_NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_-]*"

DEFAULT_IDLE_TIMEOUT_MS = 30_000
DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024
DEFAULT_TOOL_TIMEOUT_MS = 30_000
DEFAULT_KILL_GRACE_MS = 2_000

_COUNT = Optional(Int(ge=0))
_STRINGS = ListOf(Str())


@dataclass(frozen=True, kw_only=True)
class Budgets(Record):
    """Limits a case must stay within (suite-wide, overridden key by key per case)."""

    max_wall_ms: int | None = field(default=None, metadata=key(_COUNT))
    max_tool_calls: int | None = field(default=None, metadata=key(_COUNT))
    max_tool_errors: int | None = field(default=None, metadata=key(_COUNT))
    max_tokens_out: int | None = field(default=None, metadata=key(_COUNT))
    max_cost_usd: float | None = field(default=None, metadata=key(Optional(Float(ge=0))))

    def merged(self, override: Budgets | None) -> Budgets:
        """Case budgets override suite budgets key by key."""
        if override is None:
            return self
        return dataclasses.replace(self, **override.to_dict(exclude_none=True))


@dataclass(frozen=True, kw_only=True)
class Regression(Record):
    """The gates a run must pass against its baseline."""

    min_pass_rate: float | None = field(
        default=None, metadata=key(Optional(Float(ge=0, le=1)), "min_success_rate")
    )
    max_avg_wall_ms_delta_pct: float | None = field(default=None, metadata=key(Optional(Float())))
    max_p95_wall_ms_delta_pct: float | None = field(
        default=None, metadata=key(Optional(Float()), "max_p95_wall_ms_increase_pct")
    )


@dataclass(frozen=True, kw_only=True)
class ReplaceText(Record):
    """One regex replacement applied to text before outputs and tool args are compared."""

    pattern: str = field(metadata=key(Str()))
    replacement: str = field(default="", metadata=key(Str()))
    flags: str = field(default="", metadata=key(Str()))


@dataclass(frozen=True, kw_only=True)
class Normalization(Record):
    """What is stripped or replaced before outputs and tool args are compared."""

    strip_keys: list[str] = field(default_factory=list, metadata=key(_STRINGS))
    strip_paths: list[str] = field(default_factory=list, metadata=key(_STRINGS))
    replace_paths: dict[str, Any] = field(default_factory=dict, metadata=key(MapOf(AnyValue())))
    replace_text: list[ReplaceText] = field(
        default_factory=list, metadata=key(ListOf(Nested(ReplaceText)))
    )

    def merged(self, override: Normalization | None) -> Normalization:
        """Lists concatenate; replace_paths merge with the case winning."""
        if override is None:
            return self
        return Normalization(
            strip_keys=[*self.strip_keys, *override.strip_keys],
            strip_paths=[*self.strip_paths, *override.strip_paths],
            replace_paths={**self.replace_paths, **override.replace_paths},
            replace_text=[*self.replace_text, *override.replace_text],
        )

    @property
    def is_empty(self) -> bool:
        return not (self.strip_keys or self.strip_paths or self.replace_paths or self.replace_text)


@dataclass(frozen=True, kw_only=True)
class McpServer(Record):
    """An MCP server the agent uses; the runner hands the agent a recording/replaying proxy."""

    command: list[str] = field(metadata=key(ListOf(Str(), min_length=1)))
    env: dict[str, str] = field(default_factory=dict, metadata=key(MapOf(Str())))
    transport: Literal["stdio", "http"] = field(
        default="stdio", metadata=key(OneOf("stdio", "http"))
    )
    """``http``: the runner serves the proxy over streamable HTTP and gives the agent its URL."""


@dataclass(frozen=True, kw_only=True)
class ModelGateway(Record):
    """Model calls go through trialrun's gateway (OpenAI, Anthropic, Azure OpenAI, Gemini and
    Bedrock APIs)."""

    upstreams: dict[ModelProvider, str] = field(
        default_factory=dict,
        metadata=key(MapOf(Str(), key=OneOf("openai", "anthropic", "azure", "gemini", "bedrock"))),
    )
    """Where record and live mode forward, per provider (default: the providers' public APIs;
    Azure has none: its endpoint is the user's resource)."""
    normalization: Normalization | None = field(
        default=None, metadata=key(Optional(Nested(Normalization)))
    )
    """Extra rules applied to requests before matching, on top of the built-in volatile parts."""
    prices: str | None = field(default=None, metadata=key(Optional(Str())))
    """A JSON or YAML file ``{model: {input_per_mtok, output_per_mtok}}`` for ``cost_usd``."""
    lenient: bool = field(default=False, metadata=key(Bool()))
    """On a miss, serve the next recording of the same endpoint and warn instead of failing."""


@dataclass(frozen=True, kw_only=True)
class SuiteConfig(Record):
    """suite.yaml: RunLedger's keys, then trialrun's extensions."""

    suite_name: str = field(metadata=key(Str()))
    agent_command: list[str] = field(metadata=key(ListOf(Str(), min_length=1)))
    mode: Mode = field(metadata=key(OneOf("replay", "record", "live")))
    cases_path: str = field(metadata=key(Str()))
    tool_registry: list[str] = field(metadata=key(_STRINGS))
    tool_module: str | None = field(default=None, metadata=key(Optional(Str())))
    assertions: list[dict[str, Any]] = field(
        default_factory=list, metadata=key(ListOf(MapOf(AnyValue())))
    )
    budgets: Budgets | None = field(default=None, metadata=key(Optional(Nested(Budgets))))
    regression: Regression | None = field(default=None, metadata=key(Optional(Nested(Regression))))
    normalization: Normalization | None = field(
        default=None, metadata=key(Optional(Nested(Normalization)))
    )
    baseline_path: str | None = field(default=None, metadata=key(Optional(Str())))
    output_dir: str | None = field(default=None, metadata=key(Optional(Str())))
    # trialrun extensions
    idle_timeout_ms: int = field(default=DEFAULT_IDLE_TIMEOUT_MS, metadata=key(Int(gt=0)))
    max_message_bytes: int = field(default=DEFAULT_MAX_MESSAGE_BYTES, metadata=key(Int(gt=0)))
    tool_timeout_ms: int = field(default=DEFAULT_TOOL_TIMEOUT_MS, metadata=key(Int(gt=0)))
    kill_grace_ms: int = field(default=DEFAULT_KILL_GRACE_MS, metadata=key(Int(ge=0)))
    agent_channel: AgentChannel = field(default="stdio", metadata=key(OneOf("stdio", "fd")))
    """``fd``: the protocol runs on the socket named by ``TRIALRUN_FD`` (``trialrun.agent``)."""
    prestart: bool | None = field(default=None, metadata=key(Optional(Bool())))
    """Start each case's agent while the case before it runs (unset: in replay mode only)."""
    share_cpu: bool | None = field(
        default=None,
        metadata=key(
            Optional(Bool()),
            deprecated="has no effect (trialrun no longer changes which CPUs the agent runs on) "
            "and may be removed",
        ),
    )
    """Accepted so that older suites still load; the loader warns that it does nothing."""
    mcp_servers: dict[str, McpServer] = field(
        default_factory=dict,
        metadata=key(MapOf(Nested(McpServer), key=Str(pattern=SERVER_NAME_PATTERN))),
    )
    model_gateway: ModelGateway | None = field(
        default=None, metadata=key(Optional(Nested(ModelGateway)))
    )


@dataclass(frozen=True, kw_only=True)
class CaseConfig(Record):
    """One case file."""

    id: str = field(metadata=key(Str()))
    description: str | None = field(default=None, metadata=key(Optional(Str())))
    input: dict[str, Any] = field(metadata=key(MapOf(AnyValue())))
    cassette: str = field(metadata=key(Str()))
    assertions: list[dict[str, Any]] | None = field(
        default=None, metadata=key(Optional(ListOf(MapOf(AnyValue()))))
    )
    budgets: Budgets | None = field(default=None, metadata=key(Optional(Nested(Budgets))))
    normalization: Normalization | None = field(
        default=None, metadata=key(Optional(Nested(Normalization)))
    )


SUITE_KEYS = tuple(f.name for f in dataclasses.fields(SuiteConfig))
CASE_KEYS = tuple(f.name for f in dataclasses.fields(CaseConfig))
