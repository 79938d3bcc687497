"""The environment an agent runs under in replay and record (``running.replay_env``).

A fake agent writes the variables it sees to a file named in its task; the tests run it through
``trialrun run`` as a subprocess with real-looking credentials in the environment and check what
reached it, what the suite's ``replay_env`` changed, and that the run's artifacts name the
variables and never hold a value.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from trialrun.config import load_suite
from trialrun.errors import ConfigError
from trialrun.gateway.cassette import write_cassette
from trialrun.running.replay_env import (
    ALWAYS_SET,
    CREDENTIALS,
    PLACEHOLDER,
    SETTINGS,
    agent_env,
    placeholders,
)

pytestmark = pytest.mark.slow

DOCS = Path(__file__).resolve().parents[2] / "docs" / "offline.md"
SECRET = "real-secret-value-4f1c"
"""What the credentials in the outer environment hold: it must never reach a replayed agent."""

WATCHED = [
    *(setting.name for setting in SETTINGS),
    *CREDENTIALS,
    "OPENAI_BASE_URL",
    "OPENAI_API_BASE",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_API_URL",
    "ANTHROPIC_API_BASE",
    "AZURE_OPENAI_ENDPOINT",
    "GOOGLE_GEMINI_BASE_URL",
    "AWS_ENDPOINT_URL_BEDROCK_RUNTIME",
    "OUTER_ONLY",
]

AGENT = r"""
import json, os, sys

task = json.loads(sys.stdin.readline())
seen = {name: os.environ.get(name) for name in WATCHED}
with open(task["input"]["write_to"], "w", encoding="utf-8") as out:
    json.dump(seen, out)
sys.stdout.write(json.dumps({"type": "final_output", "output": {"ok": True}}) + "\n")
sys.stdout.flush()
""".replace("WATCHED", json.dumps(WATCHED))


def make_suite(root: Path, *, extra: str = "", gateway: bool | str = False) -> Path:
    """``gateway``: a ``model_gateway:`` section (True: an empty one) and a model recording."""
    suite = root / "suite"
    (suite / "cases").mkdir(parents=True)
    (suite / "cassettes").mkdir()
    (suite / "agent.py").write_text(AGENT, encoding="utf-8")
    (suite / "suite.yaml").write_text(
        "suite_name: envsuite\n"
        f"agent_command: {json.dumps([sys.executable, 'agent.py'])}\n"
        "mode: replay\ncases_path: cases\ntool_registry: []\n"
        + (f"model_gateway: {'{}' if gateway is True else gateway}\n" if gateway else "")
        + extra,
        encoding="utf-8",
    )
    case = {
        "id": "t1",
        "input": {"write_to": str(root / "seen.json")},
        "cassette": "cassettes/t1.jsonl",
    }
    (suite / "cases" / "t1.yaml").write_text(json.dumps(case), encoding="utf-8")
    (suite / "cassettes" / "t1.jsonl").write_text("", encoding="utf-8")
    if gateway:
        write_cassette(suite / "cassettes" / "t1.model.jsonl", [])
    return suite


def outer_env(**extra: str) -> dict[str, str]:
    """The environment trialrun runs in: a developer's, with real keys and their own locale."""
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in WATCHED or name in ("LANG", "LC_ALL")
    }
    env.update(
        OPENAI_API_KEY=SECRET,
        AWS_ACCESS_KEY_ID=SECRET,
        AWS_SECRET_ACCESS_KEY=SECRET,
        GEMINI_API_KEY=SECRET,
        TZ="America/Denver",
        DO_NOT_TRACK="outer",
        OUTER_ONLY="kept",
    )
    env.update(extra)
    return env


def run(root: Path, suite: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trialrun", "run", str(suite), "--no-baseline", *args],
        cwd=root,
        env=outer_env(**extra),
        capture_output=True,
        text=True,
        timeout=120,
    )


def seen(root: Path) -> dict[str, Any]:
    data = json.loads((root / "seen.json").read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def run_dir(root: Path) -> Path:
    [found] = (root / "trialrun_out" / "envsuite").iterdir()
    return found


def test_replay_gives_placeholders_utc_a_seed_and_no_telemetry(tmp_path: Path) -> None:
    suite = make_suite(tmp_path, gateway=True)
    done = run(tmp_path, suite)
    assert done.returncode == 0, done.stdout + done.stderr
    env = seen(tmp_path)
    for setting in SETTINGS:
        assert env[setting.name] == setting.value, setting.name
    # Present credentials are replaced; the two the gateway's SDKs need are set even if absent.
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AWS_ACCESS_KEY_ID", "GEMINI_API_KEY"):
        assert env[name] == PLACEHOLDER, name
    assert env["AWS_SESSION_TOKEN"] is None  # absent outside: not invented
    assert SECRET not in json.dumps(env)
    assert env["OUTER_ONLY"] == "kept"
    # LangChain's ChatAnthropic reads ANTHROPIC_API_URL first, LiteLLM ANTHROPIC_API_BASE.
    base = env["ANTHROPIC_BASE_URL"]
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/key/[^/]+/run/t1-[0-9a-f]+/anthropic", base)
    assert env["ANTHROPIC_API_URL"] == env["ANTHROPIC_API_BASE"] == base
    assert (
        env["OPENAI_API_BASE"]
        == env["OPENAI_BASE_URL"]
        == base[: -len("anthropic")] + ("openai/v1")
    )


def test_other_providers_are_pointed_at_the_gateway_only_where_the_agent_uses_them(
    tmp_path: Path,
) -> None:
    suite = make_suite(tmp_path, gateway="{upstreams: {gemini: 'http://127.0.0.1:9'}}")
    done = run(tmp_path, suite, AZURE_OPENAI_ENDPOINT="https://mine.openai.azure.com")
    assert done.returncode == 0, done.stdout + done.stderr
    env = seen(tmp_path)
    base = env["ANTHROPIC_BASE_URL"][: -len("/anthropic")]
    assert env["GOOGLE_GEMINI_BASE_URL"] == base + "/gemini"  # named by the suite
    assert env["AZURE_OPENAI_ENDPOINT"] == base + "/azure"  # the agent's own, redirected
    # Neither named nor set: an agent that picks its provider by what is set picks as before.
    assert env["AWS_ENDPOINT_URL_BEDROCK_RUNTIME"] is None


def test_the_run_names_what_it_set_and_never_a_value(tmp_path: Path) -> None:
    suite = make_suite(tmp_path)
    done = run(tmp_path, suite)
    assert done.returncode == 0, done.stdout + done.stderr
    directory = run_dir(tmp_path)
    summary = json.loads((directory / "summary.json").read_text(encoding="utf-8"))
    expected_placeholders = sorted(
        [
            "OPENAI_API_KEY",
            "ANTHROPIC_API_KEY",
            "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY",
            "GEMINI_API_KEY",
        ]
    )
    names = summary["run"]["agent_env"]
    assert names["placeholders"] == expected_placeholders
    assert names["set"] == sorted([*(s.name for s in SETTINGS), *expected_placeholders])
    first = json.loads((directory / "receipt.jsonl").read_text(encoding="utf-8").splitlines()[0])
    assert first["type"] == "run_start"
    assert first["data"]["agentEnv"] == names
    verified = subprocess.run(
        [sys.executable, "-m", "trialrun", "receipt", "verify", str(directory / "receipt.jsonl")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert verified.returncode == 0, verified.stdout + verified.stderr
    for artifact in directory.iterdir():
        text = artifact.read_text(encoding="utf-8")
        assert SECRET not in text, artifact.name
        assert "C.UTF-8" not in text, artifact.name  # names only, not even our own values


def test_a_suite_override_wins_and_null_leaves_the_outer_value(tmp_path: Path) -> None:
    suite = make_suite(
        tmp_path,
        extra="replay_env:\n  TZ: Europe/Paris\n  DO_NOT_TRACK: null\n  OPENAI_API_KEY: null\n"
        "  MY_FLAG: 'on'\n",
    )
    done = run(tmp_path, suite)
    assert done.returncode == 0, done.stdout + done.stderr
    env = seen(tmp_path)
    assert env["TZ"] == "Europe/Paris"
    assert env["DO_NOT_TRACK"] == "outer"
    assert env["OPENAI_API_KEY"] == SECRET  # the suite asked for the real key, explicitly
    assert env["AWS_ACCESS_KEY_ID"] == PLACEHOLDER
    assert env["PYTHONHASHSEED"] == "0"
    names = json.loads((run_dir(tmp_path) / "summary.json").read_text(encoding="utf-8"))["run"]
    assert "DO_NOT_TRACK" not in names["agent_env"]["set"]
    assert "OPENAI_API_KEY" not in names["agent_env"]["placeholders"]
    assert "MY_FLAG" in names["agent_env"]["set"]


def test_record_passes_real_keys_and_keeps_determinism(tmp_path: Path) -> None:
    suite = make_suite(tmp_path)
    done = run(tmp_path, suite, "--mode", "record")
    assert done.returncode == 0, done.stdout + done.stderr
    env = seen(tmp_path)
    assert env["OPENAI_API_KEY"] == env["AWS_ACCESS_KEY_ID"] == SECRET
    assert env["ANTHROPIC_API_KEY"] is None
    assert env["TZ"] == "UTC"
    assert env["OPENAI_AGENTS_DISABLE_TRACING"] == "1"
    assert env["HF_HUB_OFFLINE"] is None  # record may still download a model
    names = json.loads((run_dir(tmp_path) / "summary.json").read_text(encoding="utf-8"))["run"]
    assert names["agent_env"]["placeholders"] == []


def test_live_is_left_untouched(tmp_path: Path) -> None:
    suite = make_suite(tmp_path, extra="replay_env: {TZ: Europe/Paris}\n")
    done = run(tmp_path, suite, "--mode", "live")
    assert done.returncode == 0, done.stdout + done.stderr
    env = seen(tmp_path)
    assert env["TZ"] == "America/Denver"
    assert env["OPENAI_API_KEY"] == SECRET
    assert env["PYTHONHASHSEED"] == os.environ.get("PYTHONHASHSEED")
    names = json.loads((run_dir(tmp_path) / "summary.json").read_text(encoding="utf-8"))["run"]
    assert names["agent_env"] == {"set": [], "placeholders": []}


@pytest.mark.parametrize(
    ("entry", "problem"),
    [("'1TZ': UTC", "1TZ"), ("TZ: 5", "TZ"), ("TZ: [UTC]", "TZ"), ("'A-B': x", "A-B")],
)
def test_a_bad_override_is_refused_at_its_line(tmp_path: Path, entry: str, problem: str) -> None:
    suite = make_suite(tmp_path, extra=f"replay_env:\n  OK_ONE: x\n  {entry}\n")
    done = run(tmp_path, suite)
    assert done.returncode == 2, done.stdout + done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(f"error: {suite / 'suite.yaml'}:8: ") or line.startswith(
        "error: suite/suite.yaml:8: "
    ), line
    assert problem in line
    assert not (tmp_path / "seen.json").exists()


NAMES = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,20}", fullmatch=True)


# Within the BMP: PyYAML reads JSON's surrogate-pair escapes of astral characters as two
# surrogates, a quirk of the YAML reader that this test of the key's rules does not care about.
BMP_TEXT = st.text(st.characters(max_codepoint=0xFFFF, exclude_categories=("Cs",)), max_size=20)


@given(name=NAMES, value=st.one_of(st.none(), BMP_TEXT))
def test_any_variable_name_and_string_or_null_loads(
    tmp_path_factory: pytest.TempPathFactory, name: str, value: str | None
) -> None:
    root = tmp_path_factory.mktemp("ok")
    suite = make_suite(root, extra=f"replay_env:\n  {json.dumps(name)}: {json.dumps(value)}\n")
    assert load_suite(suite).config.replay_env == {name: value}


@given(
    name=st.text(
        st.characters(min_codepoint=32, max_codepoint=126), min_size=1, max_size=12
    ).filter(lambda n: not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", n))
)
@example(name="[key]")  # the mark that ends a refused key's place: it once hid the key's line
def test_a_name_no_shell_can_export_is_refused(
    tmp_path_factory: pytest.TempPathFactory, name: str
) -> None:
    root = tmp_path_factory.mktemp("bad")
    suite = make_suite(root, extra=f"replay_env:\n  {json.dumps(name)}: x\n")
    with pytest.raises(ConfigError) as raised:
        load_suite(suite)
    assert raised.value.line == 7


def test_agent_env_by_mode() -> None:
    outer = {"GROQ_API_KEY": SECRET, "PATH": "/bin"}
    replay = agent_env("replay", outer, {})
    assert replay["GROQ_API_KEY"] == PLACEHOLDER
    assert "MISTRAL_API_KEY" not in replay
    assert all(replay[name] == PLACEHOLDER for name in ALWAYS_SET)
    assert "PATH" not in replay
    record = agent_env("record", outer, {})
    assert not set(record) & set(CREDENTIALS)
    assert placeholders(record) == []
    assert agent_env("live", outer, {"TZ": "UTC"}) == {}
    assert agent_env("replay", outer, {"GROQ_API_KEY": None, "TZ": "Asia/Tokyo"})["TZ"] == (
        "Asia/Tokyo"
    )
    assert "GROQ_API_KEY" not in agent_env("replay", outer, {"GROQ_API_KEY": None})


def test_the_docs_table_lists_every_variable_with_its_value() -> None:
    page = DOCS.read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| `([A-Z_0-9]+)` \| `([^`]*)` \|", page, re.MULTILINE))
    for setting in SETTINGS:
        assert rows.get(setting.name) == setting.value, setting.name
    listed = set(re.findall(r"`([A-Z][A-Z_0-9]+)`", page))
    assert set(CREDENTIALS) <= listed, sorted(set(CREDENTIALS) - listed)


def test_the_docs_override_example_loads_and_means_what_the_page_says(tmp_path: Path) -> None:
    page = DOCS.read_text(encoding="utf-8")
    [example] = [
        block
        for block in re.findall(r"```yaml\n(.*?)```", page, re.DOTALL)
        if "replay_env:" in block
    ]
    suite = make_suite(tmp_path, extra=example)
    overrides = load_suite(suite).config.replay_env
    assert overrides == {"TZ": "Europe/Paris", "DO_NOT_TRACK": None, "SEARCH_API_KEY": PLACEHOLDER}
    env = agent_env("replay", {"DO_NOT_TRACK": "ci"}, overrides)
    assert env["TZ"] == "Europe/Paris"
    assert "DO_NOT_TRACK" not in env  # the CI job's own value stays
