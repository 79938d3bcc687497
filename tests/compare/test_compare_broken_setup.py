"""A user command that fails on every call is a broken setup, never a quiet tie (issue 15 item 1).

Real ``trialrun compare`` runs of the three-case subject of test_compare_e2e (its table: the
judged ``explain`` rows give the candidate its third win, so without a working judge the verdict
falls from PASS to NEUTRAL). The judges here are scripts in the subject's ``evals/``, reached
through ``{evals}`` as a user would write it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from test_compare_e2e import (  # type: ignore[import-not-found]
    EXPECTED_REPORT_HEAD,
    only_receipt,
    receipts,
)
from test_compare_e2e import subject as subject
from test_compare_selector import make_library  # type: ignore[import-not-found]

from builders import call_cli
from trialrun.compare.store import RunDir, read_run_log

PYTHON = json.dumps(sys.executable)
FAKE_JUDGE_LINE = f"command: [{PYTHON}, -m, trialrun.compare.fake_judge, --prefer, longer]"

JUDGE_SCRIPT = """\
import json, sys
from trialrun.compare.fake_judge import answer_for
request = json.load(sys.stdin)
a, b = request["a"], request["b"]
mode = sys.argv[1] if len(sys.argv) > 1 else "never"
fail = {"never": False, "always": True, "equal": len(a) == len(b), "different": len(a) != len(b)}
if fail[mode]:
    print("judge.py: no model reachable", file=sys.stderr)
    raise SystemExit(5)
print(json.dumps(answer_for("longer", a, b)))
"""
"""``judge.py [never|always|equal|different]``: the fake judge in ``longer`` mode, failing on
every call, or only when the two transcripts have equal (different) lengths."""


def use_judge(subject: Path, judge_block: str) -> None:
    (subject / "evals" / "judge.py").write_text(JUDGE_SCRIPT, encoding="utf-8")
    compare = subject / "evals" / "compare.yaml"
    text = compare.read_text(encoding="utf-8")
    assert FAKE_JUDGE_LINE in text
    compare.write_text(text.replace(f"  {FAKE_JUDGE_LINE}\n", judge_block), encoding="utf-8")


def run_end(home: Path) -> dict[str, Any]:
    [path] = receipts(home)
    [end] = [data for kind, data in read_run_log(RunDir(path.parent)) if kind == "run_end"]
    return end


def test_evals_placeholder_in_the_judge_command_reaches_the_right_verdict(
    home: Path, subject: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    use_judge(subject, f'  command: [{PYTHON}, "{{evals}}/judge.py"]\n')

    code, out, err = call_cli(["compare", str(subject), "-j", "2", "--gate"], capsys)

    assert code == 0, err
    assert out.startswith(EXPECTED_REPORT_HEAD)  # PASS, not the NEUTRAL of an unexpanded path
    receipt = only_receipt(home)
    assert receipt["broken_setup"] == []
    assert receipt["command_health"]["judge"] == {
        "asked": 4,
        "failed": 0,
        "causes": {},
        "broken": False,
        "never_ran": [],
    }
    assert "BROKEN SETUP" not in out + err


def test_evals_placeholder_in_the_escalation_command_is_expanded(
    home: Path, subject: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    use_judge(
        subject,
        f'  command: [{PYTHON}, "{{evals}}/judge.py", always]\n'
        f'  escalate_command: [{PYTHON}, "{{evals}}/judge.py"]\n',
    )

    code, out, err = call_cli(["compare", str(subject), "-j", "2", "--case", "explain"], capsys)

    assert code == 0, err
    rows = [row for entry in only_receipt(home)["per_case"] for row in entry["outcomes"].values()]
    assert [(row["decided_by"], row["judge_escalated"]) for row in rows] == [("judge", True)] * 4
    assert "BROKEN SETUP" not in out


def test_a_judge_that_fails_every_call_is_a_broken_setup_and_fails_the_gate(
    home: Path, subject: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    use_judge(subject, f'  command: [{PYTHON}, "{{evals}}/judge.py", always]\n')

    code, out, err = call_cli(["compare", str(subject), "-j", "2", "--gate"], capsys)

    assert code == 1
    lines = out.splitlines()
    assert lines[0] == "verdict: NEUTRAL"
    assert lines[1].startswith(
        "BROKEN SETUP: the judge failed on every call it was asked, so every judged row is a tie "
        "and the verdict measures nothing (4 of 4: 4 judge-error); first error: candidate as A, "
        "attempt 1 (judge): expected exit code 0, found 5: judge.py: no model reachable"
    )
    assert lines[1] in err.splitlines()
    assert "--gate: failing: a broken setup (judge) decided nothing" in err
    receipt = only_receipt(home)
    assert receipt["broken_setup"] == ["judge"]
    assert receipt["command_health"]["judge"] == {
        "asked": 4,
        "failed": 4,
        "causes": {"judge-error": 4},
        "broken": True,
        "never_ran": [],
    }
    assert run_end(home)["broken_setup"] == ["judge"]
    [path] = receipts(home)
    page = (path.parent / "report.html").read_text(encoding="utf-8")
    # The badge is coloured as a broken run, never as the scored verdict's pass colour.
    assert '<span class="verdict verdict-BROKEN" id="verdict">NEUTRAL</span>' in page
    assert '<span class="pill broken">BROKEN SETUP: judge</span>' in page


def test_without_gate_a_broken_judge_still_exits_0_but_says_so(
    home: Path, subject: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    use_judge(subject, f'  command: [{PYTHON}, "{{evals}}/judge.py", always]\n')
    code, out, err = call_cli(
        ["compare", str(subject), "-j", "2", "--case", "explain", "--json"], capsys
    )
    assert code == 0
    assert json.loads(out)["broken_setup"] == ["judge"]
    assert "BROKEN SETUP: the judge failed on every call" in err


@pytest.mark.parametrize(
    ("fail_when", "line", "on_stderr"),
    [
        # 3 of the 4 judged rows compare transcripts of equal length.
        ("equal", "warning: judge: 3 of 4 calls failed (3 judge-error); each failed call", True),
        ("different", "judge: 1 of 4 calls failed (1 judge-error); each failed call is", False),
    ],
)
def test_a_judge_that_fails_some_calls_shows_the_count_under_the_verdict(
    home: Path,
    subject: Path,
    capsys: pytest.CaptureFixture[str],
    fail_when: str,
    line: str,
    on_stderr: bool,
) -> None:
    use_judge(subject, f'  command: [{PYTHON}, "{{evals}}/judge.py", {fail_when}]\n')

    code, out, err = call_cli(["compare", str(subject), "-j", "2", "--gate"], capsys)

    assert code == 0, err  # some answers came back: the verdict is weakened, not void
    assert out.splitlines()[1].startswith(line)
    assert (line in err) is on_stderr
    receipt = only_receipt(home)
    assert receipt["broken_setup"] == []
    assert receipt["command_health"]["judge"]["failed"] == (3 if fail_when == "equal" else 1)


def test_an_agent_command_that_never_starts_is_a_broken_setup(
    home: Path, subject: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    compare = subject / "evals" / "compare.yaml"
    compare.write_text(compare.read_text().replace("{evals}/agent.py", "{evals}/agnet.py"))

    code, out, err = call_cli(
        ["compare", str(subject), "-j", "2", "--gate", "--case", "build"], capsys
    )

    assert code == 1  # NEUTRAL with nothing scored used to pass the gate
    lines = out.splitlines()
    assert lines[0].startswith("verdict: NEUTRAL [failed")
    assert lines[1].startswith(
        "BROKEN SETUP: every arm run died (its setup or agent command failed), so no row was "
        "scored and the verdict measures "
        "nothing (6 of 6: 6 failed); first error: agent exited with code 2"
    )
    assert "agnet.py" in lines[1]
    assert lines[1] in err
    assert only_receipt(home)["broken_setup"] == ["agent"]


def test_an_agent_command_holding_a_nul_is_a_broken_setup_not_a_traceback(
    home: Path, subject: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    compare = subject / "evals" / "compare.yaml"
    compare.write_text(compare.read_text().replace("{evals}/agent.py", "{evals}/agent\\0.py"))

    code, out, err = call_cli(["compare", str(subject), "-j", "2", "--case", "build"], capsys)

    assert code == 0, err
    assert "Traceback" not in err
    assert out.splitlines()[1].startswith("BROKEN SETUP: every arm run died")
    assert "embedded null byte" in out.splitlines()[1]


def test_a_trigger_selector_that_fails_every_call_is_a_broken_setup(
    tmp_path: Path, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    library = make_library(tmp_path, selector=[str(tmp_path / "no-such-selector")])

    code, out, err = call_cli(["compare", str(library), "--gate"], capsys)

    assert code == 1
    broken = next(line for line in out.splitlines() if line.startswith("BROKEN SETUP"))
    assert broken.startswith(
        "BROKEN SETUP: every trigger probe errored, so recall and precision measure nothing "
        "(4 of 4: 4 errored); first error: cannot start selector"
    )
    assert broken in err
    assert only_receipt(home)["broken_setup"] == ["triggers"]


def test_a_check_command_that_cannot_run_in_any_arm_is_a_broken_setup(
    home: Path, subject: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    case = subject / "evals" / "cases" / "build.yaml"
    case.write_text(case.read_text() + "  - command_succeeds: trialrun-no-such-tool --version\n")

    code, out, err = call_cli(
        ["compare", str(subject), "-j", "2", "--gate", "--case", "build"], capsys
    )

    assert code == 1  # every arm failed the check alike: ties, which used to pass the gate
    lines = out.splitlines()
    assert lines[0] == "verdict: NEUTRAL"
    assert lines[1].startswith(
        "BROKEN SETUP: a command_succeeds check could not run in any arm, so it fails every arm "
        "alike and decides nothing (build: command_succeeds: trialrun-no-such-tool --version; "
        "6 of 6: 6 could-not-run); first error: exit 127: "
    )
    assert "command not found" in lines[1]
    assert lines[1] in err
    receipt = only_receipt(home)
    assert receipt["broken_setup"] == ["checks"]
    assert receipt["command_health"]["checks"]["never_ran"] == [
        "build: command_succeeds: trialrun-no-such-tool --version"
    ]


def test_a_setup_that_fails_in_every_arm_is_a_broken_setup(
    home: Path, subject: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    case = subject / "evals" / "cases" / "build.yaml"
    case.write_text(case.read_text() + "setup: trialrun-no-such-tool init\n")

    code, out, err = call_cli(
        ["compare", str(subject), "--gate", "--case", "build", "--k", "1"], capsys
    )

    assert code == 1
    broken = out.splitlines()[1]
    assert broken.startswith("BROKEN SETUP: every arm run died (its setup or agent command failed)")
    assert "(3 of 3: 3 failed); first error: setup of build failed in " in broken
    assert broken in err
    assert only_receipt(home)["broken_setup"] == ["agent"]
