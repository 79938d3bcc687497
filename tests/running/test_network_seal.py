"""Replay's network seal (issue 30): a replayed agent reaches trialrun's services, the suite's
``network: {allow: [...]}`` and nothing else, whatever it uses (here: bare sockets, which no
proxy variable steers), and the case fails naming the destination it tried.

Every foreign destination is a listener the test itself runs on 127.0.0.1: nothing leaves the
machine, and "the server receives nothing" is checked by a non-blocking ``accept`` after the
run (a connection the kernel completed would be waiting there).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trialrun.config.spec import split_host_port
from trialrun.conversation.seal import SealLayers, SealPolicy, probe

AGENT = Path(__file__).resolve().parent.parent / "agents" / "bare_socket.py"
LAYERS = probe()
needs_seccomp = pytest.mark.skipif(
    not LAYERS.seccomp, reason="this kernel has no seccomp user notification"
)
needs_landlock = pytest.mark.skipif(
    not LAYERS.landlock, reason="this kernel has no Landlock ABI 4 (TCP connect rules)"
)
needs_a_layer = pytest.mark.skipif(not LAYERS.any, reason="this kernel offers no seal layer")


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A server that is not trialrun's: the seal must keep every agent away from it."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.setblocking(False)
    yield server
    server.close()


def port_of(server: socket.socket) -> int:
    return int(server.getsockname()[1])


def received_nothing(server: socket.socket) -> bool:
    try:
        connection, _ = server.accept()
    except BlockingIOError:
        return True
    connection.close()
    return False


def make_suite(root: Path, given_input: dict[str, Any], extra: str = "") -> Path:
    suite = root / "suite"
    (suite / "cases").mkdir(parents=True)
    (suite / "cassettes").mkdir()
    command = [sys.executable, str(AGENT)]
    (suite / "suite.yaml").write_text(
        f"suite_name: seal\nagent_command: {json.dumps(command)}\nmode: replay\n"
        "cases_path: cases\ntool_registry: []\nkill_grace_ms: 200\n" + extra,
        encoding="utf-8",
    )
    case = {"id": "c1", "input": given_input, "cassette": "cassettes/c1.jsonl"}
    (suite / "cases" / "c1.yaml").write_text(json.dumps(case), encoding="utf-8")
    (suite / "cassettes" / "c1.jsonl").write_text("", encoding="utf-8")
    header = {"format": "trialrun-model-cassette", "schema_version": 1}
    (suite / "cassettes" / "c1.model.jsonl").write_text(json.dumps(header) + "\n")
    return suite


def trialrun(
    suite: Path, out: Path, *args: str, layers: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "TRIALRUN_SEAL_LAYERS"}
    if layers is not None:
        env["TRIALRUN_SEAL_LAYERS"] = layers
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "trialrun",
            "run",
            str(suite),
            "--out",
            str(out),
            "--no-baseline",
            *args,
        ],
        cwd=suite.parent,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def case_of(out: Path) -> dict[str, Any]:
    (run,) = [p for p in out.glob("*/*") if p.is_dir()]
    summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
    (case,) = summary["cases"]
    return dict(case)


def network_of(out: Path) -> tuple[Any, Any]:
    """What summary.json's ``run`` and the receipt's ``run_start`` say of the seal."""
    (run,) = [p for p in out.glob("*/*") if p.is_dir()]
    summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
    first = json.loads((run / "receipt.jsonl").read_text(encoding="utf-8").splitlines()[0])
    return summary["run"].get("network"), first["data"].get("network")


def results_of(out: Path) -> list[str]:
    (run,) = [p for p in out.glob("*/*") if p.is_dir()]
    lines = (run / "run.jsonl").read_text(encoding="utf-8").splitlines()
    for line in lines:
        event = json.loads(line)
        if event["type"] == "final_output":
            return list(event["output"]["results"])
    raise AssertionError(f"no final output in {lines}")


@needs_seccomp
def test_a_bare_socket_to_a_foreign_listener_is_refused_and_fails_the_case(
    tmp_path: Path, listener: socket.socket
) -> None:
    port = port_of(listener)
    suite = make_suite(tmp_path, {"targets": [["127.0.0.1", port]]})

    done = trialrun(suite, tmp_path / "out")

    assert done.returncode == 1, done.stderr
    case = case_of(tmp_path / "out")
    assert case["failure_kind"] == "network_sealed"
    assert case["failure_reason"] == f"network: sealed: agent tried 127.0.0.1:{port}"
    assert received_nothing(listener)
    assert "warning: network" not in done.stderr  # every layer holds: nothing to warn about
    said = {"sealed": True, "layers": LAYERS.names()}
    assert network_of(tmp_path / "out") == (said, said)


@needs_seccomp
def test_the_case_fails_even_when_the_agent_swallows_the_refusal_and_names_each_try(
    tmp_path: Path, listener: socket.socket
) -> None:
    other = socket.socket()
    other.bind(("127.0.0.1", 0))
    other.listen(1)
    other.setblocking(False)
    with other:
        targets = [["127.0.0.1", port_of(listener)], ["127.0.0.1", port_of(other)]]
        suite = make_suite(tmp_path, {"targets": targets + targets[:1]})

        assert trialrun(suite, tmp_path / "out").returncode == 1
        results = results_of(tmp_path / "out")
        assert all("PermissionError" in result for result in results), results
        message = case_of(tmp_path / "out")["failure_reason"]
        assert message == (
            f"network: sealed: agent tried 127.0.0.1:{port_of(listener)}, "
            f"127.0.0.1:{port_of(other)}"
        )
        assert received_nothing(listener) and received_nothing(other)


@needs_a_layer
def test_a_child_of_the_agent_is_sealed_too(tmp_path: Path, listener: socket.socket) -> None:
    port = port_of(listener)
    allowed = socket.socket()
    allowed.bind(("127.0.0.1", 0))
    allowed.listen(8)
    allowed.setblocking(False)
    with allowed:
        # The agent itself reaches the allowed port; its child then tries the foreign one.
        suite = make_suite(
            tmp_path,
            {"targets": [["127.0.0.1", port_of(allowed)]], "child": True},
            extra=f"network:\n  allow: ['127.0.0.1:{port_of(allowed)}']\n",
        )
        child = make_suite(tmp_path / "child", {"targets": [["127.0.0.1", port]], "child": True})
        assert trialrun(suite, tmp_path / "out").returncode == 0
        assert results_of(tmp_path / "out") == [
            f"127.0.0.1:{port_of(allowed)} connected",
            f"child 127.0.0.1:{port_of(allowed)} connected",
        ]
        assert trialrun(child, tmp_path / "child-out").returncode == 1
    child_result = results_of(tmp_path / "child-out")[1]
    assert child_result.startswith(f"child 127.0.0.1:{port} PermissionError"), child_result
    assert received_nothing(listener)


@needs_a_layer
def test_allow_lets_exactly_its_port_through(tmp_path: Path, listener: socket.socket) -> None:
    allowed = socket.socket()
    allowed.bind(("127.0.0.1", 0))
    allowed.listen(8)
    allowed.setblocking(False)
    with allowed:
        targets = [["127.0.0.1", port_of(allowed)], ["127.0.0.1", port_of(listener)]]
        allow = f"network: {{allow: ['localhost:{port_of(allowed)}']}}\n"
        suite = make_suite(tmp_path, {"targets": targets}, extra=allow)
        done = trialrun(suite, tmp_path / "out")
        results = results_of(tmp_path / "out")
        assert results[0] == f"127.0.0.1:{port_of(allowed)} connected"
        assert "PermissionError" in results[1]
        assert received_nothing(listener)
        assert not received_nothing(allowed)
    if LAYERS.seccomp:
        assert done.returncode == 1
        assert case_of(tmp_path / "out")["failure_reason"] == (
            f"network: sealed: agent tried 127.0.0.1:{port_of(listener)}"
        )


@needs_a_layer
def test_the_case_services_are_reachable(tmp_path: Path) -> None:
    suite = make_suite(tmp_path, {"gateway": True}, extra="model_gateway: {}\n")

    done = trialrun(suite, tmp_path / "out")

    assert done.returncode == 0, done.stderr
    (result,) = results_of(tmp_path / "out")
    assert result.startswith("127.0.0.1:") and result.endswith(" connected")


@pytest.mark.parametrize("how", [["--mode", "record"], ["--mode", "live"], []])
def test_record_live_and_open_are_not_sealed(
    tmp_path: Path, listener: socket.socket, how: list[str]
) -> None:
    port = port_of(listener)
    extra = "" if how else "network: open\n"
    suite = make_suite(tmp_path, {"targets": [["127.0.0.1", port]]}, extra=extra)

    done = trialrun(suite, tmp_path / "out", *how)

    assert done.returncode == 0, done.stderr
    assert results_of(tmp_path / "out") == [f"127.0.0.1:{port} connected"]
    assert not received_nothing(listener)
    assert "network" not in done.stderr


@needs_landlock
def test_landlock_alone_refuses_and_hints_where_it_cannot_name_the_destination(
    tmp_path: Path, listener: socket.socket
) -> None:
    port = port_of(listener)
    suite = make_suite(tmp_path, {"targets": [["127.0.0.1", port]], "fail_on_error": True})

    done = trialrun(suite, tmp_path / "out", layers="landlock")

    assert done.returncode == 1
    said = {"sealed": True, "layers": ["landlock"]}
    assert network_of(tmp_path / "out") == (said, said)
    assert done.stderr.count("warning: network: sealed by Landlock only") == 1
    case = case_of(tmp_path / "out")
    assert case["failure_kind"] != "network_sealed"  # trialrun did not see where it went
    assert "the network is sealed in replay" in case["failure_reason"]
    assert received_nothing(listener)


@needs_seccomp
def test_seccomp_alone_still_refuses_and_names(tmp_path: Path, listener: socket.socket) -> None:
    port = port_of(listener)
    suite = make_suite(tmp_path, {"targets": [["127.0.0.1", port]]})

    done = trialrun(suite, tmp_path / "out", layers="seccomp")

    assert done.returncode == 1
    assert case_of(tmp_path / "out")["failure_reason"].endswith(f"tried 127.0.0.1:{port}")
    assert received_nothing(listener)


def test_without_a_kernel_layer_the_run_warns_once_and_claims_no_seal(
    tmp_path: Path, listener: socket.socket
) -> None:
    port = port_of(listener)
    suite = make_suite(tmp_path, {"targets": [["127.0.0.1", port]] * 2})

    done = trialrun(suite, tmp_path / "out", layers="none")

    assert done.returncode == 0, done.stderr
    assert done.stderr.count("warning: network:") == 1
    assert "replayed agents are NOT sealed" in done.stderr
    assert results_of(tmp_path / "out") == [f"127.0.0.1:{port} connected"] * 2
    said = {"sealed": False, "layers": []}
    assert network_of(tmp_path / "out") == (said, said)


@pytest.mark.parametrize(
    ("setting", "expected"),
    [
        ("network: closed\n", "7: 'network' must be one of sealed, open; found string 'closed'"),
        ("network:\n  allow: [db]\n", "8: 'allow[0]' must be host:port (a port from 1 to 65535"),
        ("network:\n  allow: ['db:70000']\n", "8: 'allow[0]' must be host:port"),
        ("network:\n  allow: ['db:1']\n  deny: []\n", "9: unknown key 'deny' in network"),
        ("network: [open]\n", "7: 'network' must be one of sealed, open; found"),
    ],
)
def test_a_bad_network_setting_is_one_error_line_naming_the_file_and_line(
    tmp_path: Path, setting: str, expected: str
) -> None:
    suite = make_suite(tmp_path, {}, extra=setting)

    done = trialrun(suite, tmp_path / "out")

    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"error: suite/suite.yaml:{expected}"), line


def test_the_policy_lets_any_loopback_reach_a_service_port_and_nothing_else() -> None:
    policy = SealPolicy(frozenset({8080}), frozenset({("10.0.0.5", 5432)}))

    assert policy.allows("127.0.0.1", 8080) and policy.allows("::1", 8080)
    assert policy.allows("127.0.0.2", 8080)
    assert not policy.allows("10.0.0.5", 8080)
    assert policy.allows("10.0.0.5", 5432)
    assert not policy.allows("127.0.0.1", 5432)
    assert policy.ports == [5432, 8080]
    assert SealLayers(False, False).names() == []


@given(
    host=st.from_regex(r"[A-Za-z0-9._-]{1,30}", fullmatch=True),
    port=st.integers(min_value=1, max_value=65535),
)
def test_host_port_parses_what_it_should(host: str, port: int) -> None:
    assert split_host_port(f"{host}:{port}") == (host, port)
    assert split_host_port(f"[::1]:{port}") == ("::1", port)


@given(st.text(max_size=40))
def test_host_port_never_raises_and_keeps_ports_in_range(text: str) -> None:
    parts = split_host_port(text)
    if parts is not None:
        assert 1 <= parts[1] <= 65535
        digits = text.rsplit(":", 1)[1]
        assert digits.isascii() and digits.isdigit() and int(digits) == parts[1]


def read_back(raw: bytes) -> tuple[str, int] | None:
    """``_read_destination`` of ``raw`` placed in our own memory, as the watch reads an agent's."""
    import ctypes

    from trialrun.conversation.seal import _read_destination

    buffer = ctypes.create_string_buffer(raw, max(len(raw), 1))
    return _read_destination(os.getpid(), ctypes.addressof(buffer), len(raw))


def test_the_watch_reads_each_address_family_it_decides_on() -> None:
    v4 = socket.AF_INET.to_bytes(2, sys.byteorder) + (443).to_bytes(2, "big") + bytes([1, 2, 3, 4])
    assert read_back(v4 + bytes(8)) == ("1.2.3.4", 443)
    v6 = socket.AF_INET6.to_bytes(2, sys.byteorder) + (80).to_bytes(2, "big") + bytes(4)
    assert read_back(v6 + socket.inet_pton(socket.AF_INET6, "2001:db8::1") + bytes(4)) == (
        "2001:db8::1",
        80,
    )
    mapped = socket.inet_pton(socket.AF_INET6, "::ffff:10.0.0.5")
    assert read_back(v6 + mapped + bytes(4)) == ("10.0.0.5", 80)
    unix = socket.AF_UNIX.to_bytes(2, sys.byteorder) + b"/tmp/x.sock\0"
    assert read_back(unix) is None  # Unix sockets are let through
    assert read_back(v4[:6]) == ("", 0)  # cut short: refused, never let through
    assert read_back(b"") == ("", 0)


@given(st.binary(max_size=40))
def test_the_watch_never_raises_on_what_an_agent_passes(raw: bytes) -> None:
    found = read_back(raw)
    assert found is None or (isinstance(found[0], str) and 0 <= found[1] <= 65535)
