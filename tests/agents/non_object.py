"""Non-object agent: sends a final output whose ``output`` is the JSON value VALUE_JSON
(not an object, which the protocol refuses).

Usage: non_object.py [VALUE_JSON='["not", "an", "object"]']
"""

from __future__ import annotations

import json
import sys

from _jsonl import send, task_input

task_input()
value = json.loads(sys.argv[1]) if len(sys.argv) > 1 else ["not", "an", "object"]
send({"type": "final_output", "output": value})
