"""Pydantic models of suite.yaml and case files: every key RunLedger accepts, plus our extensions.

Unknown keys are errors everywhere (the loader adds a did-you-mean). Numbers are strict enough that
a typo cannot pass silently: budgets are non-negative, ids are strings.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    StringConstraints,
)

Mode = Literal["replay", "record", "live"]
AgentChannel = Literal["stdio", "fd"]
ModelProvider = Literal["openai", "anthropic"]

# MCP server names become file names and tool-name prefixes: keep them plain.
ServerName = Annotated[str, StringConstraints(strict=True, pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]*$")]

DEFAULT_IDLE_TIMEOUT_MS = 30_000
DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024
DEFAULT_TOOL_TIMEOUT_MS = 30_000
DEFAULT_KILL_GRACE_MS = 2_000


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Budgets(_Strict):
    max_wall_ms: StrictInt | None = Field(default=None, ge=0)
    max_tool_calls: StrictInt | None = Field(default=None, ge=0)
    max_tool_errors: StrictInt | None = Field(default=None, ge=0)
    max_tokens_out: StrictInt | None = Field(default=None, ge=0)
    max_cost_usd: StrictFloat | None = Field(default=None, ge=0)

    def merged(self, override: Budgets | None) -> Budgets:
        """Case budgets override suite budgets key by key."""
        if override is None:
            return self
        return Budgets(**{**self.model_dump(), **override.model_dump(exclude_none=True)})


class Regression(_Strict):
    min_pass_rate: StrictFloat | None = Field(
        default=None, ge=0, le=1, validation_alias=AliasChoices("min_pass_rate", "min_success_rate")
    )
    max_avg_wall_ms_delta_pct: StrictFloat | None = None
    max_p95_wall_ms_delta_pct: StrictFloat | None = Field(
        default=None,
        validation_alias=AliasChoices("max_p95_wall_ms_delta_pct", "max_p95_wall_ms_increase_pct"),
    )


class ReplaceText(_Strict):
    pattern: StrictStr
    replacement: StrictStr = ""
    flags: StrictStr = ""


class Normalization(_Strict):
    strip_keys: list[StrictStr] = Field(default_factory=list)
    strip_paths: list[StrictStr] = Field(default_factory=list)
    replace_paths: dict[str, Any] = Field(default_factory=dict)
    replace_text: list[ReplaceText] = Field(default_factory=list)

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


class McpServer(_Strict):
    """An MCP server the agent uses; the runner hands the agent a recording/replaying proxy."""

    command: list[StrictStr] = Field(min_length=1)
    env: dict[str, StrictStr] = Field(default_factory=dict)
    transport: Literal["stdio", "http"] = "stdio"
    """``http``: the runner serves the proxy over streamable HTTP and gives the agent its URL."""


class ModelGateway(_Strict):
    """Model calls go through trialrun's gateway (OpenAI- and Anthropic-compatible APIs)."""

    upstreams: dict[ModelProvider, StrictStr] = Field(default_factory=dict)
    """Where record and live mode forward, per provider (default: the providers' public APIs)."""
    normalization: Normalization | None = None
    """Extra rules applied to requests before matching, on top of the built-in volatile parts."""
    prices: StrictStr | None = None
    """A JSON or YAML file ``{model: {input_per_mtok, output_per_mtok}}`` for ``cost_usd``."""
    lenient: StrictBool = False
    """On a miss, serve the next recording of the same endpoint and warn instead of failing."""


class SuiteConfig(_Strict):
    suite_name: StrictStr
    agent_command: list[StrictStr] = Field(min_length=1)
    mode: Mode
    cases_path: StrictStr
    tool_registry: list[StrictStr]
    tool_module: StrictStr | None = None
    assertions: list[dict[str, Any]] = Field(default_factory=list)
    budgets: Budgets | None = None
    regression: Regression | None = None
    normalization: Normalization | None = None
    baseline_path: StrictStr | None = None
    output_dir: StrictStr | None = None
    # trialrun extensions
    idle_timeout_ms: StrictInt = Field(default=DEFAULT_IDLE_TIMEOUT_MS, gt=0)
    max_message_bytes: StrictInt = Field(default=DEFAULT_MAX_MESSAGE_BYTES, gt=0)
    tool_timeout_ms: StrictInt = Field(default=DEFAULT_TOOL_TIMEOUT_MS, gt=0)
    kill_grace_ms: StrictInt = Field(default=DEFAULT_KILL_GRACE_MS, ge=0)
    agent_channel: AgentChannel = "stdio"
    """``fd``: the protocol runs on the socket named by ``TRIALRUN_FD`` (``trialrun.agent``)."""
    mcp_servers: dict[ServerName, McpServer] = Field(default_factory=dict)
    model_gateway: ModelGateway | None = None


class CaseConfig(_Strict):
    id: StrictStr
    description: StrictStr | None = None
    input: dict[str, Any]
    cassette: StrictStr
    assertions: list[dict[str, Any]] | None = None
    budgets: Budgets | None = None
    normalization: Normalization | None = None


SUITE_KEYS = tuple(SuiteConfig.model_fields)
CASE_KEYS = tuple(CaseConfig.model_fields)
