"""Example OpenAI Agents SDK agent (needs `pip install 'trialrun[openai-agents]'`).

The only trialrun-specific lines are `trialrun.agent.wrap(agent)`, which routes the function
tools through the runner (recorded in record mode, answered from the cassette in replay), and the
session that reads the task and returns the final output. The model is reached through
OPENAI_BASE_URL, which trialrun points at its model gateway.
"""

import asyncio
import json
import sys

from agents import Agent, Runner, function_tool, set_default_openai_api, set_tracing_disabled

import trialrun.agent

set_tracing_disabled(True)  # traces would go to api.openai.com
set_default_openai_api("chat_completions")

ARTICLES = {
    "reset password": "Use 'Forgot password' on the sign-in page; the link is valid for 1 hour.",
    "billing": "Invoices are under Settings > Billing.",
}


@function_tool
def search_docs(q: str) -> dict:
    """Search the help center for articles about the query."""
    hits = [{"title": title, "text": text} for title, text in ARTICLES.items() if q in title]
    return {"query": q, "hits": hits}


agent = Agent(
    name="support",
    instructions=(
        "Answer the support ticket. Call search_docs first, then reply with a JSON object "
        'with the keys "category" and "reply".'
    ),
    tools=[search_docs],
    model="gpt-4o-mini",
)
agent = trialrun.agent.wrap(agent)


def main():
    session = trialrun.agent.connect()
    ticket = session.input["ticket"] if session else " ".join(sys.argv[1:])
    result = asyncio.run(Runner.run(agent, ticket))
    output = json.loads(result.final_output)
    if session:
        session.final_output(output)
    else:
        print(json.dumps(output))


if __name__ == "__main__":
    main()
