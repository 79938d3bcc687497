"""Replay is sealed for agents built on real SDKs exactly as their docs show.

Each agent records through ``trialrun run`` against a loopback stand-in of the provider and
replays with the stand-in gone. The OpenAI Agents SDK also sends traces to api.openai.com by
default. Recorded against a loopback
stand-in of the provider and replayed with that stand-in gone, the agent passes with nothing
leaving the machine; with the replay environment's tracing switch taken away, the trace upload is
caught and the case fails naming its destination.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from builders import only_run_dir, run_trialrun, write_suite
from gateway_fake_upstream import FakeUpstream
from paths import SDK_AGENTS_DIR

pytest.importorskip("agents")

AGENT = SDK_AGENTS_DIR / "traced_agents_sdk.py"
# The test's own environment must not decide the outcome: no real key, no tracing switch.
CLEAN_ENV: dict[str, str | None] = {
    "OPENAI_API_KEY": "sk-test-recording-key",
    "OPENAI_AGENTS_DISABLE_TRACING": None,
    "OPENAI_BASE_URL": None,
    "HTTPS_PROXY": None,
    "HTTP_PROXY": None,
}


def make_suite(root: Path, upstream: str, *, flush_traces: bool, settings: str = "") -> Path:
    return write_suite(
        root,
        name="traced",
        agent=[sys.executable, AGENT],
        tools=[],
        cases={
            "ask": {
                "input": {"question": "hello there", "flush_traces": flush_traces},
                "cassette": "cassettes/ask.jsonl",
            }
        },
        cassettes={"ask.jsonl": ""},
        settings=f"agent_channel: fd\nmodel_gateway:\n  upstreams: {{openai: {upstream}}}\n"
        + settings,
    )


def run(suite: Path, out: str, *args: str) -> dict[str, Any]:
    done = run_trialrun(
        "run", suite, "--no-baseline", "--out", out, *args, cwd=suite.parent, env=CLEAN_ENV
    )
    assert done.returncode in (0, 1), done.stdout + done.stderr
    summary = json.loads((only_run_dir(suite.parent / out) / "summary.json").read_text())
    (case,) = summary["cases"]
    return dict(case)


def record(root: Path, *, flush_traces: bool, settings: str = "") -> Path:
    upstream = FakeUpstream()
    url = upstream.start()
    try:
        suite = make_suite(root, url, flush_traces=flush_traces, settings=settings)
        case = run(suite, "recorded", "--mode", "record")
    finally:
        upstream.stop()
    assert case["status"] == "pass", case
    assert [r.path for r in upstream.received] == ["/v1/responses"]
    return suite


@pytest.mark.slow
def test_a_pydantic_ai_agent_records_and_replays_with_the_provider_gone(tmp_path: Path) -> None:
    pytest.importorskip("pydantic_ai")
    upstream = FakeUpstream()
    url = upstream.start()
    try:
        suite = write_suite(
            tmp_path,
            name="plain",
            agent=[sys.executable, SDK_AGENTS_DIR / "pydantic_ai_agent_plain.py"],
            tools=[],
            cases={"ask": {"input": {"question": "hello"}, "cassette": "cassettes/ask.jsonl"}},
            cassettes={"ask.jsonl": ""},
            settings=f"model_gateway:\n  upstreams: {{openai: {url}}}\n",
        )
        recorded = run(suite, "recorded", "--mode", "record")
    finally:
        upstream.stop()
    assert recorded["status"] == "pass", recorded
    assert [r.path for r in upstream.received] == ["/v1/chat/completions"]
    replayed = run(suite, "replayed")
    assert replayed["status"] == "pass", replayed
    # The recorded call answered it: its usage, and no recording left over.
    assert (replayed["tokens_in"], replayed["tokens_out"]) == (14, 2)
    assert replayed["unused_recordings"] == 0


@pytest.mark.slow
def test_an_agents_sdk_agent_with_default_tracing_replays_with_nothing_leaving(
    tmp_path: Path,
) -> None:
    suite = record(tmp_path, flush_traces=True)
    case = run(suite, "replayed")  # the upstream is gone: only the recording can answer
    assert case["status"] == "pass", case
    assert case["failure_kind"] is None
    assert case["http_exchanges"] == 0


@pytest.mark.slow
def test_with_tracing_back_on_the_trace_upload_fails_the_case_naming_it(tmp_path: Path) -> None:
    suite = record(tmp_path, flush_traces=True)
    text = (suite / "suite.yaml").read_text(encoding="utf-8")
    (suite / "suite.yaml").write_text(
        text + "replay_env: {OPENAI_AGENTS_DISABLE_TRACING: null}\n", encoding="utf-8"
    )
    case = run(suite, "replayed")
    assert case["status"] != "pass", case
    assert case["failure_kind"] == "network_sealed", case
    assert "api.openai.com:443" in case["failure_reason"], case
