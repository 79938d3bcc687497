"""Surrogate agent, by MODE:
  escapes   final output ``{"text": "\\ud800", "input": <task input>}`` written with ASCII
            escapes (a lone surrogate, legal JSON text);
  invalid   a final output line containing the raw bytes 0xff 0xfe (invalid UTF-8);
  noise     a non-JSON line of raw invalid UTF-8 bytes, then a final output.

Usage: surrogates.py [MODE=escapes]
"""

from __future__ import annotations

import json
import sys

from _jsonl import final, send_raw, task_input

mode = sys.argv[1] if len(sys.argv) > 1 else "escapes"
value = task_input()
if mode == "escapes":
    line = {"type": "final_output", "output": {"text": "\ud800", "input": value}}
    send_raw(json.dumps(line, ensure_ascii=True).encode("ascii") + b"\n")
elif mode == "invalid":
    send_raw(b'{"type":"final_output","output":{"text":"\xff\xfe"}}\n')
else:
    send_raw(b"\xff\xfe binary junk \x80\n")
    final({"ok": True})
