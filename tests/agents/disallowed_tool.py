"""Disallowed-tool agent: calls TOOL (``args: {"really": true}``) and waits for its result, then
returns ``{"result": <tool_result message>}``.

Usage: disallowed_tool.py [TOOL=delete_everything]
"""

from __future__ import annotations

import sys

from _jsonl import call_tool, final, task_input

task_input()
tool = sys.argv[1] if len(sys.argv) > 1 else "delete_everything"
final({"result": call_tool(tool, {"really": True}, "c1")})
