"""Every command is documented, and the docs pages' worked examples run as written.

A page marks its examples as CONTRIBUTING.md does, with ``<!-- example: ... -->`` before a
fenced block: ``<!-- example: file PATH -->`` is a file the reader writes, ``<!-- example:
console -->`` a shell session. Each ``$ `` line of a session runs in bash in a fresh folder, in
page order, and what it prints (stdout then stderr, the folder's path shown as ``$PWD``) must be
the lines below it; ``...`` in a line stands for any text, and ``# exit N`` after a command is
its exit status (0 when absent).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from builders import call_cli
from paths import DATA_DIR, REPO_ROOT

EXAMPLE = re.compile(
    r"^<!-- example: (console|file [^ ]+) -->\n```\w*\n(.*?)^```$", re.MULTILINE | re.DOTALL
)
EXIT = re.compile(r"\s+# exit (\d+)$")

GIVEN: dict[str, dict[str, Path]] = {
    # A production export is too long for the page; the page says it is this fixture.
    "incident.md": {"export.jsonl": DATA_DIR / "incidents" / "trialrun_run.jsonl"},
}
"""Files a page's example starts from that the page does not spell out."""

PAGES = [
    "flaky.md",
    "incident.md",
    "recordings.md",
    "scenario.md",
    "team.md",
    "init.md",
    "run.md",
    "doctor.md",
    "baseline.md",
    "diff.md",
    "suite-format.md",
    "tool-module.md",
    "compare-cases.md",
    "from-runledger.md",
]


@dataclass(frozen=True)
class Step:
    command: str
    exit_code: int
    expected: list[str]


def help_commands() -> list[str]:
    """The command names ``trialrun --help`` lists."""
    outcome = call_cli(["--help"])
    assert outcome.code == 0
    listed = outcome.out.split("\nCommands:\n", 1)[1]
    return re.findall(r"^  ([a-z][\w-]*)\s", listed, re.MULTILINE)


def readme_section(title: str) -> str:
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    return readme.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_every_command_is_in_the_readme_command_list_with_a_page() -> None:
    commands = help_commands()
    assert {"run", "incident", "scenario", "publish", "scores"} <= set(commands)
    section = readme_section("Command line")
    usage = section.split("```\n", 2)[1]
    rows = re.findall(r"^\| `trialrun ([\w-]+)` \| .*?\]\(([\w/.-]*)(#[\w-]+)?\)", section, re.M)
    table = {command: page for command, page, _anchor in rows}
    missing_usage = [c for c in commands if not re.search(rf"^trialrun {c}\b", usage, re.M)]
    assert not missing_usage, f"README.md's command list has no usage line for {missing_usage}"
    unlinked = [c for c in commands if c not in table]
    assert not unlinked, f"README.md's command table links no page for {unlinked}"
    for command in commands:
        # Every command has a page of its own in docs/ (README.md only summarises and links).
        page = table[command]
        assert page.startswith("docs/"), f"README.md links {command} to {page}, outside docs/"
        assert (REPO_ROOT / page).is_file(), f"README.md links {command} to {page}: no such page"
        text = (REPO_ROOT / page).read_text(encoding="utf-8")
        assert f"trialrun {command}" in text, f"{page} never shows `trialrun {command}`"


def command_pages() -> dict[str, str]:
    """README's command table: command -> its page."""
    section = readme_section("Command line")
    rows = re.findall(r"^\| `trialrun ([\w-]+)` \| .*?\]\(([\w/.-]*)(#[\w-]+)?\)", section, re.M)
    return {command: page for command, page, _anchor in rows}


def help_options(argv: list[str]) -> tuple[set[str], list[str]]:
    """The long options ``trialrun ARGV --help`` lists, and its subcommands."""
    outcome = call_cli([*argv, "--help"])
    assert outcome.code == 0, outcome.err
    listed = outcome.out.split("\nOptions:\n", 1)[1]
    options = set(re.findall(r"^\s+(?:-\w, )?(--[a-z][\w-]*)", listed, re.M)) - {"--help"}
    subcommands: list[str] = []
    if "\nCommands:\n" in outcome.out:
        commands = outcome.out.split("\nCommands:\n", 1)[1]
        subcommands = re.findall(r"^  ([a-z][\w-]*)\s", commands, re.M)
    return options, subcommands


def test_every_option_of_every_command_is_on_its_page() -> None:
    pages = command_pages()
    assert set(help_commands()) <= set(pages)
    unnamed: list[str] = []
    for command, page in pages.items():
        text = (REPO_ROOT / page).read_text(encoding="utf-8")
        pending = [[command]]
        while pending:
            argv = pending.pop()
            options, subcommands = help_options(argv)
            unnamed += [f"{page}: trialrun {' '.join(argv)} {o}" for o in options if o not in text]
            pending += [[*argv, sub] for sub in subcommands]
    assert not unnamed, "options --help lists that their page never names:\n" + "\n".join(
        sorted(unnamed)
    )


def test_the_help_parser_finds_what_the_table_must_list() -> None:
    # The check above is only as good as this list: it must be the whole of --help's commands.
    outcome = call_cli(["--help"])
    listed = outcome.out.split("\nCommands:\n", 1)[1]
    entries = [line for line in listed.splitlines() if re.match(r"^  \S", line)]
    assert len(help_commands()) == len(entries) >= 16


def parse_session(block: str) -> list[Step]:
    steps: list[Step] = []
    for line in block.splitlines():
        if line.startswith("$ "):
            command = line[2:]
            exit_code = 0
            found = EXIT.search(command)
            if found:
                exit_code = int(found.group(1))
                command = command[: found.start()]
            steps.append(Step(command, exit_code, []))
        else:
            assert steps, f"output before the first command: {line!r}"
            steps[-1].expected.append(line)
    return steps


def test_a_session_parses_into_commands_exit_codes_and_output() -> None:
    steps = parse_session("$ a b  # exit 1\nout\n...x\n$ c\n")
    assert steps == [Step("a b", 1, ["out", "...x"]), Step("c", 0, [])]


def matches(expected: str, actual: str) -> bool:
    pattern = ".*".join(re.escape(part) for part in expected.split("..."))
    return re.fullmatch(pattern, actual) is not None


@pytest.mark.parametrize(
    ("expected", "actual", "result"),
    [("a ... b", "a xyz b", True), ("a ... b", "a xyz c", False), ("abc", "abcd", False)],
)
def test_an_ellipsis_stands_for_any_text_and_nothing_else_does(
    expected: str, actual: str, result: bool
) -> None:
    assert matches(expected, actual) is result


def environment(folder: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "TRIALRUN_"))}
    gitconfig = folder.parent / "gitconfig"
    gitconfig.write_text("", encoding="utf-8")
    env.update(
        PATH=os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]),
        TRIALRUN_HOME=str(folder / "home"),
        TRIALRUN_HANDLE="alice",
        GIT_CONFIG_GLOBAL=str(gitconfig),
        GIT_CONFIG_NOSYSTEM="1",
        NO_COLOR="1",
    )
    for role in ("AUTHOR", "COMMITTER"):
        env[f"GIT_{role}_NAME"] = "Alice"
        env[f"GIT_{role}_EMAIL"] = "alice@example.invalid"
    return env


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES)
def test_the_page_examples_run_as_written(page: str, tmp_path: Path) -> None:
    text = (REPO_ROOT / "docs" / page).read_text(encoding="utf-8")
    examples = EXAMPLE.findall(text)
    assert any(kind == "console" for kind, _ in examples), f"docs/{page} has no console example"
    folder = tmp_path / "work"
    folder.mkdir()
    for name, source in GIVEN.get(page, {}).items():
        shutil.copyfile(source, folder / name)
    env = environment(folder)
    for kind, body in examples:
        if kind.startswith("file "):
            target = folder / kind.removeprefix("file ")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(body, encoding="utf-8")
            continue
        for step in parse_session(body):
            done = subprocess.run(
                ["bash", "-c", step.command],
                cwd=folder,
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
            shown = (done.stdout + done.stderr).replace(str(folder), "$PWD").splitlines()
            where = f"docs/{page}: $ {step.command}"
            assert done.returncode == step.exit_code, f"{where}: exit {done.returncode}\n{shown}"
            assert len(shown) == len(step.expected), f"{where}: printed\n" + "\n".join(shown)
            for want, got in zip(step.expected, shown, strict=True):
                assert matches(want, got), f"{where}: expected {want!r}, printed {got!r}"
