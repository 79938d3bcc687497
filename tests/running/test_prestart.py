"""Pre-started agents: each case's agent starts while the case before it runs.

The real CLI runs a suite of ``tests/agents/prestart_agent.py``, which records when each agent
(the Nth of the run) started and every helper process it left behind, so the tests can prove
that pre-starting overlaps, that deadlines exclude the head start, that results do not depend on
it, and that no agent, pre-started or not, outlives its run.
"""

from __future__ import annotations

import importlib.util
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import hypothesis
import pytest
from hypothesis import strategies as st

from builders import HANG_GUARD_S, only_run_dir, run_trialrun, write_suite
from paths import AGENTS_DIR
from processes import process_gone

AGENT = AGENTS_DIR / "prestart_agent.py"
VOLATILE = {"wall_ms", "startup_ms", "timestamp", "duration_ms", "generated_at", "finished_at"}
TIMING_DETAIL = {"failure_reason", "message"}


def make_suite(
    root: Path,
    cases: dict[str, dict[str, Any]],
    *,
    plan: dict[int, dict[str, Any]] | None = None,
    extra: str = "",
) -> tuple[Path, Path]:
    """A suite whose cases have ``cases[id]`` as input; returns (suite dir, agent state dir)."""
    state = root / "state"
    state.mkdir(parents=True)
    if plan is not None:
        (state / "plan.json").write_text(json.dumps({str(n): p for n, p in plan.items()}))
    suite_cases: dict[str, dict[str, Any]] = {}
    cassettes = {}
    for case_id, given in cases.items():
        budgets = given.pop("budgets", None)
        case: dict[str, Any] = {
            "input": {"case": case_id, **given},
            "cassette": f"cassettes/{case_id}.jsonl",
        }
        if budgets is not None:
            case["budgets"] = budgets
        suite_cases[case_id] = case
        recording = {"tool": "lookup", "args": {"q": case_id}, "ok": True, "result": case_id}
        cassettes[f"{case_id}.jsonl"] = json.dumps(recording) + "\n"
    suite = write_suite(
        root,
        name="pre",
        agent=[sys.executable, AGENT, state],
        tools=["lookup"],
        cases=suite_cases,
        cassettes=cassettes,
        settings="kill_grace_ms: 200\n"
        "assertions:\n  - type: required_fields\n    fields: [case, hit]\n" + extra,
    )
    return suite, state


def trialrun(suite: Path, out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_trialrun("run", suite, "--out", out, "--no-baseline", *args, cwd=suite.parent)


def summary_of(out: Path) -> dict[str, Any]:
    return dict(json.loads((only_run_dir(out) / "summary.json").read_text(encoding="utf-8")))


def started_agents(state: Path) -> dict[int, tuple[int, int]]:
    """Agent number -> (pid, agents starting or running when it started, itself included)."""
    agents = {}
    for path in state.glob("started.*"):
        pid, *busy = path.read_text().split()  # an agent killed at once may not count
        agents[int(path.name.split(".")[1])] = (int(pid), int(busy[0]) if busy else 0)
    return agents


def processes_left(state: Path) -> list[str]:
    """Every agent and helper of the run that still runs."""
    pids = [pid for pid, _ in started_agents(state).values()]
    pids += [int(path.read_text()) for path in state.glob("child.*")]
    return [f"pid {pid}: {described(pid)}" for pid in pids if not process_gone(pid)]


def described(pid: int) -> str:
    """A leftover's command line, state and parent, so that a leak names what leaked."""
    proc = Path(f"/proc/{pid}")
    try:
        command = proc.joinpath("cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
        fields = proc.joinpath("stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return "gone while described"
    return f"{command} (state {fields[0]}, parent {fields[1]}, group {fields[2]})"


def without_volatile(value: Any) -> Any:
    """``value`` without timings, and without the detail of a crash that depends on timing.

    An agent that dies while loading its imports has not read its ``task_start``; whether the
    runner can still tell (on stdio: it died before the message was written) depends on how
    soon it was started, so the failure says so only sometimes, after a ``;``.
    """
    if isinstance(value, dict):
        return {
            k: without_volatile(v.split(";")[0] if k in TIMING_DETAIL and v else v)
            for k, v in value.items()
            if k not in VOLATILE
        }
    if isinstance(value, list):
        return [without_volatile(v) for v in value]
    return value


def first_difference(with_prestart: Any, without: Any) -> str:
    """Where two lists (or values) first differ, shortly: a full diff of 30 events is cut off."""
    if isinstance(with_prestart, list) and isinstance(without, list):
        for index, (on, off) in enumerate(zip(with_prestart, without, strict=False)):
            if on != off:
                return f"item {index}: with prestart {on!r}, without {off!r}"
        return f"{len(with_prestart)} items with prestart, {len(without)} without"
    return f"with prestart {with_prestart!r}, without {without!r}"


RESERVED_PIDS = 300  # where Linux starts again after pid_max - 1


def _load_spawn_order() -> Any:
    """The fake agents' helper module (tests/agents/ is no package: "agents" is the OpenAI
    Agents SDK's name)."""
    spec = importlib.util.spec_from_file_location("_spawn_order", AGENT.parent / "_spawn_order.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SPAWN_ORDER = _load_spawn_order()


@hypothesis.given(
    pid_max=st.sampled_from([32768, 4194304]),
    first=st.integers(min_value=RESERVED_PIDS, max_value=4194303),
    gaps=st.lists(st.integers(min_value=1, max_value=2000), min_size=1, max_size=7),
    ticks=st.lists(st.integers(min_value=0, max_value=2), min_size=7, max_size=7),
)
def test_agents_number_themselves_in_spawn_order_across_a_pid_wrap_around(
    pid_max: int, first: int, gaps: list[int], ticks: list[int]
) -> None:
    # Pids are handed out in spawn order but start again at 300 after pid_max - 1; start times
    # (clock ticks) never go back, and agents spawned within one tick share it.
    pids, starts = [RESERVED_PIDS + (first - RESERVED_PIDS) % (pid_max - RESERVED_PIDS)], [1000]
    for gap, tick in zip(gaps, ticks, strict=False):
        following = pids[-1] + gap
        if following >= pid_max:
            following = RESERVED_PIDS + following - pid_max
        pids.append(following)
        starts.append(starts[-1] + tick)
    spawned = dict(zip(pids, starts, strict=True))
    # tests/agents/ is no package: "agents" is the OpenAI Agents SDK's name.
    spec = importlib.util.spec_from_file_location("_spawn_order", AGENT.parent / "_spawn_order.py")
    assert spec is not None and spec.loader is not None
    order = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(order)
    assert [order.spawn_number(pid, spawned, pid_max) for pid in pids] == list(
        range(1, len(pids) + 1)
    )


@pytest.mark.slow
def test_the_next_agent_starts_while_a_case_runs_and_its_head_start_is_not_charged(
    tmp_path: Path,
) -> None:
    # Case a can only finish once agent 2 has finished its 2 s start-up: that start-up must
    # overlap case a. Case b's 1.5 s wall budget counts from its task_start, so it passes; what
    # it does after its task_start (one tool call) has the rest of the budget to spare on a busy
    # machine.
    suite, state = make_suite(
        tmp_path,
        {"a": {"wait_for": "ready.2"}, "b": {"budgets": {"max_wall_ms": 1500}}},
        plan={2: {"startup_s": 2.0}},
    )
    done = trialrun(suite, tmp_path / "out")

    assert done.returncode == 0, done.stdout + done.stderr
    a, b = summary_of(tmp_path / "out")["cases"]
    assert (a["status"], b["status"]) == ("pass", "pass")
    assert b["startup_ms"] >= 2000  # its head start, longer than its budget, is reported apart
    assert b["wall_ms"] < 1500
    assert processes_left(state) == []
    receipt = (only_run_dir(tmp_path / "out") / "receipt.jsonl").read_text().splitlines()
    ends = [json.loads(line)["data"] for line in receipt if '"case_end"' in line]
    assert [end["startupMs"] >= 2000 for end in ends] == [False, True]


@pytest.mark.parametrize("jobs", ["1", "2"])
@pytest.mark.slow
def test_results_and_artifacts_do_not_depend_on_prestart(tmp_path: Path, jobs: str) -> None:
    cases: dict[str, dict[str, Any]] = {
        "a": {},
        "b": {"crash": True},
        "c": {},
        "d": {"sleep_s": 0.1},
        "e": {},
    }
    plan = {3: {"crash": True}}  # agent 3 (case c) dies before its task_start
    runs = {}
    for prestart in ("true", "false"):
        root = tmp_path / prestart
        suite, state = make_suite(
            root, {k: dict(v) for k, v in cases.items()}, plan=plan, extra=f"prestart: {prestart}\n"
        )  # fmt: skip
        done = trialrun(suite, root / "out", "-j", jobs)
        assert done.returncode == 1, done.stdout + done.stderr
        assert "Traceback" not in done.stderr
        assert processes_left(state) == []
        folder = only_run_dir(root / "out")
        events = [json.loads(line) for line in (folder / "run.jsonl").read_text().splitlines()]
        summary = summary_of(root / "out")
        runs[prestart] = (
            without_volatile(summary["cases"]),
            without_volatile(summary["aggregates"]["cases_pass"]),
            without_volatile(events),
            done.stdout.split("\n\n")[0].splitlines()[-1],  # "3 passed, 0 failed, ..."
        )
    parts = ("summary cases", "pass counts", "run.jsonl events", "report line")
    for part, with_prestart, without in zip(parts, runs["true"], runs["false"], strict=True):
        assert with_prestart == without, f"{part}: {first_difference(with_prestart, without)}"
    statuses = [(c["id"], c["status"], c.get("failure_kind")) for c in runs["true"][0]]
    assert statuses == [
        ("a", "pass", None),
        ("b", "error", "agent_crashed"),
        ("c", "error", "agent_crashed"),
        ("d", "pass", None),
        ("e", "pass", None),
    ]
    c_case = runs["true"][0][2]
    assert c_case["failure_reason"].startswith("Agent exited with code 3 before sending final_")
    assert "crashing before task_start" in c_case["stderr_tail"]


def test_at_most_jobs_plus_one_agents_start_or_run_at_once(tmp_path: Path) -> None:
    cases = {f"c{i}": {"sleep_s": 0.2} for i in range(6)}
    suite, state = make_suite(tmp_path, cases)
    done = trialrun(suite, tmp_path / "out", "-j", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    agents = started_agents(state)
    assert sorted(agents) == list(range(1, 7))
    assert max(busy for _, busy in agents.values()) <= 3
    assert processes_left(state) == []


def test_only_the_selected_cases_ever_start_an_agent(tmp_path: Path) -> None:
    suite, state = make_suite(tmp_path, {"a": {}, "b": {}, "c": {}})
    done = trialrun(suite, tmp_path / "out", "--case", "b")
    assert done.returncode == 0, done.stdout + done.stderr
    assert [c["id"] for c in summary_of(tmp_path / "out")["cases"]] == ["b"]
    assert sorted(started_agents(state)) == [1]
    assert processes_left(state) == []


def test_an_interrupted_run_stops_the_prestarted_agent_too(tmp_path: Path) -> None:
    suite, state = make_suite(tmp_path, {"a": {"hang": True}, "b": {}, "c": {}})
    proc = subprocess.Popen(
        [sys.executable, "-m", "trialrun", "run", str(suite), "--out", str(tmp_path / "out")],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # Both agents must have numbered themselves: on a loaded machine case a's agent may still be
    # loading Python when case b's is pre-started, and an agent killed then leaves no record.
    wanted = [state / "child.1", state / "child.2"]
    deadline = time.monotonic() + 30
    while not all(path.exists() for path in wanted) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(path.exists() for path in wanted), "case a's or case b's agent never started"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=HANG_GUARD_S)

    assert proc.returncode == 130, out + err
    assert "Traceback" not in err
    assert sorted(started_agents(state)) == [1, 2]  # case c's agent never started
    assert processes_left(state) == []
    assert summary_of(tmp_path / "out")["run"]["interrupted"] is True


def test_without_prestart_one_agent_at_a_time(tmp_path: Path) -> None:
    suite, state = make_suite(
        tmp_path, {"a": {"sleep_s": 0.3}, "b": {}, "c": {}}, extra="prestart: false\n"
    )
    done = trialrun(suite, tmp_path / "out")
    assert done.returncode == 0, done.stdout + done.stderr
    assert [busy for _, busy in sorted(started_agents(state).values())] == [1, 1, 1]
    assert processes_left(state) == []


def test_record_mode_does_not_prestart_unless_asked(tmp_path: Path) -> None:
    from trialrun.config import load_suite
    from trialrun.running.runner import prestarts

    suite_dir, _ = make_suite(tmp_path, {"a": {}})
    suite = load_suite(suite_dir)
    assert [prestarts(suite, mode) for mode in ("replay", "record", "live")] == [True, False, False]
    text = (suite_dir / "suite.yaml").read_text()
    (suite_dir / "suite.yaml").write_text(text + "prestart: true\n")
    forced = load_suite(suite_dir)
    assert [prestarts(forced, mode) for mode in ("replay", "record", "live")] == [True] * 3


def test_cases_are_announced_as_decided_and_recorded_in_case_order(tmp_path: Path) -> None:
    import asyncio

    from trialrun.config import load_suite
    from trialrun.running.runner import RunOptions, RunProgress, run_suite

    # Case a_slow ends only once case b_fast was decided, however the two agents are scheduled.
    suite_dir, state = make_suite(
        tmp_path, {"a_slow": {"wait_for": "decided.b_fast"}, "b_fast": {}}
    )
    decided: list[str] = []
    recorded: list[str] = []

    def decide(result: Any) -> None:
        decided.append(result.case_id)
        (state / f"decided.{result.case_id}").write_text("")

    results = asyncio.run(
        run_suite(
            load_suite(suite_dir),
            RunOptions(mode="replay", jobs=2),
            RunProgress(),
            on_case_done=lambda _i, result: recorded.append(result.case_id),
            on_case_decided=lambda _i, result: decide(result),
        )
    )
    assert [r.case_id for r in results] == recorded == ["a_slow", "b_fast"]
    assert decided == ["b_fast", "a_slow"]
    assert processes_left(state) == []


def test_the_first_agent_is_announced_once_as_soon_as_it_is_starting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio
    import subprocess

    from trialrun.config import load_suite
    from trialrun.running.runner import RunOptions, RunProgress, run_suite

    suite_dir, state = make_suite(tmp_path, {"a": {}, "b": {}, "c": {}})
    events: list[str] = []
    spawn = subprocess.Popen.__init__

    def noting(self: Any, args: Any, *rest: Any, **options: Any) -> None:
        events.append("spawn")
        spawn(self, args, *rest, **options)

    monkeypatch.setattr(subprocess.Popen, "__init__", noting)
    asyncio.run(
        run_suite(
            load_suite(suite_dir),
            RunOptions(mode="replay", jobs=2),
            RunProgress(),
            on_case_done=lambda _i, _result: events.append("done"),
            on_first_agent=lambda: events.append("first agent"),
        )
    )
    assert events.count("first agent") == 1
    announced = events.index("first agent")
    # After the first spawn (the cases prepared meanwhile started theirs), before any case ends.
    assert events[:announced] == ["spawn"] * announced and 1 <= announced <= 3
    assert events.count("done") == 3
    assert processes_left(state) == []
