"""Memory: a large cassette costs a small part of its size, not several times it.

A 500 MB cassette once peaked at 2.4 GB: its bytes, their text, the text split into lines and
every recording parsed, all held at once. Loading now keeps a few words a recording and parses
a recording again when a call uses it.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from trialrun.errors import CassetteError
from trialrun.tools.cassette import Cassette

# Loads and replays a cassette in a process of its own, so that its peak memory is the
# cassette's alone: the peak resident size (Linux's VmHWM) after it is reset to the current
# size just before the load. ru_maxrss would not do: it starts from the size of the process
# that started the child (pytest's), and counts the interpreter's imports.
_REPLAY = r"""
import gc, hashlib, json, sys
from pathlib import Path
from trialrun.tools.cassette import Cassette, ReplayBackend

def peak():
    status = Path("/proc/self/status").read_text().splitlines()
    return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmHWM:"))

gc.collect()
Path("/proc/self/clear_refs").write_text("5")  # the peak is now the current size
before = peak()
backend = ReplayBackend(Cassette.load(Path(sys.argv[1])))
served = hashlib.sha256()
for i in range(int(sys.argv[2])):
    outcome = backend.answer_now("fetch", {"q": f"query {i}", "id": i})
    served.update(json.dumps(outcome.result, sort_keys=True).encode())
extra = peak() - before
print(json.dumps({"extra": extra, "served": served.hexdigest(), "unused": backend.unused()}))
"""


def _result(i: int) -> dict[str, Any]:
    """A search result as tools return them: many small objects, which parse large."""
    hits = [
        {"id": f"doc-{i}-{n}", "title": f"Result {n} for query {i}", "score": n / 7, "tags": ["a"]}
        for n in range(30)
    ]
    return {"id": i, "hits": hits, "total": 30, "next": None}


@pytest.mark.skipif(
    not Path("/proc/self/clear_refs").exists(), reason="reads the peak memory as Linux reports it"
)
def test_a_large_cassette_replays_in_a_fraction_of_its_size(tmp_path: Path) -> None:
    count = 18_000  # ~55 MB: large enough to dwarf the interpreter's noise, fast to write
    path = tmp_path / "big.jsonl"
    expected = hashlib.sha256()
    with path.open("w", encoding="utf-8") as file:
        for i in range(count):
            result = _result(i)
            expected.update(json.dumps(result, sort_keys=True).encode())
            line = {"tool": "fetch", "args": {"id": i, "q": f"query {i}"}, "ok": True}
            file.write(json.dumps({**line, "result": result, "error": None}) + "\n")
    size = path.stat().st_size
    assert size > 50 * 1024 * 1024
    done = subprocess.run(
        [sys.executable, "-c", _REPLAY, str(path), str(count)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    # Every call got its own recording, exactly as recorded.
    assert (report["served"], report["unused"]) == (expected.hexdigest(), 0)
    # The bound is 1.5x the file; what loading keeps is far less (the keys, offsets and
    # digests: ~3% here). Before, this peaked at ~6x the file.
    assert report["extra"] <= 0.25 * size, (
        f"loading and replaying a {size / 2**20:.0f} MB cassette took "
        f"{report['extra'] / 2**20:.0f} MB more memory at its peak"
    )


def _line(i: int, result: str) -> str:
    return json.dumps({"tool": "fetch", "args": {"id": i}, "ok": True, "result": result})


def _large_cassette(path: Path, *results: str) -> Path:
    """A cassette of one recording per result, too large to be kept in memory (over 4 MB)."""
    padding = json.dumps({"tool": "pad", "args": {}, "ok": True, "result": "x" * 5_000_000})
    lines = [_line(i, result) for i, result in enumerate(results)]
    path.write_text("\n".join([*lines, padding]) + "\n", encoding="utf-8")
    return path


def test_a_recording_rewritten_during_the_run_is_refused_not_served(tmp_path: Path) -> None:
    # A large cassette is read again when a call uses a recording: the agent under test could
    # rewrite the file in between to choose its own tool results.
    path = _large_cassette(tmp_path / "c.jsonl", "real", "real")
    cassette = Cassette.load(path)
    assert cassette.take("fetch", {"id": 0}).result == "real"
    with path.open("r+b") as file:  # in place, same length: only the bytes differ
        file.seek(len(_line(0, "real")) + 1)
        file.write(_line(1, "fake").encode())
    with pytest.raises(CassetteError) as caught:
        cassette.take("fetch", {"id": 1})
    assert (caught.value.file, caught.value.line) == (str(path), 2)
    assert "the cassette changed during the run" in caught.value.message
    # Nothing was used up: the recording is still one no call consumed.
    assert cassette.unused_tools() == ["fetch", "pad"]


def test_a_cassette_replaced_after_its_load_is_refused_too(tmp_path: Path) -> None:
    path = _large_cassette(tmp_path / "c.jsonl", "real")
    loaded = Cassette.load(path)
    _large_cassette(tmp_path / "other.jsonl", "fake").replace(path)  # as the recorder writes
    with pytest.raises(CassetteError, match="the cassette changed during the run"):
        loaded.fresh().take("fetch", {"id": 0})


# The MCP proxy keeps its cassette's records parsed (it serves them from a process of its own),
# but reading it needs no copy of the whole file beside them: the peak while reading, less what
# stays held after, is what reading alone cost.
_READ_MCP = r"""
import gc, json, sys
from pathlib import Path
from trialrun.mcp_proxy.cassette import read_cassette
from trialrun.mcp_proxy.events import read_events

def status(name):
    lines = Path("/proc/self/status").read_text().splitlines()
    return next(int(line.split()[1]) * 1024 for line in lines if line.startswith(name + ":"))

gc.collect()
Path("/proc/self/clear_refs").write_text("5")
if sys.argv[2] == "cassette":
    cassette, problems = read_cassette(Path(sys.argv[1]))
    read = len(cassette.calls)
else:
    events, problems = read_events(Path(sys.argv[1])), []
    read = len(events)
peak, held = status("VmHWM"), status("VmRSS")
print(json.dumps({"transient": peak - held, "read": read, "problems": problems}))
"""


@pytest.mark.skipif(
    not Path("/proc/self/clear_refs").exists(), reason="reads the peak memory as Linux reports it"
)
@pytest.mark.parametrize("what", ["cassette", "events"])
def test_reading_a_large_mcp_cassette_holds_no_copy_of_the_file(tmp_path: Path, what: str) -> None:
    # The proxy's events file holds the same results again: the runner reads it as a case ends.
    count = 8_000  # ~24 MB
    path = tmp_path / "c.mcp-docs.jsonl"
    with path.open("w", encoding="utf-8") as file:
        for i in range(count):
            line = {"tool": "fetch", "args": {"id": i}, "ok": True, "result": _result(i)}
            file.write(json.dumps(line, sort_keys=True) + "\n")
    size = path.stat().st_size
    done = subprocess.run(
        [sys.executable, "-c", _READ_MCP, str(path), what],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["read"], report["problems"]) == (count, [])
    # Before, the file's bytes, its text and its lines were alive at once: ~2-3x the file.
    assert report["transient"] <= 0.5 * size, (
        f"reading a {size / 2**20:.0f} MB MCP {what} took {report['transient'] / 2**20:.0f} MB "
        "more at its peak than it holds"
    )


_LOAD_MODEL = r"""
import gc, json, sys
from pathlib import Path
from trialrun.gateway.cassette import ModelCassette
from trialrun.gateway.normalize import RequestNormalizer

def status(name):
    lines = Path("/proc/self/status").read_text().splitlines()
    return next(int(line.split()[1]) * 1024 for line in lines if line.startswith(name + ":"))

normalizer = RequestNormalizer()
gc.collect()
Path("/proc/self/clear_refs").write_text("5")
cassette = ModelCassette.load(Path(sys.argv[1]), normalizer)
peak, held = status("VmHWM"), status("VmRSS")
print(json.dumps({"transient": peak - held, "recordings": len(cassette.unused())}))
"""


@pytest.mark.skipif(
    not Path("/proc/self/clear_refs").exists(), reason="reads the peak memory as Linux reports it"
)
def test_loading_a_large_model_cassette_holds_no_copy_of_the_file(tmp_path: Path) -> None:
    # The gateway answers from its recordings' bodies, which it keeps; the file itself, its
    # text and its lines it need not keep beside them.
    count = 2_500  # ~24 MB
    body = json.dumps({"choices": [{"message": {"content": "lorem ipsum " * 800}}]})
    path = tmp_path / "c.model.jsonl"
    with path.open("w", encoding="utf-8") as file:
        file.write(json.dumps({"format": "trialrun-model-cassette", "schema_version": 1}) + "\n")
        for i in range(count):
            request = {"model": "m", "messages": [{"role": "user", "content": f"question {i}"}]}
            line = {
                "provider": "openai",
                "method": "POST",
                "path": "/v1/chat/completions",
                "request": request,
                "status": 200,
                "content_type": "application/json",
                "body": body,
            }
            file.write(json.dumps(line, sort_keys=True) + "\n")
    size = path.stat().st_size
    done = subprocess.run(
        [sys.executable, "-c", _LOAD_MODEL, str(path)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["recordings"] == count
    assert report["transient"] <= 0.5 * size, (
        f"loading a {size / 2**20:.0f} MB model cassette took {report['transient'] / 2**20:.0f} "
        "MB more at its peak than it holds"
    )


# ``trialrun run`` in a process of its own, measured from after a first small run (every module
# the run needs imported): a suite whose one case makes three calls against a large cassette.
_RUN = r"""
import contextlib, gc, io, json, sys
from pathlib import Path
from trialrun.cli import run_cli

def status(name):
    lines = Path("/proc/self/status").read_text().splitlines()
    return next(int(line.split()[1]) * 1024 for line in lines if line.startswith(name + ":"))

def run(suite):
    with contextlib.redirect_stdout(io.StringIO()):
        return run_cli(["run", suite, "--no-baseline", "--out", sys.argv[3]])

warm = run(sys.argv[1])
gc.collect()
Path("/proc/self/clear_refs").write_text("5")
before = status("VmRSS")
code = run(sys.argv[2])
print(json.dumps({"codes": [warm, code], "extra": status("VmHWM") - before}))
"""

_AGENT = r"""
import json, sys
json.loads(sys.stdin.readline())
for i in range(3):
    call = {"type": "tool_call", "name": "fetch", "call_id": f"c{i}", "args": {"id": i}}
    sys.stdout.write(json.dumps(call) + "\n")
    sys.stdout.flush()
    assert json.loads(sys.stdin.readline())["result"]["id"] == i
sys.stdout.write(json.dumps({"type": "final_output", "output": {"answer": "done"}}) + "\n")
"""


def _suite(root: Path, recordings: int) -> Path:
    (root / "cases").mkdir(parents=True)
    (root / "agent.py").write_text(_AGENT, encoding="utf-8")
    (root / "suite.yaml").write_text(
        f"suite_name: s\nagent_command: {json.dumps([sys.executable, 'agent.py'])}\n"
        "mode: replay\ncases_path: cases\ntool_registry: [fetch]\n",
        encoding="utf-8",
    )
    case = {"id": "t1", "input": {}, "cassette": "big.jsonl"}
    (root / "cases" / "t1.yaml").write_text(json.dumps(case), encoding="utf-8")
    with (root / "big.jsonl").open("w", encoding="utf-8") as file:
        for i in range(recordings):
            line = {"tool": "fetch", "args": {"id": i}, "ok": True, "result": _result(i)}
            file.write(json.dumps(line) + "\n")
    return root


@pytest.mark.skipif(
    not Path("/proc/self/clear_refs").exists(), reason="reads the peak memory as Linux reports it"
)
def test_a_run_replaying_from_a_large_cassette_costs_a_fraction_of_its_size(
    tmp_path: Path,
) -> None:
    small = _suite(tmp_path / "small", 3)
    large = _suite(tmp_path / "large", 18_000)  # ~55 MB
    size = (large / "big.jsonl").stat().st_size
    done = subprocess.run(
        [sys.executable, "-c", _RUN, str(small), str(large), str(tmp_path / "out")],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["codes"] == [0, 0], done.stderr
    # The whole run: load, preflight, the case, its artifacts (before: ~8x the file).
    assert report["extra"] <= 0.25 * size, (
        f"a run over a {size / 2**20:.0f} MB cassette took {report['extra'] / 2**20:.0f} MB more "
        "memory at its peak"
    )
