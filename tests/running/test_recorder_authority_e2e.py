"""``trialrun run``: the run's certificate authority exists only where a case needs it. Record
mode gives every agent the CA variables; a replay gives them only to a case whose HTTP recording
holds an https exchange. Elsewhere the agent keeps its own TLS settings and gets the proxy
variables only, and a CONNECT is refused before any TLS, naming host:port."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from http_upstream import HOST, ScriptedApi, UpstreamAuthority, http_suite

AGENT = Path(__file__).resolve().parents[1] / "agents" / "http_env_agent.py"
CA_VARIABLES = ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS")
pytestmark = pytest.mark.slow


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    return http_suite(tmp_path, "ca", AGENT)


def set_urls(suite: Path, urls: list[str]) -> None:
    case = {"id": "t1", "input": {"urls": urls}, "cassette": "cassettes/t1.jsonl"}
    (suite / "cases" / "t1.yaml").write_text(json.dumps(case))


def run(suite: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    """Exit code, and the case's summary entry with the agent's output under ``output``."""
    base = {k: v for k, v in os.environ.items() if not k.upper().endswith("_PROXY")}
    base = {k: v for k, v in base.items() if k not in CA_VARIABLES}
    out = suite.parent / "out"
    argv = [sys.executable, "-m", "trialrun", "run", str(suite), "--no-baseline"]
    done = subprocess.run(
        [*argv, "--out", str(out), *args],
        env={**base, **(env or {})},
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode in (0, 1), done.stdout + done.stderr
    [summary_file] = sorted(out.glob("*/*/summary.json"), key=lambda p: p.stat().st_mtime)[-1:]
    [case] = json.loads(summary_file.read_text())["cases"]
    trace = (summary_file.parent / "run.jsonl").read_text().splitlines()
    [output] = [e["output"] for e in map(json.loads, trace) if e["type"] == "final_output"]
    case["output"] = output
    return done.returncode, case


def test_a_replay_without_http_recordings_keeps_the_agents_tls_and_refuses_connect(
    suite: Path, tmp_path: Path
) -> None:
    set_urls(suite, ["https://api.example.com:8443/items"])
    own = str(tmp_path / "my-bundle.pem")
    code, case = run(suite, env={"SSL_CERT_FILE": own})
    assert code == 1
    env = case["output"]["env"]
    assert env["HTTPS_PROXY"].startswith("http://")
    # No authority was made: the agent's own setting stays, and nothing else is set.
    assert env["SSL_CERT_FILE"] == own
    assert [env[name] for name in CA_VARIABLES[1:]] == [None, None, None]
    # The CONNECT itself was answered, before any TLS: urllib reports the tunnel's refusal.
    [[status, reason]] = case["output"]["results"]
    assert status == 0 and "502" in reason, reason
    assert case["failure_reason"] == "network: sealed: agent tried api.example.com:8443"


def test_record_mode_always_gives_the_authority_replay_of_plain_http_does_not(
    suite: Path, apis: tuple[ScriptedApi, ScriptedApi]
) -> None:
    plain, _ = apis
    set_urls(suite, [f"{plain.url}/items?page=1"])
    code, recorded = run(suite, "--mode", "record")
    assert code == 0, recorded
    bundle = recorded["output"]["env"]["SSL_CERT_FILE"]
    assert bundle and all(recorded["output"]["env"][name] == bundle for name in CA_VARIABLES)
    plain.stop()

    code, replayed = run(suite)
    assert code == 0, replayed
    assert replayed["output"]["results"] == recorded["output"]["results"]
    assert all(replayed["output"]["env"][name] is None for name in CA_VARIABLES)
    assert replayed["output"]["env"]["HTTPS_PROXY"].startswith("http://")


def test_a_replay_whose_recording_holds_https_gives_the_authority(
    suite: Path, apis: tuple[ScriptedApi, ScriptedApi], upstream_ca: UpstreamAuthority
) -> None:
    _, secure = apis
    set_urls(suite, [f"{secure.url}/items?page=2"])
    upstream = {"TRIALRUN_HTTP_UPSTREAM_CA": str(upstream_ca.ca_file)}
    code, recorded = run(suite, "--mode", "record", env=upstream)
    assert code == 0, recorded
    assert recorded["output"]["results"][0][0] == 200
    secure.stop()

    code, replayed = run(suite)
    assert code == 0, replayed
    env = replayed["output"]["env"]
    assert env["SSL_CERT_FILE"] and all(env[name] == env["SSL_CERT_FILE"] for name in CA_VARIABLES)
    assert replayed["output"]["results"] == recorded["output"]["results"]
    assert secure.url.startswith(f"https://{HOST}:")
