"""Demo agent for trialrun: triages a support ticket with one search_docs tool call.

It speaks the trialrun/RunLedger JSONL protocol: protocol messages on stdout, logs on stderr.
"""

import json
import sys


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def main():
    for line in sys.stdin:
        message = json.loads(line)
        if message["type"] == "task_start":
            ticket = message["input"].get("ticket", "")
            print(f"searching docs for {ticket!r}", file=sys.stderr)
            send({"type": "tool_call", "name": "search_docs", "call_id": "c1", "args": {"q": ticket}})
        elif message["type"] == "tool_result":
            send(
                {
                    "type": "final_output",
                    "output": {"category": "account", "reply": "Reset password instructions sent."},
                }
            )
            return 0
    return 1


if __name__ == "__main__":
    sys.exit(main())
