"""``trialrun init``: write a demo suite, its agent, a baseline and a pull-request workflow.

Layout for ``--path P`` (default ``./evals``): the suite in ``P/demo/``, the baseline in
``<parent of P>/baselines/demo.json`` and the workflow in ``<repository root>/.github/workflows/``,
where GitHub actually reads it. Outside a git repository suite paths may not leave the suite
directory, so the baseline goes to ``P/demo/baselines/demo.json`` and the workflow beside P.
Existing files are left alone unless ``force``; the baseline is written only when the demo passes.
The JSON Schemas of suite and case files go to ``P/.schemas/``, named by a modeline in each file.

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
from trialrun.config.paths import find_repository_root
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
TEMPLATE_NAMES = ("demo", *TEMPLATES)

_AGENT_FILES: dict[Language, tuple[str, list[str]]] = {
    "python": ("agent/agent.py", ["python3", "agent/agent.py"]),
    "node": ("agent/agent.js", ["node", "agent/agent.js"]),
}
_COMMON_FILES = ("suite.yaml", "cases/t1.yaml", "cassettes/t1.jsonl", "schema.json")
SCHEMA_FILES = ("suite.schema.json", "case.schema.json")


@dataclass
class InitReport:
    written: list[Path] = field(default_factory=list)
    unchanged: list[Path] = field(default_factory=list)


def init_project(
    path: Path, *, language: Language = "python", force: bool = False, template: str = "demo"
) -> InitReport:
    if template != "demo":
        return _init_template(path, TEMPLATES[template], force)
    if language == "node" and shutil.which("node") is None:
        raise TrialrunError("Node.js not found on PATH: install Node to use --language node.")
    if path.exists() and not path.is_dir():
        raise TrialrunError(f"{path} exists and is not a directory.")
    suite_dir = path / SUITE_NAME
    repo_root = find_repository_root(path.resolve().parent)
    baseline_home = path.resolve().parent if repo_root else suite_dir.resolve()
    baseline = baseline_home / "baselines" / f"{SUITE_NAME}.json"
    workflow_root = repo_root or path.resolve().parent
    workflow = workflow_root / ".github" / "workflows" / "trialrun.yml"

    report = InitReport()
    agent_file, agent_command = _AGENT_FILES[language]
    files = {suite_dir / name: _template(f"demo/{name}") for name in (*_COMMON_FILES, agent_file)}
    # Editors (yaml-language-server) complete and check suite and case files against these.
    for schema in SCHEMA_FILES:
        files[path / ".schemas" / schema] = _package_text("schemas", schema)
    files[suite_dir / "suite.yaml"] = (
        files[suite_dir / "suite.yaml"]
        .replace("{agent_command}", json.dumps(agent_command))
        .replace(
            "{baseline_path}", os.path.relpath(baseline, suite_dir.resolve()).replace(os.sep, "/")
        )
    )
    files[workflow] = (
        _template("github/trialrun.yml")
        .replace("{version}", __version__)
        .replace("{suite}", _repo_relative(suite_dir, workflow_root))
        .replace("{baseline}", _repo_relative(baseline, workflow_root))
    )
    if force:
        # Another language's agent left behind would make the suite ambiguous.
        for other, (other_file, _) in _AGENT_FILES.items():
            if other != language:
                (suite_dir / other_file).unlink(missing_ok=True)
    for target, text in files.items():
        _write_once(target, text, force, report)

    if baseline.exists() and not force:
        report.unchanged.append(baseline)
    else:
        _write_baseline(suite_dir, baseline)
        report.written.append(baseline)
    return report


def _init_template(path: Path, template: Template, force: bool) -> InitReport:
    if path.exists() and not path.is_dir():
        raise TrialrunError(f"{path} exists and is not a directory.")
    suite_dir = path / template.name
    repo_root = find_repository_root(path.resolve().parent)
    baseline_home = path.resolve().parent if repo_root else suite_dir.resolve()
    baseline = baseline_home / "baselines" / f"{template.name}.json"
    workflow_root = repo_root or path.resolve().parent
    workflow = workflow_root / ".github" / "workflows" / f"trialrun-{template.name}.yml"

    files = {suite_dir / name: text for name, text in _template_files(template.name).items()}
    for schema in SCHEMA_FILES:
        files[path / ".schemas" / schema] = _package_text("schemas", schema)
    files[suite_dir / "suite.yaml"] = (
        files[suite_dir / "suite.yaml"]
        .replace("{agent_command}", json.dumps(["python3", "agent/agent.py"]))
        .replace(
            "{baseline_path}", os.path.relpath(baseline, suite_dir.resolve()).replace(os.sep, "/")
        )
    )
    files[workflow] = (
        _template("github/trialrun.yml")
        .replace("name: trialrun", f"name: trialrun-{template.name}", 1)
        .replace('"trialrun=={version}"', f'"trialrun=={{version}}" "{template.extra}"')
        .replace("{version}", __version__)
        .replace("{suite}", _repo_relative(suite_dir, workflow_root))
        .replace("{baseline}", _repo_relative(baseline, workflow_root))
        .replace("trialrun-artifacts", f"trialrun-{template.name}-artifacts")
    )
    report = InitReport()
    for target, text in files.items():
        _write_once(target, text, force, report)
    if baseline.exists() and not force:
        report.unchanged.append(baseline)
        return report
    _require_imports(template)
    _write_baseline(suite_dir, baseline)
    report.written.append(baseline)
    return report


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
    from trialrun.baseline import baseline_from_summary
    from trialrun.config import load_suite
    from trialrun.fsutil import write_json
    from trialrun.report.summary import build_summary
    from trialrun.results import RunResult
    from trialrun.runner import RunOptions, RunProgress, run_suite

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
    from trialrun.fsutil import atomic_write_text

    if target.exists() and not force:
        report.unchanged.append(target)
        return
    atomic_write_text(target, text)
    if target.suffix in (".py", ".js"):
        os.chmod(target, 0o755)
    report.written.append(target)


def _template(name: str) -> str:
    return _package_text("templates", name)


def _package_text(*parts: str) -> str:
    return resources.files("trialrun").joinpath(*parts).read_text(encoding="utf-8")


def _repo_relative(path: Path, root: Path) -> str:
    return "./" + path.resolve().relative_to(root.resolve()).as_posix()
