"""An agent with plain ``@tool`` functions, sync and async, and the session API.

The real tools refuse to run in replay mode, and their results carry the recording process's
pid: a replay that gives the same output got it from the cassette.
"""

import asyncio
import dataclasses
import os

import trialrun.agent as sdk


@dataclasses.dataclass
class Order:
    order_id: int
    status: str


def real_only(name: str) -> None:
    if os.environ.get("TRIALRUN_MODE") == "replay":
        raise RuntimeError(f"the real {name} ran during replay")


@sdk.tool
def search_docs(q: str, limit: int = 2) -> dict:
    real_only("search_docs")
    return {"hits": [f"{q} #{i}" for i in range(limit)], "pid": os.getpid()}


@sdk.tool
async def get_order(order_id: int) -> Order:
    real_only("get_order")
    await asyncio.sleep(0.01 * (3 - order_id))  # finish out of order: calls stay serialized
    return Order(order_id, f"shipped by {os.getpid()}")


@sdk.tool
def refund(order_id: int) -> dict:
    real_only("refund")
    raise PermissionError(f"refund of order {order_id} needs approval")


async def main() -> None:
    session = sdk.connect()
    assert session is not None
    print("a banner on stdout, which is not the channel", flush=True)
    hits = search_docs(session.input["q"])
    orders = await asyncio.gather(get_order(1), get_order(2))
    try:
        refund(1)
        refused = None
    except sdk.ToolCallError as error:
        refused = error.error
    session.log("looked everything up", data={"orders": len(orders)})
    session.usage(tokens_in=12, tokens_out=5, cost_usd=0.001, model="scripted")
    session.final_output(
        {
            "hits": hits,
            "orders": [dataclasses.asdict(order) for order in orders],
            "types": sorted({type(order).__name__ for order in orders}),
            "refused": refused,
        }
    )


asyncio.run(main())
