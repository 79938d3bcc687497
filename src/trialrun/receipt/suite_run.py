"""The receipt of a suite run: one Run Receipt v0 per ``trialrun run``.

``run_start`` names the suite (the goal) and the command line; each finished case adds a custom
``case_start``, its standard ``tool_call`` events (with a ``case`` member), a ``usage`` event when
the agent reported any, and a custom ``case_end`` carrying the verdict and the SHA-256 of the
case's lines exactly as written to run.jsonl; ``run_end`` carries the totals. Cases are recorded as
they finish, in case order, so ``-j`` does not change the receipt. docs/receipts.md documents the
custom event types.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trialrun import __version__
from trialrun.base import canonjson
from trialrun.base.gitinfo import git_state
from trialrun.base.results import CaseResult, ToolCall
from trialrun.receipt.args_summary import summarize_args

if TYPE_CHECKING:
    from trialrun.receipt.signing import Ed25519Signer
    from trialrun.receipt.writer import EncodedData, ReceiptWriter


def _tool_call_data(
    case: str, calls: Iterable[ToolCall], attempt: int = 1
) -> Iterator[EncodedData | dict[str, Any]]:
    """Each call's ``tool_call`` data, with its canonical JSON written here when its members are
    of the usual types: a case has thousands, and the writer's own encoding walks each again."""
    from trialrun.receipt.writer import EncodedData

    case_json = canonjson.dumps(case)
    names: dict[str, str] = {}
    for call in calls:
        summary, redacted = summarize_args(call.args)
        name, ok, duration = call.name, call.ok, round(call.duration_ms, 3)
        data = {
            "attempt": attempt,
            "case": case,
            "name": name,
            "argsSummary": summary,
            "redacted": redacted,
            "durationMs": duration,
            "ok": ok,
        }
        if (
            name.__class__ is not str
            or ok.__class__ is not bool
            or duration.__class__ is not float
            or not math.isfinite(duration)
        ):
            yield data  # the writer's own encoding, which says what is wrong with it if anything
            continue
        name_json = names.get(name)
        if name_json is None:
            name_json = names[name] = canonjson.dumps(name)
        # Keys in canonical order; a float that is not integral has its repr as canonical text.
        duration_json = (
            repr(duration)
            if 1e-4 <= abs(duration) < 1e16 and not duration.is_integer()
            else canonjson.dumps(duration)
        )
        yield EncodedData(
            f'{{"argsSummary":{canonjson.dumps(summary)},"attempt":{attempt},"case":{case_json},'
            f'"durationMs":{duration_json},"name":{name_json},"ok":{"true" if ok else "false"},'
            f'"redacted":{"true" if redacted else "false"}}}',
            data,
        )


def _emit_calls(
    writer: ReceiptWriter, case: str, calls: Sequence[ToolCall], attempt: int | None = None
) -> None:
    """A case's first events: ``case_start``, then one ``tool_call`` per call. ``attempt``:
    which run of a case run more than once (``--repeat``, ``--retries``) they belong to."""
    writer.emit("case_start", {"case": case, **_attempt_of(attempt)})
    writer.emit_each("tool_call", _tool_call_data(case, calls, attempt or 1))


def _attempt_of(attempt: int | None) -> dict[str, Any]:
    """``{"attempt": n}`` for a run of a case run more than once; nothing for a case run once."""
    return {} if attempt is None else {"attempt": attempt}


class SuiteReceipt:
    """Streams one suite run into ``receipt.jsonl``; a crash leaves it truncated, never forged."""

    def __init__(
        self,
        path: Path,
        *,
        suite_name: str,
        command_line: str,
        repository: Path,
        signer: Ed25519Signer | None = None,
        agent_env: Mapping[str, Sequence[str]] | None = None,
        network: dict[str, Any] | None = None,
    ) -> None:
        """``agent_env``: the names of the variables trialrun sets for the agents (``set``,
        ``placeholders``), never their values; run_start carries it as ``agentEnv``."""
        from trialrun.receipt.writer import ReceiptWriter

        self._writer: ReceiptWriter = ReceiptWriter(path, signer=signer)
        head, branch = git_state(repository)
        start: dict[str, Any] = {
            "goal": suite_name,
            "verifyCommand": command_line,
            "repoHead": head,
            "branch": branch,
            "tool": {"name": "trialrun", "version": __version__},
        }
        if agent_env is not None:
            start["agentEnv"] = {part: list(names) for part, names in agent_env.items()}
        if network is not None:
            start["network"] = network
        self._writer.emit("run_start", start)

    def _emit_usage(
        self,
        case: str,
        tokens_in: int,
        tokens_out: int,
        cost_usd: float,
        model: str | None,
        *,
        source: str | None = None,
        attempt: int = 1,
    ) -> None:
        data: dict[str, Any] = {
            "attempt": attempt,
            "case": case,
            "inputTokens": tokens_in,
            "outputTokens": tokens_out,
            "cacheReadTokens": 0,
            "cacheWriteTokens": 0,
            "totalTokens": tokens_in + tokens_out,
            "costUsd": cost_usd,
        }
        if model is not None:
            data["model"] = model
        if source is not None:
            data["source"] = source
        self._writer.emit("usage", data)

    def abandon(self) -> None:
        """Stop where the receipt stands, without ``run_end``: the run's files could not all
        be written, so it reads as truncated."""
        self._writer.abandon()

    def record_case(
        self, result: CaseResult, *, write_trace: Callable[[], str], attempt: int | None = None
    ) -> None:
        """Record a judged case. ``write_trace`` writes its lines to run.jsonl and returns their
        SHA-256 (``RunDirectory.write_case_events``), which ``case_end`` carries. A case run
        more than once is recorded once per run, each with its ``attempt`` number."""
        with self._writer.batch():  # one write for the case's events, however many
            _emit_calls(self._writer, result.case_id, result.run.tool_calls, attempt)
            self._end_case(result, write_trace(), attempt)

    def _end_case(self, result: CaseResult, trace_sha256: str, attempt: int | None) -> None:
        """The case's events after its tool calls: usage, then ``case_end``."""
        run = result.run
        case = result.case_id
        for model_call in run.model_calls:
            self._emit_usage(
                case,
                model_call.tokens_in or 0,
                model_call.tokens_out or 0,
                model_call.cost_usd or 0.0,
                model_call.model,
                source="model_gateway",
                attempt=attempt or 1,
            )
        usage = run.usage
        if (
            usage.tokens_in is not None
            or usage.tokens_out is not None
            or usage.cost_usd is not None
        ):
            # What the agent reported itself: the totals minus what the gateway already showed.
            tokens_in = (usage.tokens_in or 0) - sum(c.tokens_in or 0 for c in run.model_calls)
            tokens_out = (usage.tokens_out or 0) - sum(c.tokens_out or 0 for c in run.model_calls)
            cost = (usage.cost_usd or 0.0) - sum(c.cost_usd or 0.0 for c in run.model_calls)
            if not run.model_calls or tokens_in > 0 or tokens_out > 0 or cost > 1e-12:
                self._emit_usage(
                    case, tokens_in, tokens_out, max(cost, 0.0), usage.model, attempt=attempt or 1
                )
        self._writer.emit(
            "case_end",
            {
                "case": case,
                **_attempt_of(attempt),
                "status": result.status,
                "failureKind": result.failure.kind if result.failure else None,
                "wallMs": run.wall_ms,
                "startupMs": run.startup_ms,
                "traceSha256": trace_sha256,
            },
        )

    def finish(self, results: Sequence[CaseResult], *, verified: bool) -> None:
        """Seal the receipt. An interrupted run never calls this: its receipt reads as
        truncated."""
        # Every run of a case run more than once is in the receipt, and in its totals.
        runs = [run for r in results for run in (r.runs.runs if r.runs is not None else [r])]
        tokens = sum((r.run.usage.tokens_in or 0) + (r.run.usage.tokens_out or 0) for r in runs)
        cost = sum(r.run.usage.cost_usd or 0.0 for r in runs)
        flaky = sum(1 for r in results if r.status == "flaky")
        self._writer.close(
            {
                "stopReason": "completed",
                "verified": verified,
                "totals": {
                    "attempts": len(runs),
                    "totalTokens": tokens,
                    "costUsd": cost,
                    "filesChanged": 0,
                },
                "cases": {
                    "total": len(results),
                    "passed": sum(1 for r in results if r.status == "pass"),
                    "failed": sum(1 for r in results if r.status == "fail"),
                    "errors": sum(1 for r in results if r.status == "error"),
                    **({"flaky": flaky} if flaky else {}),
                },
            }
        )
