"""``trialrun merge``: the run directories of one suite's shards become one run directory.

The shards must cover the suite exactly: one run per index 1..N, all cut from the same case list
(same suite name, shard count, ``suite_case_ids_sha256``, mode, policy and commit), every case in
exactly one shard, and each shard holding exactly the cases ``sharding`` assigns to its index.
A crashed or forgotten shard must not quietly shrink the denominator, so anything else fails the
merge (exit 2) before a file is written.

The merged directory ``<out>/<suite>/<run_id>/`` holds what a single run writes:

* summary.json: the shards' case entries verbatim, in id order; the run block and aggregates
  computed by ``report.summary`` as for any run; a ``merge`` block naming the shards;
* junit.xml: the shards' testcases as written, in id order, with the counts recomputed;
* run.jsonl: each case's lines as written, in case id order;
* report.html: rendered from cases rebuilt from the shard artifacts (``artifacts.shards``);
* unused-recordings.json and recordings-diff.json, when the shards wrote them, combined
  (``artifacts.merge_recordings``), so ``trialrun prune`` works on the merged run;
* receipt.jsonl: a new receipt whose ``run_start`` names the merge, one ``shard`` event per
  shard with its receipt's path, event count and last hash, and ``run_end`` with the totals.

Baseline gates apply to the merged summary only: pass rates and percentiles need every case.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trialrun import __version__
from trialrun.artifacts.merge_recordings import read_reviews, write_merged_recordings
from trialrun.artifacts.recording import RecordedRun
from trialrun.artifacts.rundir import new_run_id, safe_dir_name
from trialrun.artifacts.shards import MergeError, ShardArtifacts, read_shard, rebuild_case
from trialrun.base.fsutil import atomic_write_text, write_json
from trialrun.base.results import CaseResult, RunResult
from trialrun.base.words import inflected
from trialrun.errors import ConfigError
from trialrun.running.sharding import ShardSpec, assign_shards, case_ids_sha256

if TYPE_CHECKING:
    from trialrun.receipt.signing import Ed25519Signer

__all__ = ["MergeError", "merge_runs"]

_MUST_AGREE = (
    ("suite name", lambda s: (s.summary.get("suite") or {}).get("name")),
    ("tool mode", lambda s: (s.summary.get("run") or {}).get("mode")),
    ("regression policy", lambda s: s.summary.get("policy_snapshot")),
)


def merge_runs(
    run_dirs: Sequence[Path],
    out: Path,
    *,
    baseline: Path | None,
    signer: Ed25519Signer | None = None,
    command_line: str | None = None,
) -> RecordedRun:
    """Check that ``run_dirs`` are the complete shards of one run, and write the merged run."""
    from trialrun.artifacts.baseline import compute_regression, load_baseline
    from trialrun.config.paths import display_path
    from trialrun.report.summary import summary_from_case_docs

    if not run_dirs:
        raise MergeError("expected at least one shard run directory to merge, found none")
    baseline_doc = _load_baseline(baseline, load_baseline)
    shards = sorted((read_shard(Path(d)) for d in run_dirs), key=lambda s: s.index)
    all_ids = check_complete(shards)

    docs = {case_id: doc for shard in shards for case_id, doc in shard.case_docs.items()}
    events = {case_id: ev for shard in shards for case_id, ev in shard.case_events.items()}
    reviews = read_reviews([shard.run_dir for shard in shards])
    cases = [rebuild_case(docs[i], events[i], reviews.get(i)) for i in all_ids]
    result = _merged_result(shards, cases)
    policy = shards[0].summary.get("policy_snapshot")
    case_docs = [docs[case_id] for case_id in all_ids]
    summary = summary_from_case_docs(result, case_docs, regression=None)
    regression: dict[str, Any] | None = None
    if baseline_doc is not None and baseline is not None:
        regression = compute_regression(baseline_doc, summary, policy, display_path(baseline))
        summary = summary_from_case_docs(result, case_docs, regression=regression)
    summary["merge"] = _merge_block(shards, display_path)

    run_dir = out / safe_dir_name(result.suite_name) / result.run_id
    run_dir.mkdir(parents=True, exist_ok=False)
    command = command_line or shlex.join(
        ["trialrun", "merge", *map(str, run_dirs), "--out", str(out)]
    )
    merged = RecordedRun(result, summary, regression, run_dir)
    _write_receipt(run_dir / "receipt.jsonl", shards, result, command, merged.passed, signer)
    lines = {case_id: ls for shard in shards for case_id, ls in shard.case_lines.items()}
    atomic_write_text(run_dir / "run.jsonl", "".join("".join(lines[i]) for i in all_ids))
    write_json(run_dir / "summary.json", summary)
    atomic_write_text(run_dir / "junit.xml", merged_junit(shards, result))
    from trialrun.artifacts.comparing import baseline_comparison
    from trialrun.report.html import render_html

    comparison = None
    if baseline_doc is not None and regression is not None:
        comparison = baseline_comparison(baseline_doc, summary, regression)
    atomic_write_text(run_dir / "report.html", render_html(result, summary, None, comparison))
    write_merged_recordings([shard.run_dir for shard in shards], run_dir, all_ids, result.run_id)
    return merged


def check_complete(shards: Sequence[ShardArtifacts]) -> list[str]:
    """The suite's case ids, sorted, once the shards are shown to cover it exactly once."""
    first = shards[0]
    for what, value_of in _MUST_AGREE:
        _agree(shards, what, value_of)
    _agree(shards, "shard count", lambda s: s.count)
    _agree(
        shards, "suite case list (shard.suite_case_ids_sha256)", lambda s: s.suite_case_ids_sha256
    )
    commits = {s.summary["run"].get("git_sha") for s in shards} - {None}
    if len(commits) > 1:
        raise MergeError(
            f"expected shards of one commit, found git_sha {', '.join(sorted(commits))}"
        )
    by_index: dict[int, ShardArtifacts] = {}
    for shard in shards:
        if shard.index in by_index:
            raise MergeError(
                f"duplicate shard {shard.index}/{shard.count}: {by_index[shard.index].run_dir} "
                f"and {shard.run_dir}; expected each shard exactly once"
            )
        by_index[shard.index] = shard
    missing = sorted(set(range(1, first.count + 1)) - by_index.keys())
    if missing:
        named = ", ".join(f"{i}/{first.count}" for i in missing)
        raise MergeError(
            f"missing {inflected(len(missing), 'shard')} {named}: expected "
            f"{first.count} shard run directories, found {len(shards)}; a merge without every "
            "shard would hide the missing cases"
        )
    owner: dict[str, ShardArtifacts] = {}
    for shard in shards:
        for case_id in shard.case_ids:
            if case_id in owner:
                raise MergeError(
                    f"case {case_id!r} appears in shard {owner[case_id].index} "
                    f"({owner[case_id].run_dir}) and shard {shard.index} ({shard.run_dir}); "
                    "expected every case exactly once"
                )
            owner[case_id] = shard
    if case_ids_sha256(owner) != first.suite_case_ids_sha256:
        raise MergeError(
            f"the shards hold {len(owner)} cases whose id list does not hash to "
            f"shard.suite_case_ids_sha256 {first.suite_case_ids_sha256}: some cases are missing"
        )
    assignment = assign_shards(owner, first.count)
    for case_id, shard in owner.items():
        if assignment[case_id] != shard.index:
            raise MergeError(
                f"case {case_id!r} ran in shard {shard.index} ({shard.run_dir}) but belongs to "
                f"shard {ShardSpec(assignment[case_id], first.count)}: the shards were not cut "
                "by `trialrun run --shard` from this case list"
            )
    return sorted(owner)


def merged_junit(shards: Sequence[ShardArtifacts], result: RunResult) -> str:
    """One ``<testsuite>`` holding every shard's testcases as written, in case id order."""
    from trialrun.base.junitxml import junit_document, testsuite

    elements = {case_id: el for shard in shards for case_id, el in shard.testcases.items()}
    ordered = [elements[case.case_id] for case in result.cases]
    root = testsuite(
        result.suite_name,
        tests=len(ordered),
        failures=sum(1 for el in ordered if el.find("failure") is not None),
        errors=sum(1 for el in ordered if el.find("error") is not None),
        seconds=sum(case.run.wall_ms for case in result.cases) / 1000,
    )
    skipped = sum(1 for el in ordered if el.find("skipped") is not None)
    if skipped:  # quarantined cases, counted as a single run's junit.xml counts them
        root.set("skipped", str(skipped))
    root.extend(ordered)
    return junit_document(root)


def _load_baseline(path: Path | None, load: Any) -> dict[str, Any] | None:
    # Loaded before anything is read or written, so a bad baseline costs nothing.
    if path is None:
        return None
    if not path.is_file():
        raise ConfigError(
            "baseline file not found (create one with `trialrun baseline promote`)", file=path
        )
    document: dict[str, Any] = load(path)
    return document


def _agree(shards: Sequence[ShardArtifacts], what: str, value_of: Any) -> None:
    values = [value_of(shard) for shard in shards]
    if any(value != values[0] for value in values):
        found = "; ".join(f"{s.run_dir}: {v!r}" for s, v in zip(shards, values, strict=True))
        raise MergeError(f"expected the shards of one run with the same {what}, found {found}")


def _merged_result(shards: Sequence[ShardArtifacts], cases: list[CaseResult]) -> RunResult:
    runs = [shard.summary["run"] for shard in shards]
    suite = shards[0].summary["suite"]
    started = min(_epoch(run.get("started_at")) for run in runs)
    finished = max(_epoch(run.get("finished_at")) for run in runs)
    return RunResult(
        run_id=new_run_id(time.time()),
        suite_name=str(suite.get("name")),
        suite_path=str(suite.get("suite_path") or ""),
        agent_command=[str(part) for part in suite.get("agent_command") or []],
        mode=str(runs[0].get("mode")),
        cases=cases,
        started_at=started,
        finished_at=finished,
        git_sha=next((run["git_sha"] for run in runs if run.get("git_sha")), None),
        regression_policy=shards[0].summary.get("policy_snapshot"),
    )


def _epoch(text: Any) -> float:
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return time.time()  # an older summary without run timestamps


def _merge_block(shards: Sequence[ShardArtifacts], display_path: Any) -> dict[str, Any]:
    return {
        "shard_count": shards[0].count,
        "suite_case_ids_sha256": shards[0].suite_case_ids_sha256,
        "shards": [
            {
                "index": shard.index,
                "run_id": shard.run_id,
                "run_dir": display_path(shard.run_dir),
                "receipt_last_hash": shard.receipt.last_hash,
            }
            for shard in shards
        ],
    }


def _write_receipt(
    path: Path,
    shards: Sequence[ShardArtifacts],
    result: RunResult,
    command_line: str,
    passed: bool,
    signer: Ed25519Signer | None,
) -> None:
    from trialrun.config.paths import display_path
    from trialrun.receipt.writer import ReceiptWriter

    heads = [_run_start(shard) for shard in shards]
    writer = ReceiptWriter(path, signer=signer)
    with writer:
        writer.emit(
            "run_start",
            {
                "goal": result.suite_name,
                "verifyCommand": command_line,
                "repoHead": _common(head.get("repoHead") for head in heads),
                "branch": _common(head.get("branch") for head in heads) or "",
                "tool": {"name": "trialrun", "version": __version__},
                "merge": {"shards": len(shards), "runId": result.run_id},
            },
        )
        for shard in shards:
            statuses = [shard.case_docs[i]["status"] for i in shard.case_ids]
            writer.emit(
                "shard",
                {
                    "index": shard.index,
                    "count": shard.count,
                    "runId": shard.run_id,
                    "receipt": display_path(shard.receipt_path),
                    "eventCount": shard.receipt.event_count,
                    "lastHash": shard.receipt.last_hash,
                    "signed": shard.receipt.signature.present,
                    "cases": {
                        s: statuses.count(s)
                        for s in ("pass", "fail", "error", "flaky")
                        if s != "flaky" or s in statuses
                    },
                },
            )
        # Every run of a case run more than once counts, as in a shard's own receipt.
        runs = [r for c in result.cases for r in (c.runs.runs if c.runs is not None else [c])]
        usage = [run.run.usage for run in runs]
        flaky = sum(1 for c in result.cases if c.status == "flaky")
        writer.close(
            {
                "stopReason": "completed",
                "verified": passed,
                "totals": {
                    "attempts": len(runs),
                    "totalTokens": sum((u.tokens_in or 0) + (u.tokens_out or 0) for u in usage),
                    "costUsd": sum(u.cost_usd or 0.0 for u in usage),
                    "filesChanged": 0,
                },
                "cases": {
                    "total": len(result.cases),
                    "passed": sum(1 for c in result.cases if c.status == "pass"),
                    "failed": sum(1 for c in result.cases if c.status == "fail"),
                    "errors": sum(1 for c in result.cases if c.status == "error"),
                    **({"flaky": flaky} if flaky else {}),
                },
            }
        )


def _run_start(shard: ShardArtifacts) -> dict[str, Any]:
    from trialrun.base.signedjson import loads_unique

    with shard.receipt_path.open(encoding="utf-8") as stream:
        first = loads_unique(stream.readline())
    data: dict[str, Any] = first.get("data") or {}
    return data


def _common(values: Any) -> Any:
    distinct = set(values)
    return distinct.pop() if len(distinct) == 1 else None
