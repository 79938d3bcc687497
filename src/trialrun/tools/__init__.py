"""Tool backends: cassette replay, live Python tools, and the recorder.

The names below are imported on first use: a replayed run loads the cassette backend only, not
the live and recording backends it never calls.
"""

from __future__ import annotations

from trialrun.base.lazyexport import lazy_getattr

# Not typing.TYPE_CHECKING: the CLI's start-up would import typing only for this flag, and
# mypy takes any name TYPE_CHECKING as true.
TYPE_CHECKING = False
if TYPE_CHECKING:
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

_EXPORTS = {
    "Cassette": "trialrun.tools.cassette",
    "CassetteEntry": "trialrun.tools.cassette",
    "CassetteInUseError": "trialrun.tools.recorder",
    "LiveBackend": "trialrun.tools.live",
    "MissingToolError": "trialrun.tools.live",
    "RecordingBackend": "trialrun.tools.recorder",
    "ReplayBackend": "trialrun.tools.cassette",
    "ToolBackend": "trialrun.tools.base",
    "ToolFn": "trialrun.tools.live",
    "ToolModuleError": "trialrun.tools.live",
    "ToolOutcome": "trialrun.tools.base",
    "builtin_tools": "trialrun.tools.live",
    "load_tool_module": "trialrun.tools.live",
    "select_tools": "trialrun.tools.live",
}
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
__getattr__ = lazy_getattr(globals(), _EXPORTS)
