"""The local store of compare runs: ``$TRIALRUN_HOME/evals/local/<digest>/<run_id>/``.

One directory per run, keyed by the bytes evaluated (the hex of the subject's content digest) so
a receipt can later be matched to exact bytes whatever team or version they end up in:

* ``receipt.json``: the run's receipt (written last, atomically);
* ``run.jsonl``: a Run Receipt v0 chain of every arm sample and every row (``ReceiptWriter``);
* ``transcripts/<case>.<arm>.<rep>.<ext>``: each arm's raw transcript, unredacted: the store is
  the user's own machine, and ``--rescore`` must see what the agent really printed; the copy
  ``export_run`` makes for upload (``compare --out``) and a shard's directory (``--shard --out``,
  ``RunDir.redact_transcripts``) hold them redacted;
* ``sandboxes/``: the arms' sandboxes, kept for inspection (mode 0700, never cleaned up).

Run ids are UTC ``YYYYMMDDTHHMMSSZ`` so that lexicographic order is chronological; two runs in the
same second get ``-2``, ``-3`` ... rather than sharing a directory.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trialrun.base.fsutil import atomic_write_text
from trialrun.base.linesplit import jsonl_lines
from trialrun.base.linesredact import LineRedactor, redact_stream_text
from trialrun.compare.arms import ArmRun
from trialrun.compare.records import ArmSampleResult, CompareRow
from trialrun.errors import ConfigError
from trialrun.home.digest import DIGEST_PREFIX
from trialrun.home.paths import RECEIPT_FILE, store_root
from trialrun.receipt.writer import ReceiptWriter

__all__ = [
    "ARM_SAMPLE_EVENT",
    "RunDir",
    "arm_run_record",
    "copy_arm_runs",
    "create_run_dir",
    "export_run",
    "find_run_dir",
    "log_arm_run",
    "new_run_id",
    "read_run_log",
    "row_event",
    "sample_event",
    "stored_arm_runs",
    "transcript_name",
    "write_transcript",
]

RUN_LOG_FILE = "run.jsonl"
TRANSCRIPTS_DIR = "transcripts"
SANDBOXES_DIR = "sandboxes"
ARM_SAMPLE_EVENT = "arm_sample"


def new_run_id(now: float | None = None) -> str:
    """The UTC second as ``YYYYMMDDTHHMMSSZ``."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() if now is None else now))


@dataclass(frozen=True)
class RunDir:
    """One run's directory and the files in it."""

    path: Path
    redact_transcripts: bool = False
    """Transcripts are written redacted: the directory is made to leave the machine (a shard's,
    uploaded for ``compare merge``)."""

    @property
    def run_id(self) -> str:
        return self.path.name

    @property
    def receipt(self) -> Path:
        return self.path / RECEIPT_FILE

    @property
    def run_log(self) -> Path:
        return self.path / RUN_LOG_FILE

    @property
    def transcripts(self) -> Path:
        return self.path / TRANSCRIPTS_DIR

    @property
    def sandboxes(self) -> Path:
        return self.path / SANDBOXES_DIR


def export_run(run: RunDir, out: Path, name: str) -> Path:
    """Copy ``run`` (without its sandboxes) to ``out/<name>/<run id>/``, for a CI artifact.

    The copy is made under a temporary name and renamed whole, so an upload never sees half of
    it; the local store keeps the original. Transcripts are copied redacted: they are the one
    part of a run written as the agent printed it.
    """
    target = out / name / run.run_id
    if target.exists():
        raise ConfigError(f"{target}: already exists; expected a directory not used by a run")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    try:
        shutil.copytree(
            run.path, partial, ignore=shutil.ignore_patterns(SANDBOXES_DIR, TRANSCRIPTS_DIR)
        )
        if run.transcripts.is_dir():
            copied = partial / TRANSCRIPTS_DIR
            copied.mkdir()
            for source in sorted(run.transcripts.iterdir()):
                if source.is_file():
                    _copy_redacted(source, copied / source.name)
        partial.rename(target)
    except OSError as exc:
        # A full disk halfway through: no half copy stays behind, and the error names where
        # the copy was going with its first cause (copytree gathers one per file).
        shutil.rmtree(partial, ignore_errors=True)
        errors = exc.args[0] if isinstance(exc, shutil.Error) and exc.args else None
        why = errors[0][2] if isinstance(errors, list) and errors else exc.strerror or str(exc)
        raise OSError(exc.errno, f"cannot copy the run there: {why}", str(target)) from None
    return target


def _copy_redacted(source: Path, target: Path) -> None:
    """``source`` copied line by line through the redaction of a stream (bytes that are not
    UTF-8 pass through as they are)."""
    redacted_line = LineRedactor().line
    with source.open("rb") as reading, target.open("wb") as writing:
        for raw in reading:
            body = raw.rstrip(b"\r\n")
            text = redacted_line(body.decode("utf-8", "surrogateescape"))
            if text is not None:
                writing.write(text.encode("utf-8", "surrogateescape") + raw[len(body) :])


def create_run_dir(content_digest: str, run_id: str, *, root: Path | None = None) -> RunDir:
    """Make a fresh run directory (never reusing one); the id gains ``-N`` on a collision."""
    base = (root or store_root()) / content_digest.removeprefix(DIGEST_PREFIX)
    try:
        base.mkdir(parents=True, exist_ok=True)
        for attempt in range(1, 1000):
            candidate = base / (run_id if attempt == 1 else f"{run_id}-{attempt}")
            try:
                candidate.mkdir(mode=0o700)
            except FileExistsError:
                continue
            run = RunDir(candidate)
            run.transcripts.mkdir()
            run.sandboxes.mkdir(mode=0o700)
            return run
    except OSError as exc:
        raise ConfigError(f"cannot create a run directory under {base}: {exc}") from None
    raise ConfigError(f"cannot create a run directory under {base}: 999 runs share id {run_id}")


def find_run_dir(reference: str, *, root: Path | None = None) -> RunDir:
    """A stored run named by its directory path, or by its run id anywhere in the store."""
    as_path = Path(reference).expanduser()
    if (as_path / RUN_LOG_FILE).is_file():
        return RunDir(as_path.resolve())
    base = root or store_root()
    found = sorted(base.glob(f"*/{reference}")) if "/" not in reference else []
    found = [path for path in found if (path / RUN_LOG_FILE).is_file()]
    if len(found) == 1:
        return RunDir(found[0])
    if not found:
        raise ConfigError(
            f"--rescore {reference}: expected a run directory or a run id stored under {base}, "
            "found neither"
        )
    listed = ", ".join(str(path) for path in found)
    raise ConfigError(f"--rescore {reference}: the run id is ambiguous, found {listed}")


def transcript_name(case: str, arm: str, rep: int, transcript_format: str) -> str:
    """``<case>.<arm>.<rep>.jsonl`` for stream-json, ``.txt`` for text."""
    extension = "jsonl" if transcript_format == "stream-json" else "txt"
    return f"{case}.{arm}.{rep}.{extension}"


def arm_run_record(run: ArmRun, transcript_file: str) -> dict[str, Any]:
    """What ``run.jsonl`` keeps of one arm run: enough for ``--rescore`` to rebuild it."""
    return {
        "case": run.case,
        "rep": run.rep,
        "arm": run.arm,
        "status": run.status,
        "exit_code": run.exit_code,
        "attempts": run.attempts,
        "duration_s": run.duration_s,
        "error": run.error,
        "sandbox": str(run.sandbox),
        "transcript_file": transcript_file,
    }


def read_run_log(run: RunDir) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(type, data)`` of each event of a stored ``run.jsonl``; a torn last line is skipped."""
    try:
        lines = jsonl_lines(run.run_log.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read {run.run_log}: {exc.strerror or exc}") from None
    for number, line in enumerate(lines, start=1):
        try:
            event = json.loads(line)
        except ValueError:
            if number == len(lines):
                return  # an interrupted write; every complete line before it still counts
            raise ConfigError(
                f"{run.run_log}:{number}: expected one JSON event a line, found {line[:80]!r}"
            ) from None
        if isinstance(event, dict) and isinstance(event.get("data"), dict):
            yield str(event.get("type")), event["data"]


def stored_arm_runs(run: RunDir) -> list[ArmRun]:
    """Every arm run a stored run finished, transcripts read back from ``transcripts/``."""
    arm_runs: list[ArmRun] = []
    for kind, data in read_run_log(run):
        if kind != ARM_SAMPLE_EVENT:
            continue
        try:
            name = str(data["transcript_file"])
            transcript = (run.transcripts / name).read_text(encoding="utf-8")
            arm_runs.append(
                ArmRun(
                    case=str(data["case"]),
                    rep=int(data["rep"]),
                    arm=data["arm"],
                    status=data["status"],
                    transcript=transcript,
                    sandbox=Path(str(data["sandbox"])),
                    exit_code=data["exit_code"],
                    attempts=int(data["attempts"]),
                    duration_s=float(data["duration_s"]),
                    error=data.get("error"),
                )
            )
        except (KeyError, TypeError, ValueError, OSError) as exc:
            raise ConfigError(
                f"{run.run_log}: an {ARM_SAMPLE_EVENT} event cannot be read back ({exc!r}); "
                "expected the fields trialrun compare writes"
            ) from None
    return arm_runs


def log_arm_run(run: ArmRun, run_dir: RunDir, log: ReceiptWriter, transcript_format: str) -> None:
    """Keep one finished arm: its transcript file and its ``arm_sample`` event."""
    name = transcript_name(run.case, run.arm, run.rep, transcript_format)
    write_transcript(run_dir, name, run.transcript)
    log.emit(ARM_SAMPLE_EVENT, arm_run_record(run, name))


def write_transcript(run_dir: RunDir, name: str, transcript: str) -> None:
    """One arm's transcript into ``run_dir``: raw in the store, redacted where it is uploaded."""
    if run_dir.redact_transcripts:
        transcript = redact_stream_text(transcript)
    atomic_write_text(run_dir.transcripts / name, transcript)


def copy_arm_runs(source: RunDir, run_dir: RunDir, log: ReceiptWriter) -> list[ArmRun]:
    """A stored run's arm runs, logged again so the rescored run can itself be rescored.

    Sandboxes are not copied: checks read the original ones, which the store keeps.
    """
    arm_runs = stored_arm_runs(source)
    for kind, data in read_run_log(source):
        if kind == ARM_SAMPLE_EVENT:
            name = str(data["transcript_file"])
            shutil.copyfile(source.transcripts / name, run_dir.transcripts / name)
            log.emit(ARM_SAMPLE_EVENT, data)
    return arm_runs


def sample_event(sample: ArmSampleResult) -> dict[str, Any]:
    """The ``sample_checks`` event: one scored arm sample and each check's result."""
    return {
        "case": sample.case,
        "rep": sample.rep,
        "arm": sample.arm,
        "status": sample.status,
        "checks": [[name, passed] for name, passed in sample.checks],
    }


def row_event(row: CompareRow) -> dict[str, Any]:
    """The ``row`` event: one decided row with its reason and the judge's audit trail."""
    decision = row.row
    judge = decision.judge
    return {
        "case": row.case,
        "rep": row.rep,
        "opponent": row.opponent,
        "outcome": decision.outcome.value,
        "decided_by": decision.decided_by,
        "scored": decision.scored,
        "reason": decision.reason,
        "judge": None
        if judge is None
        else {
            "winner": judge.winner,
            "cause": judge.cause,
            "agreed": judge.agreed,
            "split": judge.split,
            "escalated": judge.escalated,
            "errors": list(judge.errors),
            "raw_answers": list(judge.raw_answers),
        },
    }
