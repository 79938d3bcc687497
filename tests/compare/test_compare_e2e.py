"""End to end: ``trialrun compare`` on a three-case subject with scripted agents and the fake judge.

The scripted agent (written into the subject's ``evals/``) decides what to do from which subject
is staged in its sandbox (none: baseline; ``SKILL.md`` says ``candidate`` or ``incumbent``), the
case's task and ``TRIALRUN_REP``, and prints a deterministic stream-json transcript. The table it
produces with the fake judge in ``longer`` mode (k = 2):

=========  ===  ===========================  ============================
case       rep  candidate-vs-baseline        candidate-vs-incumbent
=========  ===  ===========================  ============================
build      0/1  win (checks)                 tie (checks-equal-no-judge)
careful    0    loss (checks)                loss (checks)
careful    1    tie (checks-equal-no-judge)  tie (checks-equal-no-judge)
explain    0    win (judge: longer answer)   tie (judge: same length)
explain    1    tie (judge: same length)     tie (judge: same length)
=========  ===  ===========================  ============================

So against the baseline 3W / 1L / 2T: net lift exactly +1/3, a PASS on the band's boundary.
``SCRIPTED_FLIP=1`` swaps the candidate's and the baseline's behaviour (1W / 3L / 2T: FAIL).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from builders import HANG_GUARD_S, call_cli, make_compare_subject, row_table
from trialrun.compare import store
from trialrun.errors import ConfigError
from trialrun.home import paths
from trialrun.home.digest import content_digest, eval_assets_digest
from trialrun.receipt.verify import verify_receipt


@pytest.fixture
def subject(tmp_path: Path) -> Path:
    return make_compare_subject(tmp_path)


def receipts(home: Path) -> list[Path]:
    return sorted(home.glob("evals/local/*/*/receipt.json"))


def only_receipt(home: Path) -> dict[str, Any]:
    [path] = receipts(home)
    loaded: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return loaded


EXPECTED_ROWS = [
    ("build", 0, "baseline", "win", "checks"),
    ("build", 0, "incumbent", "tie", "checks-equal-no-judge"),
    ("build", 1, "baseline", "win", "checks"),
    ("build", 1, "incumbent", "tie", "checks-equal-no-judge"),
    ("careful", 0, "baseline", "loss", "checks"),
    ("careful", 0, "incumbent", "loss", "checks"),
    ("careful", 1, "baseline", "tie", "checks-equal-no-judge"),
    ("careful", 1, "incumbent", "tie", "checks-equal-no-judge"),
    ("explain", 0, "baseline", "win", "judge"),
    ("explain", 0, "incumbent", "tie", "judge"),
    ("explain", 1, "baseline", "tie", "judge"),
    ("explain", 1, "incumbent", "tie", "judge"),
]

EXPECTED_REPORT_HEAD = """\
verdict: PASS
why: wins on execution checks; loses on execution checks; 2 ties
candidate-vs-baseline: +33% net lift (3W / 1L / 2T over 6 comparisons, sign test p=0.625)
candidate-vs-incumbent: -17% net lift (0W / 1L / 5T over 6 comparisons, sign test p=1.000)
arm scores: baseline 0.67 · candidate 0.83 · incumbent 1.00
case-runs passed: baseline 4/6 · candidate 5/6 · incumbent 6/6
efficiency: baseline 3.0 turns · 22.8s · $0.11 | candidate 5.0 turns · 41.2s · $0.25 \
| incumbent 4.0 turns · 33.0s · $0.15
"""


def test_scripted_run_gives_the_known_rows_report_and_receipt(
    home: Path, subject: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = call_cli(["compare", str(subject), "-j", "4"], capsys)

    assert code == 0, err
    assert out.startswith(EXPECTED_REPORT_HEAD)
    assert "statistics (reported; they never change the verdict):" in out
    receipt = only_receipt(home)
    assert row_table(receipt) == EXPECTED_ROWS
    assert receipt["verdict"] == "PASS"
    assert receipt["execution_status"] == "complete"
    assert (receipt["expected_rows"], receipt["scored_rows"]) == (12, 12)
    assert receipt["holes"] == []
    baseline = receipt["comparisons"]["candidate-vs-baseline"]
    assert (baseline["win"], baseline["loss"], baseline["tie"]) == (3, 1, 2)
    assert baseline["sign_p"] == 0.625
    assert receipt["version"] is None
    assert receipt["content_digest"] == content_digest(subject)
    assert receipt["eval_assets_digest"] == eval_assets_digest(subject / "evals")
    assert sorted(receipt["case_digests"]) == ["build", "careful", "explain"]
    assert receipt["provenance"]["k"] == 2 and receipt["provenance"]["seed"] == 7
    [run_dir] = [path.parent for path in receipts(home)]
    assert run_dir.parent.name == content_digest(subject).removeprefix("sha256:")
    assert f"receipt: {run_dir / 'receipt.json'}" in err
    assert verify_receipt(run_dir / "run.jsonl").ok
    assert len(list((run_dir / "transcripts").iterdir())) == 18
    assert_a_complete_run_receipt(run_dir / "run.jsonl", subject, capsys)
    # The candidate's sandbox is kept, staged without its answer key.
    staged = run_dir / "sandboxes" / "build" / "0" / "candidate" / ".claude" / "skills" / "demo"
    assert (staged / "SKILL.md").is_file() and not (staged / "evals").exists()


def assert_a_complete_run_receipt(
    log: Path, subject: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """run.jsonl passes ``receipt verify --schema`` and ``receipt show`` has nothing empty."""
    code, out, err = call_cli(["receipt", "verify", "--schema", str(log)], capsys)
    assert code == 0, out + err
    code, out, _ = call_cli(["receipt", "show", str(log)], capsys)
    assert code == 0
    shown = out.splitlines()
    assert "Goal:    compare demo" in shown
    assert f"Verify:  trialrun compare {subject} -j 4" in shown
    assert "Repo:    (no commit)" in shown  # the subject is no git checkout
    assert any(line.startswith("Tool:    trialrun ") for line in shown)
    [end] = [line for line in shown if line.startswith("Run end:")]
    assert end.startswith("Run end: stop reason completed, verified true; totals: attempts 18, ")
    assert not [line for line in shown if line.rstrip().endswith(":")], shown


def test_json_prints_the_receipt(
    home: Path, subject: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = call_cli(
        ["compare", str(subject), "-j", "4", "--json", "--case", "build"], capsys
    )

    assert code == 0
    printed = json.loads(out)
    assert printed == only_receipt(home)
    assert printed["expected_rows"] == 4 and printed["provenance"]["cases"] == ["build"]


_VOLATILE = re.compile(r'"(run_id|timestamp)": "[^"]*"')


def test_same_seed_twice_gives_byte_identical_receipts(
    home: Path, subject: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for jobs in ("1", "4"):  # concurrency must not show in the receipt either
        code, _, err = call_cli(
            ["compare", str(subject), "-j", jobs, "--case", "build", "--case", "explain"], capsys
        )
        assert code == 0, err
    first, second = (_VOLATILE.sub("", path.read_text()) for path in receipts(home))
    assert first == second
    assert '"run_id"' not in first  # the substitution really removed the volatile fields


def test_gate_exits_1_on_fail_and_0_without_it(
    home: Path, subject: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SCRIPTED_FLIP", "1")

    gated, out, _ = call_cli(["compare", str(subject), "-j", "4", "--gate"], capsys)
    ungated, _, _ = call_cli(
        ["compare", str(subject), "-j", "4", "--k", "1", "--case", "build"], capsys
    )

    assert gated == 1
    assert out.startswith("verdict: FAIL\n")
    assert ungated == 0


def test_rescore_redecides_a_stored_run_without_running_an_arm(
    home: Path, subject: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert call_cli(["compare", str(subject), "-j", "4"], capsys)[0] == 0
    [first] = receipts(home)
    (subject / "evals" / "agent.py").write_text("raise SystemExit(9)\n")  # no arm may run
    tie_judge = f"{sys.executable} -m trialrun.compare.fake_judge --prefer tie"

    code, out, err = call_cli(
        ["compare", str(subject), "--rescore", first.parent.name, "--judge-command", tie_judge],
        capsys,
    )

    assert code == 0, err
    [rescored] = [path for path in receipts(home) if path != first]
    receipt = json.loads(rescored.read_text())
    assert receipt["provenance"]["rescored_from"] == first.parent.name
    assert [row[3] for row in row_table(receipt) if row[0] == "explain"] == ["tie"] * 4
    assert out.startswith("verdict: NEUTRAL\n")
    assert "candidate-vs-baseline: +17% net lift (2W / 1L / 3T" in out
    assert not any((rescored.parent / "sandboxes").iterdir())
    assert receipt["content_digest"] == json.loads(first.read_text())["content_digest"]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_run_leaves_a_partial_receipt_with_named_holes(
    home: Path, subject: Path, tmp_path: Path, signum: signal.Signals
) -> None:
    # SIGTERM: a cancelled CI job, which must stop the run like Ctrl-C.
    release = tmp_path / "release"
    env = dict(os.environ, TRIALRUN_HOME=str(home), SCRIPTED_WAIT_FOR=str(release))
    command = [
        sys.executable,
        "-c",
        "from trialrun.cli import main; main()",
        "compare",
        str(subject),
        "-j",
        "1",
    ]
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        # build and careful: 2 cases x 2 reps x 3 arms finish; explain waits for the release.
        while _finished_arms(home) < 12 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _finished_arms(home) == 12
        process.send_signal(signum)
        out, err = process.communicate(timeout=HANG_GUARD_S)
    finally:
        release.touch()
        if process.poll() is None:
            process.kill()

    assert process.returncode == 130, err
    receipt = only_receipt(home)
    assert receipt["execution_status"] == "partial"
    assert (receipt["expected_rows"], receipt["scored_rows"]) == (12, 8)
    assert [(hole["case"], hole["rep"], hole["kind"]) for hole in receipt["holes"]] == [
        ("explain", 0, "not-run"),
        ("explain", 1, "not-run"),
    ]
    baseline = receipt["comparisons"]["candidate-vs-baseline"]
    assert (baseline["win"], baseline["loss"], baseline["tie"]) == (2, 1, 1)
    assert b"verdict:" in out and b"partial" in err.lower()


def _finished_arms(home: Path) -> int:
    logs = list(home.glob("evals/local/*/*/run.jsonl"))
    return logs[0].read_text().count('"type":"arm_sample"') if logs else 0


def test_unknown_case_and_missing_judge_are_bad_input(
    home: Path, subject: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = call_cli(["compare", str(subject), "--case", "nope"], capsys)
    assert code == 2
    assert "--case nope: no such case" in err and "known: build, careful, explain" in err

    compare_yaml = subject / "evals" / "compare.yaml"
    text = compare_yaml.read_text()
    compare_yaml.write_text(text[: text.index("judge:")] + "seed: 7\n")
    code, _, err = call_cli(["compare", str(subject), "--case", "explain"], capsys)
    assert code == 2
    assert "judge rubric but no judge command" in err
    assert receipts(home) == []  # refused before any run directory was made


def test_bad_judge_command_and_missing_subject_are_bad_input(
    home: Path, tmp_path: Path, subject: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert call_cli(["compare", str(subject), "--judge-command", "'unclosed"], capsys)[0] == 2
    code, _, err = call_cli(["compare", str(tmp_path / "nothing-here")], capsys)
    assert code == 2 and "no compare.yaml" in err
    code, _, err = call_cli(["compare", str(subject), "--rescore", "20000101T000000Z"], capsys)
    assert code == 2 and "--rescore 20000101T000000Z" in err


def test_store_home_run_ids_and_lookup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRIALRUN_HOME", raising=False)
    assert paths.trialrun_home() == Path.home() / ".trialrun"
    monkeypatch.setenv("TRIALRUN_HOME", str(tmp_path))
    assert paths.store_root() == tmp_path / "evals" / "local"
    assert store.new_run_id(0.0) == "19700101T000000Z"

    first = store.create_run_dir("sha256:" + "a" * 64, "20260101T000000Z")
    second = store.create_run_dir("sha256:" + "a" * 64, "20260101T000000Z")
    other = store.create_run_dir("sha256:" + "b" * 64, "20260101T000000Z")
    assert (first.run_id, second.run_id) == ("20260101T000000Z", "20260101T000000Z-2")
    assert first.path.parent.name == "a" * 64 and first.sandboxes.is_dir()

    for run in (first, second, other):
        run.run_log.write_text("")
    assert store.find_run_dir("20260101T000000Z-2") == second
    assert store.find_run_dir(str(other.path)).path == other.path
    with pytest.raises(ConfigError, match="ambiguous"):
        store.find_run_dir("20260101T000000Z")
    with pytest.raises(ConfigError, match="found neither"):
        store.find_run_dir("19990101T000000Z")


def test_run_log_reader_skips_a_torn_last_line_only(tmp_path: Path) -> None:
    run = store.RunDir(tmp_path)
    good = json.dumps({"type": "row", "data": {"case": "a"}})
    run.run_log.write_text(f'{good}\n{{"type": "ro')
    assert list(store.read_run_log(run)) == [("row", {"case": "a"})]
    run.run_log.write_text(f"not json\n{good}\n")
    with pytest.raises(ConfigError, match=r"run.jsonl:1: expected one JSON event a line"):
        list(store.read_run_log(run))


def test_stored_arm_run_with_missing_fields_is_reported(tmp_path: Path) -> None:
    run = store.RunDir(tmp_path)
    run.run_log.write_text(json.dumps({"type": "arm_sample", "data": {"case": "a"}}) + "\n")
    with pytest.raises(ConfigError, match="cannot be read back"):
        store.stored_arm_runs(run)
    assert store.transcript_name("a", "candidate", 1, "text") == "a.candidate.1.txt"


def test_numbers_no_report_can_hold_are_left_out_not_fatal(
    home: Path, subject: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The candidate claims 1e308 turns and dollars: rounding that for the HTML report raised
    # (its whole part has 309 digits), after every arm had run.
    agent = subject / "evals" / "agent.py"
    claims = '"candidate": (1e308, 1e300, 1e308)'
    agent.write_text(agent.read_text().replace('"candidate": (5, 41200, 0.25)', claims))

    code, out, err = call_cli(["compare", str(subject), "-j", "4"], capsys)

    assert code == 0, err
    assert "Traceback" not in err
    efficiency_line = next(line for line in out.splitlines() if line.startswith("efficiency:"))
    assert efficiency_line == (
        "efficiency: baseline 3.0 turns · 22.8s · $0.11 | incumbent 4.0 turns · 33.0s · $0.15"
    )
    receipt = only_receipt(home)
    assert receipt["efficiency"]["candidate"]["turns"] is None
    [report] = home.glob("evals/local/*/*/report.html")
    assert "</html>" in report.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("variable", "handle"), [("alice", "alice"), ("  ", "local"), (None, "local")]
)
def test_the_receipt_names_the_runner_by_trialrun_handle(
    home: Path,
    subject: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    variable: str | None,
    handle: str,
) -> None:
    if variable is None:
        monkeypatch.delenv("TRIALRUN_HANDLE", raising=False)
    else:
        monkeypatch.setenv("TRIALRUN_HANDLE", variable)
    code, _, err = call_cli(["compare", str(subject), "--case", "build"], capsys)
    assert code == 0, err
    assert only_receipt(home)["provenance"]["runner_handle"] == handle


def test_a_text_transcript_gets_the_duration_trialrun_measured(
    home: Path, subject: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    compare_yaml = subject / "evals" / "compare.yaml"
    text = compare_yaml.read_text(encoding="utf-8")
    compare_yaml.write_text(text.replace("transcript: stream-json", "transcript: text"))
    code, out, err = call_cli(["compare", str(subject), "--case", "build"], capsys)
    assert code == 0, err
    efficiency = only_receipt(home)["efficiency"]
    assert set(efficiency) == {"baseline", "candidate", "incumbent"}
    for arm, numbers in efficiency.items():
        # A text transcript reports no turns, tokens or cost; every arm was timed all the same.
        assert (numbers["turns"], numbers["tokens"], numbers["cost_usd"]) == (None, None, None)
        assert numbers["duration_ms"] is not None and numbers["duration_ms"] > 0, arm
        assert numbers["samples"] == 2, arm
    [line] = [line for line in out.splitlines() if line.startswith("efficiency: ")]
    assert "baseline " in line and "candidate " in line
