"""Prototype: the suite and case records of ``trialrun.config.models`` as msgspec Structs.

Scratch code for the issue 16 evaluation (``bench/validator_bench.py``), not part of the package.
It imports nothing from trialrun so that timing its import measures msgspec alone. What msgspec
cannot say directly is written the way a migration would have to write it, so the bench can show
the cost:

* RunLedger's spellings: a Struct field has exactly one encoded name (``field(name=...)``), so
  each alias becomes a second field, and ``__post_init__`` refuses both spellings at once.
* ints refuse bools, NaN fails every bound and unknown keys are refused: msgspec does all three
  natively (``strict=True`` is the default of ``msgspec.convert``).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from msgspec import Meta, Struct, field

Count = Annotated[int, Meta(ge=0)]
Positive = Annotated[int, Meta(gt=0)]
Cost = Annotated[float, Meta(ge=0)]
Fraction = Annotated[float, Meta(ge=0, le=1)]
Command = Annotated[list[str], Meta(min_length=1)]
ServerName = Annotated[str, Meta(pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]*$")]


class Record(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Frozen, unknown keys refused; ``kw_only`` is not inherited, so each record repeats it."""


class Budgets(Record, kw_only=True):
    max_wall_ms: Count | None = None
    max_tool_calls: Count | None = None
    max_tool_errors: Count | None = None
    max_tokens_out: Count | None = None
    max_cost_usd: Cost | None = None


def _one_spelling(record: Struct, *pairs: tuple[str, str]) -> None:
    for name, alias in pairs:
        if getattr(record, name) is not None and getattr(record, alias) is not None:
            raise ValueError(f"`{name}` and its RunLedger spelling `{alias}` are both given")


class Regression(Record, kw_only=True):
    min_pass_rate: Fraction | None = None
    min_success_rate: Fraction | None = None
    """RunLedger's spelling of ``min_pass_rate``: a field of its own, there are no alias lists."""
    max_avg_wall_ms_delta_pct: float | None = None
    max_p95_wall_ms_delta_pct: float | None = None
    max_p95_wall_ms_increase_pct: float | None = None
    """RunLedger's spelling of ``max_p95_wall_ms_delta_pct``."""

    def __post_init__(self) -> None:
        _one_spelling(
            self,
            ("min_pass_rate", "min_success_rate"),
            ("max_p95_wall_ms_delta_pct", "max_p95_wall_ms_increase_pct"),
        )


class ReplaceText(Record, kw_only=True):
    pattern: str
    replacement: str = ""
    flags: str = ""


class Normalization(Record, kw_only=True):
    strip_keys: list[str] = field(default_factory=list)
    strip_paths: list[str] = field(default_factory=list)
    replace_paths: dict[str, Any] = field(default_factory=dict)
    replace_text: list[ReplaceText] = field(default_factory=list)


class McpServer(Record, kw_only=True):
    command: Command
    env: dict[str, str] = field(default_factory=dict)
    transport: Literal["stdio", "http"] = "stdio"


class ModelGateway(Record, kw_only=True):
    upstreams: dict[Literal["openai", "anthropic"], str] = field(default_factory=dict)
    normalization: Normalization | None = None
    prices: str | None = None
    lenient: bool = False


class SuiteConfig(Record, kw_only=True):
    suite_name: str
    agent_command: Command
    mode: Literal["replay", "record", "live"]
    cases_path: str
    tool_registry: list[str]
    tool_module: str | None = None
    assertions: list[dict[str, Any]] = field(default_factory=list)
    budgets: Budgets | None = None
    regression: Regression | None = None
    normalization: Normalization | None = None
    baseline_path: str | None = None
    output_dir: str | None = None
    idle_timeout_ms: Positive = 30_000
    max_message_bytes: Positive = 64 * 1024 * 1024
    tool_timeout_ms: Positive = 30_000
    kill_grace_ms: Count = 2_000
    agent_channel: Literal["stdio", "fd"] = "stdio"
    mcp_servers: dict[ServerName, McpServer] = field(default_factory=dict)
    model_gateway: ModelGateway | None = None


class CaseConfig(Record, kw_only=True):
    id: str
    description: str | None = None
    input: dict[str, Any]
    cassette: str
    assertions: list[dict[str, Any]] | None = None
    budgets: Budgets | None = None
    normalization: Normalization | None = None
