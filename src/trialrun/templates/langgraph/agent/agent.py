"""Example LangGraph agent (needs `pip install 'trialrun[langgraph]'`).

A model node (ChatOpenAI) and a ToolNode in a StateGraph. The only trialrun-specific lines are
`trialrun.agent.wrap(graph)`, which routes the ToolNode's calls through the runner (recorded in
record mode, answered from the cassette in replay), and the session that reads the task and
returns the final output. The model is reached through OPENAI_BASE_URL, which trialrun points at
its model gateway.
"""

import json
import sys
from typing import Annotated, TypedDict

from langchain_core.messages import AnyMessage, HumanMessage, SystemMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode, tools_condition

import trialrun.agent

ARTICLES = {
    "reset password": "Use 'Forgot password' on the sign-in page; the link is valid for 1 hour.",
    "billing": "Invoices are under Settings > Billing.",
}


@tool
def search_docs(q: str) -> dict:
    """Search the help center for articles about the query."""
    hits = [{"title": title, "text": text} for title, text in ARTICLES.items() if q in title]
    return {"query": q, "hits": hits}


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


model = ChatOpenAI(model="gpt-4o-mini", temperature=0).bind_tools([search_docs])


def call_model(state: State) -> dict:
    return {"messages": [model.invoke(state["messages"])]}


builder = StateGraph(State)
builder.add_node("model", call_model)
builder.add_node("tools", ToolNode([search_docs]))
builder.add_edge(START, "model")
builder.add_conditional_edges("model", tools_condition)
builder.add_edge("tools", "model")
graph = trialrun.agent.wrap(builder.compile())

INSTRUCTIONS = (
    "Answer the support ticket. Call search_docs first, then reply with a JSON object with the "
    'keys "category" and "reply".'
)


def main():
    session = trialrun.agent.connect()
    ticket = session.input["ticket"] if session else " ".join(sys.argv[1:])
    messages = [SystemMessage(INSTRUCTIONS), HumanMessage(ticket)]
    final = graph.invoke({"messages": messages})["messages"][-1]
    output = json.loads(final.content)
    if session:
        session.final_output(output)
    else:
        print(json.dumps(output))


if __name__ == "__main__":
    main()
