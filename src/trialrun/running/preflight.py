"""Check the files a run will read before any agent starts; every problem at once, exit 2.

``load_suite`` validates the YAML files; this step reads what they point at for the mode the
run uses, so a corrupt file is an ``error: <file>:<line>: ...`` line before the first case
instead of a failing case (or a crash) in the middle of the run:

* **replay**: every case's cassette, and beside it the recordings of the suite's MCP servers
  (``<stem>.mcp-<server>.jsonl``) and of its model gateway (``<stem>.model.jsonl``), are
  parsed. Every problem of every file is reported (binary bytes, a line that is not JSON or not
  an object, a missing or mistyped field). The parsed tool cassettes, and the tool calls each MCP
  recording holds, are handed to the run, so no cassette is read twice. A *missing* recording
  is not a load error: as in RunLedger, the case fails with ``cassette_error`` when it runs and
  the other cases still run (a new case committed before its recording must not block the
  suite). An empty cassette is fine too.
* **record**: cassettes are about to be rewritten, so a corrupt one does not block the run and
  is not read. The ``tool_module`` is imported and every ``tool_registry`` name must have an
  implementation, as in live mode.
* **live**: the ``tool_module`` check only.

In every mode the model gateway's price table (``model_gateway.prices``) is read, which the
gateway otherwise read as the run started, after its run directory existed.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trialrun.base.words import counted
from trialrun.config.paths import display_path
from trialrun.errors import CassetteError, ConfigError, ConfigErrors, TrialrunError

if TYPE_CHECKING:
    from trialrun.config import Suite
    from trialrun.config.models import Mode
    from trialrun.gateway import Price
    from trialrun.running.mcp_service import RecordedCalls
    from trialrun.tools.cassette import Cassette

MAX_PROBLEMS_PER_FILE = 10
"""A binary file has a problem on nearly every line: the first few say enough."""


@dataclass(frozen=True)
class Preflight:
    """What the checks read, for the run to reuse."""

    cassettes: Mapping[Path, Cassette] = field(default_factory=dict)
    """Tool cassettes parsed in replay, by resolved path (missing files are absent)."""
    mcp_calls: Mapping[Path, RecordedCalls] = field(default_factory=dict)
    """The recorded tool calls of each MCP recording parsed in replay, by path: what the run
    names the unused ones from (the proxies read the files themselves)."""
    tools: Mapping[str, Any] | None = None
    """The tool implementations selected for record and live modes."""
    prices: dict[str, Price] | None = None
    """The model gateway's price table (``model_gateway.prices``), in every mode."""


def preflight(suite: Suite, mode: Mode) -> Preflight:
    """Read and check the suite's files for ``mode``; raise ``ConfigErrors`` listing them all."""
    errors: list[ConfigError] = []
    cassettes: dict[Path, Cassette] = {}
    mcp_calls: dict[Path, RecordedCalls] = {}
    tools: Mapping[str, Any] | None = None
    errors += recordings_outside(suite)
    if mode != "live":
        errors += http_recordings_outside(suite)
    if errors:  # replay would read them, record would write through them
        raise ConfigErrors(errors)
    if mode == "replay":
        cassettes, problems = read_tool_cassettes(suite)
        errors += problems
        mcp_calls, problems = read_service_recordings(suite)
        errors += problems
        errors += read_http_recordings(suite)
    else:
        try:
            tools = select_suite_tools(suite)
        except TrialrunError as exc:
            errors.append(tool_module_error(suite, exc))
    prices: dict[str, Price] | None = None
    if suite.config.model_gateway is not None:
        from trialrun.running.model_service import load_suite_prices

        try:
            prices = load_suite_prices(suite.config.model_gateway, suite.suite_dir)
        except ConfigError as exc:
            errors.append(exc)
    if errors:
        raise ConfigErrors(errors)
    return Preflight(cassettes=cassettes, mcp_calls=mcp_calls, tools=tools, prices=prices)


def read_tool_cassettes(suite: Suite) -> tuple[dict[Path, Cassette], list[ConfigError]]:
    """Every case's cassette parsed once (cases may share one); problems of existing files."""
    from trialrun.tools.cassette import Cassette

    loaded: dict[Path, Cassette] = {}
    errors: list[ConfigError] = []
    for path in dict.fromkeys(case.cassette_path for case in suite.cases):
        if not path.exists():
            continue  # the case fails as cassette_error when it runs (RunLedger's behaviour)
        cassette, problems = Cassette.read(path)
        errors += as_config_errors(problems)
        if cassette is not None and not problems:
            loaded[path] = cassette
    return loaded, errors


def read_service_recordings(
    suite: Suite,
) -> tuple[dict[Path, RecordedCalls], list[ConfigError]]:
    """The recorded calls of each existing MCP recording; problems of the MCP and model ones."""
    if not suite.config.mcp_servers and suite.config.model_gateway is None:
        return {}, []  # nothing to read: keep the proxy's modules out of a plain run
    from trialrun.mcp_proxy import read_cassette
    from trialrun.running.mcp_service import recorded_calls

    errors: list[ConfigError] = []
    mcp_calls: dict[Path, RecordedCalls] = {}
    for path in dict.fromkeys(service_recordings(suite)):
        if not path.exists():
            continue
        if path.name.endswith(".model.jsonl"):
            errors += as_config_errors(read_service_recording(path))
            continue
        cassette, problems = read_cassette(path)
        errors += as_config_errors(problems)
        if cassette is not None and not problems:
            mcp_calls[path] = recorded_calls(cassette)
    return mcp_calls, errors


def recordings_outside(suite: Suite) -> list[ConfigError]:
    """The MCP and model recordings beside the cassettes that are symlinks out of the suite's
    boundary (the cassettes themselves were checked where the suite names them)."""
    if not suite.config.mcp_servers and suite.config.model_gateway is None:
        return []  # no recordings: keep the services' modules out of a plain run
    return _outside(suite, dict.fromkeys(service_recordings(suite)), os.path.lexists)


def http_recordings(suite: Suite) -> Iterator[Path]:
    """The HTTP recorder's recordings (``<stem>.http.jsonl``), existing or not."""
    from trialrun.running.recording_paths import http_cassette_path

    return iter(dict.fromkeys(http_cassette_path(case) for case in suite.cases))


def http_recordings_outside(suite: Suite) -> list[ConfigError]:
    """HTTP recordings that are symbolic links out of the suite's boundary."""
    return _outside(suite, http_recordings(suite), os.path.islink)


def _outside(
    suite: Suite, recordings: Iterable[Path], present: Callable[[Path], bool]
) -> list[ConfigError]:
    """The ``present`` recordings that resolve outside the suite's boundary."""
    from trialrun.config.paths import SuitePaths

    paths = SuitePaths.for_suite_dir(suite.suite_dir)
    return [
        ConfigError(
            f"a symbolic link that resolves outside {paths.boundary} ({paths.root}); a suite "
            "reads and writes no recording outside it",
            file=display_path(path),
        )
        for path in recordings
        if present(path) and not paths.is_inside(path)
    ]


def read_http_recordings(suite: Suite) -> list[ConfigError]:
    """The first problem of each existing HTTP recording (a case without one has none)."""
    existing = [path for path in http_recordings(suite) if path.exists()]
    if not existing:
        return []
    from trialrun.httprec.cassette import load_cassette

    problems: list[CassetteError] = []
    for path in existing:
        try:
            load_cassette(path)
        except CassetteError as exc:
            problems.append(exc)
    return as_config_errors(problems)


def service_recordings(suite: Suite) -> Iterator[Path]:
    """The MCP (``<stem>.mcp-<server>.jsonl``) and model (``<stem>.model.jsonl``) recordings."""
    from trialrun.running.recording_paths import mcp_cassette_path, model_cassette_path

    config = suite.config
    for case in suite.cases:
        for name in config.mcp_servers:
            yield mcp_cassette_path(case, name)
        if config.model_gateway is not None:
            yield model_cassette_path(case)


def read_service_recording(path: Path) -> list[CassetteError]:
    """Every problem of one MCP or model recording (a missing file is one problem)."""
    if path.name.endswith(".model.jsonl"):
        from trialrun.gateway.cassette import check_cassette_file

        try:
            return check_cassette_file(path)[1]
        except CassetteError as exc:
            return [exc]
    from trialrun.mcp_proxy import read_cassette

    return read_cassette(path)[1]


def select_suite_tools(suite: Suite) -> Mapping[str, Any]:
    """The implementations of the suite's tools (record and live modes); raises TrialrunError."""
    from trialrun.tools.live import builtin_tools, load_tool_module, select_tools

    module = suite.config.tool_module
    available = load_tool_module(module, suite.tool_module_dir) if module else builtin_tools()
    registry = suite.config.tool_registry
    if suite.config.agent_channel == "fd":
        # SDK agents hold their tools in-process: only the ones given here run here.
        registry = [name for name in registry if name in available]
    return select_tools(available, registry)


def as_config_errors(problems: list[CassetteError]) -> list[ConfigError]:
    """Cassette problems as load errors: paths shown as the loader shows them, at most a few."""
    shown = [
        ConfigError(problem.message, file=display_path(Path(problem.file)), line=problem.line)
        for problem in problems[:MAX_PROBLEMS_PER_FILE]
    ]
    if len(problems) > MAX_PROBLEMS_PER_FILE:
        last = shown[-1]
        more = len(problems) - MAX_PROBLEMS_PER_FILE
        message = f"{counted(more, 'more problem')} after this line not shown"
        shown.append(ConfigError(message, file=last.file, line=last.line))
    return shown


def tool_module_error(suite: Suite, exc: TrialrunError) -> ConfigError:
    """The problem at the suite file's ``tool_module`` (or ``tool_registry``) line."""
    from trialrun.config.yamlload import load_yaml_file

    key = "tool_module" if isinstance(exc, ConfigError) else "tool_registry"
    message = exc.message if isinstance(exc, ConfigError) else str(exc)
    shown = display_path(suite.suite_file)
    try:
        line = load_yaml_file(suite.suite_file, display=shown).line_of((key,))
    except ConfigError:
        line = None  # the file changed since it loaded; the message still names the module
    return ConfigError(message, file=shown, line=line, key=key)
