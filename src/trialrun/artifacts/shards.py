"""One shard's run directory read back for ``trialrun merge``, checked against its own receipt.

A shard is accepted only when its files agree with each other: the receipt verifies (hash chain,
``run_end``, signature when present), the receipt's ``case_end`` events name the same cases with
the same statuses as summary.json, each case's lines in run.jsonl hash to the ``traceSha256``
the receipt recorded, and junit.xml has one testcase per case. So an edited summary, report or
event log is refused even when the receipt itself is intact.

``rebuild_case`` turns a case back into a ``CaseResult`` for the HTML and console reports. The
artifacts do not keep everything a live ``CaseResult`` has: a check's ``expected`` / ``observed``
texts are used when the verdict events carry them and are absent otherwise.
"""

from __future__ import annotations

import hashlib
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from trialrun.artifacts.baseline import read_summary
from trialrun.artifacts.shard_runs import check_runs, rebuild_runs, run_number
from trialrun.base.nesting import unreadable_json
from trialrun.base.results import (
    AgentRun,
    CaseResult,
    CheckFailure,
    Failure,
    ToolCall,
    Usage,
    case_start_timestamp,
)
from trialrun.base.signedjson import loads_unique
from trialrun.errors import TrialrunError
from trialrun.receipt.verify import VerifyResult, verify_receipt

VERDICT_EVENT_TYPES = frozenset({"assertion_failure", "budget_failure", "case_end"})
"""Events artifacts.py appends after a case's trace: the verdict, not what the agent did."""
CASE_STATUSES = ("pass", "fail", "error", "flaky")


class MergeError(TrialrunError):
    """Shard run directories that cannot be merged into one run."""


@dataclass(frozen=True)
class ShardArtifacts:
    """A shard run directory whose files were read and found consistent."""

    run_dir: Path
    summary: dict[str, Any]
    index: int
    count: int
    suite_case_ids_sha256: str
    case_ids: list[str]
    case_docs: dict[str, dict[str, Any]]
    case_lines: dict[str, list[str]]
    """Each case's run.jsonl lines, verbatim, in file order."""
    case_events: dict[str, list[dict[str, Any]]]
    testcases: dict[str, ET.Element]
    receipt_path: Path
    receipt: VerifyResult

    @property
    def suite_name(self) -> str:
        return str((self.summary.get("suite") or {}).get("name"))

    @property
    def run_id(self) -> str:
        return str((self.summary.get("run") or {}).get("run_id"))


def read_shard(run_dir: Path) -> ShardArtifacts:
    """Read and cross-check one shard run directory; any inconsistency is a MergeError."""
    if not (run_dir / "summary.json").is_file():
        raise MergeError(
            f"{run_dir}: expected a run directory holding summary.json "
            "(<out>/<suite>/<run_id>/ of `trialrun run --shard I/N`), found none"
        )
    summary = read_summary(run_dir)
    index, count, suite_sha, case_ids = _shard_block(summary, run_dir / "summary.json")
    if (summary.get("run") or {}).get("interrupted"):
        raise MergeError(
            f"{run_dir}: shard {index}/{count} was interrupted; expected a finished run "
            "(run the shard again)"
        )
    case_docs = _case_docs(summary, case_ids, run_dir / "summary.json")
    case_lines, case_events = _event_log(run_dir / "run.jsonl", case_ids)
    testcases = _testcases(run_dir / "junit.xml", case_ids)
    receipt_path = run_dir / "receipt.jsonl"
    receipt = verify_receipt(receipt_path)
    if not receipt.ok:
        raise MergeError(
            f"{receipt_path}: the receipt of shard {index}/{count} does not verify "
            f"({receipt.reason} at seq {receipt.first_bad_seq}: {receipt.message}); "
            "a shard whose receipt fails cannot be merged"
        )
    _check_against_receipt(receipt_path, case_docs, case_lines, case_events)
    return ShardArtifacts(
        run_dir=run_dir,
        summary=summary,
        index=index,
        count=count,
        suite_case_ids_sha256=suite_sha,
        case_ids=case_ids,
        case_docs=case_docs,
        case_lines=case_lines,
        case_events=case_events,
        testcases=testcases,
        receipt_path=receipt_path,
        receipt=receipt,
    )


def rebuild_case(
    doc: dict[str, Any],
    events: Sequence[dict[str, Any]],
    recording_review: list[Any] | None = None,
) -> CaseResult:
    """The ``CaseResult`` a shard's summary entry and run.jsonl events describe;
    ``recording_review`` is the case's entry of the shard's recordings-diff.json. A case run
    more than once gets its ``runs`` back, and shows the run its own run showed."""
    if isinstance(doc.get("runs"), list):
        runs, shown = rebuild_runs(doc, events, rebuild_case)
        case = rebuild_case({k: v for k, v in doc.items() if k != "runs"}, shown, recording_review)
        return replace(case, runs=runs)
    case_id = str(doc["id"])
    trace = [event for event in events if event.get("type") not in VERDICT_EVENT_TYPES]
    end: dict[str, Any] = next((e for e in reversed(events) if _is_end(e)), {})
    stderr_tail = str(doc.get("stderr_tail") or "")
    failure = None
    if doc.get("failure_kind") is not None:
        failure = Failure(
            kind=str(doc["failure_kind"]),
            message=str(end.get("failure_reason") or doc.get("failure_reason") or ""),
            status="error" if doc["status"] == "error" else "fail",
            stderr_tail=stderr_tail,
        )
    run = AgentRun(
        case_id=case_id,
        output=_final_output(trace),
        tool_calls=_tool_calls(trace),
        usage=Usage(
            tokens_in=doc.get("tokens_in"),
            tokens_out=doc.get("tokens_out"),
            cost_usd=doc.get("cost_usd"),
            model=next((e.get("model") for e in trace if e.get("type") == "usage"), None),
        ),
        wall_ms=int(doc.get("wall_ms") or 0),
        failure=failure,
        stderr_tail=stderr_tail,
        events=trace,
        unused_recordings=int(doc.get("unused_recordings") or 0),
        unused_recording_tools=_unused_tools(doc.get("unused_recordings_by_tool")),
        stale_recordings=[str(line) for line in doc.get("stale_recordings") or []],
        recording_review=recording_review,
        recording_kept=(doc.get("recordings") or {}).get("committed") is False,
    )
    replay = doc.get("replay") or {}
    return CaseResult(
        case_id=case_id,
        status=doc["status"],
        run=run,
        assertions_total=int((doc.get("assertions") or {}).get("total") or 0),
        check_failures=_check_failures(events),
        failure=failure,
        cassette_path=replay.get("cassette_path"),
        cassette_sha256=replay.get("cassette_sha256"),
    )


def _shard_block(summary: dict[str, Any], where: Path) -> tuple[int, int, str, list[str]]:
    block = summary.get("shard")
    if not isinstance(block, dict):
        raise MergeError(
            f"{where}: expected a 'shard' block (a run started with `trialrun run --shard I/N`), "
            "found none"
        )
    index, count = block.get("index"), block.get("count")
    suite_sha, case_ids = block.get("suite_case_ids_sha256"), block.get("case_ids")
    valid = (
        isinstance(index, int)
        and isinstance(count, int)
        and 1 <= index <= count
        and isinstance(suite_sha, str)
        and isinstance(case_ids, list)
        and all(isinstance(case_id, str) for case_id in case_ids)
    )
    if not valid:
        raise MergeError(
            f"{where}: expected shard.index and shard.count with 1 <= index <= count, "
            f"shard.suite_case_ids_sha256 text and shard.case_ids a list of ids; found {block!r}"
        )
    assert isinstance(index, int) and isinstance(count, int) and isinstance(suite_sha, str)
    assert isinstance(case_ids, list)
    return index, count, suite_sha, [str(case_id) for case_id in case_ids]


def _case_docs(
    summary: dict[str, Any], case_ids: list[str], where: Path
) -> dict[str, dict[str, Any]]:
    docs: dict[str, dict[str, Any]] = {}
    for doc in summary.get("cases") or []:
        if not isinstance(doc, dict) or doc.get("status") not in CASE_STATUSES:
            raise MergeError(f"{where}: expected cases with an id and a status, found {doc!r}")
        case_id = str(doc.get("id"))
        if case_id in docs:
            raise MergeError(f"{where}: case {case_id!r} appears more than once")
        docs[case_id] = doc
    _same_ids(where, "the cases of summary.json", docs, case_ids)
    return docs


def _event_log(
    path: Path, case_ids: list[str]
) -> tuple[dict[str, list[str]], dict[str, list[dict[str, Any]]]]:
    lines: dict[str, list[str]] = {case_id: [] for case_id in case_ids}
    events: dict[str, list[dict[str, Any]]] = {case_id: [] for case_id in case_ids}
    try:
        with path.open(encoding="utf-8", newline="\n") as stream:
            for line_no, line in enumerate(stream, start=1):
                if not line.strip():
                    continue
                event = _event(line, path, line_no)
                try:  # a run number: the case ran more than once (--repeat, --retries)
                    run_number(event)
                except ValueError as exc:
                    raise MergeError(f"{path}:{line_no}: {exc}") from None
                case_id = event.get("case_id")
                if case_id not in lines:
                    raise MergeError(
                        f"{path}:{line_no}: expected an event of one of the shard's cases, "
                        f"found case_id {case_id!r}"
                    )
                lines[case_id].append(line if line.endswith("\n") else line + "\n")
                events[case_id].append(event)
    except OSError as exc:
        raise MergeError(f"{path}: cannot read the shard's event log: {exc.strerror}") from exc
    without_end = [c for c, found in events.items() if not any(_is_end(e) for e in found)]
    if without_end:
        raise MergeError(f"{path}: expected a case_end event for {', '.join(without_end)}")
    return lines, events


def _event(line: str, path: Path, line_no: int) -> dict[str, Any]:
    try:
        # These bytes are hashed into the receipt: they must read one way only.
        event = loads_unique(line)
    except (ValueError, RecursionError) as exc:
        raise MergeError(
            f"{path}:{line_no}: expected one JSON event per line: {unreadable_json(exc)}"
        ) from None
    if not isinstance(event, dict):
        raise MergeError(f"{path}:{line_no}: expected a JSON object, found {line.strip()[:80]}")
    return event


def _testcases(path: Path, case_ids: list[str]) -> dict[str, ET.Element]:
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as exc:
        raise MergeError(f"{path}: expected the shard's JUnit XML report: {exc}") from exc
    found: dict[str, ET.Element] = {}
    for element in root.iter("testcase"):
        name = element.get("name", "")
        if name in found:
            raise MergeError(f"{path}: testcase {name!r} appears more than once")
        found[name] = element
    _same_ids(path, "the testcases", found, case_ids)
    return found


def _check_against_receipt(
    path: Path,
    case_docs: dict[str, dict[str, Any]],
    case_lines: dict[str, list[str]],
    case_events: dict[str, list[dict[str, Any]]],
) -> None:
    all_ends: dict[str, list[dict[str, Any]]] = {}
    with path.open(encoding="utf-8") as stream:
        for line in stream:
            event = loads_unique(line)
            if event.get("type") == "case_end":
                data = event.get("data") or {}
                all_ends.setdefault(str(data.get("case")), []).append(data)
    _same_ids(path, "the receipt's case_end events", all_ends, list(case_docs))
    for case_id, found in all_ends.items():
        if len(found) > 1 or "attempt" in found[0]:  # run more than once
            check_runs(
                path,
                case_id,
                case_docs[case_id],
                found,
                case_lines[case_id],
                case_events[case_id],
                MergeError,
            )
            continue
        data = found[0]
        status = case_docs[case_id]["status"]
        if data.get("status") != status:
            raise MergeError(
                f"{path}: case {case_id!r} ended with status {data.get('status')!r} in the "
                f"receipt but {status!r} in summary.json: the summary was changed after the run"
            )
        written = "".join(case_lines[case_id]).encode("utf-8")
        if data.get("traceSha256") != hashlib.sha256(written).hexdigest():
            raise MergeError(
                f"{path}: the lines of case {case_id!r} in run.jsonl do not hash to the "
                "traceSha256 its receipt recorded: run.jsonl was changed after the run"
            )


def _same_ids(where: Path, what: str, found: dict[str, Any], expected: list[str]) -> None:
    missing = sorted(set(expected) - found.keys())
    extra = sorted(found.keys() - set(expected))
    if missing or extra:
        raise MergeError(
            f"{where}: expected {what} to be the shard's cases (shard.case_ids); "
            f"missing: {', '.join(missing) or 'none'}; unexpected: {', '.join(extra) or 'none'}"
        )


def _is_end(event: dict[str, Any]) -> bool:
    return event.get("type") == "case_end"


def _final_output(trace: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    for event in reversed(trace):
        if event.get("type") == "final_output" and isinstance(event.get("output"), dict):
            output: dict[str, Any] = event["output"]
            return output
    return None


def _tool_calls(trace: Sequence[dict[str, Any]]) -> list[ToolCall]:
    # A refused call (not allowed, no recording) has a tool_call event and no tool_result.
    results = {e.get("call_id"): e for e in trace if e.get("type") == "tool_result"}
    case_started = case_start_timestamp(trace)
    calls = []
    for event in trace:
        if event.get("type") != "tool_call":
            continue
        result = results.get(event.get("call_id"))
        args = event.get("args")
        called, answered = _stamp(event), _stamp(result)
        calls.append(
            ToolCall(
                call_id=str(event.get("call_id")),
                name=str(event.get("name")),
                args=args if isinstance(args, dict) else {},
                ok=bool(result and result.get("ok")),
                result=result.get("result") if result else None,
                error=result.get("error") if result else "refused before reaching a tool",
                refused=result is None,
                # The event times stand in for the runner's clock: the timeline needs both.
                duration_ms=(
                    max(0.0, (answered - called) * 1000)
                    if answered is not None and called is not None
                    else 0.0
                ),
                start_ms=(
                    max(0.0, (called - case_started) * 1000)
                    if called is not None and case_started is not None
                    else None
                ),
            )
        )
    return calls


def _stamp(event: dict[str, Any] | None) -> float | None:
    stamp = None if event is None else event.get("timestamp")
    return float(stamp) if isinstance(stamp, int | float) and not isinstance(stamp, bool) else None


def _check_failures(events: Sequence[dict[str, Any]]) -> list[CheckFailure]:
    failures: list[CheckFailure] = []
    for event in events:
        kind = event.get("type")
        if kind not in ("assertion_failure", "budget_failure"):
            continue
        for entry in event.get("failures") or []:
            if not isinstance(entry, dict):
                continue
            failures.append(_check_failure(entry, budget=kind == "budget_failure"))
    return failures


def _check_failure(entry: dict[str, Any], *, budget: bool) -> CheckFailure:
    expected, observed = entry.get("expected"), entry.get("observed")
    if budget:
        field = str(entry.get("field"))
        message = entry.get("message") or (
            f"Budget exceeded: {field} limit={entry.get('limit')} actual={entry.get('actual')}"
        )
        details: dict[str, Any] | None = {
            k: v for k, v in entry.items() if k in ("field", "limit", "actual")
        }
        check_type = f"budget:{field}"
    else:
        message = entry.get("message") or ""
        raw_details = entry.get("details")
        details = raw_details if isinstance(raw_details, dict) else None
        check_type = str(entry.get("type"))
    return CheckFailure(
        type=check_type,
        message=str(message),
        expected=str(expected) if expected is not None else None,
        observed=str(observed) if observed is not None else None,
        details=details,
    )


def _unused_tools(counts: Any) -> list[str]:
    """``unused_recordings_by_tool`` back to one name per recording (absent in older shards)."""
    if not isinstance(counts, dict):
        return []
    return [str(name) for name, n in counts.items() if isinstance(n, int) for _ in range(n)]
