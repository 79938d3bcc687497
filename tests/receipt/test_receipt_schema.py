"""schema_problems: the shipped JSON Schema against valid, broken and hostile receipts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from trialrun.errors import ReceiptError
from trialrun.receipt import schema as schema_module
from trialrun.receipt.schema import load_schema, schema_problems
from trialrun.receipt.writer import ReceiptWriter


def write_lines(path: Path, events: list[Any]) -> Path:
    path.write_text("".join(json.dumps(event) + "\n" for event in events), encoding="utf-8")
    return path


def event(kind: str, data: Any, **envelope: Any) -> dict[str, Any]:
    base = {
        "v": "0",
        "seq": 0,
        "ts": "2026-01-01T00:00:00.000Z",
        "type": kind,
        "data": data,
        "prev": "0" * 64,
        "hash": "a" * 64,
    }
    return {**base, **envelope}


def test_the_schema_is_valid_draft_2020_12() -> None:
    schema = load_schema()
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"


@pytest.mark.parametrize(
    "name",
    [
        "valid-signed.jsonl",
        "valid-unsigned.jsonl",
        "edge-numbers.jsonl",
        "edge-strings.jsonl",
        "tamper-edited-field.jsonl",  # the chain is broken, the shapes are not
    ],
)
def test_reference_receipts_have_no_schema_problems(conformance: Path, name: str) -> None:
    assert schema_problems(conformance / name) == []


def test_a_suite_receipt_from_the_writer_passes(tmp_path: Path) -> None:
    path = tmp_path / "receipt.jsonl"
    with ReceiptWriter(path) as writer:
        writer.emit(
            "run_start",
            {
                "goal": "suite",
                "verifyCommand": "trialrun run suite",
                "repoHead": None,
                "branch": "main",
                "tool": {"name": "trialrun", "version": "1"},
            },
        )
        writer.emit("case_start", {"case": "c1", "input_sha256": "0" * 64})
        writer.emit(
            "tool_call",
            {
                "attempt": 1,
                "name": "lookup",
                "argsSummary": 'q="x"',
                "durationMs": 1.5,
                "ok": True,
                "case": "c1",
            },
        )
        writer.close(
            {
                "stopReason": "completed",
                "verified": True,
                "totals": {"attempts": 1, "totalTokens": 0, "costUsd": 0, "filesChanged": 0},
                "cases": {"total": 1, "passed": 1, "failed": 0, "errors": 0},
            }
        )
    assert schema_problems(path) == []


def test_the_version_is_reported_by_the_envelope(conformance: Path) -> None:
    assert schema_problems(conformance / "invalid-version.jsonl") == [
        "line 3: $.v: '0' was expected"
    ]


@pytest.mark.parametrize(
    ("bad_event", "problem"),
    [
        (event("run_start", {"goal": "g"}), "$.data: 'verifyCommand' is a required property"),
        (
            event("tool_call", {"attempt": 1, "name": "x", "argsSummary": "", "durationMs": 1}),
            "$.data: 'ok' is a required property",
        ),
        (
            event(
                "file_change",
                {
                    "path": "a",
                    "status": "renamed",
                    "beforeSha256": None,
                    "afterSha256": None,
                    "diffSha256": "0" * 64,
                },
            ),
            "$.data.status: 'renamed' is not one of ['created', 'modified', 'deleted']",
        ),
        (
            event("attempt_end", {"attempt": -1, "outcome": "worse", "rolledBack": True}),
            "$.data.attempt: -1 is less than the minimum of 0",
        ),
        (
            event("rollback", {"attempt": 1, "reason": 3}),
            "$.data.reason: 3 is not of type 'string'",
        ),
        (event("custom", {}, seq=1.5), "$.seq: 1.5 is not of type 'integer'"),
        (event("custom", {}, ts="yesterday"), "$.ts: 'yesterday' does not match"),
        (event("custom", {}, prev="A" * 64), "$.prev: 'AAAA"),
        (event("custom", [], hash="a"), "$.data: [] is not of type 'object'"),
        (
            event("tool_call", {}, signature={"alg": "ed25519", "publicKey": "k", "sig": "s"}),
            "$: only run_end may carry a signature",
        ),
        (
            event(
                "run_end",
                {"stopReason": "x", "verified": True, "totals": {}},
                signature={"alg": "rsa"},
            ),
            "$.signature.alg: 'ed25519' was expected",
        ),
    ],
)
def test_each_problem_names_its_line_and_member(
    tmp_path: Path, bad_event: dict[str, Any], problem: str
) -> None:
    good = event("custom", {"anything": [1, 2]})
    path = write_lines(tmp_path / "r.jsonl", [good, bad_event])
    problems = schema_problems(path)
    assert problems, "expected at least one problem"
    assert all(p.startswith("line 2: ") for p in problems)
    assert any(p.startswith("line 2: " + problem) for p in problems), problems


def test_unknown_event_types_and_members_are_allowed(tmp_path: Path) -> None:
    custom = event("whatever_next", {"x": {"y": None}}, extension="kept")
    assert schema_problems(write_lines(tmp_path / "r.jsonl", [custom])) == []


def test_lines_that_are_not_json_objects(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_bytes(b'{"v":NaN}\n[1]\n\n')
    problems = schema_problems(path)
    assert problems[0] == "line 1: not valid JSON"
    assert problems[1] == "line 2: $: [1] is not of type 'object'"
    assert problems[-1] == "line 3: not valid JSON"


def test_problems_are_capped(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "r.jsonl", [[]] * 30)
    problems = schema_problems(path, max_problems=10)
    assert len(problems) == 11 and problems[-1] == "... and 20 more problems"


def test_an_overlong_line_is_skipped_and_the_next_line_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(schema_module, "MAX_LINE_BYTES", 100)
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(event("custom", {"x": "y" * 500})) + "\n[]\n", encoding="utf-8")
    assert schema_problems(path) == [
        "line 1: longer than 100 bytes, not checked",
        "line 2: $: [] is not of type 'object'",
    ]


def test_deep_nesting_is_reported_not_raised(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text("[" * 100_000 + "\n", encoding="utf-8")
    assert schema_problems(path) == ["line 1: not valid JSON"]


def test_an_unreadable_receipt_raises_receipt_error(tmp_path: Path) -> None:
    with pytest.raises(ReceiptError, match=r"cannot read receipt .*nope\.jsonl"):
        schema_problems(tmp_path / "nope.jsonl")
    with pytest.raises(ReceiptError):
        schema_problems(tmp_path)


@settings(max_examples=150)
@given(data=st.binary(max_size=200))
def test_arbitrary_bytes_give_problems_never_exceptions(tmp_path_factory: Any, data: bytes) -> None:
    path = tmp_path_factory.mktemp("schema") / "r.jsonl"
    path.write_bytes(data)
    problems = schema_problems(path)
    assert all(p.startswith("line ") for p in problems)
