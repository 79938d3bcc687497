"""Arms of trialrun compare: the seeded plan, sandboxes, staging, retries, timeouts, run_all."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from paths import COMPARE_AGENTS_DIR
from trialrun.compare.arms import (
    ArmName,
    ArmRun,
    ArmSpec,
    arm_specs,
    plan_runs,
    run_all,
    run_arm,
)
from trialrun.compare.config import CaseConfig, CompareCase, EvalAssets, load_eval_assets
from trialrun.compare.observer import NullObserver
from trialrun.compare.placeholders import expand
from trialrun.compare.sandbox import stage_subject
from trialrun.errors import ConfigError

AGENT = COMPARE_AGENTS_DIR / "scripted.py"
ARMS3 = [ArmSpec("baseline", None), ArmSpec("candidate", None), ArmSpec("incumbent", None)]


def _compare_yaml(extra: str = "") -> str:
    command = json.dumps([sys.executable, str(AGENT), "{task}", "at {sandbox}", "{evals}/{name}"])
    return f"name: my-skill\nagent:\n  command: {command}\n{extra}"


def _subject(root: Path, files: dict[str, str], compare_extra: str = "") -> Path:
    subject = root / "subject"
    everything = {
        "SKILL.md": "# my skill\n",
        "docs/evals/keep.md": "nested evals/ is not the answer key\n",
        "fixtures/secret.txt": "answer key\n",
        "evals/compare.yaml": _compare_yaml(compare_extra),
        **files,
    }
    for relpath, text in everything.items():
        (subject / relpath).parent.mkdir(parents=True, exist_ok=True)
        (subject / relpath).write_text(text)
    return subject


def _case(task_plan: Mapping[str, object], extra: str = "", task: str = "Do it") -> str:
    lines = json.dumps(f"{task}\n#agent {json.dumps(task_plan)}")
    return f"task: {lines}\n{extra}"


def _assets(
    tmp_path: Path, cases: dict[str, str], more: dict[str, str] | None = None, x: str = ""
) -> EvalAssets:
    files = {f"evals/cases/{name}.yaml": text for name, text in cases.items()}
    return load_eval_assets(_subject(tmp_path, files | (more or {}), x))


def _run(assets: EvalAssets, arm: ArmName, workdir: Path, *, timeout_s: float = 20.0) -> ArmRun:
    specs = {spec.name: spec for spec in arm_specs(assets, assets.subject)}
    planned = plan_runs(assets.cases, 1, list(specs.values()), seed=0)[0]
    return asyncio.run(run_arm(planned, specs[arm], assets, workdir=workdir, timeout_s=timeout_s))


# -- planning ---------------------------------------------------------------------------------


@given(seed=st.integers(min_value=0, max_value=2**32), k=st.integers(min_value=1, max_value=4))
def test_plan_is_a_deterministic_permutation_per_case_and_rep(seed: int, k: int) -> None:
    cases = [_unit(f"c{i}") for i in range(3)]
    first = plan_runs(cases, k, ARMS3, seed)
    again = plan_runs(cases, k, ARMS3, seed)
    assert first == again
    assert [(p.case, p.rep) for p in first] == [(f"c{i}", r) for i in range(3) for r in range(k)]
    for planned in first:
        assert sorted(planned.arm_order) == ["baseline", "candidate", "incumbent"]


def test_plan_order_depends_on_the_seed_and_is_recorded(tmp_path: Path) -> None:
    cases = [_unit(f"c{i}") for i in range(10)]
    orders = {seed: [p.arm_order for p in plan_runs(cases, 1, ARMS3, seed)] for seed in (1, 2)}
    assert orders[1] != orders[2]
    assert len(set(orders[1])) > 1, "a seeded shuffle, not one fixed order for every case"


def test_plan_names_the_session_and_refuses_a_clash(tmp_path: Path) -> None:
    session = "task: chores\ncases:\n  - name: one\n    checks:\n      - file_exists: one.txt\n"
    assets = _assets(tmp_path, {"alpha": _case({})}, more={"evals/session.yaml": session})
    assert assets.session is not None
    planned = plan_runs([*assets.cases, assets.session], 2, ARMS3[:2], seed=3)
    assert [(p.case, p.rep) for p in planned] == [
        ("alpha", 0),
        ("alpha", 1),
        ("session", 0),
        ("session", 1),
    ]
    with pytest.raises(ConfigError, match="share the name 'alpha'"):
        plan_runs([assets.cases[0], assets.cases[0]], 1, ARMS3, seed=0)
    with pytest.raises(ValueError, match="k must be at least 1, found 0"):
        plan_runs(assets.cases, 0, ARMS3, seed=0)


def test_arm_specs_two_or_three_arms_and_version_without_a_team(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRIALRUN_HOME", str(tmp_path / "home"))
    assets = _assets(tmp_path / "a", {"alpha": _case({})})
    assert [(s.name, s.subject) for s in arm_specs(assets, assets.subject)] == [
        ("baseline", None),
        ("candidate", assets.subject),
    ]
    with_path = _assets(
        tmp_path / "b",
        {"alpha": _case({})},
        more={"evals/old/SKILL.md": "old\n"},
        x="arms:\n  incumbent:\n    path: old\n",
    )
    assert arm_specs(with_path, with_path.subject)[-1] == ArmSpec(
        "incumbent", with_path.subject / "evals/old"
    )
    by_version = _assets(
        tmp_path / "c", {"alpha": _case({})}, x="arms:\n  incumbent:\n    version: 3\n"
    )
    with pytest.raises(ConfigError, match=r"version '3' is looked up in the team store.*an id"):
        arm_specs(by_version, by_version.subject)


@given(text=st.text())
def test_placeholders_are_substituted_once(text: str) -> None:
    values = {"task": text, "sandbox": "/s b", "evals": "/e", "name": "n"}
    assert expand("{task}", values) == text
    assert expand("-{sandbox}-{name}-{{x}}", values) == "-/s b-n-{x}"


# -- one arm ----------------------------------------------------------------------------------


def test_candidate_sandbox_fixture_files_staging_and_placeholders(tmp_path: Path) -> None:
    case = _case(
        {"record": "seen.json", "run": ["echo hi"], "say": "all done"},
        'fixture: ../fixtures/repo\nfiles:\n  run.sh: "echo x"\n  bin/tool: "t"\n  a/b.txt: "b"\n',
        task="Fix it, 'quoted' & spaced {sandbox}",
    )
    assets = _assets(
        tmp_path,
        {"alpha": case},
        more={"evals/fixtures/repo/app.py": "x = 1\n", "evals/agent.json": "{}"},
    )
    workdir = tmp_path / "work dir"
    result = _run(assets, "candidate", workdir)
    sandbox = workdir / "alpha" / "0" / "candidate"
    assert (result.status, result.attempts, result.exit_code, result.sandbox) == (
        "ok",
        1,
        0,
        sandbox,
    )
    assert result.error is None
    seen = json.loads((sandbox / "seen.json").read_text())
    task = "Fix it, 'quoted' & spaced {sandbox}"
    assert seen["argv"][1].startswith(task + "\n#agent ")
    assert seen["argv"][2:] == [f"at {sandbox.resolve()}", f"{assets.evals_dir}/my-skill"]
    assert seen["rep"] == "0" and seen["cwd"] == str(sandbox.resolve())
    assert seen["staged"] == [
        ".claude/skills/my-skill/SKILL.md",
        ".claude/skills/my-skill/docs/evals/keep.md",
    ]
    assert (sandbox / "app.py").read_text() == "x = 1\n"
    assert (sandbox / "a/b.txt").read_text() == "b"
    assert stat.S_IMODE((sandbox / "run.sh").stat().st_mode) == 0o755
    assert stat.S_IMODE((sandbox / "bin/tool").stat().st_mode) == 0o755
    assert not (sandbox / "a/b.txt").stat().st_mode & stat.S_IXUSR
    events = [json.loads(line) for line in result.transcript.splitlines()]
    assert events[-1]["type"] == "result" and events[-1]["result"] == "all done"
    assert any(e["type"] == "assistant" and "echo hi" in json.dumps(e) for e in events)


def test_baseline_stages_nothing_and_setup_runs_first(tmp_path: Path) -> None:
    case = _case({"record": "seen.json"}, "setup: echo ready > ready.txt\n")
    assets = _assets(tmp_path, {"alpha": case})
    result = _run(assets, "baseline", tmp_path / "work")
    assert result.status == "ok"
    assert json.loads((result.sandbox / "seen.json").read_text())["staged"] == []
    assert (result.sandbox / "ready.txt").read_text() == "ready\n"


def test_staged_skill_changes_behaviour(tmp_path: Path) -> None:
    assets = _assets(
        tmp_path, {"alpha": _case({"say": "plain"})}, more={"agent.json": '{"say": "skilled"}'}
    )
    base = _run(assets, "baseline", tmp_path / "work")
    cand = _run(assets, "candidate", tmp_path / "work")
    assert '"result": "plain"' in base.transcript
    assert '"result": "skilled"' in cand.transcript


def test_non_zero_exit_gets_one_retry_in_a_fresh_sandbox(tmp_path: Path) -> None:
    assets = _assets(tmp_path, {"alpha": _case({"fail_first": 3, "write": {"out.txt": "x"}})})
    result = _run(assets, "baseline", tmp_path / "work")
    first = tmp_path / "work" / "alpha" / "0" / "baseline"
    assert (result.status, result.attempts, result.exit_code) == ("ok", 2, 0)
    assert result.sandbox == first.with_name("baseline.retry")
    assert (result.sandbox / "out.txt").exists() and not (first / "out.txt").exists()


def test_failing_twice_is_a_failed_arm_with_the_reason(tmp_path: Path) -> None:
    assets = _assets(tmp_path, {"alpha": _case({"exit": 4})})
    result = _run(assets, "baseline", tmp_path / "work")
    assert (result.status, result.attempts, result.exit_code) == ("failed", 2, 4)
    assert result.error is not None and "exited with code 4 (expected 0)" in result.error
    assert '"type": "result"' in result.transcript, "the last attempt's transcript is kept"


def test_timeout_kills_the_group_and_is_not_retried(tmp_path: Path) -> None:
    assets = _assets(tmp_path, {"alpha": _case({"spawn": 60, "sleep": 60})})
    started = time.monotonic()
    result = _run(assets, "baseline", tmp_path / "work", timeout_s=1.0)
    # The agent and its child would run 60 s: half of that is room for any load, and no wait
    # for them to end by themselves.
    assert time.monotonic() - started < 30
    assert (result.status, result.attempts, result.exit_code) == ("timeout", 1, None)
    assert result.error is not None and "timed out after 1s" in result.error
    assert not result.sandbox.with_name("baseline.retry").exists()
    child = int((result.sandbox / "child.pid").read_text())
    assert not _alive(child), "the agent's background child must die with its group"


def test_setup_failure_is_failed_without_retry(tmp_path: Path) -> None:
    assets = _assets(tmp_path, {"alpha": _case({}, "setup: echo broken >&2; exit 7\n")})
    result = _run(assets, "baseline", tmp_path / "work")
    assert (result.status, result.attempts, result.exit_code) == ("failed", 0, None)
    assert result.error is not None
    assert "setup of alpha failed" in result.error and "code 7" in result.error
    assert "broken" in result.error


def test_missing_agent_program_is_failed_without_retry(tmp_path: Path) -> None:
    subject = _subject(tmp_path, {"evals/cases/alpha.yaml": _case({})})
    (subject / "evals/compare.yaml").write_text(
        'name: s\nagent:\n  command: ["/no/such/agent", "{task}"]\n'
    )
    result = _run(load_eval_assets(subject), "baseline", tmp_path / "work")
    assert (result.status, result.attempts) == ("failed", 0)
    assert result.error is not None and "could not start the agent command" in result.error


def test_fixture_symlink_cannot_redirect_writes_outside(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    case = _case({}, 'fixture: ../fixtures/fx\nfiles:\n  out/x.txt: "x"\n')
    assets = _assets(tmp_path, {"alpha": case}, more={"evals/fixtures/fx/keep": ""})
    (assets.evals_dir / "fixtures/fx/out").symlink_to(outside)
    result = _run(assets, "baseline", tmp_path / "work")
    assert result.status == "failed" and result.attempts == 0
    assert result.error is not None and "outside the sandbox" in result.error
    assert list(outside.iterdir()) == []


def test_staging_skips_a_workdir_kept_inside_the_subject(tmp_path: Path) -> None:
    subject = _subject(tmp_path, {"evals/cases/alpha.yaml": _case({})})
    workdir = subject / ".runs"
    (workdir / "old").mkdir(parents=True)
    (workdir / "old" / "f").write_text("x")
    stage_subject(subject, workdir / "s" / "staged", exclude=workdir)
    staged = sorted(p.relative_to(workdir / "s" / "staged").as_posix() for p in _files(workdir))
    assert "SKILL.md" in staged and not any(p.startswith(".runs") for p in staged)
    assert not any(p.startswith(("evals", "fixtures")) for p in staged)


# -- run_all ----------------------------------------------------------------------------------


@pytest.mark.slow
def test_run_all_results_follow_the_plan_whatever_the_concurrency(tmp_path: Path) -> None:
    # Reps finish in reverse: rep 0 sleeps longest, so completion order differs from plan order.
    plan = {"by_rep": {"0": {"sleep": 0.6}, "1": {"sleep": 0.3}}}
    assets = _assets(tmp_path, {"alpha": _case(plan), "beta": _case({})})
    arms = arm_specs(assets, assets.subject)
    planned = plan_runs(assets.cases, 3, arms, seed=11)
    expected = [(p.case, p.rep, a) for p in planned for a in p.arm_order]
    for jobs in (1, 6):
        delivered: list[ArmRun] = []
        results = asyncio.run(
            run_all(
                planned,
                arms,
                assets,
                jobs=jobs,
                workdir=tmp_path / f"w{jobs}",
                on_done=delivered.append,
            )
        )
        assert [(r.case, r.rep, r.arm) for r in results] == expected
        assert delivered == results
        assert all(r.status == "ok" for r in results)


def test_cancelling_run_all_kills_running_arms_and_delivers_finished_ones(tmp_path: Path) -> None:
    hang = {"write": {"done.txt": "x"}, "by_rep": {"1": {"spawn": 60, "sleep": 60}}}
    assets = _assets(tmp_path, {"alpha": _case(hang)})
    arms = arm_specs(assets, assets.subject)[:1]
    planned = plan_runs(assets.cases, 3, arms, seed=0)
    delivered: list[ArmRun] = []
    finished = FinishedArms()

    async def interrupted() -> None:
        task = asyncio.ensure_future(
            run_all(
                planned,
                arms,
                assets,
                jobs=3,
                workdir=tmp_path / "w",
                on_done=delivered.append,
                observer=finished,
            )
        )
        child_pid = tmp_path / "w" / "alpha" / "1" / "baseline" / "child.pid"
        # Cancel once reps 0 and 2 finished and rep 1 runs with its child; the bound is
        # generous: it only limits how long a broken run takes to fail.
        deadline = time.monotonic() + 60
        while not (child_pid.exists() and finished.reps == {0, 2}) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(interrupted())
    assert [(r.case, r.rep) for r in delivered] == [("alpha", 0), ("alpha", 2)]
    child = int((tmp_path / "w" / "alpha" / "1" / "baseline" / "child.pid").read_text())
    assert not _alive(child)


def test_run_all_refuses_zero_jobs(tmp_path: Path) -> None:
    assets = _assets(tmp_path, {"alpha": _case({})})
    with pytest.raises(ValueError, match="jobs must be at least 1"):
        asyncio.run(run_all([], [], assets, jobs=0, workdir=tmp_path))


# -- helpers ----------------------------------------------------------------------------------


def _unit(name: str) -> CompareCase:
    return CompareCase(name, Path(f"{name}.yaml"), CaseConfig(task="t"), (), None)


class FinishedArms(NullObserver):
    """The reps whose arms have finished, as run_all reports them."""

    def __init__(self) -> None:
        self.reps: set[int] = set()

    def arm_finished(self, case: str, rep: int, arm: str, status: str, duration_s: float) -> None:
        self.reps.add(rep)


def _alive(pid: int) -> bool:
    deadline = time.monotonic() + 30  # a dead process answers at once; this bounds a leak only
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        if Path(f"/proc/{pid}/stat").exists() and ") Z " in Path(f"/proc/{pid}/stat").read_text():
            return False  # a zombie waiting for init to reap it is dead
        time.sleep(0.05)
    return True


def _files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and "staged" in p.parts]
