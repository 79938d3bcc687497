"""Scripted agent: makes the tool calls its case input lists, then reports usage and answers.

Input: ``{"calls": [[tool, args], ...], "think_ms": N, "usage": {...}, "output": {...}}``. It
waits ``think_ms`` before each call (so the timeline has gaps), sends the usage message when one
is given, and ends with ``output`` (default ``{"ok": true}``).

Usage: scripted_tools.py
"""

from __future__ import annotations

import time

from _jsonl import call_tool, final, send, task_input

task = task_input()
for number, (name, args) in enumerate(task.get("calls", []), start=1):
    time.sleep(task.get("think_ms", 0) / 1000)
    call_tool(name, args, f"c{number}")
if task.get("usage"):
    send({"type": "usage", **task["usage"]})
final(task.get("output", {"ok": True}))
