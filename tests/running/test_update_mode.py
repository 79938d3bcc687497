"""``run --mode update`` and the review of re-recordings, on real suites (issue 32, items 1-2).

The agent is ``scripted.py`` (it makes the calls its case input lists); the tool is a real
function in the suite's tool module that answers from ``prices.json``, which a test changes to
make the upstream answer differ between runs.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from builders import call_cli, only_run_dir, write_suite
from paths import AGENTS_DIR
from trialrun.base.recordtime import parse_recorded_at

SCRIPTED = [sys.executable, AGENTS_DIR / "scripted.py"]

TOOL_MODULE = """\
import json
from pathlib import Path

PRICES = Path(__file__).with_name("prices.json")


def price(args):
    table = json.loads(PRICES.read_text(encoding="utf-8"))
    return {"item": args["item"], "price": table["prices"][args["item"]],
            "fetched_at": table["fetched_at"]}


TOOLS = {"price": price}
"""

# Written by hand, in a layout the recorder would not write (spaces, key order): update mode
# must leave a recording it replays exactly as it was.
HAND_WRITTEN = {
    "apple": '{ "tool":"price","args":{"item":"apple"},"ok":true,'
    '"result":{"item":"apple","price":1,"fetched_at":"old"} }',
    "pear": '{"tool": "price", "args": {"item": "pear"}, "ok": true, '
    '"result": {"item": "pear", "price": 2, "fetched_at": "old"}}',
    "plum": '{"args":{"item":"plum"},"tool":"price","ok":true,'
    '"result":{"item":"plum","price":3,"fetched_at":"old"}}',
}


def call(item: str) -> dict[str, Any]:
    return {"type": "tool_call", "name": "price", "call_id": item, "args": {"item": item}}


def make_suite(
    root: Path, items: list[str], *, cassette: list[str] | None, script_end: Any = None
) -> Path:
    module = f"prices_{abs(hash(str(root))) % 10**8}"  # each test imports its own module
    script: list[Any] = [call(item) for item in items]
    if script_end is not None:
        script.append(script_end)
    return write_suite(
        root,
        name="shop",
        agent=SCRIPTED,
        tools=["price"],
        mode="replay",
        settings=f"tool_module: {module}\n",
        cases={"buy": {"input": {"script": script}, "cassette": "cassettes/buy.jsonl"}},
        cassettes=None if cassette is None else {"buy.jsonl": lines_text(cassette)},
        files={
            f"{module}.py": TOOL_MODULE,
            "prices.json": json.dumps(
                {"prices": {"apple": 10, "pear": 20, "plum": 30, "fig": 40}, "fetched_at": "new"}
            ),
        },
    )


def lines_text(lines: list[str]) -> str:
    return "".join(f"{line}\n" for line in lines)


def set_prices(suite: Path, prices: dict[str, int], fetched_at: str) -> None:
    text = json.dumps({"prices": prices, "fetched_at": fetched_at})
    (suite / "prices.json").write_text(text, encoding="utf-8")


def cassette_lines(suite: Path) -> list[bytes]:
    return (suite / "cassettes" / "buy.jsonl").read_bytes().splitlines()


def summary_of(out: Path) -> dict[str, Any]:
    summary: dict[str, Any] = json.loads((only_run_dir(out) / "summary.json").read_text("utf-8"))
    return summary


def diff_of(out: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(
        (only_run_dir(out) / "recordings-diff.json").read_text("utf-8")
    )
    return document


def run(
    suite: Path, out: str, capsys: pytest.CaptureFixture[str], *extra: str
) -> tuple[int, str, str]:
    return call_cli(["run", str(suite), "--out", out, "--no-baseline", *extra], capsys)


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def test_update_records_only_the_call_that_changed_and_keeps_the_others_byte_for_byte(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = [HAND_WRITTEN["apple"], HAND_WRITTEN["pear"], HAND_WRITTEN["plum"]]
    suite = make_suite(tmp_path, ["apple", "fig", "plum"], cassette=old)
    code, out, err = run(suite, "out", capsys, "--mode", "update")
    assert code == 0, out + err
    lines = cassette_lines(suite)
    # Replayed: the old bytes, and the old prices (the tool now answers 10 and 30).
    assert lines[0] == old[0].encode() and lines[2] == old[2].encode()
    recorded = json.loads(lines[1])
    assert parse_recorded_at(recorded.pop("recorded_at")) is not None  # the new one says when
    assert recorded == {
        "tool": "price",
        "args": {"item": "fig"},
        "ok": True,
        "result": {"item": "fig", "price": 40, "fetched_at": "new"},
    }
    assert len(lines) == 3
    case = summary_of(tmp_path / "out")["cases"][0]
    assert case["recordings"] == {
        "committed": True,
        "kept": 2,
        "replaced": 1,
        "added": 0,
        "dropped": 0,
        "changed": 1,
        "volatile_only": 0,
    }
    # What the agent got for apple is the recording, not the live tool's answer.
    answers = case["tool_sequence"]
    assert answers == ["price", "price", "price"]
    assert summary_of(tmp_path / "out")["run"]["mode"] == "update"
    assert summary_of(tmp_path / "out")["run"]["recordings"]["replaced"] == 1
    assert "  buy: 0 added, 1 replaced, 0 dropped, 2 kept (1 changed)" in out
    page = (only_run_dir(tmp_path / "out") / "report.html").read_text("utf-8")
    assert "buy: 0 added, 1 replaced, 0 dropped, 2 kept" in page
    (changed,) = [
        r for r in diff_of(tmp_path / "out")["cases"][0]["files"][0]["recordings"]
        if r["status"] == "changed"
    ]  # fmt: skip
    assert changed["field"] == "args.item"
    assert (changed["old_line"], changed["new_line"]) == (2, 2)


def test_a_call_the_agent_no_longer_makes_is_dropped_or_kept_with_keep_unused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = [HAND_WRITTEN["apple"], HAND_WRITTEN["pear"], HAND_WRITTEN["plum"]]
    suite = make_suite(tmp_path, ["apple", "plum"], cassette=old)
    code, out, err = run(suite, "out1", capsys, "--mode", "update")
    assert code == 0, out + err
    assert cassette_lines(suite) == [old[0].encode(), old[2].encode()]
    counts = summary_of(tmp_path / "out1")["cases"][0]["recordings"]
    assert (counts["kept"], counts["dropped"], counts["replaced"]) == (2, 1, 0)
    diff = diff_of(tmp_path / "out1")
    assert diff["totals"] == {
        "identical": 2,
        "volatile-only": 0,
        "changed": 0,
        "added": 0,
        "removed": 1,
    }
    (removed,) = [r for r in diff["cases"][0]["files"][0]["recordings"] if r["old_line"] == 2]
    assert removed == {"status": "removed", "recording": "tool price", "old_line": 2,
                       "new_line": None}  # fmt: skip
    assert "  buy: 0 added, 0 replaced, 1 dropped, 2 kept" in out

    (suite / "cassettes" / "buy.jsonl").write_text(lines_text(old))
    code, out, err = run(suite, "out2", capsys, "--mode", "update", "--keep-unused")
    assert code == 0, out + err
    # The unused recording stays, after the calls' recordings, byte for byte.
    assert cassette_lines(suite) == [old[0].encode(), old[2].encode(), old[1].encode()]
    counts = summary_of(tmp_path / "out2")["cases"][0]["recordings"]
    assert (counts["kept"], counts["dropped"]) == (3, 0)
    assert "Recordings (added" not in out  # nothing changed: no line for the case


def test_update_without_a_cassette_records_every_call_as_added(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = make_suite(tmp_path, ["apple", "pear"], cassette=None)
    code, out, err = run(suite, "out", capsys, "--mode", "update")
    assert code == 0, out + err
    assert [json.loads(line)["args"] for line in cassette_lines(suite)] == [
        {"item": "apple"},
        {"item": "pear"},
    ]
    counts = summary_of(tmp_path / "out")["cases"][0]["recordings"]
    assert (counts["added"], counts["kept"]) == (2, 0)


def test_a_failed_case_keeps_its_old_recordings_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = [HAND_WRITTEN["apple"], HAND_WRITTEN["pear"]]
    gave_up = {"type": "task_error", "message": "gave up"}
    suite = make_suite(tmp_path, ["apple", "fig"], cassette=old, script_end=gave_up)
    before = (suite / "cassettes" / "buy.jsonl").read_bytes()
    code, out, _ = run(suite, "out", capsys, "--mode", "update")
    assert code == 1
    assert (suite / "cassettes" / "buy.jsonl").read_bytes() == before
    assert list((suite / "cassettes").iterdir()) == [suite / "cassettes" / "buy.jsonl"]
    summary = summary_of(tmp_path / "out")
    assert summary["cases"][0]["recordings"]["committed"] is False
    assert summary["run"]["recordings"]["cases_not_committed"] == 1
    assert "Cassettes kept as they were" in out
    assert not (only_run_dir(tmp_path / "out") / "recordings-diff.json").exists()


def unstamped(line: bytes) -> dict[str, Any]:
    recording: dict[str, Any] = json.loads(line)
    assert parse_recorded_at(recording.pop("recorded_at")) is not None
    return recording


def test_fail_on_change_fails_a_record_run_whose_answer_changed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = make_suite(tmp_path, ["apple", "pear", "plum"], cassette=None)
    code, out, err = run(suite, "out1", capsys, "--mode", "record", "--fail-on-change")
    assert code == 0, out + err  # a first recording: everything added, nothing changed
    first = cassette_lines(suite)

    set_prices(suite, {"apple": 10, "pear": 21, "plum": 30}, "new")
    code, out, err = run(suite, "out2", capsys, "--mode", "record", "--fail-on-change")
    assert code == 1, out + err
    assert "1 recording changed (--fail-on-change)" in err
    assert "tool price (result.price): 20 -> 21" in err
    assert "Changed recordings (see recordings-diff.json):" in out
    recordings = diff_of(tmp_path / "out2")["cases"][0]["files"][0]["recordings"]
    assert [r["status"] for r in recordings] == ["identical", "changed", "identical"]
    assert recordings[1]["field"] == "result.price"
    assert (recordings[1]["old"], recordings[1]["new"]) == ("20", "21")
    # The run itself passed; the recording was still made (the job is what fails).
    assert summary_of(tmp_path / "out2")["cases"][0]["status"] == "pass"
    # Recorded again, unchanged but for when (the second run may fall in a later second).
    assert unstamped(cassette_lines(suite)[0]) == unstamped(first[0])
    page = (only_run_dir(tmp_path / "out2") / "report.html").read_text("utf-8")
    assert '<tr data-review="changed">' in page and "result.price" in page


def test_fail_on_change_passes_a_record_run_whose_answers_differ_only_in_volatile_parts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = make_suite(tmp_path, ["apple", "pear"], cassette=None)
    set_prices(suite, {"apple": 10, "pear": 20}, "2026-12-01T10:00:00Z")
    code, out, err = run(suite, "out1", capsys, "--mode", "record")
    assert code == 0, out + err
    set_prices(suite, {"apple": 10, "pear": 20}, "2026-12-05T04:12:33Z")
    code, out, err = run(suite, "out2", capsys, "--mode", "record", "--fail-on-change")
    assert code == 0, out + err
    assert "changed" not in err
    diff = diff_of(tmp_path / "out2")
    assert diff["totals"]["volatile-only"] == 2 and diff["totals"]["changed"] == 0
    assert diff["mode"] == "record"


def test_fail_on_change_and_keep_unused_need_a_mode_that_records(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = make_suite(tmp_path, ["apple"], cassette=[HAND_WRITTEN["apple"]])
    code, _, err = run(suite, "out", capsys, "--fail-on-change")
    assert code == 2
    assert "--fail-on-change needs --mode record or update; the run's mode is replay" in err
    code, _, err = run(suite, "out", capsys, "--mode", "record", "--keep-unused")
    assert code == 2
    assert "--keep-unused needs --mode update" in err


def test_a_replay_run_writes_no_review(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    suite = make_suite(tmp_path, ["apple"], cassette=[HAND_WRITTEN["apple"]])
    code, out, err = run(suite, "out", capsys)
    assert code == 0, out + err
    assert not (only_run_dir(tmp_path / "out") / "recordings-diff.json").exists()
    assert "recordings" not in summary_of(tmp_path / "out")["cases"][0]
    assert "recordings" not in summary_of(tmp_path / "out")["run"]


def test_the_report_escapes_what_a_changed_recording_holds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = make_suite(tmp_path, ["apple"], cassette=None)
    code, out, err = run(suite, "out1", capsys, "--mode", "record")
    assert code == 0, out + err
    set_prices(suite, {"apple": 10}, "<script>alert(1)</script>")
    code, out, err = run(suite, "out2", capsys, "--mode", "record")
    assert code == 0, out + err  # without --fail-on-change a changed answer does not fail
    page = (only_run_dir(tmp_path / "out2") / "report.html").read_text("utf-8")
    assert "<script>alert(1)" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "result.fetched_at" in page


def test_update_leaves_a_cassette_it_cannot_read_alone_and_names_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = make_suite(tmp_path, ["apple"], cassette=[HAND_WRITTEN["apple"], "{not json"])
    before = (suite / "cassettes" / "buy.jsonl").read_bytes()
    code, _, _ = run(suite, "out", capsys, "--mode", "update")
    assert code == 1
    assert (suite / "cassettes" / "buy.jsonl").read_bytes() == before
    assert list((suite / "cassettes").iterdir()) == [suite / "cassettes" / "buy.jsonl"]
    case = summary_of(tmp_path / "out")["cases"][0]
    assert case["failure_kind"] == "cassette_error"
    assert "buy.jsonl:2:" in case["failure_reason"]
