"""A LangChain ``create_agent`` agent with a scripted chat model and the trialrun middleware.

The model asks for two tools at once (LangGraph runs them in parallel threads), one of which
fails with a ``ToolException`` the tool turns into an error message; then it answers. The output
lists the tool messages the model was shown.
"""

import os

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import ToolException, tool

import trialrun.agent as sdk
from trialrun.agent.langchain import trialrun_middleware


class ScriptedChatModel(GenericFakeChatModel):
    """GenericFakeChatModel answers from its iterator; create_agent also needs bind_tools."""

    def bind_tools(self, tools, **kwargs):
        return self


def real_only(name: str) -> None:
    if os.environ.get("TRIALRUN_MODE") == "replay":
        raise RuntimeError(f"the real {name} ran during replay")


@tool
def search_docs(q: str) -> dict:
    """Search the help center."""
    real_only("search_docs")
    return {"hits": [q.title()], "pid": os.getpid()}


@tool
def get_order(order_id: int) -> str:
    """Look an order up."""
    real_only("get_order")
    raise ToolException(f"order {order_id} does not exist")


get_order.handle_tool_error = True  # the tool reports its ToolException to the model


session = sdk.connect()
assert session is not None
question = session.input["question"]
model = ScriptedChatModel(
    messages=iter(
        [
            AIMessage(
                content="",
                tool_calls=[
                    {"name": "search_docs", "args": {"q": question}, "id": "c1"},
                    {"name": "get_order", "args": {"order_id": 7}, "id": "c2"},
                ],
            ),
            AIMessage(content="answered"),
        ]
    )
)
agent = create_agent(model, [search_docs, get_order], middleware=[trialrun_middleware()])
state = agent.invoke({"messages": [{"role": "user", "content": question}]})
seen = sorted(
    (
        {"id": m.tool_call_id, "name": m.name, "content": m.content, "status": m.status}
        for m in state["messages"]
        if isinstance(m, ToolMessage)
    ),
    key=lambda m: m["id"],
)
session.final_output({"final": state["messages"][-1].content, "model_saw": seen})
