"""Spawns a grandchild ``sleep 300`` (same process group, inheriting stdout), writes its pid to
PIDFILE, then, by MODE:
  hang    never answers (the case ends on a deadline);
  finish  sends a final output and exits 0, leaving the grandchild running;
  exit    exits 3 without a final output while the grandchild keeps stdout open.

Usage: spawn_child.py PIDFILE [MODE=hang]
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from _jsonl import final, hang, task_input

pid_file = Path(sys.argv[1])
mode = sys.argv[2] if len(sys.argv) > 2 else "hang"
task_input()
child = subprocess.Popen(["sleep", "300"])
pid_file.write_text(str(child.pid))
if mode == "finish":
    final({"child_pid": child.pid})
    sys.exit(0)
if mode == "exit":
    sys.exit(3)
hang()
