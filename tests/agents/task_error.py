"""Task-error agent: reads task_start and reports ``task_error`` with MESSAGE and
``data: {"attempt": 1}``.

Usage: task_error.py [MESSAGE="cannot solve this task"]
"""

from __future__ import annotations

import sys

from _jsonl import send, task_input

task_input()
message = sys.argv[1] if len(sys.argv) > 1 else "cannot solve this task"
send({"type": "task_error", "message": message, "data": {"attempt": 1}})
