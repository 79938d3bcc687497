"""Compare two finished runs case by case: status, tool sequence, final output and wall time.

A run is read from its directory (or its ``summary.json``): statuses and wall times come from
the summary, tool sequences and final outputs from ``run.jsonl``, read one line at a time so a
large event log never sits in memory whole. A run without ``run.jsonl`` (a summary copied on its
own) is still compared on status and wall time, and the result says what was left out.

Wall times are noisy, so a change counts only when it is both large in proportion and large in
absolute terms: a case going from 2 ms to 5 ms is +150% and means nothing.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trialrun.base.nesting import unreadable_json
from trialrun.base.words import counted
from trialrun.errors import ConfigError

DIFF_SCHEMA_VERSION = 1
OUTPUT_DIFF_MAX_LINES = 40
OUTPUT_DIFF_LINE_MAX_CHARS = 200
DEFAULT_WALL_THRESHOLD_PCT = 50.0
DEFAULT_WALL_THRESHOLD_MS = 50


@dataclass(slots=True)
class CaseTrace:
    """What one case of a run did, as far as a diff cares."""

    case_id: str
    status: str | None = None
    wall_ms: float | None = None
    tools: list[str] = field(default_factory=list)
    output_text: str | None = None
    """The final output as pretty JSON; None when the agent gave none."""


@dataclass(frozen=True, slots=True)
class RunTrace:
    """One run, read back from its artifacts."""

    label: str
    run_id: str | None
    suite_name: str | None
    cases: dict[str, CaseTrace]
    has_events: bool
    """False when ``run.jsonl`` was missing: tool sequences and outputs are unknown."""


@dataclass(frozen=True, slots=True)
class WallChange:
    case_id: str
    a_ms: float
    b_ms: float

    @property
    def delta_ms(self) -> float:
        return self.b_ms - self.a_ms

    @property
    def delta_pct(self) -> float | None:
        return None if self.a_ms == 0 else self.delta_ms * 100 / self.a_ms


@dataclass(frozen=True, slots=True)
class RunDiff:
    """Every difference between run A and run B; ``differs`` decides the exit code."""

    a: RunTrace
    b: RunTrace
    wall_threshold_pct: float
    wall_threshold_ms: float
    only_in_a: list[str]
    only_in_b: list[str]
    status_changed: list[tuple[str, str | None, str | None]]
    tools_changed: list[tuple[str, list[str], list[str]]]
    output_changed: list[tuple[str, list[str]]]
    """``(case id, bounded unified diff lines)``."""
    wall_changed: list[WallChange]
    notes: list[str]

    @property
    def cases_compared(self) -> int:
        return len(set(self.a.cases) & set(self.b.cases))

    @property
    def differing(self) -> list[str]:
        """Cases in both runs that changed in any way, sorted. A case in one run only was not
        compared, so it is not among them: ``only_in_a`` and ``only_in_b`` list those."""
        changed = {
            *(i for i, _, _ in self.status_changed),
            *(i for i, _, _ in self.tools_changed),
            *(i for i, _ in self.output_changed),
            *(c.case_id for c in self.wall_changed),
        }
        return sorted(changed)

    @property
    def differs(self) -> bool:
        """Any difference, a case present in one run only included: the runs are not the same."""
        return any(
            (
                self.only_in_a,
                self.only_in_b,
                self.status_changed,
                self.tools_changed,
                self.output_changed,
                self.wall_changed,
            )
        )


def load_run(path: Path) -> RunTrace:
    """Read a run directory, or a ``summary.json`` next to its ``run.jsonl``.

    Raises ``ConfigError`` (file and line) when the summary is missing or either file is not
    what trialrun (or RunLedger) writes.
    """
    summary_path = path / "summary.json" if path.is_dir() else path
    if not summary_path.is_file():
        raise ConfigError(
            "expected a run directory holding summary.json, or a summary.json file; "
            "found no such file",
            file=summary_path,
        )
    summary = _read_summary(summary_path)
    cases = _cases_from_summary(summary, summary_path)
    events_path = summary_path.parent / "run.jsonl"
    has_events = events_path.is_file()
    if has_events:
        _add_events(cases, events_path)
    return RunTrace(
        label=path.as_posix(),
        run_id=_optional_str(_section(summary, "run").get("run_id")),
        suite_name=_optional_str(_section(summary, "suite").get("name")),
        cases=cases,
        has_events=has_events,
    )


def diff_runs(
    a: RunTrace,
    b: RunTrace,
    *,
    wall_threshold_pct: float = DEFAULT_WALL_THRESHOLD_PCT,
    wall_threshold_ms: float = DEFAULT_WALL_THRESHOLD_MS,
) -> RunDiff:
    """Compare ``a`` (before) with ``b`` (after); cases are reported in sorted id order."""
    common = sorted(set(a.cases) & set(b.cases))
    compare_events = a.has_events and b.has_events
    status_changed: list[tuple[str, str | None, str | None]] = []
    tools_changed: list[tuple[str, list[str], list[str]]] = []
    output_changed: list[tuple[str, list[str]]] = []
    wall_changed: list[WallChange] = []
    for case_id in common:
        old, new = a.cases[case_id], b.cases[case_id]
        if old.status != new.status:
            status_changed.append((case_id, old.status, new.status))
        if compare_events and old.tools != new.tools:
            tools_changed.append((case_id, old.tools, new.tools))
        if compare_events and old.output_text != new.output_text:
            output_changed.append((case_id, output_diff(old.output_text, new.output_text)))
        if old.wall_ms is not None and new.wall_ms is not None:
            change = WallChange(case_id, old.wall_ms, new.wall_ms)
            if is_wall_change(change, wall_threshold_pct, wall_threshold_ms):
                wall_changed.append(change)
    notes = [
        f"{run.label} has no run.jsonl: tool sequences and outputs were not compared"
        for run in (a, b)
        if not run.has_events
    ]
    if a.suite_name and b.suite_name and a.suite_name != b.suite_name:
        notes.append(f"the runs are of different suites: {a.suite_name!r} and {b.suite_name!r}")
    return RunDiff(
        a=a,
        b=b,
        wall_threshold_pct=wall_threshold_pct,
        wall_threshold_ms=wall_threshold_ms,
        only_in_a=sorted(set(a.cases) - set(b.cases)),
        only_in_b=sorted(set(b.cases) - set(a.cases)),
        status_changed=status_changed,
        tools_changed=tools_changed,
        output_changed=output_changed,
        wall_changed=wall_changed,
        notes=notes,
    )


def is_wall_change(change: WallChange, threshold_pct: float, threshold_ms: float) -> bool:
    """Both thresholds must be crossed: proportion alone flags noise on fast cases."""
    delta = abs(change.delta_ms)
    if delta < threshold_ms or delta == 0:
        return False
    pct = change.delta_pct
    return pct is None or abs(pct) > threshold_pct


def output_diff(old: str | None, new: str | None) -> list[str]:
    """A unified diff of two pretty-JSON outputs, at most ``OUTPUT_DIFF_MAX_LINES`` lines."""
    old_lines = (old if old is not None else "(no final output)").splitlines()
    new_lines = (new if new is not None else "(no final output)").splitlines()
    lines = [
        _bounded(line)
        for line in difflib.unified_diff(
            old_lines, new_lines, fromfile="a", tofile="b", n=2, lineterm=""
        )
    ]
    if len(lines) > OUTPUT_DIFF_MAX_LINES:
        hidden = len(lines) - OUTPUT_DIFF_MAX_LINES
        lines = [*lines[:OUTPUT_DIFF_MAX_LINES], f"... ({hidden} more diff lines)"]
    return lines


def pretty_output(output: Any) -> str:
    """Stable text for comparing outputs: ``true`` and ``1`` differ, key order does not."""
    return json.dumps(output, indent=2, sort_keys=True, ensure_ascii=False, default=str)


def diff_to_json(diff: RunDiff) -> dict[str, Any]:
    """The ``--json`` document: one object, lists in sorted case order."""
    return {
        "schema_version": DIFF_SCHEMA_VERSION,
        "differs": diff.differs,
        "run_a": _run_json(diff.a),
        "run_b": _run_json(diff.b),
        "cases_compared": diff.cases_compared,
        "cases_differing": len(diff.differing),
        "differing": diff.differing,
        "thresholds": {"wall_pct": diff.wall_threshold_pct, "wall_ms": diff.wall_threshold_ms},
        "only_in_a": diff.only_in_a,
        "only_in_b": diff.only_in_b,
        "status_changed": [{"id": i, "a": a, "b": b} for i, a, b in diff.status_changed],
        "tools_changed": [{"id": i, "a": a, "b": b} for i, a, b in diff.tools_changed],
        "output_changed": [{"id": i, "diff": lines} for i, lines in diff.output_changed],
        "wall_changed": [
            {
                "id": change.case_id,
                "a_ms": change.a_ms,
                "b_ms": change.b_ms,
                "delta_ms": change.delta_ms,
                "delta_pct": change.delta_pct,
            }
            for change in diff.wall_changed
        ],
        "notes": diff.notes,
    }


def _run_json(run: RunTrace) -> dict[str, Any]:
    return {
        "path": run.label,
        "run_id": run.run_id,
        "suite": run.suite_name,
        "cases": len(run.cases),
        "has_events": run.has_events,
    }


def _bounded(line: str) -> str:
    if len(line) <= OUTPUT_DIFF_LINE_MAX_CHARS:
        return line
    return line[: OUTPUT_DIFF_LINE_MAX_CHARS - 1] + "…"


def _read_summary(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
        if not text.strip():
            # About the file as a whole: the parser would blame line 1 (or the last line).
            raise ConfigError("expected a run summary (JSON), found an empty file", file=path)
        document = json.loads(text)
    except OSError as exc:
        raise ConfigError(f"cannot read the run summary ({exc.strerror})", file=path) from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"expected UTF-8 JSON, found undecodable bytes ({exc})", file=path
        ) from exc
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"expected JSON, found invalid text: {exc.msg}", file=path, line=exc.lineno
        ) from exc
    except (ValueError, RecursionError) as exc:
        raise ConfigError(
            f"expected JSON, found JSON that cannot be read: {unreadable_json(exc)}", file=path
        ) from None
    if not isinstance(document, dict) or not isinstance(document.get("cases"), list):
        raise ConfigError(
            "expected a run summary (an object with a 'cases' list), found something else",
            file=path,
        )
    return document


def _cases_from_summary(summary: dict[str, Any], path: Path) -> dict[str, CaseTrace]:
    cases: dict[str, CaseTrace] = {}
    for position, doc in enumerate(summary["cases"]):
        if not isinstance(doc, dict) or not isinstance(doc.get("id"), str):
            raise ConfigError(
                f"cases[{position}]: expected an object with a string 'id', found {doc!r:.80}",
                file=path,
            )
        wall = doc.get("wall_ms")
        cases[doc["id"]] = CaseTrace(
            case_id=doc["id"],
            status=_optional_str(doc.get("status")),
            wall_ms=float(wall) if isinstance(wall, int | float) and wall is not True else None,
        )
    return cases


def _add_events(cases: dict[str, CaseTrace], path: Path) -> None:
    """Fill tool sequences and final outputs from the event log, in event order."""
    seen_output: set[str] = set()
    events = 0
    for line_no, event in _events(path):
        events += 1
        if not isinstance(event.get("type"), str):
            raise ConfigError(
                f"expected an event with a string 'type', found keys {sorted(event)[:6]}",
                file=path,
                line=line_no,
            )
        case_id = event.get("case_id")
        case = cases.get(case_id) if isinstance(case_id, str) else None
        if case is None:  # events of cases the summary does not list (an interrupted run)
            continue
        kind = event.get("type")
        if kind == "tool_call":
            name = event.get("name")
            if not isinstance(name, str):
                raise ConfigError(
                    "expected a tool_call event with a string 'name'", file=path, line=line_no
                )
            case.tools.append(name)
        elif kind == "final_output" and case_id not in seen_output:
            # The first final output ends a case; anything after it was never used.
            seen_output.add(case.case_id)
            case.output_text = pretty_output(event.get("output"))
    if events == 0 and cases:
        # Every case writes its task_start: an empty log beside a summary of cases was cut.
        raise ConfigError(
            f"expected the events of {counted(len(cases), 'case')} listed in summary.json, "
            "found an empty event log",
            file=path,
        )


def _events(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    try:
        with path.open(encoding="utf-8") as stream:
            for line_no, line in enumerate(stream, start=1):
                if not line.strip():
                    continue
                try:
                    event = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ConfigError(
                        f"expected one JSON event per line, found invalid JSON: {exc.msg}",
                        file=path,
                        line=line_no,
                    ) from exc
                except (ValueError, RecursionError) as exc:
                    raise ConfigError(
                        "expected one JSON event per line, found JSON that cannot be read: "
                        f"{unreadable_json(exc)}",
                        file=path,
                        line=line_no,
                    ) from None
                if not isinstance(event, dict):
                    raise ConfigError(
                        f"expected a JSON object per line, found {type(event).__name__}",
                        file=path,
                        line=line_no,
                    )
                yield line_no, event
    except OSError as exc:
        raise ConfigError(f"cannot read the event log ({exc.strerror})", file=path) from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"expected UTF-8 text, found undecodable bytes ({exc})", file=path
        ) from exc


def _section(summary: dict[str, Any], key: str) -> dict[str, Any]:
    value = summary.get(key)
    return value if isinstance(value, dict) else {}


def _optional_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None
