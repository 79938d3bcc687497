"""The suite's agent_command: run the framework agent that the case input names.

One suite can then hold a case per framework. Each ``<name>_agent.py`` is a standalone script;
``connect()`` here reads task_start once, and the script's own ``connect()`` gets that session.
"""

import runpy
from pathlib import Path

import trialrun.agent as sdk

session = sdk.connect()
assert session is not None, "run me under trialrun run (agent_channel: fd)"
script = Path(__file__).with_name(f"{session.input['agent']}_agent.py")
runpy.run_path(str(script), run_name="__main__")
