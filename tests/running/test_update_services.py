"""``run --mode update`` for the model gateway and the HTTP recorder (issue 32, item 1).

A model call or HTTP request that matches an unused recording is answered from it and never
reaches the scripted upstream, and its line stays byte for byte; a changed one is forwarded and
recorded in its place; a recording no request used is dropped, or kept with ``--keep-unused``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from builders import call_cli, only_run_dir
from gateway_fake_upstream import FakeUpstream
from http_upstream import ScriptedApi, http_suite

pytestmark = pytest.mark.slow

AGENTS = Path(__file__).resolve().parents[1] / "agents"

MODEL_AGENT = r"""
import json, os, urllib.request
import trialrun.agent as sdk

def chat(text):
    body = json.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": text}]})
    request = urllib.request.Request(
        os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=body.encode(),
        headers={"Content-Type": "application/json",
                 "Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]},
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        return json.loads(response.read())["choices"][0]["message"]["content"]

session = sdk.connect()
session.final_output({"answers": [chat(text) for text in session.input["texts"]]})
"""


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-record")


def model_suite(root: Path, upstream: str, texts: list[str]) -> Path:
    suite = root / "suite"
    (suite / "cases").mkdir(parents=True, exist_ok=True)
    (suite / "agent.py").write_text(MODEL_AGENT, encoding="utf-8")
    (suite / "suite.yaml").write_text(
        "suite_name: models\n"
        f"agent_command: {json.dumps([sys.executable, 'agent.py'])}\n"
        "agent_channel: fd\nmode: replay\ncases_path: cases\ntool_registry: []\n"
        f"model_gateway:\n  upstreams: {{openai: {json.dumps(upstream)}}}\n",
        encoding="utf-8",
    )
    set_input(suite, {"texts": texts})
    return suite


def set_input(suite: Path, value: dict[str, Any]) -> None:
    case = {"id": "t1", "input": value, "cassette": "cassettes/t1.jsonl"}
    (suite / "cases" / "t1.yaml").write_text(json.dumps(case), encoding="utf-8")


def run(suite: Path, out: str, capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, Any]:
    code, stdout, stderr = call_cli(
        ["run", str(suite), "--out", out, "--no-baseline", *extra], capsys
    )
    assert code == 0, stdout + stderr
    summary: dict[str, Any] = json.loads((only_run_dir(Path(out)) / "summary.json").read_text())
    return summary


def lines_of(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines()


def counts(summary: dict[str, Any]) -> tuple[int, int, int, int]:
    recordings = summary["cases"][0]["recordings"]
    return (
        recordings["kept"],
        recordings["replaced"],
        recordings["added"],
        recordings["dropped"],
    )


def sent_texts(upstream: FakeUpstream) -> list[str]:
    return [r.body["messages"][-1]["content"] for r in upstream.received]


def recorded_model(
    tmp_path: Path, upstream: FakeUpstream, capsys: pytest.CaptureFixture[str], texts: list[str]
) -> tuple[Path, Path, list[bytes]]:
    """A suite whose model recording holds ``texts``' calls, its first line rewritten by hand
    in a layout the recorder would not write (update must copy it, not write it again)."""
    suite = model_suite(tmp_path, upstream.url, texts)
    run(suite, "out-record", capsys, "--mode", "record")
    path = suite / "cassettes" / "t1.model.jsonl"
    header, first, *rest = path.read_text(encoding="utf-8").splitlines()
    reordered = dict(reversed(list(json.loads(first).items())))
    path.write_text("\n".join([header, json.dumps(reordered), *rest]) + "\n", encoding="utf-8")
    upstream.received.clear()
    return suite, path, lines_of(path)


def test_update_forwards_only_the_changed_model_call_and_keeps_the_others_byte_for_byte(
    tmp_path: Path, upstream: FakeUpstream, capsys: pytest.CaptureFixture[str]
) -> None:
    suite, path, old = recorded_model(tmp_path, upstream, capsys, ["one", "two", "three"])
    set_input(suite, {"texts": ["one", "TWO", "three"]})

    summary = run(suite, "out-update", capsys, "--mode", "update")

    assert sent_texts(upstream) == ["TWO"]
    new = lines_of(path)
    assert len(new) == 4
    assert (new[0], new[1], new[3]) == (old[0], old[1], old[3])
    assert json.loads(new[2])["request"]["messages"][0]["content"] == "TWO"
    assert counts(summary) == (2, 1, 0, 0)

    # What was kept and recorded replays with nothing missing or left over.
    replayed = run(suite, "out-replay", capsys)
    assert replayed["cases"][0]["status"] == "pass"
    assert replayed["cases"][0]["unused_recordings"] == 0
    assert sent_texts(upstream) == ["TWO"]


def test_a_model_call_no_longer_made_is_dropped_or_kept_with_keep_unused(
    tmp_path: Path, upstream: FakeUpstream, capsys: pytest.CaptureFixture[str]
) -> None:
    suite, path, old = recorded_model(tmp_path, upstream, capsys, ["one", "two", "three"])
    set_input(suite, {"texts": ["one", "three"]})

    kept = run(suite, "out-keep", capsys, "--mode", "update", "--keep-unused")
    assert sent_texts(upstream) == []
    # The calls' recordings in call order, then the unused one, every line as it was.
    assert lines_of(path) == [old[0], old[1], old[3], old[2]]
    assert counts(kept) == (3, 0, 0, 0)

    dropped = run(suite, "out-drop", capsys, "--mode", "update")
    assert sent_texts(upstream) == []
    assert lines_of(path) == [old[0], old[1], old[3]]
    assert counts(dropped) == (2, 0, 0, 1)


def test_a_failed_update_leaves_the_model_recording_as_it_was(
    tmp_path: Path, upstream: FakeUpstream, capsys: pytest.CaptureFixture[str]
) -> None:
    suite, path, old = recorded_model(tmp_path, upstream, capsys, ["one", "two"])
    set_input(suite, {"texts": ["one", "changed"]})
    # The agent makes its calls, then dies before its answer: the case errors.
    ends = 'session.final_output({"answers": [chat(text) for text in session.input["texts"]]})'
    dying = MODEL_AGENT.replace(ends, '[chat(text) for text in session.input["texts"]]\nexit(3)')
    assert dying != MODEL_AGENT
    (suite / "agent.py").write_text(dying, encoding="utf-8")

    code, stdout, stderr = call_cli(
        ["run", str(suite), "--out", "out-fail", "--no-baseline", "--mode", "update"], capsys
    )

    assert code == 1, stdout + stderr
    assert "Cassettes kept as they were" in stdout
    assert sent_texts(upstream) == ["changed"]  # recorded, then not committed
    assert lines_of(path) == old


def http_case(suite: Path, urls: list[str]) -> None:
    case = {"id": "t1", "input": {"urls": urls, "token": "t"}, "cassette": "cassettes/t1.jsonl"}
    (suite / "cases" / "t1.yaml").write_text(json.dumps(case))


def test_update_sends_only_the_changed_http_request_upstream(
    tmp_path: Path, apis: tuple[ScriptedApi, ScriptedApi], capsys: pytest.CaptureFixture[str]
) -> None:
    api, _ = apis
    suite = http_suite(tmp_path, "web", AGENTS / "http_agent.py")
    pages = [f"{api.url}/items?page={n}" for n in (1, 2, 3)]
    http_case(suite, pages)
    run(suite, "out-record", capsys, "--mode", "record")
    path = suite / "cassettes" / "t1.http.jsonl"
    old = lines_of(path)
    assert len(old) == 4
    api.requests.clear()

    http_case(suite, [pages[0], f"{api.url}/items?page=9", pages[2]])
    summary = run(suite, "out-update", capsys, "--mode", "update")

    assert api.requests == [("GET", "/items?page=9")]
    new = lines_of(path)
    assert (new[0], new[1], new[3]) == (old[0], old[1], old[3])
    assert json.loads(new[2])["url"].endswith("page=9")
    assert counts(summary) == (2, 1, 0, 0)

    http_case(suite, [pages[0]])
    dropped = run(suite, "out-drop", capsys, "--mode", "update")
    assert api.requests == [("GET", "/items?page=9")]
    assert lines_of(path) == [old[0], old[1]]
    assert counts(dropped) == (1, 0, 0, 2)


def test_update_leaves_a_model_recording_it_cannot_read_alone_and_names_the_line(
    tmp_path: Path, upstream: FakeUpstream, capsys: pytest.CaptureFixture[str]
) -> None:
    suite, path, old = recorded_model(tmp_path, upstream, capsys, ["one"])
    broken = b"\n".join([old[0], b'{"provider": "openai"']) + b"\n"
    path.write_bytes(broken)

    code, stdout, stderr = call_cli(
        ["run", str(suite), "--out", "out-bad", "--no-baseline", "--mode", "update"], capsys
    )

    assert code != 0
    assert "t1.model.jsonl:2" in stdout + stderr
    assert sent_texts(upstream) == []
    assert path.read_bytes() == broken
