"""Checks: the case verdict from assertions and budgets.

The assertion-plugin contract (``register``, ``AssertionType`` ...) lives one layer down in
``trialrun.base.assertion_api`` because suite loading compiles assertions through it. The built-in
assertion types live in ``trialrun.checks.builtin`` and are reached through the registry (entry
points), like any plugin's; nothing is imported here, so importing ``trialrun.checks.builtin``
does not pay for the verdict code.
"""
