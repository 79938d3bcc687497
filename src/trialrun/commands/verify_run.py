"""Carry out a verify plan: repeat the clean suite, run each breakage, check the gate noticed.

Every step is one ``Check`` with the problems it found. The clean suite must pass ``repeat``
times with identical verdicts and tool sequences (anything else is flakiness, shown per case).
A breakage must produce exactly its expected failures: a missed expectation and a failure
nobody expected both fail the check. With ``recovery`` the clean suite runs again after each
breakage and must pass. Suites run in-process, always in replay mode, so verify is deterministic
and needs no network.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from trialrun.base import leftovers
from trialrun.base.canonjson import dumps
from trialrun.base.fsutil import atomic_write_text
from trialrun.base.results import CaseResult
from trialrun.commands.verify_plan import Breakage, FilePatch, VerifyPlan
from trialrun.config import Suite, load_suite
from trialrun.errors import ConfigError
from trialrun.running.runner import RunOptions, RunProgress, run_suite


@dataclass
class Check:
    name: str
    """``repeat``, ``regression:<name>``, ``recovery:<name>`` or ``limits``."""
    passed: bool = True
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def fail(self, problem: str) -> None:
        self.passed = False
        self.problems.append(problem)


@dataclass
class VerifyResult:
    checks: list[Check]
    seconds: float

    @property
    def passed(self) -> bool:
        return all(check.passed for check in self.checks)


Progress = Callable[[Check], None]


def run_plan(plan: VerifyPlan, on_check: Progress | None = None) -> VerifyResult:
    """Run every step of ``plan``; a step past ``limits.max_seconds`` is not started."""
    started = time.monotonic()
    budget = plan.config.limits.max_seconds if plan.config.limits else None
    checks: list[Check] = []

    def record(check: Check) -> None:
        checks.append(check)
        if on_check is not None:
            on_check(check)

    steps: list[tuple[str, Callable[[Check], None]]] = [
        ("repeat", lambda check: _check_repeat(plan, check))
    ]
    for step in plan.config.regressions:
        steps.append((f"regression:{step.name}", _breakage_step(plan, step)))
        if plan.config.recovery:
            steps.append((f"recovery:{step.name}", lambda check: _check_clean(plan.suite, check)))
    skipped: list[str] = []
    for name, action in steps:
        if budget is not None and time.monotonic() - started > budget:
            skipped.append(name)
            continue
        check = Check(name)
        check_started = time.monotonic()
        action(check)
        check.seconds = time.monotonic() - check_started
        record(check)
    elapsed = time.monotonic() - started
    if budget is not None:
        limit = Check("limits", seconds=0.0)
        if elapsed > budget:
            limit.fail(f"verify took {elapsed:.1f}s, limit max_seconds={budget:g}")
        if skipped:
            limit.fail("not run because the time limit was reached: " + ", ".join(skipped))
        record(limit)
    return VerifyResult(checks, elapsed)


def run_cases(suite: Suite, env: dict[str, str] | None = None) -> list[CaseResult]:
    """One replay run of ``suite`` with ``env`` laid over the current environment."""
    merged = None if env is None else {**os.environ, **env}
    options = RunOptions(mode="replay", env=merged)
    return asyncio.run(run_suite(suite, options, RunProgress()))


def case_signature(result: CaseResult) -> str:
    """What must not change between repeated runs: the verdict and the tool calls made."""
    calls = [[call.name, call.args] for call in result.run.tool_calls]
    kind = result.failure.kind if result.failure else None
    return dumps({"status": result.status, "failure": kind, "calls": calls})


def failure_types(result: CaseResult) -> set[str]:
    """The failure kind and every check type that said no (empty for a passing case)."""
    if result.passed:
        return set()
    types = {failure.type for failure in result.check_failures}
    if result.failure is not None:
        types.add(result.failure.kind)
    return types


def _check_repeat(plan: VerifyPlan, check: Check) -> None:
    first: dict[str, str] | None = None
    for attempt in range(1, plan.config.repeat + 1):
        results = run_cases(plan.suite)
        _require_all_pass(results, check, f"run {attempt}")
        signatures = {result.case_id: case_signature(result) for result in results}
        if first is None:
            first = signatures
            continue
        for case_id in sorted(set(first) | set(signatures)):
            before, now = first.get(case_id), signatures.get(case_id)
            if before != now:
                check.fail(f"flaky case {case_id}: run 1 gave {before}, run {attempt} gave {now}")


def _check_clean(suite: Suite, check: Check) -> None:
    _require_all_pass(run_cases(suite), check, "clean run")


def _require_all_pass(results: list[CaseResult], check: Check, label: str) -> None:
    for result in results:
        if not result.passed:
            kind = result.failure.kind if result.failure else result.status
            reason = (result.failure_reason or "").splitlines()[:1]
            check.fail(f"{label}: case {result.case_id} {result.status} ({kind}) {''.join(reason)}")


def _breakage_step(plan: VerifyPlan, step: Breakage) -> Callable[[Check], None]:
    def action(check: Check) -> None:
        if step.patch is not None:
            try:
                with _patched_suite(plan.suite, step.patch) as suite:
                    results = run_cases(suite)
            except ConfigError as exc:
                check.fail(f"the patched suite does not load: {exc}")
                return
        elif step.agent_command is not None:
            command = plan.agent_commands[step.name]
            results = run_cases(dataclasses.replace(plan.suite, agent_command=command))
        else:
            results = run_cases(plan.suite, env=step.env)
        _compare_expectations(step, results, check)

    return action


def _compare_expectations(step: Breakage, results: list[CaseResult], check: Check) -> None:
    observed = {result.case_id: failure_types(result) for result in results}
    for expected in step.expect:
        types = observed.get(expected.case, set())
        if expected.failure in types:
            continue
        found = ", ".join(sorted(types)) if types else "it passed"
        check.fail(
            f"missed: expected case {expected.case} to fail with {expected.failure}, found: {found}"
        )
    expected_cases = {expected.case for expected in step.expect}
    for case_id, types in observed.items():
        if not types or case_id in expected_cases:
            continue
        check.fail(f"unexpected: case {case_id} failed with {', '.join(sorted(types))}")


@contextmanager
def _patched_suite(suite: Suite, patch: FilePatch) -> Iterator[Suite]:
    """The suite loaded from a patched copy of its directory; the original is never touched."""
    with tempfile.TemporaryDirectory(
        prefix="trialrun-verify-", dir=leftovers.scratch_root()
    ) as scratch:
        copy = Path(scratch) / suite.suite_dir.name
        shutil.copytree(suite.suite_dir, copy, symlinks=True)
        target = copy / patch.file
        text = target.read_text(encoding="utf-8")
        atomic_write_text(target, text.replace(patch.replace, patch.with_))
        yield load_suite(copy / suite.suite_file.relative_to(suite.suite_dir))
