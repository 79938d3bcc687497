"""Chatty hang agent: reads task_start, then sends a ``log`` message every INTERVAL_MS forever,
so an idle timeout never fires and only the wall deadline can stop it.

Usage: chatty_hang.py [INTERVAL_MS=50]
"""

from __future__ import annotations

import sys
import time

from _jsonl import send, task_input

interval = (int(sys.argv[1]) if len(sys.argv) > 1 else 50) / 1000
task_input()
tick = 0
while True:
    send({"type": "log", "level": "debug", "message": f"still thinking ({tick})"})
    tick += 1
    time.sleep(interval)
