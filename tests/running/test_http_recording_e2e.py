"""``trialrun run`` with the HTTP recorder: an agent's plain-HTTP and HTTPS calls are recorded in
record mode and replayed with their servers gone; in replay a host never recorded fails the case
naming host:port (and receives nothing), and a changed request fails naming the nearest
recording."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from http_upstream import HOST, ScriptedApi, UpstreamAuthority, http_suite

AGENT = Path(__file__).resolve().parents[1] / "agents" / "http_agent.py"
SECRET = "sk-proj-" + "Z1x2C3v4B5n6M7a8S9d0" * 2
pytestmark = pytest.mark.slow


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    return http_suite(tmp_path, "http", AGENT)


def set_case(suite: Path, urls: list[str]) -> None:
    case = {
        "id": "t1",
        "input": {"urls": urls, "token": SECRET},
        "cassette": "cassettes/t1.jsonl",
    }
    (suite / "cases" / "t1.yaml").write_text(json.dumps(case))


def run(
    suite: Path, *args: str, ca: Path | None = None, extra_env: dict[str, str] | None = None
) -> tuple[int, dict[str, Any], str]:
    env = {k: v for k, v in os.environ.items() if not k.upper().endswith("_PROXY")}
    env.update(extra_env or {})
    if ca is not None:
        env["TRIALRUN_HTTP_UPSTREAM_CA"] = str(ca)
    out = suite.parent / "out"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "trialrun",
            "run",
            str(suite),
            "--no-baseline",
            "--out",
            str(out),
            *args,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode in (0, 1), done.stdout + done.stderr
    [summary_file] = sorted(out.glob("*/*/summary.json"), key=lambda p: p.stat().st_mtime)[-1:]
    summary = json.loads(summary_file.read_text())
    run_dir = summary_file.parent
    trace = [json.loads(line) for line in (run_dir / "run.jsonl").read_text().splitlines()]
    outputs = [e["output"] for e in trace if e["type"] == "final_output"]
    summary["output"] = outputs[0] if len(outputs) == 1 else outputs
    return done.returncode, summary, done.stdout + done.stderr


def record(suite: Path, urls: list[str], ca: Path) -> dict[str, Any]:
    set_case(suite, urls)
    code, summary, text = run(suite, "--mode", "record", ca=ca)
    assert code == 0, text
    return summary


def test_plain_and_https_apis_recorded_replay_with_their_servers_gone(
    suite: Path, apis: tuple[ScriptedApi, ScriptedApi], upstream_ca: UpstreamAuthority
) -> None:
    plain, secure = apis
    urls = [f"{plain.url}/items?page=1", f"{secure.url}/items?page=2", f"{secure.url}/stream"]
    recorded = record(suite, urls, upstream_ca.ca_file)
    results = recorded["output"]["results"]
    assert [status for status, _ in results] == [200, 200, 200]
    assert json.loads(results[1][1]) == {"page": "2", "items": ["item-2"]}
    assert recorded["cases"][0]["http_exchanges"] == 3
    cassette = suite / "cassettes" / "t1.http.jsonl"
    assert SECRET not in cassette.read_text()
    assert len(cassette.read_text().splitlines()) == 4
    for api in apis:
        api.stop()

    # Proxy settings of the user's own are replaced for the agent: replay must win.
    theirs = {"HTTPS_PROXY": "http://127.0.0.1:9", "http_proxy": "http://127.0.0.1:9"}
    theirs |= {"NO_PROXY": "*", "SSL_CERT_FILE": str(suite / "no-such-bundle.pem")}
    code, replayed, text = run(suite, extra_env=theirs)
    assert code == 0, text
    assert replayed["output"] == recorded["output"]
    assert replayed["cases"][0]["http_exchanges"] == 3
    assert replayed["cases"][0]["unused_recordings"] == 0


def test_replay_to_an_address_never_recorded_fails_naming_it_and_it_receives_nothing(
    suite: Path, apis: tuple[ScriptedApi, ScriptedApi], upstream_ca: UpstreamAuthority
) -> None:
    plain, secure = apis
    record(suite, [f"{plain.url}/items?page=1"], upstream_ca.ca_file)
    set_case(suite, [f"{plain.url}/items?page=1", f"{secure.url}/items?page=1"])
    before = len(secure.requests)

    code, summary, text = run(suite)
    assert code == 1, text
    [case] = summary["cases"]
    assert case["status"] == "fail"
    assert case["failure_reason"] == f"network: sealed: agent tried {HOST}:{secure.port}"
    assert len(secure.requests) == before == 0


def test_a_changed_request_fails_naming_the_nearest_recording_and_unused_ones_are_listed(
    suite: Path, apis: tuple[ScriptedApi, ScriptedApi], upstream_ca: UpstreamAuthority
) -> None:
    plain, _ = apis
    record(suite, [f"{plain.url}/items?page=1", f"{plain.url}/items?page=2"], upstream_ca.ca_file)
    plain.stop()

    set_case(suite, [f"{plain.url}/items?page=1"])
    code, summary, text = run(suite)
    assert code == 0, text
    assert summary["cases"][0]["unused_recordings_by_tool"] == {
        f"http:GET {plain.url}/items?page=2": 1
    }

    set_case(suite, [f"{plain.url}/items?page=9"])
    code, summary, text = run(suite)
    assert code == 1, text
    reason = summary["cases"][0]["failure_reason"]
    assert reason.startswith(
        f"cassette mismatch: no unused recording of GET {plain.url}/items?page=9"
    )
    assert "nearest recording: line 2; first difference at url: recorded " in reason


def test_a_case_that_no_longer_calls_http_apis_leaves_no_recording(
    suite: Path, apis: tuple[ScriptedApi, ScriptedApi], upstream_ca: UpstreamAuthority
) -> None:
    plain, _ = apis
    record(suite, [f"{plain.url}/items?page=1"], upstream_ca.ca_file)
    assert (suite / "cassettes" / "t1.http.jsonl").is_file()
    record(suite, [], upstream_ca.ca_file)
    assert not (suite / "cassettes" / "t1.http.jsonl").exists()


def test_a_corrupt_http_recording_stops_a_replay_before_any_agent_starts(suite: Path) -> None:
    set_case(suite, [])
    cassette = suite / "cassettes" / "t1.http.jsonl"
    cassette.write_text('{"format": "trialrun-http-cassette", "schema_version": 1}\n{"url": 1}\n')
    done = subprocess.run(
        [sys.executable, "-m", "trialrun", "run", str(suite), "--no-baseline"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=suite.parent,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "t1.http.jsonl:2: missing required field 'method'" in done.stderr
    assert not (suite.parent / "trialrun_out").exists()


def test_an_unreadable_upstream_authority_is_one_error_line(suite: Path, tmp_path: Path) -> None:
    set_case(suite, [])
    missing = tmp_path / "no-such-ca.pem"
    env = {**os.environ, "TRIALRUN_HTTP_UPSTREAM_CA": str(missing)}
    done = subprocess.run(
        [sys.executable, "-m", "trialrun", "run", str(suite), "--mode", "record", "--no-baseline"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith(
        f"error: {missing}: TRIALRUN_HTTP_UPSTREAM_CA must name a PEM file of certificate"
    )
    assert "Traceback" not in done.stderr


def test_parallel_cases_each_replay_their_own_recording(
    suite: Path, apis: tuple[ScriptedApi, ScriptedApi], upstream_ca: UpstreamAuthority
) -> None:
    plain, secure = apis
    (suite / "cassettes" / "t2.jsonl").write_text("")
    for case_id, page in (("t1", "1"), ("t2", "2")):
        case = {
            "id": case_id,
            # The same URL for both: only the case's own recording may answer it.
            "input": {"urls": [f"{secure.url}/items?page=1", f"{plain.url}/items?page={page}"]},
            "cassette": f"cassettes/{case_id}.jsonl",
        }
        case["input"]["token"] = SECRET
        (suite / "cases" / f"{case_id}.yaml").write_text(json.dumps(case))
    code, recorded, text = run(suite, "--mode", "record", "-j", "2", ca=upstream_ca.ca_file)
    assert code == 0, text
    assert [c["http_exchanges"] for c in recorded["cases"]] == [2, 2]
    for api in apis:
        api.stop()
    code, replayed, text = run(suite, "-j", "2")
    assert code == 0, text
    assert [c["http_exchanges"] for c in replayed["cases"]] == [2, 2]
    assert [c["unused_recordings"] for c in replayed["cases"]] == [0, 0]
    assert sorted(map(json.dumps, replayed["output"])) == sorted(
        map(json.dumps, recorded["output"])
    )
