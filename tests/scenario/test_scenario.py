"""Action scenarios: the world, its rules, the shipped pack and `trialrun scenario`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trialrun.cli import run_cli
from trialrun.scenario.pack import init_pack
from trialrun.scenario.report import render_html
from trialrun.scenario.world import (
    Fault,
    PackError,
    Scenario,
    World,
    check_rules,
    load_scenario,
)

ORDERS = {"A1": {"total": 50}, "A2": {"total": 20}}


def make_world(*faults: Fault) -> World:
    return World(Scenario("s", "", ORDERS, {}, faults))


@pytest.fixture
def pack(tmp_path: Path) -> Path:
    directory = tmp_path / "pack"
    init_pack(directory)
    return directory


def verify(pack: Path, agent: str, out: Path) -> tuple[int, dict[str, Any]]:
    code = run_cli(["scenario", "verify", str(pack), "--agent", agent, "--out", str(out)])
    return code, json.loads((out / "summary.json").read_text())


def test_timeout_after_commit_records_the_effect_but_answers_with_an_error() -> None:
    world = make_world(Fault("issue_refund", 1, "timeout_after_commit"))
    first = world.call("issue_refund", {"order_id": "A1", "amount": 10})
    second = world.call("issue_refund", {"order_id": "A1", "amount": 10})
    assert (first.ok, first.error, first.effect_id) == (False, "timeout: no response", "E1")
    assert second.ok and second.effect_id == "E2"
    assert sorted(v["rule"] for v in check_rules(world.scenario, world.effects)) == [
        "one_refund_per_order",
        "ticket_for_every_refund",
        "ticket_for_every_refund",
    ]


def test_error_before_commit_records_nothing_and_slow_still_answers() -> None:
    world = make_world(
        Fault("issue_refund", 1, "error_before_commit"), Fault("lookup_order", 1, "slow", 1)
    )
    failed = world.call("issue_refund", {"order_id": "A1", "amount": 10})
    looked_up = world.call("lookup_order", {"order_id": "A2"})
    assert not failed.ok and failed.effect_id is None and world.effects == []
    assert looked_up.ok and looked_up.result["total"] == 20 and looked_up.fault == "slow"


def test_idempotency_key_dedupes_a_retry_after_timeout() -> None:
    world = make_world(Fault("issue_refund", 1, "timeout_after_commit"))
    args = {"order_id": "A1", "amount": 10, "idempotency_key": "k"}
    world.call("issue_refund", args)
    retry = world.call("issue_refund", args)
    world.call("create_ticket", {"order_id": "A1"})
    assert retry.ok and retry.result == {"refund_id": "E1", "amount": 10}
    assert check_rules(world.scenario, world.effects) == []


def test_rules_name_the_effect_that_broke_them() -> None:
    world = make_world()
    world.call("issue_refund", {"order_id": "A2", "amount": 25})
    [over, no_ticket] = check_rules(world.scenario, world.effects)
    assert over["rule"] == "refund_within_order_total" and over["effect"]["id"] == "E1"
    assert "exceeds order A2 total 20" in over["message"]
    assert no_ticket["rule"] == "ticket_for_every_refund"


@pytest.mark.parametrize(
    ("tool", "args", "error"),
    [
        ("issue_refund", {"order_id": "nope", "amount": 1}, "no order 'nope'"),
        ("issue_refund", {"order_id": "A1", "amount": -3}, "positive number, found -3"),
        ("issue_refund", {"order_id": "A1", "amount": True}, "positive number, found True"),
        ("wire_money", {}, "unknown tool 'wire_money'"),
    ],
)
def test_bad_tool_calls_get_an_error_and_commit_nothing(
    tool: str, args: dict[str, object], error: str
) -> None:
    world = make_world()
    action = world.call(tool, args)
    assert not action.ok and error in str(action.error) and world.effects == []


@settings(max_examples=60)
@given(st.lists(st.tuples(st.sampled_from(["A1", "A2"]), st.sampled_from([None, "k1", "k2"]))))
def test_refunds_with_a_key_commit_once_per_key(calls: list[tuple[str, str | None]]) -> None:
    world = make_world()
    for order_id, key in calls:
        world.call("issue_refund", {"order_id": order_id, "amount": 5, "idempotency_key": key})
    keyed = {key for _, key in calls if key is not None}
    unkeyed = sum(1 for _, key in calls if key is None)
    assert len(world.effects) == len(keyed) + unkeyed
    refunded_orders = {e["order_id"] for e in world.effects}
    duplicates = [
        v for v in check_rules(world.scenario, world.effects) if v["rule"] == "one_refund_per_order"
    ]
    assert len(duplicates) == len(world.effects) - len(refunded_orders)


def test_load_scenario_reports_where_and_what(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"id": "x", "orders": {}, "task": {}, "faults": [{"tool": "x"}]}))
    with pytest.raises(PackError, match=r"bad.json: faults\[0\]: expected tool one of"):
        load_scenario(path)
    path.write_text("[1]")
    with pytest.raises(PackError, match="expected a JSON object, found list"):
        load_scenario(path)
    path.write_text(json.dumps({"id": "x"}))
    with pytest.raises(PackError, match="missing keys orders, task"):
        load_scenario(path)


def test_load_scenario_refuses_what_it_would_misread_without_crashing(tmp_path: Path) -> None:
    """The pack's own loader (standard library, no trialrun): a message, never a traceback."""
    path = tmp_path / "bad.json"
    base = {"id": "x", "orders": {}, "task": {}}
    path.write_text(json.dumps({**base, "fualts": []}))
    with pytest.raises(PackError, match=r"bad.json: unknown key fualts"):
        load_scenario(path)
    path.write_text(json.dumps({**base, "faults": 5}))
    with pytest.raises(PackError, match="faults: expected a list"):
        load_scenario(path)
    fault = {"tool": "issue_refund", "kind": "slow", "call": "first"}
    path.write_text(json.dumps({**base, "faults": [fault]}))
    with pytest.raises(PackError, match=r"faults\[0\]: expected integers for call and delay_ms"):
        load_scenario(path)


TIMEOUT_SCENARIO = "refund_timeout_after_commit.json"


@pytest.mark.parametrize(
    ("old", "new", "says"),
    [
        (
            '"faults"',
            '"fualts"',
            ":6: unknown key 'fualts' in the scenario (did you mean 'faults'?)",
        ),
        ('"tool"', '"tol"', ":6: unknown key 'tol' in faults[0] (did you mean 'tool'?)"),
        (
            '"call": 1',
            '"call": "first"',
            ":6: faults[0]: 'call' must be an integer, found string 'first'",
        ),
        (
            '"kind": "timeout_after_commit"',
            '"kind": "timeout_after_comit"',
            ":6: faults[0]: 'kind' must be one of timeout_after_commit, error_before_commit, "
            "slow; found string 'timeout_after_comit' (did you mean 'timeout_after_commit'?)",
        ),
        ('"total": 55', '"total": "55"', ":4: orders.A200: expected a mapping with a numeric"),
        ('"id": "refund_timeout_after_commit",', "", ":1: missing required key 'id'"),
        (
            '"faults": [{"tool": "issue_refund", "call": 1, "kind": "timeout_after_commit"}]',
            '"faults": 5',
            ":6: 'faults' must be a list, found integer 5",
        ),
    ],
)
def test_a_bad_scenario_file_is_refused_at_its_line_before_any_run(
    pack: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], old: str, new: str, says: str
) -> None:
    scenario = pack / "scenarios" / TIMEOUT_SCENARIO
    text = scenario.read_text(encoding="utf-8")
    assert old in text
    scenario.write_text(text.replace(old, new, 1), encoding="utf-8")
    out = tmp_path / "out"
    assert run_cli(["scenario", "verify", str(pack), "--agent", "naive", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {scenario}{says}"), err
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert not (out / "summary.json").exists()


def test_naive_agent_fails_exactly_the_duplicate_payment_scenario(
    pack: Path, tmp_path: Path
) -> None:
    runs = [verify(pack, "naive", tmp_path / f"out{i}") for i in range(2)]
    # Deterministic: a second run commits the very same effects.
    assert [s["effects"] for s in runs[0][1]["scenarios"]] == [
        s["effects"] for s in runs[1][1]["scenarios"]
    ]
    code, summary = runs[0]
    failing = [s for s in summary["scenarios"] if s["status"] != "passed"]
    assert code == 1 and (summary["passed"], summary["failed"]) == (4, 1)
    [scenario] = failing
    assert scenario["id"] == "refund_timeout_after_commit"
    [violation] = scenario["violations"]
    assert violation["rule"] == "one_refund_per_order"
    assert violation["effect"] == {
        "id": "E2",
        "kind": "refund",
        "order_id": "A200",
        "amount": 55,
        "key": None,
    }


def test_fixed_agent_passes_all_five_and_report_shows_before_and_after(
    pack: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    verify(pack, "naive", out)
    code, summary = verify(pack, "fixed", out)
    assert code == 0 and (summary["passed"], summary["failed"]) == (5, 0)
    html = (out / "report.html").read_text()
    assert "Agent naive" in html and "Agent fixed" in html
    assert "one_refund_per_order" in html and "duplicate payment" in html
    assert "timeout: no response" in html and "&quot;idempotency_key&quot;" in html


def test_report_escapes_what_the_agent_and_pack_wrote() -> None:
    action = {
        "tool": "<b>x</b>",
        "args": {"q": "<script>"},
        "fault": None,
        "ok": False,
        "result": None,
        "error": "<img src=x>",
        "effect_id": None,
    }
    entry = {
        "id": "<i>s</i>",
        "description": "<script>alert(1)</script>",
        "status": "error",
        "error": "<boom>",
        "violations": [],
        "actions": [action],
    }
    html = render_html([{"agent": "a<b", "passed": 0, "scenarios": [entry]}])
    assert "<script>" not in html and "<img" not in html and "<boom>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "a&lt;b" in html


def test_run_pack_works_with_the_standard_library_alone(pack: Path, tmp_path: Path) -> None:
    probe = subprocess.run(
        [sys.executable, "-I", "-S", "-c", "import trialrun"], capture_output=True, check=False
    )
    assert probe.returncode != 0, "trialrun must not be importable in this mode"
    out = tmp_path / "std"
    result = subprocess.run(
        [sys.executable, "-I", "-S", str(pack / "run_pack.py"), "--out", str(out)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
        timeout=60,
    )
    assert result.returncode == 1, result.stderr
    assert "one_refund_per_order" in result.stdout and "4/5 passed" in result.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert [s["status"] for s in summary["scenarios"]].count("failed") == 1


def test_init_keeps_existing_files_unless_forced(tmp_path: Path) -> None:
    directory = tmp_path / "p"
    assert run_cli(["scenario", "init", str(directory)]) == 0
    assert not (directory / "__init__.py").exists()
    (directory / "pack.yaml").write_text("mine")
    assert init_pack(directory) == []
    assert directory / "pack.yaml" in init_pack(directory, force=True)
    assert (directory / "pack.yaml").read_text() != "mine"


def test_invalid_pack_and_unknown_agent_exit_2(
    pack: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(["scenario", "verify", str(tmp_path / "none"), "--agent", "naive"]) == 2
    assert "expected a pack.yaml here" in capsys.readouterr().err
    assert run_cli(["scenario", "verify", str(pack), "--agent", "ghost"]) == 2
    assert "no agent 'ghost'; expected one of fixed, naive" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (
            "# pack\nagents: {naive: {command: python3}}\nscenarios: []\n",
            ":2: agents.naive: 'command' must be a list, found string 'python3'",
        ),
        ("agents: {}\nscenarios: []\n", ":1: 'agents' must name at least one agent, found none"),
        (
            "agents:\n  'a b': {command: [x]}\nscenarios: []\n",
            ":2: keys of 'agents' must be plain names",
        ),
        ("agents: {a: {command: [x]}}\n", ":1: missing required key 'scenarios' in pack.yaml"),
        (
            "agents: {a: {command: [x]}}\nscenarios:\n  - s.json\n  - 5\n",
            ":4: 'scenarios[1]' must be a string, found integer 5",
        ),
    ],
)
def test_a_bad_pack_yaml_value_is_refused_at_its_line(
    pack: Path, capsys: pytest.CaptureFixture[str], text: str, says: str
) -> None:
    (pack / "pack.yaml").write_text(text, encoding="utf-8")
    assert run_cli(["scenario", "verify", str(pack), "--agent", "naive"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {pack / 'pack.yaml'}{says}"), err


def test_a_crashing_agent_is_an_error_not_a_pass(pack: Path, tmp_path: Path) -> None:
    (pack / "agents" / "crash.py").write_text("raise SystemExit(3)\n")
    pack_yaml = json.loads((pack / "pack.yaml").read_text())
    pack_yaml["agents"]["crash"] = {"command": ["python3", "agents/crash.py"]}
    pack_yaml["scenarios"] = pack_yaml["scenarios"][:1]
    (pack / "pack.yaml").write_text(json.dumps(pack_yaml))
    code, summary = verify(pack, "crash", tmp_path / "out")
    [entry] = summary["scenarios"]
    assert code == 1 and entry["status"] == "error"
    assert "without a final_output" in entry["error"]


def test_an_agent_that_dies_before_reading_its_answer_is_named_a_crash(
    pack: Path, tmp_path: Path
) -> None:
    # Closing stdin, then one call: our answer meets a broken pipe before the agent's exit code.
    (pack / "agents" / "gone.py").write_text(
        "import json, os, sys, time\nos.close(0)\n"
        "print(json.dumps({'type': 'tool_call', 'name': 'x', 'call_id': '1', 'args': {}}),"
        " flush=True)\ntime.sleep(0.3)\nraise SystemExit(3)\n"
    )
    pack_yaml = json.loads((pack / "pack.yaml").read_text())
    pack_yaml["agents"]["gone"] = {"command": ["python3", "agents/gone.py"]}
    pack_yaml["scenarios"] = pack_yaml["scenarios"][:1]
    (pack / "pack.yaml").write_text(json.dumps(pack_yaml))
    code, summary = verify(pack, "gone", tmp_path / "out")
    [entry] = summary["scenarios"]
    assert code == 1 and entry["status"] == "error"
    assert entry["error"] == "agent exited with code 3 without a final_output"


def test_report_wears_the_stylesheet_of_the_other_reports() -> None:
    from trialrun.report.html import stylesheet

    entry = {
        "id": "s1",
        "description": "d",
        "status": "failed",
        "error": None,
        "violations": [],
        "actions": [],
    }
    html = render_html([{"agent": "naive", "passed": 0, "scenarios": [entry]}])
    assert f"<style>\n{stylesheet()}</style>" in html
    assert "--pass:" in stylesheet() and "prefers-color-scheme: dark" in stylesheet()
    # Statuses use the run report's classes, so they take its colours.
    assert "<td class='status-fail'>failed</td>" in html
    assert "<span class='status-fail'>failed</span>" in html
    assert "<main>" in html and "</main>" in html
