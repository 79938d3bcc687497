"""A support agent that refunds a damaged order; ``buggy`` double-refunds after a timeout.

Usage: ``python refund_agent.py buggy|fixed``. Both look the order up, issue the refund (retrying
a failed attempt), then e-mail the customer. The buggy agent's timeout handler queues a retry of
its own on top of the generic one, so one gateway timeout leads to two more refunds: the
production incident (tests/data/incidents/). The fixed agent retries once per failure.

The card is charged back through the order's ``payment_token``; after redaction both that token
and the recorded ``card_number`` read ``[REDACTED]``, so a redacted recording still matches.
"""

from __future__ import annotations

import re
import sys
from typing import Any

from _jsonl import call_tool, final, task_input


def refund(variant: str, args: dict[str, Any]) -> list[str]:
    refund_ids: list[str] = []
    pending = 1
    while pending:
        pending -= 1
        answer = call_tool("issue_refund", args)
        if answer["ok"]:
            refund_ids.append(answer["result"]["refund_id"])
            continue
        pending += 1
        if variant == "buggy" and "timeout" in (answer.get("error") or ""):
            pending += 1
    return refund_ids


def main(variant: str) -> None:
    task = task_input()
    found = re.search(r"ord_\w+", task["request"])
    if found is None:
        final({"reply": "Which order is it about?", "refund_ids": []})
        return
    order = call_tool("lookup_order", {"order_id": found.group(0)})
    if not order["ok"]:
        final({"reply": "I could not find that order.", "refund_ids": []})
        return
    details = order["result"]
    refund_ids = refund(
        variant,
        {
            "order_id": details["order_id"],
            "amount": details["total"],
            "card_number": details["payment_token"],
        },
    )
    call_tool("send_email", {"to": task["customer"]["email"], "template": "refund_confirmation"})
    final(
        {
            "reply": f"Your refund of ${details['total']:.2f} has been issued.",
            "refund_ids": refund_ids,
        }
    )


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "fixed")
