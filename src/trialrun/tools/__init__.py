"""Tool backends: cassette replay, live Python tools, and the recorder."""

from __future__ import annotations

from trialrun.tools.base import ToolBackend, ToolOutcome
from trialrun.tools.cassette import Cassette, CassetteEntry, ReplayBackend
from trialrun.tools.live import (
    LiveBackend,
    MissingToolError,
    ToolFn,
    ToolModuleError,
    builtin_tools,
    load_tool_module,
    select_tools,
)
from trialrun.tools.recorder import CassetteInUseError, RecordingBackend

__all__ = [
    "Cassette",
    "CassetteEntry",
    "CassetteInUseError",
    "LiveBackend",
    "MissingToolError",
    "RecordingBackend",
    "ReplayBackend",
    "ToolBackend",
    "ToolFn",
    "ToolModuleError",
    "ToolOutcome",
    "builtin_tools",
    "load_tool_module",
    "select_tools",
]
