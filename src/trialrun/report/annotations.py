"""GitHub workflow-command annotations that point at the failing case's file and line.

One ``::error file=...,line=...,title=trialrun: <case>::<message>`` per failing case, then one
``::error title=trialrun: gate <id>::<message>`` per failing regression gate. GitHub shows only
ten ``::error`` lines per step, so the gates (a handful at most, and about the whole run) always
go out and the cases fill the rest; one ``::warning::`` says how many cases were left out.

Escaping follows GitHub's runner: in the message, ``%``, CR and LF are percent-encoded; in a
property value also ``:`` and ``,``. Only the values we interpolate are escaped: the literal
``trialrun: `` prefix of a title is harmless, since the runner ends the properties at ``::``.
Agent text is redacted and stripped of control characters first.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trialrun.base.redact import redact_text
from trialrun.base.results import CaseResult, RunResult
from trialrun.base.visible import visible
from trialrun.config.yamlload import load_yaml_file
from trialrun.errors import ConfigError
from trialrun.report.console import FailureDetail, failure_details, gate_failures

if TYPE_CHECKING:
    from trialrun.config.loader import Suite

MAX_ERRORS_PER_STEP = 10
"""GitHub displays at most this many ``::error`` annotations per step and drops the rest."""
MAX_MESSAGE_CHARS = 4000
"""An annotation is a pointer, not the report: the full text is in the artifacts."""
MAX_FIELD_CHARS = 600


def github_annotations(
    run: RunResult,
    regression: dict[str, Any] | None,
    *,
    case_locations: Mapping[str, tuple[str, int]],
) -> list[str]:
    """The workflow commands for a finished run: failing cases, the overflow warning, gates.

    ``case_locations`` maps a case id to ``(file relative to the repository root, line)``
    (see ``case_locations``); a case missing from it gets an annotation without a file.
    """
    gates = [
        f"::error title=trialrun: gate {escape_property(gate)}::{escape_data(message)}"
        for gate, message in gate_failures(regression)
    ]
    failing = [case for case in run.cases if not case.passed and run.excused(case) is None]
    room = max(MAX_ERRORS_PER_STEP - len(gates), 0)
    commands = [_case_annotation(case, case_locations.get(case.case_id)) for case in failing[:room]]
    left_out = len(failing) - len(commands)
    if left_out:
        noun = "case is" if left_out == 1 else "cases are"
        commands.append(
            f"::warning title=trialrun::{left_out} more failing {noun} not annotated "
            f"(GitHub shows at most {MAX_ERRORS_PER_STEP} errors per step); "
            "see the step summary or the run artifacts"
        )
    # A quarantined failure does not gate: a warning, which GitHub shows without failing anything.
    excused = [
        _case_annotation(case, case_locations.get(case.case_id), level="warning")
        for case in run.cases
        if run.excused(case) is not None
    ]
    return commands + gates + excused


def case_locations(suite: Suite, *, workspace: Path | None = None) -> dict[str, tuple[str, int]]:
    """For each case id: its case file relative to ``workspace`` and the line of its ``id:`` key.

    ``workspace`` defaults to ``$GITHUB_WORKSPACE`` (the checkout GitHub resolves annotation
    paths against), else the working directory. A file outside it keeps its absolute path; a
    file that no longer parses points at line 1.
    """
    root = workspace if workspace is not None else _default_workspace()
    return {
        case.config.id: (_relative_to(case.file, root), _id_line(case.file)) for case in suite.cases
    }


def escape_data(value: str) -> str:
    """A workflow-command message: control and bidi characters shown as escapes
    (``base.visible``), then ``%``, CR and LF percent-encoded."""
    value = visible(value)
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(value: str) -> str:
    """A workflow-command property value: as ``escape_data``, plus ``:`` and ``,``."""
    return escape_data(value).replace(":", "%3A").replace(",", "%2C")


def _case_annotation(
    case: CaseResult, location: tuple[str, int] | None, *, level: str = "error"
) -> str:
    properties = []
    if location is not None:
        file, line = location
        properties += [f"file={escape_property(file)}", f"line={int(line)}"]
    title = redact_text(case.case_id) + (" (quarantined)" if level == "warning" else "")
    properties.append(f"title=trialrun: {escape_property(title)}")
    return f"::{level} {','.join(properties)}::{escape_data(case_message(case))}"


def case_message(case: CaseResult) -> str:
    """Every reason ``case`` did not pass, one block of lines each, bounded in length."""
    blocks = [_detail_text(detail) for detail in failure_details(case)]
    text = f"{case.status.upper()}: " + "\n".join(blocks)
    return _shorten(text, MAX_MESSAGE_CHARS)


def _detail_text(detail: FailureDetail) -> str:
    # failure_details has already redacted the texts.
    lines = [f"{detail.label} {detail.type}: {_shorten(detail.message, MAX_FIELD_CHARS)}"]
    if detail.expected is not None:
        lines.append(f"  expected: {_shorten(detail.expected, MAX_FIELD_CHARS)}")
    if detail.observed is not None:
        lines.append(f"  observed: {_shorten(detail.observed, MAX_FIELD_CHARS)}")
    return "\n".join(lines)


def _shorten(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[: limit - 1] + "…"


def _default_workspace() -> Path:
    return Path(os.environ.get("GITHUB_WORKSPACE") or os.getcwd())


def _relative_to(file: Path, root: Path) -> str:
    absolute = Path(os.path.abspath(file))
    for candidate_file, candidate_root in (
        (absolute, Path(os.path.abspath(root))),
        (absolute.resolve(), root.resolve()),  # a symlinked checkout or temp dir
    ):
        if candidate_file.is_relative_to(candidate_root):
            return candidate_file.relative_to(candidate_root).as_posix()
    return absolute.as_posix()


def _id_line(file: Path) -> int:
    try:
        return load_yaml_file(file).line_of(("id",))
    except ConfigError:  # edited or removed since the suite was loaded: still name the file
        return 1
