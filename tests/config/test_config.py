"""Loading suites and cases: the happy path, every class of bad config, paths, peer fixtures."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from jsonerrors import json_error
from trialrun.base import assertion_api as registry
from trialrun.base import suggest
from trialrun.base.assertion_api import (
    AssertionParamError,
    AssertionRegistry,
    CheckSubject,
    CompileContext,
)
from trialrun.base.results import CheckFailure
from trialrun.config import Case, Suite, load_suite
from trialrun.config.models import Budgets
from trialrun.config.paths import SuitePaths, display_path, find_repository_root
from trialrun.config.schema_export import SCHEMA_DIR, export_schemas
from trialrun.errors import ConfigError, ConfigErrors

SUITE = """\
suite_name: demo
agent_command: ["python3", "agent/agent.py", "-u"]
mode: replay
cases_path: cases
tool_registry: [search_docs]
assertions:
  - type: probe
    value: 1
budgets:
  max_wall_ms: 20000
  max_tool_calls: 3
normalization:
  strip_keys: [ts]
baseline_path: ../baselines/demo.json
output_dir: out
"""

CASE = """\
id: {id}
input:
  ticket: hello
cassette: cassettes/{id}.jsonl
"""


# -- a private registry with test-only assertion types ----------------------------------------


@dataclass(frozen=True)
class _Compiled:
    type: str
    params: Mapping[str, Any]

    def check(self, subject: CheckSubject) -> list[CheckFailure]:
        return []


class _ProbeType:
    """Accepts ``value`` (an integer) and ``path`` (resolved through the context)."""

    name = "probe"

    def __init__(self) -> None:
        self.compiles = 0

    def compile(self, params: Mapping[str, Any], ctx: CompileContext) -> _Compiled:
        self.compiles += 1
        if params.get("crash") == "value":
            raise ValueError("crash")
        if params.get("crash") == "exit":
            raise SystemExit(3)  # a plugin's sys.exit() must not end trialrun
        for key in params:
            if key not in ("value", "path"):
                raise AssertionParamError(f"unknown parameter '{key}' for probe", key=key)
        if not isinstance(params.get("value", 0), int):
            raise AssertionParamError("parameter 'value' of probe must be an integer", key="value")
        if "path" in params:
            ctx.resolve_path(params["path"])
        return _Compiled("probe", dict(params))


class _OtherType:
    name = "must_call_twice"

    def compile(self, params: Mapping[str, Any], ctx: CompileContext) -> _Compiled:
        return _Compiled(self.name, dict(params))


class _BrokenEntryPoint:
    name = "broken"
    value = "nowhere.module:THING"

    def load(self) -> Any:
        raise ImportError("No module named 'nowhere'")


@pytest.fixture
def probe(monkeypatch: pytest.MonkeyPatch) -> _ProbeType:
    fake = AssertionRegistry(discover=lambda: [_BrokenEntryPoint()])
    probe_type = _ProbeType()
    fake.register(probe_type)
    fake.register(_OtherType())
    monkeypatch.setattr(registry, "_DEFAULT_REGISTRY", fake)
    return probe_type


# -- helpers ----------------------------------------------------------------------------------


def write_tree(root: Path, files: Mapping[str, str]) -> None:
    for name, text in files.items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


def git_init(directory: Path) -> None:
    if shutil.which("git"):
        subprocess.run(["git", "init", "-q", str(directory)], check=True)
    else:
        (directory / ".git").mkdir()


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty git repository, also the working directory (so files show relative)."""
    git_init(tmp_path)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def make_suite(
    root: Path, suite: str = SUITE, cases: Mapping[str, str] | None = None, where: str = "suite"
) -> Path:
    if cases is None:
        cases = {"t1.yaml": CASE.format(id="t1")}
    write_tree(
        root, {f"{where}/suite.yaml": suite, **{f"{where}/cases/{n}": t for n, t in cases.items()}}
    )
    return root / where


def problems(path: Path, **kwargs: Any) -> list[str]:
    with pytest.raises(ConfigErrors) as caught:
        load_suite(path, **kwargs)
    return [str(error) for error in caught.value.errors]


def replace(text: str, old: str, new: str) -> str:
    assert old in text, old
    return text.replace(old, new)


# -- the happy path ---------------------------------------------------------------------------


def test_a_valid_suite_loads_with_everything_resolved(repo: Path, probe: _ProbeType) -> None:
    cases = {
        "b.yaml": CASE.format(id="second"),
        "a.yml": CASE.format(id="first")
        + "assertions:\n  - {type: must_call_twice}\nbudgets: {max_tool_calls: 9}\n"
        "normalization: {strip_keys: [id]}\n",
        "notes.txt": "not a case",
    }
    suite_dir = make_suite(repo, cases=cases)
    (suite_dir / "agent").mkdir()
    (suite_dir / "agent" / "agent.py").write_text("")

    suite = load_suite(suite_dir)

    assert isinstance(suite, Suite)
    assert suite.suite_file == suite_dir / "suite.yaml"
    assert suite.suite_dir == suite_dir
    assert suite.root == repo
    assert suite.tool_module_dir == suite_dir
    assert suite.agent_command == ["python3", str(suite_dir / "agent" / "agent.py"), "-u"]
    assert suite.baseline_path == repo / "baselines" / "demo.json"
    assert suite.output_dir == suite_dir / "out"
    assert [c.config.id for c in suite.cases] == ["first", "second"]
    first, second = suite.cases
    assert isinstance(first, Case)
    assert first.file == suite_dir / "cases" / "a.yml"
    assert first.cassette_path == suite_dir / "cassettes" / "first.jsonl"
    assert [a.type for a in first.assertions] == ["probe", "must_call_twice"]
    assert [a.type for a in second.assertions] == ["probe"]
    assert first.budgets == Budgets(max_wall_ms=20000, max_tool_calls=9)
    assert second.budgets == Budgets(max_wall_ms=20000, max_tool_calls=3)
    assert first.normalization.strip_keys == ["ts", "id"]
    assert second.normalization.strip_keys == ["ts"]


def test_a_suite_file_path_and_yml_names_load(repo: Path, probe: _ProbeType) -> None:
    write_tree(repo, {"s/suite.yml": SUITE, "s/cases/t.yml": CASE.format(id="t")})
    assert load_suite(repo / "s").suite_file.name == "suite.yml"
    assert [c.config.id for c in load_suite(repo / "s" / "suite.yml").cases] == ["t"]
    assert load_suite(str(repo / "s")).config.suite_name == "demo"


def test_without_a_repository_the_root_is_the_suite_dir(tmp_path: Path, probe: _ProbeType) -> None:
    if find_repository_root(tmp_path) is not None:
        pytest.skip("the temporary directory is inside a git repository")
    suite = load_suite(make_suite(tmp_path, suite=replace(SUITE, "../baselines", "baselines")))
    assert suite.root == tmp_path / "suite"


def test_defaults_when_optional_parts_are_absent(repo: Path, probe: _ProbeType) -> None:
    minimal = (
        "suite_name: m\nagent_command: [a]\nmode: live\ncases_path: cases\ntool_registry: []\n"
    )
    suite = load_suite(make_suite(repo, suite=minimal))
    assert suite.baseline_path is None and suite.output_dir is None
    (case,) = suite.cases
    assert case.assertions == [] and case.budgets == Budgets()
    assert case.normalization.is_empty


def test_missing_cassettes_are_not_a_load_error(repo: Path, probe: _ProbeType) -> None:
    suite = load_suite(make_suite(repo))
    assert not suite.cases[0].cassette_path.exists()


def test_lone_surrogates_in_input_are_kept(repo: Path, probe: _ProbeType) -> None:
    case = 'id: s\ninput: {q: "\\ud83d", ok: "\\u00e9"}\ncassette: c.jsonl\n'
    suite = load_suite(make_suite(repo, cases={"s.yaml": case}))
    assert suite.cases[0].config.input == {"q": "\ud83d", "ok": "\u00e9"}


def test_an_input_that_contains_itself_is_one_error_line(repo: Path, probe: _ProbeType) -> None:
    # A YAML alias inside the value it names: validating the input used to recurse forever.
    case = "id: s\ninput: &in\n  ticket: hello\n  again: *in\ncassette: c.jsonl\n"
    with pytest.raises(ConfigError) as caught:
        load_suite(make_suite(repo, cases={"s.yaml": case}))
    assert str(caught.value).startswith(
        "suite/cases/s.yaml:4: the alias at 'input.again' names a value that contains it"
    )


def test_case_ids_select_cases_in_file_order(repo: Path, probe: _ProbeType) -> None:
    cases = {f"{n}.yaml": CASE.format(id=n) for n in ("a", "b", "c")}
    suite = load_suite(make_suite(repo, cases=cases), case_ids=["c", "a", "c"])
    assert [c.config.id for c in suite.cases] == ["a", "c"]


# -- locating the suite -----------------------------------------------------------------------


def test_locating_the_suite_file_fails_clearly(repo: Path, probe: _ProbeType) -> None:
    (repo / "empty").mkdir()
    with pytest.raises(ConfigError, match=r"^empty: no suite.yaml or suite.yml in this directory$"):
        load_suite(repo / "empty")
    with pytest.raises(ConfigError, match=r"^nope: suite not found \(expected a directory"):
        load_suite(repo / "nope")
    write_tree(repo, {"both/suite.yaml": SUITE, "both/suite.yml": SUITE})
    with pytest.raises(
        ConfigError, match=r"^both: both suite\.yaml and suite\.yml exist; keep only one$"
    ):
        load_suite(repo / "both")


# -- the suite file ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (
            "agent_command:",
            "agnet_command:",
            "suite/suite.yaml:2: unknown key 'agnet_command' in suite "
            "(did you mean 'agent_command'?)",
        ),
        (
            "  max_tool_calls: 3",
            "  max_tool_cals: 3",
            "suite/suite.yaml:11: unknown key 'max_tool_cals' in budgets "
            "(did you mean 'max_tool_calls'?)",
        ),
        (
            "  strip_keys: [ts]",
            "  strip_key: [ts]",
            "suite/suite.yaml:13: unknown key 'strip_key' in normalization "
            "(did you mean 'strip_keys'?)",
        ),
        (
            "output_dir: out",
            "regression:\n  min_pass_rat: 1.0",
            "suite/suite.yaml:16: unknown key 'min_pass_rat' in regression "
            "(did you mean 'min_pass_rate'?)",
        ),
        (
            "output_dir: out",
            "colour: blue",
            "suite/suite.yaml:15: unknown key 'colour' in suite",
        ),
        (
            "  max_tool_calls: 3",
            "  max_tool_calls: '10'",
            "suite/suite.yaml:11: 'max_tool_calls' must be an integer, found string '10'",
        ),
        (
            "  max_tool_calls: 3",
            "  max_tool_calls: 2.5",
            "suite/suite.yaml:11: 'max_tool_calls' must be an integer, found number 2.5",
        ),
        (
            "  max_wall_ms: 20000",
            "  max_wall_ms: -5",
            "suite/suite.yaml:10: 'max_wall_ms' must be >= 0, found -5",
        ),
        (
            "mode: replay",
            "mode: replai",
            "suite/suite.yaml:3: 'mode' must be one of replay, record, live; "
            "found string 'replai' (did you mean 'replay'?)",
        ),
        (
            'agent_command: ["python3", "agent/agent.py", "-u"]',
            "agent_command: python3 agent/agent.py",
            "suite/suite.yaml:2: 'agent_command' must be a list of strings, not one string; "
            'write agent_command: ["python3", "agent/agent.py"]',
        ),
        (
            'agent_command: ["python3", "agent/agent.py", "-u"]',
            "agent_command: []",
            "suite/suite.yaml:2: 'agent_command' must not be empty",
        ),
        (
            'agent_command: ["python3", "agent/agent.py", "-u"]',
            "agent_command: [python3, 3]",
            "suite/suite.yaml:2: 'agent_command[1]' must be a string, found integer 3",
        ),
        (
            "tool_registry: [search_docs]\n",
            "",
            "suite/suite.yaml:1: missing required key 'tool_registry' in suite",
        ),
        (
            "suite_name: demo",
            "suite_name: 7",
            "suite/suite.yaml:1: 'suite_name' must be a string, found integer 7",
        ),
        (
            "suite_name: demo",
            "suite_name: ../escape",
            "suite/suite.yaml:1: 'suite_name' must be a plain name usable as a directory, "
            "found '../escape'",
        ),
        (
            "budgets:\n  max_wall_ms: 20000\n  max_tool_calls: 3\n",
            "budgets: 5\n",
            "suite/suite.yaml:9: 'budgets' must be a mapping, found integer 5",
        ),
        (
            "output_dir: out",
            "regression: {min_success_rate: 2}",
            "suite/suite.yaml:15: 'min_success_rate' must be <= 1, found 2",
        ),
        (
            "output_dir: out",
            "idle_timeout_ms: 0",
            "suite/suite.yaml:15: 'idle_timeout_ms' must be > 0, found 0",
        ),
        (
            "output_dir: out",
            "output_dir: out\noutput_dir: again",
            "suite/suite.yaml:16: duplicate key 'output_dir' (first defined at line 15; "
            "YAML would silently keep only the last one)",
        ),
        (
            "cases_path: cases",
            "cases_path: [cases",
            "suite/suite.yaml:5: invalid YAML: expected ',' or ']', but got ':'",
        ),
    ],
)
def test_each_suite_problem_is_reported_at_its_line(
    repo: Path, probe: _ProbeType, old: str, new: str, expected: str
) -> None:
    assert problems(make_suite(repo, suite=replace(SUITE, old, new))) == [expected]


def test_a_suite_that_is_not_a_mapping(repo: Path, probe: _ProbeType) -> None:
    assert problems(make_suite(repo, suite="- a\n- b\n")) == [
        "suite/suite.yaml:1: expected a mapping of keys to values at the top level, found a list"
    ]


def test_every_problem_in_every_file_is_reported_at_once(repo: Path, probe: _ProbeType) -> None:
    suite = replace(SUITE, "mode: replay", "mode: fast")
    suite = replace(suite, "  max_wall_ms: 20000", "  max_wall_ms: -1")
    cases = {
        "a.yaml": "id: a\ninput: {}\ncassette: a.jsonl\nexpected: 1\n",
        "b.yaml": "id: b\ninput: [1]\n",
        "c.yaml": "id: c\ninput: {x: [1}\n",
    }
    assert problems(make_suite(repo, suite=suite, cases=cases)) == [
        "suite/suite.yaml:3: 'mode' must be one of replay, record, live; found string 'fast'",
        "suite/suite.yaml:10: 'max_wall_ms' must be >= 0, found -1",
        "suite/cases/a.yaml:4: unknown key 'expected' in case",
        "suite/cases/b.yaml:1: missing required key 'cassette' in case",
        "suite/cases/b.yaml:2: 'input' must be a mapping, found a list",
        "suite/cases/c.yaml:2: invalid YAML: expected ',' or ']', but got '}'",
    ]


def test_a_misspelt_required_key_is_reported_once(repo: Path, probe: _ProbeType) -> None:
    case = "id: a\ninput: {}\ncasette: a.jsonl\n"
    assert problems(make_suite(repo, cases={"a.yaml": case})) == [
        "suite/cases/a.yaml:3: unknown key 'casette' in case (did you mean 'cassette'?)"
    ]


def test_regression_aliases_are_accepted(repo: Path, probe: _ProbeType) -> None:
    suite_text = SUITE + "regression: {min_success_rate: 0.5, max_p95_wall_ms_increase_pct: 0.1}\n"
    regression = load_suite(make_suite(repo, suite=suite_text)).config.regression
    assert regression is not None
    assert regression.min_pass_rate == 0.5
    assert regression.max_p95_wall_ms_delta_pct == 0.1


# -- case files -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        (
            "id: 5\ninput: {}\ncassette: c.jsonl\n",
            "suite/cases/t.yaml:1: 'id' must be a string, found integer 5",
        ),
        (
            "input: {}\ncassette: c.jsonl\n",
            "suite/cases/t.yaml:1: missing required key 'id' in case",
        ),
        (
            "id: t\ninput: {1: x}\ncassette: c.jsonl\n",
            "suite/cases/t.yaml:2: keys of 'input' must be strings, found integer 1",
        ),
        (
            "id: t\ninput:\n  when: 2024-01-02\ncassette: c.jsonl\n",
            "suite/cases/t.yaml:3: 'input.when' must be JSON data, found a YAML date (2024-01-02); "
            "quote it to keep it as text",
        ),
        (
            "id: t\ninput:\n  n: [1, .nan]\ncassette: c.jsonl\n",
            "suite/cases/t.yaml:3: 'input.n.1' is nan, which JSON cannot carry",
        ),
        (
            "id: t\ninput: {}\ncassette: c.jsonl\nbudgets: {max_cost_usd: -0.5}\n",
            "suite/cases/t.yaml:4: 'max_cost_usd' must be >= 0, found -0.5",
        ),
        (
            "id: t\ninput: {}\ncassette: c.jsonl\n7: x\n",
            "suite/cases/t.yaml:4: keys of the file must be strings, found integer 7",
        ),
        (
            "id: t\ninput: {}\ncassette: c.jsonl\nbudgets:\n  3: 1\n",
            "suite/cases/t.yaml:5: keys of 'budgets' must be strings, found integer 3",
        ),
        ("", "suite/cases/t.yaml: the file is empty; expected a mapping of keys to values"),
    ],
)
def test_each_case_problem_is_reported_at_its_line(
    repo: Path, probe: _ProbeType, case: str, expected: str
) -> None:
    assert problems(make_suite(repo, cases={"t.yaml": case})) == [expected]


def test_json_case_files_are_cases_and_cassettes_beside_them_are_not(
    repo: Path, probe: _ProbeType
) -> None:
    cases = {
        # Tabs between tokens and 1e5 / 1e-05 numbers: valid JSON that YAML 1.1 reads otherwise.
        "a.json": '{\n\t"id": "from-json",\n\t"input": {"n": 1e5, "m": 1e-05, "s": "x\\ty"},'
        '\n\t"cassette": "cassettes/a.jsonl"\n}\n',
        "b.yaml": CASE.format(id="from-yaml"),
        "a.jsonl": '{"tool": "search_docs", "args": {}, "ok": true, "result": {}}\n',
        "notes.txt": "not a case",
    }
    suite = load_suite(make_suite(repo, cases=cases))
    assert [c.config.id for c in suite.cases] == ["from-json", "from-yaml"]
    assert suite.cases[0].config.input == {"n": 100000.0, "m": 0.00001, "s": "x\ty"}


def test_json_the_yaml_parser_refuses_still_loads(repo: Path, probe: _ProbeType) -> None:
    # A key past YAML's 1024-character limit for implicit keys: still JSON, still the case.
    case = {"id": "long", "input": {"k" * 2000: 1}, "cassette": "c.jsonl"}
    suite = load_suite(make_suite(repo, cases={"t.json": json.dumps(case, indent=2)}))
    assert suite.cases[0].config.input == case["input"]


TRAILING_COMMA = '{\n  "id": "t",\n  "input": {},\n  "cassette": "c.jsonl",\n}\n'


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        (
            '{\n  "id": "t",\n  "inptu": {},\n  "cassette": "c.jsonl"\n}\n',
            "suite/cases/t.json:3: unknown key 'inptu' in case (did you mean 'input'?)",
        ),
        (
            TRAILING_COMMA,
            # The words and the place are json's own, and Python 3.13 words it differently.
            "suite/cases/t.json:{lineno}: invalid JSON: {msg} (column {colno})".format(
                **vars(json_error(TRAILING_COMMA))
            ),
        ),
        (
            "[1]\n",
            "suite/cases/t.json:1: expected an object of keys to values at the top level, found "
            "a list",
        ),
        (
            '{\n  "id": "t",\n  "input": {},\n  "input": {},\n  "cassette": "c.jsonl"\n}\n',
            "suite/cases/t.json:4: duplicate key 'input' (first defined at line 3; YAML would "
            "silently keep only the last one)",
        ),
    ],
)
def test_each_json_case_problem_is_reported_at_its_line(
    repo: Path, probe: _ProbeType, case: str, expected: str
) -> None:
    assert problems(make_suite(repo, cases={"t.json": case})) == [expected]


def test_an_output_dir_that_is_a_file_is_reported_at_load(repo: Path, probe: _ProbeType) -> None:
    # Found only when the run made its first directory there, as a traceback.
    suite_dir = make_suite(repo)
    (suite_dir / "out").write_text("mine")
    assert problems(suite_dir) == [
        "suite/suite.yaml:15: 'output_dir': expected a directory, found a file: out"
    ]


def test_duplicate_case_ids_name_both_files(repo: Path, probe: _ProbeType) -> None:
    cases = {"a.yaml": CASE.format(id="same"), "b.yml": "# again\n" + CASE.format(id="same")}
    assert problems(make_suite(repo, cases=cases)) == [
        "suite/cases/b.yml:2: duplicate case id 'same' (first defined at suite/cases/a.yaml:1)"
    ]


def test_unknown_case_ids_list_the_known_ones(repo: Path, probe: _ProbeType) -> None:
    cases = {f"{n}.yaml": CASE.format(id=n) for n in ("login", "logout")}
    assert problems(make_suite(repo, cases=cases), case_ids=["logni", "zzz"]) == [
        "unknown case id 'logni' (did you mean 'login'?); known ids: login, logout",
        "unknown case id 'zzz'; known ids: login, logout",
    ]


def test_a_long_list_of_known_ids_is_cut(repo: Path, probe: _ProbeType) -> None:
    cases = {f"c{n:02}.yaml": CASE.format(id=f"c{n:02}") for n in range(25)}
    (message,) = problems(make_suite(repo, cases=cases), case_ids=["nothing-like-it"])
    assert message.endswith("c18, c19, ... (5 more)")


def test_cases_path_must_be_a_directory_with_case_files(repo: Path, probe: _ProbeType) -> None:
    suite_dir = make_suite(repo, cases={})
    (suite_dir / "cases").mkdir()
    (suite_dir / "cases" / "README.md").write_text("cases go here")
    assert problems(suite_dir) == [
        "suite/suite.yaml:4: no case files (*.yaml, *.yml, *.json) in suite/cases"
    ]
    shutil.rmtree(suite_dir / "cases")
    assert problems(suite_dir) == [
        "suite/suite.yaml:4: cases_path 'cases' does not exist (suite/cases)"
    ]
    (suite_dir / "cases").write_text("")
    assert problems(suite_dir) == [
        "suite/suite.yaml:4: cases_path 'cases' is not a directory (suite/cases)"
    ]


# -- assertions -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("assertion", "expected"),
    [
        (
            "- type: prob",
            "unknown assertion type 'prob' (did you mean 'probe'?); "
            "known types: broken, must_call_twice, probe",
        ),
        ("- value: 1", "assertion has no 'type'; expected one of: broken, must_call_twice, probe"),
        (
            "- type: [probe]",
            "assertion 'type' is a list; expected one of: broken, must_call_twice, probe",
        ),
        ("- probe", "each assertion must be a mapping with a 'type', found string 'probe'"),
        ("- type: probe\n  valeu: 1", "unknown parameter 'valeu' for probe"),
        ("- type: probe\n  value: x", "parameter 'value' of probe must be an integer"),
        (
            "- {type: probe, crash: value}",
            "assertion type 'probe' failed to compile its parameters: ValueError: crash",
        ),
        (
            "- {type: probe, crash: exit}",
            "assertion type 'probe' failed to compile its parameters: SystemExit: 3",
        ),
        (
            "- type: broken",
            "cannot load assertion type 'broken' from entry point "
            "'broken = nowhere.module:THING' (group trialrun.assertions): "
            "ImportError: No module named 'nowhere'",
        ),
    ],
)
def test_assertion_problems_are_reported_at_their_line(
    repo: Path, probe: _ProbeType, assertion: str, expected: str
) -> None:
    case = (
        CASE.format(id="t")
        + "assertions:\n"
        + "\n".join("  " + line for line in assertion.splitlines())
        + "\n"
    )
    (message,) = problems(make_suite(repo, cases={"t.yaml": case}))
    line = 7 if "\n" in assertion else 6  # CASE is 4 lines, then "assertions:"
    assert message == f"suite/cases/t.yaml:{line}: {expected}"


def test_assertion_list_of_the_wrong_type(repo: Path, probe: _ProbeType) -> None:
    suite = replace(SUITE, "assertions:\n  - type: probe\n    value: 1\n", "assertions: probe\n")
    assert problems(make_suite(repo, suite=suite)) == [
        "suite/suite.yaml:6: 'assertions' must be a list, found string 'probe'"
    ]


def test_identical_assertions_are_compiled_once(repo: Path, probe: _ProbeType) -> None:
    extra = "assertions:\n  - {type: probe, value: 2}\n"
    cases = {f"c{n}.yaml": CASE.format(id=f"c{n}") + extra for n in range(5)}
    suite = load_suite(make_suite(repo, cases=cases))
    assert probe.compiles == 2  # the suite's {value: 1} and the cases' shared {value: 2}
    assert suite.cases[0].assertions[1] is suite.cases[4].assertions[1]


def test_builtin_assertions_compile_against_real_schemas(repo: Path) -> None:
    suite = replace(
        SUITE, "  - type: probe\n    value: 1", "  - type: json_schema\n    schema_path: s.json"
    )
    suite_dir = make_suite(repo, suite=suite)
    (suite_dir / "s.json").write_text('{"type": 5}')
    (message,) = problems(suite_dir)
    assert message.startswith("suite/suite.yaml:8: json_schema assertion: schema file ")
    assert "is not a valid JSON Schema" in message
    (suite_dir / "s.json").write_text('{"type": "object", "required": ["a"]}')
    assert [a.type for a in load_suite(suite_dir).cases[0].assertions] == ["json_schema"]
    missing = replace(suite, "schema_path: s.json", "schema: s.json")
    assert problems(make_suite(repo, suite=missing)) == [
        "suite/suite.yaml:8: unknown parameter 'schema' for json_schema "
        "(did you mean 'schema_path'?)"
    ]


# -- normalization ----------------------------------------------------------------------------


def test_replace_text_patterns_and_flags_are_checked(repo: Path, probe: _ProbeType) -> None:
    case = CASE.format(id="t") + (
        "normalization:\n"
        "  replace_text:\n"
        "    - {pattern: '\\d+', replacement: N, flags: im}\n"
        "    - pattern: '(unclosed'\n"
        "      flags: ix\n"
        "    - {patern: x}\n"
    )
    assert problems(make_suite(repo, cases={"t.yaml": case})) == [
        "suite/cases/t.yaml:8: invalid regular expression in 'pattern': "
        "missing ), unterminated subpattern at position 0",
        "suite/cases/t.yaml:9: 'flags' may only combine i, m and s; found 'ix'",
        "suite/cases/t.yaml:10: unknown key 'patern' in replace_text[2] (did you mean 'pattern'?)",
    ]


def test_normalization_merges_suite_then_case(repo: Path, probe: _ProbeType) -> None:
    suite = replace(
        SUITE, "  strip_keys: [ts]", "  strip_keys: [ts]\n  replace_paths: {a: 1, b: 2}"
    )
    case = CASE.format(id="t") + "normalization: {strip_keys: [x], replace_paths: {b: 3}}\n"
    (loaded,) = load_suite(make_suite(repo, suite=suite, cases={"t.yaml": case})).cases
    assert loaded.normalization.strip_keys == ["ts", "x"]
    assert loaded.normalization.replace_paths == {"a": 1, "b": 3}


# -- paths ------------------------------------------------------------------------------------


def test_paths_escaping_the_repository_are_refused(repo: Path, probe: _ProbeType) -> None:
    inner = repo / "project"
    inner.mkdir()
    git_init(inner)
    suite = replace(
        SUITE, "  - type: probe\n    value: 1", "  - type: probe\n    path: ../../x.json"
    )
    suite = replace(suite, "output_dir: out", "output_dir: ..\\..\\out")
    case = CASE.format(id="t").replace("cassettes/t.jsonl", "../../../c.jsonl")
    suite_dir = make_suite(inner, suite=suite, cases={"t.yaml": case})
    root = f"the repository ({inner})"
    assert problems(suite_dir) == [
        f"project/suite/suite.yaml:8: probe assertion: path '../../x.json' resolves outside {root}",
        f"project/suite/suite.yaml:15: 'output_dir': path '..\\..\\out' resolves outside {root}",
        f"project/suite/cases/t.yaml:4: 'cassette': path '../../../c.jsonl' resolves "
        f"outside {root}",
    ]


def test_paths_holding_a_nul_are_refused(repo: Path, probe: _ProbeType) -> None:
    # Path.resolve raised ValueError ("embedded null byte") while the suite loaded.
    case = CASE.format(id="t").replace("cassettes/t.jsonl", '"cassettes/t\\0.jsonl"')
    suite_dir = make_suite(repo, cases={"t.yaml": case})
    assert problems(suite_dir) == [
        "suite/cases/t.yaml:4: 'cassette': path 'cassettes/t\\x00.jsonl' holds a NUL character, "
        "which no file name can"
    ]


def test_without_a_repository_the_working_directory_above_the_suite_is_the_boundary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, probe: _ProbeType
) -> None:
    # A tarball, `git archive` or a Docker build: no .git, and real RunLedger suites keep their
    # baselines beside the suites' folder.
    if find_repository_root(tmp_path) is not None:
        pytest.skip("the temporary directory is inside a git repository")
    monkeypatch.chdir(tmp_path)
    suite_dir = make_suite(tmp_path, where="evals/demo")
    suite = load_suite(suite_dir)
    assert suite.root == tmp_path.resolve()
    assert suite.baseline_path == (tmp_path / "evals" / "baselines" / "demo.json").resolve()
    escaping = replace(SUITE, "../baselines/demo.json", "../../../baselines/demo.json")
    make_suite(tmp_path, suite=escaping, where="other/demo")
    assert problems(tmp_path / "other" / "demo") == [
        "other/demo/suite.yaml:14: 'baseline_path': path '../../../baselines/demo.json' resolves "
        f"outside the working directory ({tmp_path.resolve()})"
    ]


def test_without_a_repository_or_a_working_directory_above_it_the_suite_dir_is_the_boundary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, probe: _ProbeType
) -> None:
    if find_repository_root(tmp_path) is not None:
        pytest.skip("the temporary directory is inside a git repository")
    suite_dir = make_suite(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert problems(suite_dir) == [
        f"{suite_dir}/suite.yaml:14: 'baseline_path': path '../baselines/demo.json' resolves "
        f"outside the suite directory ({suite_dir})"
    ]
    # A run that does not read the configured baseline does not check where it points.
    suite = load_suite(suite_dir, use_baseline_path=False)
    assert suite.baseline_path is None


def test_symlinks_out_of_the_repository_are_refused(
    repo: Path, tmp_path_factory: pytest.TempPathFactory, probe: _ProbeType
) -> None:
    outside = tmp_path_factory.mktemp("outside")
    suite_dir = make_suite(repo)
    (suite_dir / "cassettes").symlink_to(outside, target_is_directory=True)
    assert problems(suite_dir) == [
        f"suite/cases/t1.yaml:4: 'cassette': path 'cassettes/t1.jsonl' resolves outside "
        f"the repository ({repo})"
    ]


def test_backslashes_are_directory_separators(repo: Path, probe: _ProbeType) -> None:
    suite = replace(SUITE, '"agent/agent.py"', '"agent\\\\agent.py"')
    case = CASE.format(id="t").replace("cassettes/t.jsonl", "cassettes\\t.jsonl")
    suite_dir = make_suite(repo, suite=suite, cases={"t.yaml": case})
    (suite_dir / "agent").mkdir()
    (suite_dir / "agent" / "agent.py").write_text("")
    loaded = load_suite(suite_dir)
    assert loaded.agent_command[1] == str(suite_dir / "agent" / "agent.py")
    assert loaded.cases[0].cassette_path == suite_dir / "cassettes" / "t.jsonl"


def test_agent_command_parts_that_do_not_exist_pass_through(tmp_path: Path) -> None:
    (tmp_path / "agent.py").write_text("")
    paths = SuitePaths.for_suite_dir(tmp_path)
    assert paths.agent_command(["python3", "agent.py", "missing.py", "", "/abs/x", "-c"]) == [
        "python3",
        str(tmp_path.resolve() / "agent.py"),
        "missing.py",
        "",
        "/abs/x",
        "-c",
    ]


def test_display_paths_are_relative_inside_the_working_directory(tmp_path: Path) -> None:
    assert display_path(tmp_path / "a" / "b.yaml", tmp_path) == "a/b.yaml"
    assert display_path(Path("/elsewhere/x.yaml"), tmp_path) == "/elsewhere/x.yaml"


# -- RunLedger's own suites -------------------------------------------------------------------


def _peer_copy(peer_fixtures: Path, tmp_path: Path) -> Path:
    """The fixture tree as a repository; probe-run suites get the cases/ dir they ran with."""
    root = tmp_path / "peer"
    shutil.copytree(peer_fixtures, root)
    git_init(root)
    probe_runs = root / "generated-0.2.3" / "probe-runs"
    for probe_run in probe_runs.iterdir():
        (probe_run / "cases").mkdir()
        # reg_gate kept only its artifacts; its case was the same as mismatch_text's.
        case = probe_run / "t1.yaml" if (probe_run / "t1.yaml").exists() else None
        shutil.copy(
            case or probe_runs / "mismatch_text" / "t1.yaml", probe_run / "cases" / "t1.yaml"
        )
    # The upstream regression variant ships only its suite.yaml; the rest is the demo's.
    demo = root / "upstream" / "demo_repo" / "evals" / "demo"
    variant = (
        root / "upstream" / "demo_repo" / "regressions" / "regression-budget" / "evals" / "demo"
    )
    shutil.copytree(demo / "cases", variant / "cases")
    shutil.copy(demo / "schema.json", variant / "schema.json")
    return root


def test_every_peer_fixture_suite_loads(peer_fixtures: Path, tmp_path: Path) -> None:
    root = _peer_copy(peer_fixtures, tmp_path)
    suite_files = sorted(root.rglob("suite.yaml"))
    assert len(suite_files) == 7
    for suite_file in suite_files:
        suite = load_suite(suite_file.parent)
        assert suite.root == root
        assert [case.config.id for case in suite.cases] == ["t1"]
    reg_gate = load_suite(root / "generated-0.2.3" / "probe-runs" / "reg_gate")
    assert reg_gate.config.regression is not None
    assert reg_gate.config.regression.min_pass_rate == 0.5
    assert reg_gate.config.regression.max_p95_wall_ms_delta_pct == 0.05
    example = load_suite(root / "upstream" / "examples" / "evals" / "demo")
    assert example.baseline_path == root / "upstream" / "baselines" / "demo.json"
    assert example.cases[0].budgets.max_wall_ms == 5000
    assert [a.type for a in example.cases[0].assertions] == ["json_schema", "required_fields"]


def test_shipped_json_schemas_match_the_models_and_accept_peer_files(peer_fixtures: Path) -> None:
    for name, text in export_schemas().items():
        assert (SCHEMA_DIR / name).read_text(encoding="utf-8") == text, (
            f"{name} is stale: run python -m trialrun.config.schema_export"
        )
    suite_schema = json.loads((SCHEMA_DIR / "suite.schema.json").read_text())
    case_schema = json.loads((SCHEMA_DIR / "case.schema.json").read_text())
    for suite_file in peer_fixtures.rglob("suite.yaml"):
        jsonschema.validate(yaml.safe_load(suite_file.read_text()), suite_schema)
    for case_file in [
        *peer_fixtures.rglob("cases/*.yaml"),
        *peer_fixtures.rglob("probe-runs/*/t1.yaml"),
    ]:
        jsonschema.validate(yaml.safe_load(case_file.read_text()), case_schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"suite_name": "x", "agnet_command": []}, suite_schema)


def test_the_suite_schema_still_accepts_share_cpu_and_marks_it_deprecated() -> None:
    # Editors check suites against this schema: an older suite must not be flagged as wrong.
    suite_schema = json.loads((SCHEMA_DIR / "suite.schema.json").read_text())
    suite = yaml.safe_load(SUITE)
    jsonschema.validate({**suite, "share_cpu": True}, suite_schema)
    assert suite_schema["properties"]["share_cpu"]["deprecated"] is True


# -- performance ------------------------------------------------------------------------------


def test_loading_cases_takes_time_in_proportion_to_their_number(
    repo: Path, probe: _ProbeType
) -> None:
    case = CASE + "description: case {id}\nassertions:\n  - {{type: probe, value: 2}}\n"

    def best_load_s(count: int) -> float:
        cases = {f"c{n:03}.yaml": case.format(id=f"c{n:03}") for n in range(count)}
        suite_dir = make_suite(repo, cases=cases, where=f"suite{count}")
        best = float("inf")
        for _ in range(3):  # best of three; this thread's CPU time, which waiting never adds to
            started = time.thread_time()
            suite = load_suite(suite_dir)
            best = min(best, time.thread_time() - started)
        assert len(suite.cases) == count
        return best

    twenty, two_hundred = best_load_s(20), best_load_s(200)
    # Linear: ~10x; anything quadratic in the cases would be ~100x.
    assert two_hundred <= 25 * twenty + 0.05, (twenty, two_hundred)


# -- did you mean -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        ("agnet_command", " (did you mean 'agent_command'?)"),
        ("MODE", " (did you mean 'mode'?)"),
        ("zzzzzz", ""),
        ("mode", ""),
    ],
)
def test_did_you_mean(word: str, expected: str) -> None:
    assert suggest.did_you_mean(word, ["agent_command", "mode", "cases_path"]) == expected


def test_did_you_mean_with_no_choices() -> None:
    assert suggest.did_you_mean("x", []) == ""


def test_offline_keys_are_checked_at_load_with_their_lines(repo: Path) -> None:
    suite = SUITE + (
        "agent_channel: socket\n"
        "mcp_servers:\n"
        "  bad name: {command: [python3, server.py]}\n"
        "  docs: {command: []}\n"
        "  web: {command: [node, web.js], transprot: http}\n"
        "model_gateway:\n"
        "  upstreams: {mistral: http://127.0.0.1:9}\n"
        "  prices: prices.yaml\n"
        "  normalization:\n"
        "    replace_text:\n"
        "      - pattern: 'a('\n"
    )
    found = problems(make_suite(repo, suite))
    first = SUITE.count("\n") + 1
    assert any(f":{first}: 'agent_channel' must be one of stdio, fd" in p for p in found)
    assert any(f":{first + 2}: keys of 'mcp_servers' must be plain names" in p for p in found)
    assert any(f":{first + 3}: 'command' must not be empty" in p for p in found)
    assert any(
        f":{first + 4}: unknown key 'transprot' in web (did you mean 'transport'?)" in p
        for p in found
    )
    assert any(f":{first + 6}: keys of 'upstreams' must be one of" in p for p in found)
    assert any(f":{first + 7}: 'prices': file not found: prices.yaml" in p for p in found)
    assert any(f":{first + 10}: invalid regular expression in 'pattern'" in p for p in found)


def test_a_suite_using_every_offline_key_loads(repo: Path, probe: _ProbeType) -> None:
    suite = SUITE + (
        "agent_channel: fd\n"
        "mcp_servers:\n"
        "  docs: {command: [python3, server.py], env: {TOKEN_FILE: t.txt}}\n"
        "model_gateway:\n"
        "  upstreams: {openai: 'http://127.0.0.1:9'}\n"
        "  prices: prices.yaml\n"
        "  lenient: true\n"
    )
    suite_dir = make_suite(repo, suite)
    (suite_dir / "prices.yaml").write_text("m: {input_per_mtok: 1, output_per_mtok: 2}\n")
    loaded = load_suite(suite_dir)
    assert loaded.config.agent_channel == "fd"
    assert loaded.config.mcp_servers["docs"].env == {"TOKEN_FILE": "t.txt"}
    assert loaded.config.model_gateway is not None
    assert loaded.config.model_gateway.upstreams == {"openai": "http://127.0.0.1:9"}
