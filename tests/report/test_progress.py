"""Progress of ``trialrun run`` and ``trialrun compare`` on stderr (issue 18).

Three modes: a live line on a terminal (driven here through a pseudo-terminal), one plain line per
finished case or unit otherwise, nothing with ``--quiet``. The report on stdout is the same in
all three, and the CLI imports rich only when it draws a live line.
"""

from __future__ import annotations

import fcntl
import io
import os
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from builders import HANG_GUARD_S, write_suite
from builders import make_compare_subject as make_subject
from paths import BEHAVING_AGENT
from trialrun.report.progress import CompareTracker, RunTracker, format_duration
from trialrun.report.progress_display import progress_display

AGENT = BEHAVING_AGENT
CASSETTE = (
    '{"tool": "search_docs", "args": {"q": "reset password"}, "ok": true, "result": {"hits": []}}\n'
)
CASES = {"a_ok": "ok", "b_disallowed": "disallowed", "c_ok": "ok"}
ANSI_OR_CR = re.compile(r"\x1b|\r")


def make_suite(root: Path) -> Path:
    cases = {
        case_id: {
            "input": {"behaviour": behaviour, "ticket": "reset password"},
            "cassette": "cassettes/t.jsonl",
        }
        for case_id, behaviour in CASES.items()
    }
    return write_suite(
        root,
        name="progress",
        agent=[sys.executable, AGENT],
        tools=["search_docs"],
        cases=cases,
        cassettes={"t.jsonl": CASSETTE * 2},
        settings="idle_timeout_ms: 5000\n"
        "assertions:\n  - type: required_fields\n    fields: [category, reply]\n",
    )


def environment(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("GITHUB_")}
    env.update(TRIALRUN_HOME=str(tmp_path / "home"), TERM="xterm-256color", **extra)
    env.pop("NO_COLOR", None)
    # rich prefers COLUMNS to the terminal's own size: the pty's 200 columns must decide.
    env.pop("COLUMNS", None)
    env.pop("LINES", None)
    return env


def run_plain(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The CLI with stdout and stderr on pipes: no terminal anywhere."""
    command = [sys.executable, "-m", "trialrun", *args]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def run_on_terminal(
    args: list[str], cwd: Path, env: dict[str, str], interrupt_when: str | None = None
) -> tuple[int, str, str]:
    """The CLI with stderr on a pseudo-terminal, stdout on a pipe: (code, stdout, terminal).

    With ``interrupt_when``, Ctrl-C (SIGINT) is sent once the terminal showed that text.
    """
    master, slave = os.openpty()
    # 200 columns: rich cuts the line to the terminal's width (80 when the size is unknown).
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
    command = [sys.executable, "-m", "trialrun", *args]
    proc = subprocess.Popen(
        command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL
    )
    os.close(slave)
    seen = bytearray()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.1)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: every writer of the terminal is gone
                break
            if not chunk:
                break
            seen.extend(chunk)
            if interrupt_when is not None and interrupt_when.encode() in seen:
                proc.send_signal(signal.SIGINT)
                interrupt_when = None
        elif proc.poll() is not None:
            break
    os.close(master)
    assert proc.stdout is not None
    out = proc.stdout.read().decode()
    proc.stdout.close()
    code = proc.wait(timeout=HANG_GUARD_S)
    return code, out, seen.decode(errors="replace")


def same_report(text: str) -> str:
    """The report without what differs from run to run: run ids and wall times."""
    text = re.sub(r"\d{8}(T\d{6}Z|-\d{6}-\d+-\w+)", "<run>", text)
    return re.sub(r"(PASS|FAIL|ERROR) +\d+\n", r"\1 <ms>\n", text)


# ---- the CLI, end to end -------------------------------------------------------------------


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_suite(tmp_path_factory.mktemp("suite"))


def test_run_on_a_terminal_shows_a_live_line_with_done_of_total(
    suite: Path, tmp_path: Path
) -> None:
    code, out, terminal = run_on_terminal(
        ["run", str(suite), "--out", str(tmp_path / "out")], tmp_path, environment(tmp_path)
    )
    assert code == 1, out  # b_disallowed fails
    counts = r"\d+ passed, \d+ failed, \d+ errors?"
    assert re.search(rf"run: [0-3]/3 cases · {counts} · \d:\d\d elapsed", terminal)
    assert "\x1b[" in terminal  # drawn in place, not as log lines
    assert "[1/3]" not in terminal
    assert "a_ok" in out and "Artifacts written to:" in out


def test_run_in_a_log_prints_one_plain_line_per_case(suite: Path, tmp_path: Path) -> None:
    proc = run_plain(
        ["run", str(suite), "--out", str(tmp_path / "out")], tmp_path, environment(tmp_path)
    )
    progress = [line for line in proc.stderr.splitlines() if line.startswith("[")]
    assert [line.split()[:3] for line in progress] == [
        ["[1/3]", "pass", "a_ok"],
        ["[2/3]", "fail", "b_disallowed"],
        ["[3/3]", "pass", "c_ok"],
    ]
    assert "2 passed, 1 failed" in progress[-1]
    assert not ANSI_OR_CR.search(proc.stderr)


def test_run_quiet_shows_no_progress_and_the_same_report(suite: Path, tmp_path: Path) -> None:
    env = environment(tmp_path)
    loud = run_plain(["run", str(suite), "--out", str(tmp_path / "a")], tmp_path, env)
    quiet = run_plain(["run", str(suite), "--out", str(tmp_path / "a"), "-q"], tmp_path, env)
    _, on_terminal, _ = run_on_terminal(
        ["run", str(suite), "--out", str(tmp_path / "a")], tmp_path, env
    )
    assert quiet.stderr == ""
    assert "[1/3]" in loud.stderr
    assert same_report(quiet.stdout) == same_report(loud.stdout) == same_report(on_terminal)


def test_compare_on_a_terminal_names_the_running_arms(tmp_path: Path) -> None:
    subject = make_subject(tmp_path)
    # Each arm outlasts two redraws, so frames are drawn while arms run, however fast the machine.
    env = environment(tmp_path, SCRIPTED_ARM_SECONDS="0.6")
    code, out, terminal = run_on_terminal(
        ["compare", str(subject), "--no-commit", "-j", "2"], tmp_path, env
    )
    assert code == 0, terminal
    assert re.search(r"compare: units [0-6]/6 · arms \d+/18", terminal)
    # The arm's name may be cut with an ellipsis on a narrow terminal, never the case#rep.
    assert re.search(r"running: \w+#\d (baseline|candidate|incumbent|ba|ca|in)", terminal)
    assert out.startswith("verdict: PASS")


def test_compare_in_a_log_prints_a_line_per_unit_then_per_scored_unit(tmp_path: Path) -> None:
    subject = make_subject(tmp_path)
    env = environment(tmp_path)
    loud = run_plain(["compare", str(subject), "--no-commit", "-j", "2"], tmp_path, env)
    quiet = run_plain(["compare", str(subject), "--no-commit", "-j", "2", "-q"], tmp_path, env)
    units = [line for line in loud.stderr.splitlines() if line.startswith("[unit ")]
    scored = [line for line in loud.stderr.splitlines() if line.startswith("[scored ")]
    assert len(units) == len(scored) == 6  # 3 cases x k=2
    assert units[-1].startswith("[unit 6/6]") and "arms 18/18" in units[-1]
    assert all(line.count(" ok ") == 3 for line in units)  # three arms, all ok
    assert "W 3 L 2 T 7" in scored[-1] and "rows 12/12" in scored[-1]
    assert not ANSI_OR_CR.search(loud.stderr)
    assert not any(line.startswith("[") for line in quiet.stderr.splitlines())
    assert same_report(loud.stdout) == same_report(quiet.stdout)
    assert loud.stdout.startswith("verdict: PASS")


@pytest.mark.parametrize("args", [["--help"], ["run", "--help"], ["compare", "--help"]])
def test_help_does_not_import_rich(args: list[str]) -> None:
    probe = (
        "import sys\nfrom trialrun.cli import run_cli\n"
        f"code = run_cli({args!r})\nprint(code, 'rich' in sys.modules)\n"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert proc.stdout.strip().splitlines()[-1] == "0 False"


def test_a_run_logging_to_a_pipe_does_not_import_rich(suite: Path, tmp_path: Path) -> None:
    probe = (
        "import sys\nfrom trialrun.cli import run_cli\n"
        f"code = run_cli(['run', {str(suite)!r}, '--out', {str(tmp_path / 'out')!r}])\n"
        "print('rich loaded:', 'rich' in sys.modules)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=tmp_path, timeout=120
    )
    assert "[3/3]" in proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "rich loaded: False"


def test_ctrl_c_under_the_live_line_leaves_a_clean_terminal(tmp_path: Path) -> None:
    subject = make_subject(tmp_path)
    release = tmp_path / "release"  # never created: the explain arms wait until interrupted
    env = environment(tmp_path, SCRIPTED_WAIT_FOR=str(release))
    code, out, terminal = run_on_terminal(
        ["compare", str(subject), "--no-commit", "-j", "1"],
        tmp_path,
        env,
        interrupt_when="units 4/6",
    )
    assert code == 130, terminal
    assert out.startswith("verdict:")
    assert terminal.rstrip().endswith("Interrupted: the receipt records a partial run.")
    after_live = terminal.rsplit("\x1b[?25h", 1)[1]  # rich shows the cursor again when it stops
    assert "compare:" not in after_live and "receipt: " in after_live


def test_no_stderr_at_all_shows_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stderr", None)
    with progress_display(quiet=False) as display:
        tracker = RunTracker(display, total=1)
        tracker.start()
        tracker.case_done("one", "pass")
    assert type(display).__name__ == "ProgressDisplay"


# ---- the display chosen --------------------------------------------------------------------


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_dumb_terminal_gets_plain_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TERM", "dumb")
    stream = _Tty()
    with progress_display(quiet=False, stream=stream) as display:
        tracker = RunTracker(display, total=2)
        display.bind(tracker.status_line)
        tracker.start()
        tracker.case_done("one", "pass")
    assert stream.getvalue().startswith("[1/2] pass  one · 1 passed, 0 failed")
    assert "rich" not in type(display).__module__


def test_quiet_writes_nothing_even_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TERM", "xterm")
    stream = _Tty()
    with progress_display(quiet=True, stream=stream) as display:
        tracker = RunTracker(display, total=1)
        tracker.start()
        tracker.case_done("one", "fail")
    assert stream.getvalue() == ""


# ---- the trackers' words -------------------------------------------------------------------


class _Recorder:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.changes = 0

    def changed(self) -> None:
        self.changes += 1

    def finished(self, line: str) -> None:
        self.lines.append(line)


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_run_tracker_counts_and_estimates_the_rest_at_the_pace_so_far() -> None:
    display, clock = _Recorder(), _Clock()
    tracker = RunTracker(display, total=4, clock=clock)
    clock.now += 10
    tracker.case_done("a", "pass")
    clock.now += 10
    tracker.case_done("b", "error")
    assert display.lines == [
        "[1/4] pass  a · 1 passed, 0 failed, 0 errors · 0:10 elapsed · ETA 0:30",
        "[2/4] error b · 1 passed, 0 failed, 1 error · 0:20 elapsed · ETA 0:20",
    ]
    assert tracker.status_line() == (
        "run: 2/4 cases · 1 passed, 0 failed, 1 error · 0:20 elapsed · ETA 0:20"
    )
    tracker.case_done("c", "fail")
    assert display.lines[-1] == (
        "[3/4] fail  c · 1 passed, 1 failed, 1 error · 0:20 elapsed · ETA 0:07"
    )
    tracker.case_done("d", "flaky")  # counted apart, neither passed nor failed
    assert display.lines[-1] == (
        "[4/4] flaky d · 1 passed, 1 failed, 1 error, 1 flaky · 0:20 elapsed"
    )


def test_compare_tracker_reports_a_unit_once_all_its_arms_ended() -> None:
    display, clock = _Recorder(), _Clock()
    tracker = CompareTracker(display, clock=clock)
    tracker.arms_planned([("a", 0), ("b", 0)], ["baseline", "candidate"])
    for case, arm in (("a", "candidate"), ("b", "baseline"), ("a", "baseline")):
        tracker.arm_started(case, 0, arm)
    assert tracker.status_line().endswith(
        "arms 0/4 · 0:00 elapsed · 3 in setup or waiting for a slot"
    )
    for case, arm in (("a", "candidate"), ("b", "baseline"), ("a", "baseline")):
        tracker.agent_started(case, 0, arm)
    assert tracker.status_line().endswith("running: a#0 candidate, b#0 baseline, a#0 baseline")
    clock.now += 30
    tracker.arm_finished("a", 0, "candidate", "ok", 12.0)
    assert display.lines == []
    tracker.arm_finished("a", 0, "baseline", "timeout", 30.0)
    assert display.lines == [
        "[unit 1/2] a rep 0: candidate ok 12.0s, baseline timeout 30.0s"
        " · arms 2/4 · 0:30 elapsed · ETA 0:30"
    ]
    assert tracker.status_line().endswith("running: b#0 baseline")


def test_compare_tracker_tallies_rows_per_scored_unit() -> None:
    display, clock = _Recorder(), _Clock()
    tracker = CompareTracker(display, clock=clock)
    tracker.phase("scoring")
    tracker.rows_planned([("a", 0, "baseline"), ("a", 0, "incumbent"), ("b", 1, "baseline")])
    tracker.row_decided("a", 0, "incumbent", "tie", "judge-split")
    tracker.row_decided("b", 1, "baseline", "loss", "checks")
    tracker.row_decided("a", 0, "baseline", "win", "judge")
    assert [line.split(" · ")[0] for line in display.lines] == [
        "[scored 1/2] b rep 1: vs baseline loss (checks)",
        "[scored 2/2] a rep 0: vs incumbent tie (judge-split), vs baseline win (judge)",
    ]
    assert tracker.status_line() == "compare: scoring · rows 3/3 · W 1 L 1 T 1 · 0:00 elapsed"


def test_more_running_arms_than_shown_are_counted() -> None:
    tracker = CompareTracker(_Recorder())
    tracker.arms_planned([(name, 0) for name in "abcdef"], ["candidate"])
    for name in "abcdef":
        tracker.arm_started(name, 0, "candidate")
    for name in "abcde":
        tracker.agent_started(name, 0, "candidate")
    assert tracker.status_line().endswith(
        "running: a#0 candidate, b#0 candidate, c#0 candidate (+2 more)"
        " · 1 in setup or waiting for a slot"
    )


@pytest.mark.parametrize(
    ("seconds", "text"), [(0, "0:00"), (7.4, "0:07"), (750, "12:30"), (3723, "1:02:03")]
)
def test_durations_read_as_clock_time(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


def test_what_else_goes_to_stderr_under_a_live_line_prints_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TERM", "xterm")
    stream = _Tty()
    original = sys.stderr
    with progress_display(quiet=False, stream=stream) as display:
        tracker = RunTracker(display, total=2)
        display.bind(tracker.status_line)
        tracker.start()
        print("warning: a proxy said something", file=sys.stderr)
        tracker.case_done("one", "pass")
    assert sys.stderr is original
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", stream.getvalue())
    assert "warning: a proxy said something\n" in text.replace("\r", "\n")
    assert "run: " in text
