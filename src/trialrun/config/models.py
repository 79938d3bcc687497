"""The records of suite.yaml and case files: every key RunLedger accepts, plus our extensions.

Unknown keys are errors everywhere (the loader adds a did-you-mean). Numbers are strict enough that
a typo cannot pass silently: budgets are non-negative, ids are strings. ``config.spec`` explains
the fields and why these are not pydantic models.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from trialrun.config.spec import (
    AnyValue,
    Bool,
    Float,
    HostPort,
    Int,
    ListOf,
    MapOf,
    Nested,
    OneOf,
    Optional,
    Record,
    Str,
    WordOrRecord,
    keyed,
)

Mode = Literal["replay", "record", "live"]
FlakyPolicy = Literal["fail", "warn"]
AgentChannel = Literal["stdio", "fd"]
# The model gateway's built-in providers (gateway/providers/), in its order.
ModelProvider = Literal["openai", "anthropic", "azure", "gemini", "bedrock"]

# MCP server names become file names and tool-name prefixes: keep them plain.
SERVER_NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_-]*"
# What a POSIX shell accepts as a variable name: anything else cannot be exported reliably.
ENV_NAME_PATTERN = r"[A-Za-z_][A-Za-z0-9_]*"

DEFAULT_IDLE_TIMEOUT_MS = 30_000
DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024
DEFAULT_TOOL_TIMEOUT_MS = 30_000
DEFAULT_KILL_GRACE_MS = 2_000

_COUNT = Optional(Int(ge=0))
_STRINGS = ListOf(Str())
# A rate of 0 would let a case that never passed pass: the gate asks for more than nothing.
_CASE_PASS_RATE = Optional(Float(gt=0, le=1))


class Budgets(Record):
    """Limits a case must stay within (suite-wide, overridden key by key per case)."""

    max_wall_ms: int | None = keyed(_COUNT, default=None)
    max_tool_calls: int | None = keyed(_COUNT, default=None)
    max_tool_errors: int | None = keyed(_COUNT, default=None)
    max_tokens_out: int | None = keyed(_COUNT, default=None)
    max_cost_usd: float | None = keyed(Optional(Float(ge=0)), default=None)

    def merged(self, override: Budgets | None) -> Budgets:
        """Case budgets override suite budgets key by key."""
        if override is None:
            return self
        return dataclasses.replace(self, **override.to_dict(exclude_none=True))


class Regression(Record):
    """The gates a run must pass against its baseline."""

    min_pass_rate: float | None = keyed(
        Optional(Float(ge=0, le=1)), "min_success_rate", default=None
    )
    max_avg_wall_ms_delta_pct: float | None = keyed(Optional(Float()), default=None)
    max_p95_wall_ms_delta_pct: float | None = keyed(
        Optional(Float()), "max_p95_wall_ms_increase_pct", default=None
    )


class ReplaceText(Record):
    """One regex replacement applied to text before outputs and tool args are compared."""

    pattern: str = keyed(Str())
    replacement: str = keyed(Str(), default="")
    flags: str = keyed(Str(), default="")


class Normalization(Record):
    """What is stripped or replaced before outputs and tool args are compared."""

    strip_keys: list[str] = keyed(_STRINGS, default_factory=list)
    strip_paths: list[str] = keyed(_STRINGS, default_factory=list)
    replace_paths: dict[str, Any] = keyed(MapOf(AnyValue()), default_factory=dict)
    replace_text: list[ReplaceText] = keyed(ListOf(Nested(ReplaceText)), default_factory=list)

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


class McpServer(Record):
    """An MCP server the agent uses; the runner hands the agent a recording/replaying proxy."""

    command: list[str] = keyed(ListOf(Str(), min_length=1))
    env: dict[str, str] = keyed(MapOf(Str()), default_factory=dict)
    transport: Literal["stdio", "http"] = keyed(OneOf("stdio", "http"), default="stdio")
    """``http``: the runner serves the proxy over streamable HTTP and gives the agent its URL."""


class ModelGateway(Record):
    """Model calls go through trialrun's gateway (OpenAI, Anthropic, Azure OpenAI, Gemini and
    Bedrock APIs)."""

    upstreams: dict[ModelProvider, str] = keyed(
        MapOf(Str(), key=OneOf("openai", "anthropic", "azure", "gemini", "bedrock")),
        default_factory=dict,
    )
    """Where record and live mode forward, per provider (default: the providers' public APIs;
    Azure has none: its endpoint is the user's resource)."""
    normalization: Normalization | None = keyed(Optional(Nested(Normalization)), default=None)
    """Extra rules applied to requests before matching, on top of the built-in volatile parts."""
    prices: str | None = keyed(Optional(Str()), default=None)
    """A JSON or YAML file ``{model: {input_per_mtok, output_per_mtok}}`` for ``cost_usd``."""
    lenient: bool = keyed(Bool(), default=False)
    """On a miss, serve the next recording of the same endpoint and warn instead of failing."""
    models: list[str] = keyed(_STRINGS, default_factory=list)
    """The models the suite's agent asks for: a model recording of any other model is named
    stale by ``doctor`` and the run report (empty: not checked)."""


class NetworkAllow(Record):
    """``network: {allow: [host:port, ...]}``: sealed, and these destinations let through."""

    allow: list[str] = keyed(ListOf(HostPort()))


Network = Literal["sealed", "open"] | NetworkAllow


class SuiteConfig(Record):
    """suite.yaml: RunLedger's keys, then trialrun's extensions."""

    suite_name: str = keyed(Str())
    agent_command: list[str] = keyed(ListOf(Str(), min_length=1))
    mode: Mode = keyed(OneOf("replay", "record", "live"))
    cases_path: str = keyed(Str())
    tool_registry: list[str] = keyed(_STRINGS)
    tool_module: str | None = keyed(Optional(Str()), default=None)
    assertions: list[dict[str, Any]] = keyed(ListOf(MapOf(AnyValue())), default_factory=list)
    budgets: Budgets | None = keyed(Optional(Nested(Budgets)), default=None)
    regression: Regression | None = keyed(Optional(Nested(Regression)), default=None)
    normalization: Normalization | None = keyed(Optional(Nested(Normalization)), default=None)
    baseline_path: str | None = keyed(Optional(Str()), default=None)
    output_dir: str | None = keyed(Optional(Str()), default=None)
    # trialrun extensions
    idle_timeout_ms: int = keyed(Int(gt=0), default=DEFAULT_IDLE_TIMEOUT_MS)
    max_message_bytes: int = keyed(Int(gt=0), default=DEFAULT_MAX_MESSAGE_BYTES)
    tool_timeout_ms: int = keyed(Int(gt=0), default=DEFAULT_TOOL_TIMEOUT_MS)
    kill_grace_ms: int = keyed(Int(ge=0), default=DEFAULT_KILL_GRACE_MS)
    agent_channel: AgentChannel = keyed(OneOf("stdio", "fd"), default="stdio")
    """``fd``: the protocol runs on the socket named by ``TRIALRUN_FD`` (``trialrun.agent``)."""
    prestart: bool | None = keyed(Optional(Bool()), default=None)
    """Start each case's agent while the case before it runs (unset: in replay mode only)."""
    share_cpu: bool | None = keyed(
        Optional(Bool()),
        deprecated="has no effect (trialrun no longer changes which CPUs the agent runs on) "
        "and may be removed",
        default=None,
    )
    """Accepted so that older suites still load; the loader warns that it does nothing."""
    mcp_servers: dict[str, McpServer] = keyed(
        MapOf(Nested(McpServer), key=Str(pattern=SERVER_NAME_PATTERN)), default_factory=dict
    )
    model_gateway: ModelGateway | None = keyed(Optional(Nested(ModelGateway)), default=None)
    replay_env: dict[str, str | None] = keyed(
        MapOf(Optional(Str()), key=Str(pattern=ENV_NAME_PATTERN)), default_factory=dict
    )
    """Overrides of the environment replay and record give the agent (``running.replay_env``):
    a string sets the variable, null leaves it as the environment has it."""
    network: Network = keyed(WordOrRecord(OneOf("sealed", "open"), NetworkAllow), default="sealed")
    """Replay only: ``sealed`` (only trialrun's services), ``open``, or ``{allow: [host:port]}``."""
    min_case_pass_rate: float | None = keyed(_CASE_PASS_RATE, default=None)
    """``--repeat K``: the share of its runs each case must pass (a case file may set its own)."""
    flaky: FlakyPolicy = keyed(OneOf("fail", "warn"), default="fail")
    """Whether a case that both passed and failed (``--repeat``, ``--retries``) fails the run."""
    max_recording_age_days: int | None = keyed(Optional(Int(gt=0)), default=None)
    """Recordings older than this many days (by their ``recorded_at``) are named stale by
    ``doctor`` and the run report; they still replay (unset: no limit)."""


class CaseConfig(Record):
    """One case file."""

    id: str = keyed(Str())
    description: str | None = keyed(Optional(Str()), default=None)
    input: dict[str, Any] = keyed(MapOf(AnyValue()))
    cassette: str = keyed(Str())
    assertions: list[dict[str, Any]] | None = keyed(
        Optional(ListOf(MapOf(AnyValue()))), default=None
    )
    budgets: Budgets | None = keyed(Optional(Nested(Budgets)), default=None)
    normalization: Normalization | None = keyed(Optional(Nested(Normalization)), default=None)
    min_case_pass_rate: float | None = keyed(_CASE_PASS_RATE, default=None)
    """``--repeat K``: the share of its runs this case must pass (over the suite's)."""
