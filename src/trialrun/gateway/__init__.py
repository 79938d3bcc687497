"""The model gateway: record and replay an agent's model calls over HTTP (OpenAI, Anthropic,
Azure OpenAI, Gemini, Bedrock: one recorder, a provider plugin per API, ``provider``).

An agent reaches the gateway through its SDK's base URL (``OPENAI_BASE_URL``...); in record mode
the gateway forwards each call to the provider and keeps the answer (a stream as its exact SSE
bytes), in replay mode it answers from the run's cassette without network. Stdlib only.

    gw = Gateway(upstreams=None, normalization=None, prices=None, lenient=False)
    gw.start()                                   # gw.url == "http://127.0.0.1:PORT"
    scope = gw.open_run("case-1", Path("case-1.jsonl"), "replay")
    env = {**os.environ, **scope.env(os.environ)}   # run the agent with env
    calls = gw.close_run("case-1", clean=True)   # list[ModelCall]; writes the cassette in record
    gw.stop()

See docs/gateway.md for routes, the cassette format and the normalization rules.
"""

from __future__ import annotations

from trialrun.gateway.cassette import ModelCassette, Recording
from trialrun.gateway.normalize import RequestNormalizer, request_key
from trialrun.gateway.providers import extract_usage
from trialrun.gateway.runs import Mode, ModelCall, RunScope
from trialrun.gateway.server import Gateway, UnservedRequest
from trialrun.gateway.usage import Price, Usage, load_prices

__all__ = [
    "Gateway",
    "Mode",
    "ModelCall",
    "ModelCassette",
    "Price",
    "Recording",
    "RequestNormalizer",
    "RunScope",
    "UnservedRequest",
    "Usage",
    "extract_usage",
    "load_prices",
    "request_key",
]
