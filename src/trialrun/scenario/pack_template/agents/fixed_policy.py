"""Fixed refund policy: every refund attempt carries the same idempotency key.

A retry after a timeout is deduplicated by the payment service, so the customer is paid once.
"""

from __future__ import annotations

import json
import sys
from typing import Any

MAX_ATTEMPTS = 3


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def call(name: str, args: dict[str, Any], counter: list[int]) -> dict[str, Any]:
    counter[0] += 1
    send({"type": "tool_call", "name": name, "call_id": f"c{counter[0]}", "args": args})
    reply: dict[str, Any] = json.loads(sys.stdin.readline())
    return reply


def call_with_retry(name: str, args: dict[str, Any], counter: list[int]) -> dict[str, Any]:
    reply: dict[str, Any] = {}
    for _ in range(MAX_ATTEMPTS):
        reply = call(name, args, counter)
        if reply.get("ok"):
            return reply
    return reply


def main() -> None:
    task = json.loads(sys.stdin.readline())["input"]
    counter = [0]
    order_id = task["order_id"]
    order = call_with_retry("lookup_order", {"order_id": order_id}, counter)
    if not order.get("ok"):
        send({"type": "task_error", "message": f"cannot look up order {order_id}"})
        return
    amount = min(task["requested_amount"], order["result"]["total"])
    refund_args: dict[str, Any] = {"order_id": order_id, "amount": amount}
    # One key per order, reused by every retry: the payment service dedupes on it.
    refund_args["idempotency_key"] = f"refund-{order_id}"
    refund = call_with_retry("issue_refund", refund_args, counter)
    if not refund.get("ok"):
        send({"type": "task_error", "message": f"refund failed: {refund.get('error')}"})
        return
    note = f"refunded {amount} ({task.get('reason', 'customer request')})"
    call_with_retry("create_ticket", {"order_id": order_id, "note": note}, counter)
    subject = f"Your refund for order {order_id}"
    call_with_retry("send_email", {"to": task["customer_email"], "subject": subject}, counter)
    output = {"order_id": order_id, "refunded": amount, "refund_id": refund["result"]["refund_id"]}
    send({"type": "final_output", "output": output})


if __name__ == "__main__":
    main()
