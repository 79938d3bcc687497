"""content_digest / eval_assets_digest / case_digest: the exact construction and its exclusions."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trialrun.errors import ConfigError
from trialrun.home.digest import case_digest, content_digest, eval_assets_digest


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _expected(lines: list[tuple[str, bytes]]) -> str:
    """The issue's definition written out by hand; ``lines`` must already be in sorted order."""
    text = "".join(f"{relpath}:{_sha(data)}\n" for relpath, data in lines)
    return "sha256:" + _sha(text.encode())


def _write(root: Path, files: dict[str, bytes]) -> None:
    for relpath, data in files.items():
        path = root / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def test_small_tree_matches_the_hand_computed_digest(tmp_path: Path) -> None:
    _write(tmp_path, {"SKILL.md": b"# skill\n", "scripts/run.sh": b"echo hi\n"})
    # Pinned once, so a change to the construction (separator, newline, prefix) cannot go
    # unnoticed even if _expected changed with it.
    assert content_digest(tmp_path) == (
        "sha256:09d9a7a04c3c2fb4d6ad8f7cffa8b3e2472a887346d70d4ac1db9b0cd06c8770"
    )
    expected = _expected([("SKILL.md", b"# skill\n"), ("scripts/run.sh", b"echo hi\n")])
    assert content_digest(tmp_path) == expected


def test_empty_subject_digests_no_lines(tmp_path: Path) -> None:
    assert content_digest(tmp_path) == "sha256:" + _sha(b"")


def test_lines_sort_by_whole_posix_path_not_directory_walk_order(tmp_path: Path) -> None:
    # A per-directory walk would emit a/b first; by POSIX path '-' < '.' < '/'.
    _write(tmp_path, {"a/b": b"1", "a-b": b"2", "a.txt": b"3", "B": b"4"})
    expected = _expected([("B", b"4"), ("a-b", b"2"), ("a.txt", b"3"), ("a/b", b"1")])
    assert content_digest(tmp_path) == expected


def test_evals_and_git_are_left_out_only_at_top_level(tmp_path: Path) -> None:
    _write(tmp_path, {"SKILL.md": b"x"})
    before = content_digest(tmp_path)
    _write(tmp_path, {"evals/cases/a.yaml": b"task: t\n", ".git/HEAD": b"ref\n"})
    assert content_digest(tmp_path) == before
    _write(tmp_path, {"docs/evals/note.md": b"n", "docs/.git": b"g"})
    expected = _expected([("SKILL.md", b"x"), ("docs/.git", b"g"), ("docs/evals/note.md", b"n")])
    assert content_digest(tmp_path) == expected


def test_os_junk_files_are_left_out_at_any_depth(tmp_path: Path) -> None:
    _write(tmp_path, {"SKILL.md": b"x"})
    before = content_digest(tmp_path)
    _write(tmp_path, {".DS_Store": b"1", "sub/Thumbs.db": b"2", "sub/deep/.DS_Store": b"3"})
    assert content_digest(tmp_path) == before


def test_symlinks_are_left_out_and_never_followed(tmp_path: Path) -> None:
    subject = tmp_path / "subject"
    outside = tmp_path / "outside"
    _write(subject, {"SKILL.md": b"x"})
    _write(outside, {"secret.txt": b"s"})
    before = content_digest(subject)
    os.symlink(outside / "secret.txt", subject / "link.txt")
    os.symlink(outside, subject / "linkdir")
    os.symlink(subject / "missing", subject / "dangling")
    assert content_digest(subject) == before


def test_a_backslash_in_a_posix_name_stays_literal(tmp_path: Path) -> None:
    _write(tmp_path, {"a\\b": b"1"})
    assert content_digest(tmp_path) == _expected([("a\\b", b"1")])


def test_file_modes_do_not_count(tmp_path: Path) -> None:
    _write(tmp_path, {"run.sh": b"echo\n"})
    before = content_digest(tmp_path)
    (tmp_path / "run.sh").chmod(0o755)
    assert content_digest(tmp_path) == before


@settings(max_examples=25)
@given(
    index=st.integers(min_value=0, max_value=2),
    extra=st.binary(min_size=1, max_size=8),
    rename=st.booleans(),
)
def test_any_change_to_an_included_file_changes_the_digest(
    tmp_path_factory: pytest.TempPathFactory, index: int, extra: bytes, rename: bool
) -> None:
    root = tmp_path_factory.mktemp("subject")
    names = ["SKILL.md", "lib/a.py", "lib/deep/b.txt"]
    _write(root, {name: name.encode() for name in names})
    before = content_digest(root)
    target = root / names[index]
    if rename:
        target.rename(target.with_name("renamed"))
    else:
        target.write_bytes(target.read_bytes() + extra)
    assert content_digest(root) != before


def test_eval_assets_digest_covers_everything_under_evals(tmp_path: Path) -> None:
    evals = tmp_path / "evals"
    _write(evals, {"compare.yaml": b"name: s\n", "cases/a.yaml": b"task: t\n", ".DS_Store": b""})
    expected = _expected([("cases/a.yaml", b"task: t\n"), ("compare.yaml", b"name: s\n")])
    assert eval_assets_digest(evals) == expected
    _write(evals, {"fixtures/f/data.txt": b"d"})
    assert eval_assets_digest(evals) != expected


def test_case_digest_without_fixture_is_the_case_bytes(tmp_path: Path) -> None:
    case = tmp_path / "a.yaml"
    case.write_bytes(b"task: t\nfiles:\n  x.txt: hello\n")
    assert case_digest(case) == _expected([("case", case.read_bytes())])


def test_case_digest_includes_its_fixture_files(tmp_path: Path) -> None:
    _write(tmp_path, {"cases/a.yaml": b"task: t\nfixture: ../fixtures/repo\n"})
    _write(tmp_path, {"fixtures/repo/main.py": b"print(1)\n", "fixtures/repo/z/y.txt": b"y"})
    case = tmp_path / "cases" / "a.yaml"
    expected = _expected(
        [
            ("case", case.read_bytes()),
            ("fixture/main.py", b"print(1)\n"),
            ("fixture/z/y.txt", b"y"),
        ]
    )
    assert case_digest(case) == expected
    (tmp_path / "fixtures/repo/main.py").write_bytes(b"print(2)\n")
    assert case_digest(case) != expected


def test_case_digest_refuses_a_missing_fixture(tmp_path: Path) -> None:
    case = tmp_path / "a.yaml"
    case.write_bytes(b"task: t\nfixture: nope\n")
    with pytest.raises(ConfigError, match=r"fixture 'nope' is not a directory"):
        case_digest(case)


def test_a_subject_that_is_not_a_directory_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="expected a directory"):
        content_digest(tmp_path / "missing")


def test_an_unreadable_file_is_a_config_error(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads every file")
    _write(tmp_path, {"locked.txt": b"x"})
    (tmp_path / "locked.txt").chmod(0)
    try:
        with pytest.raises(ConfigError, match="cannot read"):
            content_digest(tmp_path)
    finally:
        (tmp_path / "locked.txt").chmod(0o644)
