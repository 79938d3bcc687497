"""Record mode: redacted entries, commit only on a clean end, one recorder per cassette."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trialrun.config.models import Normalization, ReplaceText
from trialrun.errors import CassetteError
from trialrun.tools.base import ToolOutcome
from trialrun.tools.cassette import Cassette, ReplayBackend
from trialrun.tools.live import LiveBackend, ToolFn, builtin_tools
from trialrun.tools.recorder import CassetteInUseError, RecordingBackend

PROJECT_KEY = "sk-proj-" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z" * 2


def failing(args: dict[str, Any]) -> Any:
    raise RuntimeError("upstream timed out after 5s")


def live(normalization: Normalization | None = None, **tools: ToolFn) -> LiveBackend:
    return LiveBackend(
        {**builtin_tools(), "flaky": failing, **tools}, timeout_s=5, normalization=normalization
    )


def record(backend: RecordingBackend, calls: list[tuple[str, dict[str, Any]]]) -> list[ToolOutcome]:
    async def run() -> list[ToolOutcome]:
        return [await backend.call(name, args) for name, args in calls]

    return asyncio.run(run())


def test_a_clean_case_writes_the_peers_recorder_layout(tmp_path: Path) -> None:
    path = tmp_path / "cassettes" / "t1.jsonl"
    recorder = RecordingBackend(live(), path)
    outcomes = record(recorder, [("search_docs", {"q": "reset"}), ("flaky", {})])
    assert not path.exists()
    recorder.close(clean=True)
    # The peer's layout plus ``recorded_at``, a key RunLedger 0.2.3 ignores when it reads.
    stamped = path.read_text(encoding="utf-8").splitlines()
    stamp = re.compile(r', "recorded_at": "\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"')
    assert all(len(stamp.findall(line)) == 1 for line in stamped)
    lines = [stamp.sub("", line) for line in stamped]
    assert lines[0].startswith('{"args": {"q": "reset"}, "ok": true, "result": {"hits": [')
    assert lines[1] == (
        '{"args": {}, "error": "tool \'flaky\' raised RuntimeError: upstream timed out after 5s", '
        '"ok": false, "result": null, "tool": "flaky"}'
    )
    assert outcomes[1] == ToolOutcome(
        ok=False, error="tool 'flaky' raised RuntimeError: upstream timed out after 5s"
    )
    assert not recorder.temp_path.exists()
    assert recorder.recorded == 2


def test_a_recording_replays_to_the_same_answers(tmp_path: Path) -> None:
    path = tmp_path / "t1.jsonl"
    calls: list[tuple[str, dict[str, Any]]] = [
        ("search_docs", {"q": "a"}),
        ("search_docs", {"q": "a"}),
        ("flaky", {"n": 1}),
    ]
    recorder = RecordingBackend(live(), path)
    recorded = record(recorder, calls)
    recorder.close(clean=True)
    replay = ReplayBackend(Cassette.load(path))
    assert [asyncio.run(replay.call(name, args)) for name, args in calls] == recorded
    assert replay.unused() == 0


def test_an_unclean_end_keeps_the_previous_cassette_byte_identical(tmp_path: Path) -> None:
    path = tmp_path / "t1.jsonl"
    good = b'{"tool":"search_docs","args":{"q":"x"},"ok":true,"result":{"hits":["good"]}}\n'
    path.write_bytes(good)
    recorder = RecordingBackend(live(), path)
    record(recorder, [("search_docs", {"q": "y"})])
    assert path.read_bytes() == good
    recorder.close(clean=False)
    assert path.read_bytes() == good
    assert not recorder.temp_path.exists()
    assert list(tmp_path.iterdir()) == [path]


def test_close_is_idempotent_and_a_closed_recorder_refuses_calls(tmp_path: Path) -> None:
    path = tmp_path / "t1.jsonl"
    recorder = RecordingBackend(live(), path)
    recorder.close(clean=True)
    recorder.close(clean=False)
    assert path.read_bytes() == b""
    assert recorder.unused() == 0
    with pytest.raises(CassetteError, match="already closed"):
        record(recorder, [("search_docs", {"q": "late"})])


def test_secrets_are_redacted_on_disk_but_not_in_the_answer(tmp_path: Path) -> None:
    path = tmp_path / "t1.jsonl"
    recorder = RecordingBackend(
        live(keys=lambda args: {"key": PROJECT_KEY, "note": "rotated"}), path
    )
    [outcome] = record(recorder, [("keys", {"user": "ann", "password": "hunter2"})])
    recorder.close(clean=True)
    text = path.read_text(encoding="utf-8")
    assert PROJECT_KEY not in text and "hunter2" not in text
    [saved] = Cassette.load(path).entries
    assert saved.args == {"user": "ann", "password": "[REDACTED]"}
    assert saved.result["note"] == "rotated" and saved.result["key"] != PROJECT_KEY
    assert outcome.result == {"key": PROJECT_KEY, "note": "rotated"}
    replay = Cassette.load(path)
    assert replay.take("keys", {"user": "ann", "password": "another secret"}).line == 1


def test_recorded_results_are_normalized_and_stay_stable_on_replay(tmp_path: Path) -> None:
    rules = Normalization(
        strip_keys=["request_id"],
        replace_text=[ReplaceText(pattern="a", replacement="<a>", flags="i")],
    )
    path = tmp_path / "t1.jsonl"
    recorder = RecordingBackend(
        live(rules, fetch=lambda args: {"request_id": "r-9", "text": "A cat"}), path
    )
    [outcome] = record(recorder, [("fetch", {})])
    recorder.close(clean=True)
    assert Cassette.load(path).entries[0].result == {"text": "<a> c<a>t"}
    assert outcome.result == {"text": "<a> c<a>t"}
    replayed = asyncio.run(ReplayBackend(Cassette.load(path), rules).call("fetch", {}))
    assert replayed.result == {"text": "<a> c<a>t"}


def test_two_cases_cannot_record_one_cassette_at_once(tmp_path: Path) -> None:
    path = tmp_path / "shared.jsonl"
    first = RecordingBackend(live(), path)
    with pytest.raises(CassetteInUseError) as caught:
        RecordingBackend(live(), tmp_path / "sub" / ".." / "shared.jsonl")
    assert "already being recorded by another case" in str(caught.value)
    first.close(clean=False)
    second = RecordingBackend(live(), path)
    second.close(clean=True)
    assert path.exists()


def test_an_unwritable_directory_is_a_cassette_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(CassetteError, match="cannot start recording"):
        RecordingBackend(live(), blocker / "t1.jsonl")
    recorder = RecordingBackend(live(), tmp_path / "t1.jsonl")  # the guard was released
    recorder.close(clean=False)


def test_text_that_utf8_cannot_hold_is_escaped_and_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "t1.jsonl"
    recorder = RecordingBackend(live(), path)
    record(
        recorder, [("search_docs", {"q": "caf\u00e9 \ud800"}), ("search_docs", {"q": "caf\u00e9"})]
    )
    recorder.close(clean=True)
    raw = path.read_bytes().decode("utf-8").splitlines()
    assert "\\ud800" in raw[0] and "café" in raw[1]
    cassette = Cassette.load(path)
    assert cassette.take("search_docs", {"q": "caf\u00e9 \ud800"}).line == 1


# The alphabet cannot spell a secret shape, so what was recorded is what the agent was sent.
@settings(max_examples=30)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["search_docs", "flaky"]),
            st.dictionaries(
                st.sampled_from(["q", "page"]),
                st.text(alphabet="abcdefg xyz0123\u00e9", max_size=8),
                max_size=2,
            ),
        ),
        max_size=6,
    )
)
def test_any_recording_replays_every_call_in_order(
    tmp_path_factory: pytest.TempPathFactory, calls: list[tuple[str, dict[str, Any]]]
) -> None:
    path = tmp_path_factory.mktemp("rec") / "t.jsonl"
    recorder = RecordingBackend(live(), path)
    recorded = record(recorder, calls)
    recorder.close(clean=True)
    replay = ReplayBackend(Cassette.load(path))
    assert [asyncio.run(replay.call(name, args)) for name, args in calls] == recorded
    assert replay.unused() == 0
