"""A PydanticAI agent on a ``FunctionModel``, its tools routed by ``trialrun.agent.wrap``.

The scripted model calls two tools in one turn: one returns a pydantic model (the model sees its
JSON), one raises ``ModelRetry`` (the model sees a retry prompt); then it answers with what it
was shown, which must be the same in record and replay.
"""

import os

from pydantic import BaseModel
from pydantic_ai import Agent, ModelRetry
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

import trialrun.agent as sdk


class Hits(BaseModel):
    titles: list[str]
    pid: int


def real_only(name: str) -> None:
    if os.environ.get("TRIALRUN_MODE") == "replay":
        raise RuntimeError(f"the real {name} ran during replay")


session = sdk.connect()
assert session is not None
question = session.input["question"]
shown: list[dict] = []


def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    returns = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
    if not returns:
        return ModelResponse(
            parts=[
                ToolCallPart("search_docs", {"q": question}, tool_call_id="c1"),
                ToolCallPart("get_order", {"order_id": 7}, tool_call_id="c2"),
            ]
        )
    shown.extend({"tool": p.tool_name, "saw": p.model_response_str()} for p in returns)
    return ModelResponse(parts=[TextPart("answered")])


agent = Agent(FunctionModel(scripted))


@agent.tool_plain
def search_docs(q: str) -> Hits:
    """Search the help center."""
    real_only("search_docs")
    return Hits(titles=[q.title()], pid=os.getpid())


@agent.tool_plain(retries=1)
async def get_order(order_id: int) -> str:
    """Look an order up."""
    real_only("get_order")
    raise ModelRetry(f"order {order_id} does not exist, ask for another number")


result = sdk.wrap(agent).run_sync(question)
session.final_output({"final": result.output, "model_saw": shown})
