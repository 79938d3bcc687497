"""The model gateway of a run: started once, a URL prefix per case, its calls in the trace.

A suite that declares ``model_gateway:`` gets one gateway for the whole run, and each case its
own URL prefix in ``OPENAI_BASE_URL`` / ``ANTHROPIC_BASE_URL``, so parallel cases never share a
replay cursor. After the case, the gateway's calls become ``usage`` events and
``AgentRun.model_calls``; replay reports the recordings no call used as ``model:<model>`` and
fails an agent that ended well without a single model call while its recording holds some.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from trialrun.base.accesskey import new_key
from trialrun.base.results import AgentRun, ModelCall, RecordingPlace
from trialrun.config import Case, Suite
from trialrun.config.models import Mode, ModelGateway
from trialrun.running.recording_paths import model_cassette_path
from trialrun.running.tool_bodies import ToolBodies
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

    def __init__(
        self,
        suite: Suite,
        case: Case,
        mode: Mode,
        gateway: Gateway,
        run_id: str,
        *,
        update: bool = False,
        keep_unused: bool = False,
    ) -> None:
        """``update``, ``keep_unused``: record mode as ``--mode update`` (``Gateway.open_run``)."""
        self._update = update
        self._keep_unused = keep_unused
        self._suite = suite
        self._case = case
        self._mode = mode
        self._gateway = gateway
        self._run_id = run_id
        self._scope: RunScope | None = None

    def open(self, agent_env: Mapping[str, str] | None) -> dict[str, str]:
        path = model_cassette_path(self._case)
        scope = self._gateway.open_run(
            self._run_id,
            path,
            self._mode,
            key=new_key(),
            update=self._update,
            keep_unused=self._keep_unused,
        )
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

    def close(self, run: AgentRun, unused: list[str], *, clean: bool, bodies: ToolBodies) -> None:
        """Merge the gateway's calls into ``run``, add the recordings no call used to ``unused``;
        the recording is committed when ``clean`` and the case has no failure. Record marks
        the calls made inside a tool's body; ``bodies`` hears of them, and of the recordings
        replay left alone because the tool was answered from its cassette."""
        scope = self._scope
        if scope is None:
            return
        inside = bodies.inside
        calls = self._gateway.close_run(
            self._run_id,
            clean=clean and run.failure is None,
            inside_tool=inside,
            keep=bodies.kept_by_update if self._update else None,
        )
        if inside is not None:
            bodies.made("model", [inside(call.timestamp) for call in calls])
        _merge_model_calls(run, calls)
        left = bodies.unused("model", scope.unused_recordings(), _recording_inside)
        unused += [_model_recording_name(r) for r in left]
        path = str(model_cassette_path(self._case).resolve())
        run.unused_places += [
            RecordingPlace("model", path, r.line, _model_recording_name(r)) for r in left if r.line
        ]
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


def _recording_inside(recording: Recording) -> str | None:
    return recording.inside_tool


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
        if call.warning:
            _warn(run, f"model call {call.provider} {call.path}: {call.warning}", call.timestamp)
        if call.error and MISMATCH in call.error:
            fail_mismatch(run, f"model call {call.provider} {call.path}: {call.error}")
    if calls:
        order_by_time(run)


def _warn(run: AgentRun, message: str, timestamp: float) -> None:
    """A warning of the case (a lenient replay's drift), kept in its results and its event log."""
    run.warnings.append(message)
    run.events.append(
        {
            "type": "log",
            "case_id": run.case_id,
            "timestamp": timestamp,
            "level": "warning",
            "message": message,
            "data": {"source": "model_gateway"},
        }
    )
