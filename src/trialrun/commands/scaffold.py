"""``trialrun init``: write a demo suite, its agent, a baseline and a pull-request workflow.

init writes only inside one folder, its *scope*: the folder named by ``--path P``, or without
``--path`` the current directory (the suite then goes to ``./evals/``). Layout: the suite in
``P/demo/``, the JSON Schemas of suite and case files in ``P/.schemas/`` (named by a modeline in
each file), the baseline in ``<scope>/baselines/demo.json`` (outside a git repository suite paths
may not leave the suite directory, so ``P/demo/baselines/demo.json``) and ``trialrun_out/`` in the
scope's ``.gitignore``, with ``.trialrun_cache/`` (the last-failed cache beside each suite).

The workflow runs from the checkout, the git repository root, so its suite and baseline paths are
relative to that root. GitHub reads workflows only from ``<root>/.github/workflows/``: the
workflow goes there when the root is the scope itself; otherwise it is written to
``<scope>/.github/workflows/`` and init says where to move it, unless ``workflow_dir``
(``--workflow-dir``) names the directory. Existing files are left alone unless ``force``; the
baseline is written only when the demo passes.

Other templates (``mcp``, ``openai-agents``, ``langgraph``) write their suite to ``P/<template>/``
with recordings that replay offline, a baseline ``baselines/<template>.json`` and a workflow
``trialrun-<template>.yml``. Their agents need a framework: it is checked before the first run so
the message says what to install.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Literal

from trialrun import __version__
from trialrun.config.paths import display_path, find_repository_root
from trialrun.errors import TrialrunError

Language = Literal["python", "node"]
SUITE_NAME = "demo"


@dataclass(frozen=True)
class Template:
    """A suite ``init`` can write besides the demo: files under ``templates/<name>/``."""

    name: str
    imports: tuple[str, ...]
    """Modules the agent imports: checked with the agent's ``python3`` before the first run."""
    extra: str
    """What to ``pip install`` for them (also used by the generated workflow)."""


TEMPLATES: dict[str, Template] = {
    "mcp": Template("mcp", ("mcp",), "mcp>=2.3"),
    "openai-agents": Template("openai-agents", ("agents",), "trialrun[openai-agents]"),
    "langgraph": Template("langgraph", ("langgraph", "langchain_openai"), "trialrun[langgraph]"),
}

_AGENT_FILES: dict[Language, tuple[str, list[str]]] = {
    "python": ("agent/agent.py", ["python3", "agent/agent.py"]),
    "node": ("agent/agent.js", ["node", "agent/agent.js"]),
}
_COMMON_FILES = ("suite.yaml", "cases/t1.yaml", "cassettes/t1.jsonl", "schema.json")
SCHEMA_FILES = ("suite.schema.json", "case.schema.json")


GITIGNORE_ENTRY = "trialrun_out/"
CACHE_GITIGNORE_ENTRY = ".trialrun_cache/"
"""The last-failed cache beside each suite file (``artifacts.failed_cache``)."""
_WORKFLOWS = Path(".github") / "workflows"


@dataclass
class InitReport:
    written: list[Path] = field(default_factory=list)
    unchanged: list[Path] = field(default_factory=list)
    kept: list[Path] = field(default_factory=list)
    """Existing files that differ from what init would write (edited by the user): left alone."""
    updated: list[tuple[Path, str]] = field(default_factory=list)
    """Existing or new files init added a line to, and what it added."""
    notes: list[str] = field(default_factory=list)
    """What the user must know or do next (a workflow GitHub will not read where it is)."""


@dataclass(frozen=True)
class Layout:
    """Where each file of one ``init`` goes; every path is absolute."""

    scope: Path
    """The folder init may write to: ``--path``, else the current directory."""
    suite_dir: Path
    schemas_dir: Path
    baseline: Path
    workflow: Path
    checkout: Path
    """Where the workflow runs (the repository root): its paths are relative to this."""
    in_repository: bool

    @classmethod
    def plan(
        cls,
        path: Path | None,
        suite_name: str,
        workflow_name: str,
        workflow_dir: Path | None = None,
    ) -> Layout:
        suites = (path if path is not None else Path("evals")).resolve()
        scope = suites if path is not None else Path.cwd().resolve()
        suite_dir = suites / suite_name
        root = find_repository_root(suites)
        # Outside a repository a suite path may not leave the suite directory.
        baseline_home = scope if root is not None else suite_dir
        checkout = root if root is not None else _checkout_without_git(scope, workflow_dir)
        if workflow_dir is not None:
            workflow_home = workflow_dir.resolve()
        elif checkout == scope:
            workflow_home = checkout / _WORKFLOWS
        else:
            workflow_home = scope / _WORKFLOWS
        return cls(
            scope=scope,
            suite_dir=suite_dir,
            schemas_dir=suites / ".schemas",
            baseline=baseline_home / "baselines" / f"{suite_name}.json",
            workflow=workflow_home / workflow_name,
            checkout=checkout,
            in_repository=root is not None,
        )

    def suite_baseline_path(self) -> str:
        """``baseline_path`` as the suite file writes it: relative to the suite directory."""
        return os.path.relpath(self.baseline, self.suite_dir).replace(os.sep, "/")

    def workflow_text(self, template: str) -> str:
        return (
            template.replace("{version}", __version__)
            .replace("{suite}", _relative_to(self.suite_dir, self.checkout))
            .replace("{baseline}", _relative_to(self.baseline, self.checkout))
        )

    def notes(self) -> list[str]:
        active = self.checkout / _WORKFLOWS
        shown = display_path(self.workflow)
        if not self.in_repository:
            return [
                f"not in a git repository: the paths in {shown} are relative to "
                f"{display_path(self.checkout)}, so it works once that folder is the repository "
                "root."
            ]
        if self.workflow.parent == active:
            return []
        return [
            f"GitHub reads workflows only from the repository root's .github/workflows/: move "
            f"{shown} to {display_path(active)}/ (its paths are relative to the root, "
            f"{display_path(self.checkout)}), or run init again with --workflow-dir "
            f"{display_path(active)}."
        ]


def _checkout_without_git(scope: Path, workflow_dir: Path | None) -> Path:
    """Outside git the checkout is a guess: the folder holding ``--workflow-dir``'s
    ``.github/workflows`` when it holds the scope too, else the scope."""
    if workflow_dir is not None:
        wanted = workflow_dir.resolve()
        if wanted.parts[-2:] == _WORKFLOWS.parts and scope.is_relative_to(wanted.parent.parent):
            return wanted.parent.parent
    return scope


def init_project(
    path: Path | None,
    *,
    language: Language = "python",
    force: bool = False,
    template: str = "demo",
    workflow_dir: Path | None = None,
) -> InitReport:
    """Write the suite of ``template`` under ``path`` (``None``: ``./evals`` in the current
    directory's layout); see the module docstring for where everything goes."""
    if path is not None and path.exists() and not path.is_dir():
        raise TrialrunError(f"{path} exists and is not a directory.")
    if template != "demo":
        return _init_template(path, TEMPLATES[template], force, workflow_dir)
    if language == "node" and shutil.which("node") is None:
        raise TrialrunError("Node.js not found on PATH: install Node to use --language node.")
    layout = Layout.plan(path, SUITE_NAME, "trialrun.yml", workflow_dir)
    suite_dir = layout.suite_dir

    report = InitReport()
    agent_file, agent_command = _AGENT_FILES[language]
    files = {suite_dir / name: _template(f"demo/{name}") for name in (*_COMMON_FILES, agent_file)}
    files.update(_schema_files(layout))
    files[suite_dir / "suite.yaml"] = (
        files[suite_dir / "suite.yaml"]
        .replace("{agent_command}", json.dumps(agent_command))
        .replace("{baseline_path}", layout.suite_baseline_path())
    )
    files[layout.workflow] = layout.workflow_text(_template("github/trialrun.yml"))
    if force:
        # Another language's agent left behind would make the suite ambiguous.
        for other, (other_file, _) in _AGENT_FILES.items():
            if other != language:
                (suite_dir / other_file).unlink(missing_ok=True)
    for target, text in files.items():
        _write_once(target, text, force, report)
    _ignore_outputs(layout, report)

    if layout.baseline.exists() and not force:
        report.unchanged.append(layout.baseline)
    else:
        _write_baseline(suite_dir, layout.baseline)
        report.written.append(layout.baseline)
    report.notes.extend(layout.notes())
    return report


def _init_template(
    path: Path | None, template: Template, force: bool, workflow_dir: Path | None
) -> InitReport:
    workflow_name = f"trialrun-{template.name}.yml"
    layout = Layout.plan(path, template.name, workflow_name, workflow_dir)
    suite_dir = layout.suite_dir

    files = {suite_dir / name: text for name, text in _template_files(template.name).items()}
    files.update(_schema_files(layout))
    files[suite_dir / "suite.yaml"] = (
        files[suite_dir / "suite.yaml"]
        .replace("{agent_command}", json.dumps(["python3", "agent/agent.py"]))
        .replace("{baseline_path}", layout.suite_baseline_path())
    )
    files[layout.workflow] = layout.workflow_text(
        _template("github/trialrun.yml")
        .replace("name: trialrun", f"name: trialrun-{template.name}", 1)
        .replace('"trialrun=={version}"', f'"trialrun=={{version}}" "{template.extra}"')
        .replace("trialrun-artifacts", f"trialrun-{template.name}-artifacts")
    )
    report = InitReport()
    for target, text in files.items():
        _write_once(target, text, force, report)
    _ignore_outputs(layout, report)
    report.notes.extend(layout.notes())
    if layout.baseline.exists() and not force:
        report.unchanged.append(layout.baseline)
        return report
    _require_imports(template)
    _write_baseline(suite_dir, layout.baseline)
    report.written.append(layout.baseline)
    return report


def _schema_files(layout: Layout) -> dict[Path, str]:
    # Editors (yaml-language-server) complete and check suite and case files against these.
    return {layout.schemas_dir / name: _package_text("schemas", name) for name in SCHEMA_FILES}


def _ignore_outputs(layout: Layout, report: InitReport) -> None:
    """Add ``trialrun_out/`` to the scope's ``.gitignore`` once; say so when it does not cover
    the checkout, where the workflow (and a run started at the root) writes it."""
    gitignore = layout.scope / ".gitignore"
    added = [
        entry
        for entry in (GITIGNORE_ENTRY, CACHE_GITIGNORE_ENTRY)
        if add_gitignore_entry(gitignore, entry)
    ]
    if added:
        report.updated.append((gitignore, f"added {', '.join(added)}"))
    else:
        report.unchanged.append(gitignore)
    if layout.in_repository and layout.checkout != layout.scope:
        report.notes.append(
            f"{display_path(gitignore)} covers run artifacts under {display_path(layout.scope)} "
            f"only; a run started at the repository root writes {GITIGNORE_ENTRY} there: add it "
            f"to {display_path(layout.checkout / '.gitignore')} too."
        )


def add_gitignore_entry(gitignore: Path, entry: str) -> bool:
    """Append ``entry`` to ``gitignore`` (created if missing) unless a line already ignores it.

    Returns whether the file changed. ``trialrun_out``, ``/trialrun_out/`` and the like count as
    present: the same directory must not be listed twice.
    """
    from trialrun.base.fsutil import atomic_write_text

    try:
        text = gitignore.read_text(encoding="utf-8") if gitignore.exists() else ""
    except (OSError, UnicodeDecodeError) as exc:
        raise TrialrunError(f"{gitignore}: cannot read it to add {entry}: {exc}") from exc
    wanted = entry.strip("/")
    if any(line.strip().strip("/") == wanted for line in text.split("\n")):
        return False
    separator = "" if not text or text.endswith("\n") else "\n"
    atomic_write_text(gitignore, f"{text}{separator}{entry}\n")
    return True


def _template_files(name: str) -> dict[str, str]:
    """Every file of ``templates/<name>/``, by path relative to it."""
    root = resources.files("trialrun").joinpath("templates", name)
    found: dict[str, str] = {}
    pending = [(root, "")]
    while pending:
        directory, prefix = pending.pop()
        for entry in directory.iterdir():
            if entry.name == "__pycache__":
                continue
            relative = f"{prefix}{entry.name}"
            if entry.is_dir():
                pending.append((entry, relative + "/"))
            else:
                found[relative] = entry.read_text(encoding="utf-8")
    return found


def _require_imports(template: Template) -> None:
    python = shutil.which("python3") or shutil.which("python")
    if python is None:
        raise TrialrunError("python3 not found on PATH: the template's agent runs with python3.")
    check = "import " + ", ".join(template.imports)
    done = subprocess.run([python, "-c", check], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise TrialrunError(
            f"The {template.name} template's agent needs {', '.join(template.imports)} in the "
            f"python3 on PATH ({python}), which cannot import them; run "
            f"pip install '{template.extra}' and init again (files written, no baseline yet)."
        )


def _write_baseline(suite_dir: Path, baseline: Path) -> None:
    """Run the demo once; its passing run becomes the baseline."""
    from trialrun.artifacts.baseline import baseline_from_summary
    from trialrun.base.fsutil import write_json
    from trialrun.base.results import RunResult
    from trialrun.config import load_suite
    from trialrun.report.summary import build_summary
    from trialrun.running.runner import RunOptions, RunProgress, run_suite

    suite = load_suite(suite_dir)
    progress = RunProgress()
    cases = asyncio.run(run_suite(suite, RunOptions(mode="replay"), progress))
    if not cases or not all(case.passed for case in cases):
        reasons = "; ".join(f"{c.case_id}: {c.failure_reason}" for c in cases if not c.passed)
        raise TrialrunError(
            f"The example agent did not pass, so no baseline was written ({reasons})."
        )
    policy = suite.config.regression
    result = RunResult(
        run_id="init",
        suite_name=suite.config.suite_name,
        suite_path=suite.suite_file.as_posix(),
        agent_command=list(suite.agent_command),
        mode="replay",
        cases=cases,
        started_at=0.0,
        finished_at=0.0,
        regression_policy=policy.to_dict(exclude_none=True) if policy else None,
    )
    summary = build_summary(result, regression=None)
    write_json(baseline, baseline_from_summary(summary, base_dir=baseline.parent))


def _write_once(target: Path, text: str, force: bool, report: InitReport) -> None:
    from trialrun.base.fsutil import atomic_write_text

    if target.exists() and not force:
        # A file the user edited is not "unchanged": say it was kept, so --force is a choice.
        try:
            same = target.read_bytes() == text.encode("utf-8")
        except OSError:
            same = False
        (report.unchanged if same else report.kept).append(target)
        return
    atomic_write_text(target, text)
    if target.suffix in (".py", ".js"):
        os.chmod(target, 0o755)
    report.written.append(target)


def _template(name: str) -> str:
    return _package_text("templates", name)


def _package_text(*parts: str) -> str:
    return resources.files("trialrun").joinpath(*parts).read_text(encoding="utf-8")


def _relative_to(path: Path, root: Path) -> str:
    return "./" + path.relative_to(root).as_posix()
