"""Huge agent: sends one final output ``{"blob": "xxx..."}`` whose string is SIZE bytes long.

Usage: huge.py SIZE
"""

from __future__ import annotations

import sys

from _jsonl import final, task_input

task_input()
final({"blob": "x" * int(sys.argv[1])})
