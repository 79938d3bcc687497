"""Checks: assertions (a registry open to plugins), budgets, normalization and the case verdict.

The built-in assertion types live in ``trialrun.checks.builtin`` and are reached through the
registry (entry points), like any plugin's; they are not imported here, so importing this package
does not pay for jsonschema.
"""

from __future__ import annotations

from trialrun.checks.budgets import budget_failure_message, check_budgets
from trialrun.checks.normalize import normalize
from trialrun.checks.registry import (
    AssertionParamError,
    AssertionPluginError,
    AssertionRegistry,
    AssertionType,
    CheckSubject,
    CompileContext,
    CompiledAssertion,
    Param,
    assertion_type_names,
    check_params,
    get_assertion_type,
    register,
)
from trialrun.checks.verdict import judge_case

__all__ = [
    "AssertionParamError",
    "AssertionPluginError",
    "AssertionRegistry",
    "AssertionType",
    "CheckSubject",
    "CompileContext",
    "CompiledAssertion",
    "Param",
    "assertion_type_names",
    "budget_failure_message",
    "check_budgets",
    "check_params",
    "get_assertion_type",
    "judge_case",
    "normalize",
    "register",
]
