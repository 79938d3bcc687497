"""The printed report of ``trialrun compare``.

The first block is the seed's report line for line (``verdict:``, ``why:``, one
``candidate-vs-...`` line per opponent, ``arm scores:``, ``case-runs passed:``, ``triggers:``
with its ``MISS:`` / ``FALSE-FIRE:`` lines, ``efficiency:``), so a reader of the seed's docs can
read it. Three deliberate differences: the ``sign test p`` shown is the receipt's, so after a
session run it reads ``1.000`` with the reason (the seed printed an unpinned p and told readers to
trust the receipt instead); holes are named right under ``why:``; and a user command
that failed (the judge, the agent, the trigger probes) is named right under ``verdict:``, as
``BROKEN SETUP:`` when it failed on every call (``trialrun.compare.health``). Below that block
come the statistics beyond the seed; they are reported and never change the verdict.

Numbers are rounded half up on their exact decimal value, as the seed's JavaScript ``toFixed``
does, so ``0.125`` prints ``0.13`` here too.
"""

from __future__ import annotations

import json
import math
from decimal import ROUND_HALF_UP, Context, Decimal

from trialrun.base.proportions import Interval, wilson_interval
from trialrun.base.redact import redact_text
from trialrun.base.visible import visible_name
from trialrun.base.words import counted
from trialrun.compare.outcome import ArmEfficiency, CompareOutcome, comparison_name
from trialrun.compare.records import Hole, TriggerOutcome
from trialrun.compare.stats import ComparisonStats, format_net_lift, format_sign_p

__all__ = ["fixed", "format_report"]

_DOT = " · "


_FIXED_LIMIT = 1e21
"""From here on, JavaScript's ``toFixed`` gives the number's shortest form (``1e+21``)."""


def fixed(value: float, places: int) -> str:
    """``value`` with ``places`` decimals, exact halves rounded away from zero, as JavaScript's
    ``toFixed`` words it; from 1e21 on, and for infinities and NaN, its shortest form.

    Agents report their own numbers (an efficiency mean of 1e308 turns is theirs to claim), so
    any float must come out as text: the default decimal context (28 digits) could not hold the
    whole part of such a number.
    """
    if not abs(value) < _FIXED_LIMIT:  # NaN included
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return repr(value)
    quantum = Decimal(1).scaleb(-places)
    below_limit = Context(prec=21 + places)  # a whole part below 1e21 has at most 21 digits
    return str(Decimal(value).quantize(quantum, rounding=ROUND_HALF_UP, context=below_limit))


def format_report(outcome: CompareOutcome) -> str:
    """The report as text, lines joined with newlines, no trailing newline."""
    lines = _seed_lines(outcome)
    extra = _statistics_lines(outcome)
    if extra:
        lines.append("")
        lines.append("statistics (reported; they never change the verdict):")
        lines.extend(f"  {line}" for line in extra)
    return "\n".join(lines)


def _seed_lines(outcome: CompareOutcome) -> list[str]:
    status = ""
    if outcome.execution_status != "complete":
        status = (
            f" [{outcome.execution_status} — {outcome.scored_rows}/{outcome.expected_rows}"
            " rows scored]"
        )
    lines = [f"verdict: {outcome.verdict}{status}"]
    # Right under the verdict: a command that failed is the first thing that makes it doubtful.
    lines.extend(message for health in outcome.health if (message := health.message()))
    lines.append(f"why: {outcome.why}")
    lines.extend(_hole_line(hole) for hole in outcome.holes)
    for opponent, stats in outcome.comparisons.items():
        lines.append(f"{comparison_name(opponent)}: {_comparison_summary(stats, outcome)}")
    if outcome.arm_scores:
        scores = [
            f"{arm} {'n/a' if score is None else fixed(score, 2)}"
            for arm, score in outcome.arm_scores.items()
        ]
        lines.append(f"arm scores: {_DOT.join(scores)}")
    runs = [
        f"{arm} {tally.passed}/{tally.total}"
        for arm, tally in outcome.case_runs.items()
        if tally.total > 0
    ]
    if runs:
        lines.append(f"case-runs passed: {_DOT.join(runs)}")
    if outcome.triggers is not None:
        lines.extend(_trigger_lines(outcome.triggers))
    efficiency = [
        text for arm, eff in outcome.efficiency.items() if (text := _efficiency_text(arm, eff))
    ]
    if efficiency:
        lines.append(f"efficiency: {' | '.join(efficiency)}")
    return lines


def _comparison_summary(stats: ComparisonStats, outcome: CompareOutcome) -> str:
    record = stats.record
    pinned = " pinned: rows share one agent session" if outcome.session_ran else ""
    return (
        f"{format_net_lift(record)} net lift ({record.wins}W / {record.losses}L / "
        f"{record.ties}T over {record.total} comparisons, "
        f"sign test p={format_sign_p(stats.sign_p)}{pinned})"
    )


def _hole_line(hole: Hole) -> str:
    case = visible_name(hole.case)  # a case file's name may hold ESC or a bidi override
    where = case if hole.rep is None else f"{case} rep {hole.rep}"
    return f"hole ({hole.kind}): {where} — {visible_name(hole.detail)}"


def _rate(value: float | None) -> str:
    return "n/a" if value is None else fixed(value, 2)


def _trigger_lines(triggers: TriggerOutcome) -> list[str]:
    errored = f" errored={triggers.errored}" if triggers.errored else ""
    lines = [
        f"triggers: recall={_rate(triggers.recall)} precision={_rate(triggers.precision)} "
        f"(tp={triggers.tp} fn={triggers.fn} fp={triggers.fp} tn={triggers.tn}{errored})"
    ]
    for probe in triggers.probes:
        prompt = visible_name(json.dumps(probe.prompt, ensure_ascii=False))
        if probe.fired is None:
            lines.append(f"  ERROR: {prompt} ({_preview(probe.error or 'no answer')})")
        elif probe.wrong:
            lines.append(f"  {'MISS' if probe.should_trigger else 'FALSE-FIRE'}: {prompt}")
    return lines


def _preview(text: str, limit: int = 120) -> str:
    flat = visible_name(" ".join(redact_text(text).split()))
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _efficiency_text(arm: str, eff: ArmEfficiency) -> str:
    parts = []
    if eff.turns is not None:
        parts.append(f"{fixed(eff.turns, 1)} turns")
    if eff.duration_ms is not None:
        parts.append(f"{fixed(eff.duration_ms / 1000, 1)}s")
    if eff.cost_usd is not None:
        parts.append(f"${fixed(eff.cost_usd, 2)}")
    return f"{arm} {_DOT.join(parts)}" if parts else ""


def _interval(interval: Interval | None, *, signed: bool = False) -> str:
    if interval is None:
        return "n/a"
    low, high = fixed(interval.low, 2), fixed(interval.high, 2)
    if signed:
        low = low if low.startswith("-") else f"+{low}"
        high = high if high.startswith("-") else f"+{high}"
    return f"[{low}, {high}]"


def _statistics_lines(outcome: CompareOutcome) -> list[str]:
    lines = []
    for opponent, stats in outcome.comparisons.items():
        parts = [f"net lift 95% CI {_interval(stats.net_lift_interval, signed=True)} (Tango)"]
        if stats.case_level is not None:
            level = stats.case_level
            parts.append(
                f"case-level sign-flip p={format_sign_p(level.p_value)} over "
                f"{counted(level.clusters, 'non-tied case')}, "
                f"smallest attainable p={format_sign_p(level.min_attainable_p)}"
            )
        if outcome.session_ran and stats.row_sign_p != stats.sign_p:
            parts.append(f"unpinned row sign test p={format_sign_p(stats.row_sign_p)}")
        judge = stats.judge
        if judge.judged:
            failures = sum(judge.failures.values())
            parts.append(
                f"judge: {judge.judged} judged, {judge.agreed} agreed, {judge.split} split "
                f"{_interval(judge.split_interval())}, {failures} failed"
            )
        lines.append(f"{comparison_name(opponent)}: {'; '.join(parts)}")
    runs = [
        f"{arm} {_interval(tally.interval())}"
        for arm, tally in outcome.case_runs.items()
        if tally.total > 0
    ]
    if runs:
        lines.append(f"case-runs passed 95% CI (Wilson): {_DOT.join(runs)}")
    if outcome.triggers is not None:
        triggers = outcome.triggers
        recall = wilson_interval(triggers.tp, triggers.tp + triggers.fn)
        precision = wilson_interval(triggers.tp, triggers.tp + triggers.fp)
        lines.append(
            f"triggers 95% CI (Wilson): recall {_interval(recall)}"
            f" · precision {_interval(precision)}"
        )
    return lines
