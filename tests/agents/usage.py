"""Usage agent: sends three ``usage`` messages, then a final output. Totals:
tokens_in 30, tokens_out 12, cost_usd 0.03, model "fake-model-2" (the last one named).

  {"tokens_in": 10, "tokens_out": 5, "cost_usd": 0.01, "model": "fake-model-1"}
  {"tokens_in": 20, "tokens_out": 5, "cost_usd": 0.02, "model": "fake-model-2"}
  {"tokens_out": 2}

Usage: usage.py
"""

from __future__ import annotations

from _jsonl import final, send, task_input

task_input()
send({"type": "usage", "tokens_in": 10, "tokens_out": 5, "cost_usd": 0.01, "model": "fake-model-1"})
send({"type": "usage", "tokens_in": 20, "tokens_out": 5, "cost_usd": 0.02, "model": "fake-model-2"})
send({"type": "usage", "tokens_out": 2})
final({"ok": True})
