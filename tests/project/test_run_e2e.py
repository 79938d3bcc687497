"""End to end: the real CLI as a subprocess over a suite of misbehaving agents.

Faulty agents fail their own case with a named reason; the run goes on and writes every artifact.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from builders import HANG_GUARD_S, MISBEHAVING, make_suite, only_run_dir, run_trialrun

EXPECTED = MISBEHAVING


def pid_gone(pid: int, within_s: float = 30.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


@pytest.fixture(scope="module")
def misbehaving_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    root = tmp_path_factory.mktemp("e2e")
    suite = make_suite(root)
    runs = {}
    for jobs in (1, 3):
        proc = run_trialrun(
            "run", str(suite), "--out", str(root / f"out{jobs}"), "-j", str(jobs), cwd=root
        )
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert "Traceback" not in proc.stderr
        runs[jobs] = only_run_dir(root / f"out{jobs}")
    runs[0] = root
    return runs


@pytest.mark.slow
def test_each_faulty_agent_fails_its_own_case_with_a_named_reason(
    misbehaving_runs: dict[int, Path],
) -> None:
    summary = json.loads((misbehaving_runs[1] / "summary.json").read_text(encoding="utf-8"))
    got = {case["id"]: (case["status"], case["failure_kind"]) for case in summary["cases"]}
    assert got == EXPECTED
    by_id = {case["id"]: case for case in summary["cases"]}
    assert (
        "agent blew up on purpose"
        in by_id["b_crash"]["failure_reason"] + by_id["b_crash"]["stderr_tail"]
    )
    assert "print logs to stderr" in by_id["d_noise"]["failure_reason"]
    assert by_id["j_usage"]["tokens_out"] == 20


@pytest.mark.slow
def test_every_artifact_is_written(misbehaving_runs: dict[int, Path]) -> None:
    run_dir = misbehaving_runs[1]
    assert sorted(p.name for p in run_dir.iterdir()) == [
        "junit.xml",
        "receipt.jsonl",
        "report.html",
        "run.jsonl",
        "summary.json",
        "unused-recordings.json",
    ]
    events = [
        json.loads(line)
        for line in (run_dir / "run.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    ends = [e for e in events if e["type"] == "case_end"]
    assert [e["case_id"] for e in ends] == list(EXPECTED)
    assert any(e["type"] == "agent_error" and e["case_id"] == "b_crash" for e in events)


@pytest.mark.slow
def test_the_receipt_verifies_and_records_every_case(misbehaving_runs: dict[int, Path]) -> None:
    from trialrun.receipt.verify import verify_receipt

    receipt = misbehaving_runs[1] / "receipt.jsonl"
    result = verify_receipt(receipt)
    assert result.ok, result.to_json()
    events = [json.loads(line) for line in receipt.read_text(encoding="utf-8").splitlines()]
    ends = [e["data"] for e in events if e["type"] == "case_end"]
    assert [(e["case"], e["status"]) for e in ends] == [(k, v[0]) for k, v in EXPECTED.items()]
    assert events[-1]["type"] == "run_end" and events[-1]["data"]["verified"] is False
    assert any(e["type"] == "usage" and e["data"]["case"] == "j_usage" for e in events)

    lines_by_case: dict[str, bytes] = {}
    for line in (misbehaving_runs[1] / "run.jsonl").read_bytes().splitlines(keepends=True):
        case_id = json.loads(line)["case_id"]
        lines_by_case[case_id] = lines_by_case.get(case_id, b"") + line
    for end in ends:
        assert end["traceSha256"] == hashlib.sha256(lines_by_case[end["case"]]).hexdigest()


@pytest.mark.slow
def test_grandchildren_do_not_survive_their_case(misbehaving_runs: dict[int, Path]) -> None:
    pid = int((misbehaving_runs[0] / "e_grandchild.pid").read_text())
    assert pid_gone(pid)


@pytest.mark.slow
def test_parallel_run_gives_the_sequential_results_in_the_same_order(
    misbehaving_runs: dict[int, Path],
) -> None:
    def verdicts(run_dir: Path) -> list[tuple[str, str, str | None]]:
        summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
        return [(c["id"], c["status"], c["failure_kind"]) for c in summary["cases"]]

    def event_types(run_dir: Path) -> list[tuple[str, str]]:
        lines = (run_dir / "run.jsonl").read_text(encoding="utf-8").splitlines()
        return [(e["case_id"], e["type"]) for e in map(json.loads, lines)]

    assert verdicts(misbehaving_runs[1]) == verdicts(misbehaving_runs[3])
    assert event_types(misbehaving_runs[1]) == event_types(misbehaving_runs[3])


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.slow
def test_ctrl_c_or_sigterm_leaves_a_summary_marked_interrupted(
    tmp_path: Path, signum: signal.Signals
) -> None:
    suite = make_suite(tmp_path)
    for case in (suite / "cases").iterdir():
        if case.name not in ("a_ok.yaml", "e_grandchild.yaml", "j_usage.yaml"):
            case.unlink()
    grandchild = suite / "cases" / "e_grandchild.yaml"
    case = json.loads(grandchild.read_text(encoding="utf-8"))
    case["budgets"] = {"max_wall_ms": 60000}
    grandchild.write_text(json.dumps(case), encoding="utf-8")
    proc = subprocess.Popen(
        [sys.executable, "-m", "trialrun", "run", str(suite), "--out", str(tmp_path / "out")],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    pid_file = tmp_path / "e_grandchild.pid"
    deadline = time.monotonic() + 30
    while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=HANG_GUARD_S)
    assert proc.returncode == 130, out + err
    assert "Traceback" not in err
    run_dir = only_run_dir(tmp_path / "out")
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    assert summary["run"]["interrupted"] is True
    assert [c["id"] for c in summary["cases"]] == ["a_ok"]
    # Every view says the run stopped, and how many of the cases it was given did not run.
    assert summary["run"]["cases_not_run"] == ["e_grandchild", "j_usage"]
    assert "INTERRUPTED: 2 of 3 cases did not run (e_grandchild, j_usage)" in out
    report = (run_dir / "report.html").read_text(encoding="utf-8")
    assert "Interrupted: 2 of 3 cases did not run (e_grandchild, j_usage)" in report
    assert (run_dir / "run.jsonl").exists()
    from trialrun.receipt.verify import verify_receipt

    assert verify_receipt(run_dir / "receipt.jsonl").reason == "truncated"
    assert pid_gone(int(pid_file.read_text()))


def test_case_option_runs_only_the_named_cases(tmp_path: Path) -> None:
    suite = make_suite(tmp_path)
    out = tmp_path / "out"
    proc = run_trialrun(
        "run", str(suite), "--out", str(out), "--case", "a_ok", "--case", "j_usage", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = json.loads((only_run_dir(out) / "summary.json").read_text(encoding="utf-8"))
    assert [c["id"] for c in summary["cases"]] == ["a_ok", "j_usage"]

    proc = run_trialrun("run", str(suite), "--out", str(out), "--case", "a_okk", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: ") and "a_ok" in proc.stderr


def test_a_suite_setting_share_cpu_runs_with_one_deprecation_warning_at_its_line(
    tmp_path: Path,
) -> None:
    suite = make_suite(tmp_path)
    suite_file = suite / "suite.yaml"
    text = suite_file.read_text(encoding="utf-8")
    suite_file.write_text(text + "share_cpu: false\n", encoding="utf-8")
    line = text.count("\n") + 1
    out = tmp_path / "out"
    proc = run_trialrun(
        "run", str(suite), "--out", str(out), "--case", "a_ok", "--case", "j_usage", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    warnings = [row for row in proc.stderr.splitlines() if "share_cpu" in row]
    assert warnings == [
        f"warning: suite/suite.yaml:{line}: 'share_cpu' is deprecated: has no effect (trialrun "
        "no longer changes which CPUs the agent runs on) and may be removed"
    ]
    summary = json.loads((only_run_dir(out) / "summary.json").read_text(encoding="utf-8"))
    assert [c["status"] for c in summary["cases"]] == ["pass", "pass"]


def test_github_actions_gets_annotations_at_the_case_file_and_a_step_summary(
    tmp_path: Path,
) -> None:
    suite = make_suite(tmp_path)
    for case in (suite / "cases").iterdir():
        if case.name not in ("a_ok.yaml", "g_disallowed.yaml"):
            case.unlink()
    step_summary = tmp_path / "summary.md"
    env = {
        "GITHUB_ACTIONS": "true",
        "GITHUB_STEP_SUMMARY": str(step_summary),
        "GITHUB_WORKSPACE": str(tmp_path),
    }
    proc = run_trialrun("run", suite, "--out", tmp_path / "out", cwd=tmp_path, env=env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (annotation,) = [line for line in proc.stdout.splitlines() if line.startswith("::error")]
    assert annotation.startswith("::error file=suite/cases/g_disallowed.yaml,line=1,")
    assert "Tool not allowed: delete_everything" in annotation
    markdown = step_summary.read_text(encoding="utf-8")
    assert "g\\_disallowed" in markdown or "g_disallowed" in markdown
    assert "tool_not_allowed" in markdown.replace("\\_", "_")


# The recorder's last writes, held until the test says go and announced, so signals land in the
# middle; every SIGTERM its handlers take is noted, so the test sends the next only after that.
SLOW_FINISH = """\
import signal, sys, time
from pathlib import Path
from trialrun.artifacts import recording
finish = recording.RunRecorder.finish
flag = Path(sys.argv.pop(1))
seen = flag.with_suffix(".seen")
go = flag.with_suffix(".go")
def slow_finish(self, *args, **kwargs):
    flag.write_text("finishing")
    deadline = time.monotonic() + 60
    while not go.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    return finish(self, *args, **kwargs)
recording.RunRecorder.finish = slow_finish
set_handler = signal.signal
def noting(signum, handler):
    if signum == signal.SIGTERM and callable(handler):
        inner = handler
        def handler(number, frame):
            with seen.open("a") as out:
                out.write("SIGTERM\\n")
            return inner(number, frame)
    return set_handler(signum, handler)
signal.signal = noting
from trialrun.cli import main
sys.argv[0] = "trialrun"
main()
"""


def _wait_for(done: Callable[[], bool]) -> None:
    """Until ``done()``; the bound only limits how long a broken run takes to fail."""
    deadline = time.monotonic() + 60
    while not done() and time.monotonic() < deadline:
        time.sleep(0.02)


@pytest.mark.parametrize("signals", [1, 2])
def test_a_signal_while_the_last_artifacts_are_written_waits_for_them(
    tmp_path: Path, signals: int
) -> None:
    suite = make_suite(tmp_path)
    for case in (suite / "cases").iterdir():
        if case.name != "a_ok.yaml":
            case.unlink()
    flag = tmp_path / "finishing"
    seen = flag.with_suffix(".seen")
    proc = subprocess.Popen(
        [sys.executable, "-c", SLOW_FINISH, str(flag), "run", str(suite), "--no-baseline",
         "--out", str(tmp_path / "out")],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    _wait_for(flag.exists)
    for sent in range(1, signals + 1):
        proc.send_signal(signal.SIGTERM)
        _wait_for(lambda sent=sent: seen.exists() and len(seen.read_text().splitlines()) >= sent)
    flag.with_suffix(".go").write_text("")
    out, err = proc.communicate(timeout=HANG_GUARD_S)
    assert "Traceback" not in err
    written = sorted(path.name for path in only_run_dir(tmp_path / "out").iterdir())
    if signals == 1:  # every case was over: the run finishes as it would have
        assert proc.returncode == 0, out + err
        assert written == [
            "junit.xml",
            "receipt.jsonl",
            "report.html",
            "run.jsonl",
            "summary.json",
            "unused-recordings.json",
        ]
    else:  # a second signal insists
        assert proc.returncode == 130, out + err
        assert "summary.json" not in written


# The report's warm-up thread, run in place so that what it loads is settled before the tail.
TAIL_IMPORTS = """\
import json, sys
from pathlib import Path
from trialrun.artifacts import recording
recording.RunRecorder.warm_up = lambda self: recording._warm_report()
finish = recording.RunRecorder.finish
report = Path(sys.argv.pop(1))
def noting_finish(self, *args, **kwargs):
    before = set(sys.modules)
    try:
        return finish(self, *args, **kwargs)
    finally:
        report.write_text(json.dumps(sorted(set(sys.modules) - before)))
recording.RunRecorder.finish = noting_finish
from trialrun.cli import main
sys.argv[0] = "trialrun"
main()
"""


def test_the_runs_tail_imports_nothing_the_warm_up_did_not_load(tmp_path: Path) -> None:
    # Each module imported after the last case is time the user waits for (JUnit's ElementTree
    # alone is ~5 ms); the warm-up thread loads them while the agents run.
    suite = make_suite(tmp_path)
    for case in (suite / "cases").iterdir():
        if case.name != "a_ok.yaml":
            case.unlink()
    report = tmp_path / "tail.json"
    proc = subprocess.run(
        [sys.executable, "-c", TAIL_IMPORTS, str(report), "run", str(suite), "--no-baseline",
         "--out", str(tmp_path / "out")],
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    seen = json.loads(report.read_text())
    assert seen == []
