"""An OpenAI Agents SDK agent with a scripted model, its tools routed by ``trialrun.agent.wrap``.

Two tools run in parallel in one model turn (one fails: the SDK turns that into a message for
the model), then a handoff to a second agent whose own tool is wrapped too. The output lists
what the model was shown for each tool call, which must be the same in record and replay.
"""

import asyncio
import os

from agents.agent import Agent
from agents.handoffs import handoff
from agents.run import Runner
from agents.testing import ScriptedModel, assistant_message, function_call
from agents.tool import function_tool
from agents.tracing import set_tracing_disabled

import trialrun.agent as sdk

set_tracing_disabled(True)


def real_only(name: str) -> None:
    if os.environ.get("TRIALRUN_MODE") == "replay":
        raise RuntimeError(f"the real {name} ran during replay")


@function_tool
def search_docs(q: str) -> dict:
    """Search the help center."""
    real_only("search_docs")
    return {"hits": [{"title": "Reset your password", "q": q}], "pid": os.getpid()}


@function_tool
async def get_order(order_id: int) -> dict:
    """Look an order up."""
    real_only("get_order")
    raise LookupError(f"order {order_id} does not exist")


@function_tool
def escalate(reason: str) -> str:
    """Open a ticket for a human."""
    real_only("escalate")
    return f"ticket opened by {os.getpid()}: {reason}"


session = sdk.connect()
assert session is not None
question = session.input["question"]
model = ScriptedModel(
    [
        [
            function_call("search_docs", {"q": question}, call_id="c1"),
            function_call("get_order", {"order_id": 7}, call_id="c2"),
        ],
        [function_call("transfer_to_billing", {}, call_id="c3")],
        [function_call("escalate", {"reason": question}, call_id="c4")],
        [assistant_message("escalated")],
    ]
)
billing = Agent(name="billing", model=model, tools=[escalate])
triage = Agent(
    name="triage", model=model, tools=[search_docs, get_order], handoffs=[handoff(billing)]
)
sdk.wrap(triage)
result = asyncio.run(Runner.run(triage, question))
seen = [
    {"call_id": item["call_id"], "output": item["output"]}
    for item in model.last_call.input
    if isinstance(item, dict) and item.get("type") == "function_call_output"
]
session.final_output({"final": result.final_output, "model_saw": seen})
