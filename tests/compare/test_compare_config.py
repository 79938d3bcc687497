"""Loading <subject>/evals/: a full valid example, and every class of bad config at its line."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from paths import REPO_ROOT
from trialrun.cli import run_cli
from trialrun.compare.checkspec import sandbox_path_problem
from trialrun.compare.config import load_eval_assets
from trialrun.errors import ConfigErrors

COMPARE = """\
name: deploy-check
agent:
  command: ["claude", "-p", "{task}", "--add-dir", "{sandbox}"]
  stage: .claude/skills/{name}
  transcript: stream-json
  timeout_minutes: 30
arms:
  incumbent:
    path: ../../old
k: 3
judge:
  command: ["judge", "--fast"]
  escalate_command: ["judge", "--slow"]
seed: 7
"""

CASE = """\
task: Fix the failing test
checks:
  - transcript_mentions: pytest
  - command_matching: "pytest( -q)?"
  - file_exists: src/app.py
  - command_succeeds: python -m pytest -q
judge: Prefer the smaller diff
files:
  notes/todo.txt: fix it
fixture: ../fixtures/repo
setup: git init -q
bucket: explicit
requires: [git, "python3:pytest"]
max_turns: 50
"""

SESSION = """\
task: Do the three chores
cases:
  - name: chore-one
    checks:
      - file_exists: one.txt
  - name: chore-two
    checks:
      - no_command_matching: "rm -rf"
"""

TRIGGERS = """\
should_trigger: ["deploy it", 42]
should_not_trigger: ["rename this variable"]
"""


def _subject(tmp_path: Path, files: dict[str, str]) -> Path:
    subject = tmp_path / "subject"
    for relpath, text in files.items():
        path = subject / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return subject


def _full(tmp_path: Path, **overrides: str) -> Path:
    files = {
        "SKILL.md": "# skill\n",
        "evals/compare.yaml": COMPARE,
        "evals/cases/fix-test.yaml": CASE,
        "evals/fixtures/repo/app.py": "x = 1\n",
        "evals/session.yaml": SESSION,
        "evals/triggers.yaml": TRIGGERS,
    }
    files.update(overrides)
    (tmp_path / "old").mkdir(exist_ok=True)
    return _subject(tmp_path, files)


def _errors(subject: Path) -> list[str]:
    with pytest.raises(ConfigErrors) as caught:
        load_eval_assets(subject)
    # Messages name files relative to the working directory; keep only the evals-relative part.
    return [str(e).split("evals/", 1)[-1] for e in caught.value.errors]


def test_full_valid_example_loads_every_file(tmp_path: Path) -> None:
    assets = load_eval_assets(_full(tmp_path))
    assert assets.config.name == "deploy-check"
    assert assets.config.k == 3 and assets.config.seed == 7
    assert assets.config.agent.timeout_minutes == 30
    assert assets.config.judge is not None and assets.config.judge.escalate_command == [
        "judge",
        "--slow",
    ]
    assert assets.incumbent_path == (tmp_path / "old").resolve()
    (case,) = assets.cases
    assert case.name == "fix-test"
    assert [c.kind for c in case.checks] == [
        "transcript_mentions",
        "command_matching",
        "file_exists",
        "command_succeeds",
    ]
    assert [c.line for c in case.checks] == [3, 4, 5, 6]
    regex = case.checks[1].pattern
    assert regex is not None and regex.search("ran pytest -q")
    assert case.fixture == (tmp_path / "subject/evals/fixtures/repo").resolve()
    assert case.config.requires == ["git", "python3:pytest"]
    assert case.config.timeout_minutes == 120
    assert assets.session is not None
    assert [s.name for s in assets.session.cases] == ["chore-one", "chore-two"]
    assert assets.triggers is not None
    assert assets.triggers.should_trigger == ["deploy it", "42"]


def test_minimal_subject_uses_defaults(tmp_path: Path) -> None:
    subject = _subject(
        tmp_path,
        {
            "evals/compare.yaml": "name: s\nagent:\n  command: [run, '{task}']\n",
            "evals/cases/a.yaml": "task: t\nrequires: git\n",
        },
    )
    assets = load_eval_assets(subject)
    assert assets.config.k == 1 and assets.config.agent.transcript == "stream-json"
    assert assets.config.arms.incumbent is None and assets.incumbent_path is None
    assert assets.session is None and assets.triggers is None
    assert assets.cases[0].checks == () and assets.cases[0].config.requires == ["git"]


def test_missing_compare_yaml_is_one_error(tmp_path: Path) -> None:
    subject = _subject(tmp_path, {"SKILL.md": "x"})
    with pytest.raises(ConfigErrors, match=r"no compare\.yaml for subject"):
        load_eval_assets(subject)


def test_unknown_keys_get_did_you_mean_at_their_line(tmp_path: Path) -> None:
    compare = COMPARE.replace("  transcript:", "  transcirpt:").replace("seed: 7", "sede: 7")
    case = CASE.replace("max_turns", "max_turn")
    errors = _errors(
        _full(tmp_path, **{"evals/compare.yaml": compare, "evals/cases/fix-test.yaml": case})
    )
    assert errors == [
        "compare.yaml:5: unknown key 'transcirpt' in agent (did you mean 'transcript'?)",
        "compare.yaml:14: unknown key 'sede' in compare.yaml (did you mean 'seed'?)",
        "cases/fix-test.yaml:14: unknown key 'max_turn' in case (did you mean 'max_turns'?)",
    ]


def test_wrong_types_and_bounds(tmp_path: Path) -> None:
    compare = COMPARE.replace("k: 3", "k: 0").replace("transcript: stream-json", "transcript: json")
    compare = compare.replace('command: ["claude"', "command: [5")
    errors = _errors(_full(tmp_path, **{"evals/compare.yaml": compare}))
    assert errors == [
        "compare.yaml:3: 'command[0]' must be a string, found integer 5",
        "compare.yaml:5: 'transcript' must be one of stream-json, text; found string 'json'",
        "compare.yaml:10: 'k' must be >= 1, found 0",
    ]


def test_bad_check_entries_each_reported(tmp_path: Path) -> None:
    case = """\
task: t
checks:
  - transcript_mentions: ok
  - just a string
  - file_exist: out.txt
  - command_matching: "(unclosed"
  - file_absent: ../outside.txt
  - file_exists: /etc/passwd
  - transcript_omits: ""
  - {file_exists: a, file_absent: b}
"""
    errors = _errors(_full(tmp_path, **{"evals/cases/fix-test.yaml": case}))
    assert errors == [
        "cases/fix-test.yaml:4: a check is a mapping of one kind to its value "
        "(e.g. 'file_exists: out.txt'), found string 'just a string'",
        "cases/fix-test.yaml:5: unknown check kind 'file_exist' (did you mean 'file_exists'?); "
        "known: transcript_mentions, transcript_omits, command_matching, no_command_matching, "
        "file_exists, file_absent, command_succeeds",
        "cases/fix-test.yaml:6: invalid regular expression in 'command_matching': "
        "missing ), unterminated subpattern at position 0",
        "cases/fix-test.yaml:7: 'file_absent': path '../outside.txt' escapes the sandbox",
        "cases/fix-test.yaml:8: 'file_exists': path '/etc/passwd' is absolute; "
        "write it relative to the sandbox",
        "cases/fix-test.yaml:9: 'transcript_omits' needs a non-empty string, found an empty string",
        "cases/fix-test.yaml:10: a check is a mapping of one kind to its value "
        "(e.g. 'file_exists: out.txt'), found a mapping with 2 keys",
    ]


def test_sandbox_inputs_are_confined(tmp_path: Path) -> None:
    case = """\
task: t
files:
  ../escape.txt: x
  .claude/skills/x/SKILL.md: y
  ok/file.txt: z
fixture: ../../../elsewhere
requires: ["bad name!"]
"""
    (tmp_path / "elsewhere").mkdir()
    errors = _errors(_full(tmp_path, **{"evals/cases/fix-test.yaml": case}))
    assert errors[0] == "cases/fix-test.yaml:3: 'files': path '../escape.txt' escapes the sandbox"
    assert errors[1] == (
        "cases/fix-test.yaml:4: 'files': path '.claude/skills/x/SKILL.md' is under .claude/, "
        "where the arms stage the subject"
    )
    assert errors[2].startswith("cases/fix-test.yaml:6: fixture '../../../elsewhere' resolves ")
    assert errors[3] == (
        "cases/fix-test.yaml:7: 'requires' entries are a program name or python3:<module>, "
        "found 'bad name!'"
    )
    assert len(errors) == 4


def test_compare_placeholders_stage_and_incumbent(tmp_path: Path) -> None:
    compare = (
        COMPARE.replace('"{sandbox}"', '"{sandbx}"')
        .replace("stage: .claude/skills/{name}", "stage: ../{name}")
        .replace("path: ../../old", "path: ../../old\n    version: 3")
        .replace("name: deploy-check", "name: a/b")
    )
    errors = _errors(_full(tmp_path, **{"evals/compare.yaml": compare}))
    assert errors == [
        "compare.yaml:1: 'name' must be a plain name (letters, digits, . _ -), found 'a/b'",
        "compare.yaml:3: unknown placeholder '{sandbx}' in agent.command "
        "(did you mean '{sandbox}'?); placeholders here: {task}, {sandbox}, {evals}, {name}, "
        "{max_turns}",
        "compare.yaml:4: 'stage': path '../subject' escapes the sandbox",
        "compare.yaml:8: 'incumbent' needs exactly one of 'path' or 'version'",
    ]


def test_incumbent_path_must_exist_and_version_may_be_a_number(tmp_path: Path) -> None:
    missing = COMPARE.replace("path: ../../old", "path: ../../gone")
    errors = _errors(_full(tmp_path, **{"evals/compare.yaml": missing}))
    assert len(errors) == 1 and errors[0].startswith(
        "compare.yaml:9: incumbent path '../../gone' is not a directory"
    )
    by_version = COMPARE.replace("path: ../../old", "version: 3")
    assets = load_eval_assets(_full(tmp_path, **{"evals/compare.yaml": by_version}))
    assert assets.config.arms.incumbent is not None
    assert assets.config.arms.incumbent.version == "3" and assets.incumbent_path is None


def test_paths_holding_a_nul_are_refused_where_they_are_written(tmp_path: Path) -> None:
    # Path.resolve raised ValueError on each of them, after the arms had started for some.
    compare = COMPARE.replace("path: ../../old", 'path: "../../o\\0ld"').replace(
        "stage: .claude/skills/{name}", 'stage: ".claude/sk\\0ills/{name}"'
    )
    case = 'task: t\nfiles:\n  "a\\0.txt": x\nfixture: "fix\\0ture"\n'
    errors = _errors(
        _full(tmp_path, **{"evals/compare.yaml": compare, "evals/cases/fix-test.yaml": case})
    )
    nul = "holds a NUL character, which no file name can"
    assert errors == [
        f"compare.yaml:4: 'stage': path '.claude/sk\\x00ills/subject' {nul}",
        f"compare.yaml:9: incumbent path '../../o\\x00ld' {nul}",
        f"cases/fix-test.yaml:3: 'files': path 'a\\x00.txt' {nul}",
        f"cases/fix-test.yaml:4: fixture 'fix\\x00ture' {nul}",
    ]


def test_session_rules(tmp_path: Path) -> None:
    session = """\
task: chores
cases:
  - name: fix-test
    checks: [{file_exists: a}]
  - name: two
    judge: nicer wins
    checks: [{file_exists: b}]
  - name: two
    checks: [{file_exists: c}]
  - name: three
    check: [{file_exists: c}]
"""
    errors = _errors(_full(tmp_path, **{"evals/session.yaml": session}))
    assert errors == [
        "session.yaml:3: sub-case name 'fix-test' collides with cases/fix-test.yaml",
        "session.yaml:6: a session sub-case cannot carry 'judge': it belongs to the session, "
        "whose one agent run all sub-cases share (sessions are never judged)",
        "session.yaml:8: duplicate sub-case name 'two' (first at line 5)",
        "session.yaml:11: unknown key 'check' in cases[3] (did you mean 'checks'?)",
    ]


def test_triggers_refuse_non_scalar_prompts(tmp_path: Path) -> None:
    triggers = "should_trigger:\n  - ok\n  - [nested]\nshould_not_trigger: nope\n"
    errors = _errors(_full(tmp_path, **{"evals/triggers.yaml": triggers}))
    assert errors == [
        "triggers.yaml:3: 'should_trigger[1]' must be a string, found a list",
        "triggers.yaml:4: 'should_not_trigger' must be a list, found string 'nope'",
    ]


def test_errors_across_files_come_together_in_file_then_line_order(tmp_path: Path) -> None:
    subject = _full(
        tmp_path,
        **{
            "evals/compare.yaml": COMPARE.replace("k: 3", "k: many"),
            "evals/cases/fix-test.yaml": "task: t\nchecks: [{file_exsts: a}]\n",
            "evals/cases/other.yaml": "task: [1]\n",
            "evals/triggers.yaml": "should_trigger: [a]\nshould_trigger: [b]\n",
        },
    )
    errors = _errors(subject)
    assert [e.split(":")[0] for e in errors] == [
        "compare.yaml",
        "cases/fix-test.yaml",
        "cases/other.yaml",
        "triggers.yaml",
    ]
    assert "duplicate key 'should_trigger'" in errors[-1]


def test_nothing_to_compare(tmp_path: Path) -> None:
    subject = _subject(tmp_path, {"evals/compare.yaml": "name: s\nagent:\n  command: [a]\n"})
    assert _errors(subject) == [
        "compare.yaml:1: nothing to compare: no cases/*.yaml and no session.yaml"
    ]


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ("out.txt", None),
        ("a/../b.txt", None),
        ("a\\b.txt", None),
        ("", "path is empty"),
        ("..", "path '..' escapes the sandbox"),
        ("a/../../b", "path 'a/../../b' escapes the sandbox"),
        ("..\\b", "path '..\\b' escapes the sandbox"),
        ("C:/x", "path 'C:/x' is absolute; write it relative to the sandbox"),
        ("./", "path './' names the sandbox itself, not a file in it"),
        ("a\0b", "path 'a\\x00b' holds a NUL character, which no file name can"),
    ],
)
def test_sandbox_path_problem(raw: str, problem: str | None) -> None:
    assert sandbox_path_problem(raw) == problem


def test_max_concurrent_caps_load_and_default_to_none(tmp_path: Path) -> None:
    compare = COMPARE.replace(
        "  timeout_minutes: 30\n", "  timeout_minutes: 30\n  max_concurrent: 4\n"
    )
    compare = compare.replace("seed: 7", "  max_concurrent: 2\nseed: 7")
    assets = load_eval_assets(_full(tmp_path, **{"evals/compare.yaml": compare}))
    assert assets.config.agent.max_concurrent == 4
    assert assets.config.judge is not None and assets.config.judge.max_concurrent == 2
    (tmp_path / "defaults").mkdir()
    defaults = load_eval_assets(_full(tmp_path / "defaults"))
    assert defaults.config.agent.max_concurrent is None
    assert defaults.config.judge is not None and defaults.config.judge.max_concurrent is None


@pytest.mark.parametrize(
    ("agent_value", "judge_value", "expected"),
    [
        (
            "0",
            "-1",
            ["'max_concurrent' must be >= 1, found 0", "'max_concurrent' must be >= 1, found -1"],
        ),
        (
            "two",
            "1.5",
            [
                "'max_concurrent' must be an integer, found string 'two'",
                "'max_concurrent' must be an integer, found number 1.5",
            ],
        ),
        ("true", "null", ["'max_concurrent' must be an integer, found boolean true", None]),
    ],
)
def test_max_concurrent_must_be_a_positive_whole_number(
    tmp_path: Path, agent_value: str, judge_value: str, expected: list[str | None]
) -> None:
    compare = COMPARE.replace(
        "  timeout_minutes: 30\n", f"  timeout_minutes: 30\n  max_concurrent: {agent_value}\n"
    )
    compare = compare.replace("seed: 7", f"  max_concurrent: {judge_value}\nseed: 7")
    errors = _errors(_full(tmp_path, **{"evals/compare.yaml": compare}))
    wanted = [
        f"compare.yaml:{line}: {message}"
        for line, message in zip((7, 15), expected, strict=True)
        if message is not None
    ]
    assert errors == wanted


@pytest.mark.parametrize("inside", ["..", "../previous", "../src/old", "../fixtures/old"])
def test_incumbent_inside_the_subject_is_refused(
    tmp_path: Path, inside: str, capsys: pytest.CaptureFixture[str]
) -> None:
    compare = COMPARE.replace("path: ../../old", f"path: {inside}")
    subject = _full(
        tmp_path,
        **{"evals/compare.yaml": compare, "src/old/x.txt": "x", "fixtures/old/x.txt": "x"},
    )
    (subject / "previous").mkdir()
    errors = _errors(subject)
    assert len(errors) == 1
    assert errors[0].startswith(
        f"compare.yaml:9: incumbent path '{inside}' lies inside the subject"
    )
    assert errors[0].endswith(
        "so the candidate would be staged and counted with it: put the incumbent outside the "
        "subject (relative to evals/: '../../<folder>') or under evals/"
    )
    assert run_cli(["compare", str(subject)]) == 2
    assert "lies inside the subject" in capsys.readouterr().err


@pytest.mark.parametrize("fixture", ["../..", "../../src", "../../src/data"])
def test_fixture_in_the_staged_subject_is_refused(tmp_path: Path, fixture: str) -> None:
    case = CASE.replace("fixture: ../fixtures/repo", f"fixture: {fixture}")
    subject = _full(tmp_path, **{"evals/cases/fix-test.yaml": case, "src/data/a.txt": "a"})
    errors = _errors(subject)
    assert len(errors) == 1
    assert errors[0].startswith(
        f"cases/fix-test.yaml:10: fixture '{fixture}' lies in the staged part of the subject"
    )
    assert errors[0].endswith("keep fixtures under evals/ (e.g. evals/fixtures/)")


def test_incumbent_under_evals_loads(tmp_path: Path) -> None:
    compare = COMPARE.replace("path: ../../old", "path: previous")
    subject = _full(tmp_path, **{"evals/compare.yaml": compare, "evals/previous/SKILL.md": "x"})
    assert load_eval_assets(subject).incumbent_path == (subject / "evals/previous").resolve()


def test_fixture_in_the_unstaged_folders_loads(tmp_path: Path) -> None:
    case = CASE.replace("fixture: ../fixtures/repo", "fixture: ../../fixtures/repo")
    subject = _full(tmp_path, **{"evals/cases/fix-test.yaml": case, "fixtures/repo/a.py": "a"})
    (fixture_case,) = load_eval_assets(subject).cases
    assert fixture_case.fixture == (subject / "fixtures/repo").resolve()


def test_the_compare_yaml_example_in_the_docs_loads(tmp_path: Path) -> None:
    page = (REPO_ROOT / "docs/compare.md").read_text(encoding="utf-8")
    example = page.split("```yaml\n# evals/compare.yaml\n", 1)[1].split("```", 1)[0]
    subject = _subject(
        tmp_path / "repo", {"evals/compare.yaml": example, "evals/cases/a.yaml": "task: t\n"}
    )
    incumbent = yaml.safe_load(example)["arms"]["incumbent"]["path"]
    (subject / "evals" / incumbent).mkdir(parents=True)
    assets = load_eval_assets(subject)
    assert assets.incumbent_path is not None
    assert not assets.incumbent_path.is_relative_to(subject.resolve())
