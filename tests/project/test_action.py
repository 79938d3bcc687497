"""The composite action (action.yml) and the repository's workflows, checked without a network.

Each `run:` script of the action is executed with bash exactly as the runner does
(``bash --noprofile --norc -eo pipefail``), with its `env:` filled the way GitHub evaluates the
expressions, a fake GITHUB_* environment, and fake ``python``/``trialrun`` executables that record
their argv. That proves the command line, the outputs and the handling of hostile inputs.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from builders import HANG_GUARD_S
from paths import REPO_ROOT
from trialrun import __version__

ROOT = REPO_ROOT
ACTION_FILE = ROOT / "action.yml"
WORKFLOWS = ROOT / ".github" / "workflows"
HOSTILE = "$(touch pwned)"
FAKE_KEY = (
    "-----BEGIN PRIVATE KEY-----\n"
    "MC4CAQAwBQYDK2VwBCIEIFakeFakeFakeFakeFakeFakeFakeFakeFake\n"
    "-----END PRIVATE KEY-----"
)
# The only expressions an `env:` value may hold: a plain reference, never string building.
_REFERENCE = re.compile(r"^\$\{\{\s*(inputs|steps\.run\.outputs)\.([A-Za-z0-9_-]+)\s*\}\}$")

_FAKE_EXECUTABLE = """#!{python}
import json, os, stat, sys
record = {{"argv": sys.argv[1:], "env_keys": sorted(os.environ)}}
if "--sign-key" in sys.argv:
    key_file = sys.argv[sys.argv.index("--sign-key") + 1]
    record["key_mode"] = stat.S_IMODE(os.stat(key_file).st_mode)
    with open(key_file) as handle:
        record["key_text"] = handle.read()
    record["key_file"] = key_file
record["key_in_env"] = any("PRIVATE KEY" in value for value in os.environ.values())
name = os.path.basename(sys.argv[0])
with open(os.path.join(os.environ["FAKE_LOG_DIR"], name + ".jsonl"), "a") as log:
    log.write(json.dumps(record) + "\\n")
sys.exit(int(os.environ.get("FAKE_EXIT", "0")))
"""


def _load(path: Path) -> dict[str, Any]:
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(document, dict), f"{path}: expected a mapping at the top level"
    return document


ACTION = _load(ACTION_FILE)
STEPS: list[dict[str, Any]] = ACTION["runs"]["steps"]


def _step(name_prefix: str) -> dict[str, Any]:
    matches = [s for s in STEPS if str(s.get("name", "")).startswith(name_prefix)]
    assert len(matches) == 1, f"expected one step named {name_prefix!r}, found {len(matches)}"
    return matches[0]


@dataclass
class StepRun:
    returncode: int
    stdout: str
    stderr: str
    outputs: dict[str, str]
    summary: str
    calls: dict[str, list[dict[str, Any]]]
    runner_temp: Path


def _parse_outputs(text: str) -> dict[str, str]:
    """GITHUB_OUTPUT as the runner reads it: ``key=value`` or ``key<<DELIM`` ... ``DELIM``."""
    outputs: dict[str, str] = {}
    lines = iter(text.split("\n"))
    for line in lines:
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            key, delimiter = line.split("<<", 1)
            body: list[str] = []
            for inner in lines:
                if inner == delimiter:
                    break
                body.append(inner)
            else:
                raise AssertionError(f"unterminated {key}<<{delimiter} block in GITHUB_OUTPUT")
            outputs[key] = "\n".join(body)
        elif line:
            key, value = line.split("=", 1)
            outputs[key] = value
    return outputs


def _step_env(
    step: Mapping[str, Any], inputs: Mapping[str, str], outputs: Mapping[str, str]
) -> dict[str, str]:
    values = {name: str(spec.get("default", "")) for name, spec in ACTION["inputs"].items()}
    unknown = set(inputs) - set(values)
    assert not unknown, f"test passes inputs the action does not declare: {unknown}"
    values.update(inputs)
    env: dict[str, str] = {}
    for name, expression in step.get("env", {}).items():
        match = _REFERENCE.match(str(expression))
        assert match, f"env {name}: expected a plain ${{{{ ... }}}} reference, found {expression!r}"
        source = values if match.group(1) == "inputs" else outputs
        env[name] = source.get(match.group(2), "")
    return env


def _run_step(
    step: Mapping[str, Any],
    tmp_path: Path,
    *,
    inputs: Mapping[str, str] | None = None,
    step_outputs: Mapping[str, str] | None = None,
    fake_exit: int = 0,
    fakes: tuple[str, ...] = ("python", "trialrun"),
    path_dirs: tuple[Path, ...] = (),
) -> StepRun:
    assert step.get("shell") == "bash"
    fake_bin, logs, workspace, runner_temp = (
        tmp_path / "bin",
        tmp_path / "logs",
        tmp_path / "workspace",
        tmp_path / "runner temp",
    )
    for folder in (fake_bin, logs, workspace, runner_temp):
        folder.mkdir(parents=True, exist_ok=True)
    for name in fakes:
        fake = fake_bin / name
        fake.write_text(_FAKE_EXECUTABLE.format(python=sys.executable), encoding="utf-8")
        fake.chmod(0o755)
    github_files = {n: tmp_path / n.lower() for n in ("GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY")}
    github_files["GITHUB_ENV"] = tmp_path / "github_env"
    for file in github_files.values():
        file.write_text("", encoding="utf-8")
    script = tmp_path / "step.sh"
    script.write_text(str(step["run"]), encoding="utf-8")
    env = {
        "PATH": os.pathsep.join(map(str, (fake_bin, *path_dirs, "/usr/bin", "/bin"))),
        "HOME": str(tmp_path),
        "RUNNER_TEMP": str(runner_temp),
        "GITHUB_ACTIONS": "true",
        "GITHUB_JOB": "selftest",
        "FAKE_LOG_DIR": str(logs),
        "FAKE_EXIT": str(fake_exit),
        **{name: str(path) for name, path in github_files.items()},
        **_step_env(step, inputs or {}, step_outputs or {}),
    }
    completed = subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
        cwd=workspace,
        env=env,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
    )
    calls = {
        log.stem: [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
        for log in logs.glob("*.jsonl")
    }
    return StepRun(
        returncode=completed.returncode,
        stdout=completed.stdout,
        stderr=completed.stderr,
        outputs=_parse_outputs(github_files["GITHUB_OUTPUT"].read_text(encoding="utf-8")),
        summary=github_files["GITHUB_STEP_SUMMARY"].read_text(encoding="utf-8"),
        calls=calls,
        runner_temp=runner_temp,
    )


def _trialrun_argv(result: StepRun) -> list[str]:
    assert len(result.calls.get("trialrun", [])) == 1, result.stderr
    argv: list[str] = result.calls["trialrun"][0]["argv"]
    return argv


# --- static checks ----------------------------------------------------------------------------


def test_no_expression_is_interpolated_into_any_script() -> None:
    documents = [ACTION_FILE, *sorted(WORKFLOWS.glob("*.yml"))]
    for path in documents:
        jobs = _load(path).get("jobs", {})
        steps = STEPS if path == ACTION_FILE else [s for j in jobs.values() for s in j["steps"]]
        for step in steps:
            if "run" in step:
                assert "${{" not in step["run"], f"{path.name}: step {step.get('name')!r}"


def test_every_env_value_is_a_plain_reference_to_a_declared_name() -> None:
    declared_outputs = {"result", "exit-code", "artifacts-path", "artifact-name"}
    for step in STEPS:
        for name, expression in step.get("env", {}).items():
            match = _REFERENCE.match(str(expression))
            assert match, f"{step['name']}: env {name}={expression!r}"
            names = ACTION["inputs"] if match.group(1) == "inputs" else declared_outputs
            assert match.group(2) in names, f"{step['name']}: {expression} names nothing"


def test_every_input_reaches_a_step() -> None:
    text = ACTION_FILE.read_text(encoding="utf-8")
    for name in ACTION["inputs"]:
        assert f"inputs.{name} }}}}" in text, f"input {name!r} is declared but never used"


def test_package_default_pins_the_released_version() -> None:
    assert ACTION["inputs"]["package"]["default"] == f"trialrun=={__version__}"


def test_declared_interface_and_step_order() -> None:
    defaults = {name: spec.get("default") for name, spec in ACTION["inputs"].items()}
    assert defaults["path"] == "./evals/demo"
    assert defaults["mode"] == "replay"
    assert defaults["python-version"] == "3.11"
    assert defaults["out"] == "trialrun_out"
    assert ACTION["runs"]["using"] == "composite"
    for output in ("result", "exit-code", "artifacts-path"):
        value = ACTION["outputs"][output]["value"]
        assert value == f"${{{{ steps.run.outputs.{output} }}}}"
    uses = [s.get("uses", "run") for s in STEPS]
    assert uses == [
        "actions/setup-python@v5",
        "run",
        "run",
        "actions/upload-artifact@v4",
        "run",
    ]
    assert "always()" in _step("Upload")["if"]
    assert _step("Fail")["if"] == "steps.run.outputs.exit-code != '0'"


# --- the install step -------------------------------------------------------------------------


def test_install_uses_the_package_spec_as_one_argument(tmp_path: Path) -> None:
    spec = f"trialrun @ git+https://example.invalid/x.git; {HOSTILE}"
    result = _run_step(_step("Install"), tmp_path, inputs={"package": spec})
    assert result.returncode == 0, result.stderr
    argv = result.calls["python"][0]["argv"]
    assert argv == ["-m", "pip", "install", "--disable-pip-version-check", spec]
    assert not list(tmp_path.rglob("pwned*"))


def test_install_failure_fails_the_step(tmp_path: Path) -> None:
    result = _run_step(_step("Install"), tmp_path, fake_exit=1)
    assert result.returncode == 1


# --- the run step -----------------------------------------------------------------------------


def test_defaults_build_the_expected_command_and_outputs(tmp_path: Path) -> None:
    result = _run_step(_step("Run"), tmp_path)
    assert result.returncode == 0, result.stderr
    assert _trialrun_argv(result) == [
        "run",
        "--out",
        "trialrun_out",
        "--mode",
        "replay",
        "--",
        "./evals/demo",
    ]
    assert result.outputs["result"] == "pass"
    assert result.outputs["exit-code"] == "0"
    assert result.outputs["artifacts-path"] == "trialrun_out"
    assert re.fullmatch(r"trialrun-selftest-\d+", result.outputs["artifact-name"])
    assert result.summary == ""


def test_failing_run_records_the_verdict_without_failing_the_step(tmp_path: Path) -> None:
    result = _run_step(_step("Run"), tmp_path, fake_exit=1)
    assert result.returncode == 0, result.stderr
    assert result.outputs["result"] == "fail"
    assert result.outputs["exit-code"] == "1"
    assert result.summary == "", "a verdict of 1 comes with trialrun's own summary"


def test_invalid_input_exit_code_is_explained_in_the_step_summary(tmp_path: Path) -> None:
    result = _run_step(_step("Run"), tmp_path, fake_exit=2)
    assert (result.returncode, result.outputs["exit-code"]) == (0, "2")
    assert result.outputs["result"] == "fail"
    assert "no verdict" in result.summary
    assert "exit code 2" in result.summary


def test_missing_cli_is_a_failed_verdict_not_a_crash(tmp_path: Path) -> None:
    result = _run_step(_step("Run"), tmp_path, fakes=("python",))
    assert result.returncode == 0
    assert result.outputs["exit-code"] == "127"
    assert result.outputs["result"] == "fail"


def test_hostile_and_spaced_inputs_stay_literal(tmp_path: Path) -> None:
    inputs = {
        "path": f"./my evals/{HOSTILE}/demo",
        "mode": "record",
        "baseline": "base lines/demo.json; touch pwned-baseline",
        "out": "out dir/`touch pwned-out`",
        "args": f"--jobs 4   --case {HOSTILE} *  'quoted word'\n--case \\$HOME",
        "artifact-name": "shard 1",
    }
    result = _run_step(_step("Run"), tmp_path, inputs=inputs)
    assert result.returncode == 0, result.stderr
    assert _trialrun_argv(result) == [
        "run",
        "--out",
        "out dir/`touch pwned-out`",
        "--mode",
        "record",
        "--baseline",
        "base lines/demo.json; touch pwned-baseline",
        "--jobs",
        "4",
        "--case",
        "$(touch",
        "pwned)",
        "*",
        "'quoted",
        "word'",
        "--case",
        "\\$HOME",
        "--",
        "./my evals/$(touch pwned)/demo",
    ]
    assert result.outputs["artifact-name"] == "shard 1"
    assert not list(tmp_path.rglob("pwned*")), "an input was executed"


def test_empty_mode_and_args_add_nothing(tmp_path: Path) -> None:
    result = _run_step(_step("Run"), tmp_path, inputs={"mode": "", "args": "  \n "})
    assert _trialrun_argv(result) == ["run", "--out", "trialrun_out", "--", "./evals/demo"]


def test_a_multi_line_value_cannot_forge_another_output(tmp_path: Path) -> None:
    out = "trialrun_out\nresult=pass\nexit-code=0"
    result = _run_step(_step("Run"), tmp_path, inputs={"out": out}, fake_exit=1)
    assert result.outputs["artifacts-path"] == out
    assert (result.outputs["result"], result.outputs["exit-code"]) == ("fail", "1")


def test_sign_key_goes_to_a_private_temp_file_that_is_never_printed(tmp_path: Path) -> None:
    result = _run_step(_step("Run"), tmp_path, inputs={"sign-key": FAKE_KEY})
    assert result.returncode == 0, result.stderr
    call = result.calls["trialrun"][0]
    argv = call["argv"]
    key_file = Path(argv[argv.index("--sign-key") + 1])
    assert key_file.parent == result.runner_temp
    assert call["key_mode"] == 0o600
    assert call["key_text"] == FAKE_KEY + "\n"
    assert not call["key_in_env"], "the agent under test would inherit the key"
    assert "TRIALRUN_SIGN_KEY_PEM" not in call["env_keys"]
    assert not key_file.exists(), "the key file must be deleted when the step ends"
    for stream in (result.stdout, result.stderr, json.dumps(result.outputs), result.summary):
        assert "PRIVATE KEY" not in stream and "FakeFake" not in stream


def test_no_sign_key_means_no_key_file(tmp_path: Path) -> None:
    result = _run_step(_step("Run"), tmp_path)
    assert "--sign-key" not in _trialrun_argv(result)
    assert not list(result.runner_temp.iterdir())


def test_compare_shard_runs_one_shard_into_out_and_uploads_it(tmp_path: Path) -> None:
    inputs = {"command": "compare", "path": "skills/deploy check", "shard": "2/3", "args": "-j 2"}
    result = _run_step(_step("Run"), tmp_path, inputs=inputs)
    assert result.returncode == 0, result.stderr
    assert _trialrun_argv(result) == [
        "compare",
        "--shard",
        "2/3",
        "--out",
        "trialrun_out",
        "-j",
        "2",
        "--",
        "skills/deploy check",
    ]
    assert result.outputs["artifacts-path"] == "trialrun_out"
    assert result.outputs["artifact-name"]


def test_compare_merge_passes_every_directory_under_path(tmp_path: Path) -> None:
    shards = tmp_path / "workspace" / "shards $(touch pwned)"
    for name in ("demo-shard-2-of-2", "demo-shard-1-of-2", "not a shard"):
        (shards / name).mkdir(parents=True)
    (shards / "stray.txt").write_text("a file is not passed")
    inputs = {"command": "compare merge", "path": "shards $(touch pwned)", "args": "--gate"}
    result = _run_step(_step("Run"), tmp_path, inputs=inputs, fake_exit=1)
    assert result.returncode == 0, result.stderr
    assert _trialrun_argv(result) == [
        "compare",
        "merge",
        "--out",
        "trialrun_out",
        "--gate",
        "--",
        "shards $(touch pwned)/demo-shard-1-of-2",
        "shards $(touch pwned)/demo-shard-2-of-2",
        "shards $(touch pwned)/not a shard",
    ]
    assert (result.outputs["result"], result.outputs["exit-code"]) == ("fail", "1")
    # The merged receipt and report.html are copied under out, and uploaded from there.
    assert result.outputs["artifacts-path"] == "trialrun_out"
    assert result.outputs["artifact-name"]
    assert not list(tmp_path.rglob("pwned*"))


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        ({"command": "compare merge", "path": "nowhere"}, "expected the shard directories"),
        ({"command": "compare merge", "shard": "1/2"}, "shard: compare merge joins every shard"),
        ({"command": "compare", "sign-key": FAKE_KEY}, "sign-key: only command run"),
        ({"command": "merge"}, "command: expected run, compare or compare merge"),
    ],
)
def test_unusable_command_inputs_are_invalid_input(
    tmp_path: Path, inputs: dict[str, str], message: str
) -> None:
    result = _run_step(_step("Run"), tmp_path, inputs=inputs)
    assert result.returncode == 0
    assert "trialrun" not in result.calls
    assert result.outputs["exit-code"] == "2"
    assert message in result.stderr
    assert "PRIVATE KEY" not in result.stderr


_WORD = st.text(
    alphabet=st.characters(
        exclude_categories=["Cs"], exclude_characters=" \t\n\x00", max_codepoint=0x2FF
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=25)
@given(words=st.lists(_WORD, max_size=6), separators=st.lists(st.sampled_from([" ", "\t", "\n  "])))
def test_args_split_into_exactly_the_whitespace_separated_words(
    tmp_path_factory: pytest.TempPathFactory, words: list[str], separators: list[str]
) -> None:
    tmp_path = tmp_path_factory.mktemp("args")
    joined = "".join(
        w + (separators[i] if i < len(separators) else " ") for i, w in enumerate(words)
    )
    result = _run_step(_step("Run"), tmp_path, inputs={"args": joined, "mode": ""})
    argv = _trialrun_argv(result)
    assert argv[3:-2] == words
    assert not list(tmp_path.rglob("pwned*"))


# --- the run step with the real CLI ----------------------------------------------------------

VENV_BIN = Path(sys.executable).parent


@pytest.fixture
def demo_suite(tmp_path: Path) -> Path:
    """`trialrun init` in a folder outside any git repository, as the self-test workflow does."""
    if not (VENV_BIN / "trialrun").exists():
        pytest.skip(f"no trialrun console script beside {sys.executable} (not an installed venv)")
    root = tmp_path / "demo root"
    env = {"PATH": os.pathsep.join((str(VENV_BIN), "/usr/bin", "/bin")), "HOME": str(tmp_path)}
    subprocess.run(
        [str(VENV_BIN / "trialrun"), "init", "--path", str(root / "evals")],
        env=env,
        check=True,
        capture_output=True,
        timeout=60,
    )
    return root / "evals" / "demo"


def test_real_cli_passes_the_demo_and_signs_its_receipt(tmp_path: Path, demo_suite: Path) -> None:
    from trialrun.receipt.signing import generate_keypair
    from trialrun.receipt.verify import verify_receipt

    private_key, public_key = generate_keypair(tmp_path / "keys")
    inputs = {
        "path": str(demo_suite),
        "out": str(tmp_path / "out dir"),
        "args": "--jobs 2",
        "sign-key": private_key.read_text(encoding="utf-8"),
    }
    result = _run_step(
        _step("Run"), tmp_path / "step", inputs=inputs, fakes=(), path_dirs=(VENV_BIN,)
    )
    assert (result.outputs["result"], result.outputs["exit-code"]) == ("pass", "0"), result.stdout
    (receipt,) = (tmp_path / "out dir").glob("demo/*/receipt.jsonl")
    verdict = verify_receipt(receipt, public_key=public_key.read_text(encoding="utf-8"))
    assert verdict.ok, verdict.message
    assert not list(result.runner_temp.iterdir()), "the key file outlived the step"


def test_real_cli_fails_a_broken_agent(tmp_path: Path, demo_suite: Path) -> None:
    agent = demo_suite / "agent" / "agent.py"
    agent.write_text(agent.read_text(encoding="utf-8").replace('"search_docs"', '"delete_account"'))
    inputs = {"path": str(demo_suite), "out": str(tmp_path / "out")}
    result = _run_step(
        _step("Run"), tmp_path / "step", inputs=inputs, fakes=(), path_dirs=(VENV_BIN,)
    )
    assert (result.outputs["result"], result.outputs["exit-code"]) == ("fail", "1")
    assert list((tmp_path / "out").glob("demo/*/junit.xml"))


# --- the final step ---------------------------------------------------------------------------


@pytest.mark.parametrize(("recorded", "expected"), [("1", 1), ("2", 2), ("", 1), ("x; id", 1)])
def test_final_step_fails_the_job_with_the_recorded_code(
    tmp_path: Path, recorded: str, expected: int
) -> None:
    result = _run_step(_step("Fail"), tmp_path, step_outputs={"exit-code": recorded})
    assert result.returncode == expected
    assert f"trialrun run exited with {expected}" in result.stderr


# --- the workflows ----------------------------------------------------------------------------


def _triggers(workflow: Mapping[Any, Any]) -> Any:
    return workflow.get("on", workflow.get(True))  # PyYAML reads a bare `on` key as True


def test_ci_workflow_runs_make_test_on_both_pythons() -> None:
    workflow = _load(WORKFLOWS / "ci.yml")
    assert {"pull_request", "push"} <= set(_triggers(workflow))
    (job,) = workflow["jobs"].values()
    assert job["runs-on"] == "ubuntu-latest"
    assert [str(v) for v in job["strategy"]["matrix"]["python-version"]] == ["3.11", "3.12"]
    assert any("make test" in step.get("run", "") for step in job["steps"])


def test_selftest_workflow_exercises_the_local_action_both_ways() -> None:
    workflow = _load(WORKFLOWS / "action-selftest.yml")
    assert {"pull_request", "push"} <= set(_triggers(workflow))
    steps = [step for job in workflow["jobs"].values() for step in job["steps"]]
    local = [step for step in steps if step.get("uses") == "./"]
    assert len(local) >= 2, "expected a passing and a deliberately failing run of the action"
    expected_failures = [step for step in local if step.get("continue-on-error") is True]
    assert expected_failures, "the failing run must not fail the self-test job by itself"
    ids = {step["id"] for step in expected_failures}
    checks = " ".join(str(step.get("env", "")) for step in steps)
    assert all(f"steps.{i}.outcome" in checks for i in ids), "nothing checks the failure"
