"""An agent that asks for a tool the recording never called (a divergence at call 0)."""

from __future__ import annotations

from _jsonl import call_tool, final, task_input

task = task_input()
call_tool("search_orders", {"customer": task.get("customer", "unknown")})
final({"reply": "done"})
