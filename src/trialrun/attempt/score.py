"""failureScore: how far a verify run is from passing, read from the test runner's summary.

``failure_score(output, exit_code, passed)`` is 0 when the verifier passed. Otherwise it is the
failure count printed by the test runner, at least 1 (a failed run never looks verified), else 1
when no summary is recognised. Lower is better; the attempt loop keeps an attempt whose score
drops and rolls back one whose score rises.

Recognised summaries (ANSI colour codes and ``\\r`` progress redraws are removed first):

* pytest: ``== 2 failed, 3 passed, 1 error in 0.1s ==`` (also ``-q``, without the ``=``
  rule): failed + errors.
* unittest: ``FAILED (failures=2, errors=1)`` after a ``Ran N tests`` line: failures + errors +
  unexpected successes.
* go test: the leaf ``--- FAIL: TestX/sub`` lines of each package (a failing subtest also fails
  its parent; only the subtest is counted); a ``FAIL <package>`` line without failing tests
  (build failure, panic in TestMain) counts 1.
* cargo test: ``test result: FAILED. 3 passed; 2 failed; ...``: failed.
* jest: ``Tests:       2 failed, 5 passed, 7 total``; vitest: ``Tests  2 failed | 5 passed (7)``.
  Failed tests, or, when none failed, the failed suites / test files (a suite that cannot load
  runs no test); vitest's ``Errors  N errors`` line (unhandled errors) is added.
* generic: the last ``N failed`` / ``N failing`` / ``N failures`` phrase, only when no runner
  above matched.

Decisions:

* Several summaries: the runner whose summary comes LAST decides, and the counts of all its
  summaries are summed (``cargo test`` prints one ``test result`` per test binary, ``go test``
  one block per package, and ``pytest a; pytest b`` runs two suites). Summaries of other runners
  earlier in the output are ignored: the last runner is what the verify command ended with.
  The generic phrase is not summed: logs repeat the same number.
* Only the last ``TAIL_LINES`` lines (and ``TAIL_CHARS`` characters) are scanned, so a huge
  output costs little; runner summaries sit at the end.
* ``exit_code`` None means the verifier was killed after its timeout: the summaries printed
  before that cover only the suites that finished, so the suite that hung counts as one more
  failure (an agent that makes the tests hang must not look like an improvement).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

TAIL_LINES = 200
TAIL_CHARS = 256 * 1024
# Counts are capped at 9 digits: int() refuses very long digit strings, and no suite is that big.
_NUMBER = r"\d{1,9}"

_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")

_PYTEST_WORDS = r"(?:failed|passed|skipped|deselected|xfailed|xpassed|errors?|warnings?|reruns?)"
_PYTEST_ITEM = rf"{_NUMBER} (?:subtests )?{_PYTEST_WORDS}"
_PYTEST = re.compile(
    rf"^=*\s*(?P<body>{_PYTEST_ITEM}(?:, {_PYTEST_ITEM})*|no tests ran)"
    r"(?: in [\d.]+s(?: \([\d:.]+\))?)?\s*=*$"
)
_PYTEST_FAILED = re.compile(rf"\b({_NUMBER}) (?:failed|errors?)\b")

_UNITTEST_RAN = re.compile(r"^Ran \d+ tests? in ")
_UNITTEST_END = re.compile(r"^(?P<verdict>FAILED|OK)(?: \((?P<counts>[^)]*)\))?$")
# Anchored on the separator so "expected failures=1" is not read as "failures=1".
_UNITTEST_FAILED = re.compile(rf"(?:^|, )(?:failures|errors|unexpected successes)=({_NUMBER})\b")

_GO_TEST_FAIL = re.compile(r"^\s*--- FAIL: (?P<name>\S+)")
_GO_PACKAGE = re.compile(
    r"^(?P<verdict>FAIL|ok)\s+\S+\s+(?:[\d.]+s|\(cached\)|\[[a-z ]+\])(?:\s.*)?$"
)

_CARGO = re.compile(rf"^test result: (?:ok|FAILED)\. \d+ passed; (?P<failed>{_NUMBER}) failed;")

_JEST_TESTS = re.compile(r"^Tests:\s+(?P<body>.*\btotal)$")
_JEST_SUITES = re.compile(r"^Test Suites:\s+(?P<body>.*\btotal)$")
_VITEST_TESTS = re.compile(r"^Tests\s+(?P<body>\d+ [a-z]+(?: \| \d+ [a-z]+)* \(\d+\)|no tests)$")
_VITEST_FILES = re.compile(
    r"^Test Files\s+(?P<body>\d+ [a-z]+(?: \| \d+ [a-z]+)* \(\d+\)|no tests)$"
)
_VITEST_ERRORS = re.compile(rf"^Errors\s+(?P<count>{_NUMBER}) errors?\b.*$")
_JS_FAILED = re.compile(rf"\b({_NUMBER}) failed\b")

_GENERIC = re.compile(
    rf"\b({_NUMBER})\s+(?:tests?\s+)?(?:failed|failing|failures?)\b", re.IGNORECASE
)


@dataclass(frozen=True)
class RunnerSummary:
    """One summary found in the output: which runner, on which scanned line, how many failed."""

    runner: str
    line_index: int
    failures: int


def failure_score(output: str, exit_code: int | None, passed: bool) -> int:
    """Score a verify run: 0 when passed, else the parsed failure count (>= 1), else 1."""
    if passed:
        return 0
    summaries = _last_runner_summaries(_scanned_lines(output))
    count = sum(summary.failures for summary in summaries)
    if exit_code is None:
        count += 1
    return max(count, 1)


def summarize_runner(output: str) -> str | None:
    """Name the runner whose summary decides the score ("pytest", "go", ...), None if none."""
    summaries = _last_runner_summaries(_scanned_lines(output))
    return summaries[-1].runner if summaries else None


def _scanned_lines(output: str) -> list[str]:
    tail = output[-TAIL_CHARS:]
    # splitlines also splits on "\r", so a progress line redrawn in place yields its final text.
    lines = tail.splitlines()[-TAIL_LINES:]
    return [_ANSI.sub("", line).strip() for line in lines]


def _last_runner_summaries(lines: Sequence[str]) -> list[RunnerSummary]:
    found: list[RunnerSummary] = []
    for finder in _RUNNER_FINDERS:
        found.extend(finder(lines))
    if not found:
        return _generic_summary(lines)
    last_runner = max(found, key=lambda summary: summary.line_index).runner
    return sorted(
        (summary for summary in found if summary.runner == last_runner),
        key=lambda summary: summary.line_index,
    )


def _count_matches(pattern: re.Pattern[str], text: str) -> int:
    return sum(int(number) for number in pattern.findall(text))


def _pytest_summaries(lines: Sequence[str]) -> list[RunnerSummary]:
    found = []
    for index, line in enumerate(lines):
        match = _PYTEST.match(line)
        if match:
            failures = _count_matches(_PYTEST_FAILED, match["body"])
            found.append(RunnerSummary("pytest", index, failures))
    return found


def _unittest_summaries(lines: Sequence[str]) -> list[RunnerSummary]:
    found = []
    seen_ran_line = False
    for index, line in enumerate(lines):
        if _UNITTEST_RAN.match(line):
            seen_ran_line = True
            continue
        match = _UNITTEST_END.match(line) if seen_ran_line else None
        if match:
            failures = _count_matches(_UNITTEST_FAILED, match["counts"] or "")
            found.append(RunnerSummary("unittest", index, failures))
            seen_ran_line = False
    return found


def _go_summaries(lines: Sequence[str]) -> list[RunnerSummary]:
    found = []
    failing_tests: list[str] = []
    last_test_index = -1
    for index, line in enumerate(lines):
        test = _GO_TEST_FAIL.match(line)
        if test:
            failing_tests.append(test["name"])
            last_test_index = index
            continue
        package = _GO_PACKAGE.match(line)
        if package:
            failures = _count_leaf_tests(failing_tests)
            if package["verdict"] == "FAIL" and failures == 0:
                failures = 1
            found.append(RunnerSummary("go", index, failures))
            failing_tests = []
    if failing_tests:
        found.append(RunnerSummary("go", last_test_index, _count_leaf_tests(failing_tests)))
    return found


def _count_leaf_tests(names: Sequence[str]) -> int:
    unique = set(names)
    parents = {name for name in unique for other in unique if other.startswith(name + "/")}
    return len(unique - parents)


def _cargo_summaries(lines: Sequence[str]) -> list[RunnerSummary]:
    found = []
    for index, line in enumerate(lines):
        match = _CARGO.match(line)
        if match:
            found.append(RunnerSummary("cargo", index, int(match["failed"])))
    return found


def _js_summaries(
    runner: str,
    suites_pattern: re.Pattern[str],
    tests_pattern: re.Pattern[str],
    lines: Sequence[str],
) -> list[RunnerSummary]:
    found = []
    failed_suites = 0
    for index, line in enumerate(lines):
        suites = suites_pattern.match(line)
        if suites:
            failed_suites = _count_matches(_JS_FAILED, suites["body"])
            continue
        tests = tests_pattern.match(line)
        if tests:
            failures = _count_matches(_JS_FAILED, tests["body"]) or failed_suites
            found.append(RunnerSummary(runner, index, failures))
            failed_suites = 0
            continue
        errors = _VITEST_ERRORS.match(line) if runner == "vitest" else None
        if errors:
            found.append(RunnerSummary(runner, index, int(errors["count"])))
    return found


def _jest_summaries(lines: Sequence[str]) -> list[RunnerSummary]:
    return _js_summaries("jest", _JEST_SUITES, _JEST_TESTS, lines)


def _vitest_summaries(lines: Sequence[str]) -> list[RunnerSummary]:
    return _js_summaries("vitest", _VITEST_FILES, _VITEST_TESTS, lines)


def _generic_summary(lines: Sequence[str]) -> list[RunnerSummary]:
    for index in range(len(lines) - 1, -1, -1):
        matches = _GENERIC.findall(lines[index])
        if matches:
            return [RunnerSummary("generic", index, int(matches[-1]))]
    return []


_RUNNER_FINDERS: tuple[Callable[[Sequence[str]], list[RunnerSummary]], ...] = (
    _pytest_summaries,
    _unittest_summaries,
    _go_summaries,
    _cargo_summaries,
    _jest_summaries,
    _vitest_summaries,
)
