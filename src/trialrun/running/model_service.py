"""The model gateway of a run: started once, a URL prefix per case, its calls in the trace.

A suite that declares ``model_gateway:`` gets one gateway for the whole run, and each case its
own URL prefix in ``OPENAI_BASE_URL`` / ``ANTHROPIC_BASE_URL``, so parallel cases never share a
replay cursor. After the case, the gateway's calls become ``usage`` events and
``AgentRun.model_calls``; replay reports the recordings no call used as ``model:<model>`` and
fails an agent that ended well without a single model call while its recording holds some.
"""

from __future__ import annotations

import bisect
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trialrun.base.accesskey import new_key
from trialrun.base.results import AgentRun, ModelCall, count_names
from trialrun.config import Case, Suite
from trialrun.config.models import Mode, ModelGateway
from trialrun.running.recording_paths import model_cassette_path
from trialrun.running.trace_merge import MISMATCH, fail, fail_mismatch, order_by_time

if TYPE_CHECKING:
    from trialrun.gateway import Gateway, Price, RunScope
    from trialrun.gateway import ModelCall as GatewayCall
    from trialrun.gateway.cassette import Recording
    from trialrun.httprec.front import HttpRecorder


def start_gateway(
    settings: ModelGateway,
    suite_dir: Path,
    prices: dict[str, Price] | None,
    front: HttpRecorder | None = None,
) -> Gateway:
    """The run's gateway, on the listener of the run's HTTP recorder when there is one (live
    mode has none: the gateway listens on its own)."""
    from trialrun.gateway import Gateway

    if prices is None:
        prices = load_suite_prices(settings, suite_dir)
    gateway = Gateway(
        upstreams={str(provider): url for provider, url in settings.upstreams.items()},
        normalization=settings.normalization,
        prices=prices,
        lenient=settings.lenient,
        # Agents run in our working directory and some (Claude Code) put it in their prompts:
        # a checkout at another path must still match the recordings.
        workdir=Path.cwd(),
    )
    if front is None:
        gateway.start()
    else:
        gateway.attach(front)
    return gateway


def load_suite_prices(settings: ModelGateway, suite_dir: Path) -> dict[str, Price] | None:
    """The suite's ``model_gateway.prices`` table, if it names one (ConfigErrors at its lines)."""
    if settings.prices is None:
        return None
    from trialrun.config.paths import display_path
    from trialrun.gateway import load_prices

    path = (suite_dir / settings.prices).resolve()
    return load_prices(path, display=display_path(path))


class CaseModel:
    """One case's run on the gateway: its base URLs for the agent, then the calls it saw."""

    def __init__(self, suite: Suite, case: Case, mode: Mode, gateway: Gateway, run_id: str) -> None:
        self._suite = suite
        self._case = case
        self._mode = mode
        self._gateway = gateway
        self._run_id = run_id
        self._scope: RunScope | None = None

    def open(self, agent_env: Mapping[str, str] | None) -> dict[str, str]:
        path = model_cassette_path(self._case)
        scope = self._gateway.open_run(self._run_id, path, self._mode, key=new_key())
        self._scope = scope
        # No agent_env: the credentials are the replay environment's (running.replay_env).
        env = dict(scope.env())
        env.update(scope.provider_env(self._providers_in_use(agent_env)))
        return env

    def _providers_in_use(self, agent_env: Mapping[str, str] | None) -> list[str]:
        """The providers beyond OpenAI and Anthropic whose endpoint variable the agent gets:
        those the suite names in ``model_gateway.upstreams`` or whose variable it already has."""
        from trialrun.gateway.runs import PROVIDER_URL_VARIABLES

        seen = os.environ if agent_env is None else agent_env
        gateway = self._suite.config.model_gateway
        named = set() if gateway is None else set(gateway.upstreams)
        return [
            provider
            for provider, names in PROVIDER_URL_VARIABLES.items()
            if provider in named or any(name in seen for name in names)
        ]

    def discard(self) -> None:
        """End the case's run on the gateway, keeping nothing it recorded."""
        if self._scope is not None:
            self._gateway.close_run(self._run_id, clean=False)

    def close(self, run: AgentRun, unused: list[str], *, clean: bool) -> None:
        """Merge the gateway's calls into ``run``, add the recordings no call used to ``unused``;
        the recording is committed when ``clean`` and the case has no failure."""
        scope = self._scope
        if scope is None:
            return
        inside = _inside_tool(run) if self._mode == "record" else None
        calls = self._gateway.close_run(
            self._run_id, clean=clean and run.failure is None, inside_tool=inside
        )
        if inside is not None:
            _note_inside(run, [inside(call.timestamp) for call in calls], "record")
        _merge_model_calls(run, calls)
        left, skipped = _split_skipped(run, scope.unused_recordings())
        unused += [_model_recording_name(r) for r in left]
        _note_inside(run, [r.inside_tool for r in skipped], "replay")
        if self._mode == "replay" and not calls and left and run.failure is None:
            fail(run, NO_MODEL_CALL, _no_model_call(len(left)), "fail")


NO_MODEL_CALL = "no_model_call"
"""The failure of a replayed case whose agent ended well without asking the gateway anything
while its model recording holds calls: whatever answered it, the recording did not."""


def _no_model_call(recorded: int) -> str:
    return (
        f"the agent made no model call through the gateway, yet its model recording holds "
        f"{recorded}: expected it to ask for them. A client trialrun does not point at the "
        "gateway (a base URL set in code?) would be answered by something else; if the agent "
        "no longer needs a model here, re-record the case (`trialrun run --mode record`)"
    )


def _inside_tool(run: AgentRun) -> Callable[[float], str | None]:
    """Which tool was running (its body, in the agent or a tool module) at a given time.

    From the case's ``tool_call`` / ``tool_result`` events; MCP calls and handoffs run no body
    of the agent's. Only an unused recording is ever judged by it, so a model call of another
    thread that happened to arrive during a tool's run costs nothing: replay still asks for it.
    """
    opened: dict[Any, tuple[float, str]] = {}
    windows: list[tuple[float, float, str]] = []
    for event in run.events:
        kind = event.get("type")
        if kind == "tool_call" and "mcp_server" not in event and event.get("kind") != "handoff":
            opened[event.get("call_id")] = (float(event["timestamp"]), str(event["name"]))
        elif kind == "tool_result" and event.get("call_id") in opened:
            begin, name = opened.pop(event.get("call_id"))
            windows.append((begin, float(event["timestamp"]), name))
    windows.sort()
    starts = [begin for begin, _end, _name in windows]

    def inside(arrived: float) -> str | None:
        index = bisect.bisect_right(starts, arrived) - 1
        if index >= 0 and arrived <= windows[index][1]:
            return windows[index][2]
        return None

    return inside


def _split_skipped(
    run: AgentRun, unused: list[Recording]
) -> tuple[list[Recording], list[Recording]]:
    """Unused recordings: those that are unused, and those made inside the body of a tool that
    replay answered from its cassette (the body never runs there, so neither does the call)."""
    answered = {call.name for call in run.tool_calls}
    left: list[Recording] = []
    skipped: list[Recording] = []
    for recording in unused:
        (skipped if recording.inside_tool in answered else left).append(recording)
    return left, skipped


def _note_inside(run: AgentRun, tools: list[str | None], mode: Mode) -> None:
    """Say in the case's log which model calls belong to tool bodies replay never runs."""
    counts = count_names(tool for tool in tools if tool is not None)
    if not counts:
        return
    which = ", ".join(f"{n} inside {tool!r}" for tool, n in counts.items())
    if mode == "record":
        message = (
            f"model calls made by tool bodies: {which}; replay answers those tools from the "
            "tool cassette and never runs their bodies, so it will not repeat these calls"
        )
    else:
        message = (
            f"model recordings made by tool bodies while recording: {which}; replay answered "
            "those tools from the tool cassette, so it never asked for them (not unused)"
        )
    run.events.append(
        {
            "type": "log",
            "case_id": run.case_id,
            "timestamp": time.time(),
            "level": "info",
            "message": message,
            "data": {"source": "trialrun", "inside_tool": counts},
        }
    )


def _model_recording_name(recording: Recording) -> str:
    """``model:gpt-4o-mini``; ``model:openai /v1/embeddings`` when the request names no model."""
    return f"model:{recording.model or f'{recording.provider} {recording.path}'}"


def _merge_model_calls(run: AgentRun, calls: list[GatewayCall]) -> None:
    for call in calls:
        model_call = ModelCall(
            provider=call.provider,
            endpoint=call.path,
            model=call.model,
            ok=call.error is None and call.status < 400,
            tokens_in=call.tokens_in,
            tokens_out=call.tokens_out,
            cost_usd=call.cost_usd,
            duration_ms=call.duration_ms,
            error=call.error,
        )
        run.model_calls.append(model_call)
        run.usage.add(call.tokens_in, call.tokens_out, call.cost_usd)
        if call.model is not None:
            run.usage.model = call.model
        run.events.append(
            {
                "type": "usage",
                "case_id": run.case_id,
                "timestamp": call.timestamp,
                "tokens_in": call.tokens_in,
                "tokens_out": call.tokens_out,
                "cost_usd": call.cost_usd,
                "model": call.model,
                "source": "model_gateway",
                "provider": call.provider,
                "endpoint": call.path,
                "ok": model_call.ok,
                "error": call.error,
            }
        )
        if call.error and MISMATCH in call.error:
            fail_mismatch(run, f"model call {call.provider} {call.path}: {call.error}")
    if calls:
        order_by_time(run)
