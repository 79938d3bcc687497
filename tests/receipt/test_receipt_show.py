"""``receipt show``: the terminal summary and the HTML page, on good, cut and hostile receipts."""

from __future__ import annotations

import dataclasses
import html.parser
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from trialrun.base import canonjson
from trialrun.errors import ReceiptError
from trialrun.receipt.envelope import ZERO_HASH, event_hash
from trialrun.receipt.show import LIST_MAX, read_receipt, render_html, summarize

XSS = ["<script>alert(1)</script>", "<img src=x onerror=alert(1)>", '"><svg onload=alert(1)>']
RUN_START = {
    "goal": "make it pass",
    "verifyCommand": "pytest -q",
    "repoHead": None,
    "branch": "main",
    "tool": {"name": "trialrun", "version": "0.1.0"},
}
RUN_END = {
    "stopReason": "completed",
    "verified": True,
    "totals": {"attempts": 2, "totalTokens": 30, "costUsd": 0.5, "filesChanged": 0},
}


def write_receipt(path: Path, events: list[tuple[str, dict[str, Any]]]) -> Path:
    """A correctly chained receipt of ``events`` (type, data), as a writer would write it."""
    prev, lines = ZERO_HASH, []
    for seq, (kind, data) in enumerate(events):
        event = {"v": "0", "seq": seq, "ts": f"2026-01-01T00:00:{seq % 60:02d}.000Z"}
        event |= {"type": kind, "data": data, "prev": prev}
        event["hash"] = prev = event_hash(event)
        lines.append(canonjson.dumps(event))
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def suite_events(case_ids: list[str]) -> list[tuple[str, dict[str, Any]]]:
    events: list[tuple[str, dict[str, Any]]] = [("run_start", dict(RUN_START, goal="demo suite"))]
    for index, case in enumerate(case_ids):
        status = "pass" if index % 2 == 0 else "fail"
        call = {"attempt": 1, "case": case, "name": "search", "argsSummary": '{"q":"x"}'}
        events += [
            ("case_start", {"case": case, "input_sha256": "ab" * 32}),
            ("tool_call", call | {"redacted": False, "durationMs": 1.5, "ok": True}),
            ("usage", {"attempt": 1, "case": case, "totalTokens": 10, "costUsd": 0.25}),
            (
                "case_end",
                {
                    "case": case,
                    "status": status,
                    "failureKind": None if status == "pass" else "assertion_failed",
                    "traceSha256": "cd" * 32,
                },
            ),
        ]
    cases = {"total": len(case_ids), "passed": 1, "failed": 1, "errors": 0}
    return [*events, ("run_end", RUN_END | {"cases": cases})]


class TagCollector(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parse(page: str) -> TagCollector:
    collector = TagCollector()
    collector.feed(page)
    collector.close()
    return collector


def assert_no_live_markup(page: str) -> TagCollector:
    collector = parse(page)
    names = {tag for tag, _ in collector.tags}
    assert not names & {"script", "img", "svg", "iframe", "object", "embed", "link", "a"}
    handlers = [name for _, attrs in collector.tags for name, _ in attrs if name.startswith("on")]
    assert handlers == []
    return collector


def test_attempt_receipt_summary(conformance: Path) -> None:
    text = summarize(conformance / "valid-unsigned.jsonl")
    assert text.splitlines()[1] == "Verified: Chain intact, 17 events, run complete (unsigned)"
    for expected in (
        "Goal:    Make tests/test_calc.py pass without changing the tests",
        "Repo:    3f2a9c1e5b7d4a6f8e0c2b4d6f8a0c2e4b6d8f0a on profclaw/run-1a2b3c4d",
        "Tool:    profclaw 2.3.0",
        "Baseline: FAILED (exit 1, score 1): pytest -q tests/test_calc.py",
        "Attempt 1 (claude-sonnet-4-5): worse, rolled back",
        "  tool calls: 2, 1 failed",
        "  rollback: failureScore rose from 1 to 2",
        "Attempt 2 (claude-sonnet-4-5): verified",
        "  verifier: passed (exit 0, score 0): pytest -q tests/test_calc.py",
        "  usage: 6,423 tokens, $0.0199",
        "Files changed: 2",
        "  created   docs/big.md (diff truncated)",
        "Usage:   12,273 tokens, $0.04513 (sum of usage events)",
    ):
        assert expected in text.splitlines(), expected
    assert 'FAIL bash command="OPENAI_API_KEY=[REDACTED] pytest -q" 812.5 ms [redacted]' in text
    assert "Run end: stop reason verified, verified true; totals: attempts 2" in text


def test_signed_receipt_reports_its_key(conformance: Path) -> None:
    pytest.importorskip("trialrun.receipt.signing")
    text = summarize(conformance / "valid-signed.jsonl")
    assert "signature valid" in text.splitlines()[1]
    assert "  signature: valid, public key MCowBQYDK2VwAyEAiojj3XQJ8ZX9Ut" in text


@pytest.mark.parametrize(
    ("name", "verdict"),
    [
        ("tamper-edited-field.jsonl", "at seq 3 (hash_mismatch)"),
        ("tamper-reordered.jsonl", "at seq 2 (seq_mismatch)"),
        ("tamper-event-after-run-end.jsonl", "at seq 17 (event_after_run_end)"),
    ],
)
def test_tampered_receipts_show_content_and_verdict(
    conformance: Path, name: str, verdict: str
) -> None:
    text = summarize(conformance / name)
    assert text.splitlines()[1].startswith(f"TAMPERED or invalid {verdict}")
    assert "Attempt 2 (claude-sonnet-4-5)" in text  # the content is still shown


def test_truncated_receipt_says_run_end_is_missing(conformance: Path) -> None:
    view = read_receipt(conformance / "tamper-truncated-tail.jsonl")
    assert view.run_end is None and not view.verdict.ok
    text = summarize(conformance / "tamper-truncated-tail.jsonl")
    assert "Run end: missing" in text
    # A cut tail is what a crashed run leaves: incomplete, not tampered; its content is shown.
    assert text.splitlines()[1].startswith(
        "incomplete (truncated): the run did not finish: no run_end after seq 15"
    )
    assert "TAMPERED" not in text and "Attempt 2 (claude-sonnet-4-5)" in text


def test_empty_and_foreign_events(conformance: Path, tmp_path: Path) -> None:
    with pytest.raises(ReceiptError, match="found an empty file"):
        summarize(conformance / "invalid-empty.jsonl")
    only_start = write_receipt(tmp_path / "start.jsonl", [("run_start", RUN_START)])
    assert "Run end: missing" in summarize(only_start)
    edge = summarize(conformance / "edge-strings.jsonl")
    assert "Other events: custom_probe x1" in edge


def test_unparsable_lines_are_listed(tmp_path: Path) -> None:
    path = write_receipt(tmp_path / "r.jsonl", [("run_start", RUN_START)])
    with path.open("a", encoding="utf-8") as handle:
        handle.write('{"cut": \n[1, 2]\n')
    text = summarize(path)
    assert "  line 2: not valid JSON" in text
    assert "  line 3: not an event object with data" in text
    assert "(invalid_json)" in text.splitlines()[1]


def test_unreadable_file_raises_receipt_error(tmp_path: Path) -> None:
    with pytest.raises(ReceiptError, match="cannot read the receipt"):
        summarize(tmp_path / "missing.jsonl")
    with pytest.raises(ReceiptError, match="cannot read the receipt"):
        render_html(tmp_path)


def test_suite_receipt_lists_cases(tmp_path: Path) -> None:
    path = write_receipt(tmp_path / "suite.jsonl", suite_events(["alpha", "beta"]))
    text = summarize(path)
    assert "Goal:    demo suite" in text
    assert "Cases (2): 1 fail, 1 pass" in text
    assert "  pass       alpha: 1 tool calls, 10 tokens" in text
    assert "  fail       beta (assertion_failed): 1 tool calls, 10 tokens" in text
    assert "cases: total 2, passed 1, failed 1, errors 0" in text
    assert "Attempt" not in text  # suite events belong to cases, not to attempt 1
    page = render_html(path)
    assert "alpha" in page and "assertion_failed" in page and "cd" * 32 in page


def test_suite_receipt_cut_inside_a_case(tmp_path: Path) -> None:
    events = suite_events(["alpha", "beta"])[:-2]  # beta's case_end and run_end missing
    text = summarize(write_receipt(tmp_path / "cut.jsonl", events))
    assert "  unfinished beta: 1 tool calls, 10 tokens" in text
    assert "(truncated)" in text.splitlines()[1]


def test_long_lists_are_capped_and_counted(tmp_path: Path) -> None:
    calls = [
        ("tool_call", {"attempt": 1, "name": f"t{i}", "argsSummary": "", "ok": i % 3 != 0})
        for i in range(LIST_MAX + 50)
    ]
    path = write_receipt(tmp_path / "big.jsonl", [("run_start", RUN_START), *calls])
    view = read_receipt(path)
    attempt = view.attempts["1"]
    assert (attempt.tool_calls_total, len(attempt.tool_calls)) == (LIST_MAX + 50, LIST_MAX)
    assert f"  tool calls: {LIST_MAX + 50}, 84 failed (first {LIST_MAX} shown)" in summarize(path)


def test_wrongly_typed_members_do_not_break_the_summary(tmp_path: Path) -> None:
    start: dict[str, Any] = {"goal": ["not", "a", "string"], "tool": "x", "repoHead": 7}
    events: list[tuple[str, dict[str, Any]]] = [
        ("run_start", start),
        ("usage", {"attempt": "one", "totalTokens": "many", "costUsd": None}),
        ("verifier_result", {"attempt": 0, "passed": "yes", "output": 42}),
        ("run_end", {"totals": [1, 2], "cases": "none"}),
    ]
    text = summarize(write_receipt(tmp_path / "odd.jsonl", events))
    assert 'Goal:    ["not", "a", "string"]' in text
    assert "Baseline: unknown (exit n/a, score n/a)" in text
    assert "Usage:   0 tokens, $0 (sum of usage events)" in text
    assert_no_live_markup(render_html(tmp_path / "odd.jsonl"))


def test_control_characters_and_lone_surrogates_are_shown_as_escapes(tmp_path: Path) -> None:
    goal = "bell\x07 escape\x1b[31mred\x1b[0m cr\r nul\x00 rlo\u202e lone\ud800 ok"
    path = write_receipt(tmp_path / "ctl.jsonl", [("run_start", RUN_START | {"goal": goal})])
    text = summarize(path)
    shown = "bell\\x07 escape\\x1b[31mred\\x1b[0m cr\\r nul\\x00 rlo\\u202e lone\\ud800 ok"
    assert f"Goal:    {shown}" in text
    text.encode("utf-8")
    page = render_html(path)
    assert shown in page and "\u202e" not in page
    page.encode("utf-8")


def everything_hostile(payload: str) -> list[tuple[str, dict[str, Any]]]:
    call = {"attempt": 1, "name": payload, "argsSummary": f"q={payload}", "ok": False}
    return [
        ("run_start", RUN_START | {"goal": payload, "verifyCommand": payload, "branch": payload}),
        ("attempt_start", {"attempt": 1, "model": payload}),
        ("tool_call", call | {"redacted": False, "durationMs": 1}),
        ("verifier_result", {"attempt": 1, "command": payload, "output": payload, "passed": False}),
        ("rollback", {"attempt": 1, "reason": payload}),
        ("attempt_end", {"attempt": 1, "outcome": payload, "rolledBack": True}),
        ("case_start", {"case": payload}),
        ("case_end", {"case": payload, "status": payload, "failureKind": payload}),
        ("file_change", {"path": payload, "status": payload, "diff": payload, "diffSha256": ""}),
        (payload, {"x": payload}),
        ("run_end", {"stopReason": payload, "verified": False, "totals": {}}),
    ]


@pytest.mark.parametrize("payload", XSS)
def test_html_escapes_everything_from_the_file(tmp_path: Path, payload: str) -> None:
    path = write_receipt(tmp_path / "xss.jsonl", everything_hostile(payload))
    with path.open("a", encoding="utf-8") as handle:
        handle.write(payload + "\n")  # an unparsable line is listed, escaped too
    page = render_html(path)
    collector = assert_no_live_markup(page)
    assert payload not in page
    assert sum(payload in chunk for chunk in collector.text) >= 10  # shown, as text


def test_html_page_is_self_contained(conformance: Path) -> None:
    page = render_html(conformance / "valid-unsigned.jsonl")
    collector = assert_no_live_markup(page)
    csp = [
        dict(attrs).get("content") or ""
        for tag, attrs in collector.tags
        if tag == "meta" and dict(attrs).get("http-equiv") == "Content-Security-Policy"
    ]
    assert csp and csp[0].startswith("default-src 'none'")
    assert "http://" not in page and "https://" not in page
    assert "Attempt 2" in page and "src/calc.py" in page and "ZeroDivisionError" in page


@settings(max_examples=60)
@given(goal=st.text(max_size=60), args=st.text(max_size=60))
@example(goal="\r\n", args="\r\n")  # a CRLF kept as a line end left its CR in the summary
def test_any_text_renders_as_text_only(
    tmp_path_factory: pytest.TempPathFactory, goal: str, args: str
) -> None:
    tmp_path = tmp_path_factory.mktemp("example")
    call: dict[str, Any] = {"attempt": 1, "name": "t", "argsSummary": args, "ok": True}
    events: list[tuple[str, dict[str, Any]]] = [("run_start", RUN_START | {"goal": goal})]
    events.append(("tool_call", call))
    path = write_receipt(tmp_path / "prop.jsonl", events)
    page = render_html(path)
    page.encode("utf-8")
    collector = assert_no_live_markup(page)
    known = {"html", "head", "meta", "title", "style", "body", "header", "main", "h1", "h2"}
    known |= {"h3", "div", "p", "pre", "table", "tr", "th", "td", "code", "section", "span"}
    assert {tag for tag, _ in collector.tags} <= known
    summary = summarize(path)
    summary.encode("utf-8")
    assert not any(ch in summary for ch in "\x00\x1b\x07\r")


def tampered_suite_receipt(tmp_path: Path, *, at: int) -> Path:
    """A suite receipt whose line ``at`` was edited after writing (a hash mismatch there)."""
    path = write_receipt(tmp_path / "suite.jsonl", suite_events(["alpha", "beta", "gamma"]))
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[at] = lines[at].replace('"ok":true', '"ok":false').replace('"fail"', '"pass"')
    path.write_text("".join(lines), encoding="utf-8")
    return path


class RowMarks(html.parser.HTMLParser):
    """The seq cell of each table row, split by whether the row is marked as not verified."""

    def __init__(self) -> None:
        super().__init__()
        self.marked: list[int] = []
        self.plain: list[int] = []
        self._row: list[int] | None = None
        self._cell = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "tr":
            self._row = self.marked if ("class", "unverified") in attrs else self.plain
        elif tag == "td" and self._row is not None:
            self._cell = True

    def handle_data(self, data: str) -> None:
        if self._cell and self._row is not None:
            if data.strip().isdigit():
                self._row.append(int(data))
            self._row, self._cell = None, False


def row_marks(page: str) -> RowMarks:
    rows = RowMarks()
    rows.feed(page)
    return rows


def test_tampered_html_marks_everything_from_the_first_bad_seq(tmp_path: Path) -> None:
    # seq 0 run_start; per case start, tool_call, usage, end (alpha 1-4, beta 5-8, gamma 9-12)
    path = tampered_suite_receipt(tmp_path, at=6)  # beta's tool call now says it failed
    view = read_receipt(path)
    assert view.verdict.first_bad_seq == 6 and view.unverified_from == 6
    page = render_html(path)
    # Every tool call row from the break on is marked, none before it.
    rows = row_marks(page)
    assert (rows.plain, rows.marked) == ([2], [6, 10])
    assert page.count('<span class="unverified-tag">NOT VERIFIED</span>') == 4  # 2 rows, 2 cases
    assert "shown but NOT VERIFIED: every line from seq 6 on (8 of 14)" in page
    assert "Cases (3, 2 NOT VERIFIED)" in page
    sections = [attrs for tag, attrs in parse(page).tags if tag == "section"]
    assert [dict(a)["class"] for a in sections] == [
        "group", "group unverified", "group unverified"
    ]  # fmt: skip
    assert "Tool calls: 1, 1 failed, 1 NOT VERIFIED" in page  # beta's counts match its row
    assert "Run end (NOT VERIFIED)" in page
    assert "20 tokens, $0.5 of it NOT VERIFIED" in page  # beta's and gamma's usage


def test_tampered_summary_counts_agree_with_what_it_marks(tmp_path: Path) -> None:
    text = summarize(tampered_suite_receipt(tmp_path, at=8))  # beta's fail turned into a pass
    lines = text.splitlines()
    assert lines[1].startswith("TAMPERED or invalid at seq 8 (hash_mismatch)")
    assert "  shown but NOT VERIFIED: every line from seq 8 on (6 of 14)" in lines
    assert "Cases (3): 3 pass; 2 NOT VERIFIED" in text
    assert "  pass       alpha: 1 tool calls, 10 tokens" in lines  # before the break: as it was
    assert "  pass       beta (assertion_failed): 1 tool calls, 10 tokens [NOT VERIFIED]" in lines
    assert "  pass       gamma: 1 tool calls, 10 tokens [NOT VERIFIED]" in lines
    assert text.count("[NOT VERIFIED]") == 2
    assert "Run end (NOT VERIFIED): stop reason completed" in text


def test_intact_and_cut_receipts_mark_nothing(tmp_path: Path) -> None:
    events = suite_events(["alpha", "beta"])
    intact = write_receipt(tmp_path / "ok.jsonl", events)
    cut = write_receipt(tmp_path / "cut.jsonl", events[:-3])
    for path in (intact, cut):
        assert read_receipt(path).unverified_from is None
        assert "NOT VERIFIED" not in render_html(path) + summarize(path)


def test_a_bad_signature_leaves_nothing_verified(tmp_path: Path) -> None:
    from trialrun.receipt.show import ReceiptView
    from trialrun.receipt.verify import verify_receipt

    path = write_receipt(tmp_path / "ok.jsonl", suite_events(["alpha"]))
    verdict = dataclasses.replace(verify_receipt(path), ok=False, reason="bad_signature")
    assert ReceiptView(path=str(path), verdict=verdict).unverified_from == 0
