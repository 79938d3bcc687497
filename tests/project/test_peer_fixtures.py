"""Every RunLedger fixture suite gets the verdict the peer gave it.

The fixtures carry no agent code, so each test writes a small agent that does what the peer's agent
did (the tool call it made, the output it produced), lays the fixture out as the peer saw it in a
git repository, runs ``trialrun run`` in-process and compares with the peer's recorded results.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from builders import call_cli

AGENT_TEMPLATE = """\
import json, sys
CALLS = {calls!r}
OUTPUT = {output!r}
def send(m):
    sys.stdout.write(json.dumps(m) + "\\n"); sys.stdout.flush()
lines = iter(sys.stdin)
json.loads(next(lines))
for i, args in enumerate(CALLS):
    send({{"type": "tool_call", "name": "search_docs", "call_id": f"c{{i}}", "args": args}})
    json.loads(next(lines))
send({{"type": "final_output", "output": OUTPUT}})
"""

GOOD_OUTPUT = {"category": "account", "reply": "Reset password instructions sent."}


def write_agent(path: Path, calls: list[dict[str, Any]], output: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(AGENT_TEMPLATE.format(calls=calls, output=output), encoding="utf-8")


def as_repo(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest)
    subprocess.run(["git", "init", "-q", str(dest)], check=True)
    return dest


def python_on_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The fixtures name `python` / `python3`; point both at this interpreter."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("python", "python3"):
        (bin_dir / name).symlink_to(sys.executable)
    monkeypatch.setenv("PATH", f"{bin_dir}:{Path(sys.executable).parent}:/usr/bin:/bin")


def summary_of(out_dir: Path) -> dict[str, Any]:
    (summary,) = out_dir.glob("*/*/summary.json")
    return json.loads(summary.read_text(encoding="utf-8"))


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    python_on_path(monkeypatch, tmp_path)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    return tmp_path


def test_upstream_example_suite_passes_against_its_baseline(
    peer_fixtures: Path,
    env: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    repo = as_repo(peer_fixtures / "upstream", env / "repo")
    # Its wall gates allow 10% over the peer machine's 56 ms, which a loaded machine exceeds
    # whatever trialrun does: the baseline's times become generous, the gates still run.
    baseline = repo / "baselines/demo.json"
    baseline.write_text(json.dumps(_with_wall_ms(json.loads(baseline.read_text()), 60_000)))
    write_agent(repo / "examples/demo_agent_py/agent.py", [{"q": "reset login issue"}], GOOD_OUTPUT)
    monkeypatch.chdir(repo)  # its agent_command is relative to the repository root
    code, out, err = call_cli(["run", "examples/evals/demo", "--out", str(env / "out")], capsys)
    text = out + err
    assert code == 0, text
    summary = summary_of(env / "out")
    assert summary["run"]["exit_status"] == "success"
    assert summary["regression"]["passed"] is True
    checks = {c["id"]: c["status"] for c in summary["regression"]["checks"]}
    assert checks["max_avg_wall_ms_delta_pct"] == checks["max_p95_wall_ms_delta_pct"] == "pass"


def _with_wall_ms(value: Any, wall_ms: int) -> Any:
    """``value`` with every number under a ``wall_ms`` key (and in its statistics) set."""
    if isinstance(value, dict):
        return {
            k: _all_numbers(v, wall_ms) if k == "wall_ms" else _with_wall_ms(v, wall_ms)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_with_wall_ms(v, wall_ms) for v in value]
    return value


def _all_numbers(value: Any, number: int) -> Any:
    if isinstance(value, dict):
        return {k: _all_numbers(v, number) for k, v in value.items()}
    return number if isinstance(value, int | float) and not isinstance(value, bool) else value


@pytest.mark.parametrize("source", ["upstream/demo_repo", "generated-0.2.3/init-python"])
def test_demo_suites_pass(
    source: str,
    peer_fixtures: Path,
    env: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    repo = as_repo(peer_fixtures / source, env / "repo")
    write_agent(repo / "evals/demo/agent/agent.py", [{"q": "reset password"}], GOOD_OUTPUT)
    monkeypatch.chdir(repo)
    code, out, err = call_cli(["run", "evals/demo", "--out", str(env / "out")], capsys)
    text = out + err
    assert code == 0, text
    assert [c["status"] for c in summary_of(env / "out")["cases"]] == ["pass"]


@pytest.mark.parametrize(
    ("variant", "failure_kind"),
    [("regression-budget", "budget_exceeded"), ("regression-schema", "assertion_failed")],
)
def test_demo_repo_regression_variants_fail(
    variant: str,
    failure_kind: str,
    peer_fixtures: Path,
    env: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    repo = as_repo(peer_fixtures / "upstream/demo_repo", env / "repo")
    overlay = peer_fixtures / "upstream/demo_repo/regressions" / variant / "evals/demo"
    for file in overlay.rglob("*"):
        if file.is_file():
            shutil.copy(file, repo / "evals/demo" / file.relative_to(overlay))
    write_agent(repo / "evals/demo/agent/agent.py", [{"q": "reset password"}], GOOD_OUTPUT)
    monkeypatch.chdir(repo)
    code, out, err = call_cli(
        ["run", "evals/demo", "--no-baseline", "--out", str(env / "out")], capsys
    )
    text = out + err
    assert code == 1, text
    (case,) = summary_of(env / "out")["cases"]
    assert case["status"] == "fail"
    assert case["failure_kind"] == failure_kind


def lay_out_probe(probe: Path, dest: Path) -> Path:
    """probe-runs keep suite.yaml, t1.yaml and cassette_t1.jsonl side by side."""
    (dest / "cases").mkdir(parents=True)
    (dest / "cassettes").mkdir()
    shutil.copy(probe / "suite.yaml", dest / "suite.yaml")
    if (probe / "t1.yaml").exists():
        shutil.copy(probe / "t1.yaml", dest / "cases/t1.yaml")
        shutil.copy(probe / "cassette_t1.jsonl", dest / "cassettes/t1.jsonl")
    subprocess.run(["git", "init", "-q", str(dest)], check=True)
    return dest


def test_mismatch_probe_fails_with_the_peers_message(
    peer_fixtures: Path, env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    probe = peer_fixtures / "generated-0.2.3/probe-runs/mismatch_text"
    suite = lay_out_probe(probe, env / "suite")
    write_agent(suite / "agent.py", [{"q": "reset pasword", "limit": 5}], GOOD_OUTPUT)
    code, out, err = call_cli(["run", str(suite), "--out", str(env / "out")], capsys)
    text = out + err
    assert code == 1, text
    (case,) = summary_of(env / "out")["cases"]
    (peer_case,) = json.loads((probe / "summary.json").read_text())["cases"]
    assert case["status"] == peer_case["status"] == "fail"
    assert case["failure_reason"].startswith(peer_case["failure_reason"])


def test_xss_probe_fails_like_the_peer_and_the_report_stays_inert(
    peer_fixtures: Path, env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    probe = peer_fixtures / "generated-0.2.3/probe-runs/xss"
    suite = lay_out_probe(probe, env / "suite")
    (peer_output,) = [
        json.loads(line)["output"]
        for line in (probe / "run.jsonl").read_text().splitlines()
        if json.loads(line)["type"] == "final_output"
    ]
    write_agent(suite / "agent.py", [{"q": "reset password"}], peer_output)
    code, out, err = call_cli(["run", str(suite), "--out", str(env / "out")], capsys)
    text = out + err
    assert code == 1, text
    (case,) = summary_of(env / "out")["cases"]
    (peer_case,) = json.loads((probe / "summary.json").read_text())["cases"]
    assert (case["status"], case["failure_reason"]) == (
        peer_case["status"],
        peer_case["failure_reason"],
    )
    (report,) = (env / "out").glob("*/*/report.html")
    html = report.read_text(encoding="utf-8")
    assert "<img src=x" not in html
    assert "</script><script>alert(2)" not in html


def test_reg_gate_probe_fails_its_gates(
    peer_fixtures: Path, env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    probe = peer_fixtures / "generated-0.2.3/probe-runs/reg_gate"
    suite = lay_out_probe(probe, env / "suite")
    (suite / "cases/t1.yaml").write_text(
        "id: t1\ninput: {ticket: x}\ncassette: cassettes/t1.jsonl\n", encoding="utf-8"
    )
    (suite / "cassettes/t1.jsonl").write_text(
        json.dumps(
            {
                "tool": "search_docs",
                "args": {"q": "reset password"},
                "ok": True,
                "result": {"hits": ["a"]},
            }
        )
        + "\n",
        encoding="utf-8",
    )
    write_agent(
        suite / "agent.py", [{"q": "reset password"}], {"category": "account", "reply": "ok"}
    )
    # The peer's baseline holds a 1 ms case; an idle machine answers this one in 1 ms too, and
    # the wall gate (+5%) would pass. A 50 ms pause makes it slower on any machine.
    agent = suite / "agent.py"
    agent.write_text(
        agent.read_text().replace(
            'send({"type": "final_output"',
            'import time; time.sleep(0.05)\nsend({"type": "final_output"',
        ),
        encoding="utf-8",
    )
    assert "time.sleep" in agent.read_text()
    baseline = suite / "baseline_b2.json"
    shutil.copy(probe / "baseline_b2.json", baseline)
    code, out, err = call_cli(
        ["run", str(suite), "--baseline", str(baseline), "--out", str(env / "out")], capsys
    )
    text = out + err
    assert code == 1, text
    regression = summary_of(env / "out")["regression"]
    peer_regression = json.loads((probe / "summary.json").read_text())["regression"]
    statuses = {check["id"]: check["status"] for check in regression["checks"]}
    for check in peer_regression["checks"]:
        assert statuses[check["id"]] == check["status"], check["id"]
    assert regression["case_diffs"]["missing_in_current"] == ["t_gone"]
    assert regression["warnings"] == peer_regression["warnings"]
