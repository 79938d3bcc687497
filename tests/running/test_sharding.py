"""``--shard I/N``: parsing, a deterministic and balanced split, and the summary's shard block."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trialrun.config import load_suite
from trialrun.errors import ConfigError
from trialrun.running.sharding import (
    ShardSpec,
    assign_shards,
    case_ids_sha256,
    select_shard,
    shard_case_ids,
    shard_info,
)

IDS = st.lists(st.text(min_size=1, max_size=12), unique=True, max_size=60)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("1/1", ShardSpec(1, 1)), ("2/3", ShardSpec(2, 3)), (" 3 / 3 ", ShardSpec(3, 3))],
)
def test_parse_accepts_index_over_count(text: str, expected: ShardSpec) -> None:
    assert ShardSpec.parse(text) == expected


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("0/3", "found 0/3"),
        ("4/3", "found 4/3"),
        ("1/0", "found 0"),
        ("3", "found '3'"),
        ("-1/2", "found '-1/2'"),
        ("a/b", "found 'a/b'"),
        ("", "found ''"),
        ("1/2/3", "found '1/2/3'"),
        ("1/99999", "between 1 and"),
    ],
)
def test_parse_refuses_other_forms_saying_what_was_expected(text: str, says: str) -> None:
    with pytest.raises(ConfigError) as caught:
        ShardSpec.parse(text)
    assert says in str(caught.value)
    assert "--shard" in str(caught.value)


@given(st.integers(1, 300).flatmap(lambda n: st.tuples(st.integers(1, n), st.just(n))))
def test_parse_round_trips_its_text(pair: tuple[int, int]) -> None:
    spec = ShardSpec(*pair)
    assert ShardSpec.parse(str(spec)) == spec


@given(IDS, st.integers(1, 8))
def test_shards_partition_the_ids_with_sizes_within_one(ids: list[str], count: int) -> None:
    shards = [shard_case_ids(ids, ShardSpec(i, count)) for i in range(1, count + 1)]
    assert sorted(case_id for shard in shards for case_id in shard) == sorted(ids)
    sizes = [len(shard) for shard in shards]
    assert max(sizes) - min(sizes) <= 1
    assert all(shard == sorted(shard) for shard in shards)


@given(IDS.flatmap(lambda ids: st.tuples(st.just(ids), st.permutations(ids))), st.integers(1, 5))
def test_assignment_depends_on_the_set_of_ids_only(
    orders: tuple[list[str], list[str]], count: int
) -> None:
    first, shuffled = orders
    assert assign_shards(first, count) == assign_shards(shuffled, count)
    assert case_ids_sha256(first) == case_ids_sha256(shuffled)


def test_assignment_is_pinned() -> None:
    # The split is a contract between machines and versions: changing it breaks merges.
    ids = [f"case-{n:02d}" for n in range(10)]
    assert assign_shards(ids, 3) == PINNED_ASSIGNMENT


PINNED_ASSIGNMENT = {
    "case-00": 2,
    "case-01": 3,
    "case-02": 1,
    "case-03": 1,
    "case-04": 2,
    "case-05": 1,
    "case-06": 3,
    "case-07": 2,
    "case-08": 3,
    "case-09": 1,
}


def test_assignment_is_the_same_in_other_processes_whatever_their_hash_seed() -> None:
    ids = [f"ticket-{n}" for n in range(40)] + ["é", "日本", "a b"]
    script = (
        "import json, sys\n"
        "from trialrun.running.sharding import assign_shards\n"
        "print(json.dumps(assign_shards(json.loads(sys.argv[1]), 4), sort_keys=True))\n"
    )
    here = json.dumps(assign_shards(ids, 4), sort_keys=True)
    for seed in ("1", "2", "random"):
        proc = subprocess.run(
            [sys.executable, "-c", script, json.dumps(ids)],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        )
        assert proc.stdout.strip() == here


def test_fifty_cases_in_three_shards_are_balanced() -> None:
    ids = [f"case_{n:03d}" for n in range(50)]
    sizes = sorted(len(shard_case_ids(ids, ShardSpec(i, 3))) for i in (1, 2, 3))
    assert sizes == [16, 17, 17]


def test_more_shards_than_cases_leaves_some_empty() -> None:
    assert [shard_case_ids(["a", "b"], ShardSpec(i, 3)) for i in (1, 2, 3)].count([]) == 1


def test_duplicate_ids_are_refused() -> None:
    with pytest.raises(ConfigError, match="unique case ids, found 'a' more than once"):
        shard_info(ShardSpec(1, 2), ["a", "b", "a"])


def test_assign_refuses_a_count_below_one() -> None:
    with pytest.raises(ConfigError, match="at least 1, found 0"):
        assign_shards(["a"], 0)


def test_shard_info_records_the_split_for_merge() -> None:
    ids = ["c", "a", "b", "d"]
    info = shard_info(ShardSpec(2, 2), ids)
    assert info == {
        "index": 2,
        "count": 2,
        "suite_case_ids_sha256": case_ids_sha256(["a", "b", "c", "d"]),
        "case_ids": shard_case_ids(ids, ShardSpec(2, 2)),
    }
    assert len(info["suite_case_ids_sha256"]) == 64
    assert case_ids_sha256(["a", "b"]) != case_ids_sha256(["a", "b", "c"])
    # A separator inside an id cannot make two different id lists collide.
    assert case_ids_sha256(["a\nb"]) != case_ids_sha256(["a", "b"])


def test_select_shard_picks_the_suites_cases_sorted_by_id(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    (suite / "cases").mkdir(parents=True)
    (suite / "suite.yaml").write_text(
        "suite_name: s\nagent_command: [python, agent.py]\nmode: replay\ncases_path: cases\n"
        "tool_registry: []\n",
        encoding="utf-8",
    )
    ids = [f"k{n}" for n in range(7)]
    for case_id in ids:
        (suite / "cases" / f"{case_id}.yaml").write_text(
            f"id: {case_id}\ninput: {{}}\ncassette: c.jsonl\n", encoding="utf-8"
        )
    cases = load_suite(suite).cases
    for index in (1, 2, 3):
        chosen = select_shard(cases, ShardSpec(index, 3))
        assert [case.config.id for case in chosen] == shard_case_ids(ids, ShardSpec(index, 3))
