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
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trialrun.base import canonjson
from trialrun.base.quoting import excerpt
from trialrun.config.spec import (
    AnyValue,
    Int,
    ListOf,
    MapOf,
    Nested,
    Record,
    SpecError,
    Str,
    keyed,
    parse_value,
)

if TYPE_CHECKING:
    from trialrun.config.yamlload import LoadedValue, PathElement
    from trialrun.errors import ConfigError
    from trialrun.incident.model import IncidentCall


@dataclass(frozen=True)
class Rule:
    """One rule; exactly one of ``max_calls_per`` / ``forbid_when_arg`` is set."""

    id: str
    tool: str
    max_calls_per: str | None = None
    at_most: int = 1
    forbid_when_arg: dict[str, Any] = field(default_factory=dict)
    file: str | None = field(default=None, compare=False)
    line: int | None = field(default=None, compare=False)
    """Where the rule is written, for an error about it (None: not from a file)."""


class _RuleEntry(Record):
    """A rule as the file writes it; which keys go together is checked after parsing."""

    id: str = keyed(Str(min_length=1))
    tool: str = keyed(Str(min_length=1))
    max_calls_per: str | None = keyed(Str(min_length=1), default=None)
    at_most: int | None = keyed(Int(ge=0), default=None)
    forbid_when_arg: dict[str, Any] | None = keyed(MapOf(AnyValue()), default=None)


class _RulesFile(Record):
    rules: list[_RuleEntry] = keyed(ListOf(Nested(_RuleEntry)))


_RULE_LIST = ListOf(Nested(_RuleEntry))
_RULES_FILE = Nested(_RulesFile)


def load_rules(path: str | Path) -> list[Rule]:
    """Read a YAML list of rules (or a mapping with a ``rules`` list).

    ConfigErrors on bad input, every problem at the line of the rule or key at fault.
    """
    from trialrun.config.messages import describe_value, spec_errors
    from trialrun.config.yamlload import load_yaml_value
    from trialrun.errors import ConfigErrors

    doc = load_yaml_value(Path(path), display=str(path), expected="a list of rules")
    wrapped = isinstance(doc.data, dict)
    if not wrapped and not isinstance(doc.data, list):
        raise doc.error(
            "expected a list of rules, or a mapping with a 'rules' list, "
            f"found {describe_value(doc.data)}"
        )
    at: list[PathElement] = ["rules"] if wrapped else []
    spec = _RULES_FILE if wrapped else _RULE_LIST

    def owner(loc: tuple[PathElement, ...]) -> str | None:
        # Problems inside a rule name it: by its id once it has one, else by its place.
        if len(loc) <= len(at) or not isinstance(index := loc[len(at)], int):
            return None
        entries = doc.data["rules"] if wrapped else doc.data
        entry = entries[index]
        rule_id = entry.get("id") if isinstance(entry, dict) else None
        if isinstance(rule_id, str) and rule_id and len(loc) > len(at) + 1:
            return f"rule {excerpt(rule_id)!r}"
        return f"rule #{index + 1}"

    try:
        parsed = parse_value(spec, doc.data)
    except SpecError as exc:
        raise ConfigErrors(spec_errors(exc, doc, spec, "the rules file", owner=owner)) from None
    entries: list[_RuleEntry] = parsed.rules if wrapped else parsed
    errors: list[ConfigError] = []
    rules: list[Rule] = []
    first_line: dict[str, int] = {}
    for position, entry in enumerate(entries):
        place = [*at, position]
        rule = _rule(entry, place, doc, errors)
        line = doc.line_of([*place, "id"])
        if entry.id in first_line:
            errors.append(
                doc.error(
                    f"rule id {excerpt(entry.id)!r} is used twice (first at line "
                    f"{first_line[entry.id]}); ids must be unique",
                    [*place, "id"],
                    "id",
                )
            )
        first_line.setdefault(entry.id, line)
        if rule is not None:
            rules.append(replace(rule, file=str(path), line=line))
    collected = ConfigErrors.collect(errors)
    if collected is not None:
        raise collected
    return rules


def _rule(
    entry: _RuleEntry, at: list[PathElement], doc: LoadedValue, errors: list[ConfigError]
) -> Rule | None:
    """The rule, or None after adding to ``errors`` what keys do not go together."""
    where = f"rule {excerpt(entry.id)!r}"
    if entry.max_calls_per is not None and entry.forbid_when_arg is not None:
        message = "'max_calls_per' and 'forbid_when_arg' are two kinds of rule; write two rules"
        key = "forbid_when_arg"
    elif entry.max_calls_per is not None:
        at_most = 1 if entry.at_most is None else entry.at_most
        return Rule(entry.id, entry.tool, max_calls_per=entry.max_calls_per, at_most=at_most)
    elif entry.forbid_when_arg is None:
        message, key = "expected 'max_calls_per' (with 'at_most') or 'forbid_when_arg'", None
    elif entry.at_most is not None:
        message = "'at_most' goes with 'max_calls_per', not 'forbid_when_arg'"
        key = "at_most"
    elif not entry.forbid_when_arg:
        message = "'forbid_when_arg' must map argument names to values, found an empty mapping"
        key = "forbid_when_arg"
    else:
        return Rule(entry.id, entry.tool, forbid_when_arg=dict(entry.forbid_when_arg))
    errors.append(doc.error(f"{where}: {message}", [*at, key] if key else at, key))
    return None


def rules_that_cannot_apply(
    calls: Sequence[IncidentCall], rules: Sequence[Rule]
) -> list[ConfigError]:
    """An error for each rule that, by the look of it, names a tool or argument with a typo.

    A rule about a tool this incident never called is fine (a rules file serves many
    incidents) unless a called tool has a close name. A rule about a called tool must name
    arguments its calls have: otherwise it could never apply and would pass in silence.
    Calls whose arguments were not captured say nothing about argument names.
    """
    from trialrun.base.suggest import closest
    from trialrun.errors import ConfigError

    tools = sorted({call.name for call in calls})
    errors: list[ConfigError] = []
    for rule in rules:
        where = f"rule {excerpt(rule.id)!r}"
        if rule.tool not in tools:
            near = closest(rule.tool, tools)
            if near is not None:
                message = (
                    f"{where}: no call of {excerpt(rule.tool)!r} in this incident "
                    f"(did you mean {near!r}?); the rule could never apply"
                )
                errors.append(ConfigError(message, file=rule.file, line=rule.line))
            continue
        captured = [c.args for c in calls if c.name == rule.tool and c.args is not None]
        if not captured:
            continue
        seen = sorted({name for args in captured for name in args})
        wanted = [rule.max_calls_per] if rule.max_calls_per is not None else rule.forbid_when_arg
        for name in wanted:
            if name not in seen:
                near = closest(name, seen)
                hint = f" (did you mean {near!r}?)" if near is not None else ""
                message = (
                    f"{where}: no call of {excerpt(rule.tool)!r} has an argument "
                    f"{excerpt(name)!r}{hint}; the rule could never apply"
                )
                errors.append(ConfigError(message, file=rule.file, line=rule.line))
                break
    return errors


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
