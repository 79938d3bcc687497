"""Action scenarios: run an agent against a simulated world and judge the effects it commits.

A pack (``pack.yaml`` plus scenario files) names its agents and scenarios. The world answers
every tool call, records committed effects in a ledger apart from the responses, injects faults
(a timeout after a commit, an error before one, a slow answer) and checks business rules on the
ledger. The world lives in ``pack_template/scenario_world.py``, standard library only, so the
pack runs without trialrun; ``world`` re-exports that same file, ``pack`` loads and runs packs,
``report`` writes summary.json and report.html.
"""
