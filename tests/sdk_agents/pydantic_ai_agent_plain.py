"""A PydanticAI agent written as its docs show: a model named by string, the provider's client
made from OPENAI_BASE_URL and OPENAI_API_KEY. It talks the stdio protocol itself."""

import json
import sys

from pydantic_ai import Agent

task = json.loads(sys.stdin.readline())
agent = Agent("openai-chat:gpt-4o-mini", instructions="Answer in one line.")
result = agent.run_sync(task["input"]["question"])
sys.stdout.write(json.dumps({"type": "final_output", "output": {"answer": result.output}}) + "\n")
sys.stdout.flush()
