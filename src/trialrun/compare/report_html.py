"""report.html of a compare run: one self-contained page next to its receipt.json.

Every figure is drawn from the receipt's own numbers (W / L / T, net lift and its interval, sign
p, arm scores, case-runs passed and their Wilson intervals, efficiency means): the page is a view
of the receipt, never a second computation of it. The outcome adds only what the receipt leaves
out on purpose: the judge's raw answers per row and the first error of a failing command
(they may name local paths). Transcripts are read from the run directory's ``transcripts/``.

Security model, as for the run report (``trialrun.report.html``): jinja2 with ``autoescape=True``
renders every value; the figures are inline SVG whose attributes are numbers
(``compare.report_figures``); the page has no script at all, and its Content-Security-Policy
forbids scripts and every request (``default-src 'none'``), so it opens from a CI artifact with
no network. Agent and judge text
is redacted; lone surrogates become U+FFFD so the page always encodes.

``write_compare_report`` is the one entry point: the compare engine calls it for a run and a
``--rescore``, and anything else that builds a receipt (a merge of shards) calls it the same way.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trialrun.base.fsutil import atomic_write_text
from trialrun.base.redact import redact_text
from trialrun.compare.judge import JudgeDecision, parse_answer
from trialrun.compare.outcome import CompareOutcome, arm_sort_key
from trialrun.compare.report import fixed
from trialrun.compare.report_figures import (
    AXIS_WIDTH,
    BAR_WIDTH,
    EFFICIENCY_BAR_WIDTH,
    arm_marks,
    axis_tick,
    band_marks,
    comparison_figure,
    comparisons_of,
    efficiency_bars,
)
from trialrun.compare.store import RunDir
from trialrun.compare.transcript_view import TranscriptShelf

if TYPE_CHECKING:
    import jinja2

__all__ = [
    "REPORT_FILE",
    "render_compare_report",
    "write_compare_report",
]

REPORT_FILE = "report.html"
TEMPLATE_DIR = Path(__file__).parent / "templates"
TEMPLATE_NAME = "compare_report.html.j2"
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def write_compare_report(
    run_dir: RunDir, receipt: Mapping[str, Any], outcome: CompareOutcome
) -> Path:
    """Write ``report.html`` beside ``receipt.json`` in ``run_dir`` (atomically); return its path.

    ``receipt`` is the document written as receipt.json and ``outcome`` the roll-up it was built
    from (``receipt_doc.build_receipt``).
    """
    path = run_dir.path / REPORT_FILE
    page = render_compare_report(receipt, outcome, transcripts_dir=run_dir.transcripts)
    atomic_write_text(path, page)
    return path


def render_compare_report(
    receipt: Mapping[str, Any], outcome: CompareOutcome, *, transcripts_dir: Path | None = None
) -> str:
    """The page as text; transcripts are embedded when ``transcripts_dir`` holds them."""
    template = _environment().get_template(TEMPLATE_NAME)
    page = template.render(
        header=_header(receipt),
        alerts=_alerts(outcome),
        comparisons=[
            comparison_figure(name, data, receipt) for name, data in comparisons_of(receipt)
        ],
        band=band_marks(),
        arms=arm_marks(receipt),
        arm_ticks=[axis_tick(value, 0.0, 1.0) for value in (0.0, 0.25, 0.5, 0.75, 1.0)],
        efficiency=efficiency_bars(receipt),
        holes=_holes(receipt),
        triggers=_triggers(receipt),
        groups=_row_groups(receipt, outcome, transcripts_dir),
        sizes={"bar": BAR_WIDTH, "axis": AXIS_WIDTH, "efficiency": EFFICIENCY_BAR_WIDTH},
    )
    return _LONE_SURROGATE.sub("\ufffd", page)


def _environment() -> jinja2.Environment:
    from trialrun.report.html import template_environment  # jinja2: only when a page is written

    return template_environment(TEMPLATE_DIR)


# ---- header and alerts -----------------------------------------------------------------------


def _header(receipt: Mapping[str, Any]) -> dict[str, Any]:
    provenance = receipt.get("provenance") or {}
    return {
        "name": str(receipt.get("skill_name", "")),
        "verdict": str(receipt.get("verdict", "")),
        "why": str(receipt.get("attribution", "")),
        # A verdict over a setup that failed on every call measures nothing: the badge must not
        # wear the verdict's colour (a green PASS) then.
        "broken_setup": [str(command) for command in receipt.get("broken_setup") or []],
        "status": str(receipt.get("execution_status", "")),
        "scored_rows": receipt.get("scored_rows", 0),
        "expected_rows": receipt.get("expected_rows", 0),
        "run_id": str(receipt.get("run_id", "")),
        "digest": str(receipt.get("content_digest", "")),
        "k": provenance.get("k"),
        "seed": receipt.get("seed"),
        "rescored_from": provenance.get("rescored_from"),
        "timestamp": provenance.get("timestamp"),
        "engine_version": provenance.get("engine_version"),
    }


def _alerts(outcome: CompareOutcome) -> list[dict[str, str]]:
    """The printed report's lines about failing commands, the broken ones first."""
    alerts = []
    for health in sorted(outcome.health, key=lambda health: not health.broken):
        message = health.message()
        if message is None:
            continue
        level = "broken" if health.broken else "warning" if health.mostly_failed else "note"
        alerts.append({"level": level, "command": health.command, "text": redact_text(message)})
    return alerts


# ---- holes and triggers -------------------------------------------------------------------------


def _holes(receipt: Mapping[str, Any]) -> dict[str, list[dict[str, str]]]:
    """Environment skips apart from the holes a run left (dead arms, never run, dropped)."""
    skips: list[dict[str, str]] = []
    holes: list[dict[str, str]] = []
    for hole in receipt.get("holes") or []:
        rep = hole.get("rep")
        view = {
            "where": str(hole.get("case")) if rep is None else f"{hole.get('case')} rep {rep}",
            "kind": str(hole.get("kind")),
            "detail": str(hole.get("detail", "")),
        }
        (skips if hole.get("kind") == "environment-skip" else holes).append(view)
    return {"skips": skips, "holes": holes}


def _triggers(receipt: Mapping[str, Any]) -> dict[str, Any] | None:
    triggers = receipt.get("triggers")
    if not triggers:
        return None

    def rate(value: float | None) -> str:
        return "n/a" if value is None else fixed(value, 2)

    wrong = []
    for probe in triggers.get("prompts") or []:
        fired, should = probe.get("fired"), probe.get("should_trigger")
        if fired is None:
            wrong.append({"kind": "ERROR", "prompt": probe.get("prompt"), "error": probe["error"]})
        elif fired != should:
            kind = "MISS" if should else "FALSE-FIRE"
            wrong.append({"kind": kind, "prompt": probe.get("prompt"), "error": None})
    counts = {key: triggers.get(key, 0) for key in ("tp", "fn", "fp", "tn", "errored")}
    return {
        "recall": rate(triggers.get("recall")),
        "precision": rate(triggers.get("precision")),
        "counts": counts,
        "wrong": wrong,
    }


# ---- rows and transcripts ---------------------------------------------------------------------


def _row_groups(
    receipt: Mapping[str, Any], outcome: CompareOutcome, transcripts_dir: Path | None
) -> list[dict[str, Any]]:
    """One group per (case, rep) of the receipt's ``per_case``: its rows, then its transcripts."""
    decisions = {(row.case, row.rep, row.opponent): row.row.judge for row in outcome.rows}
    shelf = TranscriptShelf(transcripts_dir)
    groups = []
    for index, entry in enumerate(receipt.get("per_case") or [], start=1):
        case, rep = str(entry["case"]), int(entry["rep"])
        arms = entry.get("arms") or {}
        rows = []
        for name, row in (entry.get("outcomes") or {}).items():
            opponent = name.removeprefix("candidate-vs-")
            rows.append(
                {
                    "opponent": opponent,
                    "outcome": row["outcome"],
                    "scored": row["scored"],
                    "decided_by": row["decided_by"],
                    "reason": row["reason"],
                    "candidate": _arm_checks(arms.get("candidate")),
                    "other": _arm_checks(arms.get(opponent)),
                    "judge": _judge_view(decisions.get((case, rep, opponent)), opponent),
                }
            )
        transcripts = [shelf.view(case, rep, arm) for arm in sorted(arms, key=arm_sort_key)]
        groups.append(
            {
                "anchor": f"row-{index}",
                "case": case,
                "rep": rep,
                "rows": rows,
                "transcripts": transcripts,
            }
        )
    return groups


def _arm_checks(arm: Mapping[str, Any] | None) -> dict[str, Any]:
    if arm is None:
        return {"status": "not run", "checks": [], "attempts": 0}
    return {
        "status": str(arm.get("status")),
        "attempts": arm.get("attempts", 1),
        "checks": [{"name": str(name), "passed": bool(ok)} for name, ok in arm.get("checks") or []],
    }


def _judge_view(decision: JudgeDecision | None, opponent: str) -> dict[str, Any] | None:
    """The judge's answers in arm names: with no failed attempt, the two orderings as asked."""
    if decision is None:
        return None
    orderings = len(decision.raw_answers) == 2 and not decision.errors
    answers = []
    for index, raw in enumerate(decision.raw_answers):
        if orderings:
            candidate_label = "A" if index == 0 else "B"
            label = f"candidate as {candidate_label}"
        else:
            candidate_label, label = None, f"attempt {index + 1}"
        answers.append({"label": label} | _answer(raw, candidate_label, opponent))
    return {
        "cause": decision.cause,
        "winner": decision.winner,
        "escalated": decision.escalated,
        "answers": answers,
        "errors": [redact_text(error) for error in decision.errors],
    }


def _answer(raw: str, candidate_label: str | None, opponent: str) -> dict[str, str]:
    try:
        answer = parse_answer(raw)
    except ValueError as error:
        return {"winner": "no answer", "reason": redact_text(f"{error}: {raw}")}
    winner: str = answer.winner
    if candidate_label is not None and winner != "tie":
        winner = "candidate" if winner == candidate_label else opponent
    elif winner != "tie":
        winner = f"{winner} (order unknown)"
    return {"winner": winner, "reason": redact_text(answer.reason)}
