"""One run's record: its artifacts and receipt, fed case by case and sealed once.

``trialrun run`` and the pytest plugin both record runs through ``RunRecorder`` so the files in
``<out>/<suite>/<run_id>/`` mean the same thing however the cases were driven. Cases are recorded
as they finish (run.jsonl and the receipt grow as the run goes); ``finish`` computes the summary
and the baseline gates and writes the remaining files. An interrupted run is finished too, but
its receipt is left without ``run_end`` so that it reads as truncated.
"""

from __future__ import annotations

import datetime
import functools
import importlib
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trialrun.artifacts.rundir import RunDirectory, new_run_id
from trialrun.base.results import CaseResult, RunResult
from trialrun.receipt.suite_run import SuiteReceipt

if TYPE_CHECKING:
    from trialrun.config import Suite
    from trialrun.config.models import Mode
    from trialrun.receipt.signing import Ed25519Signer

DEFAULT_OUT_DIR = Path("trialrun_out")


@dataclass(frozen=True)
class Baseline:
    """A loaded baseline document and the file it came from."""

    document: dict[str, Any]
    path: Path


@dataclass(frozen=True)
class RecordedRun:
    """A finished run as written to ``run_dir`` (by ``RunRecorder`` or ``trialrun merge``)."""

    result: RunResult
    summary: dict[str, Any]
    regression: dict[str, Any] | None
    run_dir: Path

    @property
    def passed(self) -> bool:
        from trialrun.config.quarantine import excused_ids

        gates_passed = self.regression is None or bool(self.regression["passed"])
        # A quarantined case runs and reports, but does not decide the run (quarantine.yaml).
        excused = excused_ids(self.summary.get("cases") or [])
        return gates_passed and all(
            case.passed or case.case_id in excused for case in self.result.cases
        )


class RunRecorder:
    def __init__(
        self,
        suite: Suite,
        *,
        mode: str,
        command_line: str,
        out_dir: Path | None = None,
        signer: Ed25519Signer | None = None,
        started_at: float | None = None,
        network: dict[str, Any] | None = None,
        today: datetime.date | None = None,
    ) -> None:
        """``network``: the run's network seal (``running.network.RunSeal.record``), for
        summary.json's ``run`` and the receipt's ``run_start``. ``today``: the day quarantine
        entries are judged against (default: today in UTC)."""
        self.suite = suite
        self.today = today
        self.mode = mode
        self.network = network
        self.started_at = time.time() if started_at is None else started_at
        self.agent_env = agent_env_names(suite, mode)
        out = out_dir or suite.output_dir or DEFAULT_OUT_DIR
        self._dir = RunDirectory(out, suite.config.suite_name, new_run_id(self.started_at))
        try:
            self._receipt = SuiteReceipt(
                self._dir.path / "receipt.jsonl",
                suite_name=suite.config.suite_name,
                command_line=command_line,
                repository=suite.root,
                signer=signer,
                agent_env=self.agent_env,
                network=network,
            )
        except BaseException:
            self._dir.abandon()
            raise
        self._case_views: list[tuple[str, dict[str, Any]]] = []
        self._warming = False

    def warm_up(self) -> None:
        """Load jinja2, the report template and the modules only the run's tail uses (JUnit
        with ElementTree, the baseline's gates) on a thread; call once the first agents start.

        They take noticeable CPU: the thread pays for them while the agents load their own
        imports, instead of the event loop stalling on them (or the run's tail, which waits for
        each). Started any earlier, it would only compete with getting the first agent started.
        """
        if not self._warming:
            self._warming = True
            threading.Thread(target=_warm_report, name="trialrun-report", daemon=True).start()

    @property
    def run_dir(self) -> Path:
        return self._dir.path

    def record(self, result: CaseResult) -> None:
        """Append a finished case to run.jsonl and the receipt (call in case order).

        Its part of report.html is prepared now too, while other cases' agents still run, so
        the run's single-threaded tail stays short.
        """
        from trialrun.report.html import case_view

        if result.runs is None:

            def write_trace() -> str:
                trace_sha256 = self._dir.write_case_events(result)
                view = case_view(len(self._case_views) + 1, result)
                self._case_views.append((result.case_id, view))
                return trace_sha256

            self._receipt.record_case(result, write_trace=write_trace)
            return
        # Run more than once: each run's trace and verdict, numbered, then the case's view.
        for number, attempt in enumerate(result.runs.runs, 1):
            write_run = functools.partial(self._dir.write_case_events, attempt, run=number)
            self._receipt.record_case(attempt, write_trace=write_run, attempt=number)
        self._case_views.append((result.case_id, case_view(len(self._case_views) + 1, result)))

    def finish(
        self,
        cases: Sequence[CaseResult],
        *,
        interrupted: bool,
        baseline: Baseline | None,
        shard: dict[str, Any] | None = None,
    ) -> RecordedRun:
        """Summary, gates, JUnit and report; seal the receipt unless the run was interrupted.

        ``shard``: the ``sharding.shard_info`` block of a shard run, which skips the gates:
        they only mean something over the whole suite, after ``trialrun merge``.
        """
        from trialrun.artifacts.baseline import compute_regression
        from trialrun.config.paths import display_path
        from trialrun.report.html import render_html
        from trialrun.report.junit import build_junit
        from trialrun.report.summary import build_summary

        suite = self.suite
        policy = suite.config.regression
        result = RunResult(
            run_id=self._dir.path.name,
            suite_name=suite.config.suite_name,
            suite_path=display_path(suite.suite_file),
            agent_command=[
                display_path(Path(part)) if os.path.isabs(part) else part
                for part in suite.agent_command
            ],
            mode=self.mode,
            cases=list(cases),
            started_at=self.started_at,
            finished_at=time.time(),
            interrupted=interrupted,
            cases_not_run=_not_run(suite, cases) if interrupted else [],
            git_sha=os.environ.get("GITHUB_SHA"),
            regression_policy=policy.to_dict(exclude_none=True) if policy else None,
            agent_env={part: list(names) for part, names in self.agent_env.items()},
            network=self.network,
            quarantine=self._quarantine(),
        )
        summary = build_summary(result, regression=None)
        regression: dict[str, Any] | None = None
        if shard is not None:
            summary["shard"] = shard
        elif baseline is not None and not interrupted:
            regression = compute_regression(
                baseline.document, summary, policy, display_path(baseline.path)
            )
            summary = build_summary(result, regression=regression)
        recorded = RecordedRun(result, summary, regression, self._dir.path)
        views = None
        if [case_id for case_id, _ in self._case_views] == [case.case_id for case in cases]:
            views = [view for _, view in self._case_views]
        comparison = None
        if baseline is not None and regression is not None:
            from trialrun.artifacts.comparing import baseline_comparison

            comparison = baseline_comparison(baseline.document, summary, regression)
        from trialrun.artifacts.history import past_runs

        history = past_runs(self._dir.path.parent, current=self._dir.path.name)
        page = render_html(result, summary, views, comparison, history)
        self._dir.finish(result, summary, build_junit(result), page)
        _write_recordings_diff(self._dir.path, result)
        if self.mode == "replay":
            from trialrun.artifacts.unused import write_unused

            write_unused(self._dir.path, suite, result.cases, interrupted=interrupted)
        # Sealed last: when a file above cannot be written, ``abandon`` leaves the receipt
        # truncated instead of vouching for a run whose artifacts are missing.
        if not interrupted:  # an interrupted run's receipt stays truncated: it reads as incomplete
            self._receipt.finish(result.cases, verified=recorded.passed)
        return recorded

    def _quarantine(self) -> dict[str, Any] | None:
        if not self.suite.quarantine:
            return None
        from trialrun.config import quarantine

        today = self.today if self.today is not None else quarantine.today_utc()
        return quarantine.quarantine_blocks(self.suite.quarantine, today)

    def abandon(self) -> None:
        """The run stopped on an error (a file it could not write): leave no temporary file
        and a receipt that reads as truncated."""
        self._dir.abandon()
        self._receipt.abandon()


def _write_recordings_diff(run_dir: Path, result: RunResult) -> None:
    """Record and update runs: ``recordings-diff.json``, the review of every re-recording."""
    if not any(case.run.recording_review is not None for case in result.cases):
        return
    from trialrun.base.fsutil import write_json
    from trialrun.base.redact import redact
    from trialrun.report.recordings import recordings_diff

    document = recordings_diff(result)
    if document is not None:
        # Recordings are redacted when written; the excerpts are redacted again all the same.
        write_json(run_dir / "recordings-diff.json", redact(document))


def _not_run(suite: Suite, cases: Sequence[CaseResult]) -> list[str]:
    finished = {case.case_id for case in cases}
    return [case.config.id for case in suite.cases if case.config.id not in finished]


_TAIL_MODULES = (
    "trialrun.report.junit",
    "trialrun.artifacts.baseline",
    "trialrun.artifacts.history",
    "trialrun.artifacts.unused",
    "encodings.utf_16_be",  # the codec canonical JSON sorts keys with, first used by run_end
)
"""Imported by ``finish``."""


def _warm_report() -> None:
    from trialrun.report.html import load_template

    load_template()
    for name in _TAIL_MODULES:
        importlib.import_module(name)


def agent_env_names(suite: Suite, mode: str) -> dict[str, list[str]]:
    """The names (never the values) of what the run's agents get from ``running.replay_env``:
    the environment of this process is the one the runner lays it over."""
    from trialrun.running.replay_env import agent_env, placeholders

    # Update mode runs its agents as record mode does.
    run_mode: Mode = (
        "replay" if mode == "replay" else "record" if mode in ("record", "update") else "live"
    )
    env = agent_env(run_mode, os.environ, suite.config.replay_env)
    return {"set": sorted(env), "placeholders": placeholders(env)}
