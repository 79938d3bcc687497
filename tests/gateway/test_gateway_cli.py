"""``trialrun gateway`` as users run it: a subprocess that prints its URL, serves, and writes the
cassettes when it is stopped; and its input errors, in-process."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
from pathlib import Path

import openai
import pytest

from builders import HANG_GUARD_S
from gateway_fake_upstream import FakeUpstream
from trialrun.cli import run_cli

KEY = "sk-proj-" + "Q1w2E3r4T5y6U7i8O9p0" * 2


class Served:
    """A running ``trialrun gateway`` process."""

    def __init__(self, *args: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "trialrun", "gateway", "--quiet", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        self.url = self.process.stdout.readline().strip()

    def chat(self, run_id: str, prompt: str) -> str:
        client = openai.OpenAI(
            api_key=KEY, base_url=f"{self.url}/run/{run_id}/openai/v1", max_retries=0
        )
        reply = client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": prompt}]
        )
        return reply.id

    def stop(self, signum: int = signal.SIGTERM) -> tuple[int, str]:
        self.process.send_signal(signum)
        _, stderr = self.process.communicate(timeout=HANG_GUARD_S)
        return self.process.returncode, stderr


def test_the_cli_prints_its_url_serves_and_writes_cassettes_at_sigterm(
    tmp_path: Path, upstream: FakeUpstream
) -> None:
    cassettes = tmp_path / "cassettes"
    served = Served(
        "--cassette-dir", str(cassettes), "--mode", "record",
        "--upstream", f"openai={upstream.url}", "--upstream", f"anthropic={upstream.url}",
    )  # fmt: skip
    try:
        assert served.url.startswith("http://127.0.0.1:")
        first = served.chat("case-1", "one")
        second = served.chat("case-2", "two")
    finally:
        code, stderr = served.stop()
    assert code == 0, stderr
    assert "run case-1: 1 model call, 0 failed; cassette written to" in stderr
    assert sorted(p.name for p in cassettes.iterdir()) == ["case-1.jsonl", "case-2.jsonl"]
    assert KEY not in (cassettes / "case-1.jsonl").read_text()
    upstream.stop()

    replay = Served("--cassette-dir", str(cassettes), "--mode", "replay")
    try:
        assert replay.chat("case-2", "two") == second
        assert replay.chat("case-1", "one") == first
    finally:
        code, stderr = replay.stop()
    assert code == 0, stderr

    replay = Served("--cassette-dir", str(cassettes), "--mode", "replay")
    try:
        with pytest.raises(openai.BadRequestError, match="cassette mismatch"):
            replay.chat("case-1", "changed")
        with pytest.raises(openai.InternalServerError, match="cassette file not found"):
            replay.chat("case-3", "unknown run")
    finally:
        code, stderr = replay.stop()
    assert code == 1, stderr  # a replayed call missed its cassette
    assert "1 cassette mismatch)" in stderr and "cassette mismatch" in stderr


def test_sigint_still_writes_the_cassette_and_exits_130(
    tmp_path: Path, upstream: FakeUpstream
) -> None:
    served = Served(
        "--cassette-dir", str(tmp_path), "--mode", "record", "--upstream", f"openai={upstream.url}"
    )
    try:
        served.chat("r", "hello")
    finally:
        code, _ = served.stop(signal.SIGINT)
    assert code == 130
    lines = (tmp_path / "r.jsonl").read_text().splitlines()
    assert json.loads(lines[0])["format"] == "trialrun-model-cassette" and len(lines) == 2


def test_bad_rules_file_is_a_one_line_error_with_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text("strip_keys: [request_id]\nreplace_text:\n  - pattern: '[unclosed'\n")
    code = run_cli(["gateway", "--cassette-dir", str(tmp_path), "--mode", "record",
                    "--rules", str(rules)])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith(f"error: {rules}:3: replace_text pattern '[unclosed' is not a valid")
    rules.write_text("strip_kyes: [a]\n")
    assert run_cli(["gateway", "--cassette-dir", str(tmp_path), "--mode", "record",
                    "--rules", str(rules)]) == 2  # fmt: skip
    assert "rules.yaml:1: unknown key 'strip_kyes' in rules (did you mean 'strip_keys'?)" in (
        capsys.readouterr().err
    )


def test_bad_prices_file_names_the_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prices = tmp_path / "prices.yaml"
    prices.write_text("gpt-4o:\n  input_per_mtok: 2.5\n  output_per_mtk: 10\n")
    code = run_cli(["gateway", "--cassette-dir", str(tmp_path), "--mode", "record",
                    "--prices", str(prices)])  # fmt: skip
    err = capsys.readouterr().err.splitlines()
    assert code == 2
    assert err == [
        f"error: {prices}:3: unknown key 'output_per_mtk' in prices of 'gpt-4o' "
        "(did you mean 'output_per_mtok'?)",
    ]  # the missing key it explains is not reported again


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--upstream", "mistral=http://x"], "expected PROVIDER=URL"),
        (["--upstream", "openai=ftp://x"], "must be an http:// or https:// URL"),
        (["--listen", "localhost"], "expected HOST:PORT"),
        (
            ["--mode", "replay", "--cassette-dir", "/nonexistent/dir"],
            "cassette directory not found",
        ),
    ],
)
def test_bad_options_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    base = ["gateway", "--cassette-dir", str(tmp_path), "--mode", "record"]
    assert run_cli(base + args) == 2
    assert message in capsys.readouterr().err


def test_a_port_in_use_is_an_input_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code = run_cli(["gateway", "--cassette-dir", str(tmp_path), "--mode", "live",
                        "--listen", f"127.0.0.1:{port}"])  # fmt: skip
    assert code == 2
    assert f"error: cannot listen on 127.0.0.1:{port}" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("table", "shown"),
    [
        ("gpt-4o-mini: {input_per_mtok: 1000000, output_per_mtok: 0}\n", "cost $"),
        ("gpt-4o: {input_per_mtok: 2.5, output_per_mtok: 10}\n", "cost unknown (no price for "),
    ],
)
def test_prices_give_each_run_its_cost_in_the_summary(
    tmp_path: Path, upstream: FakeUpstream, table: str, shown: str
) -> None:
    prices = tmp_path / "prices.yaml"
    prices.write_text(table, encoding="utf-8")
    served = Served(
        "--cassette-dir", str(tmp_path), "--mode", "record",
        "--upstream", f"openai={upstream.url}", "--prices", str(prices),
    )  # fmt: skip
    try:
        served.chat("r", "hello")
    finally:
        code, stderr = served.stop()
    assert code == 0, stderr
    [line] = [line for line in stderr.splitlines() if line.startswith("run r: ")]
    recorded = json.loads((tmp_path / "r.jsonl").read_text().splitlines()[1])
    tokens_in = recorded["usage"]["tokens_in"]
    if shown == "cost $":
        # A dollar per input token and output free: the cost is the prompt's token count.
        assert f"cost ${tokens_in:.6f}" in line, line
    else:
        assert "cost unknown (no price for 'gpt-4o-mini')" in line, line
