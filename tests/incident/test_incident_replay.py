"""incident.rules and incident.replay: business rules, in-order matching and the four results."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from paths import INCIDENT_AGENTS_DIR
from trialrun.errors import ConfigError
from trialrun.incident.model import Incident, IncidentCall
from trialrun.incident.replay import replay
from trialrun.incident.rules import Rule, check_rules, load_rules

AGENTS = INCIDENT_AGENTS_DIR
REFUND = {"order_id": "ord_1", "amount": 20.0, "card_number": "tok_1"}
ORDER = {"order_id": "ord_1", "total": 20.0, "payment_token": "tok_1"}
EMAIL = {"to": "c@example.com", "template": "refund_confirmation"}
ONE_REFUND = Rule("one-refund-per-order", "issue_refund", max_calls_per="order_id", at_most=1)


def agent(script: str, *args: str) -> str:
    return shlex.join([sys.executable, str(AGENTS / script), *args])


def incident_calls() -> list[IncidentCall]:
    """The production incident: a timeout, then two successful refunds of one order."""
    return [
        IncidentCall(0, "lookup_order", {"order_id": "ord_1"}, True, dict(ORDER)),
        IncidentCall(1, "issue_refund", dict(REFUND), False, None, "gateway timeout"),
        IncidentCall(2, "issue_refund", dict(REFUND), True, {"refund_id": "re_1"}),
        IncidentCall(3, "issue_refund", dict(REFUND), True, {"refund_id": "re_2"}),
        IncidentCall(4, "send_email", dict(EMAIL), True, {"sent": True}),
    ]


def happy_calls() -> list[IncidentCall]:
    """A day without a timeout: one refund, then the e-mail."""
    return [
        IncidentCall(0, "lookup_order", {"order_id": "ord_1"}, True, dict(ORDER)),
        IncidentCall(1, "issue_refund", dict(REFUND), True, {"refund_id": "re_1"}),
        IncidentCall(2, "send_email", dict(EMAIL), True, {"sent": True}),
    ]


def refund_incident(
    calls: list[IncidentCall] | None = None, missing: list[str] | None = None
) -> Incident:
    return Incident(
        source_format="trialrun",
        source_file="run.jsonl",
        input={"customer": {"email": "c@example.com"}, "request": "ord_1 arrived damaged"},
        final_output={"refund_ids": ["re_1", "re_2"]},
        calls=incident_calls() if calls is None else calls,
        missing=missing or [],
    )


# --- rules ---------------------------------------------------------------------------------


def test_per_argument_rule_flags_every_call_beyond_the_limit() -> None:
    violations = check_rules(refund_incident().calls, [ONE_REFUND])
    assert violations == [
        {
            "rule": "one-refund-per-order",
            "call_index": 3,
            "message": 'issue_refund called 2 times with order_id="ord_1"; expected at most 1',
        }
    ]


def test_a_failed_call_did_not_act_so_it_does_not_count() -> None:
    calls = incident_calls()
    calls[3].ok = False
    assert check_rules(calls, [ONE_REFUND]) == []


def test_uncaptured_arguments_are_not_judged() -> None:
    calls = incident_calls()
    calls[3].args = None
    assert check_rules(calls, [ONE_REFUND]) == []


def test_forbid_rule_matches_only_when_every_listed_argument_matches() -> None:
    rule = Rule("no-twenty", "issue_refund", forbid_when_arg={"amount": 20, "order_id": "ord_1"})
    other = Rule("no-other", "issue_refund", forbid_when_arg={"amount": 20, "order_id": "ord_2"})
    found = check_rules(happy_calls(), [rule, other])
    assert found == [
        {
            "rule": "no-twenty",
            "call_index": 1,
            "message": (
                'issue_refund called with amount=20, order_id="ord_1", which the rule forbids'
            ),
        }
    ]


@settings(max_examples=60)
@given(
    orders=st.lists(st.sampled_from(["A", "B", "C"]), max_size=12),
    at_most=st.integers(min_value=0, max_value=3),
)
def test_per_argument_violations_count_the_excess_per_value(
    orders: list[str], at_most: int
) -> None:
    calls = [IncidentCall(i, "issue_refund", {"order_id": o}, True) for i, o in enumerate(orders)]
    rule = Rule("r", "issue_refund", max_calls_per="order_id", at_most=at_most)
    expected = sum(max(0, orders.count(o) - at_most) for o in set(orders))
    assert len(check_rules(calls, [rule])) == expected


def test_load_rules_reads_both_shapes(tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(
        "- {id: one-refund, tool: issue_refund, max_calls_per: order_id, at_most: 1}\n"
        "- id: no-vip\n  tool: issue_refund\n  forbid_when_arg: {tier: vip}\n",
        encoding="utf-8",
    )
    assert load_rules(path) == [
        Rule("one-refund", "issue_refund", max_calls_per="order_id", at_most=1),
        Rule("no-vip", "issue_refund", forbid_when_arg={"tier": "vip"}),
    ]
    wrapped = tmp_path / "wrapped.yaml"
    wrapped.write_text("rules:\n  - {id: a, tool: t, max_calls_per: x}\n", encoding="utf-8")
    assert load_rules(wrapped) == [Rule("a", "t", max_calls_per="x", at_most=1)]


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ("{id: a}", 1, "unknown key 'id' in the rules file"),
        (
            "# rules\nrulse:\n  - {id: a}\n",
            2,
            "unknown key 'rulse' in the rules file (did you mean 'rules'?)",
        ),
        ("rules: {id: a}", 1, "'rules' must be a list, found a mapping"),
        ("\njust text\n", 2, "expected a list of rules, or a mapping with a 'rules' list"),
        (
            "- {id: a, tool: t, max_calls_per: x}\n- 3",
            2,
            "'rule #2' must be a mapping, found integer 3",
        ),
        ("- tool: t\n  max_calls_per: x", 1, "missing required key 'id' in rule #1"),
        ("- id: a\n  max_calls_per: x", 1, "missing required key 'tool' in rule 'a'"),
        ("- {id: a, tool: t}", 1, "expected 'max_calls_per' (with 'at_most') or 'forbid_when_arg'"),
        (
            "- id: a\n  tool: t\n  max_calls_per: x\n  at_most: -1",
            4,
            "rule 'a': 'at_most' must be >= 0, found -1",
        ),
        ("- {id: a, tool: t, max_calls_per: x, at_most: true}", 1, "'at_most' must be an integer"),
        (
            "- id: a\n  tool: t\n  max_calls_per: 3",
            3,
            "rule 'a': 'max_calls_per' must be a string, found integer 3",
        ),
        (
            "- id: a\n  tool: t\n  forbid_when_arg: {}",
            3,
            "rule 'a': 'forbid_when_arg' must map argument names to values",
        ),
        (
            "- id: a\n  tool: t\n  forbid_when_arg: {x: 1}\n  colour: red",
            4,
            "unknown key 'colour' in rule 'a'",
        ),
        (
            "- id: a\n  tool: t\n  max_calls_per: x\n  at_mots: 2",
            4,
            "unknown key 'at_mots' in rule 'a' (did you mean 'at_most'?)",
        ),
        (
            "rules:\n  - id: a\n    tool: t\n    forbid_when_ar: {x: 1}",
            4,
            "unknown key 'forbid_when_ar' in rule 'a' (did you mean 'forbid_when_arg'?)",
        ),
        (
            "- id: a\n  tool: t\n  forbid_when_arg: {x: 1}\n  at_most: 1",
            4,
            "'at_most' goes with 'max_calls_per'",
        ),
        (
            "- id: a\n  tool: t\n  max_calls_per: x\n  forbid_when_arg: {x: 1}",
            4,
            "two kinds of rule",
        ),
        (
            "- {id: a, tool: t, max_calls_per: x}\n- {id: a, tool: u, max_calls_per: y}",
            2,
            "rule id 'a' is used twice (first at line 1)",
        ),
        ("- id: a\n  id: b", 2, "duplicate key 'id'"),
        ("- id: a\n- [unclosed", 2, "invalid YAML"),
    ],
)
def test_load_rules_rejects_bad_files_at_the_line_at_fault(
    tmp_path: Path, text: str, line: int, fragment: str
) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_rules(path)
    assert str(caught.value).startswith(f"{path}:{line}: ")
    assert fragment in str(caught.value)


def test_load_rules_reports_a_missing_or_empty_file_about_the_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_rules(tmp_path / "absent.yaml")
    assert caught.value.line is None and "cannot read file" in caught.value.message
    empty = tmp_path / "rules.yaml"
    empty.write_text("# no rules yet\n", encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_rules(empty)
    assert str(caught.value) == f"{empty}: the file is empty; expected a list of rules"


def test_load_rules_reads_json_rules_with_their_lines(tmp_path: Path) -> None:
    path = tmp_path / "rules.json"
    path.write_text('[\n {"id": "a", "tool": "t", "max_calls_per": "x"},\n {"id": 5}\n]')
    with pytest.raises(ConfigError) as caught:
        load_rules(path)
    assert str(caught.value).splitlines() == [
        f"{path}:3: rule #2: 'id' must be a string, found integer 5",
        f"{path}:3: missing required key 'tool' in rule #2",
    ]
    path.write_text('{"rules": [{"id": "a", "tool": "t", "max_calls_per": "x"}]}')
    assert load_rules(path) == [Rule("a", "t", max_calls_per="x", at_most=1)]


# --- replay: the four results ----------------------------------------------------------------


def test_buggy_agent_reproduces_the_recorded_double_refund() -> None:
    outcome = replay(refund_incident(), agent("refund_agent.py", "buggy"), rules=[ONE_REFUND])
    assert outcome.result == "reproduced"
    assert outcome.calls_matched == 5
    assert outcome.divergence is None
    assert [v["call_index"] for v in outcome.violations] == [3]
    assert outcome.recorded_violations == outcome.violations
    assert outcome.final_output == {
        "reply": "Your refund of $20.00 has been issued.",
        "refund_ids": ["re_1", "re_2"],
    }


def test_rules_that_hold_pass_even_when_the_agent_stops_before_the_recording_ends() -> None:
    calls = [*happy_calls(), IncidentCall(3, "send_email", dict(EMAIL), True, {"sent": True})]
    outcome = replay(refund_incident(calls), agent("refund_agent.py", "buggy"), rules=[ONE_REFUND])
    assert outcome.result == "passes"
    assert outcome.calls_matched == 3
    assert outcome.violations == outcome.recorded_violations == []
    assert outcome.to_json()["result"] == "passes"


def test_a_fixed_agent_no_longer_follows_the_recording_so_it_diverges() -> None:
    outcome = replay(refund_incident(), agent("refund_agent.py", "fixed"), rules=[ONE_REFUND])
    assert outcome.result == "diverged"
    assert outcome.calls_matched == 3
    assert outcome.divergence == {
        "index": 3,
        "expected": {"name": "issue_refund", "args": REFUND},
        "got": {"name": "send_email", "args": EMAIL},
        "reason": "call 3 differs from the recording",
    }
    assert len(outcome.recorded_violations) == 1


def test_a_call_the_recording_does_not_have_is_a_divergence() -> None:
    outcome = replay(refund_incident(), agent("wanders.py"), rules=[ONE_REFUND])
    assert outcome.result == "diverged"
    assert outcome.calls_matched == 0
    assert outcome.divergence is not None
    assert outcome.divergence["index"] == 0
    assert outcome.divergence["expected"] == {"name": "lookup_order", "args": {"order_id": "ord_1"}}
    assert outcome.divergence["got"] == {
        "name": "search_orders",
        "args": {"customer": {"email": "c@example.com"}},
    }


def test_uncaptured_results_make_the_replay_inconclusive_without_running_the_agent() -> None:
    calls = incident_calls()
    calls[2].ok = None
    outcome = replay(refund_incident(calls), "exit 7", rules=[ONE_REFUND])
    assert outcome.result == "inconclusive"
    assert outcome.calls_matched == 0
    assert outcome.missing == ["call 2 (issue_refund): result not captured"]
    assert len(outcome.recorded_violations) == 1


def test_uncaptured_arguments_and_listed_gaps_are_inconclusive_too() -> None:
    calls = incident_calls()
    calls[0].args = None
    outcome = replay(refund_incident(calls, missing=["input"]), agent("refund_agent.py", "fixed"))
    assert outcome.result == "inconclusive"
    assert outcome.missing == ["input", "call 0 (lookup_order): arguments not captured"]


# --- replay: matching details and agent failures ---------------------------------------------


def test_a_call_beyond_the_recording_is_a_divergence() -> None:
    outcome = replay(refund_incident(incident_calls()[:4]), agent("refund_agent.py", "buggy"))
    assert outcome.result == "diverged"
    assert outcome.calls_matched == 4
    assert outcome.divergence is not None
    assert outcome.divergence["expected"] is None
    assert outcome.divergence["got"] == {"name": "send_email", "args": EMAIL}
    assert "beyond the recorded 4" in outcome.divergence["reason"]


def test_different_arguments_diverge_even_with_the_same_tool() -> None:
    calls = incident_calls()
    for call in calls[1:4]:
        call.args = {**REFUND, "amount": 25.0}
    outcome = replay(refund_incident(calls), agent("refund_agent.py", "buggy"))
    assert outcome.result == "diverged"
    assert outcome.divergence is not None
    assert outcome.divergence["index"] == 1
    assert outcome.divergence["got"] == {"name": "issue_refund", "args": REFUND}


def test_argument_key_order_and_int_versus_float_do_not_matter() -> None:
    calls = incident_calls()
    calls[2].args = {"card_number": "tok_1", "amount": 20, "order_id": "ord_1"}
    outcome = replay(refund_incident(calls), agent("refund_agent.py", "buggy"))
    assert outcome.result == "passes"
    assert outcome.calls_matched == 5


@pytest.mark.parametrize(
    ("command", "reason"),
    [
        ("echo 'boom' >&2; exit 3", "exit code 3"),
        ("echo 'not json'", "broke the protocol"),
        ("""read line; echo '{"type":"task_error","message":"no stock"}'""", "no stock"),
        ("sleep 5", "sent nothing for 0.3 s"),
        ("/nonexistent/agent-binary", "exit code 127"),
    ],
)
def test_an_agent_that_stops_without_final_output_diverges(command: str, reason: str) -> None:
    outcome = replay(refund_incident(), command, rules=[ONE_REFUND], idle_s=0.3)
    assert outcome.result == "diverged"
    assert outcome.divergence is not None
    assert reason in outcome.divergence["reason"]
    assert outcome.divergence["got"] is None
    assert outcome.divergence["expected"] == {"name": "lookup_order", "args": {"order_id": "ord_1"}}
