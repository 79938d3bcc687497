"""Outcome roll-up, printed report and receipt document of ``trialrun compare``."""

from __future__ import annotations

import json
import math
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trialrun.base.fsutil import dumps_json
from trialrun.compare.config import load_eval_assets
from trialrun.compare.outcome import CompareOutcome, attribution, build_outcome
from trialrun.compare.receipt_doc import build_receipt
from trialrun.compare.records import (
    ArmSampleResult,
    CompareRow,
    Hole,
    SampleEfficiency,
    TriggerProbe,
    trigger_outcome,
)
from trialrun.compare.report import fixed, format_report
from trialrun.compare.rows import Row
from trialrun.home.digest import case_digest, content_digest, eval_assets_digest

SEED_REPORT = """\
verdict: PASS
why: wins on execution checks; loses on judge calls; 3 ties
candidate-vs-baseline: +44% net lift (5W / 1L / 3T over 9 comparisons, sign test p=0.219)
candidate-vs-incumbent: +11% net lift (2W / 1L / 6T over 9 comparisons, sign test p=1.000)
arm scores: baseline 0.61 · candidate 0.82 · incumbent 0.74
case-runs passed: baseline 2/9 · candidate 5/9 · incumbent 4/9
triggers: recall=1.00 precision=0.83 (tp=5 fn=0 fp=1 tn=5)
  FALSE-FIRE: "rename this variable"
efficiency: baseline 3.0 turns · 22.8s · $0.11 | candidate 5.0 turns · 41.2s · $0.20 | \
incumbent 4.0 turns · 33.0s · $0.15"""

PLANNED = [(case, rep) for case in ("alpha", "beta", "gamma") for rep in range(3)]
# Checks passed out of 10 per (case, rep): the means give 0.61 / 0.82 / 0.74 and the full
# passes 2 / 5 / 4 of 9, as in the seed's example.
PASSED = {
    "baseline": [10, 10, 5, 5, 5, 5, 5, 5, 5],
    "candidate": [10, 10, 10, 10, 10, 6, 6, 6, 6],
    "incumbent": [10, 10, 10, 10, 6, 6, 5, 5, 5],
}
EFFICIENCY = {
    "baseline": SampleEfficiency(turns=3, duration_ms=22_800, cost_usd=0.11),
    "candidate": SampleEfficiency(turns=5, duration_ms=41_200, cost_usd=0.20),
    "incumbent": SampleEfficiency(turns=4, duration_ms=33_000, cost_usd=0.15),
}
# (outcome, decided_by) per planned (case, rep).
VS_BASELINE = [
    ("tie", "checks-equal-no-judge"),
    ("tie", "judge-split"),
    ("win", "checks"),
    ("win", "checks"),
    ("win", "checks"),
    ("loss", "judge"),
    ("win", "judge"),
    ("win", "checks"),
    ("tie", "checks-equal-no-judge"),
]
VS_INCUMBENT = [
    ("tie", "checks-equal-no-judge"),
    ("tie", "checks-equal-no-judge"),
    ("tie", "judge"),
    ("tie", "checks-equal-no-judge"),
    ("win", "checks"),
    ("loss", "judge"),
    ("win", "judge"),
    ("tie", "checks-equal-no-judge"),
    ("tie", "checks-equal-no-judge"),
]


def _checks(passed: int, total: int = 10) -> tuple[tuple[str, bool], ...]:
    return tuple((f"file_exists: out{i}.txt", i < passed) for i in range(total))


def _samples(dead: frozenset[tuple[str, int, str]] = frozenset()) -> list[ArmSampleResult]:
    samples = []
    for arm, passed in PASSED.items():
        for (case, rep), count in zip(PLANNED, passed, strict=True):
            died = (case, rep, arm) in dead
            samples.append(
                ArmSampleResult(
                    case=case,
                    rep=rep,
                    arm=arm,
                    status="timeout" if died else "ok",
                    checks=() if died else _checks(count),
                    efficiency=None if died else EFFICIENCY[arm],
                )
            )
    return samples


def _row(case: str, rep: int, opponent: str, outcome: str, decided_by: str) -> CompareRow:
    scored = not decided_by.endswith("failed")
    row = Row(outcome=outcome, decided_by=decided_by, scored=scored, reason=f"{decided_by} row")  # type: ignore[arg-type]
    return CompareRow(case=case, rep=rep, opponent=opponent, row=row)


def _rows() -> list[CompareRow]:
    rows = []
    for opponent, table in (("baseline", VS_BASELINE), ("incumbent", VS_INCUMBENT)):
        for (case, rep), (outcome, decided_by) in zip(PLANNED, table, strict=True):
            rows.append(_row(case, rep, opponent, outcome, decided_by))
    return rows


def _triggers() -> list[TriggerProbe]:
    should = [TriggerProbe(f"use the skill {i}", True, True) for i in range(5)]
    should_not = [TriggerProbe(f"unrelated {i}", False, False) for i in range(5)]
    return [*should, TriggerProbe("rename this variable", False, True), *should_not]


def _seed_outcome(**overrides: object) -> CompareOutcome:
    arguments: dict[str, object] = {
        "samples": _samples(),
        "rows": _rows(),
        "opponents": ["baseline", "incumbent"],
        "planned": PLANNED,
        "triggers": trigger_outcome(_triggers()),
        "seed": 7,
    }
    arguments.update(overrides)
    return build_outcome(**arguments)  # type: ignore[arg-type]


def test_seed_example_report_is_reproduced_line_for_line() -> None:
    report = format_report(_seed_outcome())
    seed_block, _, statistics = report.partition("\n\n")
    assert seed_block == SEED_REPORT
    assert statistics.startswith("statistics (reported; they never change the verdict):\n")
    # Tango's interval for 5W / 1L / 3T is [-0.095, +0.768] (arms-and-statistics.md section 0).
    assert "candidate-vs-baseline: net lift 95% CI [-0.09, +0.77] (Tango)" in statistics
    assert "candidate-vs-incumbent: net lift 95% CI [-0.30, +0.49] (Tango)" in statistics
    assert "case-runs passed 95% CI (Wilson): baseline [" in statistics
    assert "triggers 95% CI (Wilson): recall [0.57, 1.00]" in statistics


def test_seed_example_outcome_numbers() -> None:
    outcome = _seed_outcome()
    assert outcome.verdict == "PASS"
    assert outcome.execution_status == "complete"
    assert (outcome.expected_rows, outcome.scored_rows) == (18, 18)
    assert outcome.holes == ()
    baseline = outcome.comparisons["baseline"]
    assert (baseline.record.wins, baseline.record.losses, baseline.record.ties) == (5, 1, 3)
    assert baseline.sign_p == pytest.approx(0.21875)
    assert list(outcome.arm_scores) == ["baseline", "candidate", "incumbent"]
    assert outcome.why == "wins on execution checks; loses on judge calls; 3 ties"


def test_arms_are_listed_in_fixed_order_whatever_order_they_ran() -> None:
    shuffled = list(reversed(_samples()))
    assert format_report(_seed_outcome(samples=shuffled)) == format_report(_seed_outcome())


def test_partial_run_names_holes_and_never_counts_them() -> None:
    # gamma rep 2 never ran (interrupted); the candidate died on beta rep 0 (timeout).
    dead = frozenset({("beta", 0, "candidate")})
    rows = [r for r in _rows() if (r.case, r.rep) != ("gamma", 2)]
    rows = [
        _row(r.case, r.rep, r.opponent, "tie", "candidate-run-failed")
        if (r.case, r.rep) == ("beta", 0)
        else r
        for r in rows
    ]
    samples = [s for s in _samples(dead) if (s.case, s.rep) != ("gamma", 2)]
    outcome = _seed_outcome(rows=rows, samples=samples)
    assert outcome.execution_status == "partial"
    assert (outcome.expected_rows, outcome.scored_rows) == (18, 14)
    kinds = [(hole.case, hole.rep, hole.kind, hole.arm) for hole in outcome.holes]
    assert kinds == [("beta", 0, "arm-died", "candidate"), ("gamma", 2, "not-run", None)]
    assert "timeout after 1 attempt" in outcome.holes[0].detail
    # The dead candidate's sample is neither a zero in its arm score nor a failed case-run.
    assert outcome.case_runs["candidate"].total == 7
    live = [
        p
        for p, (c, r) in zip(PASSED["candidate"], PLANNED, strict=True)
        if (c, r) not in {("beta", 0), ("gamma", 2)}
    ]
    assert outcome.arm_scores["candidate"] == pytest.approx(sum(live) / 10 / len(live))
    lines = format_report(outcome).splitlines()
    assert lines[0] == "verdict: PASS [partial — 14/18 rows scored]"
    assert "hole (arm-died): beta rep 0 — the candidate arm died (timeout after 1 attempt)" in lines
    assert any(line.startswith("hole (not-run): gamma rep 2 — never ran") for line in lines)


def test_skipped_case_is_named_once_and_suppresses_not_run_holes() -> None:
    skip = Hole("gamma", None, "environment-skip", "missing binary codex")
    rows = [r for r in _rows() if r.case != "gamma"]
    samples = [s for s in _samples() if s.case != "gamma"]
    outcome = _seed_outcome(rows=rows, samples=samples, skipped=[skip])
    assert outcome.holes == (skip,)
    assert outcome.execution_status == "partial"
    assert "hole (environment-skip): gamma — missing binary codex" in format_report(outcome)


def test_nothing_scored_is_a_failed_run_with_neutral_verdict() -> None:
    outcome = _seed_outcome(rows=[], samples=[], triggers=None)
    assert outcome.execution_status == "failed"
    assert outcome.verdict == "NEUTRAL"
    assert outcome.why == "no candidate-vs-baseline row was scored"
    assert len(outcome.holes) == len(PLANNED)
    assert "arm scores:" not in format_report(outcome)


def test_rows_against_an_unknown_opponent_are_refused() -> None:
    with pytest.raises(ValueError, match="found opponent \\['champion'\\]"):
        _seed_outcome(rows=[_row("alpha", 0, "champion", "win", "checks")])


def test_session_pins_sign_p_and_says_so() -> None:
    outcome = _seed_outcome(session_cases=["alpha"])
    assert outcome.comparisons["baseline"].sign_p == 1.0
    report = format_report(outcome)
    assert "sign test p=1.000 pinned: rows share one agent session)" in report
    assert "unpinned row sign test p=0.219" in report


def test_attribution_wording() -> None:
    def rows(*specs: tuple[str, str]) -> list[CompareRow]:
        return [_row("a", i, "baseline", o, d) for i, (o, d) in enumerate(specs)]

    assert attribution(rows(("tie", "checks-equal-no-judge"))) == "all comparisons tied"
    assert attribution(rows(("win", "judge"), ("win", "checks"))) == "wins on execution checks"
    assert attribution(rows(("win", "judge"), ("win", "judge"), ("win", "checks"))) == (
        "wins on judge calls"
    )
    assert attribution(rows(("loss", "checks"), ("tie", "judge"))) == (
        "loses on execution checks; 1 tie"
    )
    assert attribution(rows(("win", "checks"), ("tie", "both-arms-failed"))) == (
        "wins on execution checks"
    )


def test_triggers_count_errors_apart_and_report_misses() -> None:
    probes = [
        TriggerProbe("deploy it", True, False),
        TriggerProbe("ship the build", True, None, error="judge exited 1\nboom"),
        TriggerProbe("say hi", False, None, error="timeout"),
        TriggerProbe("deploy now", True, True),
    ]
    triggers = trigger_outcome(probes)
    assert (triggers.tp, triggers.fn, triggers.fp, triggers.tn, triggers.errored) == (1, 1, 0, 0, 2)
    assert triggers.recall == 0.5 and triggers.precision == 1.0
    lines = format_report(_seed_outcome(triggers=triggers)).splitlines()
    assert "triggers: recall=0.50 precision=1.00 (tp=1 fn=1 fp=0 tn=0 errored=2)" in lines
    assert '  MISS: "deploy it"' in lines
    assert '  ERROR: "ship the build" (judge exited 1 boom)' in lines
    assert trigger_outcome([]).recall is None and trigger_outcome([]).precision is None


def test_efficiency_skips_missing_and_non_finite_values() -> None:
    samples = [
        ArmSampleResult("alpha", 0, "baseline", "ok", _checks(1, 1), SampleEfficiency(turns=2)),
        ArmSampleResult(
            "alpha", 0, "candidate", "ok", _checks(1, 1), SampleEfficiency(turns=float("nan"))
        ),
    ]
    rows = [_row("alpha", 0, "baseline", "tie", "checks-equal-no-judge")]
    outcome = build_outcome(
        samples=samples, rows=rows, opponents=["baseline"], planned=[("alpha", 0)]
    )
    assert outcome.efficiency["baseline"].turns == 2
    assert outcome.efficiency["candidate"].turns is None
    assert format_report(outcome).splitlines()[-1] != ""
    assert "efficiency: baseline 2.0 turns" in format_report(outcome)
    assert "candidate" not in format_report(outcome).split("efficiency:")[1].split("\n")[0]


@pytest.mark.parametrize(
    ("value", "places", "text"),
    [(0.125, 2, "0.13"), (0.61111, 2, "0.61"), (2.675, 2, "2.67"), (3, 1, "3.0"), (-0.5, 0, "-1")],
)
def test_fixed_rounds_like_to_fixed(value: float, places: int, text: str) -> None:
    # 0.125 is an exact half and rounds up (Python's format would give 0.12); 2.675 is stored
    # just below its half, so it rounds down, as JavaScript's toFixed does.
    assert fixed(value, places) == text


@given(st.floats(), st.integers(0, 6))
def test_fixed_words_any_float(value: float, places: int) -> None:
    # Agents report their own numbers: a mean of 1e308 turns made the rounding itself raise.
    text = fixed(value, places)
    if math.isnan(value):
        assert text == "NaN"
    elif abs(value) >= 1e21:  # JavaScript's toFixed gives the shortest form from here on
        assert float(text.replace("Infinity", "inf")) == value
    else:
        whole, _, decimals = text.lstrip("-").partition(".")
        assert len(decimals) == places and whole.isdigit()
        scaled = abs(Fraction(value)) * 10**places
        nearest = math.floor(scaled + Fraction(1, 2))  # exact halves away from zero
        sign = -1 if value < 0 else 1
        assert Fraction(Decimal(text)) == sign * Fraction(nearest, 10**places)


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["win", "loss", "tie"]),
            st.sampled_from(["checks", "judge", "judge-split", "opponent-run-failed"]),
        ),
        max_size=12,
    ),
    st.integers(0, 4),
)
def test_counts_never_include_holes(specs: list[tuple[str, str]], dropped: int) -> None:
    planned = [(f"c{i}", 0) for i in range(len(specs) + dropped)]
    rows = [_row(f"c{i}", 0, "baseline", o, d) for i, (o, d) in enumerate(specs)]
    outcome = build_outcome(samples=[], rows=rows, opponents=["baseline"], planned=planned)
    scored = sum(1 for _, d in specs if d != "opponent-run-failed")
    record = outcome.comparisons["baseline"].record
    assert outcome.scored_rows == record.total == scored
    assert outcome.expected_rows - outcome.scored_rows == len(outcome.holes)
    complete = scored == len(planned) and scored > 0
    assert (outcome.execution_status == "complete") == complete


# -- receipt -------------------------------------------------------------------------------------


def _subject(tmp_path: Path) -> Path:
    subject = tmp_path / "deploy-check"
    (subject / "evals" / "cases").mkdir(parents=True)
    (subject / "SKILL.md").write_text("---\nname: deploy-check\n---\nDeploy carefully.\n")
    (subject / "evals" / "compare.yaml").write_text(
        "name: deploy-check\nagent:\n  command: [agent, '{task}']\n"
    )
    for case in ("alpha", "beta", "gamma"):
        (subject / "evals" / "cases" / f"{case}.yaml").write_text(
            f"task: do {case}\nchecks:\n  - file_exists: out.txt\n"
        )
    return subject


def _receipt(tmp_path: Path, **overrides: object) -> dict[str, object]:
    subject = _subject(tmp_path)
    return build_receipt(
        _seed_outcome(**overrides),
        assets=load_eval_assets(subject),
        subject=subject,
        run_id="20260101T000000Z",
        provenance={"runner_handle": "local", "k": 3, "timestamp": "2026-01-01T00:00:00Z"},
    )


def test_receipt_has_the_seed_fields_and_digests(tmp_path: Path) -> None:
    receipt = _receipt(tmp_path)
    subject = tmp_path / "deploy-check"
    assert receipt["schema_version"] == 2 and receipt["version"] is None
    assert receipt["verdict"] == "PASS" and receipt["execution_status"] == "complete"
    assert (receipt["expected_rows"], receipt["scored_rows"]) == (18, 18)
    assert receipt["content_digest"] == content_digest(subject)
    assert receipt["eval_assets_digest"] == eval_assets_digest(subject / "evals")
    digests = receipt["case_digests"]
    assert isinstance(digests, dict) and sorted(digests) == ["alpha", "beta", "gamma"]
    assert digests["alpha"] == case_digest(subject / "evals" / "cases" / "alpha.yaml")
    comparisons = receipt["comparisons"]
    assert isinstance(comparisons, dict)
    vs_baseline = comparisons["candidate-vs-baseline"]
    assert {k: vs_baseline[k] for k in ("win", "loss", "tie", "sign_p")} == {
        "win": 5,
        "loss": 1,
        "tie": 3,
        "sign_p": 0.21875,
    }
    assert vs_baseline["judge"]["split"] == 1
    assert receipt["case_runs"]["candidate"]["passed"] == 5  # type: ignore[index]
    assert receipt["triggers"]["fp"] == 1  # type: ignore[index]
    per_case = receipt["per_case"]
    assert isinstance(per_case, list) and len(per_case) == 9
    assert per_case[0]["outcomes"]["candidate-vs-baseline"]["decided_by"] == "checks-equal-no-judge"
    json.loads(dumps_json(receipt))  # JSON-ready all the way down


def test_receipt_is_byte_identical_for_the_same_inputs(tmp_path: Path) -> None:
    first = dumps_json(_receipt(tmp_path / "one"))
    second = dumps_json(_receipt(tmp_path / "two", samples=list(reversed(_samples()))))
    assert first == second


def test_receipt_records_holes_and_partial_status(tmp_path: Path) -> None:
    rows = [r for r in _rows() if r.case != "gamma"]
    receipt = _receipt(tmp_path, rows=rows)
    assert receipt["execution_status"] == "partial"
    assert receipt["scored_rows"] == 12
    holes = receipt["holes"]
    assert isinstance(holes, list)
    assert [(h["case"], h["rep"], h["kind"]) for h in holes] == [
        ("gamma", 0, "not-run"),
        ("gamma", 1, "not-run"),
        ("gamma", 2, "not-run"),
    ]


def test_receipt_scrubs_credentials_from_free_text(tmp_path: Path) -> None:
    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    secret_row = CompareRow("alpha", 0, "baseline", Row("tie", "judge", True, f"saw {token}"))
    rows = [
        secret_row,
        *(r for r in _rows() if (r.case, r.rep, r.opponent) != ("alpha", 0, "baseline")),
    ]
    skip = Hole("gamma", None, "dropped", f"setup printed {token}")
    probes = [TriggerProbe(f"use key {token}", True, True)]
    receipt = _receipt(tmp_path, rows=rows, skipped=[skip], triggers=trigger_outcome(probes))
    text = dumps_json(receipt)
    assert token not in text
    assert "[REDACTED]" in text


def test_an_arm_that_never_ran_before_an_interrupt_still_has_its_score_line() -> None:
    # Stopped after the first case's baseline and incumbent ran, before its candidate did.
    samples = [s for s in _samples() if (s.case, s.rep) == PLANNED[0] and s.arm != "candidate"]
    outcome = _seed_outcome(samples=samples, rows=[], triggers=None)
    assert outcome.arm_scores == {"baseline": None, "candidate": None, "incumbent": None}
    [line] = [line for line in format_report(outcome).splitlines() if "arm scores" in line]
    assert line == "arm scores: baseline n/a · candidate n/a · incumbent n/a"
