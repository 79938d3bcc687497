"""``trialrun merge`` combines the shards' unused-recordings.json and recordings-diff.json, and
``trialrun prune MERGED_DIR`` then removes only what no case of any shard used (issue 32).

Real runs of 2 shards (``trialrun run --shard I/2``) of a suite whose cases share one cassette
across the shards: a recording one shard left unused may be the one the other shard read.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from builders import SHARD_AGENT, call_cli, only_run_dir, write_suite
from trialrun.running.sharding import ShardSpec, shard_case_ids

SHARED = [f"s{n}" for n in range(6)]  # the cases reading cassettes/shared.jsonl
SOLO = "solo"  # the one case with a cassette of its own

TOOL_MODULE = """\
import json
from pathlib import Path


def lookup(args):
    table = json.loads(Path(__file__).with_name("answers.json").read_text(encoding="utf-8"))
    return {"n": table.get(args["q"], 0)}


TOOLS = {"lookup": lookup}
"""


def recording(q: str, n: int = 1) -> str:
    return json.dumps({"tool": "lookup", "args": {"q": q}, "ok": True, "result": {"n": n}})


def make_suite(root: Path, *, shared: bool = True) -> Path:
    """The suite; ``shared``: the SHARED cases read one cassette (else each its own, as record
    mode needs: it writes a case's calls over its cassette)."""
    module = f"merge_tools_{abs(hash(str(root))) % 10**8}"  # each test imports its own module
    cassette = {q: "shared.jsonl" if shared else f"{q}.jsonl" for q in SHARED} | {
        SOLO: "solo.jsonl"
    }
    # "nobody" is read by no case; "never" neither. Every other line by exactly one case.
    cassettes = {
        "shared.jsonl": "".join(recording(q) + "\n" for q in [*SHARED[:3], "nobody"])
        + "".join(recording(q) + "\n" for q in SHARED[3:]),
        "solo.jsonl": recording(SOLO) + "\n" + recording("never") + "\n",
    }
    if not shared:
        cassettes = {f"{q}.jsonl": recording(q) + "\n" for q in [*SHARED, SOLO]}
    return write_suite(
        root,
        name="rec",
        agent=[sys.executable, "agent.py"],
        tools=["lookup"],
        cases={
            case_id: {
                "input": {"behaviour": "pass", "q": case_id},
                "cassette": f"cassettes/{cassette[case_id]}",
            }
            for case_id in [*SHARED, SOLO]
        },
        cassettes=cassettes,
        files={
            "agent.py": SHARD_AGENT,
            f"{module}.py": TOOL_MODULE,
            "answers.json": json.dumps({q: 1 for q in [*SHARED, SOLO]}),
        },
        settings=f"tool_module: {module}\n"
        "assertions:\n  - type: required_fields\n    fields: [answer, reply]\n",
    )


def shards_of() -> list[list[str]]:
    everything = sorted([*SHARED, SOLO])
    return [shard_case_ids(everything, ShardSpec(i, 2)) for i in (1, 2)]


def run_shards(suite: Path, root: Path, *options: str) -> list[Path]:
    dirs = []
    for index in (1, 2):
        out = root / f"shard{index}"
        code, stdout, stderr = call_cli(
            ["run", str(suite), "--shard", f"{index}/2", "--out", str(out), "--no-baseline",
             "-q", *options]
        )  # fmt: skip
        assert code == 0, stdout + stderr
        dirs.append(only_run_dir(out))
    return dirs


def merge(root: Path, shards: list[Path]) -> Path:
    code, stdout, stderr = call_cli(["merge", *map(str, shards), "--out", str(root / "merged")])
    assert code == 0, stdout + stderr
    return only_run_dir(root / "merged")


def load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.fixture
def suite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    made = make_suite(tmp_path)
    monkeypatch.chdir(made)
    # The point of the test: cases reading one cassette ran in different shards.
    assert all(set(shard) & set(SHARED) for shard in shards_of())
    return made


def test_merge_combines_unused_recordings_and_prune_keeps_what_another_shard_read(
    suite: Path, tmp_path: Path
) -> None:
    shards = run_shards(suite, tmp_path)
    shared = suite / "cassettes" / "shared.jsonl"
    before = shared.read_bytes()
    # One shard alone cannot prune the shared cassette: the other shard's cases read it.
    code, stdout, stderr = call_cli(["prune", str(shards[0]), "--dry-run"])
    assert code == 0, stdout + stderr
    assert "a case this run did not run shares it" in stdout

    merged = merge(tmp_path, shards)
    document = load(merged / "unused-recordings.json")
    assert [case["case_id"] for case in document["cases"]] == sorted([*SHARED, SOLO])
    assert document["mode"] == "replay" and document["interrupted"] is False
    assert set(document["files"]) == {"cassettes/shared.jsonl", "cassettes/solo.jsonl"}
    shard_docs = [load(shard / "unused-recordings.json") for shard in shards]
    assert sorted(document["cases"], key=str) == sorted(
        (case for doc in shard_docs for case in doc["cases"]), key=str
    )

    code, stdout, stderr = call_cli(["prune", str(merged)])
    assert code == 0, stdout + stderr
    # Only the line no case of either shard read went; every other byte stayed.
    lines = before.splitlines(keepends=True)
    assert shared.read_bytes() == b"".join(line for line in lines if b'"nobody"' not in line)
    assert (suite / "cassettes" / "solo.jsonl").read_text() == recording(SOLO) + "\n"
    # The pruned suite still replays whole.
    code, stdout, stderr = call_cli(["run", ".", "--out", str(tmp_path / "after"), "-q"])
    assert code == 0, stdout + stderr


def test_a_shard_without_unused_recordings_leaves_none_in_the_merged_run(
    suite: Path, tmp_path: Path
) -> None:
    shards = run_shards(suite, tmp_path)
    (shards[1] / "unused-recordings.json").unlink()
    merged = merge(tmp_path, shards)
    # Half a list would let prune remove what the missing shard's cases read.
    assert not (merged / "unused-recordings.json").exists()
    code, _, stderr = call_cli(["prune", str(merged)])
    assert code == 2 and "no unused-recordings.json" in stderr


def test_shards_that_saw_different_bytes_of_a_recording_cannot_be_pruned(
    suite: Path, tmp_path: Path
) -> None:
    shards = run_shards(suite, tmp_path)
    path = shards[1] / "unused-recordings.json"
    document = load(path)
    document["files"]["cassettes/shared.jsonl"] = "0" * 64
    path.write_text(json.dumps(document), encoding="utf-8")
    merged = merge(tmp_path, shards)
    assert load(merged / "unused-recordings.json")["files"]["cassettes/shared.jsonl"] is None
    before = (suite / "cassettes" / "shared.jsonl").read_bytes()
    code, _, stderr = call_cli(["prune", str(merged)])
    assert code == 2
    assert "cassettes/shared.jsonl" in stderr and "shards" in stderr
    assert (suite / "cassettes" / "shared.jsonl").read_bytes() == before


def test_an_unreadable_shard_file_fails_the_merge(suite: Path, tmp_path: Path) -> None:
    shards = run_shards(suite, tmp_path)
    (shards[0] / "recordings-diff.json").write_text("{not json", encoding="utf-8")
    code, _, stderr = call_cli(["merge", *map(str, shards), "--out", str(tmp_path / "merged")])
    assert code == 2
    assert "recordings-diff.json: expected JSON" in stderr


def test_merge_combines_the_review_of_a_sharded_re_recording(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    suite = make_suite(tmp_path, shared=False)
    monkeypatch.chdir(suite)
    # The upstream now answers one case of each shard differently.
    first, second = (sorted(set(shard) & set(SHARED))[0] for shard in shards_of())
    answers = {q: 1 for q in [*SHARED, SOLO]} | {first: 2, second: 3}
    (suite / "answers.json").write_text(json.dumps(answers), encoding="utf-8")
    shards = run_shards(suite, tmp_path, "--mode", "record")
    merged = merge(tmp_path, shards)
    document = load(merged / "recordings-diff.json")
    assert document["run_id"] == load(merged / "summary.json")["run"]["run_id"]
    assert document["mode"] == "record"
    assert [case["id"] for case in document["cases"]] == sorted([*SHARED, SOLO])
    shard_docs = [load(shard / "recordings-diff.json") for shard in shards]
    for status in ("identical", "changed", "removed", "added", "volatile-only"):
        assert document["totals"][status] == sum(doc["totals"][status] for doc in shard_docs)
    assert document["totals"]["changed"] == 2
    changed = [
        (case["id"], recording["field"])
        for case in document["cases"]
        for block in case["files"]
        for recording in block["recordings"]
        if recording["status"] == "changed"
    ]
    assert changed == sorted([(first, "result.n"), (second, "result.n")])
    # The merged report shows the review as a run of the whole suite does.
    page = (merged / "report.html").read_text(encoding="utf-8")
    assert page.count('<tr data-review="changed">') == 2
    assert not (merged / "unused-recordings.json").exists()  # a record run has none
