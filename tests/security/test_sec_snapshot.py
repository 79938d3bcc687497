"""Workspaces are never lost: ``trialrun attempt`` killed in the middle of a rollback (issue 28).

A SIGKILL during the rollback of a large workspace left it with a fraction of its files, and the
snapshot in /tmp held numbered copies whose path map lived only in memory. These tests kill a
real ``trialrun attempt`` process at a known point of its rollback and check that the workspace
can be put back byte for byte with the documented command, that the next attempt refuses to
start until then, and that no snapshot outlives a run that ended in any other way.

The rollback is paused without a test hook: the agent (a small real program) swaps the saved
copy of one file for a FIFO, so the restore blocks when it opens that copy, and the test's
opening of the FIFO's other end returns exactly then. The copy's bytes are put back before the
recovery.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builders import run_trialrun

VERIFY = 'n=$(cat score.txt); if [ "$n" = 0 ]; then echo ok; else echo "$n failed"; exit 1; fi'
PAUSED_FILE = "m_pause.txt"
EMPTY_FILE = ("file", 0o644, hashlib.sha256(b"").hexdigest())
RAW_NAME = os.fsdecode(b"\xff-raw-name.txt")  # not UTF-8: kept as bytes through the map

# The agent: attempt 1 makes every kind of change and scores worse (so it is rolled back);
# with SEC_PLANT set it then swaps the saved copy of m_pause.txt for a FIFO (pausing the
# rollback there) and publishes the FIFO's path; with SEC_READY it announces itself and hangs
# until trialrun stops it; with SEC_SEEN it records which snapshot maps it can see.
AGENT = r"""
import json, os, shutil, sys, time
from pathlib import Path

attempt = os.environ["TRIALRUN_ATTEMPT"]
if attempt == "1":
    Path("a_exec.sh").write_text("#!/bin/sh\necho changed by the agent\n")
    os.chmod("b_readonly.txt", 0o644)
    Path("b_readonly.txt").write_text("rewritten\n")
    os.unlink("a_dir/nested/deep.txt")
    os.makedirs("new_dir/x")
    Path("new_dir/x/y.txt").write_text("added\n")
    os.unlink("c_link")
    Path("c_link").write_text("a file where a link was\n")
    os.unlink("c_dangling")
    os.symlink("elsewhere", "c_dangling")
    Path("d_binary.bin").write_bytes(b"\x00\x01changed\xff")
    shutil.rmtree("e_dir_to_file")
    Path("e_dir_to_file").write_text("a file where a directory was\n")
    Path("m_pause.txt").write_text("a different size\n")
    Path("z_late.txt").write_text("late, changed\n")
    os.unlink(os.fsdecode(b"\xff-raw-name.txt"))
    os.chmod("y_empty", 0o700)
    Path("score.txt").write_text("9\n")
else:
    Path("score.txt").write_text("0\n")
home = Path(os.environ["TRIALRUN_HOME"]) / "attempt"
if os.environ.get("SEC_SEEN"):
    seen = sorted(str(p.parent) for p in home.glob("*/*/map.json"))
    Path(os.environ["SEC_SEEN"]).write_text(json.dumps(seen))
if os.environ.get("SEC_PLANT") and attempt == "1":
    [store] = home.glob("*/attempt-1")
    rows = json.loads((store / "map.json").read_text())["entries"]
    row = next(r for r in rows if r["path"] == "m_pause.txt")
    copy = store / row["stored"]
    shutil.copyfile(copy, os.environ["SEC_PLANT"] + ".bytes")
    copy.unlink()
    os.mkfifo(copy)
    Path(os.environ["SEC_PLANT"] + ".tmp").write_text(str(copy))
    os.rename(os.environ["SEC_PLANT"] + ".tmp", os.environ["SEC_PLANT"])
if os.environ.get("SEC_READY"):
    Path(os.environ["SEC_READY"]).write_text("running")
    time.sleep(600)
"""

Listing = dict[str, tuple[str, int, str]]


@dataclass
class Project:
    root: Path
    workspace: Path
    home: Path
    agent: Path

    def env(self, **extra: str) -> dict[str, str]:
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "TRIALRUN_HOME": str(self.home)}
        return env | extra

    def attempt_args(self, receipt: str, attempts: int = 1) -> list[str]:
        return [
            sys.executable, "-m", "trialrun", "attempt", "--goal", "score 0", "--verify", VERIFY,
            "--agent", f"{sys.executable} {self.agent}", "--attempts", str(attempts),
            "--workspace", str(self.workspace), "--receipt", str(self.root / receipt),
        ]  # fmt: skip

    def trialrun(self, *args: str) -> subprocess.CompletedProcess[str]:
        return run_trialrun(*args, cwd=self.root, env=self.env())

    def leftovers(self) -> list[str]:
        """Everything under the trialrun home's attempt folder (snapshots, their remains)."""
        base = self.home / "attempt"
        return sorted(str(p.relative_to(base)) for p in base.rglob("*")) if base.exists() else []


@pytest.fixture
def project(tmp_path: Path) -> Project:
    ws = tmp_path / "ws"
    files = {
        "a_dir/nested/deep.txt": b"deep\n",
        "a_exec.sh": b"#!/bin/sh\necho hi\n",
        "b_readonly.txt": b"read only\n",
        "d_binary.bin": b"\x00\x01\x02binary\xfe",
        "e_dir_to_file/inner.txt": b"inner\n",
        PAUSED_FILE: b"paused here\n",
        "n_after/more.txt": b"after the pause\n",
        "score.txt": b"1\n",
        "z_late.txt": b"late\n",
        RAW_NAME: b"a name that is not UTF-8\n",
        ".git/HEAD": b"ref: refs/heads/main\n",
    }
    for rel, data in files.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_bytes(data)
    (ws / "a_exec.sh").chmod(0o755)
    (ws / "b_readonly.txt").chmod(0o444)
    os.symlink("a_dir/nested/deep.txt", ws / "c_link")
    os.symlink("nowhere", ws / "c_dangling")
    (ws / "y_empty").mkdir(mode=0o750)
    (ws / "y_empty").chmod(0o750)
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    return Project(tmp_path, ws, tmp_path / "home", agent)


def listing(root: Path) -> Listing:
    """Every entry under root, .git included, with kind, mode and content (links as links)."""
    found: Listing = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            info = path.lstat()
            rel = path.relative_to(root).as_posix()
            if stat.S_ISLNK(info.st_mode):
                found[rel] = ("link", 0, os.readlink(path))
            elif stat.S_ISDIR(info.st_mode):
                found[rel] = ("dir", stat.S_IMODE(info.st_mode), "")
            else:
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
                found[rel] = ("file", stat.S_IMODE(info.st_mode), digest)
    return found


def wait_until(ready: Callable[[], bool], proc: subprocess.Popen[str], what: str) -> None:
    """Wait for an event the child announces; fail at once if the child ended instead."""
    deadline = time.monotonic() + 120
    while not ready():
        if proc.poll() is not None:
            _, err = proc.communicate()
            pytest.fail(f"trialrun ended (exit {proc.returncode}) before {what}: {err}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.01)


def first_event(receipt: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(receipt.read_text().splitlines()[0])["data"]
    return data


def kill_mid_rollback(project: Project) -> tuple[Path, Path]:
    """Run one attempt, SIGKILL trialrun inside its rollback; (saved copy's FIFO, its bytes)."""
    plant = project.root / "planted"
    proc = subprocess.Popen(
        project.attempt_args("out/receipt.jsonl"), cwd=project.root, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=project.env(SEC_PLANT=str(plant)),
    )  # fmt: skip
    wait_until(plant.exists, proc, "the agent planted the FIFO")
    fifo = Path(plant.read_text())
    writer: list[int] = []

    def restore_opened_the_copy() -> bool:
        try:  # succeeds only once the rollback has opened the FIFO to read the saved copy
            writer.append(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            return False
        return True

    wait_until(restore_opened_the_copy, proc, "the rollback reached the paused file")
    proc.send_signal(signal.SIGKILL)
    _, stderr = proc.communicate(timeout=60)
    os.close(writer[0])
    assert proc.returncode == -signal.SIGKILL, stderr
    return fifo, Path(f"{plant}.bytes")


def test_a_rollback_killed_half_way_is_refused_then_recovered_byte_for_byte(
    project: Project,
) -> None:
    before = listing(project.workspace)
    fifo, saved_bytes = kill_mid_rollback(project)
    snapshot_dir = Path(first_event(project.root / "out" / "receipt.jsonl")["snapshotDir"])
    assert snapshot_dir.is_relative_to(project.home) and snapshot_dir.is_dir()

    # Half rolled back: what sorts before the paused file is back, what sorts after is not.
    half = listing(project.workspace)
    assert half["a_exec.sh"] == before["a_exec.sh"] and "new_dir" not in half
    # The paused file is missing, or created and still empty if the kill came after the
    # rollback opened it for writing (which moment the kill lands in is the scheduler's choice).
    assert half.get(PAUSED_FILE, EMPTY_FILE)[2] == EMPTY_FILE[2]
    assert (project.workspace / "z_late.txt").read_text() != "late\n"

    again = subprocess.run(
        project.attempt_args("out/second.jsonl"), cwd=project.root, capture_output=True,
        text=True, timeout=120, env=project.env(),
    )  # fmt: skip
    assert again.returncode == 2, again.stderr
    assert again.stderr.startswith("error: ") and len(again.stderr.splitlines()) == 1
    assert str(snapshot_dir) in again.stderr and "trialrun attempt recover" in again.stderr
    assert "Traceback" not in again.stderr and not (project.root / "out/second.jsonl").exists()
    assert listing(project.workspace) == half  # the refusal touched nothing

    # The copy the test swapped for a FIFO is refused as damaged, not restored from.
    damaged = project.trialrun("attempt", "recover", "--workspace", str(project.workspace))
    assert damaged.returncode == 2 and "damaged" in damaged.stderr, damaged.stderr
    fifo.unlink()
    fifo.write_bytes(saved_bytes.read_bytes())

    recovered = project.trialrun("attempt", "recover", "--workspace", str(project.workspace))
    assert recovered.returncode == 0, recovered.stderr
    assert listing(project.workspace) == before
    assert project.leftovers() == []
    ran = subprocess.run(
        project.attempt_args("out/third.jsonl"), cwd=project.root, capture_output=True,
        text=True, timeout=120, env=project.env(),
    )  # fmt: skip
    assert ran.returncode == 1, ran.stderr  # it starts again (attempt 1 is worse, rolled back)
    assert listing(project.workspace) == before and project.leftovers() == []


def test_discard_drops_the_snapshot_and_leaves_the_workspace_as_it_is(project: Project) -> None:
    kill_mid_rollback(project)
    half = listing(project.workspace)
    dropped = project.trialrun(
        "attempt", "recover", "--workspace", str(project.workspace), "--discard"
    )
    assert dropped.returncode == 0, dropped.stderr
    assert listing(project.workspace) == half and project.leftovers() == []
    nothing = project.trialrun("attempt", "recover", "--workspace", str(project.workspace))
    assert nothing.returncode == 2 and "no snapshot" in nothing.stderr


def test_a_finished_run_names_its_snapshots_first_and_leaves_none(project: Project) -> None:
    # What a crash while a directory was being removed or built leaves is swept too.
    trash = project.home / "attempt" / ".trash-ws-0123456789abcdef-00ff00ff"
    abandoned = project.home / "attempt" / ".new-other-fedcba9876543210-11ee11ee"
    for leftover in (trash, abandoned):
        leftover.mkdir(parents=True)
        (leftover / "state.json").write_text("{}")
        (leftover / "lock").write_text("")
    seen = project.root / "seen.json"
    proc = subprocess.run(
        project.attempt_args("out/receipt.jsonl", attempts=2), cwd=project.root,
        capture_output=True, text=True, timeout=120, env=project.env(SEC_SEEN=str(seen)),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    snapshot_dir = first_event(project.root / "out" / "receipt.jsonl")["snapshotDir"]
    lines = proc.stderr.splitlines()
    [announced] = [i for i, line in enumerate(lines) if line.startswith("snapshots: ")]
    assert snapshot_dir in lines[announced] and "trialrun attempt recover" in lines[announced]
    assert announced < lines.index("attempt 1: running the agent")
    # While the agent ran, its snapshots were on disk where the receipt says.
    assert json.loads(seen.read_text()) == [f"{snapshot_dir}/attempt-2", f"{snapshot_dir}/initial"]
    assert project.leftovers() == []


def test_ctrl_c_restores_and_leaves_no_snapshot(project: Project) -> None:
    before = listing(project.workspace)
    ready = project.root / "agent-running"
    proc = subprocess.Popen(
        project.attempt_args("out/receipt.jsonl"), cwd=project.root, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=project.env(SEC_READY=str(ready)),
    )  # fmt: skip
    wait_until(ready.exists, proc, "the agent started")
    snapshot_dir = Path(first_event(project.root / "out" / "receipt.jsonl")["snapshotDir"])
    assert (snapshot_dir / "attempt-1" / "map.json").is_file()
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert listing(project.workspace) == before
    assert not snapshot_dir.exists() and project.leftovers() == []


def test_a_second_attempt_in_a_busy_workspace_is_refused(project: Project) -> None:
    ready = project.root / "agent-running"
    proc = subprocess.Popen(
        project.attempt_args("out/receipt.jsonl"), cwd=project.root, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=project.env(SEC_READY=str(ready)),
    )  # fmt: skip
    try:
        wait_until(ready.exists, proc, "the agent started")
        second = subprocess.run(
            project.attempt_args("out/second.jsonl"), cwd=project.root, capture_output=True,
            text=True, timeout=120, env=project.env(),
        )  # fmt: skip
        assert second.returncode == 2 and "is running in this workspace" in second.stderr
        busy = project.trialrun("attempt", "recover", "--workspace", str(project.workspace))
        assert busy.returncode == 2 and "still running" in busy.stderr, busy.stderr
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
    assert proc.returncode == 130 and project.leftovers() == []


def test_an_error_mid_attempt_restores_the_workspace_and_leaves_no_snapshot(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trialrun.attempt import harness

    before = listing(project.workspace)
    monkeypatch.setenv("TRIALRUN_HOME", str(project.home))
    real_verify = harness._AttemptRun._verify

    def verify_that_breaks(run: Any, attempt: int) -> tuple[int, bool]:
        if attempt == 1:  # the agent's changes are in the workspace now
            raise harness.AttemptInputError("cannot start the verify command with bash: gone")
        return real_verify(run, attempt)

    monkeypatch.setattr(harness._AttemptRun, "_verify", verify_that_breaks)
    options = harness.AttemptOptions(
        goal="score 0", verify_command=VERIFY, agent_command=f"{sys.executable} {project.agent}",
        workspace=project.workspace, receipt_path=project.root / "receipt.jsonl", attempts=1,
    )  # fmt: skip
    with pytest.raises(harness.AttemptInputError, match="cannot start the verify command"):
        harness.run_attempts(options)
    assert listing(project.workspace) == before
    assert project.leftovers() == []


# The map is read back by another process after a crash: whatever it says, it is either a
# snapshot whose every path lies inside the workspace, or a one-line SnapshotError.
_PART = st.sampled_from(["a", "b", "..", ".", "", ".git", "/", "x\0y", "c d", "\udcff"])
_PATHS = st.lists(_PART, min_size=1, max_size=4).map("/".join)
_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-5, 0o10000), st.text(max_size=8), _PATHS)
_ROWS = st.fixed_dictionaries(
    {"path": _PATHS, "kind": st.sampled_from(["file", "symlink", "dir", "fifo", None])},
    optional={
        "mode": st.one_of(st.integers(-1, 0o10000), _VALUES),
        "size": st.one_of(st.just(3), _VALUES),
        "stored": st.one_of(st.just("0000001"), st.just("../escape"), _VALUES),
        "target": _VALUES,
    },
)


@settings(max_examples=150)
@given(rows=st.lists(_ROWS, max_size=6), root=st.sampled_from(["/ws", "ws", 7]))
def test_any_map_loads_safely_or_is_refused_in_one_line(
    tmp_path_factory: pytest.TempPathFactory, rows: list[dict[str, Any]], root: object
) -> None:
    from trialrun.attempt.snapshot import Snapshot, SnapshotError

    store = tmp_path_factory.mktemp("store")
    (store / "0000001").write_bytes(b"abc")
    document = {"format": "trialrun-workspace-snapshot", "version": 1, "root": root}
    text = json.dumps({**document, "entries": rows})
    (store / "map.json").write_text(text, encoding="utf-8", errors="surrogatepass")
    try:
        snapshot = Snapshot.load(store)
    except SnapshotError as exc:
        assert str(exc).startswith(str(store / "map.json")) and "\n" not in str(exc)
        return
    for rel in snapshot._entries:
        parts = rel.split("/")
        assert all(part not in ("", ".", "..", ".git") for part in parts) and "\0" not in rel


@settings(max_examples=40)
@given(
    names=st.lists(
        st.text(
            st.characters(blacklist_characters="/\0", blacklist_categories=["Cs"]),
            min_size=1,
            max_size=6,
        ).filter(lambda n: n not in (".", "..", ".git", "sub")),
        min_size=1,
        max_size=5,
        unique=True,
    ),
    data=st.binary(max_size=64),
)
def test_a_snapshot_loaded_from_disk_restores_what_was_saved(
    tmp_path_factory: pytest.TempPathFactory, names: list[str], data: bytes
) -> None:
    from trialrun.attempt.snapshot import Snapshot, Workspace

    root = tmp_path_factory.mktemp("ws")
    (root / "sub").mkdir()
    for index, name in enumerate(names):
        (root / ("sub" if index % 2 else ".") / name).write_bytes(data + name.encode())
    before = listing(root)
    store = tmp_path_factory.mktemp("saved") / "snap"
    Workspace(root).snapshot(store)
    for path in sorted(root.rglob("*"), reverse=True):
        if path.is_file():
            path.write_bytes(b"edited")
    (root / "sub" / "added").write_bytes(b"new")
    workspace = Workspace(root)
    workspace.restore(Snapshot.load(store))  # a fresh object: only what is on disk
    assert listing(root) == before


def test_a_full_disk_while_publish_adds_an_id_leaves_compare_yaml_whole(tmp_path: Path) -> None:
    # The same mistake elsewhere: publish rewrote the user's compare.yaml in place, so a write
    # that failed half way (here: a file size limit, as a full disk would) truncated it.
    subject = tmp_path / "subject"
    (subject / "evals").mkdir(parents=True)
    compare_yaml = subject / "evals" / "compare.yaml"
    original = "name: demo\n" + "".join(f"# the user's own note {i}\n" for i in range(80))
    compare_yaml.write_text(original)
    limit = len(original) // 2

    def small_files() -> None:
        import resource

        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails instead
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    code = "import sys; from pathlib import Path; from trialrun.team.publish import "
    code += "ensure_subject_id; ensure_subject_id(Path(sys.argv[1]))"
    proc = subprocess.run(
        [sys.executable, "-c", code, str(subject)], capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}, preexec_fn=small_files,
    )  # fmt: skip
    assert proc.returncode != 0 and "File too large" in proc.stderr, proc.stderr
    assert compare_yaml.read_text() == original
    assert sorted(p.name for p in compare_yaml.parent.iterdir()) == ["compare.yaml"]


def test_a_damaged_state_file_is_one_error_line_and_discard_still_works(project: Project) -> None:
    kill_mid_rollback(project)
    [state] = (project.home / "attempt").glob("*/state.json")
    state.write_text('{"restore": ')
    half = listing(project.workspace)
    broken = project.trialrun("attempt", "recover", "--workspace", str(project.workspace))
    assert broken.returncode == 2 and "Traceback" not in broken.stderr
    assert broken.stderr.startswith(f"error: {state}: ") and "--discard" in broken.stderr
    assert len(broken.stderr.splitlines()) == 1 and listing(project.workspace) == half
    dropped = project.trialrun(
        "attempt", "recover", "--workspace", str(project.workspace), "--discard"
    )
    assert dropped.returncode == 0 and project.leftovers() == []
