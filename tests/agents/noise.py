"""Noisy agent: after task_start prints TEXT on stdout (not JSON), then a valid final output.

Usage: noise.py [TEXT="Loading model..."]
"""

from __future__ import annotations

import sys

from _jsonl import final, task_input

task_input()
print(sys.argv[1] if len(sys.argv) > 1 else "Loading model...", flush=True)
final({"ok": True})
