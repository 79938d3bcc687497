"""The command line: version, help, init, run, baseline promote, exit codes."""

from __future__ import annotations

import importlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from builders import call_cli
from paths import REPO_ROOT
from trialrun import __version__


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = call_cli(["--version"], capsys)
    assert (code, out.strip()) == (0, f"trialrun {__version__}")


# What `trialrun --help` and `--version` may load of trialrun: the entry point, the click group
# and its command table, no command's module.
HELP_MODULES = {
    "trialrun",
    "trialrun.__main__",
    "trialrun.base",
    "trialrun.base.lazyexport",
    "trialrun.base.signals",
    "trialrun.cli",
    "trialrun.cli.group",
    "trialrun.cli.interrupts",
    "trialrun.errors",
}
HEAVY = {"pydantic", "yaml", "jsonschema", "jinja2", "asyncio", "cryptography"}


@pytest.mark.parametrize("args", [["--help"], ["-h"], ["--version"]])
def test_help_and_version_import_no_command_and_no_heavy_module(args: list[str]) -> None:
    # -X importtime lists every module the real `python -m trialrun` loads, on stderr.
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "trialrun", *args],
        capture_output=True,
        text=True,
        check=True,
    )
    loaded = {
        line.split("|")[-1].strip()
        for line in proc.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }
    assert "trialrun.cli.group" in loaded  # the parsing found the imports
    assert sorted(m for m in loaded if m.startswith("trialrun") and m not in HELP_MODULES) == []
    assert sorted({m.split(".")[0] for m in loaded} & HEAVY) == []
    if args == ["--version"]:
        assert proc.stdout == f"trialrun {__version__}\n"
    else:
        assert all(f"\n  {name} " in proc.stdout for name in ("init", "run", "baseline"))


def test_the_top_level_help_is_clicks_own_and_lists_every_command(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from trialrun.cli.group import COMMANDS, cli

    code, out, err = call_cli(["--help"], capsys)
    with click.Context(cli, info_name="trialrun") as ctx:
        assert (code, out, err) == (0, ctx.get_help() + "\n", "")
    assert out.startswith("Usage: trialrun [OPTIONS] COMMAND [ARGS]...\n")
    assert "--version" in out and "-h, --help" in out
    listed = out.split("Commands:\n", 1)[1]
    assert [line.split()[0] for line in listed.splitlines() if line[2:3] != " "] == sorted(COMMANDS)


def every_command() -> Iterator[tuple[list[str], click.Command]]:
    """Each command line that reaches a command, and the command: groups' subcommands and the
    routed ones (``compare merge``) included."""
    from trialrun.cli.group import _ROUTED, cli

    def walk(path: list[str], command: click.Command) -> Iterator[tuple[list[str], click.Command]]:
        yield path, command
        if isinstance(command, click.Group):
            with click.Context(command, info_name=path[-1]) as ctx:
                for name in command.list_commands(ctx):
                    sub = command.get_command(ctx, name)
                    assert sub is not None, f"{path} {name}"
                    yield from walk([*path, name], sub)

    with click.Context(cli, info_name="trialrun") as ctx:
        for name in cli.list_commands(ctx):
            command = cli.get_command(ctx, name)
            assert command is not None, name
            yield from walk([name], command)
    for (name, word), (module, attribute) in _ROUTED.items():
        yield [name, word], getattr(importlib.import_module(module), attribute)


COMMAND_LINES = [path for path, _ in every_command()]


@pytest.mark.parametrize("path", COMMAND_LINES, ids=" ".join)
def test_every_commands_help_works_and_lists_its_options(
    path: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    command = dict((tuple(p), c) for p, c in every_command())[tuple(path)]
    code, out, err = call_cli([*path, "--help"], capsys)
    assert (code, err) == (0, ""), err
    assert out.startswith(f"Usage: trialrun {' '.join(path)} "), out
    options = [
        param for param in command.params if isinstance(param, click.Option) and not param.hidden
    ]
    for option in options:
        assert all(name in out for name in option.opts), f"{option.opts} missing from:\n{out}"
    assert "-h, --help" in out


def test_every_option_of_the_readmes_command_line_block_is_in_its_commands_help(
    capsys: pytest.CaptureFixture[str],
) -> None:
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split("## Command line\n\n```\n", 1)[1].split("```", 1)[0]
    commands = sorted(COMMAND_LINES, key=len, reverse=True)
    checked = set()
    for line in block.splitlines():
        for usage in re.split(r"\s{3,}|#", line.strip()):
            words = usage.split()
            if not words or words[0] != "trialrun":
                continue
            path = next((c for c in commands if words[1 : 1 + len(c)] == c), [])
            code, out, _ = call_cli([*path, "--help"], capsys)
            assert code == 0, usage
            for option in re.findall(r"(?<![\w-])--?[a-z][a-z-]*", usage):
                assert option in out, f"README: {usage!r}: {option} is not in its --help"
            checked.add(" ".join(path))
    assert {"run", "receipt verify", "compare merge", ""} <= checked


def test_the_command_table_repeats_each_commands_own_name_and_help() -> None:
    """``trialrun --help`` lists the table's help without importing the commands: it must be
    theirs."""
    from trialrun.cli.group import COMMANDS

    for name, (module, attribute, short_help) in COMMANDS.items():
        command = getattr(importlib.import_module(module), attribute)
        assert isinstance(command, click.Command), f"{module}.{attribute}: not a click command"
        assert command.name == name, f"{module}.{attribute}: named {command.name!r}, table {name!r}"
        found = command.get_short_help_str(limit=10_000)
        assert found == short_help, f"{name}: table help {short_help!r}, its own {found!r}"
    cli_dir = Path(importlib.import_module("trialrun.cli").__file__ or "").parent
    modules = {f"trialrun.cli.{path.stem}" for path in cli_dir.glob("*_cmd.py")}
    assert modules == {module for module, _, _ in COMMANDS.values()}


def test_unknown_option_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = call_cli(["run", "--frobnicate"], capsys)
    assert code == 2
    assert "No such option" in err


@pytest.mark.parametrize(
    ("typed", "meant"), [("rn", "run"), ("comapre", "compare"), ("Doctor", "doctor")]
)
def test_a_mistyped_command_names_the_closest_one(
    typed: str, meant: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = call_cli([typed], capsys)
    assert code == 2
    assert f"No such command '{typed}' (did you mean '{meant}'?)." in err


def test_an_unknown_command_far_from_every_name_gets_no_guess(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = call_cli(["xyzzy"], capsys)
    assert code == 2
    assert "No such command 'xyzzy'." in err
    assert "did you mean" not in err


def test_missing_suite_is_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = call_cli(["run", str(tmp_path / "nope")], capsys)
    assert code == 2
    assert err.startswith("error: ")
    assert "Traceback" not in err


def test_bad_config_reports_every_problem_with_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = tmp_path / "s"
    (suite / "cases").mkdir(parents=True)
    (suite / "suite.yaml").write_text(
        "suite_name: s\nagnet_command: [python3, a.py]\nmode: replay\ncases_path: cases\n"
        "tool_registry: []\nbudgets:\n  max_tool_calls: -1\n",
        encoding="utf-8",
    )
    (suite / "cases/t1.yaml").write_text("id: t1\ninput: {}\ncassette: c.jsonl\n", encoding="utf-8")
    code, _, err = call_cli(["run", str(suite), "--out", str(tmp_path / "out")], capsys)
    assert code == 2
    lines = err.strip().splitlines()
    assert all(line.startswith("error: ") for line in lines)
    assert any("suite.yaml:2:" in line and "agent_command" in line for line in lines)
    assert any("suite.yaml:7:" in line and "max_tool_calls" in line for line in lines)
    assert not (tmp_path / "out").exists()


def test_baseline_and_no_baseline_exclude_each_other(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, _ = call_cli(["run", str(tmp_path), "--baseline", "b.json", "--no-baseline"], capsys)
    assert code == 2


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(sys.executable)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    root = tmp_path / "project"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    monkeypatch.chdir(root)
    return root


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
        and ".git/" not in str(p.relative_to(root)) + "/"
        and "trialrun_out" not in p.parts
    }


def test_init_then_run_passes_and_second_init_changes_nothing(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = call_cli(["init"], capsys)
    assert code == 0, out + err
    for name in (
        "evals/demo/suite.yaml",
        "evals/demo/agent/agent.py",
        "baselines/demo.json",
        ".github/workflows/trialrun.yml",
    ):
        assert (project / name).is_file(), name
    workflow = (project / ".github/workflows/trialrun.yml").read_text()
    assert '"./evals/demo"' in workflow and '"./baselines/demo.json"' in workflow
    before = snapshot(project)

    code, out, err = call_cli(["init"], capsys)
    assert code == 0
    assert "Unchanged" in out
    assert snapshot(project) == before

    code, out, err = call_cli(
        ["run", "evals/demo", "--mode", "replay", "--baseline", "baselines/demo.json"], capsys
    )
    assert code == 0, out + err
    assert "PASS" in out


def test_a_second_init_says_which_edited_files_it_kept(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert call_cli(["init"], capsys)[0] == 0
    suite = project / "evals/demo/suite.yaml"
    edited = suite.read_text() + "# tuned by the team\n"
    suite.write_text(edited)

    code, out, _ = call_cli(["init"], capsys)
    assert code == 0
    kept = out.split("Kept (differs from the template; --force to overwrite):\n", 1)[1]
    assert kept.splitlines()[0] == "  evals/demo/suite.yaml"
    unchanged = out.split("Unchanged:\n", 1)[1].split("Kept", 1)[0]
    assert "suite.yaml" not in unchanged and "  evals/demo/agent/agent.py" in unchanged
    assert suite.read_text() == edited

    code, out, _ = call_cli(["init", "--force"], capsys)
    assert code == 0 and "Kept" not in out
    assert suite.read_text() != edited


def test_promote_refuses_a_failing_run_and_is_byte_stable(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert call_cli(["init"], capsys)[0] == 0
    runs = []
    for _ in range(2):
        assert call_cli(["run", "evals/demo", "--no-baseline"], capsys)[0] == 0
    runs = sorted((project / "trialrun_out/demo").iterdir())
    assert len(runs) == 2 and runs[0].name < runs[1].name
    outputs = []
    for i, run_dir in enumerate(runs):
        target = project / f"b{i}.json"
        code, out, err = call_cli(
            ["baseline", "promote", "--from", str(run_dir), "--to", str(target)], capsys
        )
        assert code == 0, out + err
        outputs.append(target.read_bytes())
    # Two runs differ only in what RunLedger needs of each run: its time, id and wall times.
    docs = [json.loads(output) for output in outputs]
    for doc in docs:
        del doc["generated_at"], doc["run"]["run_id"], doc["aggregates"]["metrics"]["wall_ms"]
        for case in doc["cases"]:
            del case["wall_ms"]
    assert docs[0] == docs[1]
    target = project / "b0.json"
    again = ["baseline", "promote", "--from", str(runs[0]), "--to", str(target)]
    assert call_cli(again, capsys).code == 0
    assert target.read_bytes() == outputs[0]

    schema = project / "evals/demo/schema.json"
    doc = json.loads(schema.read_text())
    doc["required"].append("next_steps")
    schema.write_text(json.dumps(doc))
    assert call_cli(["run", "evals/demo", "--no-baseline"], capsys)[0] == 1
    failing = max((project / "trialrun_out/demo").iterdir())
    code, _, err = call_cli(
        ["baseline", "promote", "--from", str(failing), "--to", "b2.json"], capsys
    )
    assert code != 0 and "allow-failing" in err
    assert not (project / "b2.json").exists()
    code, _, _ = call_cli(
        ["baseline", "promote", "--from", str(failing), "--to", "b2.json", "--allow-failing"],
        capsys,
    )
    assert code == 0 and (project / "b2.json").exists()


def test_status_regression_against_the_baseline_fails_the_run(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert call_cli(["init"], capsys)[0] == 0
    cassette = project / "evals/demo/cassettes/t1.jsonl"
    cassette.write_text(cassette.read_text().replace("reset password", "something else"))
    code, out, _ = call_cli(["run", "evals/demo", "--baseline", "baselines/demo.json"], capsys)
    assert code == 1
    assert "cassette mismatch" in out.lower()


def test_init_outside_a_repository_keeps_every_path_inside_the_suite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(sys.executable)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    work = tmp_path / "plain"
    work.mkdir()
    monkeypatch.chdir(work)
    code, out, err = call_cli(["init", "--path", "evals"], capsys)
    assert code == 0, out + err
    assert (work / "evals/demo/baselines/demo.json").is_file()
    assert "baseline_path: baselines/demo.json" in (work / "evals/demo/suite.yaml").read_text()
    code, out, err = call_cli(["run", "evals/demo"], capsys)
    assert code == 0, out + err
    assert "min_pass_rate" in out


def tree(root: Path, *, skip: Path | None = None) -> dict[str, bytes]:
    """Every file under ``root`` (outside ``.git`` and ``skip``) with its bytes."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".git" not in p.parts and (skip is None or skip not in p.parents)
    }


def workflow_paths(workflow: Path) -> tuple[str, str]:
    """The suite and the baseline the workflow's `trialrun run` step names."""
    import re

    found = re.search(
        r'trialrun run "([^"]+)" --mode replay --baseline "([^"]+)"', workflow.read_text()
    )
    assert found, workflow.read_text()
    return found.group(1), found.group(2)


def test_init_path_in_a_repository_subfolder_writes_nothing_outside_it(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "README.md").write_text("mine\n")
    target = project / "services" / "bot" / "evals"
    target.mkdir(parents=True)
    before = tree(project)
    code, out, err = call_cli(["init", "--path", str(target)], capsys)
    assert code == 0, out + err
    assert tree(project, skip=target) == before
    workflow = target / ".github/workflows/trialrun.yml"
    assert workflow.is_file() and (target / "baselines/demo.json").is_file()
    assert (target / ".gitignore").read_text() == "trialrun_out/\n.trialrun_cache/\n"
    # The workflow runs from the checkout: its paths are relative to the repository root.
    suite, baseline = workflow_paths(workflow)
    assert (suite, baseline) == (
        "./services/bot/evals/demo",
        "./services/bot/evals/baselines/demo.json",
    )
    assert "move services/bot/evals/.github/workflows/trialrun.yml to .github/workflows/" in out
    assert "--workflow-dir .github/workflows" in out
    assert "add it to .gitignore too" in out
    code, out, err = call_cli(["run", suite, "--mode", "replay", "--baseline", baseline], capsys)
    assert code == 0, out + err


def test_init_workflow_dir_puts_the_workflow_where_github_reads_it(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = call_cli(
        ["init", "--path", "tools/evals", "--workflow-dir", ".github/workflows"], capsys
    )
    assert code == 0, out + err
    assert sorted(p.name for p in project.iterdir() if p.name != ".git") == [".github", "tools"]
    workflow = project / ".github/workflows/trialrun.yml"
    assert workflow_paths(workflow) == ("./tools/evals/demo", "./tools/evals/baselines/demo.json")
    assert "Note: GitHub reads" not in out


def test_init_path_naming_the_repository_root_writes_the_workflow_there(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(project.parent)
    code, out, err = call_cli(["init", "--path", str(project)], capsys)
    assert code == 0, out + err
    assert workflow_paths(project / ".github/workflows/trialrun.yml") == (
        "./demo",
        "./baselines/demo.json",
    )
    assert (project / ".gitignore").read_text() == "trialrun_out/\n.trialrun_cache/\n"
    assert "Note:" not in out


def test_init_path_outside_a_repository_writes_nothing_beside_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # What `make demo` does: init --path "$d/evals", then run from "$d".
    monkeypatch.chdir(tmp_path)
    work = tmp_path / "plain"
    work.mkdir()
    (work / "keep.txt").write_text("x")
    code, out, err = call_cli(["init", "--path", str(work / "evals")], capsys)
    assert code == 0, out + err
    assert sorted(p.name for p in work.iterdir()) == ["evals", "keep.txt"]
    workflow = work / "evals/.github/workflows/trialrun.yml"
    assert workflow_paths(workflow) == ("./demo", "./demo/baselines/demo.json")
    assert "not in a git repository" in out
    monkeypatch.chdir(work / "evals")
    code, out, err = call_cli(["run", "./demo", "--baseline", "./demo/baselines/demo.json"], capsys)
    assert code == 0, out + err


@pytest.mark.parametrize(
    ("existing", "expected"),
    [
        (None, "trialrun_out/\n.trialrun_cache/\n"),
        ("node_modules/", "node_modules/\ntrialrun_out/\n.trialrun_cache/\n"),
        ("*.pyc\n", "*.pyc\ntrialrun_out/\n.trialrun_cache/\n"),
        ("/trialrun_out\n", "/trialrun_out\n.trialrun_cache/\n"),
        ("a\ntrialrun_out/\nb\n", "a\ntrialrun_out/\nb\n.trialrun_cache/\n"),
        ("/.trialrun_cache\ntrialrun_out\n", "/.trialrun_cache\ntrialrun_out\n"),
    ],
)
def test_init_adds_trialrun_out_to_gitignore_once(
    project: Path, capsys: pytest.CaptureFixture[str], existing: str | None, expected: str
) -> None:
    gitignore = project / ".gitignore"
    if existing is not None:
        gitignore.write_text(existing)
    for _ in range(2):
        code, out, err = call_cli(["init"], capsys)
        assert code == 0, out + err
        assert gitignore.read_text() == expected
    code, out, err = call_cli(["init", "--force"], capsys)
    assert code == 0 and gitignore.read_text() == expected
    assert call_cli(["run", "evals/demo"], capsys)[0] == 0
    ignored = subprocess.run(
        ["git", "status", "--porcelain", "--ignored"], capture_output=True, text=True, check=True
    )
    assert "!! trialrun_out/" in ignored.stdout
    assert "!! evals/demo/.trialrun_cache/" in ignored.stdout


@pytest.mark.skipif(shutil.which("node") is None, reason="Node.js is not installed")
def test_init_node_writes_a_node_agent_that_passes(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    node_dir = Path(str(shutil.which("node"))).parent
    monkeypatch.setenv("PATH", f"{os.environ['PATH']}:{node_dir}")
    code, out, err = call_cli(["init", "--language", "node"], capsys)
    assert code == 0, out + err
    assert '["node", "agent/agent.js"]' in (project / "evals/demo/suite.yaml").read_text()
    assert not (project / "evals/demo/agent/agent.py").exists()
    code, out, err = call_cli(["run", "evals/demo"], capsys)
    assert code == 0, out + err


def test_init_templates_are_python_only(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = call_cli(["init", "--template", "langgraph", "--language", "node"], capsys)
    assert code == 2
    assert "--language applies to the demo only" in out + err
    assert not (project / "evals").exists()


def test_init_files_name_the_shipped_json_schemas(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import jsonschema
    import yaml

    assert call_cli(["init"], capsys)[0] == 0
    for yaml_file, modeline in (
        ("evals/demo/suite.yaml", "../.schemas/suite.schema.json"),
        ("evals/demo/cases/t1.yaml", "../../.schemas/case.schema.json"),
    ):
        path = project / yaml_file
        first = path.read_text().splitlines()[0]
        assert first == f"# yaml-language-server: $schema={modeline}"
        schema = json.loads((path.parent / modeline).read_text())
        jsonschema.validate(yaml.safe_load(path.read_text()), schema)


@pytest.mark.parametrize(
    "args",
    [
        ["baseline", "promote", "--from", "{run}", "--to", "a_dir"],
        ["receipt", "show", "{run}/receipt.jsonl", "--html", "a_dir"],
        ["run", "evals/demo", "--out", "a_file"],
        ["merge", "{run}", "--out", "a_file"],
        ["incident", "import", "{run}/run.jsonl", "--out", "a_file"],
        ["incident", "inspect", "{run}/summary.json", "--out", "a_file"],
        ["receipt", "keygen", "a_file"],
        ["scenario", "init", "a_file"],
        ["verify", "plan.yaml", "--out", "a_file"],
        ["attempt", "--goal", "g", "--verify", "true", "--agent", "true", "--receipt", "a_dir"],
    ],
)
def test_an_output_path_of_the_wrong_kind_is_invalid_input(
    project: Path, capsys: pytest.CaptureFixture[str], args: list[str]
) -> None:
    # A file where a directory is written (or the reverse) was a traceback from os.replace.
    assert call_cli(["init"], capsys)[0] == 0
    assert call_cli(["run", "evals/demo"], capsys)[0] == 0
    [run_dir] = (project / "trialrun_out" / "demo").iterdir()
    (project / "a_dir").mkdir()
    (project / "a_file").write_text("mine")
    (project / "plan.yaml").write_text("")
    code, out, err = call_cli([arg.replace("{run}", str(run_dir)) for arg in args], capsys)
    assert code == 2, out + err
    assert "Traceback" not in err
    assert re.search(r"is a (file|directory)|found a (file|directory|folder)", err), err
    assert (project / "a_file").read_text() == "mine" and not any((project / "a_dir").iterdir())


# Stands in for the `trialrun` console script, noting what the run has imported at the moment it
# spawns its first agent (the run starts its agent spawner, seal_spawner.py, with its first agent
# and every agent from there; an agent started directly names agent.py).
FIRST_AGENT_PROBE = """\
import subprocess, sys
from trialrun.cli import main
spawn = subprocess.Popen.__init__
def noting(self, args, *rest, **options):
    first = "agent.py" in str(args) or "seal_spawner.py" in str(args)
    if first and not hasattr(noting, "seen"):
        noting.seen = sorted(sys.modules)
        print("MODULES", *noting.seen, file=sys.stderr)
    spawn(self, args, *rest, **options)
subprocess.Popen.__init__ = noting
sys.argv[0] = "trialrun"
main()
"""


def modules_at_first_agent(args: list[str]) -> set[str]:
    """What ``trialrun ARGS`` has imported when it starts its first agent."""
    proc = subprocess.run(
        [sys.executable, "-c", FIRST_AGENT_PROBE, *args], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PASS" in proc.stdout
    [line] = [line for line in proc.stderr.splitlines() if line.startswith("MODULES ")]
    loaded = set(line.split()[1:])
    assert "trialrun.running.runner" in loaded  # the probe saw the run's own imports
    return loaded


def test_run_loads_the_views_of_the_finished_run_after_the_first_agent_starts(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert call_cli(["init"], capsys)[0] == 0
    loaded = modules_at_first_agent(["run", "evals/demo", "--mode", "replay"])
    # The console text, JUnit and their XML writer are only needed once every case is done (the
    # recorder's warm-up thread loads report.html, and the console text with it, only once the
    # first agent is starting).
    after_the_run = {"trialrun.report.console", "trialrun.report.junit", "xml.etree.ElementTree"}
    assert sorted(loaded & after_the_run) == []


def test_a_suite_of_builtin_assertions_lists_no_plugins_before_the_first_agent(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Listing the trialrun.assertions entry points reads every installed distribution's metadata.
    assert call_cli(["init"], capsys)[0] == 0
    assert "type: json_schema" in (project / "evals" / "demo" / "suite.yaml").read_text()
    loaded = modules_at_first_agent(["run", "evals/demo", "--mode", "replay", "--no-baseline"])
    assert "trialrun.checks.builtin" in loaded  # the suite's assertions were compiled
    # (email.message is loaded by importlib.metadata, and by http.server, which the HTTP recorder
    # loads only when a client first connects.)
    assert sorted(loaded & {"importlib.metadata", "email.message"}) == []
    assert "trialrun.artifacts.baseline" not in loaded  # --no-baseline: nothing to load


def test_a_replay_run_loads_no_record_mode_backend_before_the_first_agent(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert call_cli(["init"], capsys)[0] == 0
    suite = project / "evals" / "demo" / "suite.yaml"
    # Only a bare "python" is looked up on PATH (shutil.which) before the agent starts; jsonschema
    # imports shutil (through tempfile), so the suite checks its output with a lighter assertion.
    text = suite.read_text()
    assert 'agent_command: ["python3",' in text
    suite.write_text(
        text.replace(
            "type: json_schema\n    schema_path: schema.json",
            "type: must_call\n    tools: [search_docs]",
        )
    )
    loaded = modules_at_first_agent(["run", "evals/demo", "--mode", "replay", "--no-baseline"])
    assert "trialrun.tools.cassette" in loaded
    assert sorted(loaded & {"trialrun.tools.recorder", "shutil", "bz2", "lzma"}) == []
    # The HTTP recorder listens for every replay, but its server, and the certificate authority
    # no case of this suite needs, are loaded only when an agent connects (docs/offline.md).
    assert "trialrun.httprec.front" in loaded
    assert sorted(loaded & {"trialrun.httprec.proxy", "http.server", "cryptography"}) == []


# The console entry point ends the process as any Python program ends: atexit callbacks, live
# threads and buffered output are the interpreter's to finish.
LEAVING = """\
import atexit, sys, threading, time
from pathlib import Path
from trialrun.cli import main
mark = Path(sys.argv.pop(1))
atexit.register(lambda: mark.with_suffix(".atexit").write_text("ran"))
if sys.argv.pop(1) == "thread":
    def late() -> None:
        time.sleep(0.3)
        mark.with_suffix(".thread").write_text("done")
    threading.Thread(target=late).start()
sys.argv[0] = "trialrun"
main()
"""


@pytest.mark.parametrize("thread", ["none", "thread"])
def test_the_console_entry_runs_atexit_flushes_and_waits_for_live_threads(
    tmp_path: Path, thread: str
) -> None:
    mark = tmp_path / "mark"
    args = [sys.executable, "-c", LEAVING, str(mark), thread]
    proc = subprocess.run([*args, "--version"], capture_output=True, text=True)
    assert (proc.returncode, proc.stdout.strip()) == (0, f"trialrun {__version__}"), proc.stderr
    assert mark.with_suffix(".atexit").read_text() == "ran"
    assert mark.with_suffix(".thread").exists() == (thread == "thread")
    # A command's own exit code and its stderr (block-buffered into a pipe) come through too.
    proc = subprocess.run([*args, "run", str(tmp_path / "missing")], capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.startswith("error: "), proc.stderr


def test_the_console_entry_exits_quietly_when_its_reader_is_gone(tmp_path: Path) -> None:
    reader_gone = subprocess.Popen(
        [sys.executable, "-c", LEAVING, str(tmp_path / "mark"), "none", "--help"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert reader_gone.stdout is not None and reader_gone.stderr is not None
    reader_gone.stdout.close()
    err = reader_gone.stderr.read().decode()
    assert reader_gone.wait() == 1 and "Traceback" not in err and "Exception" not in err, err


# A command (a plugin, a tool module) that leaves a buffered file open: the interpreter's own
# exit flushes and closes it, as it does at the end of any Python program.
UNCLOSED = """\
import sys
import trialrun.cli
def command(argv):
    global log
    log = open(sys.argv[1], "w", encoding="utf-8")
    log.write("written at exit")
    return 3
trialrun.cli.run_cli = command
trialrun.cli.main([])
"""


def test_the_console_entry_leaves_by_the_interpreters_own_exit(tmp_path: Path) -> None:
    log = tmp_path / "plugin.log"
    proc = subprocess.run(
        [sys.executable, "-c", UNCLOSED, str(log)], capture_output=True, text=True
    )
    assert (proc.returncode, proc.stderr) == (3, "")
    assert log.read_text(encoding="utf-8") == "written at exit"
