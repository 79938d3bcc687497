"""pytest plugin: ``pytest --trialrun evals/demo`` runs each case of a suite as a test.

Registered for every pytest run through the ``pytest11`` entry point, so without ``--trialrun``
it must cost nothing: this module imports only pytest and the standard library, and trialrun
itself is imported inside the hooks that run once the option is given.

How a session goes:

* ``pytest_configure`` resolves each ``--trialrun PATH`` to its suite file and adds that file to
  the collection arguments (pytest drops duplicates and overlaps), so the suites are collected
  next to the project's own tests, whatever ``testpaths`` says.
* The suite file becomes a ``SuiteFile`` node; a config error there is a collection error showing
  ``file:line: message``. Its cases become ``CaseItem``\\ s sorted by case id, so the node ids
  (``evals/demo/suite.yaml::t1``) are the same on every pytest-xdist worker.
* Running an item runs the case through ``trialrun.running.runner.run_case`` (again, as
  ``--trialrun-repeat K`` / ``--trialrun-retries N`` ask, like ``trialrun run``'s ``--repeat`` /
  ``--retries``); a case that did not pass fails with the expected / observed text of the
  console report, not a traceback. A case quarantined in quarantine.yaml (an entry that has not
  expired) that did not pass is an expected failure (xfail, a ``<skipped>`` in pytest's JUnit)
  whose reason names the entry, as ``trialrun run`` reports it.
* The verdict travels on the test report (as JSON, so it survives the trip from an xdist worker to
  the controller). At session end the process that saw every report writes one run directory
  per suite with the files ``trialrun run`` writes.
"""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Generator, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from trialrun.base.results import CaseResult
    from trialrun.config import Case, Suite
    from trialrun.running.preflight import Preflight

RESULT_ATTRIBUTE = "trialrun_case_result"
"""Name of the test report attribute carrying a case's verdict as JSON."""
SUITE_FILE_NAMES = ("suite.yaml", "suite.yml")
SESSION_PLUGIN_NAME = "trialrun-session"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("trialrun", "trialrun: run agent eval suites as tests")
    group.addoption(
        "--trialrun",
        action="append",
        default=[],
        metavar="PATH",
        dest="trialrun_paths",
        help="Run each case of the suite at PATH (a directory with suite.yaml, or the suite "
        "YAML file) as a test. Repeatable.",
    )
    group.addoption(
        "--trialrun-mode",
        choices=("replay", "record", "live"),
        default=None,
        dest="trialrun_mode",
        help="Override the suites' mode: replay cassettes, record them, or call tools live.",
    )
    group.addoption(
        "--trialrun-repeat",
        type=int,
        default=1,
        metavar="K",
        dest="trialrun_repeat",
        help="Run each case K times; it passes only when every run passed (flaky otherwise).",
    )
    group.addoption(
        "--trialrun-retries",
        type=int,
        default=0,
        metavar="N",
        dest="trialrun_retries",
        help="Run a failed case up to N more times (flaky when a retry passes).",
    )
    group.addoption(
        "--trialrun-out",
        default=None,
        metavar="DIR",
        dest="trialrun_out",
        help="Directory for run artifacts (default: each suite's output_dir, else ./trialrun_out).",
    )


def pytest_configure(config: pytest.Config) -> None:
    paths: list[str] = config.getoption("trialrun_paths") or []
    if not paths:
        return
    repeat, retries = config.getoption("trialrun_repeat"), config.getoption("trialrun_retries")
    if repeat < 1 or retries < 0 or (repeat > 1 and retries > 0):
        raise pytest.UsageError(
            "expected --trialrun-repeat K >= 1 or --trialrun-retries N >= 0, not both; found "
            f"--trialrun-repeat {repeat} and --trialrun-retries {retries}"
        )
    base = config.invocation_params.dir
    suite_files = [suite_file_for(base / path, path) for path in paths]
    out: str | None = config.getoption("trialrun_out")
    session = TrialrunSession(
        suite_files,
        mode=config.getoption("trialrun_mode"),
        out_dir=base / out if out else None,
        command_line=shlex.join(["pytest", *map(str, config.invocation_params.args)]),
        writes_artifacts=not hasattr(config, "workerinput"),  # xdist workers only report
    )
    config.pluginmanager.register(session, SESSION_PLUGIN_NAME)
    for suite_file in suite_files:
        if str(suite_file) not in config.args:
            config.args.append(str(suite_file))


def suite_file_for(path: Path, as_given: str) -> Path:
    """The suite YAML file a ``--trialrun`` argument names; a usage error when there is none."""
    if path.is_file():
        return path.resolve()
    for name in SUITE_FILE_NAMES:
        if (path / name).is_file():
            return (path / name).resolve()
    found = "a directory without suite.yaml or suite.yml" if path.is_dir() else "nothing"
    raise pytest.UsageError(
        f"--trialrun {as_given}: expected a suite directory (with suite.yaml) or a suite YAML "
        f"file, found {found} at {path}"
    )


class CaseFailed(Exception):
    """A case ran and did not pass; ``CaseItem.repr_failure`` turns it into readable text."""

    def __init__(self, result: CaseResult, case_file: str) -> None:
        super().__init__(result.case_id)
        self.result = result
        self.case_file = case_file


class SuiteFile(pytest.File):
    """A suite YAML file: collects one item per case, sorted by case id."""

    def collect(self) -> Iterator[CaseItem]:
        from trialrun.config import load_suite
        from trialrun.errors import TrialrunError
        from trialrun.running.preflight import preflight
        from trialrun.running.runner import resolve_mode

        try:
            suite = load_suite(self.path)
            # As `trialrun run`: a corrupt cassette is the suite's error, not a case's failure.
            checked = preflight(suite, resolve_mode(suite, self.config.getoption("trialrun_mode")))
        except TrialrunError as exc:
            raise self.CollectError(f"trialrun suite is invalid:\n{exc}") from exc
        for case in sorted(suite.cases, key=lambda c: c.config.id):
            yield CaseItem.from_parent(
                self, name=case.config.id, suite=suite, case=case, checked=checked
            )


class CaseItem(pytest.Item):
    """One case of a suite, run as a test."""

    def __init__(
        self, *, suite: Suite, case: Case, checked: Preflight | None = None, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.suite = suite
        self.case = case
        self.checked = checked
        self.result: CaseResult | None = None

    def runtest(self) -> None:
        import asyncio

        from trialrun.config.paths import display_path
        from trialrun.running.repeats import Repeats
        from trialrun.running.runner import RunOptions, resolve_mode

        mode = resolve_mode(self.suite, self.config.getoption("trialrun_mode"))
        repeats = Repeats(
            self.config.getoption("trialrun_repeat"), self.config.getoption("trialrun_retries")
        )
        options = RunOptions(mode=mode, preflight=self.checked, repeats=repeats)
        self.result = asyncio.run(self._run(options))
        if not self.result.passed:
            excuse = quarantine_excuse(self.suite, self.result)
            if excuse is not None:
                pytest.xfail(excuse)
            raise CaseFailed(self.result, display_path(self.case.file))

    async def _run(self, options: Any) -> CaseResult:
        import functools

        from trialrun.running.repeats import ONCE, run_again
        from trialrun.running.runner import run_case

        once = functools.partial(run_case, self.suite, self.case, options)
        first = await once()
        if options.repeats == ONCE:
            return first
        return await run_again(first, once, options.repeats, self.suite, self.case)

    def repr_failure(
        self,
        excinfo: pytest.ExceptionInfo[BaseException],
        style: Any = None,
    ) -> Any:
        if isinstance(excinfo.value, CaseFailed):
            return describe_failure(excinfo.value.result, excinfo.value.case_file)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.case.file, None, f"trialrun case {self.name}"


def quarantine_excuse(suite: Suite, result: CaseResult) -> str | None:
    """Why ``result`` does not count: its quarantine entry, when one holds today; else None."""
    from trialrun.config.quarantine import today_utc

    today = today_utc()
    for entry in suite.quarantine:
        if entry.case == result.case_id and not entry.expired(today):
            why = (result.failure_reason or "").splitlines()[:1] or ["see the run's report"]
            return (
                f"quarantined until {entry.expires.isoformat()} (owner {entry.owner}): "
                f"{entry.reason}. Status {result.status}: {why[0]}"
            )
    return None


def describe_failure(result: CaseResult, case_file: str) -> str:
    """The console report's lines for one case: each reason with expected / observed."""
    from trialrun.report.console import clean, detail_lines, failure_details
    from trialrun.report.summary import stderr_tail_of

    lines = [f"trialrun case {clean(result.case_id)} ({case_file}): {result.status.upper()}"]
    for detail in failure_details(result):
        lines += detail_lines(detail)
    tail = clean(stderr_tail_of(result)).splitlines()[-8:] if result.status == "error" else []
    if tail:
        lines += [f"  stderr:    (last {len(tail)} lines)", *(f"    {line}" for line in tail)]
    return "\n".join(lines)


class TrialrunSession:
    """Hooks active once ``--trialrun`` is given: collection, verdicts and the artifacts."""

    def __init__(
        self,
        suite_files: list[Path],
        *,
        mode: str | None,
        out_dir: Path | None,
        command_line: str,
        writes_artifacts: bool,
    ) -> None:
        self.suite_files = suite_files
        self.mode = mode
        self.out_dir = out_dir
        self.command_line = command_line
        self.writes_artifacts = writes_artifacts
        self.started_at = time.time()
        self.results: dict[str, dict[str, CaseResult]] = {}
        self.summary_lines: list[str] = []
        self.gates_failed = False

    def pytest_collect_file(self, file_path: Path, parent: pytest.Collector) -> SuiteFile | None:
        if file_path.suffix in (".yaml", ".yml") and file_path.resolve() in self.suite_files:
            return SuiteFile.from_parent(parent, path=file_path)
        return None

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        if call.when == "call" and isinstance(item, CaseItem) and item.result is not None:
            payload = {"suite": str(item.suite.suite_file), "result": asdict(item.result)}
            setattr(report, RESULT_ATTRIBUTE, json.dumps(payload, default=str))
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        payload = getattr(report, RESULT_ATTRIBUTE, None)
        if not isinstance(payload, str):
            return
        document = json.loads(payload)
        result = case_result_from_dict(document["result"])
        self.results.setdefault(document["suite"], {})[result.case_id] = result

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if not self.writes_artifacts:
            return
        from trialrun.errors import TrialrunError

        interrupted = exitstatus == pytest.ExitCode.INTERRUPTED
        for suite_file in sorted(self.results):
            try:
                line, gates_passed = self._write_run(Path(suite_file), interrupted)
            except (TrialrunError, OSError) as exc:
                self.summary_lines.append(f"{suite_file}: artifacts not written: {exc}")
                continue
            self.summary_lines.append(line)
            self.gates_failed |= not gates_passed
        if self.gates_failed and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not self.summary_lines:
            return
        terminalreporter.write_sep("-", "trialrun")
        for line in self.summary_lines:
            terminalreporter.write_line(line)

    def _write_run(self, suite_file: Path, interrupted: bool) -> tuple[str, bool]:
        """One run directory for the suite, recorded as ``trialrun run`` records it."""
        from trialrun.artifacts.baseline import load_baseline
        from trialrun.artifacts.recording import Baseline, RunRecorder
        from trialrun.config import load_suite
        from trialrun.config.paths import display_path
        from trialrun.report.console import gate_failures
        from trialrun.running.network import network_seal
        from trialrun.running.runner import resolve_mode

        suite = load_suite(suite_file)
        by_id = self.results[str(suite_file)]
        cases = [by_id[c.config.id] for c in suite.cases if c.config.id in by_id]
        mode = resolve_mode(suite, self.mode)
        seal = network_seal(suite, mode)  # what each case's run_case applied
        self.summary_lines.extend(f"{suite_file}: {warning}" for warning in seal.warnings())
        recorder = RunRecorder(
            suite,
            mode=mode,
            command_line=self.command_line,
            out_dir=self.out_dir,
            started_at=self.started_at,
            network=seal.record(),
        )
        try:
            for result in cases:
                recorder.record(result)
            found = suite.baseline_path
            baseline = Baseline(load_baseline(found), found) if found and found.is_file() else None
            recorded = recorder.finish(cases, interrupted=interrupted, baseline=baseline)
        except BaseException:
            recorder.abandon()  # no temporary file stays behind a file it could not write
            raise
        gates_passed = recorded.regression is None or bool(recorded.regression["passed"])
        line = (
            f"{suite.config.suite_name}: {recorded.result.cases_passed}/{len(cases)} cases passed; "
            f"artifacts written to {display_path(recorded.run_dir)}"
        )
        gates = [
            f"\n  gate {gate}: {message}" for gate, message in gate_failures(recorded.regression)
        ]
        return line + "".join(gates), gates_passed


def case_result_from_dict(document: dict[str, Any]) -> CaseResult:
    """Rebuild a ``CaseResult`` from ``dataclasses.asdict`` output (sent by an xdist worker)."""
    from trialrun.base.results import (
        AgentRun,
        CaseResult,
        CaseRuns,
        CheckFailure,
        Failure,
        ModelCall,
        RecordingPlace,
        ToolCall,
        Usage,
    )

    def failure(value: dict[str, Any] | None) -> Failure | None:
        return Failure(**value) if value is not None else None

    run_doc = document["run"]
    run = AgentRun(
        **{
            **run_doc,
            "tool_calls": [ToolCall(**call) for call in run_doc["tool_calls"]],
            "model_calls": [ModelCall(**call) for call in run_doc.get("model_calls", [])],
            "unused_places": [RecordingPlace(**p) for p in run_doc.get("unused_places", [])],
            "usage": Usage(**run_doc["usage"]),
            "failure": failure(run_doc["failure"]),
        }
    )
    runs_doc = document.get("runs")
    runs = None
    if runs_doc is not None:  # a case run more than once: each run's result, rebuilt alike
        each = [case_result_from_dict(one) for one in runs_doc["runs"]]
        runs = CaseRuns(**{**runs_doc, "runs": each})
    return CaseResult(
        **{
            **document,
            "run": run,
            "check_failures": [CheckFailure(**check) for check in document["check_failures"]],
            "failure": failure(document["failure"]),
            "runs": runs,
        }
    )
