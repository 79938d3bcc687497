"""Echo agent: makes CALLS calls to TOOL (args ``{"input": <task input>, "n": i}``), then returns
``{"echo": <task input>, "results": [<tool_result message>, ...]}``.

Usage: echo_agent.py [TOOL=search_docs] [CALLS=1]
"""

from __future__ import annotations

import sys

from _jsonl import call_tool, final, task_input

tool = sys.argv[1] if len(sys.argv) > 1 else "search_docs"
calls = int(sys.argv[2]) if len(sys.argv) > 2 else 1
value = task_input()
results = [call_tool(tool, {"input": value, "n": i}, f"c{i}") for i in range(calls)]
final({"echo": value, "results": results})
