"""report.html of ``trialrun compare``: its figures are the receipt's numbers, and it is inert.

Real compare runs of test_compare_e2e's scripted three-case subject (with an incumbent, judged
by the fake judge): passing, failing (``SCRIPTED_FLIP``), partial (an arm that dies and a case
skipped for its environment), with a broken judge, and with hostile agent and judge output. Each
page is parsed and every figure checked against receipt.json, formatted here independently of
the page's code. Headless Chromium (tests/chromium.py) opens the pages where it is installed.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import sys
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from test_compare_session import make_subject as make_session_subject  # type: ignore[import-not-found]
from test_compare_triggers import (  # type: ignore[import-not-found]
    CRASH,
    FALSE_FIRE,
    HIT,
    MISS,
    QUIET,
)
from test_compare_triggers import make_subject as make_trigger_subject

import chromium
from builders import make_compare_subject as make_subject
from htmlpage import PAYLOADS
from trialrun.cli import run_cli
from trialrun.compare import transcript_view
from trialrun.compare.report_figures import AXIS_WIDTH, BAR_WIDTH, EFFICIENCY_BAR_WIDTH
from trialrun.report.svg import bar_length, position, stack

VOID = {"meta", "br", "img", "input", "link", "hr", "area", "base", "col", "embed", "source", "wbr"}


# ---- a small DOM ------------------------------------------------------------------------------


@dataclass
class Node:
    tag: str
    attrs: dict[str, str]
    children: list[Node | str] = field(default_factory=list)

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def words(self) -> str:
        return " ".join(self.text().split())

    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())

    def all(self, tag: str | None = None, cls: str | None = None, **attrs: str) -> list[Node]:
        found = []
        for child in self.children:
            if isinstance(child, str):
                continue
            wanted = {key.replace("_", "-"): value for key, value in attrs.items()}
            if (
                (tag is None or child.tag == tag)
                and (cls is None or cls in child.classes())
                and all(child.attrs.get(key) == value for key, value in wanted.items())
            ):
                found.append(child)
            found.extend(child.all(tag, cls, **attrs))
        return found

    def one(self, tag: str | None = None, cls: str | None = None, **attrs: str) -> Node:
        [node] = self.all(tag, cls, **attrs)
        return node

    def number(self, name: str) -> float:
        return float(self.attrs[name])


class TreeBuilder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#root", {})
        self.stack = [self.root]
        self.comments: list[str] = []
        self.attribute_names: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {name: value or "" for name, value in attrs})
        self.attribute_names.extend(name for name, _ in attrs)
        self.stack[-1].children.append(node)
        if tag not in VOID:
            self.stack.append(node)

    def handle_endtag(self, tag: str) -> None:
        assert self.stack[-1].tag == tag, f"</{tag}> closes <{self.stack[-1].tag}>"
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.stack[-1].children.append(data)

    def handle_comment(self, data: str) -> None:
        self.comments.append(data)


def parse(page: str) -> TreeBuilder:
    builder = TreeBuilder()
    builder.feed(page)
    builder.close()
    assert builder.stack == [builder.root], "every element is closed"
    return builder


# ---- compare runs ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Compare:
    code: int
    out: str
    err: str
    run_dir: Path
    receipt: dict[str, Any]
    page_text: str

    @property
    def page(self) -> Node:
        return parse(self.page_text).root


def compare(
    root: Path, *args: str, env: dict[str, str] | None = None, subject: str = "demo"
) -> Compare:
    """``trialrun compare`` on the subject under ``root``, in its own ``TRIALRUN_HOME``."""
    home = root / "home"
    before = set(home.glob("evals/local/*/*/receipt.json"))
    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TRIALRUN_HOME", str(home))
        for name in ("SCRIPTED_FLIP", "SCRIPTED_WAIT_FOR", "COMPARE_AGENT_PLAN"):
            patch.delenv(name, raising=False)
        for name, value in (env or {}).items():
            patch.setenv(name, value)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = run_cli(["compare", str(root / subject), "-j", "2", "--no-commit", *args])
    [path] = set(home.glob("evals/local/*/*/receipt.json")) - before
    page = path.parent / "report.html"
    return Compare(
        code,
        out.getvalue(),
        err.getvalue(),
        path.parent,
        json.loads(path.read_text(encoding="utf-8")),
        page.read_text(encoding="utf-8"),
    )


DYING_INCUMBENT = """
if arm == "incumbent" and task.startswith("careful"):
    sys.exit(3)
events = [{"""

SECRET = "sk-" + "Q7" * 12
"""The shape of an API key: the store keeps it, the page (a CI artifact) must not."""

HOSTILE_JUDGE = f"""\
import json, sys
json.load(sys.stdin)
print(json.dumps({{"winner": "A", "reason": {json.dumps(" ".join(PAYLOADS))} + " {SECRET}"}}))
"""


@pytest.fixture(scope="module")
def passing(tmp_path_factory: pytest.TempPathFactory) -> Compare:
    root = tmp_path_factory.mktemp("passing")
    make_subject(root)
    return compare(root)


@pytest.fixture(scope="module")
def failing(tmp_path_factory: pytest.TempPathFactory) -> Compare:
    root = tmp_path_factory.mktemp("failing")
    make_subject(root)
    return compare(root, env={"SCRIPTED_FLIP": "1"})


@pytest.fixture(scope="module")
def partial(tmp_path_factory: pytest.TempPathFactory) -> Compare:
    """The incumbent dies on every ``careful`` run; one case needs a program nobody has."""
    root = tmp_path_factory.mktemp("partial")
    subject = make_subject(root)
    agent = subject / "evals" / "agent.py"
    agent.write_text(agent.read_text().replace("\nevents = [{", DYING_INCUMBENT, 1))
    (subject / "evals" / "cases" / "needs_tool.yaml").write_text(
        "task: build with a tool\nrequires: trialrun-no-such-program\nchecks:\n"
        "  - file_exists: out.txt\n"
    )
    return compare(root)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Compare:
    """Payloads in a case name, a check, the agent's transcript and the judge's reasons."""
    root = tmp_path_factory.mktemp("hostile")
    subject = make_subject(root)
    evals = subject / "evals"
    agent = evals / "agent.py"
    agent.write_text(
        agent.read_text().replace(
            'say("summary: "', f'say({json.dumps(" ".join(PAYLOADS) + " " + SECRET)} + "summary: "'
        )
    )
    (evals / "judge.py").write_text(HOSTILE_JUDGE)
    config = evals / "compare.yaml"
    judge = json.dumps([sys.executable, str(evals / "judge.py")])
    config.write_text(
        re.sub(r"  command: \[.*fake_judge.*\]", f"  command: {judge}", config.read_text())
    )
    (evals / "cases" / f"{PAYLOADS[0]}.yaml").write_text(
        f"task: explain it\nchecks:\n  - transcript_mentions: {json.dumps(PAYLOADS[2])}\n"
        "judge: the clearer summary wins\n"
    )
    return compare(root, "--k", "1")


# ---- figures against receipt.json ---------------------------------------------------------------


def half_up(value: float, places: int) -> str:
    return str(Decimal(value).quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP))


def signed(value: float) -> str:
    text = half_up(value, 2)
    return text if text.startswith("-") else f"+{text}"


def percent(net_lift: float) -> str:
    whole = Decimal(100 * net_lift).quantize(Decimal(1), rounding=ROUND_HALF_UP)
    return f"{'+' if net_lift >= 0 else '-'}{abs(whole)}%"


def assert_figures_match(run: Compare) -> None:
    page, receipt = run.page, run.receipt
    assert page.one(id="verdict").text() == receipt["verdict"]
    assert page.one(id="why").words() == f"why: {receipt['attribution']}"
    for name, data in receipt["comparisons"].items():
        assert_comparison(page.one("div", data_comparison=name), data)
    for arm, runs in receipt["case_runs"].items():
        assert_arm(page.one("g", data_arm=arm), receipt["arm_scores"][arm], runs)
    assert_efficiency(page, receipt["efficiency"])
    rows = page.all("tr", "row")
    expected = [
        (entry["case"], str(entry["rep"]), name.removeprefix("candidate-vs-"), row["outcome"])
        for entry in receipt["per_case"]
        for name, row in entry["outcomes"].items()
    ]
    assert [
        (
            r.attrs["data-case"],
            r.attrs["data-rep"],
            r.attrs["data-opponent"],
            r.attrs["data-outcome"],
        )
        for r in rows
    ] == expected
    transcripts = page.all("details", "transcripts-of")
    assert len(transcripts) == len(receipt["per_case"])
    assert not any("open" in details.attrs for details in transcripts)  # collapsed by default


def assert_comparison(card: Node, data: dict[str, Any]) -> None:
    win, loss, tie = data["win"], data["loss"], data["tie"]
    total = win + loss + tie
    assert (
        card.one("span", "counts").words() == f"{win}W / {loss}L / {tie}T over {total} comparisons"
    )
    segments = {rect.attrs["data-outcome"]: rect for rect in card.all("rect", "seg")}
    assert set(segments) == {key for key in ("win", "loss", "tie") if data[key]}
    start = 0.0
    for key, letter in (("win", "W"), ("loss", "L"), ("tie", "T")):
        if not data[key]:
            continue
        rect = segments[key]
        assert int(rect.attrs["data-count"]) == data[key]
        assert rect.number("x") == pytest.approx(start, abs=0.011)
        assert rect.number("width") == pytest.approx(data[key] / total * BAR_WIDTH, abs=0.011)
        start += data[key] / total * BAR_WIDTH
        labels = card.all("text", "inside", data_outcome=key)
        assert [label.text() for label in labels] in ([], [f"{data[key]}{letter}"])
    assert start == pytest.approx(BAR_WIDTH if total else 0.0)
    assert card.one("strong", "net-lift").text() == percent(data["net_lift"])
    if not total:
        assert card.one("rect", "empty") and "no scored rows" in card.words()
    assert card.one("span", "sign-p").text() == f"p={half_up(data['sign_p'], 3)}"
    dot = card.one("circle", "lift-dot")
    assert float(dot.attrs["data-value"]) == data["net_lift"]
    assert dot.number("cx") == pytest.approx((data["net_lift"] + 1) / 2 * AXIS_WIDTH, abs=0.011)
    low, high = data["net_lift_ci95"]
    assert card.one("span", "net-lift-ci").text() == f"[{signed(low)}, {signed(high)}]"
    [whisker] = [line for line in card.all("line", "whisker") if "data-low" in line.attrs]
    assert (float(whisker.attrs["data-low"]), float(whisker.attrs["data-high"])) == (low, high)
    assert whisker.number("x1") == pytest.approx((low + 1) / 2 * AXIS_WIDTH, abs=0.011)
    assert whisker.number("x2") == pytest.approx((high + 1) / 2 * AXIS_WIDTH, abs=0.011)


def assert_arm(group: Node, score: float | None, runs: dict[str, Any]) -> None:
    passed, total = runs["passed"], runs["total"]
    figures = group.one("text", "arm-figures").words()
    if score is None:
        assert not group.all("circle", "score-dot") and figures.startswith("score n/a")
    else:
        dot = group.one("circle", "score-dot")
        assert dot.number("cx") == pytest.approx(score * AXIS_WIDTH, abs=0.011)
        assert figures.startswith(f"score {half_up(score, 2)} ·")
    if not total:
        assert not group.all("circle", "runs-dot") and figures.endswith("passed n/a")
        return
    dot = group.one("circle", "runs-dot")
    assert (int(dot.attrs["data-passed"]), int(dot.attrs["data-total"])) == (passed, total)
    assert dot.number("cx") == pytest.approx(passed / total * AXIS_WIDTH, abs=0.011)
    low, high = runs["ci95"]
    [whisker] = [line for line in group.all("line", "whisker") if "data-low" in line.attrs]
    assert whisker.number("x1") == pytest.approx(low * AXIS_WIDTH, abs=0.011)
    assert whisker.number("x2") == pytest.approx(high * AXIS_WIDTH, abs=0.011)
    assert figures.endswith(f"passed {passed}/{total} [{half_up(low, 2)}, {half_up(high, 2)}]")


EFFICIENCY_TEXT = {
    "turns": lambda value: f"{half_up(value, 1)} turns",
    "duration_ms": lambda value: f"{half_up(value / 1000, 1)}s",
    "cost_usd": lambda value: f"${half_up(value, 2)}",
}


def assert_efficiency(page: Node, efficiency: dict[str, dict[str, Any]]) -> None:
    for metric, text in EFFICIENCY_TEXT.items():
        values = {arm: means[metric] for arm, means in efficiency.items()}
        present = [value for value in values.values() if value is not None]
        blocks = page.all("div", "efficiency", data_metric=metric)
        if not present:
            assert blocks == []
            continue
        [block] = blocks
        for arm, value in values.items():
            bar = block.one("rect", data_arm=arm)
            label = block.one("text", "eff-label", data_arm=arm).text()
            if value is None:
                assert bar.number("width") == 0 and label == "n/a"
                continue
            assert bar.number("width") == pytest.approx(
                value / max(present) * EFFICIENCY_BAR_WIDTH, abs=0.011
            )
            assert label == text(value)


# ---- the pages ---------------------------------------------------------------------------------


def test_passing_compare_with_an_incumbent(passing: Compare) -> None:
    assert passing.code == 0, passing.err
    receipt = passing.receipt
    assert receipt["verdict"] == "PASS"
    assert set(receipt["comparisons"]) == {"candidate-vs-baseline", "candidate-vs-incumbent"}
    assert_figures_match(passing)
    # The figures' labels read as the printed report's (the same numbers, the same rounding).
    text = passing.page.words()
    for line in passing.out.splitlines():
        match = re.match(r"(candidate-vs-\w+): (\S+) net lift \((\d+W / \d+L / \d+T)", line)
        if match:
            card = passing.page.one("div", data_comparison=match[1])
            assert card.one("strong", "net-lift").text() == match[2]
            assert card.one("span", "counts").words().startswith(match[3])
    assert "file_exists: out.txt" in text and "checks-equal-no-judge" in text
    assert f"report: {passing.run_dir / 'report.html'}" in passing.err.splitlines()
    assert "report.html" not in passing.out  # stdout stays the report it was


def test_the_judges_two_answers_are_shown_per_ordering(passing: Compare) -> None:
    [row] = [
        row
        for row in passing.page.all("tr", "row")
        if (row.attrs["data-case"], row.attrs["data-rep"], row.attrs["data-opponent"])
        == ("explain", "0", "baseline")
    ]
    answers = [item.words() for item in row.one("ul", "answers").all("li")]
    assert answers == [
        "candidate as A: candidate: A is longer (300 vs 270 characters)",
        "candidate as B: candidate: B is longer (270 vs 300 characters)",
    ]


def test_a_retried_judge_shows_every_attempt_and_its_error(tmp_path: Path) -> None:
    make_subject(tmp_path)
    state = tmp_path / "judge-calls"
    judge = (
        f"{sys.executable} -m trialrun.compare.fake_judge --prefer longer "
        f"--garbage-first 1 --state {state}"
    )
    run = compare(tmp_path, "--case", "explain", "--k", "1", "--judge-command", judge)

    assert run.code == 0, run.err
    answers = [
        [item.words() for item in row.one("ul", "answers").all("li")]
        for row in run.page.all("tr", "row")
    ]
    [retried] = [items for items in answers if items[0].startswith("attempt 1")]
    assert retried[0].startswith("attempt 1: no answer: expected a JSON object on stdout")
    assert retried[1].startswith("attempt 2: ") and retried[2].startswith("attempt 3: ")
    assert retried[3].startswith("candidate as A, attempt 1 (judge): ")
    [plain] = [items for items in answers if items is not retried]
    assert [item.split(":")[0] for item in plain] == ["candidate as A", "candidate as B"]


def test_transcripts_of_every_arm_are_side_by_side(passing: Compare) -> None:
    details = passing.page.one("details", id="row-1")
    arms = [pane.attrs["data-arm"] for pane in details.all("div", "transcript")]
    assert arms == ["baseline", "candidate", "incumbent"]
    candidate = details.one("div", "transcript", data_arm="candidate").one("pre").text()
    assert '[assistant → Bash] {"command": "make > out.txt"}' in candidate
    assert "[result] num_turns=5 duration_ms=41200 total_cost_usd=0.25 done" in candidate


def test_failing_compare(failing: Compare) -> None:
    assert failing.receipt["verdict"] == "FAIL"
    assert failing.page.one(id="verdict").attrs["class"] == "verdict verdict-FAIL"
    assert_figures_match(failing)


def test_partial_compare_names_its_holes_and_environment_skips(partial: Compare) -> None:
    receipt = partial.receipt
    assert receipt["execution_status"] == "partial"
    kinds = sorted({hole["kind"] for hole in receipt["holes"]})
    assert kinds == ["arm-died", "environment-skip"]
    assert_figures_match(partial)
    section = partial.page.one("section", id="holes")
    named = [(item.attrs["data-kind"], item.words()) for item in section.all("li")]
    for hole in receipt["holes"]:
        where = hole["case"] if hole["rep"] is None else f"{hole['case']} rep {hole['rep']}"
        assert any(
            kind == hole["kind"] and where in text and hole["detail"] in text
            for kind, text in named
        )
    assert "Environment skips" in section.words()
    status = f"partial: {receipt['scored_rows']}/{receipt['expected_rows']} rows scored"
    assert status in partial.page.words()
    holes = [row for row in partial.page.all("tr", "row") if "(hole)" in row.words()]
    assert len(holes) == receipt["expected_rows"] - receipt["scored_rows"]


def test_a_compare_whose_every_case_was_skipped(tmp_path: Path) -> None:
    subject = make_subject(tmp_path)
    for case in (subject / "evals" / "cases").iterdir():
        case.write_text(case.read_text() + "requires: trialrun-no-such-program\n")
    run = compare(tmp_path)

    assert run.receipt["execution_status"] == "failed" and run.receipt["per_case"] == []
    assert_figures_match(run)
    assert "failed: 0/0 rows scored" in run.page.words()
    skips = run.page.one("section", id="holes").all("li", data_kind="environment-skip")
    assert len(skips) == 3
    assert not run.page.all("section", id="arms") and not run.page.all("section", id="efficiency")
    assert "No row was decided." in run.page.words()


def test_trigger_probes_name_each_wrong_and_errored_prompt(tmp_path: Path) -> None:
    probes = {"should_trigger": [HIT, MISS, CRASH], "should_not_trigger": [FALSE_FIRE, QUIET]}
    make_trigger_subject(tmp_path, probes)
    run = compare(tmp_path, subject="subject")

    assert run.code == 0, run.err
    assert_figures_match(run)
    section = run.page.one("section", id="triggers")
    triggers = run.receipt["triggers"]
    counts = " ".join(f"{key}={triggers[key]}" for key in ("tp", "fn", "fp", "tn", "errored"))
    assert section.one("p").words() == f"recall 0.50 · precision 0.50 ({counts})"
    named = [item.words() for item in section.all("li")]
    assert [line.split(":")[0] for line in named] == ["MISS", "ERROR", "FALSE-FIRE"]
    assert named[0] == f"MISS: {' '.join(MISS.split())}"
    assert "agent exited with code 3" in named[1]


def test_a_broken_judge_is_shown_above_everything(tmp_path: Path) -> None:
    make_subject(tmp_path)
    judge = tmp_path / "demo" / "evals" / "judge.py"
    judge.write_text("import sys\nprint('no model reachable', file=sys.stderr)\nsys.exit(5)\n")
    run = compare(tmp_path, "--case", "explain", "--judge-command", f"{sys.executable} {judge}")

    assert run.receipt["broken_setup"] == ["judge"]
    alert = run.page.one("div", "alert-broken")
    assert alert.attrs["data-command"] == "judge"
    assert alert.words().startswith("BROKEN SETUP: ")
    header = parse(run.page_text).root.one("header")
    assert alert in header.all("div")  # in the header, right under the verdict and why


def test_rescore_writes_its_own_page(passing: Compare, tmp_path: Path) -> None:
    root = passing.run_dir.parents[3].parent
    run = compare(root, "--rescore", str(passing.run_dir))
    assert run.receipt["provenance"]["rescored_from"] == passing.run_dir.name
    assert f"rescored from {passing.run_dir.name}" in run.page.words()
    assert_figures_match(run)
    assert "[assistant → Bash]" in run.page.one("details", id="row-1").text()


def test_hostile_output_stays_text(hostile: Compare) -> None:
    tree = parse(hostile.page_text)
    assert hostile.code == 0, hostile.err
    assert "script" not in {node.tag for node in tree.root.all()}
    assert "img" not in {node.tag for node in tree.root.all()}
    assert not [name for name in tree.attribute_names if name.startswith("on")]
    assert tree.comments == []
    for payload in PAYLOADS:
        assert payload not in hostile.page_text
    text = tree.root.text()
    assert text.count(" ".join(PAYLOADS)) >= 2  # in the transcripts and the judge's reasons
    assert f"transcript_mentions: {PAYLOADS[2]}" in text
    assert PAYLOADS[0] in {row.attrs["data-case"] for row in tree.root.all("tr", "row")}


def test_agent_and_judge_secrets_are_redacted(hostile: Compare) -> None:
    transcripts = "".join(path.read_text() for path in (hostile.run_dir / "transcripts").iterdir())
    assert SECRET in transcripts  # the store keeps what the agent really printed
    assert SECRET not in hostile.page_text
    assert hostile.page_text.count("[REDACTED]") >= 4  # transcripts and judge answers


def test_long_transcripts_are_cut_and_the_page_has_a_budget(
    passing: Compare, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(transcript_view, "TRANSCRIPT_CHARS_MAX", 60)
    monkeypatch.setattr(transcript_view, "PAGE_TRANSCRIPT_CHARS_MAX", 150)
    root = passing.run_dir.parents[3].parent
    run = compare(root, "--rescore", str(passing.run_dir), "--case", "build")

    panes = run.page.one("details", id="row-1").all("div", "transcript")
    shown = [len(pane.one("pre").text()) if pane.all("pre") else 0 for pane in panes]
    assert shown == [60, 60, 30]
    notes = [pane.one("p", "note").words() for pane in panes]
    assert notes[0].startswith("truncated: 60 of ")
    assert notes[0].endswith(
        "characters shown; the whole transcript is transcripts/build.baseline.0.jsonl"
    )
    later = run.page.one("details", id="row-2").one("div", "transcript", data_arm="baseline")
    assert not later.all("pre")
    assert later.one("p", "note").words() == (
        "not embedded: the page already holds 150 characters of transcripts; "
        "read transcripts/build.baseline.1.jsonl"
    )


def test_a_session_transcript_is_shown_once_per_arm_and_rep(tmp_path: Path) -> None:
    make_session_subject(tmp_path)
    run = compare(tmp_path)

    assert run.code == 0, run.err
    assert_figures_match(run)
    panes = {
        (details.attrs["id"], pane.attrs["data-arm"]): pane
        for details in run.page.all("details", "transcripts-of")
        for pane in details.all("div", "transcript")
    }
    texts = [pane for pane in panes.values() if pane.all("pre")]
    pointers = [pane for pane in panes.values() if "shown with" in pane.words()]
    # 2 reps x 3 arms: one session transcript each, plus solo's own; 3 more sub-cases point back.
    assert len(texts) == 2 * 3 + 2 * 3
    assert len(pointers) == 3 * 2 * 3
    assert all("session." in pane.words() for pane in pointers)


def test_page_is_self_contained(passing: Compare, hostile: Compare) -> None:
    for page in (passing.page_text, hostile.page_text):
        assert "default-src 'none'" in page and "script-src" not in page
        assert not re.search(r"(?i)https?://", page)
        tree = parse(page)
        loading = {"src", "href", "srcset", "xlink:href", "action", "formaction", "data"}
        assert not loading & set(tree.attribute_names)
        styles = " ".join(node.text() for node in tree.root.all("style"))
        assert "url(" not in styles and "@import" not in styles
        assert not tree.root.all("link") and not tree.root.all("object")


# ---- headless Chromium ------------------------------------------------------------------------


def test_chromium_opens_the_pages_without_errors_or_requests(
    passing: Compare, partial: Compare, hostile: Compare, tmp_path: Path
) -> None:
    chromium.require_chromium()
    for name, run in (("passing", passing), ("partial", partial), ("hostile", hostile)):
        rendered = chromium.render(run.run_dir / "report.html", tmp_path / name)
        assert rendered.console == [], name
        assert rendered.requests == [], name
        dom = parse(rendered.dom).root
        assert dom.one(id="verdict").text() == run.receipt["verdict"]
        assert not dom.all("script") and not dom.all("img")


def test_chromium_check_sees_console_errors_and_requests(tmp_path: Path) -> None:
    """The check above can fail: a page that loads an image and logs is caught both ways."""
    chromium.require_chromium()
    page = tmp_path / "noisy.html"
    page.write_text(
        '<!DOCTYPE html><html><body><img src="http://127.0.0.1:9/x.png">'
        '<script>console.error("boom")</script></body></html>'
    )
    rendered = chromium.render(page, tmp_path / "run")
    assert any('"boom"' in line for line in rendered.console)
    assert rendered.requests == ["http://127.0.0.1:9/x.png"]


# ---- geometry ---------------------------------------------------------------------------------


def test_stacked_segments_tile_the_bar_exactly() -> None:
    segments = stack([("win", 1), ("loss", 1), ("tie", 1)], 100.0)
    assert [(s.x, s.width) for s in segments] == [(0.0, 33.33), (33.33, 33.34), (66.67, 33.33)]
    assert [s.width for s in stack([("win", 0), ("tie", 0)], 100.0)] == [0.0, 0.0]
    with pytest.raises(ValueError, match="counts >= 0"):
        stack([("win", -1)], 10.0)


def test_positions_and_bar_lengths() -> None:
    assert position(0.0, -1.0, 1.0, 480.0) == 240.0
    assert position(5.0, 0.0, 1.0, 480.0) == 480.0  # clamped to the axis
    assert bar_length(2.0, 4.0, 100.0) == 50.0
    assert bar_length(None, 4.0, 100.0) == 0.0 and bar_length(1.0, 0.0, 100.0) == 0.0
    with pytest.raises(ValueError, match="low < high"):
        position(0.0, 1.0, 1.0, 10.0)


def test_a_transcript_line_nested_too_deeply_is_shown_as_written() -> None:
    # Read back and written out again, it would recurse past Python's stack.
    deep = '{"type": "assistant", "message": {"content": ' + "[" * 500 + "]" * 500 + "}}"
    past_the_stack = '{"type": "user", "x": ' + "[" * 100_000 + "]" * 100_000 + "}"
    shallow = '{"type": "assistant", "message": {"content": [{"type": "text", "text": "hi"}]}}'
    text = "\n".join([shallow, deep, past_the_stack])
    assert transcript_view.readable(text).split("\n") == ["[assistant] hi", deep, past_the_stack]
