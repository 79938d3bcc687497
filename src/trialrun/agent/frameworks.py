"""``wrap(obj)``: recognize a framework's agent object and apply the matching adapter.

Recognition looks at the names of the object's classes, so it imports no framework: an object of
a framework's class means that framework is already imported. Each adapter module is imported
only when its kind of object shows up.
"""

from __future__ import annotations

from typing import TypeVar

T = TypeVar("T")

_SUPPORTED = (
    "an OpenAI Agents SDK Agent (agents.Agent), a PydanticAI Agent, or a LangGraph compiled "
    "graph (langchain.agents.create_agent(...), StateGraph(...).compile()) that runs its tools "
    "in a ToolNode"
)


def wrap(obj: T) -> T:
    """Route the tool calls of a framework agent through the trialrun runner.

    * OpenAI Agents SDK ``Agent``: its function tools (and those of its handoff agents and
      agents-as-tools) are wrapped in place; the same agent is returned.
    * LangGraph compiled graph (including ``create_agent``): every ``ToolNode`` gets the trialrun
      tool-call wrapper, innermost; the same graph is returned.
    * PydanticAI ``Agent``: returns a wrapper agent whose runs carry the trialrun capability (use
      the returned object; attribute access falls through to the agent).

    Outside the runner the wrapped agent behaves exactly as before. Raises ``TypeError`` for any
    other object.
    """
    classes = {f"{cls.__module__}.{cls.__qualname__}" for cls in type(obj).__mro__}
    if "agents.agent.Agent" in classes:
        from trialrun.agent.openai_agents import wrap_agent

        return wrap_agent(obj)
    if "pydantic_ai.agent.abstract.AbstractAgent" in classes:
        from trialrun.agent.pydantic_ai import wrap_agent as wrap_pydantic_agent

        return wrap_pydantic_agent(obj)
    if "langgraph.pregel.main.Pregel" in classes:
        from trialrun.agent.langchain import wrap_graph

        return wrap_graph(obj)
    raise TypeError(
        f"trialrun.agent.wrap() does not know {type(obj).__module__}.{type(obj).__qualname__} "
        f"objects; it supports {_SUPPORTED}. For anything else decorate the tool functions with "
        "@trialrun.agent.tool, or call trialrun.agent.connect().call_tool(name, args, run) "
        "where the agent runs a tool"
    )
