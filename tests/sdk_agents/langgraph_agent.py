"""A LangGraph ``StateGraph`` with a ``ToolNode``, run asynchronously, wrapped by ``sdk.wrap``.

A scripted model node asks for three tool calls in one turn (one async tool, one sync tool run
twice with different arguments), then answers. ``ainvoke`` runs the calls as concurrent asyncio
tasks; the SDK serializes them in the order they were made.
"""

import asyncio
import os
from typing import Annotated, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode, tools_condition

import trialrun.agent as sdk


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def real_only(name: str) -> None:
    if os.environ.get("TRIALRUN_MODE") == "replay":
        raise RuntimeError(f"the real {name} ran during replay")


@tool
async def search_docs(q: str) -> list:
    """Search the help center."""
    real_only("search_docs")
    await asyncio.sleep(0.02)
    return [{"title": q.upper(), "pid": os.getpid()}]


@tool
def weather(city: str) -> str:
    """Today's weather."""
    real_only("weather")
    return f"sunny in {city} (pid {os.getpid()})"


session = sdk.connect()
assert session is not None
question = session.input["question"]


def model_node(state: State) -> dict:
    if any(isinstance(m, ToolMessage) for m in state["messages"]):
        return {"messages": [AIMessage(content="answered")]}
    calls = [
        {"name": "search_docs", "args": {"q": question}, "id": "c1"},
        {"name": "weather", "args": {"city": "Oslo"}, "id": "c2"},
        {"name": "weather", "args": {"city": "Lima"}, "id": "c3"},
    ]
    return {"messages": [AIMessage(content="", tool_calls=calls)]}


builder = StateGraph(State)
builder.add_node("model", model_node)
builder.add_node("tools", ToolNode([search_docs, weather]))
builder.add_edge(START, "model")
builder.add_conditional_edges("model", tools_condition)
builder.add_edge("tools", "model")
graph = sdk.wrap(builder.compile())

state = asyncio.run(graph.ainvoke({"messages": [{"role": "user", "content": question}]}))
seen = [
    {"id": m.tool_call_id, "content": m.content, "status": m.status}
    for m in state["messages"]
    if isinstance(m, ToolMessage)
]
session.final_output({"final": state["messages"][-1].content, "model_saw": seen})
