"""Workspace snapshots: exact restore, change reports, and never touching .git or the outside."""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trialrun.attempt.snapshot import (
    DEFAULT_MAX_DIFF_BYTES,
    FileChange,
    SnapshotError,
    Workspace,
)

Listing = dict[str, tuple[str, int, str]]


def tree_listing(root: Path, *, include_git: bool = False) -> Listing:
    """Every entry under root (symlinks as links) with its kind, mode and content hash."""
    listing: Listing = {}
    for dirpath, dirnames, filenames in os.walk(root):
        if not include_git:
            dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = path.relative_to(root).as_posix()
            if not include_git and name == ".git":
                continue
            info = path.lstat()
            mode = stat.S_IMODE(info.st_mode)
            if stat.S_ISLNK(info.st_mode):
                listing[rel] = ("link", 0, os.readlink(path))
            elif stat.S_ISDIR(info.st_mode):
                listing[rel] = ("dir", mode, "")
            else:
                listing[rel] = ("file", mode, hashlib.sha256(path.read_bytes()).hexdigest())
    return listing


def write(path: Path, data: str | bytes, mode: int | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        path.write_text(data, encoding="utf-8")
    else:
        path.write_bytes(data)
    if mode is not None:
        path.chmod(mode)
    return path


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    write(root / "src" / "calc.py", "def add(a, b):\n    return a + b\n")
    write(root / "src" / "pkg" / "deep.txt", "deep\n")
    write(root / "run.sh", "#!/bin/sh\necho hi\n", 0o755)
    write(root / "README.md", "readme\n", 0o644)
    write(root / "notes.txt", "keep me\n")
    (root / "empty_dir").mkdir()
    return root


def test_restore_undoes_created_modified_deleted_files_and_modes(workspace: Path) -> None:
    before = tree_listing(workspace)
    ws = Workspace(workspace)
    with ws.snapshot() as snap:
        write(workspace / "src" / "calc.py", "def add(a, b):\n    return a - b\n")
        write(workspace / "stray.txt", "stray\n")
        (workspace / "notes.txt").unlink()
        (workspace / "run.sh").chmod(0o644)
        (workspace / "README.md").chmod(0o755)
        shutil.rmtree(workspace / "src" / "pkg")
        (workspace / "empty_dir").rmdir()
        assert tree_listing(workspace) != before
        ws.restore(snap)
    assert tree_listing(workspace) == before
    assert (workspace / "run.sh").stat().st_mode & 0o111


def test_restore_removes_nested_directories_created_since(workspace: Path) -> None:
    before = tree_listing(workspace)
    ws = Workspace(workspace)
    with ws.snapshot() as snap:
        write(workspace / "new" / "a" / "b" / "c" / "file.txt", "x")
        (workspace / "new" / "empty" / "dirs").mkdir(parents=True)
        write(workspace / "src" / "pkg" / "sub" / "created.py", "y")
        ws.restore(snap)
    assert tree_listing(workspace) == before
    assert not (workspace / "new").exists()
    assert not (workspace / "src" / "pkg" / "sub").exists()


def test_restore_handles_file_and_directory_swapping_places(workspace: Path) -> None:
    before = tree_listing(workspace)
    ws = Workspace(workspace)
    with ws.snapshot() as snap:
        (workspace / "notes.txt").unlink()
        write(workspace / "notes.txt" / "inner.txt", "now a dir")
        shutil.rmtree(workspace / "src" / "pkg")
        write(workspace / "src" / "pkg", "now a file")
        ws.restore(snap)
    assert tree_listing(workspace) == before


def test_restore_leaves_untouched_files_alone(workspace: Path) -> None:
    ws = Workspace(workspace)
    stamp = 1_000_000_000
    os.utime(workspace / "README.md", (stamp, stamp))
    with ws.snapshot() as snap:
        write(workspace / "notes.txt", "changed\n")
        ws.restore(snap)
        assert ws.changes_since(snap) == []
    assert (workspace / "README.md").stat().st_mtime == stamp


def test_symlinks_are_saved_and_restored_as_links(workspace: Path) -> None:
    os.symlink("src/calc.py", workspace / "link.py")
    os.symlink("missing-target", workspace / "dangling")
    before = tree_listing(workspace)
    ws = Workspace(workspace)
    with ws.snapshot() as snap:
        (workspace / "link.py").unlink()
        os.symlink("README.md", workspace / "link.py")
        (workspace / "dangling").unlink()
        write(workspace / "dangling", "now a file")
        (workspace / "notes.txt").unlink()
        os.symlink("README.md", workspace / "notes.txt")
        changes = {c.path: c for c in ws.changes_since(snap)}
        assert set(changes) == {"dangling", "link.py", "notes.txt"}
        assert changes["link.py"].diff is not None
        assert "-src/calc.py" in changes["link.py"].diff
        assert "+README.md" in changes["link.py"].diff
        ws.restore(snap)
    assert tree_listing(workspace) == before


def test_symlink_to_outside_is_never_followed(tmp_path: Path, workspace: Path) -> None:
    outside = tmp_path / "outside"
    write(outside / "precious.txt", "do not touch\n")
    write(outside / "nested" / "calc.py", "outside calc\n")
    os.symlink(outside, workspace / "existing_link")
    outside_before = tree_listing(outside)
    before = tree_listing(workspace)
    ws = Workspace(workspace)
    with ws.snapshot() as snap:
        assert "existing_link/precious.txt" not in snap.paths
        os.symlink(outside, workspace / "new_link")
        # The attempt replaces a real directory with a link to the outside: restoring src/pkg
        # must recreate the directory, not write into the outside through the link.
        shutil.rmtree(workspace / "src")
        os.symlink(outside / "nested", workspace / "src")
        ws.restore(snap)
    assert tree_listing(workspace) == before
    assert tree_listing(outside) == outside_before
    assert (workspace / "existing_link").is_symlink()


def test_hard_link_planted_by_the_attempt_does_not_leak_the_restore(
    tmp_path: Path, workspace: Path
) -> None:
    outside_file = write(tmp_path / "outside.txt", "outside content\n")
    before = tree_listing(workspace)
    ws = Workspace(workspace)
    with ws.snapshot() as snap:
        (workspace / "notes.txt").unlink()
        os.link(outside_file, workspace / "notes.txt")
        ws.restore(snap)
    assert tree_listing(workspace) == before
    assert outside_file.read_text(encoding="utf-8") == "outside content\n"


def test_changes_since_reports_sorted_paths_with_git_style_diffs(workspace: Path) -> None:
    ws = Workspace(workspace)
    with ws.snapshot() as snap:
        write(workspace / "src" / "calc.py", "def add(a, b):\n    return a - b\n")
        write(workspace / "zz_new.txt", "first\nlast")
        (workspace / "notes.txt").unlink()
        (workspace / "README.md").chmod(0o755)
        changes = ws.changes_since(snap)
    assert [c.path for c in changes] == ["README.md", "notes.txt", "src/calc.py", "zz_new.txt"]
    by_path = {c.path: c for c in changes}
    assert [c.change for c in changes] == ["modified", "deleted", "modified", "added"]
    calc = by_path["src/calc.py"]
    assert calc.diff == (
        "--- a/src/calc.py\n+++ b/src/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n"
        "-    return a + b\n+    return a - b\n"
    )
    assert calc.diff_sha256 == sha(calc.diff.encode("utf-8"))
    assert calc.before_sha256 == sha(b"def add(a, b):\n    return a + b\n")
    assert calc.after_sha256 == sha(b"def add(a, b):\n    return a - b\n")
    assert by_path["zz_new.txt"].diff == (
        "--- a/zz_new.txt\n+++ b/zz_new.txt\n@@ -0,0 +1,2 @@\n+first\n+last\n"
        "\\ No newline at end of file\n"
    )
    assert by_path["zz_new.txt"].before_sha256 is None
    deleted = by_path["notes.txt"]
    assert deleted.diff is not None and deleted.diff.startswith("--- a/notes.txt\n+++ b/notes.txt")
    assert "-keep me\n" in deleted.diff and deleted.after_sha256 is None
    assert by_path["README.md"].diff == "old mode 100644\nnew mode 100755\n"


def test_unchanged_workspace_has_no_changes(workspace: Path) -> None:
    ws = Workspace(workspace)
    with ws.snapshot() as snap:
        assert ws.changes_since(snap) == []
        ws.restore(snap)
        assert ws.changes_since(snap) == []


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (b"\x89PNG\r\n\x1a\n\0\0\0data", b"\x89PNG\r\n\x1a\n\0\0\0DATA"),
        (b"caf\xe9 latin-1", b"caf\xe9 latin-1 changed"),
        (b"plain text\n", b"now\0binary"),
    ],
)
def test_binary_files_are_detected_without_diff_text(
    workspace: Path, old: bytes, new: bytes
) -> None:
    write(workspace / "asset.bin", old)
    ws = Workspace(workspace)
    with ws.snapshot() as snap:
        write(workspace / "asset.bin", new)
        [change] = ws.changes_since(snap)
        assert change == FileChange(
            "asset.bin", "modified", None, sha(new), True, False, sha(old), sha(new)
        )
        ws.restore(snap)
    assert (workspace / "asset.bin").read_bytes() == old


def test_binary_file_added_and_deleted(workspace: Path) -> None:
    write(workspace / "old.bin", b"\0\1\2")
    ws = Workspace(workspace)
    with ws.snapshot() as snap:
        (workspace / "old.bin").unlink()
        write(workspace / "new.bin", b"\0\3")
        added, deleted = ws.changes_since(snap)
    assert (added.path, added.change, added.binary, added.diff) == ("new.bin", "added", True, None)
    assert added.diff_sha256 == sha(b"\0\3")
    assert (deleted.change, deleted.binary, deleted.diff_sha256) == ("deleted", True, sha(b""))
    assert "diff" not in deleted.receipt_data()


def test_huge_text_diff_is_omitted_but_hashed(workspace: Path) -> None:
    ws = Workspace(workspace)
    big = "".join(f"line {n}: some words to fill the file\n" for n in range(5_000))
    with ws.snapshot() as snap:
        write(workspace / "docs" / "big.md", big)
        [cut] = ws.changes_since(snap)
        [full] = ws.changes_since(snap, max_diff_bytes=10 * len(big))
    assert len(big) > DEFAULT_MAX_DIFF_BYTES
    assert (cut.diff, cut.truncated, cut.binary) == (None, True, False)
    assert full.diff is not None and not full.truncated
    assert cut.diff_sha256 == full.diff_sha256 == sha(full.diff.encode("utf-8"))
    assert cut.receipt_data() == {
        "path": "docs/big.md",
        "status": "created",
        "beforeSha256": None,
        "afterSha256": sha(big.encode("utf-8")),
        "diffSha256": cut.diff_sha256,
        "diffTruncated": True,
    }


def test_receipt_data_matches_the_file_change_event_shape(workspace: Path) -> None:
    ws = Workspace(workspace)
    with ws.snapshot() as snap:
        write(workspace / "notes.txt", "changed\n")
        [change] = ws.changes_since(snap)
    assert change.receipt_data() == {
        "path": "notes.txt",
        "status": "modified",
        "beforeSha256": sha(b"keep me\n"),
        "afterSha256": sha(b"changed\n"),
        "diffSha256": change.diff_sha256,
        "diff": change.diff,
    }


def test_secrets_in_diffs_are_left_for_the_harness_to_redact(workspace: Path) -> None:
    secret = "API_KEY=sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789"
    ws = Workspace(workspace)
    with ws.snapshot() as snap:
        write(workspace / ".env", secret + "\n")
        [change] = ws.changes_since(snap)
    assert change.diff is not None and secret in change.diff


def _git(root: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
        "GIT_CONFIG_NOSYSTEM": "1",
        "HOME": str(root.parent),
    }
    done = subprocess.run(
        ["git", *args], cwd=root, env=env, capture_output=True, text=True, check=True
    )
    return done.stdout


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_git_directory_is_never_touched(workspace: Path) -> None:
    write(workspace / ".gitignore", "ignored.log\n")
    write(workspace / "ignored.log", "ignored but restored\n")
    _git(workspace, "init", "-q")
    _git(workspace, "add", "-A")
    _git(workspace, "commit", "-q", "-m", "start")
    write(workspace / "src" / "calc.py", "uncommitted edit\n")
    status_before = _git(workspace, "status", "--porcelain")
    before = tree_listing(workspace)
    ws = Workspace(workspace)
    with ws.snapshot() as snap:
        assert not any(path.startswith(".git/") for path in snap.paths)
        git_before = tree_listing(workspace / ".git", include_git=True)
        write(workspace / "src" / "calc.py", "attempt edit\n")
        write(workspace / "ignored.log", "changed by the attempt\n")
        write(workspace / "stray.py", "x\n")
        changes = ws.changes_since(snap)
        ws.restore(snap)
        assert tree_listing(workspace / ".git", include_git=True) == git_before
    assert [c.path for c in changes] == ["ignored.log", "src/calc.py", "stray.py"]
    assert _git(workspace, "status", "--porcelain") == status_before
    assert tree_listing(workspace) == before


def test_nested_git_file_is_skipped(workspace: Path) -> None:
    write(workspace / "vendor" / "sub" / ".git", "gitdir: ../../.git/modules/sub\n")
    ws = Workspace(workspace)
    with ws.snapshot() as snap:
        assert "vendor/sub/.git" not in snap.paths
        shutil.rmtree(workspace / "src")
        ws.restore(snap)
    assert (workspace / "vendor" / "sub" / ".git").read_text(encoding="utf-8").startswith("gitdir")


def test_directory_holding_a_new_git_dir_is_kept_when_not_empty(workspace: Path) -> None:
    ws = Workspace(workspace)
    with ws.snapshot() as snap:
        write(workspace / "newrepo" / ".git" / "HEAD", "ref: refs/heads/main\n")
        write(workspace / "newrepo" / "code.py", "x\n")
        ws.restore(snap)
    assert not (workspace / "newrepo" / "code.py").exists()
    assert (workspace / "newrepo" / ".git" / "HEAD").exists()


def test_discarded_snapshot_cannot_be_used(workspace: Path) -> None:
    ws = Workspace(workspace)
    snap = ws.snapshot()
    store = snap.store
    assert store.is_dir()
    snap.discard()
    snap.discard()
    assert not store.exists() and snap.discarded
    with pytest.raises(SnapshotError, match="discarded"):
        ws.restore(snap)
    with pytest.raises(SnapshotError, match="discarded"):
        ws.changes_since(snap)


def test_snapshot_of_another_workspace_is_refused(tmp_path: Path, workspace: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    with Workspace(workspace).snapshot() as snap, pytest.raises(SnapshotError, match="belongs"):
        Workspace(other).restore(snap)


def test_workspace_must_be_a_directory(tmp_path: Path) -> None:
    with pytest.raises(SnapshotError, match="expected a directory"):
        Workspace(tmp_path / "missing")


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root reads anything")
def test_unreadable_file_fails_the_snapshot_and_leaves_no_temp_dir(workspace: Path) -> None:
    secret = write(workspace / "secret.txt", "x", 0o000)
    leftovers_before = set(Path(tempfile.gettempdir()).glob("trialrun-snapshot-*"))
    try:
        with pytest.raises(SnapshotError, match=r"secret\.txt"):
            Workspace(workspace).snapshot()
    finally:
        secret.chmod(0o600)
    assert set(Path(tempfile.gettempdir()).glob("trialrun-snapshot-*")) == leftovers_before


def test_copy_failure_during_snapshot_is_reported_and_cleaned_up(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    created: list[Path] = []
    real_mkdtemp = tempfile.mkdtemp

    def recording_mkdtemp(**kwargs: str) -> str:
        created.append(Path(real_mkdtemp(**kwargs)))
        return str(created[-1])

    def failing_copy(source: Path, target: Path, *, follow_symlinks: bool = True) -> Path:
        raise PermissionError(13, "Permission denied", str(source))

    monkeypatch.setattr(tempfile, "mkdtemp", recording_mkdtemp)
    monkeypatch.setattr(shutil, "copyfile", failing_copy)
    with pytest.raises(SnapshotError, match=r"cannot save .*Permission denied"):
        Workspace(workspace).snapshot()
    assert created and not created[0].exists()


def test_restore_refuses_when_a_file_became_a_directory_it_may_not_empty(
    workspace: Path,
) -> None:
    ws = Workspace(workspace)
    with ws.snapshot() as snap:
        (workspace / "notes.txt").unlink()
        write(workspace / "notes.txt" / ".git" / "HEAD", "ref: refs/heads/main\n")
        with pytest.raises(SnapshotError, match=r"notes\.txt must become a file"):
            ws.restore(snap)
    assert (workspace / "notes.txt" / ".git" / "HEAD").exists()


_NAMES = st.sampled_from(["a", "b", "c.txt", "d/e", "d/f.bin", "g/h/i"])
_CONTENT = st.one_of(st.text(max_size=20).map(lambda t: t.encode("utf-8")), st.binary(max_size=8))
_OPS = st.lists(
    st.tuples(st.sampled_from(["write", "delete", "chmod"]), _NAMES, _CONTENT), max_size=8
)


def _apply(root: Path, op: str, name: str, content: bytes) -> None:
    path = root / name
    if op == "write":
        if path.parent.exists() and not path.parent.is_dir():
            path.parent.unlink()
        if path.is_dir():
            shutil.rmtree(path)
        write(path, content)
    elif op == "delete" and path.is_file():
        path.unlink()
    elif op == "chmod" and path.is_file():
        path.chmod(path.stat().st_mode ^ 0o100)


@settings(max_examples=40)
@given(start=_OPS, attempt=_OPS)
def test_any_sequence_of_edits_is_restored_exactly(
    start: list[tuple[str, str, bytes]], attempt: list[tuple[str, str, bytes]]
) -> None:
    with tempfile.TemporaryDirectory() as temp:
        root = Path(temp)
        for op in start:
            _apply(root, *op)
        before = tree_listing(root)
        ws = Workspace(root)
        with ws.snapshot() as snap:
            for op in attempt:
                _apply(root, *op)
            after = tree_listing(root)
            reported = {c.path for c in ws.changes_since(snap)}
            old_files = {p: v for p, v in before.items() if v[0] != "dir"}
            new_files = {p: v for p, v in after.items() if v[0] != "dir"}
            expected = {
                path
                for path in old_files.keys() | new_files.keys()
                if old_files.get(path) != new_files.get(path)
            }
            assert reported == expected
            ws.restore(snap)
            assert ws.changes_since(snap) == []
        assert tree_listing(root) == before
