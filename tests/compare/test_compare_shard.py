"""Sharded compares: ``trialrun compare SUBJECT --shard I/N`` and ``trialrun compare merge``.

The subject is test_compare_e2e's scripted one (three cases, k = 2, a judge, an incumbent) plus a
trigger eval, so the plan has six (case, rep) units, 12 rows and one piece of work that is not a
unit. Its agents are deterministic, so a merge of the shards must give the unsharded run's rows,
comparisons, statistics, verdict, content digest and printed report, for any number of shards.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from builders import call_cli
from builders import make_compare_subject as make_subject
from trialrun import __version__
from trialrun.cli import run_cli
from trialrun.compare.shards import SHARD_FILE, assign_units, shard_units
from trialrun.running.sharding import ShardSpec

TRIGGERS = {"should_trigger": ["deploy the app"], "should_not_trigger": ["rename a variable"]}
UNITS = 6
SHARD_COUNTS = (1, 2, 3, 8)


# ---- the partition ---------------------------------------------------------------------------


@pytest.mark.parametrize("unit_count", [0, 1, 5, 6, 7, 20])
@pytest.mark.parametrize("count", [1, 2, 3, 8])
def test_the_shards_partition_the_units_evenly(unit_count: int, count: int) -> None:
    units = [(f"case-{n // 3}", n % 3) for n in range(unit_count)]

    shares = [shard_units(units, ShardSpec(index, count)) for index in range(1, count + 1)]

    dealt = [unit for share in shares for unit in share]
    assert sorted(dealt) == sorted(units)  # every unit, each once
    assert len(dealt) == len(set(dealt))
    sizes = [len(share) for share in shares]
    assert max(sizes) - min(sizes) <= 1  # balanced within one unit
    assert sizes == sorted(sizes, reverse=True)  # the last shard (the trigger eval's) has fewest
    for share in shares:
        assert share == [unit for unit in units if unit in share]  # in plan order


def test_the_partition_is_a_function_of_the_plan_only() -> None:
    units = [("b", 0), ("a", 0), ("b", 1), ("a", 1)]
    assert assign_units(units, 3) == assign_units(list(units), 3)
    assert assign_units(units, 3) == {("b", 0): 1, ("a", 0): 2, ("b", 1): 3, ("a", 1): 1}
    with pytest.raises(ValueError, match="each"):
        assign_units([("a", 0), ("a", 0)], 2)


# ---- merged equals unsharded -----------------------------------------------------------------


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One unsharded compare, and the shards of the same subject for every N in SHARD_COUNTS."""
    root = tmp_path_factory.mktemp("sharded")
    subject = make_subject(root)
    (subject / "evals" / "triggers.yaml").write_text(json.dumps(TRIGGERS))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TRIALRUN_HOME", str(root / "home"))
        patch.delenv("SCRIPTED_FLIP", raising=False)
        patch.delenv("SCRIPTED_WAIT_FOR", raising=False)
        patch.delenv("TRIALRUN_TEAM", raising=False)
        code, full_out, _ = call_cli(["compare", str(subject), "-j", "4", "--no-commit"])
        assert code == 0
        shards: dict[int, list[Path]] = {}
        for count in SHARD_COUNTS:
            out = root / f"shards-{count}"
            for index in range(1, count + 1):
                args = ["compare", str(subject), "--shard", f"{index}/{count}", "--out", str(out)]
                code, _, _ = call_cli([*args, "-j", "4"])
                assert code == 0
            shards[count] = sorted(out.iterdir())
        yield {
            "root": root,
            "subject": subject,
            "full_receipt": _receipts(root)[0],
            "full_out": full_out,
            "shards": shards,
            "patch": patch,
        }


def _receipts(root: Path) -> list[Path]:
    return sorted(
        (root / "home").glob("evals/local/*/*/receipt.json"), key=lambda p: p.stat().st_mtime
    )


def _load(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return loaded


def _merge(runs: dict[str, Any], dirs: list[Path], *extra: str) -> tuple[int, str, str, Path]:
    code, out, err = call_cli(["compare", "merge", *map(str, dirs), "--no-commit", *extra])
    return code, out, err, _receipts(runs["root"])[-1]


def _without_run(receipt: dict[str, Any]) -> dict[str, Any]:
    """The receipt minus what names this run (its id and when and how it ran)."""
    provenance = {
        key: value
        for key, value in receipt["provenance"].items()
        if key not in ("timestamp", "shards")
    }
    return {key: value for key, value in receipt.items() if key != "run_id"} | {
        "provenance": provenance
    }


def _without_reasons(receipt: dict[str, Any]) -> dict[str, Any]:
    per_case = [
        entry
        | {
            "outcomes": {
                name: {key: value for key, value in row.items() if key != "reason"}
                for name, row in entry["outcomes"].items()
            }
        }
        for entry in receipt["per_case"]
    ]
    return receipt | {"per_case": per_case}


@pytest.mark.parametrize("count", SHARD_COUNTS)
@pytest.mark.slow
def test_merged_shards_equal_the_unsharded_compare(runs: dict[str, Any], count: int) -> None:
    code, out, err, merged_path = _merge(runs, runs["shards"][count])

    assert code == 0, err
    full, merged = _load(runs["full_receipt"]), _load(merged_path)
    assert merged_path != runs["full_receipt"]
    assert merged_path.parent.parent == runs["full_receipt"].parent.parent  # same bytes' store
    for key in ("per_case", "comparisons", "verdict", "content_digest", "arm_scores", "triggers"):
        assert merged[key] == full[key], key
    assert merged["execution_status"] == "complete"
    assert _without_run(merged) == _without_run(full)
    assert merged["provenance"]["shards"] == {"count": count, "merged": list(range(1, count + 1))}
    assert out == runs["full_out"]  # the printed report, byte for byte


@pytest.mark.slow
def test_a_shard_runs_whole_units_with_every_arm(runs: dict[str, Any]) -> None:
    for count in SHARD_COUNTS:
        ran: list[tuple[str, int]] = []
        for path in runs["shards"][count]:
            document = _load(path / SHARD_FILE)
            units = [tuple(unit) for unit in document["shard"]["units"]]
            ran.extend(units)  # type: ignore[arg-type]
            arms = _arm_runs(path)
            assert sorted(arms) == sorted(
                (case, rep, arm) for case, rep in units for arm in document["plan"]["arms"]
            )
            rows = {(row["case"], row["rep"]) for row in document["rows"]}
            assert rows == set(units)  # every row decided (and judged) where its arms ran
            has_triggers = document["shard"]["index"] == count
            assert (document["triggers"] is not None) == has_triggers
        assert sorted(ran) == sorted((case, rep) for case in ("build", "careful", "explain")
                                     for rep in (0, 1))  # fmt: skip
        assert len(ran) == UNITS


def _arm_runs(shard: Path) -> list[tuple[str, int, str]]:
    found = []
    for line in (shard / "run.jsonl").read_text(encoding="utf-8").splitlines():
        event = json.loads(line)
        if event["type"] == "arm_sample":
            found.append((event["data"]["case"], event["data"]["rep"], event["data"]["arm"]))
    return found


@pytest.mark.slow
def test_every_shard_records_the_same_plan(runs: dict[str, Any]) -> None:
    plans = [_load(path / SHARD_FILE)["plan"] for path in runs["shards"][3]]
    assert all(a == b for a, b in pairwise(plans))
    plan, full = plans[0], _load(runs["full_receipt"])
    assert (plan["seed"], plan["k"]) == (7, 2)
    assert plan["content_digest"] == full["content_digest"]
    assert plan["eval_assets_digest"] == full["eval_assets_digest"]
    assert plan["incumbent_digest"].startswith("sha256:")
    assert plan["units_sha256"].startswith("sha256:")
    assert plan["engine_version"] == __version__


# ---- holes -----------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_missing_shard_is_a_named_hole_not_a_smaller_run(runs: dict[str, Any]) -> None:
    shard_1, _, shard_3 = runs["shards"][3]

    code, out, err, merged_path = _merge(runs, [shard_1, shard_3])

    assert code == 0, err
    merged = _load(merged_path)
    assert merged["execution_status"] == "partial"
    assert (merged["expected_rows"], merged["scored_rows"]) == (12, 8)
    missing = [(h["case"], h["rep"], h["kind"]) for h in merged["holes"]]
    assert missing == [("build", 1, "not-run"), ("explain", 0, "not-run")]
    assert all("shard 2/3 was not merged" in hole["detail"] for hole in merged["holes"])
    assert "hole (not-run): build rep 1 — shard 2/3 was not merged" in out


@pytest.mark.slow
def test_a_missing_trigger_shard_is_a_hole_of_the_trigger_eval(runs: dict[str, Any]) -> None:
    shard_1, shard_2, _ = runs["shards"][3]

    code, _, err, merged_path = _merge(runs, [shard_1, shard_2])

    assert code == 0, err
    merged = _load(merged_path)
    assert merged["triggers"] is None
    assert ("trigger eval", None) in [(h["case"], h["rep"]) for h in merged["holes"]]
    assert merged["execution_status"] == "partial"


@pytest.mark.slow
def test_gate_on_a_merge_fails_a_fail_verdict(runs: dict[str, Any], tmp_path: Path) -> None:
    out = tmp_path / "flipped"
    runs["patch"].setenv("SCRIPTED_FLIP", "1")
    try:
        for index in (1, 2):
            args = ["compare", str(runs["subject"]), "--shard", f"{index}/2", "--out", str(out)]
            assert call_cli([*args, "--case", "build", "--k", "1"])[0] == 0
    finally:
        runs["patch"].delenv("SCRIPTED_FLIP")
    shards = sorted(out.iterdir())

    assert _merge(runs, shards)[0] == 0
    code, out_text, _, _ = _merge(runs, shards, "--gate")
    assert code == 1
    assert out_text.startswith("verdict: FAIL")


# ---- refusals --------------------------------------------------------------------------------


def _small_shards(runs: dict[str, Any], out: Path, count: int = 2, *extra: str) -> list[Path]:
    """Shards of a one-case, one-rep plan: cheap to make and to spoil."""
    for index in range(1, count + 1):
        args = ["compare", str(runs["subject"]), "--shard", f"{index}/{count}", "--out", str(out)]
        outcome = call_cli([*args, "--case", "build", "--k", "1", *extra])
        assert outcome.code == 0, outcome
    return sorted(out.glob(f"*-of-{count}"))


def _errors(err: str) -> list[str]:
    lines = err.splitlines()
    assert lines and all(line.startswith("error: ") for line in lines), err
    return lines


@pytest.mark.slow
def test_a_directory_that_is_not_a_shard_is_refused(runs: dict[str, Any], tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    run_shard = tmp_path / "run-shard"
    run_shard.mkdir()
    (run_shard / "summary.json").write_text("{}")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / SHARD_FILE).write_text("{not json")

    code, out, err = call_cli(["compare", "merge", str(empty), str(run_shard), str(broken)])

    assert (code, out) == (2, "")
    lines = _errors(err)
    assert len(lines) == 3
    assert lines[0].startswith(f"error: {empty}: expected a compare shard directory")
    assert "`trialrun merge`" in lines[1]
    assert lines[2].startswith(f"error: {broken}: cannot read shard.json")


def test_shards_of_another_plan_or_other_bytes_are_refused(
    runs: dict[str, Any], tmp_path: Path
) -> None:
    first, _ = _small_shards(runs, tmp_path / "a")
    _, other_seed = _small_shards(runs, tmp_path / "b", 2, "--seed", "8")
    subject = runs["subject"]
    (subject / "SKILL.md").write_text("candidate skill, edited\n")
    try:
        _, other_bytes = _small_shards(runs, tmp_path / "c")
    finally:
        (subject / "SKILL.md").write_text("candidate skill\n")
    [other_count] = [p for p in _small_shards(runs, tmp_path / "d", 3) if p.name.endswith("2-of-3")]

    code, _, err = call_cli(
        ["compare", "merge", *map(str, (first, other_seed, other_bytes, other_count))]
    )

    assert code == 2
    lines = _errors(err)
    assert len(lines) == 3
    assert lines[0].startswith(f"error: {other_seed}: a shard of another plan than {first}")
    assert "seed 8 (expected 7)" in lines[0]
    assert lines[1].startswith(f"error: {other_bytes}: a shard of other bytes than {first}")
    assert "content_digest" in lines[1]
    assert lines[2].startswith(f"error: {other_count}: expected shard I/2")


@pytest.mark.slow
def test_a_duplicated_unit_is_refused(runs: dict[str, Any], tmp_path: Path) -> None:
    first, second = _small_shards(runs, tmp_path / "a")
    copy = tmp_path / "copy-of-first"
    shutil.copytree(first, copy)
    before = _receipts(runs["root"])

    code, _, err = call_cli(["compare", "merge", str(first), str(second), str(copy)])

    assert code == 2
    [line] = _errors(err)
    assert line.startswith(f"error: {copy}: duplicated units build/0 already merged from {first}")
    assert _receipts(runs["root"]) == before  # nothing written


def test_a_shard_twice_is_refused_even_when_it_ran_no_unit(
    runs: dict[str, Any], tmp_path: Path
) -> None:
    first, second = _small_shards(runs, tmp_path / "a")  # one unit: shard 2/2 runs none

    code, _, err = call_cli(["compare", "merge", str(first), str(second), str(second)])

    assert code == 2
    [line] = _errors(err)
    assert line.startswith(f"error: {second}: shard 2/2 already merged from {second}")


@pytest.mark.slow
def test_changed_shard_files_are_refused(runs: dict[str, Any], tmp_path: Path) -> None:
    first, second = _small_shards(runs, tmp_path / "a")
    moved = _load(first / SHARD_FILE)
    moved["shard"]["units"] = []
    (first / SHARD_FILE).write_text(json.dumps(moved))
    stray = _load(second / SHARD_FILE)
    stray["rows"] = moved["rows"]  # shard 2/2 ran no unit, yet now claims build/0's rows
    (second / SHARD_FILE).write_text(json.dumps(stray))

    code, _, err = call_cli(["compare", "merge", str(first), str(second)])

    assert code == 2
    lines = _errors(err)
    assert lines[0].startswith(f"error: {first}: shard 1/2 holds units none; expected build/0")
    assert lines[1].startswith(f"error: {second}: rows or samples of build/0")


def test_shards_of_another_trialrun_version_are_refused(
    runs: dict[str, Any], tmp_path: Path
) -> None:
    shards = _small_shards(runs, tmp_path / "a")
    for path in shards:
        document = _load(path / SHARD_FILE)
        document["plan"]["engine_version"] = "0.0.1"
        (path / SHARD_FILE).write_text(json.dumps(document))

    code, _, err = call_cli(["compare", "merge", *map(str, shards)])

    assert code == 2
    [line] = _errors(err)
    assert f"run by trialrun 0.0.1, this is trialrun {__version__}" in line


# ---- the shard command line ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--shard", "0/3"], "expected 1 <= I <= N"),
        (["--shard", "two"], "expected I/N"),
        (["--shard", "1/2", "--gate"], "--gate: not for a --shard run"),
        (["--shard", "1/2", "--team", "x", "--no-commit"], "--team, --no-commit: not for"),
        (["--shard", "1/2", "--rescore", "x"], "--rescore: not for a --shard run"),
    ],
)
def test_bad_shard_options_are_usage_errors(
    runs: dict[str, Any], args: list[str], message: str
) -> None:
    code, out, err = call_cli(["compare", str(runs["subject"]), *args])

    assert (code, out) == (2, "")
    assert err.startswith("error: ")
    assert message in err.splitlines()[0]


@pytest.mark.slow
def test_an_existing_shard_directory_is_not_reused(runs: dict[str, Any], tmp_path: Path) -> None:
    [first, _] = _small_shards(runs, tmp_path / "a")

    code, _, err = call_cli(
        ["compare", str(runs["subject"]), "--shard", "1/2", "--out", str(tmp_path / "a")]
    )

    assert code == 2
    assert err.startswith(f"error: {first}: a shard directory is already here")


def test_a_subject_folder_named_merge_is_compared_as_dot_slash_merge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "merge").mkdir()
    monkeypatch.chdir(tmp_path)

    code, _, err = call_cli(["compare", "./merge"])
    merge_code, _, merge_err = call_cli(["compare", "merge", "./merge"])

    assert code == 2 and "compare.yaml" in err  # the compare command read the folder
    assert merge_code == 2 and "expected a compare shard directory" in merge_err


# ---- a session, a merged run read back, an interrupted shard ---------------------------------


def test_a_session_unit_shards_whole_and_its_sub_cases_become_holes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from test_compare_session import SUB_CASES  # type: ignore[import-not-found]
    from test_compare_session import make_subject as make_session_subject

    monkeypatch.setenv("TRIALRUN_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("COMPARE_AGENT_PLAN", raising=False)
    subject = make_session_subject(tmp_path)
    assert call_cli(["compare", str(subject), "-j", "4", "--no-commit"])[0] == 0
    full = _load(_receipts(tmp_path)[-1])
    out = tmp_path / "shards"
    for index in (1, 2, 3):  # units solo/0, solo/1, session/0, session/1: shard 1 has two
        args = ["compare", str(subject), "--shard", f"{index}/3", "--out", str(out), "-j", "4"]
        assert call_cli(args)[0] == 0
    shards = sorted(out.iterdir())
    assert [tuple(u) for u in _load(shards[0] / SHARD_FILE)["shard"]["units"]] == [
        ("solo", 0),
        ("session", 1),
    ]

    assert call_cli(["compare", "merge", *map(str, shards), "--no-commit"])[0] == 0
    merged = _load(_receipts(tmp_path)[-1])
    # This agent's transcripts name its sandbox, whose path differs between the store and a
    # shard directory, so the judge's reason ("827 vs 810 characters") may too; the decisions
    # may not.
    assert _without_reasons(_without_run(merged)) == _without_reasons(_without_run(full))
    assert merged["sign_p_pinned"] is True

    assert call_cli(["compare", "merge", str(shards[1]), str(shards[2]), "--no-commit"])[0] == 0
    partial = _load(_receipts(tmp_path)[-1])
    holes = [(hole["case"], hole["rep"]) for hole in partial["holes"]]
    assert holes == [("solo", 0), *((sub, 1) for sub in SUB_CASES)]


@pytest.mark.slow
def test_a_merged_run_reads_back_and_rescores_like_any_run(runs: dict[str, Any]) -> None:
    code, _, err, merged_path = _merge(runs, runs["shards"][3])
    assert code == 0, err
    merged = _load(merged_path)
    run_dir = merged_path.parent
    arm_samples = [
        json.loads(line)
        for line in (run_dir / "run.jsonl").read_text(encoding="utf-8").splitlines()
        if json.loads(line)["type"] == "arm_sample"
    ]
    assert len(arm_samples) == UNITS * 3
    for event in arm_samples:
        assert (run_dir / "transcripts" / event["data"]["transcript_file"]).is_file()
    verified = run_cli(["receipt", "verify", str(run_dir / "run.jsonl")])
    assert verified == 0

    code, _, err = call_cli(
        ["compare", str(runs["subject"]), "--rescore", str(run_dir), "--no-commit"]
    )

    assert code == 0, err
    rescored = _load(_receipts(runs["root"])[-1])
    assert rescored["provenance"]["rescored_from"] == run_dir.name
    for key in ("per_case", "comparisons", "verdict", "triggers"):
        assert rescored[key] == merged[key], key


def test_an_interrupted_shard_keeps_what_finished_and_merges_as_holes(
    runs: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trialrun.compare import engine

    real = engine._run_arms
    calls: list[int] = []

    def interrupted_after_one_unit(plan: Any, *args: Any, **kwargs: Any) -> Any:
        # The first unit runs for real; then the shard is interrupted, as by Ctrl-C.
        calls.append(1)
        finished, _ = real(engine.replace(plan, planned=plan.planned[:1]), *args, **kwargs)
        return finished, True

    monkeypatch.setattr(engine, "_run_arms", interrupted_after_one_unit)
    out = tmp_path / "shards"
    args = ["compare", str(runs["subject"]), "--shard", "1/2", "--out", str(out)]
    code, _, err = call_cli(args)
    monkeypatch.setattr(engine, "_run_arms", real)

    assert code == 130, err
    assert "Interrupted" in err
    [shard] = list(out.iterdir())
    document = _load(shard / SHARD_FILE)
    assert document["interrupted"] is True
    assert len(document["shard"]["units"]) == 3
    assert {(row["case"], row["rep"]) for row in document["rows"]} == {("build", 0)}

    code, _, err, merged_path = _merge(runs, [shard])
    merged = _load(merged_path)
    assert code == 0, err
    assert merged["execution_status"] == "partial"
    not_run = sorted((h["case"], h["rep"]) for h in merged["holes"] if h["kind"] == "not-run")
    assert ("careful", 0) in not_run and ("explain", 0) in not_run  # the shard's own, unfinished
    assert ("build", 1) in not_run  # shard 2/2's, never given
    assert merged["scored_rows"] == 2


def test_a_merge_commits_its_receipt_like_a_compare(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import subprocess

    gitconfig = tmp_path / "gitconfig"
    gitconfig.write_text("")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(gitconfig))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for role in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{role}_NAME", "Test Runner")
        monkeypatch.setenv(f"GIT_{role}_EMAIL", "runner@example.invalid")
    monkeypatch.setenv("TRIALRUN_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TRIALRUN_HANDLE", "alice")
    team = tmp_path / "team.git"
    subprocess.run(["git", "init", "--quiet", "--bare", str(team)], check=True)
    subject = make_subject(tmp_path)
    assert call_cli(["publish", str(subject), "--team", str(team)])[0] == 0
    out = tmp_path / "shards"
    for index in (1, 2):
        args = ["compare", str(subject), "--shard", f"{index}/2", "--out", str(out)]
        assert call_cli([*args, "--case", "build", "--k", "1"])[0] == 0

    code, _, err = call_cli(
        ["compare", "merge", *map(str, sorted(out.iterdir())), "--team", str(team)]
    )

    assert code == 0, err
    assert f"Published this receipt to {team} for Version 1 of demo." in err
    clone = tmp_path / "clone"
    subprocess.run(
        ["git", "clone", "--quiet", "--branch", "main", str(team), str(clone)], check=True
    )
    [filed] = list(clone.glob("evals/*/v1/*.json"))
    assert _load(filed)["verdict"] == "PASS"


@pytest.mark.parametrize(
    ("key", "value"),
    [("scored", None), ("units", [{"case": "build"}]), ("opponents", "baseline"), ("k", "2")],
)
def test_a_plan_missing_what_the_merge_reads_is_refused_not_a_traceback(
    runs: dict[str, Any], tmp_path: Path, key: str, value: Any
) -> None:
    shards = _small_shards(runs, tmp_path / "a", 1)
    for path in shards:
        document = _load(path / SHARD_FILE)
        if value is None:
            del document["plan"][key]
        else:
            document["plan"][key] = value
        (path / SHARD_FILE).write_text(json.dumps(document))

    code, _, err = call_cli(["compare", "merge", *map(str, shards)])

    assert code == 2
    [line] = _errors(err)
    assert line.startswith(f"error: {shards[0] / SHARD_FILE}: cannot be read back")
    assert f"plan.{key}" in line or repr(key) in line


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("outcome", "victory", "row outcome 'victory', expected one of win, loss, tie"),
        ("decided_by", "coin", "row decided_by 'coin'"),
        ("opponent", "rival", "rows or samples of arms rival, which the plan does not have"),
    ],
)
def test_a_changed_row_is_refused_not_a_traceback(
    runs: dict[str, Any], tmp_path: Path, field: str, value: str, message: str
) -> None:
    [shard] = _small_shards(runs, tmp_path / "a", 1)
    document = _load(shard / SHARD_FILE)
    document["rows"][0][field] = value
    (shard / SHARD_FILE).write_text(json.dumps(document))

    code, _, err = call_cli(["compare", "merge", str(shard)])

    assert code == 2
    [line] = _errors(err)
    assert message in line


def test_a_shard_says_what_it_ran_and_json_prints_its_shard_file(
    runs: dict[str, Any], tmp_path: Path
) -> None:
    args = ["compare", str(runs["subject"]), "--out", str(tmp_path)]

    code, out, err = call_cli([*args, "--shard", "2/3"])
    json_code, json_out, _ = call_cli([*args, "--shard", "3/3", "--json"])

    assert code == 0, err
    shard = tmp_path / "demo-shard-2-of-3"
    assert out.splitlines() == [
        "shard 2/3: 2 of 6 units (build/1, explain/0); 4 rows decided",
        f"shard directory: {shard}",
        "join every shard with: trialrun compare merge SHARD_DIR...",
    ]
    assert json_code == 0
    assert json.loads(json_out) == _load(tmp_path / "demo-shard-3-of-3" / SHARD_FILE)
    assert json.loads(json_out)["triggers"]["probes"]


@pytest.mark.slow
def test_a_merge_writes_the_report_page_an_unsharded_compare_writes(runs: dict[str, Any]) -> None:
    code, _out, err, merged_path = _merge(runs, runs["shards"][2])

    assert code == 0, err
    page = merged_path.parent / "report.html"
    assert f"report: {page}" in err
    full_page = (runs["full_receipt"].parent / "report.html").read_text(encoding="utf-8")
    merged_page = page.read_text(encoding="utf-8")
    verdict = _load(merged_path)["verdict"]
    assert verdict in merged_page and verdict in full_page

    # The same rows and figures: only the run's own id and start time differ between the pages.
    def own_run(page: str, receipt: dict[str, Any]) -> str:
        page = page.replace(receipt["run_id"], "RUN")
        return page.replace(receipt["provenance"]["timestamp"], "TIME")

    full, merged = _load(runs["full_receipt"]), _load(merged_path)
    assert own_run(merged_page, merged) == own_run(full_page, full)


def test_out_gets_a_copy_of_the_merged_run_without_its_sandboxes(
    runs: dict[str, Any], tmp_path: Path
) -> None:
    out = tmp_path / "artifacts"
    code, _out, err, merged_path = _merge(runs, runs["shards"][2], "--out", str(out))

    assert code == 0, err
    (copy,) = (out / _load(merged_path)["skill_name"]).iterdir()
    assert f"copied to: {copy}" in err
    assert copy.name == merged_path.parent.name
    assert (copy / "receipt.json").read_bytes() == merged_path.read_bytes()
    assert (copy / "report.html").read_bytes() == (merged_path.parent / "report.html").read_bytes()
    assert sorted(p.name for p in (copy / "transcripts").iterdir()) == sorted(
        p.name for p in (merged_path.parent / "transcripts").iterdir()
    )
    assert not (copy / "sandboxes").exists()
    assert not list(out.rglob("*.partial"))


@pytest.mark.slow
def test_out_refuses_to_overwrite_a_copy(runs: dict[str, Any], tmp_path: Path) -> None:
    from trialrun.compare.store import RunDir, export_run
    from trialrun.errors import ConfigError

    run = RunDir(runs["full_receipt"].parent)
    first = export_run(run, tmp_path, "demo")
    with pytest.raises(ConfigError, match="already exists"):
        export_run(run, tmp_path, "demo")
    assert (first / "receipt.json").read_bytes() == runs["full_receipt"].read_bytes()


@pytest.mark.slow
def test_out_gets_a_copy_of_an_unsharded_compare_too(runs: dict[str, Any], tmp_path: Path) -> None:
    # --rescore takes the same unsharded path as a compare, without running an arm again.
    full_run = runs["full_receipt"].parent
    out = tmp_path / "artifacts"
    code, _out, err = call_cli(
        ["compare", str(runs["subject"]), "--rescore", str(full_run), "--out", str(out)]
    )

    assert code == 0, err
    (copy,) = (out / _load(runs["full_receipt"])["skill_name"]).iterdir()
    assert f"copied to: {copy}" in err
    assert (copy / "receipt.json").is_file() and (copy / "report.html").is_file()
    assert not (copy / "sandboxes").exists()


def test_every_run_log_validates_against_the_receipt_schema(runs: dict[str, Any]) -> None:
    from trialrun.receipt.schema import schema_problems

    code, _, err, merged = _merge(runs, runs["shards"][2])
    assert code == 0, err
    logs = [
        runs["full_receipt"].parent / "run.jsonl",
        merged.parent / "run.jsonl",
        *(shard / "run.jsonl" for shard in runs["shards"][2]),
    ]
    for log in logs:
        assert schema_problems(log) == [], log
        code, out, err = call_cli(["receipt", "verify", "--schema", str(log)])
        assert code == 0, out + err
    merged_start = json.loads((merged.parent / "run.jsonl").read_text().splitlines()[0])
    assert merged_start["data"]["goal"] == "compare demo"
    assert merged_start["data"]["verifyCommand"].startswith("trialrun compare merge ")
    shard_lines = (runs["shards"][2][0] / "run.jsonl").read_text().splitlines()
    shard_end = json.loads(shard_lines[-1])["data"]
    assert shard_end["stopReason"] == "completed" and shard_end["verified"] is False
