"""``trialrun doctor``: static setup checks of a suite, and an optional replay probe.

Without the probe nothing of the agent runs: every check reads files only. Each check is one
line ``ok|warn|fail <name>: <what> (<how to fix>)``; warnings never fail the doctor.
"""

from __future__ import annotations

import asyncio
import os
import platform
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Literal

from trialrun import __version__
from trialrun.base.redact import redact_changed
from trialrun.base.words import counted, inflected
from trialrun.config import Case, Suite, load_suite
from trialrun.config.loader import find_suite_file
from trialrun.config.paths import display_path
from trialrun.errors import CassetteError, ConfigError, ConfigErrors
from trialrun.tools.cassette import Cassette

Level = Literal["ok", "warn", "fail"]

_INTERPRETERS = ("python", "pypy", "node", "bash", "sh", "zsh", "ruby", "perl")
"""Programs whose first operand is a script file (``python3.12`` and ``pypy3`` included)."""
_NO_SCRIPT = frozenset({"-m", "-c", "-e", "-p", "--eval", "--print"})
"""Options after which the interpreter runs a module or inline code, not a file."""
_TAKES_VALUE = frozenset({"-W", "-X", "-r", "--require"})
_PACKAGES = ("click", "pydantic", "PyYAML", "jsonschema")


@dataclass(frozen=True)
class Check:
    """One diagnosis: its level, the check's name, what was found and how to fix it."""

    level: Level
    name: str
    what: str
    fix: str = ""

    def line(self) -> str:
        return f"{self.level} {self.name}: {self.what}" + (f" ({self.fix})" if self.fix else "")


def failed(checks: list[Check]) -> bool:
    return any(check.level == "fail" for check in checks)


def diagnose(path: Path, now: float | None = None) -> tuple[Suite | None, list[Check]]:
    """Every static check of the suite at ``path``; the suite is None when it did not load.

    ``now`` (epoch seconds; default: the clock) is when recordings' ages are measured from.

    Raises ``ConfigError`` when ``path`` is not a suite at all (no suite file there).
    """
    find_suite_file(path)
    checks: list[Check] = []
    try:
        suite = load_suite(path)
    except ConfigErrors as exc:
        checks.extend(
            Check("fail", "suite", str(error), "fix the file at that line") for error in exc.errors
        )
        checks.append(_versions())
        return None, checks
    checks.append(Check("ok", "suite", f"{display_path(suite.suite_file)} and its cases load"))
    checks.extend(
        Check("warn", "suite", warning.removeprefix("warning: "), "remove the key")
        for warning in suite.warnings
    )
    checks.append(Check("ok", "schemas", "suite and case files match their schemas"))
    checks.append(_agent_command(suite))
    cassettes = _load_cassettes(suite)
    checks.extend(_cassettes(suite, cassettes))
    checks.extend(_secrets(cassettes))
    checks.extend(_service_recordings(suite))
    checks.extend(_stale(suite, time.time() if now is None else now))
    checks.extend(_prices(suite))
    checks.extend(_baseline(suite))
    checks.append(_ci_workflow(suite))
    checks.append(_versions())
    return suite, checks


def _agent_command(suite: Suite) -> Check:
    from trialrun.conversation.process import AgentStartError, resolve_command

    try:
        program = resolve_command(suite.agent_command, os.environ.get("PATH"))[0]
    except AgentStartError as exc:
        return Check("fail", "agent", str(exc), "set agent_command in suite.yaml")
    found = shutil.which(program) or (program if Path(program).is_file() else None)
    if found is None:
        return Check(
            "fail",
            "agent",
            f"agent_command program {program!r} is not on PATH and is not an existing file",
            "install it or set agent_command in suite.yaml to its full path",
        )
    missing = _missing_script(suite)
    if missing is not None:
        return missing
    return Check("ok", "agent", f"agent_command resolves to {found}")


def _missing_script(suite: Suite) -> Check | None:
    """The script an interpreter in agent_command is given, when it does not exist.

    The agent runs in trialrun's working directory; a part naming something under the suite
    directory was already made absolute by the loader, so a relative part left names nothing in
    either.
    """
    command = suite.agent_command
    program = Path(command[0]).name
    if not program.startswith(_INTERPRETERS):
        return None
    args = iter(command[1:])
    for part in args:
        if part in _NO_SCRIPT:
            return None
        if part in _TAKES_VALUE:
            next(args, None)
            continue
        if part.startswith("-"):
            continue
        script = Path(part)
        if script.exists():
            return None
        from trialrun.base.suggest import did_you_mean

        folder = script.parent
        names: list[str] = []
        for base in (Path.cwd(), suite.suite_dir):
            try:
                names += [(folder / p.name).as_posix() for p in (base / folder).iterdir()]
            except OSError:
                continue
        return Check(
            "fail",
            "agent",
            f"agent_command script {part!r} does not exist (looked in the suite directory "
            f"{display_path(suite.suite_dir)} and in the directory the agent runs in, "
            f"{display_path(Path.cwd())}){did_you_mean(part, names)}",
            "fix the path in agent_command in suite.yaml",
        )
    return None


def _load_cassettes(suite: Suite) -> dict[Path, Cassette | list[CassetteError]]:
    """Every cassette the suite names, parsed once for all the checks that read them."""
    from trialrun.tools.cassette import Cassette

    loaded: dict[Path, Cassette | list[CassetteError]] = {}
    for path in sorted({case.cassette_path for case in suite.cases}):
        cassette, problems = Cassette.read(path)
        loaded[path] = problems if problems or cassette is None else cassette
    return loaded


def _cassettes(suite: Suite, loaded: dict[Path, Cassette | list[CassetteError]]) -> Iterator[Check]:
    if suite.config.mode != "replay":
        yield Check("ok", "cassettes", f"not read in {suite.config.mode} mode")
        yield _tools(suite)
        return
    from trialrun.running.preflight import as_config_errors

    allowed = set(suite.config.tool_registry)
    for path, cassette in loaded.items():
        shown = display_path(path)
        if isinstance(cassette, list):
            # The same lines `trialrun run` prints before it refuses to start.
            for error in as_config_errors(cassette):
                yield Check(
                    "fail", "cassette", str(error), "record it with `trialrun run --mode record`"
                )
            continue
        outside = [
            (entry.line, entry.tool) for entry in cassette.recordings() if entry.tool not in allowed
        ]
        for line, tool in outside:
            yield Check(
                "warn",
                "cassette",
                f"{shown}:{line}: tool {tool!r} is not in tool_registry, "
                "so no call can use this recording",
                "add the tool to tool_registry or delete the line",
            )
        if not outside:
            yield Check(
                "ok",
                "cassette",
                f"{shown}: {counted(cassette.count, 'recording')} "
                + ("parses" if cassette.count == 1 else "parse"),
            )


def _tools(suite: Suite) -> Check:
    """Record and live modes import the tool module: `trialrun run` refuses to start without it."""
    from trialrun.errors import TrialrunError
    from trialrun.running.preflight import select_suite_tools, tool_module_error

    try:
        tools = select_suite_tools(suite)
    except TrialrunError as exc:
        return Check("fail", "tools", str(tool_module_error(suite, exc)), "fix tool_module")
    return Check(
        "ok",
        "tools",
        f"{counted(len(tools), 'tool')} of tool_registry "
        f"{inflected(len(tools), 'has', 'have')} an implementation",
    )


def _service_recordings(suite: Suite) -> Iterator[Check]:
    """The MCP and model recordings a replay needs exist and parse (``mcp_servers``, gateway)."""
    config = suite.config
    if config.mode != "replay" or not (config.mcp_servers or config.model_gateway):
        return
    from trialrun.running.preflight import (
        as_config_errors,
        read_service_recording,
        service_recordings,
    )

    problems = 0
    checked = 0
    for path in service_recordings(suite):
        checked += 1
        for error in as_config_errors(read_service_recording(path)):
            problems += 1
            yield Check(
                "fail", "recordings", str(error), "record it with `trialrun run --mode record`"
            )
    if not problems:
        yield Check(
            "ok",
            "recordings",
            f"{counted(checked, 'MCP/model recording')} "
            + ("exists and parses" if checked == 1 else "exist and parse"),
        )


def _stale(suite: Suite, now: float) -> Iterator[Check]:
    """Recordings older than ``max_recording_age_days`` or of a model the suite no longer asks
    for (``model_gateway.models``): a warning each, with the command that records its case."""
    config = suite.config
    gateway = config.model_gateway
    if config.max_recording_age_days is None and (gateway is None or not gateway.models):
        return
    from trialrun.running.case_commands import rerecord_command
    from trialrun.running.staleness import stale_recordings

    seen: set[tuple[Path, int]] = set()
    for case in suite.cases:
        for stale in stale_recordings(suite, case, now):
            if (stale.path, stale.line) in seen:  # a cassette several cases share
                continue
            seen.add((stale.path, stale.line))
            yield Check(
                "warn",
                "stale",
                stale.text(display_path(stale.path)),
                f"record it again: {rerecord_command(suite, case)}",
            )
    if not seen:
        yield Check("ok", "stale", "no recording is stale")


def _prices(suite: Suite) -> Iterator[Check]:
    """The gateway's price table parses (`trialrun run` reads it before any agent starts)."""
    settings = suite.config.model_gateway
    if settings is None or settings.prices is None:
        return
    from trialrun.running.model_service import load_suite_prices

    try:
        prices = load_suite_prices(settings, suite.suite_dir)
    except ConfigError as exc:
        errors = exc.errors if isinstance(exc, ConfigErrors) else [exc]
        for error in errors:
            yield Check("fail", "prices", str(error), "fix the price table")
        return
    yield Check(
        "ok",
        "prices",
        f"{counted(len(prices or {}), 'model price')} "
        f"{inflected(len(prices or {}), 'loads', 'load')}",
    )


def _secrets(loaded: dict[Path, Cassette | list[CassetteError]]) -> Iterator[Check]:
    """Redaction must find nothing in a cassette: whatever it would mask is a leaked secret."""
    clean = True
    for path, cassette in loaded.items():
        if isinstance(cassette, list):
            continue  # the cassette check reports it (in replay mode)
        for entry in cassette.recordings():
            _, changed = redact_changed(
                {"args": entry.args, "result": entry.result, "error": entry.error}
            )
            if changed:
                clean = False
                yield Check(
                    "fail",
                    "secrets",
                    f"{display_path(path)}:{entry.line}: recording holds a value redaction masks",
                    "replace the secret with [REDACTED] and rotate it",
                )
    if clean:
        yield Check("ok", "secrets", "redaction finds no secret in the cassettes")


def _baseline(suite: Suite) -> Iterator[Check]:
    from trialrun.artifacts.baseline import load_baseline

    if suite.baseline_path is None:
        yield Check(
            "warn", "baseline", "no baseline_path in suite.yaml", "run `trialrun baseline promote`"
        )
        return
    shown = display_path(suite.baseline_path)
    if not suite.baseline_path.is_file():
        yield Check(
            "warn", "baseline", f"{shown} does not exist", "run `trialrun baseline promote`"
        )
        return
    try:
        document = load_baseline(suite.baseline_path)
    except ConfigError as exc:
        yield Check("fail", "baseline", str(exc), "promote a fresh baseline")
        return
    recorded = {str(case.get("id")) for case in document.get("cases", [])}
    current = {case.config.id for case in suite.cases}
    missing, extra = sorted(current - recorded), sorted(recorded - current)
    if missing:
        yield Check(
            "warn",
            "baseline",
            f"{shown} has no entry for {_case_word(missing)} {', '.join(missing)}",
            "promote a baseline from a run of the whole suite",
        )
    if extra:
        yield Check(
            "warn",
            "baseline",
            f"{shown} holds {'a case' if len(extra) == 1 else 'cases'} the suite no longer has: "
            f"{', '.join(extra)}",
            "promote a baseline from a run of the whole suite",
        )
    if not missing and not extra:
        yield Check("ok", "baseline", f"{shown} covers the suite's {counted(len(current), 'case')}")


def _ci_workflow(suite: Suite) -> Check:
    # Without a git repository the suite directory is the root; `trialrun init` then wrote the
    # workflow into the folder holding the suite (`--path`) or the working directory, so both
    # count too.
    candidates = [suite.root, Path.cwd().resolve()]
    if suite.root == suite.suite_dir:
        candidates.append(suite.suite_dir.parent)
    roots = list(dict.fromkeys(candidates))
    for root in roots:
        workflows = root / ".github" / "workflows"
        names = {_relative(suite.suite_dir, root), _relative(suite.suite_file, root)}
        for file in sorted([*workflows.glob("*.yml"), *workflows.glob("*.yaml")]):
            try:
                text = file.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            if "trialrun run" in text and any(name in text for name in names):
                return Check("ok", "ci", f"{display_path(file)} runs this suite")
    return Check(
        "warn",
        "ci",
        f"no workflow in {display_path(suite.root / '.github' / 'workflows')} runs "
        f"`trialrun run` on {_relative(suite.suite_dir, suite.root)}",
        "run `trialrun init` for a workflow template",
    )


def _relative(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()


def _versions() -> Check:
    parts = [f"python {platform.python_version()}", f"trialrun {__version__}"]
    for package in _PACKAGES:
        try:
            parts.append(f"{package} {metadata.version(package)}")
        except metadata.PackageNotFoundError:
            parts.append(f"{package} missing")
    return Check("ok", "versions", ", ".join(parts))


def replay_note(suite: Suite) -> str:
    """What the probe's replay answered from recordings, and what it left to the network."""
    config = suite.config
    answered = ["tool calls from the cassette"]
    if config.mcp_servers:
        answered.append("MCP servers from their recordings")
    if config.model_gateway is not None:
        answered.append("model calls from the gateway's recordings (model_gateway)")
    answered.append("other HTTP(S) requests through the recording proxy")
    from trialrun.running.network import network_seal

    seal = network_seal(suite, "replay")
    if seal.applied:
        rest = f"any other connection is refused (network {seal.describe()})"
    elif not seal.sealed:
        rest = "network: open: a connection that ignores the proxy variables is not isolated"
    else:
        rest = (
            "this kernel cannot seal the network: a connection that ignores the proxy variables "
            "is not isolated"
        )
    return f"note: replay answered {', '.join(answered)}; {rest}."


def probe(suite: Suite) -> list[Check]:
    """Replay the first case and report what happened; this does start the agent."""
    from trialrun.running.runner import RunOptions, run_case

    if not suite.cases:
        return [Check("warn", "probe", "the suite has no case to replay", "add a case file")]
    case = suite.cases[0]
    result = asyncio.run(run_case(suite, case, RunOptions(mode="replay")))
    calls = len(result.run.tool_calls)
    checks: list[Check] = []
    if result.passed:
        checks.append(
            Check(
                "ok",
                "probe",
                f"case {case.config.id} passed in replay with {counted(calls, 'tool call')}",
            )
        )
    else:
        reason = result.failure_reason or "; ".join(f.message for f in result.check_failures)
        checks.append(
            Check(
                "fail",
                "probe",
                f"case {case.config.id} {result.status} in replay with "
                f"{counted(calls, 'tool call')}: {reason}",
                "run `trialrun run` on this case to see the full report",
            )
        )
    from trialrun.base.results import count_names
    from trialrun.report.console import counted_text

    unused = _unused_by_file(case, result.run.unused_recording_tools)
    if not unused and result.run.unused_recordings:  # a count without names
        unused = {case.cassette_path: [""] * result.run.unused_recordings}
    checks += [
        Check(
            "warn",
            "probe",
            f"{counted(len(names), 'recording')} of {display_path(path)} "
            + ("was" if len(names) == 1 else "were")
            + " not used"
            + (f" ({counted_text(count_names(names))})" if any(names) else ""),
            "re-record the cassette or delete the stale lines",
        )
        for path, names in unused.items()
    ]
    if not unused:
        checks.append(Check("ok", "probe", "every recording of the cassette was used"))
    return checks


def _unused_by_file(case: Case, names: list[str]) -> dict[Path, list[str]]:
    """The unused recordings of a case by the file that holds them (``mcp:``/``model:`` names
    are in the recordings beside the tool cassette)."""
    from trialrun.running.recording_paths import mcp_cassette_path, model_cassette_path

    by_file: dict[Path, list[str]] = {}
    for name in names:
        if name.startswith("mcp:"):
            path = mcp_cassette_path(case, name.removeprefix("mcp:").split("/", 1)[0])
        elif name.startswith("model:"):
            path = model_cassette_path(case)
        else:
            path = case.cassette_path
        by_file.setdefault(path, []).append(name)
    return by_file


def _case_word(ids: list[str]) -> str:
    return "case" if len(ids) == 1 else "cases"
