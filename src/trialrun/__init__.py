"""trialrun: deterministic CI and trustworthy evaluation for tool-using AI agents.

The public API is what ``__all__`` lists; everything else is private. Names are imported on first
use, so ``import trialrun`` (and the CLI's start-up) pays for none of the heavy dependencies.
"""

from __future__ import annotations

from trialrun.base.lazyexport import lazy_getattr

# Not typing.TYPE_CHECKING: the CLI's start-up would import typing only for this flag, and
# mypy takes any name TYPE_CHECKING as true.
TYPE_CHECKING = False

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    # loading suites
    "load_suite": "trialrun.config",
    "Suite": "trialrun.config",
    "Case": "trialrun.config",
    # running them
    "RunOptions": "trialrun.running.runner",
    "RunProgress": "trialrun.running.runner",
    "run_suite": "trialrun.running.runner",
    "run_case": "trialrun.running.runner",
    # what a run produced
    "AgentRun": "trialrun.base.results",
    "CaseResult": "trialrun.base.results",
    "CheckFailure": "trialrun.base.results",
    "Failure": "trialrun.base.results",
    "RunResult": "trialrun.base.results",
    "ToolCall": "trialrun.base.results",
    "Usage": "trialrun.base.results",
    # writing assertion plugins
    "AssertionParamError": "trialrun.base.assertion_api",
    "AssertionType": "trialrun.base.assertion_api",
    "CheckSubject": "trialrun.base.assertion_api",
    "CompileContext": "trialrun.base.assertion_api",
    "CompiledAssertion": "trialrun.base.assertion_api",
    "Param": "trialrun.base.assertion_api",
    "check_params": "trialrun.base.assertion_api",
    "register": "trialrun.base.assertion_api",
    # errors
    "TrialrunError": "trialrun.errors",
    "ConfigError": "trialrun.errors",
    "ConfigErrors": "trialrun.errors",
    "ProtocolError": "trialrun.errors",
    "CassetteError": "trialrun.errors",
    "CassetteMismatch": "trialrun.errors",
    "ReceiptError": "trialrun.errors",
    "JudgeError": "trialrun.errors",
}

__all__ = [
    "AgentRun",
    "AssertionParamError",
    "AssertionType",
    "Case",
    "CaseResult",
    "CassetteError",
    "CassetteMismatch",
    "CheckFailure",
    "CheckSubject",
    "CompileContext",
    "CompiledAssertion",
    "ConfigError",
    "ConfigErrors",
    "Failure",
    "JudgeError",
    "Param",
    "ProtocolError",
    "ReceiptError",
    "RunOptions",
    "RunProgress",
    "RunResult",
    "Suite",
    "ToolCall",
    "TrialrunError",
    "Usage",
    "__version__",
    "check_params",
    "load_suite",
    "register",
    "run_case",
    "run_suite",
]


__getattr__ = lazy_getattr(globals(), _EXPORTS)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:
    from trialrun.base.assertion_api import (
        AssertionParamError,
        AssertionType,
        CheckSubject,
        CompileContext,
        CompiledAssertion,
        Param,
        check_params,
        register,
    )
    from trialrun.base.results import (
        AgentRun,
        CaseResult,
        CheckFailure,
        Failure,
        RunResult,
        ToolCall,
        Usage,
    )
    from trialrun.config import Case, Suite, load_suite
    from trialrun.errors import (
        CassetteError,
        CassetteMismatch,
        ConfigError,
        ConfigErrors,
        JudgeError,
        ProtocolError,
        ReceiptError,
        TrialrunError,
    )
    from trialrun.running.runner import RunOptions, RunProgress, run_case, run_suite
