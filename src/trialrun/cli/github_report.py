"""What `run` and `merge` tell GitHub Actions: annotations on the pull request, a step summary."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from trialrun.base.results import RunResult


def report_to_github(
    result: RunResult,
    summary: dict[str, Any],
    regression: dict[str, Any] | None,
    *,
    artifacts: str,
    case_locations: Mapping[str, tuple[str, int]],
) -> None:
    """Annotations when run by GitHub Actions; a Markdown step summary when GitHub asks for one."""
    if os.environ.get("GITHUB_ACTIONS") == "true":
        from trialrun.report.annotations import github_annotations

        for line in github_annotations(result, regression, case_locations=case_locations):
            click.echo(line)
    step_summary_file = os.environ.get("GITHUB_STEP_SUMMARY")
    if step_summary_file:
        from trialrun.report.step_summary import (
            actions_run_url,
            append_step_summary,
            build_step_summary,
        )

        text = build_step_summary(
            result,
            summary,
            regression,
            artifacts_hint=artifacts,
            run_url=actions_run_url(os.environ),
        )
        append_step_summary(Path(step_summary_file), text)
