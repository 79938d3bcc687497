"""The ``trialrun attempt`` loop: a baseline verify, then attempts with keep-or-rollback.

For each attempt the workspace is snapshotted, the agent command runs in it, the verify command
judges the result, and the outcome decides whether the change stays:

* ``verified``: the verifier passed; stop.
* ``improved``: a lower failureScore than the best so far; keep, and it is the new best.
* ``unchanged``: the same failureScore as the best; keep (the agent may build on it).
* ``worse``: a higher failureScore; restore the snapshot and emit ``rollback``.
* ``agent_error``: the agent exited non-zero, could not start or timed out; restore the snapshot
  without running the verifier (the restored state's score is already known).

Everything is written as it happens into one Run Receipt v0 (``ReceiptWriter`` redacts and
chains it). After the last attempt one ``file_change`` per file that differs from the start, then
``run_end``. An interruption (KeyboardInterrupt: Ctrl-C, or SIGTERM turned into one by the CLI)
kills the running command's process group, restores the last kept state and ends the receipt with
stopReason ``interrupted``; any other error restores it too before it propagates.

The snapshots live on disk in the workspace's recovery directory (``trialrun.attempt.recovery``),
claimed before anything else happens and named on stderr and in ``run_start`` (``snapshotDir``)
before the agent first runs. Whenever the workspace may differ from its last kept state (during
the baseline verify, an attempt, a rollback) the directory names the snapshot that holds that
state, so a killed run can be undone with ``trialrun attempt recover``; when the run ends with
the workspace in a kept state, the directory is removed.
"""

from __future__ import annotations

import os
import signal
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from trialrun import __version__
from trialrun.attempt.process import CommandResult, run_shell
from trialrun.attempt.recovery import RecoveryDir, attempts_home, recover_command
from trialrun.attempt.score import failure_score
from trialrun.attempt.snapshot import FileChange, Snapshot, SnapshotError, Workspace
from trialrun.attempt.transcript import parse_stream_json, parse_usage_file, usage_from_transcript
from trialrun.base import leftovers
from trialrun.base.fsutil import atomic_write_text
from trialrun.base.gitinfo import git_state
from trialrun.base.redact import redact_text
from trialrun.errors import TrialrunError
from trialrun.receipt.writer import ReceiptWriter

if TYPE_CHECKING:
    from trialrun.receipt.signing import Ed25519Signer

__all__ = ["AttemptInputError", "AttemptOptions", "AttemptRecord", "AttemptReport", "run_attempts"]

OUTPUT_CHARS_MAX: Final = 4000
"""verifier_result.output keeps the END of the output (where runners print their summary)."""

Progress = Callable[[str], None]


class AttemptInputError(TrialrunError):
    """The harness cannot start: a missing workspace, an empty goal, a bad receipt path..."""


@dataclass(frozen=True)
class AttemptOptions:
    goal: str
    verify_command: str
    agent_command: str
    workspace: Path
    receipt_path: Path
    attempts: int = 3
    agent_timeout_s: float = 600.0
    verify_timeout_s: float | None = 600.0
    signer: Ed25519Signer | None = None
    grace_s: float = 2.0
    """Between SIGTERM and SIGKILL when a command's process group is stopped."""


@dataclass(frozen=True)
class AttemptRecord:
    attempt: int
    outcome: str
    failure_score: int | None
    """None for agent_error (the verifier did not run)."""
    rolled_back: bool


@dataclass(frozen=True)
class AttemptReport:
    stop_reason: str
    verified: bool
    baseline_score: int | None
    attempts: list[AttemptRecord]
    files_changed: int
    total_tokens: int
    cost_usd: float
    receipt_path: Path


@dataclass
class _RunState:
    best_score: int = 0
    total_tokens: int = 0
    cost_usd: float = 0.0
    records: list[AttemptRecord] = field(default_factory=list)


def run_attempts(
    options: AttemptOptions, *, progress: Progress = lambda _line: None
) -> AttemptReport:
    """Run the whole loop and write the receipt. Raises AttemptInputError for bad options."""
    workspace_root = _check_options(options)
    # Neither the receipt nor the snapshots themselves (a TRIALRUN_HOME inside the workspace)
    # may be saved, diffed or rolled back.
    exclude = [
        *_inside(options.receipt_path, workspace_root),
        *_inside(attempts_home(), workspace_root),
    ]
    # Claimed first: a workspace that a stopped run may have left half rolled back is refused
    # before anything (a receipt, a verify run) touches it.
    with RecoveryDir.claim(workspace_root, exclude=exclude, receipt=options.receipt_path) as saved:
        writer = ReceiptWriter(options.receipt_path, signer=options.signer)
        progress(
            f"snapshots: {saved.path} (if trialrun is killed, restore the workspace with: "
            f"{recover_command(workspace_root)})"
        )
        workspace = Workspace(workspace_root, exclude=exclude)
        with (
            writer,
            tempfile.TemporaryDirectory(
                prefix="trialrun-attempt-", dir=leftovers.scratch_root()
            ) as scratch_dir,
        ):
            scratch = Path(scratch_dir)
            run = _AttemptRun(options, workspace_root, workspace, saved, writer, scratch, progress)
            return run.execute()


class _AttemptRun:
    def __init__(
        self,
        options: AttemptOptions,
        root: Path,
        workspace: Workspace,
        saved: RecoveryDir,
        writer: ReceiptWriter,
        scratch: Path,
        progress: Progress,
    ) -> None:
        self.options = options
        self.root = root
        self.workspace = workspace
        self.saved = saved
        self.writer = writer
        self.scratch = scratch
        self.progress = progress
        self.verify_output_file = scratch / "verify-output.txt"
        atomic_write_text(self.verify_output_file, "")
        self.state = _RunState()

    def execute(self) -> AttemptReport:
        initial = self.saved.snapshot(self.workspace, "initial")
        # What an interruption restores: the start of the current attempt (None between them).
        kept: Snapshot | None = initial
        stop_reason, verified, baseline_score = "attempts_exhausted", False, None
        try:
            head, branch = git_state(self.root)
            self.writer.emit(
                "run_start",
                {
                    "goal": self.options.goal,
                    "verifyCommand": self.options.verify_command,
                    "repoHead": head,
                    "branch": branch,
                    "tool": {"name": "trialrun", "version": __version__},
                    "snapshotDir": str(self.saved.path),
                },
            )
            baseline_score, verified = self._verify(0)
            self.state.best_score = baseline_score
            # The baseline verify's own writes stay, as before: from here the workspace is kept.
            self.saved.point_to(None)
            kept = None
            for number in range(1, self.options.attempts + 1):
                if verified:
                    break
                kept = self.saved.snapshot(self.workspace, f"attempt-{number}")
                verified = self._attempt(number, kept)
                self.saved.point_to(None)
                kept.discard()
                kept = None
            stop_reason = "verified" if verified else "attempts_exhausted"
        except KeyboardInterrupt:
            with _ignoring_interrupts():
                self.progress("interrupted: restoring the workspace to the last kept state")
                self._restore_kept(kept, initial)
                stop_reason, verified = "interrupted", False
        except BaseException:
            # The workspace may hold half an attempt: put the kept state back before the error
            # leaves (the snapshot stays on disk if even that fails).
            with _ignoring_interrupts():
                self._restore_kept(kept, initial)
            raise
        with _ignoring_interrupts():
            try:
                changes = self.workspace.changes_since(initial)
                for change in changes:
                    self.writer.emit("file_change", self._file_change_data(change))
                self.writer.close(
                    {
                        "stopReason": stop_reason,
                        "verified": verified,
                        "totals": {
                            "attempts": len(self.state.records),
                            "totalTokens": self.state.total_tokens,
                            "costUsd": round(self.state.cost_usd, 6),
                            "filesChanged": len(changes),
                        },
                    }
                )
            finally:
                initial.discard()
        return AttemptReport(
            stop_reason=stop_reason,
            verified=verified,
            baseline_score=baseline_score,
            attempts=list(self.state.records),
            files_changed=len(changes),
            total_tokens=self.state.total_tokens,
            cost_usd=self.state.cost_usd,
            receipt_path=self.writer.path,
        )

    def _restore_kept(self, kept: Snapshot | None, initial: Snapshot) -> None:
        if kept is not None:
            self._restore(kept)
            if kept is not initial:
                kept.discard()
        self.saved.point_to(None)

    def _restore(self, snapshot: Snapshot) -> None:
        """Roll the workspace back; a failure names the snapshot and how to finish the job."""
        try:
            self.workspace.restore(snapshot)
        except SnapshotError as exc:
            raise SnapshotError(
                f"{exc}; the workspace may be half rolled back: its last kept state stays in "
                f"{snapshot.store}; once the cause is fixed, run: {recover_command(self.root)}"
            ) from exc

    def _attempt(self, number: int, before: Snapshot) -> bool:
        """One attempt from attempt_start to attempt_end; True when the verifier passed."""
        self.writer.emit("attempt_start", {"attempt": number})
        usage_file = self.scratch / f"usage-{number}.jsonl"
        atomic_write_text(usage_file, "")
        result = self._run_agent(number, usage_file)
        self._record_transcript(number, result, usage_file)
        if not result.succeeded:
            reason = result.failure_reason(self.options.agent_timeout_s)
            self._restore(before)
            self.writer.emit("rollback", {"attempt": number, "reason": reason})
            return self._end(number, "agent_error", None, rolled_back=True, note=reason)
        score, passed = self._verify(number)
        best = self.state.best_score
        if passed:
            return self._end(number, "verified", score, rolled_back=False)
        if score < best:
            self.state.best_score = score
            return self._end(number, "improved", score, rolled_back=False)
        if score == best:
            return self._end(number, "unchanged", score, rolled_back=False)
        self._restore(before)
        reason = f"failureScore rose from {best} to {score}"
        self.writer.emit("rollback", {"attempt": number, "reason": reason})
        return self._end(number, "worse", score, rolled_back=True, note=reason)

    def _end(
        self, number: int, outcome: str, score: int | None, *, rolled_back: bool, note: str = ""
    ) -> bool:
        self.writer.emit(
            "attempt_end", {"attempt": number, "outcome": outcome, "rolledBack": rolled_back}
        )
        self.state.records.append(AttemptRecord(number, outcome, score, rolled_back))
        detail = f" (failureScore {score})" if score is not None else ""
        detail += ", rolled back" if rolled_back else ""
        self.progress(f"attempt {number}: {outcome}{detail}" + (f": {note}" if note else ""))
        return outcome == "verified"

    def _run_agent(self, number: int, usage_file: Path) -> CommandResult:
        env = dict(os.environ)
        env.update(
            {
                "TRIALRUN_GOAL": self.options.goal,
                "TRIALRUN_ATTEMPT": str(number),
                "TRIALRUN_VERIFY_OUTPUT": str(self.verify_output_file),
                "TRIALRUN_USAGE_FILE": str(usage_file),
            }
        )
        self.progress(f"attempt {number}: running the agent")
        try:
            return run_shell(
                self.options.agent_command,
                cwd=self.root,
                env=env,
                timeout_s=self.options.agent_timeout_s,
                merge_stderr=False,
                grace_s=self.options.grace_s,
            )
        except OSError as exc:  # bash itself could not start: an agent_error, not a crash
            return CommandResult(
                exit_code=127, timed_out=False, duration_ms=0.0, stderr_tail=str(exc)
            )

    def _record_transcript(self, number: int, result: CommandResult, usage_file: Path) -> None:
        for use in parse_stream_json(result.lines):
            self.writer.emit(
                "tool_call",
                {
                    "attempt": number,
                    "name": use.name,
                    "argsSummary": use.args_summary,
                    "redacted": use.redacted,
                    "durationMs": use.duration_ms,
                    "ok": use.ok,
                },
            )
        reported = usage_from_transcript(result.lines)
        from_file = parse_usage_file(usage_file)
        for problem in from_file.problems:
            self.progress(f"attempt {number}: ignored a TRIALRUN_USAGE_FILE {problem}")
        for usage in [*([reported] if reported else []), *from_file]:
            data = {**usage, "attempt": number}
            self.writer.emit("usage", data)
            self.state.total_tokens += _int_member(data, "totalTokens")
            self.state.cost_usd += _number_member(data, "costUsd")

    def _verify(self, attempt: int) -> tuple[int, bool]:
        """Run the verifier, emit verifier_result; (failureScore, passed)."""
        try:
            result = run_shell(
                self.options.verify_command,
                cwd=self.root,
                env=os.environ,
                timeout_s=self.options.verify_timeout_s,
                merge_stderr=True,
                grace_s=self.options.grace_s,
            )
        except OSError as exc:
            raise AttemptInputError(f"cannot start the verify command with bash: {exc}") from exc
        output = result.output
        passed = result.succeeded
        score = failure_score(output, result.exit_code, passed)
        atomic_write_text(self.verify_output_file, output)
        data: dict[str, Any] = {
            "attempt": attempt,
            "command": self.options.verify_command,
            "exitCode": result.exit_code,
            "passed": passed,
            "output": trim_output(redact_text(output)),
            "failureScore": score,
            "durationMs": result.duration_ms,
            "timedOut": result.timed_out,
        }
        self.writer.emit("verifier_result", data)
        label = "baseline" if attempt == 0 else f"attempt {attempt}"
        verdict = "passed" if passed else f"failed, failureScore {score}"
        self.progress(f"{label}: verifier {verdict}" + (" (timed out)" if result.timed_out else ""))
        return score, passed

    def _file_change_data(self, change: FileChange) -> dict[str, Any]:
        data = change.receipt_data()
        data["binary"] = change.binary
        if change.diff is not None:
            data["diff"] = redact_text(change.diff)
        return data


def trim_output(text: str, limit: int = OUTPUT_CHARS_MAX) -> str:
    """The last ``limit`` characters, marked when cut."""
    if len(text) <= limit:
        return text
    return f"[... {len(text) - limit} earlier characters cut]\n" + text[-limit:]


def _check_options(options: AttemptOptions) -> Path:
    if not options.goal.strip():
        raise AttemptInputError("--goal must not be empty: say what the agent should achieve")
    for name, command in (("--verify", options.verify_command), ("--agent", options.agent_command)):
        if not command.strip():
            raise AttemptInputError(f"{name} must be a non-empty shell command")
    if options.attempts < 1:
        raise AttemptInputError(f"--attempts must be at least 1, found {options.attempts}")
    root = options.workspace.resolve()
    if not root.is_dir():
        raise AttemptInputError(f"{options.workspace}: the workspace is not an existing directory")
    return root


def _inside(path: Path, root: Path) -> list[str]:
    """``[path relative to root]`` when ``path`` lies inside ``root``, else ``[]``.

    The receipt grows while the agent works: inside the workspace (the default
    ``trialrun_out/attempt/...`` when the workspace is ``.``) it must be neither a file change
    nor rolled back, so the snapshots leave it alone.
    """
    resolved = path.parent.resolve() / path.name
    if not resolved.is_relative_to(root):
        return []
    return [resolved.relative_to(root).as_posix()]


def _int_member(data: dict[str, Any], key: str) -> int:
    value = data.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _number_member(data: dict[str, Any], key: str) -> float:
    value = data.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


@contextmanager
def _ignoring_interrupts() -> Iterator[None]:
    """Let the restore and run_end finish even if Ctrl-C is pressed again meanwhile."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {
        signum: signal.signal(signum, signal.SIG_IGN) for signum in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
