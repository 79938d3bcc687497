"""``trialrun run SUITE``: prepare the run, run the cases, write every artifact.

``prepare_run`` loads the suite and checks every file the run reads before any agent starts;
``execute_run`` runs the cases (a SIGTERM stops the run like Ctrl-C, so the artifacts of the
cases that finished are still written) and records the run; a Ctrl-C or SIGTERM that comes
while the last artifacts are written waits for them (a second one does not). The CLI prints
the outcome.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import signal
import socket
import threading
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trialrun.artifacts.recording import Baseline, RecordedRun
    from trialrun.base.results import CaseResult
    from trialrun.config import Suite
    from trialrun.config.models import Mode
    from trialrun.receipt.signing import Ed25519Signer
    from trialrun.running.network import RunSeal
    from trialrun.running.preflight import Preflight
    from trialrun.running.repeats import Repeats


@dataclass(frozen=True)
class PreparedRun:
    """A suite ready to run: its cases selected, its inputs checked."""

    suite: Suite
    mode: Mode
    preflight: Preflight
    baseline: Baseline | None
    shard: dict[str, Any] | None  # the summary's shard block of a shard run
    seal: RunSeal | None = None
    """Replay's network seal, decided (and its warnings given) once for the run."""
    repeats: Repeats | None = None
    """``--repeat`` / ``--retries`` (``running.repeats``); None: every case runs once."""


@dataclass(frozen=True)
class FinishedRun:
    """A run that was recorded, and whether it was interrupted."""

    recorded: RecordedRun
    interrupted: bool


def prepare_run(
    path: Path,
    *,
    case_ids: tuple[str, ...],
    shard: str | None,
    mode: str | None,
    baseline: Path | None,
    no_baseline: bool,
    warn: Callable[[str], None],
    last_failed: bool = False,
    failed_first: bool = False,
) -> PreparedRun:
    """Load the suite at ``path``, keep the asked cases, check every file the run reads.

    ``case_ids`` select first, then ``shard``; ``last_failed`` then keeps, of those, the cases
    that failed when they last ran, and ``failed_first`` runs them first (``failed_cache``).
    """
    from trialrun.config import load_suite
    from trialrun.running.runner import resolve_mode

    # A baseline given on the command line, or none at all: the suite's is not read.
    use_baseline_path = baseline is None and not no_baseline
    loaded = load_suite(path, case_ids=case_ids, use_baseline_path=use_baseline_path, mode=mode)
    for message in loaded.warnings:
        warn(message)
    shard_block: dict[str, Any] | None = None
    if shard is not None:
        from trialrun.running.sharding import ShardSpec, select_shard, shard_info

        spec = ShardSpec.parse(shard)
        shard_block = shard_info(spec, [case.config.id for case in loaded.cases])
        loaded = dataclasses.replace(loaded, cases=select_shard(loaded.cases, spec))
    if last_failed or failed_first:
        from trialrun.artifacts.failed_cache import read_failed, select_by_failures

        chosen, note = select_by_failures(
            loaded.cases,
            lambda case: case.config.id,
            read_failed(loaded.suite_file),
            only_failed=last_failed,
        )
        warn(note)
        loaded = dataclasses.replace(loaded, cases=chosen)
    run_mode = resolve_mode(loaded, mode)
    checked, found = _check_inputs(loaded, run_mode, baseline, no_baseline, warn)
    from trialrun.running.network import network_seal

    seal = network_seal(loaded, run_mode)
    for message in seal.warnings():
        warn(message)
    return PreparedRun(loaded, run_mode, checked, found, shard_block, seal)


def execute_run(
    prepared: PreparedRun,
    *,
    jobs: int,
    out: Path | None,
    command_line: str,
    signer: Ed25519Signer | None,
    on_case_decided: Callable[[CaseResult], None] | None = None,
    update: bool = False,
    keep_unused: bool = False,
) -> FinishedRun:
    """Run the cases, recording each as it finishes; then write the run's summary and reports.

    ``update`` (a run prepared in record mode): ``--mode update``, which replays the tool calls
    that still have a recording (``keep_unused``: and keeps the recordings no call used).

    ``on_case_decided`` hears of each case as soon as its verdict is known, in the order the
    cases finish (the progress line); the artifacts record them in case order.
    """
    from trialrun.base.gitinfo import git_state_ahead

    # git answers the receipt's run_start while the run's code is imported.
    with git_state_ahead(prepared.suite.root):
        from trialrun.artifacts.recording import RunRecorder
        from trialrun.running.runner import RunOptions, RunProgress, run_suite

        recorder = RunRecorder(
            prepared.suite,
            mode="update" if update else prepared.mode,
            command_line=command_line,
            out_dir=out,
            signer=signer,
            network=None if prepared.seal is None else prepared.seal.record(),
        )
    progress = RunProgress()
    options = RunOptions(
        mode=prepared.mode,
        jobs=jobs,
        preflight=prepared.preflight,
        seal=prepared.seal,
        update=update,
        keep_unused=keep_unused,
    )
    if prepared.repeats is not None:
        options = dataclasses.replace(options, repeats=prepared.repeats)
    interrupted = False

    def decided(_index: int, result: CaseResult) -> None:
        if on_case_decided is not None:
            on_case_decided(result)

    deferred = _Deferred()
    try:
        with _sigterm_restored():
            try:
                asyncio.run(
                    _stop_on_sigterm(
                        run_suite(
                            prepared.suite,
                            options,
                            progress,
                            on_case_done=lambda _index, result: recorder.record(result),
                            on_case_decided=decided,
                            on_first_agent=recorder.warm_up,
                        ),
                        then=deferred.later,
                    )
                )
            except (KeyboardInterrupt, asyncio.CancelledError):
                interrupted = True
            with _last_artifacts_first(deferred):
                recorded = recorder.finish(
                    progress.ordered(),
                    interrupted=interrupted,
                    baseline=prepared.baseline,
                    shard=prepared.shard,
                )
    except BaseException:
        # A file that cannot be written (a full disk) or a second Ctrl-C while the last files
        # are written: the error is reported, and no temporary file stays behind.
        recorder.abandon()
        raise
    return FinishedRun(recorded, interrupted)


def remember_failures(
    prepared: PreparedRun, finished: FinishedRun, warn: Callable[[str], None]
) -> None:
    """The last-failed cache updated with the cases this run finished (never fails the run)."""
    from trialrun.artifacts.failed_cache import record_failures

    outcomes = [(case.case_id, case.status) for case in finished.recorded.result.cases]
    record_failures(prepared.suite.suite_file, outcomes, warn=warn)


class _Deferred:
    """Stop signals once the cases are over: the first waits, a second stops at once."""

    def __init__(self) -> None:
        self.pending: list[int] = []

    def later(self, signum: int, _frame: object) -> None:
        if self.pending:
            raise KeyboardInterrupt
        self.pending.append(signum)


@contextmanager
def _last_artifacts_first(deferred: _Deferred) -> Iterator[None]:
    """Let a Ctrl-C or a CI job's SIGTERM wait while the run's last artifacts are written.

    Every case is over by then and the writes take a moment: stopping halfway would leave a
    run folder without its summary or report. A second signal stops at once (Ctrl-C). A
    SIGTERM while the event loop closed already counts (``_stop_on_sigterm``).
    """
    from trialrun.base.signals import STOP_SIGNALS, routed_signals

    # A background job's ignored Ctrl-C stays ignored.
    heeded = [signum for signum in STOP_SIGNALS if signal.getsignal(signum) is not signal.SIG_IGN]
    with routed_signals(deferred.later, heeded):
        yield


@contextmanager
def _sigterm_restored() -> Iterator[None]:
    """SIGTERM's handler from before the block (the command line's: Ctrl-C) after it."""
    previous = signal.getsignal(signal.SIGTERM)
    try:
        yield
    finally:
        if previous is not None and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, previous)


async def _stop_on_sigterm(
    work: Coroutine[Any, Any, Any], *, then: Callable[[int, Any], None]
) -> None:
    """A cancelled CI job sends SIGTERM: stop like Ctrl-C, so the artifacts are still written.

    Once ``work`` is over, SIGTERM goes to ``then``. Not ``loop.add_signal_handler``: removing
    it (or closing the loop, which removes it) sets SIGTERM to its default, and a SIGTERM at
    that moment killed the process (143). Here one Python handler replaces the other. The
    wake-up descriptor is the one ``add_signal_handler`` would have set: a signal another thread
    took still wakes the loop, so that the main thread runs the handler.
    """
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None

    def cancel(_signum: int, _frame: object) -> None:
        loop.call_soon_threadsafe(task.cancel)

    wake_r, wake_w = socket.socketpair()
    wake_r.setblocking(False)
    wake_w.setblocking(False)
    loop.add_reader(wake_r.fileno(), _drain, wake_r)
    previous_wakeup = signal.set_wakeup_fd(wake_w.fileno(), warn_on_full_buffer=False)
    signal.signal(signal.SIGTERM, cancel)
    try:
        await work
    finally:
        signal.signal(signal.SIGTERM, then)
        signal.set_wakeup_fd(previous_wakeup)
        loop.remove_reader(wake_r.fileno())
        wake_r.close()
        wake_w.close()


def _drain(wake: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while wake.recv(4096):
            pass


def _check_inputs(
    suite: Suite,
    mode: Mode,
    baseline: Path | None,
    no_baseline: bool,
    warn: Callable[[str], None],
) -> tuple[Preflight, Baseline | None]:
    """Every file the run reads, checked before any agent starts; all problems in one report."""
    from trialrun.errors import ConfigError, ConfigErrors
    from trialrun.running.preflight import preflight

    errors: list[ConfigError] = []
    checked: Preflight | None = None
    found: Baseline | None = None
    try:
        checked = preflight(suite, mode)
    except ConfigError as exc:
        errors.append(exc)
    try:
        found = _baseline_for(suite.baseline_path, baseline, no_baseline, warn)
    except ConfigError as exc:
        errors.append(exc)
    collected = ConfigErrors.collect(errors)
    if collected is not None:
        raise collected
    assert checked is not None
    return checked, found


def _baseline_for(
    configured: Path | None, explicit: Path | None, disabled: bool, warn: Callable[[str], None]
) -> Baseline | None:
    """Load the baseline before any case runs, so a bad file costs nothing."""
    from trialrun.errors import ConfigError

    if disabled:
        return None
    for given in (explicit, configured):
        if given is not None and given.is_dir():
            raise ConfigError("expected a baseline file, found a directory", file=given)
    if explicit is not None:
        if not explicit.is_file():
            raise ConfigError(
                "baseline file not found (create one with `trialrun baseline promote`, "
                "or pass --no-baseline)",
                file=explicit,
            )
        return _load_baseline(explicit)
    if configured is None:
        return None
    if not configured.is_file():
        warn(
            f"warning: baseline {configured} does not exist yet; regression checks skipped "
            "(create it with `trialrun baseline promote`)."
        )
        return None
    return _load_baseline(configured)


def _load_baseline(path: Path) -> Baseline:
    # Imported only when there is a baseline to read: a run without one starts its agents sooner.
    from trialrun.artifacts.baseline import load_baseline
    from trialrun.artifacts.recording import Baseline

    return Baseline(load_baseline(path), path)
