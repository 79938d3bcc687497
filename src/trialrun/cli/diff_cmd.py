"""``trialrun diff RUN_A RUN_B``: what changed between two runs, for a person or a program.

Exit 0 when nothing differs, 1 when something does (a case present in one run only counts: the
runs are not the same, though that case is not "differing", which needs both sides), 2 when
either run cannot be read (the ``ConfigError`` reaches ``run_cli``, which prints
``error: <file>:<line>: <what>``).
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from trialrun.artifacts.diffing import (
    DEFAULT_WALL_THRESHOLD_MS,
    DEFAULT_WALL_THRESHOLD_PCT,
    RunDiff,
    RunTrace,
    WallChange,
    diff_runs,
    diff_to_json,
    load_run,
)
from trialrun.base.words import counted
from trialrun.cli import EXIT_FAILED, EXIT_OK
from trialrun.cli.pathparam import PathParam

SEQUENCE_MAX_SHOWN = 30


@click.command(short_help="Show what changed between two runs.")
@click.argument("run_a", type=PathParam(path_type=Path))
@click.argument("run_b", type=PathParam(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of text.")
@click.option(
    "--wall-threshold-pct",
    type=click.FloatRange(min=0),
    default=DEFAULT_WALL_THRESHOLD_PCT,
    show_default=True,
    help="Report a wall time change only above this many percent...",
)
@click.option(
    "--wall-threshold-ms",
    type=click.FloatRange(min=0),
    default=DEFAULT_WALL_THRESHOLD_MS,
    show_default=True,
    help="...and only when it is at least this many milliseconds.",
)
@click.option(
    "--html",
    "html_out",
    type=PathParam(path_type=Path, dir_okay=False),
    help="Also write the changes as a self-contained HTML page here (report.html's baseline view).",
)
def diff(
    run_a: Path,
    run_b: Path,
    as_json: bool,
    wall_threshold_pct: float,
    wall_threshold_ms: float,
    html_out: Path | None,
) -> int:
    """Compare RUN_A with RUN_B (run directories or their summary.json files)."""
    result = diff_runs(
        load_run(run_a),
        load_run(run_b),
        wall_threshold_pct=wall_threshold_pct,
        wall_threshold_ms=wall_threshold_ms,
    )
    if html_out is not None:
        write_html(result, run_a, run_b, html_out)
    if as_json:
        click.echo(json.dumps(diff_to_json(result), indent=2, ensure_ascii=False))
    else:
        click.echo(format_diff(result))
        if html_out is not None:
            click.echo(f"Wrote {html_out}")
    return EXIT_FAILED if result.differs else EXIT_OK


def write_html(result: RunDiff, run_a: Path, run_b: Path, out: Path) -> None:
    """The page, written atomically; a place it cannot be written is invalid input (exit 2)."""
    from trialrun.artifacts.comparing import diff_html
    from trialrun.base.fsutil import atomic_write_text
    from trialrun.errors import ConfigError

    page = diff_html(result, run_a, run_b)
    try:
        atomic_write_text(out, page)
    except OSError as exc:
        raise ConfigError(
            f"cannot write the HTML diff ({exc.strerror or exc}); expected a writable file path",
            file=out,
        ) from None


def format_diff(diff: RunDiff) -> str:
    """The human report, grouped by kind of change (no trailing newline)."""
    lines = [f"trialrun diff: A = {_describe(diff.a)}", f"               B = {_describe(diff.b)}"]
    lines += [f"note: {note}" for note in diff.notes]
    if diff.status_changed:
        lines += ["", f"Status changed ({len(diff.status_changed)}):"]
        lines += [f"  {_clean(i)}: {a} -> {b}" for i, a, b in diff.status_changed]
    if diff.tools_changed:
        lines += ["", f"Tool sequence changed ({len(diff.tools_changed)}):"]
        for case_id, old, new in diff.tools_changed:
            lines += [
                f"  {_clean(case_id)}:",
                f"    A: {_sequence(old)}",
                f"    B: {_sequence(new)}",
            ]
    if diff.output_changed:
        lines += ["", f"Final output changed ({len(diff.output_changed)}):"]
        for case_id, diff_lines in diff.output_changed:
            lines += [f"  {_clean(case_id)}:", *(f"    {_clean(line)}" for line in diff_lines)]
    if diff.wall_changed:
        lines += [
            "",
            f"Wall time changed ({len(diff.wall_changed)}; over {diff.wall_threshold_pct:g}% "
            f"and {diff.wall_threshold_ms:g} ms):",
        ]
        lines += [f"  {_clean(c.case_id)}: {_wall(c)}" for c in diff.wall_changed]
    for title, ids in (("Only in A", diff.only_in_a), ("Only in B", diff.only_in_b)):
        if ids:
            lines += ["", f"{title} ({len(ids)}): {', '.join(_clean(i) for i in ids)}"]
    lines += ["", _conclusion(diff)]
    return "\n".join(lines)


def _conclusion(diff: RunDiff) -> str:
    """The last line: compared cases that differ, and apart from them the cases not compared."""
    if not diff.differs:
        return f"No differences ({diff.cases_compared} cases compared)."
    differing, compared = len(diff.differing), diff.cases_compared
    head = (
        f"{counted(differing, 'case')} {'differs' if differing == 1 else 'differ'} "
        f"({compared} compared)"
        if differing
        else f"No compared case differs ({compared} compared)"
    )
    one_side = len(diff.only_in_a) + len(diff.only_in_b)
    return f"{head}; {counted(one_side, 'case')} in one run only." if one_side else f"{head}."


def _describe(run: RunTrace) -> str:
    named = run.run_id is not None and run.run_id not in run.label
    parts = [f"run {run.run_id}" if named else None, run.suite_name]
    extra = ", ".join(_clean(p) for p in parts if p)
    return f"{_clean(run.label)} ({extra})" if extra else _clean(run.label)


def _sequence(names: list[str]) -> str:
    if not names:
        return "(no tool calls)"
    shown = ", ".join(_clean(n) for n in names[:SEQUENCE_MAX_SHOWN])
    hidden = len(names) - SEQUENCE_MAX_SHOWN
    return f"{shown}, ... (+{hidden} more)" if hidden > 0 else shown


def _wall(change: WallChange) -> str:
    pct = change.delta_pct
    relative = f", {pct:+.0f}%" if pct is not None else ""
    return f"{change.a_ms:g} ms -> {change.b_ms:g} ms ({change.delta_ms:+g} ms{relative})"


def _clean(text: str) -> str:
    """Agent-chosen text reaches a terminal: control and bidi characters shown as escapes."""
    from trialrun.base.visible import visible_name

    return visible_name(text)
