"""``init --template openai-agents|langgraph``: real frameworks, offline replay, record, receipts.

Each template's agent is a real framework app (OpenAI Agents SDK; LangGraph with ChatOpenAI)
whose tools go through the SDK channel and whose model calls go through the model gateway. The
bundled recordings were made against ``scripted_model.py``; these tests replay them, record them
again against the same scripted model, and check what reaches the trace and the receipt.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from builders import run_trialrun
from scripted_model import ScriptedModel

VENV_BIN = str(Path(sys.executable).parent)
TEMPLATES = ("openai-agents", "langgraph")


def trialrun(
    project: Path, *args: str, path: str | None = None, api_key: str | None = None
) -> subprocess.CompletedProcess[str]:
    path = path or VENV_BIN + os.pathsep + os.environ.get("PATH", "")
    return run_trialrun(*args, cwd=project, env={"PATH": path, "OPENAI_API_KEY": api_key})


def last_run(project: Path, suite: str) -> Path:
    return sorted((project / "trialrun_out" / suite).iterdir())[-1]


def events(run_dir: Path, name: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in (run_dir / name).read_text().splitlines()]


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("templates")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    for template in TEMPLATES:
        done = trialrun(root, "init", "--template", template, "--path", "evals")
        # init writes the baseline only after the bundled recordings replayed and passed.
        assert done.returncode == 0, done.stdout + done.stderr
        assert (root / "evals" / "baselines" / f"{template}.json").is_file()
    return root


@pytest.fixture(scope="module")
def scripted_model() -> Iterator[str]:
    model = ScriptedModel()
    yield model.start()
    model.stop()


@pytest.mark.parametrize("template", TEMPLATES)
def test_the_bundled_recordings_replay_offline_with_model_usage_in_the_receipt(
    project: Path, template: str
) -> None:
    done = trialrun(
        project, "run", f"evals/{template}", "--baseline", f"evals/baselines/{template}.json"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    run_dir = last_run(project, template)
    trace = events(run_dir, "run.jsonl")
    assert [e["name"] for e in trace if e["type"] == "tool_call"] == ["search_docs"]
    model_usage = [e for e in trace if e["type"] == "usage"]
    assert len(model_usage) == 2  # the tool-calling turn and the answer
    assert all(e["source"] == "model_gateway" and e["tokens_out"] for e in model_usage)
    receipt = events(run_dir, "receipt.jsonl")
    usage = [e["data"] for e in receipt if e["type"] == "usage"]
    assert [u["model"] for u in usage] == ["gpt-4o-mini", "gpt-4o-mini"]
    assert sum(u["outputTokens"] for u in usage) == sum(e["tokens_out"] for e in model_usage)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["cases"][0]["tokens_out"] == sum(e["tokens_out"] for e in model_usage)


@pytest.mark.parametrize("template", TEMPLATES)
def test_record_against_a_model_then_replay_gives_the_same_run(
    project: Path, scripted_model: str, template: str
) -> None:
    suite = project / "evals" / template
    original = (suite / "suite.yaml").read_text()
    upstream = f'model_gateway:\n  upstreams: {{openai: "{scripted_model}"}}'
    (suite / "suite.yaml").write_text(original.replace("model_gateway: {}", upstream))
    try:
        recorded = trialrun(
            project, "run", f"evals/{template}", "--mode", "record", api_key="sk-test-record-key"
        )
    finally:
        (suite / "suite.yaml").write_text(original)
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    record_run = last_run(project, template)
    replayed = trialrun(project, "run", f"evals/{template}")
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    replay_run = last_run(project, template)

    def outcome(run_dir: Path) -> tuple[object, ...]:
        trace = events(run_dir, "run.jsonl")
        calls = [(e["name"], e["args"]) for e in trace if e["type"] == "tool_call"]
        [output] = [e["output"] for e in trace if e["type"] == "final_output"]
        return calls, output

    assert outcome(replay_run) == outcome(record_run)
    recording = (suite / "cassettes" / "t1.model.jsonl").read_text()
    assert "sk-test-record-key" not in recording and "Authorization" not in recording


@pytest.mark.parametrize("template", TEMPLATES)
def test_a_changed_prompt_fails_as_a_model_cassette_mismatch(project: Path, template: str) -> None:
    case_file = project / "evals" / template / "cases" / "t1.yaml"
    original = case_file.read_text()
    case_file.write_text(original.replace("ticket: reset password", "ticket: billing"))
    try:
        done = trialrun(project, "run", f"evals/{template}", "--no-baseline")
    finally:
        case_file.write_text(original)
    assert done.returncode == 1, done.stdout + done.stderr
    [case] = json.loads((last_run(project, template) / "summary.json").read_text())["cases"]
    assert case["failure_kind"] == "cassette_mismatch"
    assert "model call openai /v1/chat/completions: cassette mismatch" in case["failure_reason"]


def test_a_template_whose_framework_is_missing_says_what_to_install(tmp_path: Path) -> None:
    # A PATH whose python3 is the base interpreter, which has no openai-agents installed.
    bare = tmp_path / "bin"
    bare.mkdir()
    (bare / "python3").symlink_to(Path(sys.base_prefix) / "bin" / "python3")
    done = trialrun(
        tmp_path,
        "init",
        "--template",
        "openai-agents",
        "--path",
        "evals",
        path=f"{bare}{os.pathsep}/usr/bin:/bin",
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "pip install 'trialrun[openai-agents]'" in done.stderr
    assert (tmp_path / "evals" / "openai-agents" / "agent" / "agent.py").is_file()


def test_a_price_table_puts_each_model_calls_cost_in_the_receipt(project: Path) -> None:
    suite = project / "evals" / "openai-agents"
    original = (suite / "suite.yaml").read_text()
    (suite / "prices.yaml").write_text(
        "gpt-4o-mini: {input_per_mtok: 0.15, output_per_mtok: 0.6}\n"
    )
    (suite / "suite.yaml").write_text(
        original.replace("model_gateway: {}", "model_gateway: {prices: prices.yaml}")
    )
    try:
        done = trialrun(project, "run", "evals/openai-agents", "--no-baseline")
    finally:
        (suite / "suite.yaml").write_text(original)
        (suite / "prices.yaml").unlink()
    assert done.returncode == 0, done.stdout + done.stderr
    run_dir = last_run(project, "openai-agents")
    usage = [e["data"] for e in events(run_dir, "receipt.jsonl") if e["type"] == "usage"]
    assert len(usage) == 2
    for call in usage:
        expected = (call["inputTokens"] * 0.15 + call["outputTokens"] * 0.6) / 1_000_000
        assert call["costUsd"] == pytest.approx(expected)
        assert call["source"] == "model_gateway"
    [case] = json.loads((run_dir / "summary.json").read_text())["cases"]
    assert case["cost_usd"] == pytest.approx(sum(call["costUsd"] for call in usage))


def test_the_pytest_plugin_runs_a_gateway_suite_with_its_own_services(project: Path) -> None:
    env = {**os.environ, "PATH": VENV_BIN + os.pathsep + os.environ.get("PATH", "")}
    env.pop("OPENAI_API_KEY", None)
    suites = ["--trialrun", "evals/openai-agents", "--trialrun", "evals/langgraph"]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *suites],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout
    receipt = events(last_run(project, "langgraph"), "receipt.jsonl")
    assert sum(1 for e in receipt if e["type"] == "usage") == 2
