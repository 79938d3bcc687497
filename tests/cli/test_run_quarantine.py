"""``trialrun run`` with quarantine.yaml: a quarantined case runs and reports but does not gate
until its entry expires; then it gates again and the run names it (issue 33, item 3)."""

from __future__ import annotations

import datetime as dt
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from builders import call_cli, make_shard_suite
from trialrun.config import quarantine

# make_shard_suite: case_000 and case_001 pass, case_002 fails (an assertion).
ENTRY = "- case: case_002\n  reason: upstream flakes\n  owner: ana\n  expires: 2026-12-31\n"


@pytest.fixture
def suite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    made = make_shard_suite(tmp_path, "s", 3)
    monkeypatch.chdir(made)
    return made


def on_day(monkeypatch: pytest.MonkeyPatch, day: dt.date) -> None:
    monkeypatch.setattr(quarantine, "today_utc", lambda: day)


def last_run(out: Path) -> Path:
    return max((out / "s").iterdir())


def summary_of(run_dir: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    return document


def case_doc(summary: dict[str, Any], case_id: str) -> dict[str, Any]:
    (found,) = [case for case in summary["cases"] if case["id"] == case_id]
    return found


def junit_of(run_dir: Path) -> tuple[ET.Element, dict[str, ET.Element]]:
    root = ET.fromstring((run_dir / "junit.xml").read_text(encoding="utf-8"))
    return root, {case.get("name", ""): case for case in root.iter("testcase")}


def test_a_failing_case_does_not_gate_until_its_entry_expires_then_it_is_named(
    suite: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    argv = ["run", ".", "--out", str(out), "--no-baseline", "-q"]
    # Without the file the failing case fails the run: what the quarantine changes below.
    assert call_cli(argv, capsys).code == 1
    (suite / "quarantine.yaml").write_text(ENTRY, encoding="utf-8")
    for day in (dt.date(2026, 12, 30), dt.date(2026, 12, 31)):
        on_day(monkeypatch, day)
        code, stdout, stderr = call_cli(argv, capsys)
        assert code == 0, stdout + stderr
        assert "case_002  FAIL (quarantined)" in stdout
        assert "expired" not in stdout + stderr
        summary = summary_of(last_run(out))
        assert summary["run"]["exit_status"] == "success"
        assert "warnings" not in summary["run"]
        assert case_doc(summary, "case_002")["status"] == "fail"
        assert case_doc(summary, "case_002")["quarantine"] == {
            "reason": "upstream flakes",
            "owner": "ana",
            "expires": "2026-12-31",
            "expired": False,
        }
        assert "quarantine" not in case_doc(summary, "case_000")
        page = (last_run(out) / "report.html").read_text(encoding="utf-8")
        assert "fail (quarantined)" in page
        suite_element, cases = junit_of(last_run(out))
        # CI reads junit.xml too: a quarantined failure is skipped there, not a failure.
        assert (suite_element.get("failures"), suite_element.get("skipped")) == ("0", "1")
        skipped = cases["case_002"].find("skipped")
        assert skipped is not None and cases["case_002"].find("failure") is None
        assert skipped.get("message", "").startswith(
            "quarantined until 2026-12-31 (owner ana): upstream flakes. Status fail: "
        )
        assert "required_fields" in (cases["case_002"].findtext("system-out") or "")
    on_day(monkeypatch, dt.date(2027, 1, 1))
    code, stdout, stderr = call_cli(argv, capsys)
    assert code == 1, stdout + stderr
    warning = (
        "quarantine of case 'case_002' expired on 2026-12-31 (owner ana): it gates again; "
        "fix the case, or extend or remove its entry in quarantine.yaml"
    )
    assert f"warning: {warning}" in stdout
    assert "case_002  FAIL (quarantine expired)" in stdout
    summary = summary_of(last_run(out))
    assert summary["run"]["exit_status"] == "failed"
    assert summary["run"]["warnings"] == [warning]
    assert case_doc(summary, "case_002")["quarantine"]["expired"] is True
    page = (last_run(out) / "report.html").read_text(encoding="utf-8")
    assert "Warning: quarantine of case &#39;case_002&#39; expired on 2026-12-31" in page
    suite_element, cases = junit_of(last_run(out))
    assert (suite_element.get("failures"), suite_element.get("skipped")) == ("1", None)
    assert cases["case_002"].find("failure") is not None


def test_a_quarantined_case_is_left_out_of_the_regression_gate(
    suite: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    case_file = suite / "cases" / "case_002.yaml"
    failing = case_file.read_text(encoding="utf-8")
    case_file.write_text(failing.replace('"fail"', '"pass"'), encoding="utf-8")
    assert call_cli(["run", ".", "--out", str(out), "--no-baseline", "-q"], capsys).code == 0
    baseline = tmp_path / "baseline.json"
    promoted = ["baseline", "promote", "--from", str(last_run(out)), "--to", str(baseline)]
    assert call_cli(promoted, capsys).code == 0
    case_file.write_text(failing, encoding="utf-8")
    (suite / "quarantine.yaml").write_text(ENTRY, encoding="utf-8")
    argv = ["run", ".", "--out", str(out), "--baseline", str(baseline), "-q"]
    on_day(monkeypatch, dt.date(2026, 12, 1))
    code, stdout, stderr = call_cli(argv, capsys)
    assert code == 0, stdout + stderr
    regression = summary_of(last_run(out))["regression"]
    assert regression["passed"] is True
    checks = {check["id"]: check for check in regression["checks"]}
    assert checks["status_regressions"]["status"] == "pass"
    assert checks["status_regressions"]["note"] == "quarantined, left out: case_002"
    assert checks["min_pass_rate"]["current"] == 1.0
    on_day(monkeypatch, dt.date(2027, 1, 1))
    code, stdout, stderr = call_cli(argv, capsys)
    assert code == 1, stdout + stderr
    regression = summary_of(last_run(out))["regression"]
    checks = {check["id"]: check for check in regression["checks"]}
    assert checks["status_regressions"]["status"] == "fail"
    assert checks["status_regressions"]["cases"] == ["case_002"]


def test_a_quarantined_failure_does_not_block_promotion_and_is_said(
    suite: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    (suite / "quarantine.yaml").write_text(ENTRY, encoding="utf-8")
    baseline = tmp_path / "baseline.json"

    def promote() -> tuple[int, str, str]:
        argv = ["baseline", "promote", "--from", str(last_run(out)), "--to", str(baseline)]
        return call_cli(argv, capsys)

    on_day(monkeypatch, dt.date(2026, 12, 31))
    assert call_cli(["run", ".", "--out", str(out), "--no-baseline", "-q"], capsys).code == 0
    code, stdout, stderr = promote()
    assert code == 0, stdout + stderr
    assert stderr == (
        "warning: case case_002 is fail but quarantined (upstream flakes; owner ana, until "
        "2026-12-31): it does not block the promotion, and the baseline records it as fail\n"
    )
    document = json.loads(baseline.read_text(encoding="utf-8"))
    assert document["run"]["exit_status"] == "success"
    assert case_doc(document, "case_002")["status"] == "fail"

    # Expired, the entry excuses nothing: the failure blocks as any other.
    baseline.unlink()
    on_day(monkeypatch, dt.date(2027, 1, 1))
    assert call_cli(["run", ".", "--out", str(out), "--no-baseline", "-q"], capsys).code == 1
    code, _, stderr = promote()
    assert code == 2
    assert "expected a passing run, found exit_status failed (1 fail, 2 pass)" in stderr
    assert "warning" not in stderr and not baseline.exists()


def test_a_quarantined_case_does_not_excuse_another_failure_at_promotion(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    made = make_shard_suite(tmp_path, "s", 5)  # case_002 fails, case_004 crashes
    monkeypatch.chdir(made)
    (made / "quarantine.yaml").write_text(ENTRY, encoding="utf-8")
    on_day(monkeypatch, dt.date(2026, 1, 1))
    out = tmp_path / "out"
    assert call_cli(["run", ".", "--out", str(out), "-q"], capsys).code == 1
    baseline = tmp_path / "baseline.json"
    argv = ["baseline", "promote", "--from", str(last_run(out)), "--to", str(baseline)]
    code, _, stderr = call_cli(argv, capsys)
    assert code == 2
    assert "found exit_status error (1 error, 1 fail, 3 pass)" in stderr
    # With --allow-failing it is promoted, and the quarantined failure is still named.
    code, _, stderr = call_cli([*argv, "--allow-failing"], capsys)
    assert code == 0
    assert "warning: case case_002 is fail but quarantined" in stderr


def test_a_quarantined_case_that_errors_does_not_gate_either(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    made = make_shard_suite(tmp_path, "s", 5)  # case_004 crashes: status error
    monkeypatch.chdir(made)
    (made / "quarantine.yaml").write_text(
        ENTRY + ENTRY.replace("case_002", "case_004"), encoding="utf-8"
    )
    on_day(monkeypatch, dt.date(2026, 1, 1))
    code, stdout, stderr = call_cli(["run", ".", "--out", str(tmp_path / "o"), "-q"], capsys)
    assert code == 0, stdout + stderr
    assert "case_004  ERROR (quarantined)" in stdout


def test_a_bad_quarantine_file_stops_the_run_before_any_agent(
    suite: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (suite / "quarantine.yaml").write_text(
        ENTRY.replace("case_002", "case_02").replace("  owner: ana\n", ""), encoding="utf-8"
    )
    out = tmp_path / "out"
    code, _stdout, stderr = call_cli(["run", ".", "--out", str(out)], capsys)
    assert code == 2
    assert stderr.splitlines() == [
        "error: quarantine.yaml:1: missing required key 'owner' in entry for case 'case_02'",
    ]
    assert not out.exists()
    (suite / "quarantine.yaml").write_text(ENTRY.replace("case_002", "case_02"), encoding="utf-8")
    code, _, stderr = call_cli(["run", ".", "--out", str(out), "--case", "case_000"], capsys)
    assert code == 2
    assert stderr.splitlines() == [
        "error: quarantine.yaml:1: unknown case id 'case_02': no case of the suite has it "
        "(did you mean 'case_002'?)",
    ]
