"""``trialrun verify PLAN``: prove the gate catches the breakages a plan plants.

Exit 0 only when every check held, 1 when one did not, 2 for an invalid plan (or suite). The
evidence CI keeps lands in ``--out`` (default ``trialrun_out/verify/<id>/``): summary.json,
junit.xml with one testcase per check, and report.md for humans.
"""

from __future__ import annotations

import secrets
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import click

from trialrun.base.fsutil import atomic_write_text, dumps_json
from trialrun.base.junitxml import add_reason, junit_document, testcase, testsuite
from trialrun.cli import EXIT_FAILED, EXIT_OK
from trialrun.cli.pathparam import PathParam
from trialrun.commands.verify_plan import VerifyPlan, load_plan
from trialrun.commands.verify_run import Check, VerifyResult, run_plan
from trialrun.config.paths import display_path

SCHEMA = "trialrun.verify/1"


@click.command(short_help="Prove the gate catches planted regressions.")
@click.argument("plan", type=PathParam(path_type=Path))
@click.option(
    "--out",
    "out",
    type=PathParam(path_type=Path, file_okay=False),
    default=None,
    help="Evidence directory (default: trialrun_out/verify/<id>/).",
)
def verify(plan: Path, out: Path | None) -> int:
    """Check that a suite passes repeatably and fails on each planted regression."""
    loaded = load_plan(plan)
    verify_id = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + secrets.token_hex(3)
    out_dir = out if out is not None else Path("trialrun_out") / "verify" / verify_id
    result = run_plan(loaded, on_check=_echo_check)
    write_evidence(out_dir, verify_id, loaded, result)
    verdict = "PASS" if result.passed else "FAIL"
    held = sum(1 for check in result.checks if check.passed)
    click.echo(
        f"verify {verdict}: {held}/{len(result.checks)} checks held in {result.seconds:.1f}s; "
        f"evidence in {display_path(out_dir)}"
    )
    return EXIT_OK if result.passed else EXIT_FAILED


def _echo_check(check: Check) -> None:
    click.echo(f"{'ok  ' if check.passed else 'FAIL'} {check.name} ({check.seconds:.1f}s)")
    for problem in check.problems:
        click.echo(f"       {problem}")


def write_evidence(out_dir: Path, verify_id: str, plan: VerifyPlan, result: VerifyResult) -> None:
    """summary.json, junit.xml and report.md for ``result``, each written atomically."""
    out_dir.mkdir(parents=True, exist_ok=True)
    summary = build_summary(verify_id, plan, result)
    atomic_write_text(out_dir / "summary.json", dumps_json(summary) + "\n")
    atomic_write_text(out_dir / "junit.xml", build_junit(plan, result))
    atomic_write_text(out_dir / "report.md", build_report(summary))


def build_summary(verify_id: str, plan: VerifyPlan, result: VerifyResult) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "id": verify_id,
        "plan": display_path(plan.plan_file),
        "suite": plan.suite.config.suite_name,
        "passed": result.passed,
        "seconds": round(result.seconds, 3),
        "checks": [
            {
                "name": check.name,
                "passed": check.passed,
                "problems": check.problems,
                "seconds": round(check.seconds, 3),
            }
            for check in result.checks
        ],
    }


def build_junit(plan: VerifyPlan, result: VerifyResult) -> str:
    failed = sum(1 for check in result.checks if not check.passed)
    root = testsuite(
        f"verify {plan.suite.config.suite_name}",
        tests=len(result.checks),
        failures=failed,
        errors=0,
        seconds=result.seconds,
    )
    for check in result.checks:
        case = testcase(root, check.name, "verify", check.seconds)
        if not check.passed:
            add_reason(case, "failure", "verify", check.problems[0], check.problems)
    ET.indent(root)
    return junit_document(root)


def build_report(summary: dict[str, Any]) -> str:
    verdict = "PASS" if summary["passed"] else "FAIL"
    lines = [
        f"# trialrun verify: {verdict}",
        "",
        f"Plan `{summary['plan']}`, suite `{summary['suite']}`, {summary['seconds']:.1f}s.",
        "",
        "| check | result | seconds |",
        "| --- | --- | --- |",
    ]
    for check in summary["checks"]:
        shown = "held" if check["passed"] else "**failed**"
        lines.append(f"| `{check['name']}` | {shown} | {check['seconds']:.1f} |")
    problems = [check for check in summary["checks"] if check["problems"]]
    if problems:
        lines += ["", "## Problems"]
        for check in problems:
            lines += ["", f"### `{check['name']}`", ""]
            lines += ["- " + problem.replace("|", "\\|") for problem in check["problems"]]
    return "\n".join(lines) + "\n"
