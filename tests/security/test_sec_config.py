"""Bad files and key text end in one short line that quotes no secret (issue 28, config loading).

Each attack reproduces one way the loaders were abused: an alias bomb that kept a run busy for
minutes, a case file symlinked to a credentials file outside the repository, a megabyte scalar
quoted whole in an error line, and key material pasted where a key's path belongs, echoed into
a CI log. Every test drives the real command line (in-process, or as a subprocess where the
point is how long the process runs).
"""

from __future__ import annotations

import base64
import json
import os
import resource
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builders import call_cli
from paths import SRC_DIR
from trialrun.config import load_suite
from trialrun.config.yamlgraph import MAX_ALIAS_VALUES
from trialrun.config.yamlload import parse_yaml
from trialrun.errors import ConfigError, ConfigErrors

SRC = SRC_DIR

SUITE = """\
suite_name: demo
agent_command: ["python3", "agent.py"]
mode: replay
cases_path: cases
tool_registry: [search]
"""
CASE = "id: {id}\ninput: {{q: 1}}\ncassette: cassettes/{id}.jsonl\n"
GITHUB_TOKEN = "ghp_Zq8Xw2Lm4Np6Rt0Vy3Bc5Df7Gh9Jk1Ms2Qx"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


def _suite(root: Path, cases: dict[str, str] | None = None) -> Path:
    """A suite inside a repository at ``root`` (its ``.git`` makes it one)."""
    (root / ".git").mkdir(parents=True, exist_ok=True)
    suite = root / "suite"
    (suite / "cases").mkdir(parents=True)
    (suite / "suite.yaml").write_text(SUITE, encoding="utf-8")
    for name, text in (cases or {"a.yaml": CASE.format(id="a")}).items():
        (suite / "cases" / name).write_text(text, encoding="utf-8")
    return suite


def _one_error_line(output: str) -> str:
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1, output[:2000]
    assert lines[0].startswith("error: "), lines[0][:2000]
    return lines[0]


# ---- alias bombs ----------------------------------------------------------------------------


def _nested_aliases(width: int, depth: int) -> str:
    """Level 0 is a list of ``width`` scalars; each level lists ``width`` aliases of the last."""
    lines = [f"l0: &l0 [{', '.join(['x'] * width)}]"]
    for level in range(1, depth + 1):
        lines.append(f"l{level}: &l{level} [{', '.join([f'*l{level - 1}'] * width)}]")
    return "".join(f"  {line}\n" for line in lines)


def _repeated_values(width: int, depth: int) -> int:
    """How many values the aliases of ``_nested_aliases`` repeat, expanded."""
    size, repeated = 1 + width, 0
    for _ in range(depth):
        repeated += width * size
        size = 1 + width * size
    return repeated


def test_an_alias_bomb_is_refused_at_once_with_file_line_and_bound(tmp_path: Path) -> None:
    # Nine lists of nine aliases, nested eight deep: 43 million values once expanded. Walking
    # them took minutes; the refusal needs no walk. The child gets 20 s of CPU at most (load on
    # the machine does not count against it), and is asked to take under a few.
    bomb = "id: bomb\ncassette: c.jsonl\ninput:\n" + _nested_aliases(9, 8)
    suite = _suite(tmp_path, {"a.yaml": CASE.format(id="a"), "bomb.yaml": bomb})

    def limit_cpu() -> None:
        resource.setrlimit(resource.RLIMIT_CPU, (20, 30))

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(
        [sys.executable, "-m", "trialrun", "run", str(suite)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(SRC)},
        cwd=tmp_path,
        preexec_fn=limit_cpu,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    line = _one_error_line(proc.stdout + proc.stderr)
    # Line 9 holds l5: the aliases above it repeat 74,718 values, and its first alias repeats
    # all 66,430 values of l4.
    assert line.startswith("error: suite/cases/bomb.yaml:9: aliases ")
    assert f"{MAX_ALIAS_VALUES:,}" in line
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    assert cpu < 5, f"the refusal took {cpu:.1f} s of CPU"

    # A real suite's aliases (a few hundred references to a shared mapping) still load.
    shared = "defaults: &d {" + ", ".join(f"k{i}: {i}" for i in range(20)) + "}\n"
    many = CASE.format(id="many") + "normalization:\n  replace_paths:\n    " + shared
    many += "".join(f"    p{i}: *d\n" for i in range(300))
    (suite / "cases" / "bomb.yaml").write_text(many, encoding="utf-8")
    loaded = load_suite(suite)
    assert [case.config.id for case in loaded.cases] == ["a", "many"]


@settings(max_examples=60)
@given(width=st.integers(min_value=1, max_value=12), depth=st.integers(min_value=1, max_value=8))
def test_aliases_load_exactly_while_their_repeats_stay_within_the_bound(
    width: int, depth: int
) -> None:
    text = "top:\n" + _nested_aliases(width, depth)
    repeated = _repeated_values(width, depth)
    if repeated <= MAX_ALIAS_VALUES:
        assert parse_yaml(text, file="f.yaml").data["top"][f"l{depth}"] is not None
        return
    with pytest.raises(ConfigError) as caught:
        parse_yaml(text, file="f.yaml")
    error = caught.value
    assert (error.file, f"{MAX_ALIAS_VALUES:,}" in error.message) == ("f.yaml", True)
    assert error.line is not None and 2 <= error.line <= depth + 2


def _bomb_in(kind: str, root: Path) -> Callable[[], object]:
    """A file of ``kind`` holding an alias bomb, and the call that reads it."""
    from trialrun.commands.verify_plan import load_plan
    from trialrun.compare.config import load_eval_assets
    from trialrun.compare.selector import read_description
    from trialrun.incident.rules import load_rules
    from trialrun.scenario.pack import load_pack

    bomb = "bomb:\n" + _nested_aliases(9, 8)
    if kind == "compare.yaml":
        (root / "evals").mkdir()
        (root / "evals" / "compare.yaml").write_text("name: s\n" + bomb, encoding="utf-8")
        return lambda: load_eval_assets(root)
    if kind == "SKILL.md frontmatter":
        (root / "SKILL.md").write_text(f"---\nname: s\n{bomb}---\nbody\n", encoding="utf-8")
        return lambda: read_description(root, strict=True)
    if kind == "verify plan":
        (root / "plan.yaml").write_text("suite: s\n" + bomb, encoding="utf-8")
        return lambda: load_plan(root / "plan.yaml")
    if kind == "scenario pack":
        (root / "pack.yaml").write_text("agents: {}\n" + bomb, encoding="utf-8")
        return lambda: load_pack(root)
    (root / "rules.yaml").write_text("rules: []\n" + bomb, encoding="utf-8")
    return lambda: load_rules(root / "rules.yaml")


@pytest.mark.parametrize(
    "kind",
    ["compare.yaml", "SKILL.md frontmatter", "verify plan", "scenario pack", "incident rules"],
)
def test_every_yaml_reader_refuses_an_alias_bomb(kind: str, tmp_path: Path) -> None:
    read = _bomb_in(kind, tmp_path)
    with pytest.raises(ConfigError) as caught:
        read()
    # The first problem of the file: the bomb comes before any check of what the file means.
    error = caught.value.errors[0] if isinstance(caught.value, ConfigErrors) else caught.value
    assert f"{MAX_ALIAS_VALUES:,} values" in error.message, str(error)[:500]
    assert error.file is not None and error.line is not None


# ---- files outside the repository -----------------------------------------------------------


def test_a_case_file_symlinked_outside_the_repository_is_refused_inside_allowed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    suite = _suite(tmp_path / "repo")
    outside = tmp_path / "home" / ".config" / "credentials"
    outside.parent.mkdir(parents=True)
    outside.write_text(f"{GITHUB_TOKEN}\n", encoding="utf-8")
    (suite / "cases" / "z.yaml").symlink_to(outside)

    code, out, err = call_cli(["run", str(suite)], capsys)
    output = out + err

    assert code == 2
    line = _one_error_line(output)
    assert line.startswith("error: repo/suite/suite.yaml:4: case file 'repo/suite/cases/z.yaml'")
    assert "outside the repository" in line
    assert GITHUB_TOKEN[4:12] not in output

    # The same link to a case file inside the repository is a case like any other.
    inside = tmp_path / "repo" / "shared-cases" / "z.yaml"
    inside.parent.mkdir()
    inside.write_text(CASE.format(id="z"), encoding="utf-8")
    (suite / "cases" / "z.yaml").unlink()
    (suite / "cases" / "z.yaml").symlink_to(inside)
    assert [case.config.id for case in load_suite(suite).cases] == ["a", "z"]


def test_a_tool_module_symlinked_outside_the_repository_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    suite = _suite(tmp_path / "repo")
    (suite / "suite.yaml").write_text(SUITE + "tool_module: tools\n", encoding="utf-8")
    elsewhere = tmp_path / "elsewhere" / "tools.py"
    elsewhere.parent.mkdir()
    elsewhere.write_text("TOOLS = {}\n", encoding="utf-8")
    (suite / "tools.py").symlink_to(elsewhere)

    code, out, err = call_cli(["run", str(suite), "--mode", "live"], capsys)
    output = out + err

    assert code == 2
    line = _one_error_line(output)
    assert line.startswith("error: repo/suite/suite.yaml:6: 'tool_module': 'repo/suite/tools.py'")
    assert "outside the repository" in line


def test_a_model_recording_symlinked_outside_the_repository_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Replay would read it (and quote it in its errors); record would write through the link.
    monkeypatch.chdir(tmp_path)
    suite = _suite(tmp_path / "repo")
    (suite / "suite.yaml").write_text(SUITE + "model_gateway: {}\n", encoding="utf-8")
    (suite / "cassettes").mkdir()
    outside = tmp_path / "credentials"
    outside.write_text(f"{GITHUB_TOKEN}\n", encoding="utf-8")
    (suite / "cassettes" / "a.model.jsonl").symlink_to(outside)

    for mode in ("replay", "record"):
        code, out, err = call_cli(["run", str(suite), "--mode", mode], capsys)
        output = out + err

        assert code == 2
        line = _one_error_line(output)
        assert line.startswith("error: repo/suite/cassettes/a.model.jsonl: a symbolic link")
        assert "outside the repository" in line
        assert GITHUB_TOKEN[4:12] not in output
    assert outside.read_text(encoding="utf-8") == f"{GITHUB_TOKEN}\n"


def test_an_http_recording_symlinked_outside_the_repository_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The HTTP recorder's file beside the cassette is checked even when no model or MCP
    # service is configured; live mode neither reads nor writes it.
    monkeypatch.chdir(tmp_path)
    suite = _suite(tmp_path / "repo")
    (suite / "cassettes").mkdir()
    outside = tmp_path / "credentials"
    outside.write_text(f"{GITHUB_TOKEN}\n", encoding="utf-8")
    (suite / "cassettes" / "a.http.jsonl").symlink_to(outside)

    for mode in ("replay", "record"):
        code, out, err = call_cli(["run", str(suite), "--mode", mode], capsys)
        output = out + err

        assert code == 2
        line = _one_error_line(output)
        assert line.startswith("error: repo/suite/cassettes/a.http.jsonl: a symbolic link")
        assert "outside the repository" in line
        assert GITHUB_TOKEN[4:12] not in output
    assert outside.read_text(encoding="utf-8") == f"{GITHUB_TOKEN}\n"


def test_a_compare_case_symlinked_outside_the_subject_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    evals = tmp_path / "skill" / "evals"
    (evals / "cases").mkdir(parents=True)
    (evals / "compare.yaml").write_text(
        "name: s\nagent:\n  command: [run, '{task}']\n", encoding="utf-8"
    )
    (evals / "cases" / "one.yaml").write_text(
        "task: do it\nchecks:\n  - file_exists: a.txt\n", encoding="utf-8"
    )
    outside = tmp_path / "credentials"
    outside.write_text(f"aws_secret_access_key = {AWS_SECRET}\n", encoding="utf-8")
    (evals / "cases" / "two.yaml").symlink_to(outside)

    code, out, err = call_cli(["compare", str(tmp_path / "skill")], capsys)
    output = out + err

    assert code == 2
    line = _one_error_line(output)
    assert line.startswith("error: skill/evals/cases/two.yaml: a symbolic link that resolves")
    assert "outside the subject" in line
    assert AWS_SECRET[:8] not in output


# ---- what an error line quotes --------------------------------------------------------------

MEGABYTE = "x" * 1_000_000


@pytest.mark.parametrize(
    ("name", "case_text"),
    [
        pytest.param("b.yaml", MEGABYTE + "\n", id="the whole file one scalar"),
        # An explicit key ("? ") may be as long as it likes; a plain one stops at 1024.
        pytest.param("b.yaml", CASE.format(id="b") + f"? {MEGABYTE}\n: 1\n", id="an unknown key"),
        pytest.param(
            "b.yaml", CASE.format(id="b") + "tags: *" + MEGABYTE + "\n", id="an undefined alias"
        ),
        pytest.param(
            "b.yaml",
            CASE.format(id="b") + f"? {MEGABYTE}\n: 1\n? {MEGABYTE}\n: 2\n",
            id="a duplicate key",
        ),
        pytest.param("b.json", '"' + MEGABYTE + '"', id="a JSON string"),
    ],
)
def test_a_megabyte_in_a_bad_place_gives_a_short_error_line(
    name: str,
    case_text: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    suite = _suite(tmp_path / "repo", {"a.yaml": CASE.format(id="a"), name: case_text})

    code, out, err = call_cli(["run", str(suite)], capsys)
    output = out + err

    assert code == 2
    line = _one_error_line(output)
    assert line.startswith(f"error: repo/suite/cases/{name}:")
    assert len(line) < 300, line[:400]


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("b.yaml", "2024-13-45", "cannot read '2024-13-45' as timestamp: month must be in 1..12"),
        ("b.yaml", "!!bool maybe", "cannot read 'maybe' as bool"),
        ("b.yaml", "9" * 5000, "an integer of about 5,000 digits; trialrun reads integers of"),
        ("b.yaml", "0x" + "f" * 5000, "an integer of about 6,025 digits; trialrun reads integers"),
        ("b.json", "9" * 5000, "invalid JSON: a number of more than 4,300 digits"),
    ],
)
def test_a_value_its_tag_cannot_hold_is_an_error_line_not_a_traceback(
    name: str,
    value: str,
    says: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # PyYAML's constructors, and Python's int(), raise plain errors that name no line.
    monkeypatch.chdir(tmp_path)
    if name.endswith(".json"):
        text = f'{{"id": "b",\n "cassette": "c.jsonl",\n "input": {{"n": {value}}}}}\n'
    else:
        text = f"id: b\ncassette: c.jsonl\ninput: {{n: {value}}}\n"
    suite = _suite(tmp_path / "repo", {"a.yaml": CASE.format(id="a"), name: text})

    code, out, err = call_cli(["run", str(suite)], capsys)
    output = out + err

    assert code == 2
    line = _one_error_line(output)
    assert line.startswith(f"error: repo/suite/cases/{name}:3: {says}"), line[:300]


def test_a_megabyte_suite_name_gives_a_short_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    suite = _suite(tmp_path / "repo")
    text = SUITE.replace("suite_name: demo", f"suite_name: a/{MEGABYTE}")
    (suite / "suite.yaml").write_text(text, encoding="utf-8")

    code, out, err = call_cli(["run", str(suite)], capsys)
    output = out + err

    assert code == 2
    line = _one_error_line(output)
    assert line.startswith("error: repo/suite/suite.yaml:1: 'suite_name' must be a plain name")
    assert len(line) < 300, line[:400]


PEM_BODY = "MC4CAQAwBQYDK2VwBCIEIET6D3IWoBqjTBdky4noibE4d56qy69QlLXHB3u3jmKY"


@pytest.mark.parametrize(
    ("file_name", "content", "secret"),
    [
        ("credentials.yaml", f"{GITHUB_TOKEN}\n", GITHUB_TOKEN),
        ("env.yaml", f"AWS_SECRET_ACCESS_KEY={AWS_SECRET}\n", AWS_SECRET),
        (
            "key.yaml",
            f"-----BEGIN PRIVATE KEY-----\n{PEM_BODY}\n-----END PRIVATE KEY-----\n",
            PEM_BODY,
        ),
        ("token.json", f'"{GITHUB_TOKEN}"\n', GITHUB_TOKEN),
    ],
)
def test_a_credentials_file_a_path_points_at_never_has_its_secret_printed(
    file_name: str,
    content: str,
    secret: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # cases_path pointed by mistake at a folder of credentials inside the repository.
    monkeypatch.chdir(tmp_path)
    suite = _suite(tmp_path / "repo")
    (suite / "secrets").mkdir()
    (suite / "secrets" / file_name).write_text(content, encoding="utf-8")
    text = SUITE.replace("cases_path: cases", "cases_path: secrets")
    (suite / "suite.yaml").write_text(text, encoding="utf-8")

    code, out, err = call_cli(["run", str(suite)], capsys)
    output = out + err

    assert code == 2
    line = _one_error_line(output)
    assert line.startswith(f"error: repo/suite/secrets/{file_name}:")
    assert not _shares_a_run(secret, output, 8), line


def test_an_incident_field_of_the_wrong_type_is_quoted_redacted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # An incident is a production trace: arguments saved as text carry the caller's token.
    monkeypatch.chdir(tmp_path)
    call = {"index": 0, "name": "fetch", "args": f"Authorization: Bearer {GITHUB_TOKEN}"}
    incident = {
        "schema_version": 1,
        "source_format": "trialrun",
        "source_file": "run.jsonl",
        "calls": [call],
    }
    (tmp_path / "incident.json").write_text(json.dumps(incident, indent=2), encoding="utf-8")

    code, out, err = call_cli(["incident", "inspect", "incident.json", "--out", "out"], capsys)
    output = out + err

    assert code == 2
    line = _one_error_line(output)
    assert line.startswith("error: incident.json:9: calls[0].args: expected an object or null")
    assert not _shares_a_run(GITHUB_TOKEN, output, 8), line


def test_a_model_recording_quotes_a_bad_path_redacted(tmp_path: Path) -> None:
    # A hand-edited recording of a provider that takes its key in the query string.
    from trialrun.gateway.cassette import HEADER, check_cassette

    recording = {
        "provider": "openai",
        "method": "POST",
        "path": f"v1/chat?api_key={GITHUB_TOKEN}",
        "request": {},
        "status": 200,
        "content_type": "application/json",
        "body": "{}",
    }
    text = json.dumps(HEADER) + "\n" + json.dumps(recording) + "\n"

    problems = check_cassette(text, tmp_path / "c.model.jsonl")[1]

    assert [problem.line for problem in problems] == [2]
    assert "field 'path' must start with '/'" in str(problems[0])
    assert not _shares_a_run(GITHUB_TOKEN, str(problems[0]), 8), str(problems[0])


# ---- key text where a key's path belongs ----------------------------------------------------


def _keys() -> dict[str, str]:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.from_private_bytes(bytes(range(7, 39)))
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    seed = key.private_bytes(
        serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
    )
    return {"pem": pem, "base64": base64.b64encode(seed).decode()}


def _shares_a_run(secret: str, output: str, length: int) -> bool:
    """Whether ``output`` holds any ``length`` characters in a row of ``secret``'s key material."""
    body = "".join(line for line in secret.splitlines() if not line.startswith("-----")) or "".join(
        secret.split()
    )
    return any(body[i : i + length] in output for i in range(len(body) - length + 1))


@pytest.mark.parametrize("form", ["pem", "base64"])
@pytest.mark.parametrize(
    "how",
    [
        "run --sign-key",
        "TRIALRUN_SIGN_KEY",
        "attempt --sign-key",
        "receipt sign --key",
        "receipt verify",
    ],
)
def test_key_text_given_for_a_key_path_is_never_printed(
    how: str,
    form: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TRIALRUN_SIGN_KEY", raising=False)
    key = _keys()[form]
    suite = _suite(tmp_path / "repo")
    receipt = tmp_path / "receipt.jsonl"
    receipt.write_text("{}\n", encoding="utf-8")
    args = {
        "run --sign-key": ["run", str(suite), "--sign-key", key],
        "TRIALRUN_SIGN_KEY": ["run", str(suite)],
        "attempt --sign-key": [
            "attempt",
            "--goal",
            "g",
            "--verify",
            "true",
            "--agent",
            "true",
            "--sign-key",
            key,
        ],
        "receipt sign --key": ["receipt", "sign", str(receipt), "--key", key],
        "receipt verify": ["receipt", "verify", str(receipt), "--public-key", key],
    }[how]
    if how == "TRIALRUN_SIGN_KEY":
        monkeypatch.setenv("TRIALRUN_SIGN_KEY", key)

    code, out, err = call_cli(args, capsys)
    output = out + err

    assert code == 2
    line = _one_error_line(output)
    assert "looks like" in line and "key text" in line, line
    assert "expected the path of" in line, line
    assert not _shares_a_run(key, output, 6), line
    assert not (tmp_path / "out").exists()
