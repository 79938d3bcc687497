"""Bad disks and odd text: a write that fails, a line separator inside JSON, a control in an id.

* A full disk (``ENOSPC``), a read-only file system (``EROFS``) or a refused file (``EACCES``)
  while a command writes ends in exactly one ``error: <file>: <cause>`` line and exit 2, never a
  traceback; the file it was replacing is left as it was and no temporary file stays behind.
  The failure is injected in-process on the writes (``os.write``, ``os.fsync``) or the opens of
  files under the test's output folder only, so it is the same on every machine.
* U+2028, U+2029, U+0085, VT and FF inside JSON strings are data, not line ends: each JSON Lines
  reader (incident import, the gateway's SSE, attempt's usage file, compare's transcripts) gives
  them back unchanged.
* NUL, ESC and bidi controls in a case id are shown as visible escapes (``\\x1b``, ``\\u202e``)
  in report.html, the console, junit.xml and the GitHub step summary.
"""

from __future__ import annotations

import errno
import fnmatch
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from builders import Outcome, call_cli, make_cli_inputs
from paths import DATA_DIR

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/fd").is_dir(), reason="needs /proc to tell which file a write goes to"
)


class BadDisk:
    """Fails writes to the files under ``root`` whose name matches ``pattern``.

    A temporary file is matched by the name it stands for (``.summary.json.<hex>.tmp`` is
    ``summary.json``), so a test names the artifact, not how it happens to be written.
    """

    def __init__(self, monkeypatch: pytest.MonkeyPatch, root: Path, pattern: str, code: int):
        self.root = str(root.resolve())
        self.pattern = pattern
        self.code = code
        self.failed: list[str] = []
        real_write, real_fsync, real_open = os.write, os.fsync, os.open

        def write(fd: int, data: bytes) -> int:
            self._check(_fd_path(fd))
            return real_write(fd, data)

        def fsync(fd: int) -> None:
            self._check(_fd_path(fd))
            real_fsync(fd)

        real_sendfile = os.sendfile

        def sendfile(out_fd: int, in_fd: int, offset: int | None, count: int) -> int:
            self._check(_fd_path(out_fd))
            return real_sendfile(out_fd, in_fd, offset, count)

        def open_(path: str | os.PathLike[str], flags: int, *args: object, **kw: object) -> int:
            if code in (errno.EACCES, errno.EROFS) and flags & (os.O_WRONLY | os.O_RDWR):
                self._check(os.path.abspath(os.fspath(path)))
            return real_open(path, flags, *args, **kw)  # type: ignore[arg-type]

        monkeypatch.setattr(os, "write", write)
        monkeypatch.setattr(os, "fsync", fsync)
        monkeypatch.setattr(os, "open", open_)
        monkeypatch.setattr(os, "sendfile", sendfile)  # shutil's copies

    def _check(self, path: str) -> None:
        if not path.startswith(self.root + os.sep) or os.path.isdir(path):
            return
        name = os.path.basename(path)
        if name.startswith(".") and name.endswith(".tmp"):
            name = name[1:].rsplit(".", 2)[0]
        elif name.startswith(".") and name.endswith(".partial"):
            name = name[1 : -len(".partial")]
        if fnmatch.fnmatch(name, self.pattern):
            self.failed.append(path)
            raise OSError(self.code, os.strerror(self.code))


def _fd_path(fd: int) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return ""


def leftovers(folder: Path) -> list[Path]:
    """Temporary files a write may leave: ``.<name>.<hex>.tmp``, ``.run.jsonl.partial``."""
    return [
        path
        for path in folder.rglob(".*")
        if path.name.endswith((".tmp", ".partial")) or ".partial" in path.name
    ]


def assert_one_error_line(outcome: Outcome, names: str, cause: str) -> str:
    shown = f"exit {outcome.code}\nstdout:\n{outcome.out}\nstderr:\n{outcome.err}"
    assert "Traceback" not in outcome.out + outcome.err, shown
    assert outcome.code == 2, shown
    errors = [line for line in outcome.err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, shown
    assert names in errors[0], f"the error line does not name {names}\n{shown}"
    assert cause in errors[0], f"the error line does not say {cause!r}\n{shown}"
    return errors[0]


NO_SPACE = os.strerror(errno.ENOSPC)
EXPORT = DATA_DIR / "incidents" / "trialrun_run.jsonl"


# -- the inputs, made once by the CLI itself --------------------------------------------------


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_cli_inputs(tmp_path_factory.mktemp("made"))


@pytest.fixture
def work(made: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    for name in ("suite", "run", "keys"):
        shutil.copytree(made / name, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    monkeypatch.delenv("TRIALRUN_SIGN_KEY", raising=False)
    yield tmp_path


# -- a full disk --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("artifact", "code"),
    [
        ("receipt.jsonl", errno.ENOSPC),
        ("run.jsonl", errno.ENOSPC),
        ("summary.json", errno.ENOSPC),
        ("report.html", errno.ENOSPC),
        ("run.jsonl", errno.EROFS),
        ("junit.xml", errno.EACCES),
    ],
)
def test_run_that_cannot_write_says_which_file_and_why_and_leaves_no_temporary_file(
    artifact: str,
    code: int,
    work: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = work / "out"
    disk = BadDisk(monkeypatch, out, artifact, code)
    outcome = call_cli(["run", str(work / "suite"), "--no-baseline", "--out", str(out)], capsys)
    assert disk.failed, "the injected failure never happened"
    assert_one_error_line(outcome, artifact, os.strerror(code))
    assert leftovers(out) == []


def test_merge_on_a_full_disk_leaves_no_temporary_file(
    work: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = work / "merged"
    disk = BadDisk(monkeypatch, out, "report.html", errno.ENOSPC)
    outcome = call_cli(["merge", str(work / "run"), "--out", str(out)], capsys)
    assert disk.failed
    assert_one_error_line(outcome, "report.html", NO_SPACE)
    assert leftovers(out) == []


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS, errno.EACCES])
def test_receipt_sign_that_cannot_write_keeps_the_old_receipt(
    code: int, work: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    receipt = work / "run" / "receipt.jsonl"
    before = receipt.read_bytes()
    disk = BadDisk(monkeypatch, work / "run", "receipt.jsonl", code)
    key = work / "keys" / "receipt-key.pem"
    outcome = call_cli(["receipt", "sign", str(receipt), "--key", str(key)], capsys)
    assert disk.failed
    assert_one_error_line(outcome, str(receipt), os.strerror(code))
    assert receipt.read_bytes() == before
    assert leftovers(work / "run") == []


def test_baseline_promote_on_a_full_disk_keeps_the_old_baseline(
    work: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    baseline = work / "baselines" / "demo.json"
    baseline.parent.mkdir()
    baseline.write_text('{"old": true}\n', encoding="utf-8")
    disk = BadDisk(monkeypatch, baseline.parent, "demo.json", errno.ENOSPC)
    argv = ["baseline", "promote", "--from", str(work / "run"), "--to", str(baseline)]
    outcome = call_cli(argv, capsys)
    assert disk.failed
    assert_one_error_line(outcome, str(baseline), NO_SPACE)
    assert baseline.read_text(encoding="utf-8") == '{"old": true}\n'
    assert leftovers(baseline.parent) == []


def test_keygen_on_a_full_disk_leaves_no_half_key(
    work: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    keys = work / "new-keys"
    disk = BadDisk(monkeypatch, keys, "*.pem", errno.ENOSPC)
    outcome = call_cli(["receipt", "keygen", str(keys)], capsys)
    assert disk.failed
    assert_one_error_line(outcome, "receipt-key.pem", NO_SPACE)
    assert list(keys.iterdir()) == []


def test_attempt_whose_scratch_file_cannot_grow_says_which_file(work: Path) -> None:
    """A real kernel refusal in a child process: a file size limit makes every write past
    100 kB fail with EFBIG, however the file is written; the verify output is 300 kB."""
    (work / "ws").mkdir()
    (work / "ws" / "a.txt").write_text("a\n", encoding="utf-8")
    verify = "head -c 300000 /dev/zero | tr '\\0' a"
    argv = [
        sys.executable, "-m", "trialrun", "attempt", "--goal", "g", "--verify", verify,
        "--agent", "true", "--workspace", "ws", "--receipt", "r/receipt.jsonl",
    ]  # fmt: skip

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, 100_000))

    done = subprocess.run(
        argv, cwd=work, preexec_fn=small_files, capture_output=True, text=True, timeout=120
    )
    line = assert_one_error_line(
        Outcome(done.returncode, done.stdout, done.stderr), "verify-output.txt", "too large"
    )
    assert line.startswith("error: /"), line
    assert (work / "ws" / "a.txt").read_text(encoding="utf-8") == "a\n"


def compare_subject(work: Path, monkeypatch: pytest.MonkeyPatch, case: str) -> None:
    """``work/subject``: a one-case compare whose agent prints 1, with its home in ``work``."""
    evals = work / "subject" / "evals"
    (evals / "cases").mkdir(parents=True)
    (evals / "compare.yaml").write_text(
        "name: demo\nagent:\n  command: [python3, -c, 'print(1)', '{task}']\nk: 1\nseed: 0\n",
        encoding="utf-8",
    )
    (evals / "cases" / f"{case}.yaml").write_text(
        "task: say hi\nchecks:\n  - transcript_mentions: hi\n", encoding="utf-8"
    )
    monkeypatch.setenv("TRIALRUN_HOME", str(work / "home"))
    monkeypatch.setenv("TRIALRUN_HANDLE", "tester")


def test_compare_out_on_a_full_disk_leaves_no_half_copy(
    work: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    compare_subject(work, monkeypatch, "c1")
    out = work / "exported"
    disk = BadDisk(monkeypatch, out, "report.html", errno.ENOSPC)
    outcome = call_cli(["compare", str(work / "subject"), "--out", str(out)], capsys)
    assert disk.failed
    assert_one_error_line(outcome, str(out), NO_SPACE)
    assert [p for p in out.rglob("*") if p.is_file()] == []


@pytest.mark.parametrize(
    ("argv", "folder", "artifact"),
    [
        (["init", "--path", "out"], "out", "suite.yaml"),
        (["incident", "import", str(EXPORT), "--out", "out"], "out", "incident.json"),
        (["receipt", "show", "run/receipt.jsonl", "--html", "out/r.html"], "out", "r.html"),
    ],
)
def test_other_writers_on_a_full_disk(
    argv: list[str],
    folder: str,
    artifact: str,
    work: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    disk = BadDisk(monkeypatch, work / folder, artifact, errno.ENOSPC)
    outcome = call_cli(argv, capsys)
    assert disk.failed
    assert_one_error_line(outcome, artifact, NO_SPACE)
    assert leftovers(work / folder) == []


# -- line separators inside JSON strings ---------------------------------------------------------

SEPARATORS = "a\u2028b\u2029c\x85d\x0be\x0cf"
"""What ``str.splitlines`` ends a line at besides CR and LF; JSON keeps U+2028, U+2029 and
U+0085 raw inside a string (VT and FF it escapes)."""

separated_text = st.text(
    alphabet=st.sampled_from(["a", "é", " ", "\u2028", "\u2029", "\x85", "\x0b", "\x0c", "\x1e"]),
    max_size=12,
)


def jsonl(values: list[object], end: str = "\n") -> str:
    return "".join(json.dumps(value, ensure_ascii=False) + end for value in values)


def test_incident_import_reads_trialrun_s_own_run_jsonl_with_line_separators_in_it(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    case_file = work / "suite" / "cases" / "t1.yaml"
    case = yaml.safe_load(case_file.read_text(encoding="utf-8"))
    case["input"]["note"] = SEPARATORS
    case_file.write_text(json.dumps(case), encoding="utf-8")  # JSON is YAML; escapes stay
    assert call_cli(["run", str(work / "suite"), "--no-baseline", "--out", "out"], capsys).code == 0
    (run_dir,) = (work / "out" / "demo").iterdir()
    assert "\u2028".encode() in (run_dir / "run.jsonl").read_bytes()
    outcome = call_cli(["incident", "import", str(run_dir / "run.jsonl"), "--out", "inc"], capsys)
    assert outcome.code == 0, outcome.err
    incident = json.loads((work / "inc" / "incident.json").read_text(encoding="utf-8"))
    assert incident["input"]["note"] == SEPARATORS


@settings(max_examples=40)
@given(notes=st.lists(separated_text, min_size=1, max_size=4), crlf=st.booleans())
def test_incident_records_split_at_line_feeds_only(
    notes: list[str], crlf: bool, tmp_path_factory: pytest.TempPathFactory
) -> None:
    from trialrun.incident.importers import read_records

    tmp_path = tmp_path_factory.mktemp("example")

    records = [{"type": "log", "n": n, "note": note} for n, note in enumerate(notes)]
    export = tmp_path / "export.jsonl"
    export.write_bytes(jsonl(records, "\r\n" if crlf else "\n").encode("utf-8"))
    assert read_records(export) == records


@settings(max_examples=40)
@given(contents=st.lists(separated_text, min_size=1, max_size=4), crlf=st.booleans())
def test_gateway_sse_events_keep_line_separators_in_their_data(
    contents: list[str], crlf: bool
) -> None:
    from trialrun.gateway.usage import iter_sse_data

    end = "\r\n" if crlf else "\n"
    chunks = [{"choices": [{"delta": {"content": content}}]} for content in contents]
    body = "".join(f"data: {json.dumps(c, ensure_ascii=False)}{end}{end}" for c in chunks)
    assert [json.loads(data) for _, data in iter_sse_data(body)] == chunks


def test_gateway_sse_stream_with_a_line_separator_still_reports_its_usage() -> None:
    from trialrun.gateway.usage import extract_usage

    chunks = [
        {"model": "gpt-x", "choices": [{"delta": {"content": "hi"}}]},
        {
            "model": "gpt-x",
            "choices": [{"delta": {"content": SEPARATORS}}],
            "usage": {"prompt_tokens": 7, "completion_tokens": 3},
        },
    ]
    body = "".join(f"data: {json.dumps(c, ensure_ascii=False)}\n\n" for c in chunks)
    body += "data: [DONE]\n\n"
    usage = extract_usage("openai", "/v1/chat/completions", "text/event-stream", body)
    assert (usage.model, usage.tokens_in, usage.tokens_out) == ("gpt-x", 7, 3)


@settings(max_examples=40)
@given(models=st.lists(separated_text.filter(bool), min_size=1, max_size=4))
def test_attempt_usage_file_lines_keep_line_separators(
    models: list[str], tmp_path_factory: pytest.TempPathFactory
) -> None:
    from trialrun.attempt.transcript import parse_usage_file

    tmp_path = tmp_path_factory.mktemp("example")

    usage = tmp_path / "usage.jsonl"
    lines = [
        {"inputTokens": n, "outputTokens": 1, "model": model} for n, model in enumerate(models)
    ]
    usage.write_bytes(jsonl(lines).encode("utf-8"))
    records = parse_usage_file(usage)
    assert records.rejected == 0, records.problems
    assert [record["model"] for record in records] == models


@settings(max_examples=40)
@given(commands=st.lists(separated_text, min_size=1, max_size=3))
def test_compare_transcript_events_keep_line_separators(commands: list[str]) -> None:
    from trialrun.compare.evaluate import commands_in, efficiency_of

    events: list[object] = [
        {
            "type": "assistant",
            "message": {
                "content": [
                    {"type": "tool_use", "id": f"t{n}", "name": "Bash", "input": {"command": c}}
                ]
            },
        }
        for n, c in enumerate(commands)
    ]
    events.append({"type": "result", "result": SEPARATORS, "num_turns": 2, "duration_ms": 5})
    transcript = jsonl(events)
    assert commands_in(transcript, "stream-json") == commands
    efficiency = efficiency_of(transcript, "stream-json")
    assert efficiency is not None and efficiency.turns == 2


def test_compare_transcript_view_keeps_one_event_a_line() -> None:
    from trialrun.compare.transcript_view import readable

    event = {"type": "result", "result": SEPARATORS, "num_turns": 1}
    shown = readable(jsonl([event]))
    assert shown.startswith("[result] num_turns=1"), shown


# -- control and bidi characters in what the views show ----------------------------------------

EVIL_ID = "t1\x00\x1b[31m\u202eevil"
SHOWN_ID = "t1\\x00\\x1b[31m\\u202eevil"
HIDDEN = ("\x00", "\x1b", "\u202e")


def test_a_case_id_with_nul_esc_and_a_bidi_override_is_shown_escaped_in_every_view(
    work: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    case_file = work / "suite" / "cases" / "t1.yaml"
    case = yaml.safe_load(case_file.read_text(encoding="utf-8"))
    case["id"] = EVIL_ID
    case["assertions"].append({"type": "required_fields", "fields": ["nope\x1b[2J"]})
    case_file.write_text(json.dumps(case), encoding="utf-8")  # JSON is YAML; escapes stay
    step_summary = work / "step-summary.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step_summary))
    outcome = call_cli(["run", str(work / "suite"), "--no-baseline", "--out", "out"], capsys)
    assert outcome.code == 1, outcome.err
    (run_dir,) = (work / "out" / "demo").iterdir()
    report = (run_dir / "report.html").read_text(encoding="utf-8")
    junit = (run_dir / "junit.xml").read_text(encoding="utf-8")
    summary = step_summary.read_text(encoding="utf-8")
    views = {
        "console": outcome.out + outcome.err,
        "report.html": report,
        "junit.xml": junit,
        "step summary": summary,
    }
    for view, text in views.items():
        raw = [char for char in HIDDEN if char in text]
        assert raw == [], f"{view} holds {raw!r} raw"
    assert f"FAIL {SHOWN_ID}" in outcome.out
    assert f"fail  {SHOWN_ID}" in outcome.err  # the progress line
    assert f"title=trialrun: {SHOWN_ID}::" in outcome.out  # the GitHub annotation
    assert SHOWN_ID in report and "nope\\x1b[2J" in report
    (testcase,) = ET.fromstring(junit.encode("utf-8")).iter("testcase")
    assert testcase.get("name") == SHOWN_ID
    # Markdown escapes the backslashes, so GitHub renders the same escapes.
    assert SHOWN_ID.replace("\\", "\\\\").replace("[", "\\[") in summary


def test_a_compare_case_named_with_esc_is_shown_escaped(
    work: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    compare_subject(work, monkeypatch, "c\x1b[31m\u202e1")
    outcome = call_cli(["compare", str(work / "subject")], capsys)
    assert outcome.code == 0, outcome.err
    shown = outcome.out + outcome.err
    assert "\x1b" not in shown and "\u202e" not in shown
    assert "c\\x1b[31m\\u202e1 rep 0" in outcome.err  # the progress lines


hidden_text = st.text(
    alphabet=st.sampled_from(
        [
            *("a", "\\", "\n", "\t", "\r", "\x00", "\x1b", "\x7f", "\x85", "\u061c", "\u200f"),
            *("\u202a", "\u202e", "\u2028", "\u2066", "\u2069", "\ud800", "é", "字"),
        ]
    ),
    max_size=30,
)
HIDDEN_CLASS = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
    "\u2028\u2029\ud800-\udfff]|\r(?!\n)"
)


@settings(max_examples=200)
@given(text=hidden_text)
def test_visible_text_holds_no_hidden_character_and_keeps_the_rest(text: str) -> None:
    from trialrun.base.visible import visible, visible_name

    shown, name = visible(text), visible_name(text)
    assert HIDDEN_CLASS.search(shown) is None
    assert HIDDEN_CLASS.search(name) is None and not set(name) & {"\n", "\t", "\r"}
    assert visible(shown) == shown and visible_name(name) == name
    assert shown.count("\n") == text.count("\n") and shown.count("\t") == text.count("\t")
    shown.encode("utf-8")  # raises on a lone surrogate left in
    if HIDDEN_CLASS.search(text) is None:
        assert shown == text
