"""A fake agent that sends the messages listed in its case input, in order.

``input.script`` is a list of protocol messages. After each ``tool_call`` the agent reads the
runner's answer and keeps it; ``final_output`` goes out last with every answer it got, so the
trace shows exactly what the runner sent back.
"""

from __future__ import annotations

from _jsonl import receive, send


def main() -> None:
    task = receive()["input"]
    answers = []
    for message in task["script"]:
        send(message)
        if message["type"] == "tool_call":
            answers.append(receive())
    send({"type": "final_output", "output": {"answers": answers, "calls": len(answers)}})


if __name__ == "__main__":
    main()
