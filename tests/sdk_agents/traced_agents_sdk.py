"""An OpenAI Agents SDK agent written as the SDK's docs show: no client set up by hand (the
default one reads OPENAI_BASE_URL and OPENAI_API_KEY) and tracing left on, its default.

With ``flush_traces`` in its input it sends its traces before answering, as a long-running agent
would sooner or later; the SDK would otherwise send them as the process exits.
"""

import asyncio

from agents import Agent, Runner
from agents.tracing import get_trace_provider

import trialrun.agent as sdk

session = sdk.connect()
assert session is not None
agent = Agent(name="helper", instructions="Answer in one line.", model="gpt-4o-mini")
result = asyncio.run(Runner.run(agent, session.input["question"]))
if session.input.get("flush_traces"):
    get_trace_provider().force_flush()
session.final_output({"answer": result.final_output})
