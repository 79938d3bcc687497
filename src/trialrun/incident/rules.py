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

import yaml

from trialrun import canonjson
from trialrun.errors import ConfigError
from trialrun.fsutil import read_problem

if TYPE_CHECKING:
    from trialrun.incident.model import IncidentCall

_COMMON_KEYS = {"id", "tool"}
_PER_KEYS = _COMMON_KEYS | {"max_calls_per", "at_most"}
_FORBID_KEYS = _COMMON_KEYS | {"forbid_when_arg"}


@dataclass(frozen=True)
class Rule:
    """One rule; exactly one of ``max_calls_per`` / ``forbid_when_arg`` is set."""

    id: str
    tool: str
    max_calls_per: str | None = None
    at_most: int = 1
    forbid_when_arg: dict[str, Any] = field(default_factory=dict)


def load_rules(path: str | Path) -> list[Rule]:
    """Read a YAML list of rules (or a mapping with a ``rules`` list). ConfigError on bad input."""
    shown = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read rules file: {read_problem(exc)}", file=shown) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise ConfigError(f"rules file is not valid YAML: {exc}", file=shown, line=line) from None
    if isinstance(data, dict) and "rules" in data:
        data = data["rules"]
    if not isinstance(data, list):
        raise ConfigError(
            f"expected a list of rules, found {type(data).__name__}", file=shown, line=1
        )
    rules = [_parse_rule(entry, position, shown) for position, entry in enumerate(data)]
    seen: set[str] = set()
    for rule in rules:
        if rule.id in seen:
            raise ConfigError(f"rule id {rule.id!r} is used twice; ids must be unique", file=shown)
        seen.add(rule.id)
    return rules


def _parse_rule(entry: Any, position: int, shown: str) -> Rule:
    where = f"rule #{position + 1}"
    if not isinstance(entry, dict):
        raise ConfigError(f"{where}: expected a mapping, found {type(entry).__name__}", file=shown)
    rule_id, tool = entry.get("id"), entry.get("tool")
    if not isinstance(rule_id, str) or not rule_id:
        raise ConfigError(f"{where}: expected a non-empty string 'id'", file=shown)
    if not isinstance(tool, str) or not tool:
        raise ConfigError(f"rule {rule_id!r}: expected a non-empty string 'tool'", file=shown)
    if "max_calls_per" in entry:
        _refuse_unknown(entry, _PER_KEYS, rule_id, shown)
        per, at_most = entry["max_calls_per"], entry.get("at_most", 1)
        if not isinstance(per, str) or not per:
            raise ConfigError(
                f"rule {rule_id!r}: 'max_calls_per' must name an argument", file=shown
            )
        if isinstance(at_most, bool) or not isinstance(at_most, int) or at_most < 0:
            raise ConfigError(
                f"rule {rule_id!r}: 'at_most' must be an integer >= 0, found {at_most!r}",
                file=shown,
            )
        return Rule(rule_id, tool, max_calls_per=per, at_most=at_most)
    if "forbid_when_arg" in entry:
        _refuse_unknown(entry, _FORBID_KEYS, rule_id, shown)
        when = entry["forbid_when_arg"]
        if not isinstance(when, dict) or not when:
            raise ConfigError(
                f"rule {rule_id!r}: 'forbid_when_arg' must be a non-empty mapping of argument "
                "names to values",
                file=shown,
            )
        return Rule(rule_id, tool, forbid_when_arg=dict(when))
    raise ConfigError(
        f"rule {rule_id!r}: expected 'max_calls_per' (with 'at_most') or 'forbid_when_arg'",
        file=shown,
    )


def _refuse_unknown(entry: dict[str, Any], allowed: set[str], rule_id: str, shown: str) -> None:
    unknown = sorted(set(entry) - allowed)
    if unknown:
        raise ConfigError(
            f"rule {rule_id!r}: unknown key(s) {', '.join(unknown)}; allowed: "
            f"{', '.join(sorted(allowed))}",
            file=shown,
        )


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
