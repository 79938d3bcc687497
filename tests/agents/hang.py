"""Hang agent: reads task_start and then never sends anything (until killed).

Usage: hang.py
"""

from __future__ import annotations

from _jsonl import hang, task_input

task_input()
hang()
