"""Crash agent: reads task_start, prints a Python traceback to stderr and exits with EXIT_CODE.

Usage: crash.py [EXIT_CODE=3]
"""

from __future__ import annotations

import sys
import traceback

from _jsonl import task_input

task_input()
try:
    raise RuntimeError("fake agent crashed on purpose")
except RuntimeError:
    traceback.print_exc()
sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
