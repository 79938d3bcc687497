"""SIGTERM-ignoring agent: ignores SIGTERM, then by MODE:
  hang   writes the line ``ignoring`` once it has read task_start, then never answers;
  final  sends a final output and keeps running (only SIGKILL stops it).

Usage: ignore_sigterm.py [MODE=hang]
"""

from __future__ import annotations

import signal
import sys

from _jsonl import final, hang, send_raw, task_input

signal.signal(signal.SIGTERM, signal.SIG_IGN)
task_input()
if (sys.argv[1] if len(sys.argv) > 1 else "hang") == "final":
    final({"ok": True})
else:
    send_raw(b"ignoring\n")  # SIGTERM is ignored from here on: the test may send it
hang()
