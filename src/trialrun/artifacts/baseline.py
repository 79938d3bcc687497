"""Baseline files, their promotion from a run, and the regression gate.

A baseline is a summary.json (schema_version 1) reduced to what RunLedger's baseline model reads
plus what a later identical run reproduces, so that promoting the same run twice writes
byte-identical files, and a team can switch back to RunLedger with the baselines it has:

* dropped: ``run.git_sha``, ``run.ci``, run timestamps, ``run.interrupted``,
  ``trialrun_version``, the ``regression`` block and each case's ``stderr_tail`` (its runs'
  too) and ``startup_ms`` (how long its agent was started ahead: nothing gates it);
* kept for a run with ``--repeat``: each case's ``runs``, ``passes``, ``pass_rate`` and interval,
  which the ``pass_rate_regressions`` check (``rate_gate``) compares;
* kept: everything deterministic, including ``cassette_sha256``; and the run's own
  ``generated_at``, ``run.run_id`` and wall times (``aggregates.metrics.wall_ms``, each case's
  ``wall_ms``), which RunLedger requires. Wall times are kept whether or not the policy has a
  wall-time gate yet, so a gate added later compares against them instead of being skipped;
* paths (``suite_path``, ``cassette_path``, path-like ``agent_command`` parts) become relative
  to the baseline file's directory, with ``/``. Relative paths in a summary are read as relative
  to the working directory, as the run wrote them; absolute ones (outside it) stay absolute;
* ``run.exit_status`` is recomputed from the cases alone (a failed *regression* gate does not
  make a run unfit to become the next baseline: re-baselining is how such a gate is answered);
* cases are sorted by id; the file is written atomically with sorted keys and indent 2.

``compute_regression`` produces RunLedger's block (three threshold checks, same order, ids,
notes and fraction semantics) plus a fourth check, ``status_regressions``, which is never
skipped and fails when a case that passed in the baseline now fails or errors.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeGuard

from trialrun.artifacts.rate_gate import rate_check, rates_of
from trialrun.base.fsutil import write_json
from trialrun.base.nesting import unreadable_json
from trialrun.base.quoting import excerpt
from trialrun.base.signedjson import loads_unique
from trialrun.config.models import Regression
from trialrun.config.quarantine import excused_ids
from trialrun.errors import ConfigError, TrialrunError

CASE_STATUSES = ("pass", "fail", "error", "skipped", "flaky")
THRESHOLD_KEYS = ("min_pass_rate", "max_avg_wall_ms_delta_pct", "max_p95_wall_ms_delta_pct")
_ALIASES = {
    "min_success_rate": "min_pass_rate",
    "max_p95_wall_ms_increase_pct": "max_p95_wall_ms_delta_pct",
}
_EXPECTED = "expected a summary.json-style baseline with cases[] (a JSON object)"
SCHEMA_WARNING = "Baseline schema_version does not match current summary schema_version."
MISSING_METRIC_NOTE = "Baseline metric missing or zero."


def load_baseline(path: str | Path) -> dict[str, Any]:
    """Read a baseline (ours or RunLedger's); any problem is a ConfigError naming file and line."""
    return _read_document(Path(path), what="baseline file")


def read_summary(path: str | Path) -> dict[str, Any]:
    """A run's summary.json, given the run directory or the file itself."""
    source = Path(path)
    if source.is_dir():
        source = source / "summary.json"
    return _read_document(source, what="run summary (a run directory or its summary.json)")


def promote(
    run_dir_or_summary: Path,
    to: Path,
    *,
    allow_failing: bool,
    warn: Callable[[str], None] | None = None,
) -> Path:
    """Write the baseline ``to`` from a finished run; refuse a run that did not pass.

    A case whose quarantine holds (quarantine.yaml) does not gate the run, so it does not block
    the promotion either; ``warn`` is told of each such case that did not pass."""
    summary = read_summary(run_dir_or_summary)
    status = cases_exit_status(summary)
    if warn is not None:
        for line in excused_failures(summary):
            warn(line)
    if status != "success" and not allow_failing:
        raise TrialrunError(
            f"refusing to promote {run_dir_or_summary}: expected a passing run, found "
            f"exit_status {status} ({_status_counts(summary)}); fix the run, or pass "
            "--allow-failing to make these results the baseline"
        )
    target = Path(to)
    write_json(target, baseline_from_summary(summary, base_dir=target.parent))
    return target


def cases_exit_status(summary: dict[str, Any]) -> str:
    """The run's status judged on its cases only: error > failed > success. Quarantined cases
    (an entry that holds) do not count, as in the run's own ``exit_status``."""
    excused = excused_ids(summary.get("cases", []))
    cases = [case for case in summary.get("cases", []) if str(case.get("id")) not in excused]
    statuses = {case.get("status") for case in cases}
    if "error" in statuses or _section(summary, "run").get("interrupted"):
        return "error"
    if excused and not cases:
        return "success"  # every case quarantined: nothing gates
    # A flaky case its suite tolerates (``blocking`` false) passed the run, as it does here.
    statuses = {
        "pass" if status == "flaky" and case.get("blocking") is False else status
        for case in cases
        for status in [case.get("status")]
    }
    if not statuses or statuses - {"pass"}:
        return "failed"
    return "success"


def baseline_from_summary(
    summary: dict[str, Any], *, base_dir: Path, cwd: Path | None = None
) -> dict[str, Any]:
    """The baseline document for ``summary`` (see the module docstring for what is kept)."""
    here = Path.cwd() if cwd is None else cwd
    anchor = Path(os.path.abspath(here / base_dir))
    suite = _section(summary, "suite")
    if isinstance(suite.get("suite_path"), str):
        suite["suite_path"] = _rebase(suite["suite_path"], anchor, here)
    if isinstance(suite.get("agent_command"), list):
        suite["agent_command"] = [
            _rebase_command_part(p, anchor, here) for p in suite["agent_command"]
        ]
    aggregates = _section(summary, "aggregates")
    run = _section(summary, "run")
    document: dict[str, Any] = {
        "schema_version": summary.get("schema_version"),
        "generated_at": summary.get("generated_at"),
        "runledger_version": summary.get("runledger_version"),
        "run": {
            "run_id": run.get("run_id"),
            "mode": run.get("mode"),
            "exit_status": cases_exit_status(summary),
        },
        "suite": suite,
        "aggregates": aggregates,
        "cases": sorted(
            (_baseline_case(case, anchor, here) for case in summary.get("cases", [])),
            key=lambda case: str(case.get("id")),
        ),
    }
    if "policy_snapshot" in summary:
        document["policy_snapshot"] = summary["policy_snapshot"]
    return document


def thresholds_of(policy: Regression | dict[str, Any] | None) -> dict[str, float | None]:
    """The three thresholds from a suite's ``Regression``, a flat dict or a policy_snapshot."""
    found: dict[str, float | None] = dict.fromkeys(THRESHOLD_KEYS)
    if policy is None:
        return found
    if isinstance(policy, Regression):
        return {key: getattr(policy, key) for key in THRESHOLD_KEYS}
    layers = [policy, policy.get("thresholds"), policy.get("regression")]
    for layer in layers:
        if not isinstance(layer, dict):
            continue
        for raw_key, value in layer.items():
            key = _ALIASES.get(raw_key, raw_key)
            if key not in found or value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ConfigError(
                    f"regression threshold '{raw_key}' must be a number, found {_shown(value)}"
                )
            found[key] = float(value)
    return found


def compute_regression(
    baseline: dict[str, Any],
    summary: dict[str, Any],
    policy: Regression | dict[str, Any] | None,
    baseline_path_display: str,
) -> dict[str, Any]:
    """Compare ``summary`` with ``baseline``: RunLedger's regression block plus status gating."""
    limits = thresholds_of(policy)
    warnings: list[str] = []
    if baseline.get("schema_version") != summary.get("schema_version"):
        warnings.append(SCHEMA_WARNING)
    before = _statuses(baseline)
    after = _statuses(summary)
    # Quarantined cases (quarantine.yaml, entry not expired) are reported but never gate.
    excused = excused_ids(summary.get("cases") or [])
    status_changed = [
        {"id": case_id, "baseline": before[case_id], "current": after[case_id]}
        for case_id in sorted(before.keys() & after.keys())
        if before[case_id] != after[case_id]
    ]
    # Cases run K times on both sides gate on their rates, not on one outcome (rate_gate).
    before_rates, after_rates = rates_of(baseline), rates_of(summary)
    for case_id in excused:
        after_rates.pop(case_id, None)
    rated = before_rates.keys() & after_rates.keys()
    base_rate, cur_rate = _pass_rate(baseline), _pass_rate(summary, excused)
    base_mean, cur_mean = _wall(baseline, "mean"), _wall(summary, "mean")
    base_p95, cur_p95 = _wall(baseline, "p95"), _wall(summary, "p95")
    checks = [
        _pass_rate_check(limits["min_pass_rate"], base_rate, cur_rate),
        _wall_check("max_avg_wall_ms_delta_pct", limits[THRESHOLD_KEYS[1]], base_mean, cur_mean),
        _wall_check("max_p95_wall_ms_delta_pct", limits[THRESHOLD_KEYS[2]], base_p95, cur_p95),
        _status_check(
            [c for c in status_changed if c["id"] not in excused and c["id"] not in rated]
        ),
    ]
    if excused and not after.keys() - excused:
        # Every case quarantined: 0 of 0 cases is no pass rate, not a rate of zero.
        checks[0]["status"] = "skipped"
        checks[0]["note"] = "every case is quarantined: no pass rate to gate."
    if excused:
        checks[0]["note"] = _quarantine_note(checks[0].get("note"), excused)
        checks[3]["note"] = _quarantine_note(checks[3].get("note"), excused)
    by_rate = rate_check(before_rates, after_rates)
    if by_rate is not None:
        checks.append(by_rate)
    mean_delta, p95_delta = checks[1]["delta_pct"], checks[2]["delta_pct"]
    return {
        "baseline_path": baseline_path_display,
        "passed": all(check["status"] != "fail" for check in checks),
        "checks": checks,
        "metrics": {
            "pass_rate": {
                "baseline": base_rate,
                "current": cur_rate,
                "delta": cur_rate - base_rate,
            },
            "wall_ms": {
                "mean": {"baseline": base_mean, "current": cur_mean, "delta_pct": mean_delta},
                "p95": {"baseline": base_p95, "current": cur_p95, "delta_pct": p95_delta},
            },
        },
        "case_diffs": {
            "missing_in_current": sorted(before.keys() - after.keys()),
            "new_in_current": sorted(after.keys() - before.keys()),
            "status_changed": status_changed,
        },
        "warnings": warnings,
    }


def _pass_rate_check(limit: float | None, baseline: float, current: float) -> dict[str, Any]:
    status = "skipped" if limit is None else ("pass" if current >= limit else "fail")
    check = _check("min_pass_rate", status, limit, baseline, current)
    check["delta"] = current - baseline
    if limit is None:
        check["note"] = "No min_pass_rate configured."
    return check


def _wall_check(
    check_id: str, limit: float | None, baseline: float | None, current: float | None
) -> dict[str, Any]:
    delta_pct = _delta_pct(baseline, current)
    check = _check(check_id, "skipped", limit, baseline, current)
    check["delta_pct"] = delta_pct
    if limit is None:
        check["note"] = f"No {check_id} configured."
    elif delta_pct is None:
        check["note"] = MISSING_METRIC_NOTE
    else:
        check["status"] = "pass" if delta_pct <= limit else "fail"
    return check


def _check(check_id: str, status: str, limit: Any, baseline: Any, current: Any) -> dict[str, Any]:
    return {
        "id": check_id,
        "status": status,
        "threshold": limit,
        "baseline": baseline,
        "current": current,
    }


def _status_check(status_changed: list[dict[str, Any]]) -> dict[str, Any]:
    regressed = [
        change
        for change in status_changed
        if change["baseline"] == "pass" and change["current"] in ("fail", "error")
    ]
    check = _check("status_regressions", "fail" if regressed else "pass", 0, None, len(regressed))
    check["cases"] = [change["id"] for change in regressed]
    if regressed:
        check["note"] = "passed in the baseline, now: " + ", ".join(
            f"{change['id']} ({change['current']})" for change in regressed
        )
    return check


def _delta_pct(baseline: float | None, current: float | None) -> float | None:
    if baseline is None or current is None or baseline == 0:
        return None
    return (current - baseline) / baseline


def _statuses(document: dict[str, Any]) -> dict[str, str]:
    return {str(case["id"]): str(case.get("status")) for case in document.get("cases", [])}


def _section(document: dict[str, Any], key: str) -> dict[str, Any]:
    value = document.get(key)
    return dict(value) if isinstance(value, dict) else {}


def _pass_rate(document: dict[str, Any], excused: frozenset[str] = frozenset()) -> float:
    """The pass rate of the cases that gate (all of them but the ``excused``)."""
    rate = _section(document, "aggregates").get("pass_rate")
    if _is_number(rate) and not excused:
        return float(rate)
    statuses = [status for case_id, status in _statuses(document).items() if case_id not in excused]
    return statuses.count("pass") / len(statuses) if statuses else 0.0


def _quarantine_note(note: Any, excused: frozenset[str]) -> str:
    left_out = "quarantined, left out: " + ", ".join(sorted(excused))
    return f"{note} {left_out}" if note else left_out


def _wall(document: dict[str, Any], field: str) -> float | None:
    metrics = _section(_section(document, "aggregates"), "metrics")
    value = _section(metrics, "wall_ms").get(field)
    return float(value) if _is_number(value) else None


def _is_number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _baseline_case(case: Any, anchor: Path, cwd: Path) -> dict[str, Any]:
    doc = {key: value for key, value in case.items() if key not in {"stderr_tail", "startup_ms"}}
    if isinstance(doc.get("runs"), list):  # --repeat: each run's stderr goes as the case's does
        doc["runs"] = [
            {k: v for k, v in run.items() if k != "stderr_tail"} if isinstance(run, dict) else run
            for run in doc["runs"]
        ]
    replay = doc.get("replay")
    if isinstance(replay, dict) and isinstance(replay.get("cassette_path"), str):
        doc["replay"] = {**replay, "cassette_path": _rebase(replay["cassette_path"], anchor, cwd)}
    return doc


def _rebase(path: str, anchor: Path, cwd: Path) -> str:
    """A cwd-relative path made relative to ``anchor``; absolute paths are left alone."""
    if not path or os.path.isabs(path):
        return path
    absolute = os.path.abspath(cwd / path)
    try:
        return Path(os.path.relpath(absolute, anchor)).as_posix()
    except ValueError:  # another drive on Windows: no relative form exists
        return Path(absolute).as_posix()


def _rebase_command_part(part: Any, anchor: Path, cwd: Path) -> Any:
    # Only parts that name files move; "python3", "-m" and "--flag=x/y" are not paths.
    if not isinstance(part, str) or part.startswith("-"):
        return part
    looks_like_path = "/" in part or "\\" in part or (cwd / part).exists()
    return _rebase(part.replace("\\", "/"), anchor, cwd) if looks_like_path else part


def excused_failures(summary: dict[str, Any]) -> list[str]:
    """A warning per quarantined case that did not pass: promoted, but said."""
    excused = excused_ids(summary.get("cases", []))
    return [
        f"warning: case {case.get('id')} is {case.get('status')} but quarantined "
        f"({block.get('reason')}; owner {block.get('owner')}, until {block.get('expires')}): "
        "it does not block the promotion, and the baseline records it as "
        f"{case.get('status')}"
        for case in summary.get("cases", [])
        if str(case.get("id")) in excused and case.get("status") != "pass"
        for block in [case.get("quarantine") or {}]
    ]


def _status_counts(summary: dict[str, Any]) -> str:
    counts = Counter(str(case.get("status")) for case in summary.get("cases", []))
    return ", ".join(f"{n} {status}" for status, n in sorted(counts.items())) or "no cases"


def _read_document(path: Path, *, what: str) -> dict[str, Any]:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{what} not found", file=path) from None
    except OSError as exc:
        raise ConfigError(f"cannot read {what}: {exc.strerror or exc}", file=path) from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        message = f"not UTF-8 text (byte {exc.start}); {_EXPECTED}"
        raise ConfigError(message, file=path, line=line) from None
    if not text.strip():  # about the file as a whole: the parser would blame line 1
        raise ConfigError(f"the file is empty; {_EXPECTED}", file=path)
    try:
        # A key twice would gate on its last value while a reviewer reads the first.
        document = loads_unique(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"invalid JSON: {exc.msg} (column {exc.colno}); {_EXPECTED}", file=path, line=exc.lineno
        ) from None
    except (ValueError, RecursionError) as exc:
        raise ConfigError(f"invalid JSON: {unreadable_json(exc)}; {_EXPECTED}", file=path) from None
    _validate(document, text, path)
    return dict(document)


def _shown(value: Any) -> str:
    """A value of the file as a message quotes it: a baseline path may point at any JSON."""
    return excerpt(repr(value))


def _validate(document: Any, text: str, path: Path) -> None:
    def fail(message: str, needle: str | None = None) -> ConfigError:
        return ConfigError(message, file=path, line=_line_of(text, needle))

    if not isinstance(document, dict):
        raise fail(f"{_EXPECTED}, found a JSON {type(document).__name__}")
    cases = document.get("cases")
    if not isinstance(cases, list):
        found = "no 'cases' key" if cases is None else f"'cases' is a {type(cases).__name__}"
        raise fail(f"{_EXPECTED}, found {found}", '"cases"')
    seen: set[str] = set()
    for index, case in enumerate(cases):
        where = f"cases[{index}]"
        if not isinstance(case, dict):
            raise fail(f"{where}: expected an object with 'id' and 'status'", '"cases"')
        case_id = case.get("id")
        if not isinstance(case_id, str):
            raise fail(f"{where}: expected a string 'id', found {_shown(case_id)}", '"cases"')
        anchor = json.dumps(case_id, ensure_ascii=False)
        if case.get("status") not in CASE_STATUSES:
            raise fail(
                f"{where} ({case_id}): expected 'status' to be one of "
                f"{', '.join(CASE_STATUSES)}, found {_shown(case.get('status'))}",
                anchor,
            )
        if case_id in seen:
            raise fail(f"{where}: duplicate case id {_shown(case_id)}", anchor)
        seen.add(case_id)
    aggregates = document.get("aggregates")
    if aggregates is not None and not isinstance(aggregates, dict):
        raise fail(f"'aggregates' must be an object, found {_shown(aggregates)}", '"aggregates"')
    rate = (aggregates or {}).get("pass_rate")
    if rate is not None and not _is_number(rate):
        raise fail(f"'aggregates.pass_rate' must be a number, found {_shown(rate)}", '"pass_rate"')
    version = document.get("schema_version")
    if version is not None and (not isinstance(version, int) or isinstance(version, bool)):
        raise fail(
            f"'schema_version' must be an integer, found {_shown(version)}", '"schema_version"'
        )
    # The gates diff, merge and promote apply from it: checked here, where the file is known.
    policy = document.get("policy_snapshot")
    if policy is not None and not isinstance(policy, dict):
        raise fail(
            f"'policy_snapshot' must be an object, found {_shown(policy)}", '"policy_snapshot"'
        )
    try:
        thresholds_of(policy)
    except ConfigError as exc:
        raise fail(f"'policy_snapshot': {exc.message}", '"policy_snapshot"') from None


def _line_of(text: str, needle: str | None) -> int:
    """The line of ``needle``, looked for inside the cases list first (an approximation: JSON
    parsers do not report where a value sits, and a baseline is written one key per line)."""
    if needle is None:
        return 1
    start = max(text.find('"cases"'), 0)
    position = text.find(needle, start)
    if position < 0:
        position = text.find(needle)
    return text.count("\n", 0, position) + 1 if position >= 0 else 1
