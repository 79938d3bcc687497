"""summary.json: RunLedger's schema_version 1 document, filled in, plus trialrun's own fields.

Every key RunLedger 0.2.3 writes is kept with the same nesting, so tools written for the peer
(``runledger diff``, ``baseline promote``, dashboards) keep reading our files. Differences:

* ``runledger_version`` stays ``"0.2.3"``: it names the *format* this document follows (the peer's
  baseline loader requires the key), not the program that wrote it; ``trialrun_version`` says that.
* Values the peer always left null are filled where we know them: per-case ``tokens_in``,
  ``tokens_out`` and ``cost_usd`` come from the agent's ``usage`` messages (null when it sent
  none), and ``steps`` counts the actions the agent took: one per tool call, plus one for the
  final answer when it gave one. Metrics aggregate over the cases that reported a value and are
  all null when none did. ``ci`` and ``suite_config_hash`` stay null.
* ``run.exit_status`` is ``error`` when any case errored or the run was interrupted (it is
  incomplete), else ``failed`` when any case failed or the regression gate failed, else
  ``success``. ``run.interrupted``, ``run.started_at`` and ``run.finished_at`` are ours.
* Per case, ours: ``failure_kind`` (a stable machine name), ``stderr_tail`` (the last lines,
  bounded), ``unused_recordings`` (cassette entries never consumed; they do not fail the case,
  RunLedger never reported them) and ``unused_recordings_by_tool`` (their count per tool;
  ``mcp:<server>/<tool>``, ``model:<model>`` and ``http:<METHOD> <url>`` for the MCP, model and
  HTTP recordings), ``http_exchanges`` (the HTTP exchanges the recorder forwarded and recorded,
  or answered from its recording), ``warnings`` (what the case passed despite: a lenient
  model replay's drift) and
  ``tool_sequence`` (the tools called, in call order: a baseline promoted from this summary keeps
  it, so report.html can align the tool sequence of a later run against it).
* A case quarantine.yaml lists has ``quarantine`` (``{reason, owner, expires, expired}``); while
  its entry holds it does not count in ``run.exit_status``, and an expired entry is named in
  ``run.warnings`` (docs/flaky.md).
* Redaction is applied only to text the agent produced (failure messages, stderr) and to the
  agent command (``redact_command``: a key passed as an argument). The peer
  redacted the whole document, which turned data keyed by tool name into ``"[REDACTED]"``
  (``tool_calls_by_name: {"reset_password": 2}``); counts are never redacted here.

Percentiles are nearest-rank, as the peer computes them: the ``ceil(q * n)``-th smallest value
(exact integer arithmetic), so p50 of ``[100, 200]`` is 100 and p95 of up to 19 values is the max.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from trialrun import __version__
from trialrun.base.linesredact import LineRedactor
from trialrun.base.redact import redact, redact_command, redact_text
from trialrun.base.results import CaseResult, CheckFailure, RunResult
from trialrun.config.paths import display_path
from trialrun.config.quarantine import excused_ids, expired_warnings
from trialrun.report.case_runs import runs_summary

SCHEMA_VERSION = 1
FORMAT_VERSION = "0.2.3"
"""The RunLedger release whose summary.json format this document follows."""

STDERR_TAIL_MAX_CHARS = 4000
STDERR_TAIL_MAX_LINES = 50

METRIC_NAMES = (
    "wall_ms",
    "tool_calls",
    "tool_errors",
    "tokens_in",
    "tokens_out",
    "cost_usd",
    "steps",
)


def build_summary(
    run: RunResult, *, regression: dict[str, Any] | None, cwd: Path | None = None
) -> dict[str, Any]:
    """The summary.json document for ``run``; ``regression`` is compute_regression's block."""
    base = Path.cwd() if cwd is None else cwd
    case_docs = [_case_summary(case, base) for case in run.cases]
    if run.quarantine:
        for doc in case_docs:
            if doc["id"] in run.quarantine:
                doc["quarantine"] = run.quarantine[doc["id"]]
    return summary_from_case_docs(run, case_docs, regression=regression, cwd=base)


def summary_from_case_docs(
    run: RunResult,
    case_docs: Sequence[dict[str, Any]],
    *,
    regression: dict[str, Any] | None,
    cwd: Path | None = None,
) -> dict[str, Any]:
    """The summary.json document around per-case documents already built (one per run case).

    ``trialrun merge`` passes the shards' case documents as written, so the merged file keeps
    them verbatim while the run block and the aggregates are computed here as for any run.
    """
    base = Path.cwd() if cwd is None else cwd
    case_docs = sorted(case_docs, key=lambda c: str(c["id"]))
    summary: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "generated_at": iso_utc(run.finished_at),
        "runledger_version": FORMAT_VERSION,
        "trialrun_version": __version__,
        "run": {
            "run_id": run.run_id,
            "mode": run.mode,
            "exit_status": exit_status(run, regression, excused=excused_ids(case_docs)),
            "git_sha": run.git_sha,
            "ci": None,
            "interrupted": run.interrupted,
            **({"cases_not_run": run.cases_not_run} if run.interrupted else {}),
            "started_at": iso_utc(run.started_at),
            "finished_at": iso_utc(run.finished_at),
            **({} if run.network is None else {"network": run.network}),
        },
        "suite": {
            "name": run.suite_name,
            "suite_path": display_path(run.suite_path, base),
            "agent_command": redact_command(
                _command_part(part, base) for part in run.agent_command
            ),
            "tool_mode": run.mode,
            "suite_config_hash": None,
            "cases_total": len(run.cases),
        },
        "aggregates": aggregates_of(case_docs),
        "cases": case_docs,
    }
    if run.agent_env is not None:
        summary["run"]["agent_env"] = run.agent_env
    if any(doc.get("recordings") is not None for doc in case_docs):
        from trialrun.report.recordings import recordings_totals

        summary["run"]["recordings"] = recordings_totals(case_docs)
    snapshot = policy_snapshot(run.regression_policy)
    if snapshot is not None:
        summary["policy_snapshot"] = snapshot
    if regression is not None:
        summary["regression"] = regression
    warnings = expired_warnings(case_docs)
    if warnings:
        summary["run"]["warnings"] = warnings
    return summary


def exit_status(
    run: RunResult, regression: dict[str, Any] | None, *, excused: frozenset[str] = frozenset()
) -> str:
    """``error`` > ``failed`` > ``success``; ``excused`` cases (quarantined) do not count."""
    statuses = {case.status for case in run.cases if case.case_id not in excused}
    if "error" in statuses or run.interrupted:
        return "error"
    blocked = any(
        case.status == "flaky" and not case.passed and case.case_id not in excused
        for case in run.cases
    )
    if (
        "fail" in statuses
        or blocked
        or (regression is not None and not regression.get("passed", True))
    ):
        return "failed"
    return "success"


def policy_snapshot(policy: dict[str, Any] | None) -> dict[str, Any] | None:
    """The peer's split: ``min_pass_rate`` in ``thresholds``, the wall gates in ``regression``.

    Accepts the flat thresholds (``Regression.to_dict()``) or an existing snapshot.
    """
    if not policy:
        return None
    if "thresholds" in policy or "regression" in policy:
        return dict(policy)
    flat = {key: value for key, value in policy.items() if value is not None}
    if not flat:
        return None
    snapshot: dict[str, Any] = {"thresholds": {"min_pass_rate": flat.get("min_pass_rate")}}
    others = {key: value for key, value in flat.items() if key != "min_pass_rate"}
    if others:
        snapshot["regression"] = others
    return snapshot


def is_assertion_failure(failure: CheckFailure) -> bool:
    return not failure.type.startswith("budget:")


def steps_of(case: CaseResult) -> int:
    """One step per tool call, plus one for the final answer."""
    return len(case.run.tool_calls) + (1 if case.run.output is not None else 0)


def stderr_tail_of(case: CaseResult) -> str:
    """The case's stderr tail, redacted, cut to the last lines and characters that stay readable."""
    text = case.failure.stderr_tail if case.failure and case.failure.stderr_tail else ""
    return bound_tail(text or case.run.stderr_tail)


def bound_tail(text: str) -> str:
    """``text`` redacted, then cut to its last lines: a secret that begins before the cut (a
    private key block's BEGIN line) is still recognised whole."""
    lines = LineRedactor().lines(text.splitlines())[-STDERR_TAIL_MAX_LINES:]
    # Once more as a whole, for what spans lines (a quoted value on the line after its name).
    return redact_text("\n".join(lines))[-STDERR_TAIL_MAX_CHARS:]


def nearest_rank(sorted_values: Sequence[float], percent: int) -> float:
    """The ``ceil(percent/100 * n)``-th smallest of a non-empty sorted sequence."""
    rank = max(1, -(-percent * len(sorted_values) // 100))
    return sorted_values[rank - 1]


def metric_stats(values: Sequence[float | None]) -> dict[str, float | None]:
    known = sorted(float(v) for v in values if v is not None)
    if not known:
        return {"min": None, "p50": None, "p95": None, "mean": None, "max": None}
    return {
        "min": known[0],
        "p50": nearest_rank(known, 50),
        "p95": nearest_rank(known, 95),
        "mean": sum(known) / len(known),
        "max": known[-1],
    }


def iso_utc(epoch_seconds: float) -> str:
    """``2026-12-02T09:06:43.146931Z``, the peer's timestamp form."""
    moment = datetime.fromtimestamp(epoch_seconds, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _command_part(part: str, cwd: Path) -> str:
    return display_path(part, cwd) if os.path.isabs(part) else part


def _case_summary(case: CaseResult, cwd: Path) -> dict[str, Any]:
    usage = case.run.usage
    asserted = [f for f in case.check_failures if is_assertion_failure(f)]
    failure_reason = _redacted_text(case.failure_reason)
    return {
        "id": case.case_id,
        "status": case.status,
        "wall_ms": case.run.wall_ms,
        "startup_ms": case.run.startup_ms,
        "tool_calls": case.run.tool_call_count,
        "tool_errors": case.run.tool_errors,
        "tokens_in": usage.tokens_in,
        "tokens_out": usage.tokens_out,
        "cost_usd": usage.cost_usd,
        "steps": steps_of(case),
        "tool_calls_by_name": case.tool_calls_by_name(),
        "tool_errors_by_name": case.tool_errors_by_name(),
        "tool_sequence": [call.name for call in case.run.tool_calls],
        "replay": {
            "cassette_path": (
                display_path(case.cassette_path, cwd) if case.cassette_path is not None else None
            ),
            "cassette_sha256": case.cassette_sha256,
        },
        "assertions": {"total": case.assertions_total, "failed": len(asserted)},
        "failure_reason": failure_reason,
        "failed_assertions": [
            {"type": f.type, "message": _redacted_text(f.message)} for f in asserted
        ]
        or None,
        "failure_kind": case.failure.kind if case.failure else None,
        "stderr_tail": _redacted_text(stderr_tail_of(case)) or None,
        "unused_recordings": case.run.unused_recordings,
        "http_exchanges": case.run.http_exchanges,
        "unused_recordings_by_tool": case.unused_recordings_by_tool(),
        "warnings": [_redacted_text(warning) or "" for warning in case.run.warnings],
        **({} if case.runs is None else runs_summary(case.runs, stderr_tail_of)),
        **_recordings_of(case),
        "stale_recordings": list(case.run.stale_recordings),
    }


def _recordings_of(case: CaseResult) -> dict[str, Any]:
    """Record and update runs: ``{"recordings": {...}}`` (``report.recordings``), else nothing."""
    if case.run.recording_review is None and not case.run.recording_kept:
        return {}
    from trialrun.report.recordings import case_recordings

    return {"recordings": case_recordings(case)}


def aggregates_of(case_docs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The ``aggregates`` block: status counts, pass rate and metric statistics of the cases."""

    def column(name: str) -> list[float | None]:
        return [doc[name] for doc in case_docs]

    def count(status: str) -> int:
        return sum(1 for doc in case_docs if doc["status"] == status)

    metrics: dict[str, Any] = {name: metric_stats(column(name)) for name in METRIC_NAMES}
    flaky = {"cases_flaky": count("flaky")} if count("flaky") else {}
    return {
        "cases_total": len(case_docs),
        "cases_pass": count("pass"),
        "cases_fail": count("fail"),
        "cases_error": count("error"),
        **flaky,
        "pass_rate": count("pass") / len(case_docs) if case_docs else 0.0,
        "metrics": metrics,
    }


def _redacted_text(text: str | None) -> str | None:
    if text is None:
        return None
    cleaned = redact(text)
    return cleaned if isinstance(cleaned, str) else str(cleaned)
