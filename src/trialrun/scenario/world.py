"""The effects ledger, fault injection and business rules, shared with the shipped pack.

The code lives in ``pack_template/scenario_world.py`` so the pack's ``run_pack.py`` works with
the standard library alone; importing it from here keeps a single copy.
"""

from __future__ import annotations

from trialrun.scenario.pack_template.scenario_world import (
    FAULT_KINDS,
    TOOLS,
    Action,
    Fault,
    PackError,
    Scenario,
    World,
    check_rules,
    load_scenario,
    run_loaded_pack,
    run_scenario,
    validate_pack,
)

__all__ = [
    "FAULT_KINDS",
    "TOOLS",
    "Action",
    "Fault",
    "PackError",
    "Scenario",
    "World",
    "check_rules",
    "load_scenario",
    "run_loaded_pack",
    "run_scenario",
    "validate_pack",
]
