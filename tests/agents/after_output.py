"""Agent that is not done once its final output is sent; by MODE:
  read     then reads its stdin: at end of input it writes MARKER ("saw end of input") and
           exits 0; SIGTERM (default action) ends it before that.
  cleanup  then sleeps; its SIGTERM handler writes MARKER ("cleaned up") and exits 0.
  exit     ignores SIGTERM and exits with CODE right after its output.

Usage: after_output.py MODE MARKER [CODE=0]
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from types import FrameType

from _jsonl import final, hang, task_input

mode, marker = sys.argv[1], Path(sys.argv[2])
code = int(sys.argv[3]) if len(sys.argv) > 3 else 0


def clean_up(signum: int, frame: FrameType | None) -> None:
    marker.write_text("cleaned up")
    os._exit(0)


if mode == "cleanup":
    signal.signal(signal.SIGTERM, clean_up)
elif mode == "exit":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
task_input()
final({"ok": True})
if mode == "read":
    sys.stdin.read()
    marker.write_text("saw end of input")
    sys.exit(0)
if mode == "exit":
    sys.exit(code)
hang()
