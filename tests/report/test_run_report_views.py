"""report.html's tool-call timelines and baseline view, and ``trialrun diff --html``.

The figures are checked against the numbers they come from: each bar's position and length are
recomputed from the call it draws, and the counts, labels and metric values from summary.json.
Real runs use a live suite whose tools sleep, so the calls take measurable time.
"""

from __future__ import annotations

import difflib
import itertools
import json
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from chromium import external_references, render, require_chromium
from htmlpage import PAYLOADS, parse
from paths import AGENTS_DIR
from trialrun.artifacts.baseline import compute_regression
from trialrun.artifacts.comparing import baseline_comparison
from trialrun.artifacts.shards import rebuild_case
from trialrun.base.results import (
    AgentRun,
    CaseResult,
    CheckFailure,
    Failure,
    RunResult,
    ToolCall,
    Usage,
)
from trialrun.cli import run_cli
from trialrun.report.comparison import (
    NO_SEQUENCE_NOTE,
    PAIR_BAR_WIDTH,
    SAME_RUN_KEPT,
    sequence_view,
)
from trialrun.report.figures import LABEL_WIDTH, MIN_BAR_WIDTH, PLOT_WIDTH, ticks
from trialrun.report.html import FILTER_SCRIPT, render_html
from trialrun.report.summary import build_summary
from trialrun.report.timeline import CALLS_DRAWN_MAX, SEQUENTIAL_NOTE

AGENT = AGENTS_DIR / "scripted_tools.py"
TOOLS = """\
import time

def _work(args):
    time.sleep(args.get("ms", 0) / 1000)
    if args.get("fail"):
        raise RuntimeError(args["fail"])
    return {"done": True}

TOOLS = {"search_docs": _work, "lookup_order": _work, "refund": _work}
"""
FIRST = {
    "refund": [["lookup_order", {"ms": 30}], ["search_docs", {"ms": 20}], ["refund", {"ms": 40}]],
    "reset": [["search_docs", {"ms": 20}]],
}
SECOND = {
    "refund": [
        ["lookup_order", {"ms": 30}],
        ["lookup_order", {"ms": 30}],
        ["refund", {"ms": 40, "fail": "gateway timeout"}],
    ],
    "reset": [["search_docs", {"ms": 20}]],
}


class Elements(HTMLParser):
    """Every start tag with its attributes, and the text inside each element, in page order."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str]]] = []
        self.texts: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, {k: v or "" for k, v in attrs}))
        self.texts.append("")

    def handle_data(self, data: str) -> None:
        if self.texts:
            self.texts[-1] += data


def elements(page: str) -> Elements:
    parser = Elements()
    parser.feed(page)
    parser.close()
    return parser


def timelines(page: str) -> list[dict[str, Any]]:
    """Each timeline SVG: its span, its declared counts, and per call its bar and its label."""
    parsed = elements(page)
    found: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    for index, (tag, attrs) in enumerate(parsed.elements):
        if tag == "svg" and "data-span-ms" in attrs:
            current = {
                "span": float(attrs["data-span-ms"]),
                "calls": int(attrs["data-calls"]),
                "errors": int(attrs["data-errors"]),
                "rows": [],
            }
            found.append(current)
        elif tag == "g" and "data-start-ms" in attrs and current is not None:
            following = parsed.elements[index + 1 : index + 6]
            rect = next(a for t, a in following if t == "rect")
            label = next(
                parsed.texts[index + 1 + k]
                for k, (t, a) in enumerate(following)
                if t == "text" and a.get("class") == "label"
            )
            current["rows"].append(
                {
                    "start": float(attrs["data-start-ms"]),
                    "duration": float(attrs["data-duration-ms"]),
                    "ok": attrs["data-ok"] == "true",
                    "x": float(rect["x"]),
                    "width": float(rect["width"]),
                    "class": rect["class"],
                    "label": label,
                }
            )
    return found


def sequence_tables(page: str) -> list[list[tuple[str, str, str]]]:
    """Each aligned tool-sequence table: per row its kind and the tool on each side."""
    parsed = elements(page)
    tables: list[list[tuple[str, str, str]]] = []
    for index, (tag, attrs) in enumerate(parsed.elements):
        if tag == "table" and attrs.get("class") == "seq":
            tables.append([])
        elif tag == "tr" and attrs.get("class", "").startswith("seq-") and tables:
            cells = {
                a.get("class"): parsed.texts[index + 1 + k].strip()
                for k, (t, a) in enumerate(parsed.elements[index + 1 : index + 6])
                if t == "td"
            }
            kind = attrs["class"].removeprefix("seq-")
            if kind != "folded":
                tables[-1].append((kind, cells["before"], cells["after"]))
    return tables


def metric_rows(page: str) -> list[dict[str, str]]:
    return [attrs for tag, attrs in elements(page).elements if tag == "g" and "data-span" in attrs]


def expected_x(start: float, span: float) -> float:
    return round(LABEL_WIDTH + PLOT_WIDTH * min(start, span) / span, 2)


def expected_width(duration: float, span: float) -> float:
    return round(max(PLOT_WIDTH * min(duration, span) / span, MIN_BAR_WIDTH), 2)


def check_timeline(figure: dict[str, Any], case_doc: dict[str, Any]) -> None:
    """The figure of one case against its summary.json entry."""
    rows = figure["rows"]
    assert figure["calls"] == len(rows) == case_doc["tool_calls"]
    assert figure["errors"] == case_doc["tool_errors"] == sum(not r["ok"] for r in rows)
    assert [r["label"].strip().split(". ", 1)[1] for r in rows] == case_doc["tool_sequence"]
    ends = [r["start"] + r["duration"] for r in rows]
    assert figure["span"] == pytest.approx(max([case_doc["wall_ms"], *ends]), abs=1e-3)
    for row in rows:
        assert row["x"] == pytest.approx(expected_x(row["start"], figure["span"]), abs=0.011)
        assert row["width"] == pytest.approx(
            expected_width(row["duration"], figure["span"]), abs=0.011
        )
        assert row["class"] == ("bar" if row["ok"] else "bar-error")


# -- synthetic runs: exact numbers ------------------------------------------------------------


def make_run(cases: list[CaseResult]) -> RunResult:
    return RunResult(
        run_id="20261203-100000-000000",
        suite_name="views",
        suite_path="suite.yaml",
        agent_command=["python3", "agent.py"],
        mode="replay",
        cases=cases,
        started_at=1796292000.0,
        finished_at=1796292001.0,
    )


def make_case(
    case_id: str,
    calls: list[tuple[str, bool, float, float | None]],
    *,
    wall_ms: int = 1000,
    status: str = "pass",
    tokens: tuple[int, int] = (100, 20),
    cost: float = 0.002,
) -> CaseResult:
    tool_calls = [
        ToolCall(f"c{i}", name, {}, ok, None, None if ok else f"{name} broke", duration, start)
        for i, (name, ok, duration, start) in enumerate(calls)
    ]
    run = AgentRun(
        case_id=case_id,
        output={"ok": True},
        tool_calls=tool_calls,
        usage=Usage(tokens_in=tokens[0], tokens_out=tokens[1], cost_usd=cost),
        wall_ms=wall_ms,
    )
    failure = None if status == "pass" else Failure("assertion_failed", "wrong answer")
    return CaseResult(case_id, status, run, failure=failure)  # type: ignore[arg-type]


def test_timeline_bars_are_the_calls_start_and_duration() -> None:
    failing = make_case(
        "refund",
        [("lookup_order", True, 120.0, 10.0), ("refund", False, 300.0, 200.0)],
        wall_ms=800,
        status="fail",
    )
    passing = make_case("reset", [("search_docs", True, 0.05, 5.0)], wall_ms=40)
    run = make_run([failing, passing])
    summary = build_summary(run, regression=None)
    page = render_html(run, summary)
    figures = timelines(page)
    assert len(figures) == 2
    for figure, doc in zip(figures, summary["cases"], strict=True):
        check_timeline(figure, doc)
    refund = figures[0]["rows"]
    assert [(r["start"], r["duration"]) for r in refund] == [(10.0, 120.0), (200.0, 300.0)]
    assert figures[0]["span"] == 800.0
    assert figures[1]["rows"][0]["width"] == MIN_BAR_WIDTH  # 0.05 ms stays visible
    text = " ".join(parse(page).text)
    assert "2 tool calls over 800 ms, 420 ms inside tools, 1 failed" in text
    assert "✕" in text


def test_a_call_ending_after_the_wall_time_widens_the_axis() -> None:
    case = make_case("late", [("search_docs", True, 50.0, 480.0)], wall_ms=500)
    run = make_run([case])
    [figure] = timelines(render_html(run, build_summary(run, regression=None)))
    assert figure["span"] == 530.0
    assert figure["rows"][0]["x"] + figure["rows"][0]["width"] == pytest.approx(
        LABEL_WIDTH + PLOT_WIDTH, abs=0.02
    )


def test_calls_without_start_times_are_drawn_one_after_another() -> None:
    case = make_case("old", [("a", True, 100.0, None), ("b", True, 50.0, None)], wall_ms=400)
    run = make_run([case])
    page = render_html(run, build_summary(run, regression=None))
    [figure] = timelines(page)
    assert [(r["start"], r["duration"]) for r in figure["rows"]] == [(0.0, 100.0), (100.0, 50.0)]
    assert SEQUENTIAL_NOTE in page


def test_a_case_without_calls_has_no_timeline_and_many_calls_are_capped() -> None:
    many = [("t", True, 1.0, float(i)) for i in range(CALLS_DRAWN_MAX + 7)]
    run = make_run([make_case("none", []), make_case("many", many)])
    page = render_html(run, build_summary(run, regression=None))
    [figure] = timelines(page)
    assert figure["calls"] == CALLS_DRAWN_MAX
    assert "7 more calls not drawn" in page


def test_ticks_are_round_and_within_the_span() -> None:
    assert ticks(1078) == [0, 250, 500, 750, 1000]
    assert ticks(530) == [0, 200, 400]
    assert ticks(40) == [0, 10, 20, 30, 40]
    assert ticks(0) == [0.0]


def test_sequence_alignment_follows_sequence_matcher() -> None:
    before = ["lookup", "search", "refund", "email"]
    after = ["lookup", "lookup", "search", "refund", "search"]
    view = sequence_view(before, after)
    rows = view["rows"]
    opcodes = difflib.SequenceMatcher(None, before, after, autojunk=False).get_opcodes()
    # SequenceMatcher pairs the first "lookup" with the second: the first one is the new one.
    assert [tag for tag, *_ in opcodes] == ["insert", "equal", "replace"]
    assert [r["kind"] for r in rows] == ["added", "same", "same", "same", "changed"]
    assert view["differs"]
    assert [r["before"] for r in rows] == [None, "lookup", "search", "refund", "email"]
    assert [r["after"] for r in rows] == ["lookup", "lookup", "search", "refund", "search"]
    assert view["counts"] == {"changed": 1, "removed": 0, "added": 1}


def test_a_long_equal_stretch_is_folded_and_an_unknown_side_is_named() -> None:
    same = [f"t{i}" for i in range(20)]
    rows = sequence_view(same, [*same, "extra"])["rows"]
    assert [r["kind"] for r in rows].count("same") == 2 * SAME_RUN_KEPT
    assert {"kind": "folded", "text": "16 more calls the same on both sides"} in rows
    unknown = sequence_view(None, ["a"])
    assert not unknown["known"] and not unknown["differs"]
    assert unknown["notes"] == [NO_SEQUENCE_NOTE.format(side="the baseline")]


def baseline_page(
    before: RunResult, after: RunResult, policy: dict[str, Any]
) -> tuple[str, dict[str, Any], dict[str, Any]]:
    baseline = build_summary(before, regression=None)
    first = build_summary(after, regression=None)
    regression = compute_regression(baseline, first, policy, "baselines/b.json")
    summary = build_summary(after, regression=regression)
    comparison = baseline_comparison(baseline, summary, regression)
    return render_html(after, summary, None, comparison), baseline, summary


def test_baseline_view_figures_match_both_summaries() -> None:
    before = make_run(
        [
            make_case("refund", [("lookup", True, 10.0, 1.0), ("refund", True, 10.0, 20.0)]),
            make_case("reset", [("search", True, 10.0, 1.0)], wall_ms=300),
        ]
    )
    after = make_run(
        [
            make_case("refund", [("lookup", True, 10.0, 1.0), ("search", True, 10.0, 20.0)]),
            make_case("reset", [("search", True, 10.0, 1.0)], status="fail", tokens=(300, 20)),
        ]
    )
    policy = {"min_pass_rate": 0.9, "max_avg_wall_ms_delta_pct": 0.25}
    page, baseline, summary = baseline_page(before, after, policy)
    text = " ".join(" ".join(parse(page).text).split())
    # Status changes come first, then the gates, then the cases.
    assert text.index("Status changes") < text.index("reset: pass → fail")
    assert text.index("reset: pass → fail") < text.index("Metrics and gates")
    assert text.index("Metrics and gates") < text.index("Cases that changed (2)")
    assert "min_pass_rate at least 90.0%: fail" in text
    assert "max_avg_wall_ms_delta_pct at most +25.0%: fail" in text
    assert "max_p95_wall_ms_delta_pct not configured" in text
    rows = {row["data-label"]: row for row in metric_rows(page)}
    assert float(rows["Pass rate"]["data-before"]) == baseline["aggregates"]["pass_rate"]
    assert float(rows["Pass rate"]["data-after"]) == summary["aggregates"]["pass_rate"]
    wall = summary["aggregates"]["metrics"]["wall_ms"]
    assert float(rows["Avg wall"]["data-after"]) == wall["mean"]
    assert float(rows["p95 wall"]["data-after"]) == wall["p95"]
    assert float(rows["Total tokens in"]["data-after"]) == sum(
        c["tokens_in"] for c in summary["cases"]
    )
    reset_tokens = [r for r in metric_rows(page) if r["data-label"] == "Tokens in"]
    assert [(float(r["data-before"]), float(r["data-after"])) for r in reset_tokens] == [
        (100.0, 100.0),
        (100.0, 300.0),
    ]
    check_pair_bars(page)
    # Listed under the run's changes, linked to the case's details, where its diff is shown.
    assert "refund : pass → pass · changed: tool sequence" in text  # a link, then text
    assert ("a", {"href": "#case-1"}) in elements(page).elements
    assert text.index("Cases that changed") < text.index("Against the baseline : pass → pass")


def check_pair_bars(page: str) -> None:
    """Each metric's two bars are its two values on a scale ending at the larger one."""
    parsed = elements(page).elements
    for index, (tag, attrs) in enumerate(parsed):
        if tag != "g" or "data-span" not in attrs:
            continue
        before_bar, after_bar = [a for t, a in parsed[index + 1 : index + 6] if t == "rect"][:2]
        span = float(attrs["data-span"])
        for bar, value in ((before_bar, attrs["data-before"]), (after_bar, attrs["data-after"])):
            number = float(value) if value else 0.0
            assert float(bar["width"]) == pytest.approx(
                round(PAIR_BAR_WIDTH * number / span, 2), abs=0.011
            )


def test_hostile_names_stay_inert_in_the_timeline_and_the_baseline_view() -> None:
    calls = [(payload, False, 10.0, 5.0 * i) for i, payload in enumerate(PAYLOADS)]
    before = make_run([make_case(f"c{PAYLOADS[2]}", calls[:1])])
    after = make_run([make_case(f"c{PAYLOADS[2]}", calls, status="fail")])
    for case in after.cases:
        for call in case.run.tool_calls:
            call.error = f"error {PAYLOADS[0]} {PAYLOADS[1]}"
    page, _, _ = baseline_page(before, after, {"min_pass_rate": 1.0})
    parsed = parse(page)
    assert "img" not in parsed.tags
    assert parsed.scripts == [FILTER_SCRIPT]
    assert parsed.comments == []
    assert not [name for name, _ in parsed.attributes if name.startswith("on")]
    for payload in PAYLOADS:
        assert payload not in page
    text = " ".join(parsed.text)
    assert f"call 1: {PAYLOADS[0]}, started at" in text  # drawn, as text
    assert f"error {PAYLOADS[0]} {PAYLOADS[1]}" in text  # in the failed call's tooltip
    assert f"c{PAYLOADS[2]}: pass → fail" in " ".join(text.split())


# -- merged runs: calls rebuilt from run.jsonl --------------------------------------------------


def test_cases_rebuilt_from_events_take_start_and_duration_from_the_timestamps() -> None:
    events = [
        {"type": "task_start", "case_id": "t", "timestamp": 100.0},
        {"type": "tool_call", "case_id": "t", "timestamp": 100.25, "name": "a", "call_id": "1"},
        {"type": "tool_result", "case_id": "t", "timestamp": 100.375, "call_id": "1", "ok": True},
        {"type": "tool_call", "case_id": "t", "timestamp": 100.5, "name": "b", "call_id": "2"},
    ]
    doc = {"id": "t", "status": "fail", "failure_kind": "tool_not_allowed", "wall_ms": 600}
    calls = rebuild_case(doc, events).run.tool_calls
    assert [(c.start_ms, c.duration_ms) for c in calls] == [(250.0, 125.0), (500.0, 0.0)]


# -- real runs ----------------------------------------------------------------------------------


def write_suite(root: Path, plans: dict[str, list[Any]], *, reply: dict[str, str]) -> Path:
    (root / "cases").mkdir(parents=True, exist_ok=True)
    (root / "tools.py").write_text(TOOLS, encoding="utf-8")
    (root / "suite.yaml").write_text(
        f"suite_name: views\nagent_command: [{json.dumps(sys.executable)}, "
        f"{json.dumps(str(AGENT))}]\nmode: live\ntool_module: tools\ncases_path: cases\n"
        "tool_registry: [search_docs, lookup_order, refund]\n"
        "assertions:\n  - type: required_fields\n    fields: [reply]\n"
        "regression:\n  min_pass_rate: 1.0\n  max_p95_wall_ms_delta_pct: 5.0\n",
        encoding="utf-8",
    )
    for case_id, calls in plans.items():
        task = {"calls": calls, "think_ms": 15, "output": {reply.get(case_id, "reply"): "ok"}}
        task["usage"] = {"tokens_in": 10 * len(calls), "tokens_out": 3, "cost_usd": 0.001}
        (root / "cases" / f"{case_id}.json").write_text(
            json.dumps({"id": case_id, "cassette": f"{case_id}.jsonl", "input": task}),
            encoding="utf-8",
        )
    return root


def run_suite(root: Path, out: Path, *extra: str) -> tuple[int, Path]:
    code = run_cli(["run", str(root), "--out", str(out), *extra])
    [run_dir] = (out / "views").iterdir()
    return code, run_dir


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A passing run, its baseline, and a failing run against it."""
    root = tmp_path_factory.mktemp("views")
    suite = write_suite(root / "suite", FIRST, reply={})
    code, first = run_suite(suite, root / "out1", "--no-baseline")
    assert code == 0
    baseline = root / "baseline.json"
    assert run_cli(["baseline", "promote", "--from", str(first), "--to", str(baseline)]) == 0
    write_suite(suite, SECOND, reply={"reset": "answer"})
    code, second = run_suite(suite, root / "out2", "--baseline", str(baseline))
    assert code == 1
    return {"first": first, "second": second, "baseline": baseline, "root": root}


def summary_of(run_dir: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((run_dir / "summary.json").read_text("utf-8"))
    return document


def test_a_real_run_draws_when_each_call_started(runs: dict[str, Path]) -> None:
    page = (runs["first"] / "report.html").read_text("utf-8")
    summary = summary_of(runs["first"])
    figures = timelines(page)
    assert len(figures) == len(summary["cases"]) == 2
    for figure, doc in zip(figures, summary["cases"], strict=True):
        check_timeline(figure, doc)
        rows = figure["rows"]
        # One call at a time, each after the previous answer, each as long as its tool slept.
        for earlier, later in itertools.pairwise(rows):
            assert later["start"] >= earlier["start"] + earlier["duration"]
        for row, (_, args) in zip(rows, FIRST[doc["id"]], strict=True):
            assert row["duration"] >= args["ms"]
        assert rows[0]["start"] > 0
    assert "Against baseline" not in page


def test_a_real_run_against_its_baseline_shows_what_changed(runs: dict[str, Path]) -> None:
    page = (runs["second"] / "report.html").read_text("utf-8")
    summary = summary_of(runs["second"])
    baseline = json.loads(runs["baseline"].read_text("utf-8"))
    text = " ".join(" ".join(parse(page).text).split())
    assert text.index("reset: pass → fail") < text.index("Cases that changed")
    assert "max_p95_wall_ms_delta_pct at most +500.0%" in text
    assert "min_pass_rate at least 100.0%: fail" in text
    for figure, doc in zip(timelines(page), summary["cases"], strict=True):
        check_timeline(figure, doc)
    before = {c["id"]: c["tool_sequence"] for c in baseline["cases"]}
    after = {c["id"]: c["tool_sequence"] for c in summary["cases"]}
    changed_ids = ["refund", "reset"]  # refund: sequence and tokens; reset: status
    assert sequence_tables(page) == [
        [
            (row["kind"], row["before"] or "", row["after"] or "")
            for row in sequence_view(before[case_id], after[case_id])["rows"]
        ]
        for case_id in changed_ids
    ]
    assert before["refund"] != after["refund"]
    rows = {r["data-label"]: r for r in metric_rows(page)}
    assert float(rows["Total tool calls"]["data-before"]) == sum(
        c["tool_calls"] for c in baseline["cases"]
    )
    assert float(rows["Total tool calls"]["data-after"]) == sum(
        c["tool_calls"] for c in summary["cases"]
    )
    check_pair_bars(page)


def test_diff_html_writes_the_same_view_for_two_runs(
    runs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    out = runs["root"] / "diff.html"
    code = run_cli(["diff", str(runs["first"]), str(runs["second"]), "--html", str(out)])
    assert code == 1
    assert capsys.readouterr().out.rstrip().endswith(f"Wrote {out}")
    page = out.read_text("utf-8")
    parsed = parse(page)
    assert parsed.scripts == [] and "script-src" not in page
    text = " ".join(" ".join(parsed.text).split())
    assert "reset: pass → fail" in text
    assert "refund · pass → pass · changed: tool sequence" in text
    assert "min_pass_rate at least 100.0%: fail" in text
    rows = {r["data-label"]: r for r in metric_rows(page)}
    first, second = summary_of(runs["first"]), summary_of(runs["second"])
    assert float(rows["Pass rate"]["data-before"]) == first["aggregates"]["pass_rate"]
    assert float(rows["Pass rate"]["data-after"]) == second["aggregates"]["pass_rate"]
    assert (
        float(rows["Avg wall"]["data-before"]) == first["aggregates"]["metrics"]["wall_ms"]["mean"]
    )
    check_pair_bars(page)


def test_diff_html_keeps_json_output_clean_and_reports_an_unwritable_path(
    runs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    out = runs["root"] / "json-diff.html"
    args = ["diff", str(runs["first"]), str(runs["first"]), "--json", "--html", str(out)]
    assert run_cli(args) == 0
    assert json.loads(capsys.readouterr().out)["differs"] is False
    assert "No compared case changed" in out.read_text("utf-8")
    missing = runs["baseline"] / "x.html"  # under a file: no directory can be made there
    assert run_cli(["diff", str(runs["first"]), str(runs["first"]), "--html", str(missing)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {missing}: cannot write the HTML diff") and "\n" not in err


def test_diff_html_of_hostile_summaries_stays_inert(tmp_path: Path) -> None:
    for name, status, tools in (("a", "pass", [PAYLOADS[0]]), ("b", "fail", list(PAYLOADS))):
        run_dir = tmp_path / name
        run_dir.mkdir()
        case = {"id": f"x{PAYLOADS[2]}", "status": status, "tool_sequence": tools}
        case |= {"wall_ms": 5, "tool_calls": len(tools), "tokens_in": 1, "tokens_out": 1}
        summary = {"schema_version": 1, "run": {"run_id": PAYLOADS[1]}, "cases": [case]}
        (run_dir / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    out = tmp_path / "diff.html"
    assert run_cli(["diff", str(tmp_path / "a"), str(tmp_path / "b"), "--html", str(out)]) == 1
    page = out.read_text("utf-8")
    parsed = parse(page)
    assert "img" not in parsed.tags and "script" not in parsed.tags and parsed.comments == []
    assert not [name for name, _ in parsed.attributes if name.startswith("on")]
    for payload in PAYLOADS:
        assert payload not in page
    assert PAYLOADS[1] in " ".join(parsed.text)


def test_diff_html_of_a_summary_whose_gates_are_not_an_object_is_an_input_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The gates of run B are applied to the page: a number there raised AttributeError.
    for name, policy in (("a", {"min_pass_rate": 1.0}), ("b", 1.5)):
        (tmp_path / name).mkdir()
        case = {"id": "x", "status": "pass", "tool_sequence": [], "wall_ms": 5}
        summary = {"schema_version": 1, "cases": [case], "policy_snapshot": policy}
        (tmp_path / name / "summary.json").write_text(json.dumps(summary, indent=2))
    out = tmp_path / "diff.html"
    assert run_cli(["diff", str(tmp_path / "a"), str(tmp_path / "b"), "--html", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    summary_b = tmp_path / "b" / "summary.json"
    assert err == f"error: {summary_b}:11: 'policy_snapshot' must be an object, found 1.5"
    assert not out.exists()


# -- in a browser ---------------------------------------------------------------------------


def test_pages_render_in_chromium_without_console_errors_or_requests(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    require_chromium()
    diff_page = runs["root"] / "browser-diff.html"
    assert run_cli(["diff", str(runs["first"]), str(runs["second"]), "--html", str(diff_page)]) == 1
    pages = (runs["first"] / "report.html", runs["second"] / "report.html", diff_page)
    for number, page in enumerate(pages):
        source = page.read_text("utf-8")
        assert external_references(source) == [], page
        opened = render(page, tmp_path / f"browser-{number}")
        assert opened.console == [], (page, opened.console)
        assert opened.requests == [], (page, opened.requests)
        assert "<svg" in opened.dom and "</html>" in opened.dom
        assert external_references(opened.dom) == [], page


def test_fewer_calls_tokens_or_cost_are_not_better_when_cases_crashed() -> None:
    calls = [("lookup", True, 10.0, 1.0), ("refund", True, 10.0, 20.0)]
    before = make_run([make_case("refund", calls), make_case("reset", calls[:1])])
    crashed = make_case("refund", calls[:1], status="error", tokens=(10, 2), cost=0.0)
    after = make_run([crashed, make_case("reset", calls[:1])])
    failed = make_run([make_case("refund", calls[:1], status="fail"), make_case("reset", [])])

    def directions(run: RunResult) -> dict[str, str]:
        baseline = build_summary(before, regression=None)
        regression = compute_regression(baseline, build_summary(run, regression=None), {}, "b.json")
        comparison = baseline_comparison(
            baseline, build_summary(run, regression=regression), regression
        )
        return {row["label"]: row["direction"] for row in comparison["run_metrics"]["rows"]}

    shown = directions(after)
    # A crashed case stops early: its fewer calls, tokens and cost are no saving.
    for label in ("Total tool calls", "Total tokens in", "Total tokens out", "Total cost (USD)"):
        assert shown[label] == "", label
    assert shown["Pass rate"] == "worse"
    # Without a crash, fewer calls still read as better.
    assert directions(failed)["Total tool calls"] == "better"


def test_the_case_details_word_one_tool_error_in_the_singular() -> None:
    run = make_run(
        [make_case("refund", [("lookup", False, 10.0, 1.0), ("refund", True, 5.0, 12.0)])]
    )
    text = " ".join(parse(render_html(run, build_summary(run, regression=None), None)).text)
    assert "2 (1 error)" in text and "1 errors" not in text


def test_kind_check_and_failure_cells_wrap_between_words_never_inside_one() -> None:
    case = make_case("refund", [("lookup", True, 10.0, 1.0)], status="fail")
    case.failure = Failure("cassette_mismatch", "no recording left")
    case.check_failures = [CheckFailure("budget:max_tool_errors", "2 > 0")]
    run = make_run([case])
    page = render_html(run, build_summary(run, regression=None), None)
    # Every cell wraps anywhere (long agent text must not widen the page), except these, whose
    # words wrap at spaces and after underscores only.
    assert "td.words { overflow-wrap: normal; word-break: normal; }" in page
    assert '<td class="words">budget</td><td class="words">max_<wbr>tool_<wbr>errors</td>' in page
    assert '<td class="words">failure</td><td class="words">cassette_<wbr>mismatch</td>' in page
    assert '<td class="words">cassette_<wbr>mismatch</td></tr>' in page  # the list of cases
