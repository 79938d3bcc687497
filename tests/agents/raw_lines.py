"""Scripted agent: after task_start writes each LINE argument verbatim as one stdout line, then
hangs (so a test sees exactly what those lines cause).

Usage: raw_lines.py LINE...
"""

from __future__ import annotations

import sys

from _jsonl import hang, send_raw, task_input

task_input()
for line in sys.argv[1:]:
    send_raw(line.encode("utf-8", "surrogateescape") + b"\n")
hang()
