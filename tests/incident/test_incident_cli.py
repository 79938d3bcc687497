"""``trialrun incident``: replay, inspect, promote and import through the CLI, end to end."""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from builders import call_cli
from paths import DATA_DIR, INCIDENT_AGENTS_DIR

AGENTS = INCIDENT_AGENTS_DIR
EXPORT = DATA_DIR / "incidents" / "trialrun_run.jsonl"
REDACT = [
    "--redact-path",
    "calls.*.args.card_number",
    "--redact-path",
    "input.customer.email",
    "--redact-path",
    "calls.*.args.to",
]
RULES = "- {id: one-refund-per-order, tool: issue_refund, max_calls_per: order_id, at_most: 1}\n"
CARD = "4111111111111111"


def agent(variant: str) -> str:
    return shlex.join([sys.executable, str(AGENTS / "refund_agent.py"), variant])


def export_without(root: Path, name: str, drop: Callable[[dict[str, Any]], bool]) -> Path:
    """The fixture export with some of its events left out (another day, or a capture gap)."""
    lines = EXPORT.read_text(encoding="utf-8").splitlines()
    kept = [line for line in lines if not drop(json.loads(line))]
    path = root / f"{name}.jsonl"
    path.write_text("\n".join(kept) + "\n", encoding="utf-8")
    return path


def import_incident(
    capsys: pytest.CaptureFixture[str], root: Path, export: Path = EXPORT
) -> tuple[Path, list[str]]:
    out = root / export.stem
    code, stdout, err = call_cli(
        ["incident", "import", str(export), "--out", str(out), *REDACT], capsys
    )
    lines = stdout.splitlines()
    assert code == 0, err
    return out / "incident.json", lines


@pytest.fixture
def rules_path(tmp_path: Path) -> Path:
    path = tmp_path / "rules.yaml"
    path.write_text(RULES, encoding="utf-8")
    return path


def drop_timeout_and_duplicate(event: dict[str, Any]) -> bool:
    return event.get("call_id") in {"c2", "c4"}


def drop_email_result(event: dict[str, Any]) -> bool:
    return event.get("type") == "tool_result" and event.get("call_id") == "c5"


@pytest.mark.parametrize(
    ("variant", "day", "result", "gate_code"),
    [
        ("buggy", "incident", "reproduced", 1),
        ("fixed", "incident", "diverged", 1),
        ("buggy", "no_timeout", "passes", 0),
        ("fixed", "capture_gap", "inconclusive", 1),
    ],
)
def test_replay_of_an_imported_export_gives_each_result_last_and_gates_on_it(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    rules_path: Path,
    variant: str,
    day: str,
    result: str,
    gate_code: int,
) -> None:
    if day == "no_timeout":
        export = export_without(tmp_path, day, drop_timeout_and_duplicate)
    elif day == "capture_gap":
        export = export_without(tmp_path, day, drop_email_result)
    else:
        export = EXPORT
    incident_path, _ = import_incident(capsys, tmp_path, export)
    base = ["incident", "replay", str(incident_path), "--agent", agent(variant)]
    base += ["--rules", str(rules_path)]
    code, stdout, _ = call_cli(base, capsys)
    lines = stdout.splitlines()
    assert (code, lines[-1]) == (0, result)
    code, stdout, _ = call_cli([*base, "--gate"], capsys)
    lines = stdout.splitlines()
    assert (code, lines[-1]) == (gate_code, result)
    code, stdout, _ = call_cli([*base, "--json", "--gate"], capsys)
    lines = stdout.splitlines()
    assert code == gate_code
    payload = json.loads(lines[-1])
    assert payload["result"] == result
    assert {"calls_matched", "divergence", "violations"} <= set(payload)


def test_replay_text_output_explains_divergence_violations_and_gaps(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], rules_path: Path
) -> None:
    incident_path, _ = import_incident(capsys, tmp_path)
    argv = ["incident", "replay", str(incident_path), "--rules", str(rules_path)]
    _, stdout, _ = call_cli([*argv, "--agent", agent("fixed")], capsys)
    lines = stdout.splitlines()
    assert "calls matched: 3" in lines
    assert "divergence at call 3: call 3 differs from the recording" in lines
    got = '  got:      {"args": {"template": "refund_confirmation", "to": "[REDACTED]"}'
    assert lines[-2].startswith(got)
    _, stdout, _ = call_cli([*argv, "--agent", agent("buggy")], capsys)
    lines = stdout.splitlines()
    assert any(line.startswith("violated one-refund-per-order at call 3") for line in lines)
    gap_path, import_lines = import_incident(
        capsys, tmp_path, export_without(tmp_path, "gap", drop_email_result)
    )
    assert "  missing: calls[4].result (send_email)" in import_lines
    _, stdout, _ = call_cli(
        ["incident", "replay", str(gap_path), "--agent", agent("buggy")], capsys
    )
    lines = stdout.splitlines()
    assert "missing: calls[4].result (send_email)" in lines
    assert "missing: call 4 (send_email): result not captured" in lines


def test_import_redacts_before_writing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    incident_path, lines = import_incident(capsys, tmp_path)
    assert lines[0].startswith("Imported 5 tool calls from trialrun-run-jsonl to ")
    text = incident_path.read_text(encoding="utf-8")
    for secret in (CARD, "dana.reyes@example.com", "pm_tok_9f8e7d6c5b4a"):
        assert secret not in text


def test_bad_input_exits_2_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], rules_path: Path
) -> None:
    incident_path, _ = import_incident(capsys, tmp_path)
    rules_path.write_text("- {id: a, tool: t}\n", encoding="utf-8")
    argv = ["incident", "replay", str(incident_path), "--agent", agent("fixed"), "--gate"]
    code, _, err = call_cli([*argv, "--rules", str(rules_path)], capsys)
    assert code == 2
    assert err.startswith(f"error: {rules_path}")
    incident_path.write_text('{"schema_version": 99}', encoding="utf-8")
    code, _, err = call_cli(argv, capsys)
    assert code == 2
    assert "schema_version" in err
    absent = str(tmp_path / "absent.json")
    code, _, err = call_cli(["incident", "replay", absent, "--agent", "true"], capsys)
    assert code == 2
    assert "absent.json" in err
    garbage = tmp_path / "garbage.txt"
    garbage.write_text("not an export\n", encoding="utf-8")
    code, _, err = call_cli(
        ["incident", "import", str(garbage), "--out", str(tmp_path / "x")], capsys
    )
    assert code == 2
    assert err.startswith("error: ")
    assert not (tmp_path / "x" / "incident.json").exists()


def test_inspect_writes_the_views_and_reports_violations(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], rules_path: Path
) -> None:
    incident_path, _ = import_incident(capsys, tmp_path)
    out = tmp_path / "inspect"
    argv = ["incident", "inspect", str(incident_path), "--out", str(out)]
    code, stdout, _ = call_cli([*argv, "--rules", str(rules_path)], capsys)
    lines = stdout.splitlines()
    assert code == 0
    assert lines[0].startswith("VIOLATED one-refund-per-order at call 3")
    assert lines[-1] == "violated"
    assert {p.name for p in out.iterdir()} >= {"inspect.html", "inspect.json", "junit.xml"}
    code, stdout, _ = call_cli(argv, capsys)
    lines = stdout.splitlines()
    assert (code, lines[-1]) == (0, "rules_pass")


def test_promote_refuses_an_inconclusive_incident(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gap_path, _ = import_incident(
        capsys, tmp_path, export_without(tmp_path, "gap", drop_email_result)
    )
    target = tmp_path / "suite" / "cases" / "x.yaml"
    code, _, err = call_cli(["incident", "promote", str(gap_path), "--to", str(target)], capsys)
    assert code == 2
    assert err.startswith("error: ")
    assert not target.exists()


def write_suite(root: Path, variant: str) -> Path:
    """A one-case suite around the promoted case: the business rule is one refund per order."""
    suite = root / f"suite_{variant}"
    (suite / "cases").mkdir(parents=True)
    (suite / "one_refund.schema.json").write_text(
        json.dumps({"type": "object", "properties": {"refund_ids": {"maxItems": 1}}}),
        encoding="utf-8",
    )
    command = [sys.executable, str(AGENTS / "refund_agent.py"), variant]
    (suite / "suite.yaml").write_text(
        "suite_name: refund-incident\n"
        f"agent_command: {json.dumps(command)}\n"
        "mode: replay\ncases_path: cases\n"
        "tool_registry: [lookup_order, issue_refund, send_email]\n"
        "assertions:\n  - {type: json_schema, schema_path: one_refund.schema.json}\n"
        "idle_timeout_ms: 10000\nkill_grace_ms: 200\n",
        encoding="utf-8",
    )
    return suite


@pytest.mark.parametrize(("variant", "exit_code"), [("buggy", 1), ("fixed", 0)])
def test_end_to_end_import_promote_run_fails_the_buggy_agent_and_passes_the_fixed_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], variant: str, exit_code: int
) -> None:
    incident_path, _ = import_incident(capsys, tmp_path)
    suite = write_suite(tmp_path, variant)
    target = suite / "cases" / "refund-incident.json"
    code, stdout, err = call_cli(
        ["incident", "promote", str(incident_path), "--to", str(target)], capsys
    )
    lines = stdout.splitlines()
    assert code == 0, err
    assert sorted(p.name for p in target.parent.iterdir()) == ["refund-incident.json"]
    cassette = suite / "cassettes" / "refund-incident.jsonl"
    assert CARD not in cassette.read_text(encoding="utf-8")
    out = tmp_path / f"out_{variant}"
    code, stdout, err = call_cli(["run", str(suite), "--no-baseline", "--out", str(out)], capsys)
    lines = stdout.splitlines()
    assert code == exit_code, "\n".join(lines) + err
    (summary_path,) = out.glob("*/*/summary.json")
    (case,) = json.loads(summary_path.read_text(encoding="utf-8"))["cases"]
    assert case["id"] == "refund-incident"
    assert case["status"] == ("pass" if variant == "fixed" else "fail")
    assert case["tool_calls_by_name"]["issue_refund"] == (3 if variant == "buggy" else 2)


def test_promote_refuses_a_case_file_name_no_suite_loads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    incident_path, _ = import_incident(capsys, tmp_path)
    target = tmp_path / "suite" / "cases" / "refund.txt"
    code, stdout, err = call_cli(
        ["incident", "promote", str(incident_path), "--to", str(target)], capsys
    )
    lines = stdout.splitlines()
    assert code == 2 and lines == []
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1
    assert "expected a case file ending in .yaml, .yml, .json" in err
    assert not (tmp_path / "suite").exists()


def test_shared_files_name_the_export_but_not_where_it_was(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # An export in a private folder, imported with an absolute path from elsewhere.
    private = tmp_path / "home" / "dana" / "exports"
    private.mkdir(parents=True)
    export = private / "prod-run.jsonl"
    export.write_bytes(EXPORT.read_bytes())
    monkeypatch.chdir(tmp_path)
    incident_path, _ = import_incident(capsys, tmp_path / "bundle", export)
    out = tmp_path / "bundle" / "inspect"
    code, _, err = call_cli(["incident", "inspect", str(incident_path), "--out", str(out)], capsys)
    assert code == 0, err
    target = tmp_path / "suite" / "cases" / "x.yaml"
    code, _, err = call_cli(
        ["incident", "promote", str(incident_path), "--to", str(target)], capsys
    )
    assert code == 0, err
    assert json.loads(incident_path.read_text(encoding="utf-8"))["source_file"] == "prod-run.jsonl"
    shared = [incident_path, target, *out.iterdir()]
    for path in shared:
        text = path.read_text(encoding="utf-8")
        assert str(tmp_path) not in text and "dana" not in text, path
    assert "prod-run.jsonl" in (out / "inspect.html").read_text(encoding="utf-8")


def test_import_never_overwrites_without_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    incident_path, _ = import_incident(capsys, tmp_path)
    incident_path.write_text("edited by hand\n", encoding="utf-8")
    argv = ["incident", "import", str(EXPORT), "--out", str(incident_path.parent), *REDACT]
    code, out, err = call_cli(argv, capsys)
    assert code == 2 and out == ""
    assert err == (
        f"error: {incident_path}: already exists; pass --force to overwrite it, or choose "
        "another --out\n"
    )
    assert incident_path.read_text(encoding="utf-8") == "edited by hand\n"
    code, _, err = call_cli([*argv, "--force"], capsys)
    assert code == 0, err
    assert json.loads(incident_path.read_text(encoding="utf-8"))["source_format"] == (
        "trialrun-run-jsonl"
    )


def test_import_refuses_a_redact_path_that_matches_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "typo"
    argv = ["incident", "import", str(EXPORT), "--out", str(out)]
    code, stdout, err = call_cli([*argv, "--redact-path", "calls.*.args.card_numbr"], capsys)
    assert code == 2 and stdout == ""
    assert err.startswith("error: ") and err.count("\n") == 1
    assert err.rstrip().endswith(
        "--redact-path 'calls.*.args.card_numbr' matches nothing in the incident, so it would "
        "redact nothing (did you mean 'calls.*.args.card_number'?)"
    )
    assert not out.exists()


def test_import_redacts_card_numbers_and_emails_by_default(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "plain"
    code, _, err = call_cli(["incident", "import", str(EXPORT), "--out", str(out)], capsys)
    assert code == 0, err
    text = (out / "incident.json").read_text(encoding="utf-8")
    assert CARD not in text and "dana.reyes@example.com" not in text
    assert "ord_1042" in text  # what is neither stays


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        (
            "{id: r, tool: issue_refnd, max_calls_per: order_id}",
            "rule 'r': no call of 'issue_refnd' in this incident (did you mean "
            "'issue_refund'?); the rule could never apply",
        ),
        (
            "{id: r, tool: issue_refund, max_calls_per: orderid}",
            "rule 'r': no call of 'issue_refund' has an argument 'orderid' (did you mean "
            "'order_id'?); the rule could never apply",
        ),
        (
            "{id: r, tool: issue_refund, forbid_when_arg: {amount: 1, order: x}}",
            "rule 'r': no call of 'issue_refund' has an argument 'order' (did you mean "
            "'order_id'?); the rule could never apply",
        ),
    ],
)
def test_inspect_refuses_a_rule_that_could_never_apply(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], rule: str, message: str
) -> None:
    incident_path, _ = import_incident(capsys, tmp_path)
    rules = tmp_path / "broken.yaml"
    rules.write_text(f"- {{id: fine, tool: send_email, max_calls_per: to}}\n- {rule}\n")
    argv = ["incident", "inspect", str(incident_path), "--rules", str(rules)]
    code, out, err = call_cli([*argv, "--out", str(tmp_path / "view")], capsys)
    assert (code, out, err) == (2, "", f"error: {rules}:2: {message}\n")
    assert not (tmp_path / "view").exists()


def test_inspect_accepts_a_rule_about_a_tool_this_incident_never_called(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A rules file serves many incidents: a tool unlike any called here is not a typo.
    incident_path, _ = import_incident(capsys, tmp_path)
    rules = tmp_path / "rules.yaml"
    rules.write_text("- {id: r, tool: delete_account, max_calls_per: user}\n")
    argv = ["incident", "inspect", str(incident_path), "--rules", str(rules)]
    code, out, _ = call_cli([*argv, "--out", str(tmp_path / "view")], capsys)
    assert code == 0 and out.splitlines()[-1] == "rules_pass"
