"""What a run produced: plain data passed from the runner to checks and on to the reports.

Data flows one way: the runner fills an ``AgentRun`` per case, the checks turn it into a
``CaseResult``, and the reports render a ``RunResult``. None of these types know how they are
produced or printed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from trialrun.base.words import counted

Status = Literal["pass", "fail", "error", "flaky"]
"""``error`` means the harness or the agent process broke; ``fail`` means a check said no;
``flaky``: a case run more than once (``--repeat``, ``--retries``) both passed and failed."""

JsonObject = dict[str, Any]


HANDOFF_PREFIX = "handoff:"
"""The name of a handoff in the trace: ``handoff:<agent>`` (a tool-like event, never a call)."""


@dataclass(frozen=True, slots=True)
class RecordingPlace:
    """Where one recording lies: its kind (``tool``, ``mcp``, ``model``, ``http``), the
    absolute path of its cassette, its 1-based line there (what ``trialrun prune`` removes) and
    what it was for (as in ``unused_recording_tools``)."""

    kind: str
    path: str
    line: int
    name: str


@dataclass(slots=True)
class ToolCall:
    """One tool call the agent made and the answer it got."""

    call_id: str
    name: str
    args: JsonObject
    ok: bool
    result: Any = None
    error: str | None = None
    duration_ms: float = 0.0
    """Time the tool backend took to answer (0 for a call refused before reaching it)."""
    start_ms: float | None = None
    """When the call began, in milliseconds from the case's start (on the clock of ``wall_ms``);
    None where it was not recorded (a ``CaseResult`` built by an older trialrun or by hand)."""
    kind: str = "tool"
    """``handoff`` for a handoff between agents (named ``handoff:<agent>``), else ``tool``."""
    refused: bool = False
    """The harness refused the call before any tool saw it (not allowed, no recording, no
    cassette): a call, never a tool error. The case's failure already says it, once, as
    RunLedger counts it."""


@dataclass(slots=True)
class Usage:
    """Token and cost totals from the agent's ``usage`` messages (None: never reported)."""

    tokens_in: int | None = None
    tokens_out: int | None = None
    cost_usd: float | None = None
    model: str | None = None

    def add(self, tokens_in: int | None, tokens_out: int | None, cost_usd: float | None) -> None:
        if tokens_in is not None:
            self.tokens_in = (self.tokens_in or 0) + tokens_in
        if tokens_out is not None:
            self.tokens_out = (self.tokens_out or 0) + tokens_out
        if cost_usd is not None:
            self.cost_usd = (self.cost_usd or 0.0) + cost_usd


@dataclass(slots=True)
class ModelCall:
    """One model API call the agent made through trialrun's model gateway."""

    provider: str
    endpoint: str
    model: str | None
    ok: bool
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost_usd: float | None = None
    duration_ms: float = 0.0
    error: str | None = None


FAILURE_KINDS = (
    "agent_error",
    "agent_crashed",
    "timeout",
    "idle_timeout",
    "stdout_noise",
    "protocol_error",
    "message_too_large",
    "task_error",
    "tool_not_allowed",
    "tool_error",
    "cassette_error",
    "cassette_mismatch",
    "tool_registry_error",
    "network_sealed",
    "assertion_failed",
    "budget_exceeded",
    "interrupted",
    "pass_rate_below_minimum",
)
"""Every ``Failure.kind`` a run can end with (a verify plan's expectations are checked on it)."""

CHECK_ERROR_TYPES = ("json_schema_error", "tool_args_error")
"""Check failure types a built-in assertion reports when its own parameters cannot be applied."""


@dataclass(slots=True)
class Failure:
    """Why a case did not pass.

    ``kind`` is a stable machine name (``agent_error``, ``agent_crashed``, ``timeout``,
    ``idle_timeout``, ``stdout_noise``, ``protocol_error``, ``message_too_large``, ``task_error``,
    ``tool_not_allowed``, ``tool_error``, ``cassette_error``, ``cassette_mismatch``,
    ``tool_registry_error``, ``network_sealed`` (replay: a connection the seal refused, or an
    HTTP request to an address with no recording), ``assertion_failed``, ``budget_exceeded``,
    ``interrupted``, ``pass_rate_below_minimum`` (``--repeat``: too few of the case's runs
    passed));
    the first one to happen wins. ``status`` says whether it counts as a failure of the agent's
    behaviour (``fail``) or as a fault (``error``).
    """

    kind: str
    message: str
    status: Status = "fail"
    stderr_tail: str = ""


@dataclass(slots=True)
class CheckFailure:
    """One assertion or budget that said no."""

    type: str
    message: str
    expected: str | None = None
    observed: str | None = None
    details: JsonObject | None = None


@dataclass(slots=True)
class AgentRun:
    """Everything observed while one case's agent ran, before any check."""

    case_id: str
    output: JsonObject | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    wall_ms: int = 0
    """From ``task_start`` to the moment the case was decided."""
    startup_ms: int = 0
    """From spawning the agent to its ``task_start``: the head start a pre-started agent got."""
    failure: Failure | None = None
    stderr_tail: str = ""
    exit_code: int | None = None
    """The agent's exit status (negative: killed by that signal); None while unknown, or when
    trialrun stopped it after its final output (``stopped_by_trialrun``). An agent that exits
    the moment its output is sent may beat the stop or not: kept here for tests and the API,
    never in summary.json, receipts or JUnit, so that no artifact depends on that race."""
    stopped_by_trialrun: bool = False
    """After its final output the agent was still running and trialrun's stop signal ended it."""
    events: list[JsonObject] = field(default_factory=list)
    unused_recordings: int = 0
    unused_recording_tools: list[str] = field(default_factory=list)
    """What each unused recording was for (replay; empty when unknown): the tool cassette's by
    tool name, in file order, then ``mcp:<server>/<tool>`` and ``model:<model>`` ones."""
    unused_places: list[RecordingPlace] = field(default_factory=list)
    """Replay: the file and line of each unused recording (``unused-recordings.json``)."""
    stale_recordings: list[str] = field(default_factory=list)
    """Replay: ``<file>:<line>: <why>`` of each recording older than the suite's
    ``max_recording_age_days`` or of a model it no longer asks for (``running.staleness``)."""
    model_calls: list[ModelCall] = field(default_factory=list)
    """Calls seen by the model gateway (their tokens are in ``usage`` too)."""
    http_exchanges: int = 0
    """HTTP(S) exchanges the recorder forwarded and recorded, or answered from its cassette."""
    warnings: list[str] = field(default_factory=list)
    """What the case passed despite (a lenient replay's drift): in run.jsonl as ``log`` events
    of level ``warning``, in summary.json and report.html."""
    events_redacted: bool = False
    """The runner already redacted ``events``: reports need not do it again."""
    recording_kept: bool = False
    """Record mode: the case ended with a failure, so what it recorded was thrown away and its
    cassette (and MCP and model recordings) left as they were on disk."""
    recording_review: list[JsonObject] | None = None
    """Record and update modes, a case that ended cleanly: its old and new recording files
    compared, one block per file (``running.recording_review``); None otherwise."""

    @property
    def tool_errors(self) -> int:
        """Calls a tool answered with an error (refused calls are not the tool's errors)."""
        return sum(1 for call in self.tool_calls if not call.ok and not call.refused)

    @property
    def tool_call_count(self) -> int:
        """The calls of ``tool_calls`` that are tool calls (not handoffs)."""
        return sum(1 for call in self.tool_calls if call.kind != "handoff")


@dataclass(slots=True)
class CaseResult:
    """The verdict on one case."""

    case_id: str
    status: Status
    run: AgentRun
    assertions_total: int = 0
    check_failures: list[CheckFailure] = field(default_factory=list)
    failure: Failure | None = None
    cassette_path: str | None = None
    cassette_sha256: str | None = None
    runs: CaseRuns | None = None
    """Every run of a case run more than once (``--repeat``, ``--retries``); None: it ran once.
    The other fields then describe the case as a whole: its status, and the details (trace,
    failure) of its first failing run, else of its first run."""

    @property
    def passed(self) -> bool:
        """The case does not fail the run: it passed, or it is flaky and the suite lets that be."""
        if self.status == "flaky":
            return self.runs is not None and not self.runs.blocking
        return self.status == "pass"

    @property
    def failure_reason(self) -> str | None:
        return self.failure.message if self.failure else None

    def unused_recordings_by_tool(self) -> dict[str, int]:
        """Unused recordings per tool, in cassette order (empty when only the count is known)."""
        return count_names(self.run.unused_recording_tools)

    def tool_calls_by_name(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for call in self.run.tool_calls:
            counts[call.name] = counts.get(call.name, 0) + 1
        return counts

    def tool_errors_by_name(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for call in self.run.tool_calls:
            if not call.ok and not call.refused:
                counts[call.name] = counts.get(call.name, 0) + 1
        return counts


@dataclass(slots=True)
class CaseRuns:
    """The runs of one case run more than once, and what the gate made of them."""

    runs: list[CaseResult]
    """Each run's own result (its ``runs`` is None), in the order they ran."""
    repeat: int
    """``--repeat K``: how many runs were asked for (1 when the extra runs are retries)."""
    retries: int = 0
    """``--retries``: how many runs after the first were retries of a failure."""
    min_pass_rate: float | None = None
    """The ``min_case_pass_rate`` that gated the case, None when none applied."""
    blocking: bool = False
    """Whether the case fails the run (a flaky case: the suite's ``flaky`` policy or its rate)."""

    @property
    def passes(self) -> int:
        return sum(1 for run in self.runs if run.status == "pass")

    @property
    def pass_rate(self) -> float:
        return self.passes / len(self.runs)


@dataclass(slots=True)
class RunResult:
    """A whole suite run, as the reports see it."""

    run_id: str
    suite_name: str
    suite_path: str
    """The suite file as a user would type it: relative to the working directory when inside it."""
    agent_command: list[str]
    mode: str
    cases: list[CaseResult]
    started_at: float
    """Epoch seconds."""
    finished_at: float
    interrupted: bool = False
    cases_not_run: list[str] = field(default_factory=list)
    """An interrupted run: the ids of the cases it was given that did not finish, in order."""
    git_sha: str | None = None
    regression_policy: JsonObject | None = None
    """The suite's regression thresholds as configured (summary.json ``policy_snapshot``)."""
    agent_env: JsonObject | None = None
    """The variables trialrun set for the agents, names only: ``{"set": [...], "placeholders":
    [...]}`` (summary.json ``run.agent_env``); None where unknown (a merge of shards)."""
    network: JsonObject | None = None
    """Replay's network seal as the run applied it: ``{sealed, layers}`` (summary.json ``run``)."""
    quarantine: JsonObject | None = None
    """Case id -> its quarantine.yaml entry as judged on the run's day: ``{reason, owner,
    expires, expired}`` (summary.json's per-case ``quarantine``); None: no quarantine file."""

    def excused(self, case: CaseResult) -> JsonObject | None:
        """The quarantine entry that keeps ``case``'s failure from gating, or None: a case that
        passed, is not listed, or whose entry expired gates as any other."""
        entry = (self.quarantine or {}).get(case.case_id)
        if case.passed or not isinstance(entry, dict) or entry.get("expired"):
            return None
        return entry

    @property
    def cases_passed(self) -> int:
        return sum(1 for case in self.cases if case.status == "pass")

    @property
    def pass_rate(self) -> float:
        return self.cases_passed / len(self.cases) if self.cases else 0.0

    def not_run_text(self) -> str:
        """``2 of 3 cases did not run (t2, t3)``, ids shown up to ten; "" when none."""
        missing = self.cases_not_run
        if not missing:
            return ""
        shown = ", ".join(missing[:10]) + (", ..." if len(missing) > 10 else "")
        total = len(self.cases) + len(missing)
        return f"{len(missing)} of {counted(total, 'case')} did not run ({shown})"


def count_names(names: Iterable[str]) -> dict[str, int]:
    """How often each name occurs, in order of first occurrence."""
    counts: dict[str, int] = {}
    for name in names:
        counts[name] = counts.get(name, 0) + 1
    return counts


def case_start_timestamp(events: Iterable[JsonObject]) -> float | None:
    """The epoch seconds of a case's ``task_start`` event (None when it has none).

    Event timestamps minus this give a call's offset into the case, for calls recorded without
    ``ToolCall.start_ms`` (MCP calls, cases rebuilt from run.jsonl).
    """
    for event in events:
        if event.get("type") == "task_start":
            stamp = event.get("timestamp")
            if isinstance(stamp, int | float) and not isinstance(stamp, bool):
                return float(stamp)
            return None
    return None
