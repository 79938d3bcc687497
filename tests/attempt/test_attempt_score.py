"""failureScore from test-runner summaries: real captured outputs, decisions and robustness."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from paths import DATA_DIR
from trialrun.attempt.score import TAIL_LINES, failure_score, summarize_runner

OUTPUTS = DATA_DIR / "runner_outputs"

# file name -> (runner whose summary decides, score when the verifier failed)
EXPECTED = {
    "pytest_failed_errors.txt": ("pytest", 3),
    "pytest_failed_quiet.txt": ("pytest", 3),
    "pytest_failed_color.txt": ("pytest", 3),
    "pytest_collection_error.txt": ("pytest", 1),
    "pytest_passed.txt": ("pytest", 1),
    "unittest_failed.txt": ("unittest", 3),
    "unittest_errors_only.txt": ("unittest", 1),
    "unittest_passed.txt": ("unittest", 1),
    "cargo_failed.txt": ("cargo", 2),
    "cargo_failed_multi_binary.txt": ("cargo", 3),
    "cargo_passed.txt": ("cargo", 1),
    "cargo_compile_error.txt": (None, 1),
    "go_failed.txt": ("go", 3),
    "go_build_failed.txt": ("go", 2),
    "go_passed.txt": ("go", 1),
    "jest_failed.txt": ("jest", 2),
    "jest_failed_color.txt": ("jest", 2),
    "jest_suite_error.txt": ("jest", 1),
    "jest_passed.txt": ("jest", 1),
    "vitest_failed.txt": ("vitest", 2),
    "vitest_failed_color.txt": ("vitest", 2),
    "vitest_suite_error.txt": ("vitest", 1),
    "vitest_passed.txt": ("vitest", 1),
}


def _output(name: str) -> str:
    return (OUTPUTS / name).read_text(encoding="utf-8")


def test_every_fixture_has_an_expectation() -> None:
    on_disk = {path.name for path in OUTPUTS.glob("*.txt")}
    assert on_disk == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_real_runner_output_gives_expected_count(name: str) -> None:
    runner, score = EXPECTED[name]
    output = _output(name)
    assert summarize_runner(output) == runner
    assert failure_score(output, 1, passed=False) == score


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_passed_is_zero_whatever_the_output_says(name: str) -> None:
    assert failure_score(_output(name), 0, passed=True) == 0


@pytest.mark.parametrize(
    "output",
    ["", "Traceback (most recent call last):\n  boom", "make: *** [check] Error 2", "OK"],
)
def test_unknown_output_scores_one(output: str) -> None:
    assert summarize_runner(output) is None
    assert failure_score(output, 2, passed=False) == 1


def test_a_failed_run_never_scores_zero_even_when_the_summary_says_all_passed() -> None:
    # e.g. a coverage gate failing after green tests, or "no tests ran" (pytest exit 5)
    assert failure_score("==== 4 passed in 0.10s ====\nCoverage failure", 1, False) == 1
    assert failure_score("============ no tests ran in 0.01s ============", 5, False) == 1


def test_timed_out_verifier_counts_the_hung_suite_as_one_more_failure() -> None:
    cargo_first_binary = "test result: FAILED. 3 passed; 2 failed; 0 ignored; 0 measured;\n"
    assert failure_score(cargo_first_binary, None, passed=False) == 3
    assert failure_score("running 4 tests\n", None, passed=False) == 1


def test_the_runner_of_the_last_summary_decides() -> None:
    output = (
        "===== 5 failed, 1 passed in 0.3s =====\n"
        "Tests:       2 failed, 4 passed, 6 total\n"
        "Time:        0.2 s\n"
    )
    assert summarize_runner(output) == "jest"
    assert failure_score(output, 1, False) == 2


def test_an_earlier_runner_is_ignored_even_when_the_last_one_passed() -> None:
    output = "Ran 3 tests in 0.001s\n\nFAILED (failures=4)\n"
    output += "test result: ok. 5 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out\n"
    assert summarize_runner(output) == "cargo"
    assert failure_score(output, 1, False) == 1


def test_summaries_of_the_same_runner_are_summed() -> None:
    two_suites = "== 2 failed, 3 passed in 0.1s ==\nsecond suite\n== 1 failed, 1 error in 0.1s ==\n"
    assert failure_score(two_suites, 1, False) == 4


def test_generic_phrase_is_a_fallback_and_only_its_last_mention_counts() -> None:
    output = "suite A: 3 tests failed\nretrying\nsuite A: 2 failing\n"
    assert summarize_runner(output) == "generic"
    assert failure_score(output, 1, False) == 2
    assert failure_score("  7 passing\n  4 failing\n", 1, False) == 4
    assert failure_score("1 failure", 1, False) == 1


def test_a_runner_summary_beats_a_later_generic_phrase() -> None:
    output = "== 2 failed in 0.1s ==\nbuild step: 9 failed retries ignored\n"
    assert summarize_runner(output) == "pytest"
    assert failure_score(output, 1, False) == 2


def test_unittest_counts_unexpected_successes_but_not_skips_or_expected_failures() -> None:
    output = (
        "Ran 9 tests in 0.01s\n\nFAILED (failures=1, errors=2, skipped=3, "
        "expected failures=1, unexpected successes=1)\n"
    )
    assert failure_score(output, 1, False) == 4


def test_unittest_verdict_needs_its_ran_line() -> None:
    assert summarize_runner("FAILED (failures=3)\n") is None


def test_go_counts_leaf_subtests_and_failed_builds_once() -> None:
    output = (
        "--- FAIL: TestParse (0.00s)\n"
        "    --- FAIL: TestParse/empty (0.00s)\n"
        "        --- FAIL: TestParse/empty/spaces (0.00s)\n"
        "    --- FAIL: TestParse/unicode (0.00s)\n"
        "FAIL\n"
        "FAIL\texample.com/parse\t0.004s\n"
        "FAIL\texample.com/broken [setup failed]\n"
        "FAIL\n"
    )
    assert failure_score(output, 1, False) == 3
    assert failure_score("ok  \tfine words here\n", 1, False) == 1
    assert summarize_runner("ok computer\nFAIL later\n") is None


def test_vitest_unhandled_errors_are_added() -> None:
    output = (
        " Test Files  1 failed | 2 passed (3)\n"
        "      Tests  1 failed | 8 passed (9)\n"
        "     Errors  2 errors\n"
        "   Start at  10:00:00\n"
    )
    assert summarize_runner(output) == "vitest"
    assert failure_score(output, 1, False) == 3


def test_ansi_codes_and_carriage_return_redraws_are_handled() -> None:
    output = (
        "\x1b[?25lrunning...\r\x1b[31m\x1b[1m== 6 failed\x1b[0m, \x1b[32m1 passed\x1b[0m in 2s ==\n"
    )
    assert failure_score(output, 1, False) == 6
    osc = "\x1b]8;;file:///x\x07link\x1b]8;;\x07\ntest result: FAILED. 0 passed; 2 failed;\n"
    assert failure_score(osc, 101, False) == 2


def test_only_the_tail_of_a_huge_output_is_scanned() -> None:
    early = "== 50 failed in 1s ==\n"
    noise = "log line\n" * (TAIL_LINES + 5)
    assert failure_score(early + noise, 1, False) == 1
    assert failure_score(noise + early, 1, False) == 50
    one_huge_line = "x" * 5_000_000 + "\n== 2 failed in 1s ==\n"
    assert failure_score(one_huge_line, 1, False) == 2


def test_absurdly_long_numbers_do_not_raise() -> None:
    digits = "9" * 5000
    assert failure_score(f"{digits} failed\n== {digits} failed in 1s ==", 1, False) >= 1


_SUMMARY_FRAGMENTS = st.sampled_from(
    [
        "== 2 failed, 1 error in 0.1s ==",
        "Ran 3 tests in 0.1s",
        "FAILED (failures=2, errors=1)",
        "--- FAIL: TestX/y (0.00s)",
        "FAIL\texample.com/x\t0.1s",
        "test result: FAILED. 1 passed; 2 failed;",
        "Tests:       2 failed, 5 passed, 7 total",
        "Test Files  1 failed (1)",
        "Tests  no tests",
        "Errors  1 error",
        "3 failing",
        "\x1b[31m",
        "\r",
    ]
)


@settings(max_examples=300)
@given(st.lists(st.one_of(st.text(), _SUMMARY_FRAGMENTS), max_size=12), st.booleans())
def test_never_raises_and_is_never_negative(parts: list[str], timed_out: bool) -> None:
    output = "\n".join(parts)
    exit_code = None if timed_out else 1
    score = failure_score(output, exit_code, passed=False)
    assert score >= 1
    assert failure_score(output, exit_code, passed=True) == 0
    runner = summarize_runner(output)
    assert runner in {None, "pytest", "unittest", "go", "cargo", "jest", "vitest", "generic"}


@settings(max_examples=100)
@given(st.text(), st.integers(min_value=1, max_value=10**6))
def test_appending_a_failing_pytest_summary_sets_its_count(prefix: str, failed: int) -> None:
    output = f"{prefix}\n== {failed} failed in 0.5s ==\n"
    assert summarize_runner(output) == "pytest"
    # earlier text may hold another pytest summary, which is summed; never less than this one
    assert failure_score(output, 1, False) >= failed
