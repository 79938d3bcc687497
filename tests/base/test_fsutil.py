"""Atomic writes and the JSON writer."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trialrun.base.fsutil import (
    atomic_write_bytes,
    atomic_write_text,
    dumps_json,
    make_output_dir,
    read_problem,
    write_json,
)
from trialrun.errors import ConfigError

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


def test_creates_parent_directories_and_writes_exact_bytes(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "out.bin"
    atomic_write_bytes(target, b"\x00\xffdata")
    assert target.read_bytes() == b"\x00\xffdata"
    assert list(target.parent.iterdir()) == [target]


def test_text_is_utf8_and_newlines_are_not_translated(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    atomic_write_text(target, "é\nline\r\n")
    assert target.read_bytes() == "é\nline\r\n".encode()


def test_replaces_an_existing_file_and_keeps_its_permissions(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    target.write_text("old")
    os.chmod(target, 0o640)
    atomic_write_text(target, "new")
    assert target.read_text() == "new"
    if os.name == "posix":
        assert stat.S_IMODE(target.stat().st_mode) == 0o640


def test_failure_mid_write_keeps_the_old_file_and_removes_the_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "summary.json"
    target.write_text("old contents")

    def broken_fsync(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(OSError, match="No space left"):
        atomic_write_text(target, "new contents")
    assert target.read_text() == "old contents"
    assert [p.name for p in tmp_path.iterdir()] == ["summary.json"]


def test_interrupt_during_rename_keeps_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "report.html"
    target.write_text("old")

    def interrupted_replace(src: object, dst: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupted_replace)
    with pytest.raises(KeyboardInterrupt):
        atomic_write_text(target, "new")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]


def test_unserialisable_value_writes_nothing(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    with pytest.raises(TypeError):
        write_json(target, {"x": object()})
    assert not target.exists()
    assert list(tmp_path.iterdir()) == []


def test_write_json_format(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    write_json(target, {"b": 1, "a": {"d": "é", "c": [1, 2]}})
    assert target.read_text(encoding="utf-8") == (
        '{\n  "a": {\n    "c": [\n      1,\n      2\n    ],\n    "d": "é"\n  },\n  "b": 1\n}\n'
    )


def test_lone_surrogates_are_escaped_not_fatal(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    value = {"message": "bad \ud800 text", "\udfff": "key"}
    write_json(target, value)
    raw = target.read_bytes()
    raw.decode("utf-8")  # valid UTF-8
    assert b"\\ud800" in raw and b"\\udfff" in raw
    assert json.loads(raw) == value


@given(json_values)
def test_dumps_json_round_trips_and_always_encodes(value: object) -> None:
    text = dumps_json(value)
    text.encode("utf-8")
    assert json.loads(text) == json.loads(json.dumps(value))


@given(json_values)
def test_dumps_json_is_deterministic(value: object) -> None:
    assert dumps_json(value) == dumps_json(json.loads(dumps_json(value)))


def test_make_output_dir_names_the_file_in_the_way(tmp_path: Path) -> None:
    (tmp_path / "blocker").write_text("a file", encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        make_output_dir(tmp_path / "blocker" / "out" / "run")
    assert str(caught.value) == (
        f"{tmp_path / 'blocker'}: expected a folder, found a file "
        f"(a folder is needed here for {tmp_path / 'blocker' / 'out' / 'run'})"
    )
    make_output_dir(tmp_path / "fresh" / "run")
    assert (tmp_path / "fresh" / "run").is_dir()


def test_read_problem_says_why_without_repeating_the_path(tmp_path: Path) -> None:
    problems = []
    for target in (tmp_path / "missing.txt", tmp_path):
        with pytest.raises(OSError) as caught:
            target.read_text(encoding="utf-8")
        problems.append(read_problem(caught.value))
    with pytest.raises(UnicodeDecodeError) as decoding:
        b"ok\x80".decode("utf-8")
    problems.append(read_problem(decoding.value))
    assert problems == [
        "file not found",
        "expected a file, found a folder",
        "not UTF-8 text: byte 0x80 at offset 2",
    ]
