"""One run's side of the gateway: its mode, cursor or recordings, and the model calls it made.

A run is opened by the runner (``Gateway.open_run``) and addressed by the agent through the base
URLs ``RunScope.env()`` gives it. Every request of the run becomes a ``ModelCall``, replayed or
forwarded, successful or not (a cassette mismatch, an unreachable upstream and a path the gateway
does not serve are failed calls too), so the run's events show all model traffic.

A run's state is the recorder's per-case core (``httprec.traffic.Traffic``) with the gateway's
provider-aware parts; in record mode each request reserves its place in the cassette when it
*arrives* (``httprec.arrivals``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

from trialrun.gateway.cassette import ModelCassette, Recording
from trialrun.gateway.normalize import RequestNormalizer
from trialrun.httprec.traffic import Traffic

Mode = Literal["record", "replay", "live"]
MODES: tuple[Mode, ...] = ("record", "replay", "live")
REPLAY_API_KEY = "sk-replay"
API_KEY_VARIABLES = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")
PROVIDER_URL_VARIABLES: Mapping[str, tuple[str, ...]] = {
    "azure": ("AZURE_OPENAI_ENDPOINT",),
    "gemini": ("GOOGLE_GEMINI_BASE_URL",),
    "bedrock": ("AWS_ENDPOINT_URL_BEDROCK_RUNTIME",),
}
"""Where the Azure OpenAI, google-genai and boto3 clients read their endpoint. Set only for a
provider the suite names or whose variable the agent's environment already has: an agent may
choose its provider by which of these is set, and trialrun must not make that choice for it."""


@dataclass(frozen=True)
class ModelCall:
    """One request an agent made through the gateway, as the run's events record it."""

    provider: str
    path: str
    model: str | None
    stream: bool
    status: int
    tokens_in: int | None
    tokens_out: int | None
    cost_usd: float | None
    key: str | None
    """The recording key (None when the request never got that far: an unserved path)."""
    duration_ms: float
    replayed: bool
    error: str | None
    """Why the call failed (cassette mismatch, upstream unreachable, not served), or None."""
    warning: str | None = None
    """A drift warning when ``--lenient`` served a recording of a different request."""
    tokens_cached: int | None = None
    timestamp: float = 0.0
    """When the request arrived (seconds since the epoch)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "provider": self.provider,
            "path": self.path,
            "model": self.model,
            "stream": self.stream,
            "status": self.status,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "tokens_cached": self.tokens_cached,
            "cost_usd": self.cost_usd,
            "key": self.key,
            "duration_ms": round(self.duration_ms, 3),
            "replayed": self.replayed,
            "error": self.error,
            "warning": self.warning,
            "timestamp": self.timestamp,
        }


class RunScope:
    """The handle of an open run: where its agent sends model calls."""

    def __init__(self, state: RunState, gateway_url: str) -> None:
        """``gateway_url``: the gateway's URL as the run's agent reaches it (with the run's key)."""
        self._state = state
        self._gateway_url = gateway_url

    @property
    def run_id(self) -> str:
        return self._state.run_id

    @property
    def mode(self) -> Mode:
        return cast(Mode, self._state.mode)  # open_run takes MODES only

    @property
    def cassette_path(self) -> Path:
        return self._state.cassette_path

    @property
    def base_url(self) -> str:
        """``http://HOST:PORT[/key/<key>]/run/<run-id>``: the prefix of both providers' base
        URLs. It holds the run's key: hand it to the run's agent only, never write it down."""
        return f"{self._gateway_url}/run/{self.run_id}"

    @property
    def openai_base_url(self) -> str:
        return f"{self.base_url}/openai/v1"

    @property
    def anthropic_base_url(self) -> str:
        return f"{self.base_url}/anthropic"

    def provider_base_url(self, provider: str) -> str:
        """``<base_url>/<provider>``: what an SDK of that provider takes as its base URL or
        endpoint (``GOOGLE_GEMINI_BASE_URL``, ``AZURE_OPENAI_ENDPOINT``,
        ``AWS_ENDPOINT_URL_BEDROCK_RUNTIME``; OpenAI's adds ``/v1``). Holds the run's key."""
        return f"{self.base_url}/{provider}"

    def provider_env(self, providers: Iterable[str]) -> dict[str, str]:
        """The variables that point ``providers``' SDKs at this run (``PROVIDER_URL_VARIABLES``)."""
        return {
            name: self.provider_base_url(provider)
            for provider in providers
            for name in PROVIDER_URL_VARIABLES.get(provider, ())
        }

    def env(self, agent_env: Mapping[str, str] | None = None) -> dict[str, str]:
        """Variables to add to the agent's environment.

        ``OPENAI_BASE_URL`` (and ``OPENAI_API_BASE``, which LangChain's ChatOpenAI and LiteLLM
        read too) and ``ANTHROPIC_BASE_URL`` (and ``ANTHROPIC_API_URL``, which LangChain's
        ChatAnthropic reads first, and ``ANTHROPIC_API_BASE``, which LiteLLM reads first). In
        replay mode, when ``agent_env`` is given and lacks
        ``OPENAI_API_KEY`` or ``ANTHROPIC_API_KEY``, that key is set to ``sk-replay``: SDKs refuse
        to start without a key, and a call that escapes the gateway then fails authentication
        instead of spending money.
        """
        env = {
            "OPENAI_BASE_URL": self.openai_base_url,
            "OPENAI_API_BASE": self.openai_base_url,
            "ANTHROPIC_BASE_URL": self.anthropic_base_url,
            "ANTHROPIC_API_URL": self.anthropic_base_url,
            "ANTHROPIC_API_BASE": self.anthropic_base_url,
        }
        if self.mode == "replay" and agent_env is not None:
            for name in API_KEY_VARIABLES:
                if not agent_env.get(name):
                    env[name] = REPLAY_API_KEY
        return env

    def calls(self) -> list[ModelCall]:
        """The model calls completed so far, in completion order."""
        return self._state.calls()

    def unused_recordings(self) -> list[Recording]:
        """In replay: the recordings no request consumed (so far); empty in other modes."""
        return self._state.unused_recordings()


@dataclass(slots=True, eq=False)
class RunState(Traffic[Recording]):
    """One open run of the gateway: the recorder's per-case core (``httprec.traffic.Traffic``:
    mode, cassette path, recordings in arrival order, requests in flight) plus what is
    provider-aware: the run's key, its normalizer, the model cassette it replays and the model
    calls it made. Every method is thread-safe."""

    run_id: str = field(kw_only=True)
    normalizer: RequestNormalizer = field(kw_only=True)
    replay: ModelCassette | None = field(default=None, kw_only=True)
    key: str | None = field(default=None, kw_only=True)
    update: ModelCassette | None = field(default=None, kw_only=True)
    """Record mode as ``--mode update``: the recordings before the run; a request that matches
    an unused one is answered from it (``exchange.answer_kept``), the others are recorded."""
    old_lines: list[str] = field(default_factory=list, kw_only=True)
    """Update mode: the old file's lines, which the recordings answered from are written as."""
    keep_unused: bool = field(default=False, kw_only=True)
    """Update mode: the old recordings no request used stay in the new file, after the others."""
    _calls: list[ModelCall] = field(default_factory=list, kw_only=True)
    _occurrences: Counter[str] = field(default_factory=Counter, kw_only=True)

    @property
    def cassette_path(self) -> Path:
        return self.cassette

    def reserve(self, key: str) -> tuple[int, int]:
        """A place in the cassette for a request that just arrived: ``(slot, occurrence)``."""
        with self.lock:
            occurrence = self._occurrences[key]
            self._occurrences[key] += 1
            return self.arrivals.reserve(), occurrence

    def recordings_arrived(self) -> list[tuple[float, Recording]]:
        """``recordings()`` with when each request arrived (seconds since the epoch)."""
        return self.arrivals.arrived()

    def unused_recordings(self) -> list[Recording]:
        """In replay: the recordings no request consumed (so far); empty in other modes."""
        if self.replay is None:
            return []
        with self.lock:
            return self.replay.unused()

    def add_call(self, call: ModelCall) -> None:
        with self.lock:
            self._calls.append(call)

    def calls(self) -> list[ModelCall]:
        with self.lock:
            return list(self._calls)
