"""The ``{placeholder}`` text of compare.yaml's command fields: one grammar, checked and expanded.

Every command-valued field (``agent.command``, ``judge.command``, ``judge.escalate_command``,
``triggers.command``, ``--judge-command``) and ``agent.stage`` use this module, so a placeholder
means the same thing wherever it is written and a field that forgot to expand it cannot exist.

Grammar (the one of ``str.format``, without its format specs): ``{name}`` is a placeholder;
``{{`` and ``}}`` are a literal ``{`` and ``}`` (JSON in an argument is written
``'{{"k": 1}}'``); any other brace (a lone ``{``, ``{"k": 1}``, ``{}``) is an error, because
guessing whether the user meant a placeholder is how ``{evalz}`` used to reach a judge verbatim.
Expansion is one pass: text a placeholder brings in (a task quoting ``{name}``) is never
expanded again.

The names form one vocabulary (``PLACEHOLDERS``); each field accepts those that have a value when
it runs (``FIELD_PLACEHOLDERS``). ``{sandbox}`` belongs to one arm's run, so the judge (which
compares two arms, blind to which is which) and the trigger selector (no arm at all) have none;
``{task}`` and ``{max_turns}`` belong to a case, which the selector does not have either. A name
of the vocabulary that a field does not accept is refused with that reason, at load time.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from trialrun.base.quoting import excerpt
from trialrun.base.suggest import closest

__all__ = [
    "FIELD_PLACEHOLDERS",
    "PLACEHOLDERS",
    "expand",
    "expand_argv",
    "placeholder_problems",
]

PLACEHOLDERS = ("task", "sandbox", "evals", "name", "max_turns")
"""Every placeholder name, in the order the docs list them."""

_CASE_WIDE = ("task", "evals", "name", "max_turns")
_RUN_WIDE = ("evals", "name")
FIELD_PLACEHOLDERS: dict[str, tuple[str, ...]] = {
    "agent.command": PLACEHOLDERS,
    "agent.stage": ("name",),
    "judge.command": _CASE_WIDE,
    "judge.escalate_command": _CASE_WIDE,
    "--judge-command": _CASE_WIDE,
    "triggers.command": _RUN_WIDE,
}
"""The placeholders each field accepts: those that have one value whenever it runs."""

_BELONGS_TO = {"sandbox": "an arm's run", "task": "a case", "max_turns": "a case"}
_TOKEN = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")
_ESCAPE_HINT = "a literal brace is written '{{' or '}}'"


def placeholder_problems(text: str, field: str) -> list[str]:
    """What is wrong with the placeholders of ``text`` in ``field``; empty when all is well.

    Each message names the placeholder, the field and the placeholders the field accepts.
    """
    allowed = FIELD_PLACEHOLDERS[field]
    known = ", ".join("{" + name + "}" for name in allowed)
    problems: list[str] = []
    for match in _TOKEN.finditer(text):
        token, name = match.group(0), match.group(1)
        if token in ("{{", "}}") or (name is not None and name in allowed):
            continue
        if name is None:
            problems.append(
                f"a lone {token!r} in {field} (in {excerpt(text, 80)!r}): {_ESCAPE_HINT}; "
                f"placeholders here: {known}"
            )
        elif name in PLACEHOLDERS:
            owner = _BELONGS_TO[name]
            problems.append(
                f"placeholder '{{{name}}}' has no value in {field}: it belongs to {owner}, "
                f"and {field} does not run for one; placeholders here: {known}"
            )
        else:
            guess = closest(name, allowed)
            hint = f" (did you mean '{{{guess}}}'?)" if guess is not None else ""
            if not hint and not re.fullmatch(r"\w+", name):
                hint = f" ({_ESCAPE_HINT})"
            problems.append(
                f"unknown placeholder '{{{name}}}' in {field}{hint}; placeholders here: {known}"
            )
    return problems


def expand(text: str, values: Mapping[str, str]) -> str:
    """``text`` with every placeholder replaced in one pass and ``{{`` / ``}}`` unescaped.

    Raises ``KeyError`` for a placeholder without a value: the loader refuses such text, so
    reaching it is a bug, never something to pass on verbatim.
    """

    def one(match: re.Match[str]) -> str:
        token, name = match.group(0), match.group(1)
        if token == "{{":
            return "{"
        if token == "}}":
            return "}"
        if name is None or name not in values:
            raise KeyError(f"no value for {token!r} in {text!r}")
        return values[name]

    return _TOKEN.sub(one, text)


def expand_argv(argv: Sequence[str], values: Mapping[str, str]) -> list[str]:
    return [expand(part, values) for part in argv]
