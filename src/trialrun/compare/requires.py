"""Environment skips: a case (or the session) whose ``requires`` is not met never runs.

``requires`` names a program that must be on ``PATH`` (``jq``) or a module that ``python3`` must
be able to import (``python3:yaml``). A case needing something this machine lacks cannot say
anything about the subject, so it is skipped before any arm runs and named as an
``environment-skip`` hole with the reason; it is never counted as a zero and never planned, so it
adds nothing to ``expected_rows`` (the seed engine does the same, reference §1.4).

Each distinct requirement is probed once per run, however many cases name it: a module probe
starts a ``python3`` process (30 s cap, as in the seed engine), which is worth doing only once.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from trialrun.base.redact import redact_text
from trialrun.compare.arms import SESSION_RUN_NAME, RunUnit
from trialrun.compare.config import CompareCase
from trialrun.compare.records import Hole

__all__ = [
    "PROBE_TIMEOUT_S",
    "RequirementProbe",
    "apply_requirements",
    "probe_requirement",
]

PROBE_TIMEOUT_S = 30.0
_MODULE_PREFIX = "python3:"


def probe_requirement(requirement: str) -> str | None:
    """Why ``requirement`` is not met on this machine, or None when it is."""
    if not requirement.startswith(_MODULE_PREFIX):
        if shutil.which(requirement) is None:
            return f"program '{requirement}' is not on PATH"
        return None
    module = requirement.removeprefix(_MODULE_PREFIX)
    python = shutil.which("python3")
    if python is None:
        return f"python3 is not on PATH, so module '{module}' cannot be imported"
    try:
        done = subprocess.run(
            [python, "-c", "import importlib, sys; importlib.import_module(sys.argv[1])", module],
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return f"importing '{module}' with {python} did not finish within {PROBE_TIMEOUT_S:g}s"
    except (OSError, ValueError) as exc:  # ValueError: the module name holds a NUL
        return f"could not start {python} to import '{module}': {exc}"
    if done.returncode != 0:
        last = done.stderr.strip().splitlines()[-1:]
        found = f": {redact_text(last[0])[:200]}" if last else f" (exit code {done.returncode})"
        return f"module '{module}' is not importable by {python}{found}"
    return None


@dataclass
class RequirementProbe:
    """Probes each distinct requirement once and remembers the answer."""

    probe: Callable[[str], str | None] | None = None
    """None: ``probe_requirement``, looked up when called."""
    answers: dict[str, str | None] = field(default_factory=dict)

    def missing(self, requirements: Sequence[str]) -> list[tuple[str, str]]:
        """(requirement, reason) for each unmet one, in the order given."""
        unmet = []
        for requirement in dict.fromkeys(requirements):
            if requirement not in self.answers:
                probe = self.probe if self.probe is not None else probe_requirement
                self.answers[requirement] = probe(requirement)
            reason = self.answers[requirement]
            if reason is not None:
                unmet.append((requirement, reason))
        return unmet


def apply_requirements(
    units: Sequence[RunUnit], probe: RequirementProbe | None = None
) -> tuple[list[RunUnit], list[Hole]]:
    """The units to run, and one ``environment-skip`` hole per skipped case or sub-case.

    A skipped session is named once per sub-case, as sub-cases are what the rows are keyed by.
    """
    checker = probe if probe is not None else RequirementProbe()
    kept: list[RunUnit] = []
    holes: list[Hole] = []
    for unit in units:
        unmet = checker.missing(unit.config.requires)
        if not unmet:
            kept.append(unit)
            continue
        reasons = "; ".join(f"requires '{req}': {reason}" for req, reason in unmet)
        if isinstance(unit, CompareCase):
            holes.append(Hole(unit.name, None, "environment-skip", f"skipped: {reasons}"))
        else:
            detail = f"skipped with the {SESSION_RUN_NAME}: {reasons}"
            holes.extend(Hole(sub.name, None, "environment-skip", detail) for sub in unit.cases)
    return kept, holes
