"""Business rules an incident's tool calls are judged by, loaded from a small YAML list.

Two rule shapes, both about one tool:

* ``{id, tool, max_calls_per: ARG, at_most: N}``: at most N successful calls of ``tool`` for each
  value of argument ARG (at most one ``issue_refund`` per ``order_id``). A call whose result says
  it failed (``ok: false``) did not act, so it does not count.
* ``{id, tool, forbid_when_arg: {NAME: VALUE, ...}}``: no call of ``tool`` whose arguments hold
  every listed value.

A call whose arguments were not captured cannot be judged; the incident is then inconclusive
(``model.is_inconclusive``), which is reported separately.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trialrun.base import canonjson
from trialrun.base.quoting import excerpt
from trialrun.base.suggest import did_you_mean

if TYPE_CHECKING:
    from trialrun.config.yamlload import LoadedValue, PathElement
    from trialrun.incident.model import IncidentCall

_COMMON_KEYS = ("id", "tool")
_PER_KEYS = ("max_calls_per", "at_most")
_FORBID_KEYS = ("forbid_when_arg",)
_ALL_KEYS = (*_COMMON_KEYS, *_PER_KEYS, *_FORBID_KEYS)
_EXPECTED_TOP = "expected a list of rules, or a mapping with a 'rules' list"


@dataclass(frozen=True)
class Rule:
    """One rule; exactly one of ``max_calls_per`` / ``forbid_when_arg`` is set."""

    id: str
    tool: str
    max_calls_per: str | None = None
    at_most: int = 1
    forbid_when_arg: dict[str, Any] = field(default_factory=dict)


def load_rules(path: str | Path) -> list[Rule]:
    """Read a YAML list of rules (or a mapping with a ``rules`` list).

    ConfigError on bad input, at the line of the rule or key at fault.
    """
    from trialrun.config.yamlload import load_yaml_value

    doc = load_yaml_value(Path(path), display=str(path), expected="a list of rules")
    entries, at = _rule_list(doc)
    rules: list[Rule] = []
    first_line: dict[str, int] = {}
    for position, entry in enumerate(entries):
        place: list[PathElement] = [*at, position]
        rule = _parse_rule(entry, place, doc)
        line = doc.line_of([*place, "id"])
        if rule.id in first_line:
            raise doc.error(
                f"rule id {excerpt(rule.id)!r} is used twice (first at line "
                f"{first_line[rule.id]}); ids must be unique",
                [*place, "id"],
                "id",
            )
        first_line[rule.id] = line
        rules.append(rule)
    return rules


def _rule_list(doc: LoadedValue) -> tuple[list[Any], list[PathElement]]:
    """The rules and their place in the document."""
    data = doc.data
    if isinstance(data, dict):
        for key in data:
            if key != "rules":
                hint = did_you_mean(str(key), ["rules"])
                raise doc.error(
                    f"unknown key '{excerpt(str(key))}'{hint}; {_EXPECTED_TOP}", [key], str(key)
                )
        if "rules" not in data:
            raise doc.error(f"{_EXPECTED_TOP}, found an empty mapping")
        data = data["rules"]
        if not isinstance(data, list):
            raise doc.error(f"'rules': expected a list of rules, found {_kind(data)}", ["rules"])
        return data, ["rules"]
    if not isinstance(data, list):
        raise doc.error(f"{_EXPECTED_TOP}, found {_kind(data)}")
    return data, []


def _parse_rule(entry: Any, at: list[PathElement], doc: LoadedValue) -> Rule:
    where = f"rule #{int(at[-1]) + 1}"
    if not isinstance(entry, dict):
        raise doc.error(f"{where}: expected a mapping, found {_kind(entry)}", at)
    rule_id = entry.get("id")
    if isinstance(rule_id, str) and rule_id:
        where = f"rule {excerpt(rule_id)!r}"
    # Unknown keys first: a misspelled 'id' or 'max_calls_per' is the cause of what follows.
    for key in entry:
        if key not in _ALL_KEYS:
            hint = did_you_mean(str(key), _ALL_KEYS)
            raise doc.error(
                f"{where}: unknown key '{excerpt(str(key))}'{hint}", [*at, key], str(key)
            )
    if not isinstance(rule_id, str) or not rule_id:
        raise doc.error(f"{where}: expected a non-empty string 'id'", [*at, "id"], "id")
    tool = entry.get("tool")
    if not isinstance(tool, str) or not tool:
        raise doc.error(f"{where}: expected a non-empty string 'tool'", [*at, "tool"], "tool")
    if "max_calls_per" in entry and "forbid_when_arg" in entry:
        raise doc.error(
            f"{where}: 'max_calls_per' and 'forbid_when_arg' are two kinds of rule; "
            "write two rules",
            [*at, "forbid_when_arg"],
            "forbid_when_arg",
        )
    if "max_calls_per" in entry:
        return _per_arg_rule(entry, rule_id, tool, at, doc)
    if "forbid_when_arg" in entry:
        return _forbid_rule(entry, rule_id, tool, at, doc)
    raise doc.error(f"{where}: expected 'max_calls_per' (with 'at_most') or 'forbid_when_arg'", at)


def _per_arg_rule(
    entry: dict[str, Any], rule_id: str, tool: str, at: list[PathElement], doc: LoadedValue
) -> Rule:
    per, at_most = entry["max_calls_per"], entry.get("at_most", 1)
    if not isinstance(per, str) or not per:
        raise doc.error(
            f"rule {rule_id!r}: 'max_calls_per' must name an argument, found {_kind(per)}",
            [*at, "max_calls_per"],
            "max_calls_per",
        )
    if isinstance(at_most, bool) or not isinstance(at_most, int) or at_most < 0:
        raise doc.error(
            f"rule {rule_id!r}: 'at_most' must be an integer >= 0, found {at_most!r}",
            [*at, "at_most"],
            "at_most",
        )
    return Rule(rule_id, tool, max_calls_per=per, at_most=at_most)


def _forbid_rule(
    entry: dict[str, Any], rule_id: str, tool: str, at: list[PathElement], doc: LoadedValue
) -> Rule:
    if "at_most" in entry:
        raise doc.error(
            f"rule {rule_id!r}: 'at_most' goes with 'max_calls_per', not 'forbid_when_arg'",
            [*at, "at_most"],
            "at_most",
        )
    when = entry["forbid_when_arg"]
    if not isinstance(when, dict) or not when:
        raise doc.error(
            f"rule {rule_id!r}: 'forbid_when_arg' must be a non-empty mapping of argument "
            f"names to values, found {_kind(when)}",
            [*at, "forbid_when_arg"],
            "forbid_when_arg",
        )
    return Rule(rule_id, tool, forbid_when_arg=dict(when))


def _kind(value: Any) -> str:
    if isinstance(value, dict):
        return "an empty mapping" if not value else "a mapping"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "nothing"
    kind = {"str": "string", "int": "integer", "float": "number", "bool": "boolean"}
    name = type(value).__name__
    return f"the {kind.get(name, name)} {excerpt(repr(value))}"


def check_rules(calls: Sequence[IncidentCall], rules: Sequence[Rule]) -> list[dict[str, Any]]:
    """Violations ``{rule, call_index, message}``, in rule order then call order."""
    violations: list[dict[str, Any]] = []
    for rule in rules:
        if rule.max_calls_per is not None:
            violations.extend(_check_per_arg(calls, rule, rule.max_calls_per))
        else:
            violations.extend(_check_forbidden(calls, rule))
    return violations


def _check_per_arg(calls: Sequence[IncidentCall], rule: Rule, arg: str) -> list[dict[str, Any]]:
    counts: dict[str, int] = {}
    found: list[dict[str, Any]] = []
    for call in calls:
        if call.name != rule.tool or call.args is None or arg not in call.args:
            continue
        if call.ok is False:
            continue
        key = canonjson.dumps(call.args[arg])
        counts[key] = counts.get(key, 0) + 1
        if counts[key] > rule.at_most:
            found.append(
                {
                    "rule": rule.id,
                    "call_index": call.index,
                    "message": (
                        f"{rule.tool} called {counts[key]} times with {arg}={key}; "
                        f"expected at most {rule.at_most}"
                    ),
                }
            )
    return found


def _check_forbidden(calls: Sequence[IncidentCall], rule: Rule) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for call in calls:
        if call.name != rule.tool or call.args is None:
            continue
        args = call.args
        if all(
            name in args and canonjson.dumps(args[name]) == canonjson.dumps(value)
            for name, value in rule.forbid_when_arg.items()
        ):
            shown = ", ".join(
                f"{name}={canonjson.dumps(value)}" for name, value in rule.forbid_when_arg.items()
            )
            found.append(
                {
                    "rule": rule.id,
                    "call_index": call.index,
                    "message": f"{rule.tool} called with {shown}, which the rule forbids",
                }
            )
    return found
