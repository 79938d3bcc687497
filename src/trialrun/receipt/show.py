"""``trialrun receipt show``: what a receipt says, for a terminal or as one HTML page.

A receipt may be foreign, truncated or tampered with, so nothing here trusts its shape: each line
that parses is cleaned and filed under the run, an attempt or a suite case; other lines are listed;
the verifier's verdict comes first. Content is shown as written (re-redacting would misstate what
the chain commits to) minus control characters, lone surrogates as U+FFFD. Memory stays bounded:
lists keep ``LIST_MAX`` entries and count the rest; strings are cut at ``TEXT_CHARS_MAX``.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trialrun.base.redact import redact_text
from trialrun.base.visible import visible, visible_value
from trialrun.errors import ReceiptError

if TYPE_CHECKING:
    import jinja2

    from trialrun.receipt.verify import SignatureResult, VerifyResult

TEMPLATE_DIR = Path(__file__).parent / "templates"
TEMPLATE_NAME = "receipt.html.j2"
LIST_MAX, CASES_MAX = 200, 10_000
TEXT_CHARS_MAX = 20_000
TERMINAL_OUTPUT_LINES = 6
INCOMPLETE = "incomplete (truncated): the run did not finish"
_SURROGATE = re.compile("[\ud800-\udfff]")

Data = dict[str, Any]
# Added to each event's cleaned data: its line index, its ts, and whether it lies at or after
# the break of a tampered chain (names no standard member uses).
SEQ_KEY, TS_KEY, UNVERIFIED_KEY = "@seq", "@ts", "@unverified"


@dataclass
class Group:
    """One attempt (``key`` is its number) or one suite case (``key`` is the case id)."""

    key: str
    start: Data = field(default_factory=dict)
    end: Data | None = None
    tool_calls: list[Data] = field(default_factory=list)
    tool_calls_total: int = 0
    tool_calls_failed: int = 0
    tool_calls_unverified: int = 0
    unverified_events: int = 0
    usage_events: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
    verifier_results: list[Data] = field(default_factory=list)
    rollbacks: list[str] = field(default_factory=list)

    @property
    def outcome(self) -> str:
        """An attempt's outcome or a case's status, as its closing event states it."""
        if self.end is None:
            return "unfinished"
        rolled_back = ", rolled back" if self.end.get("rolledBack") is True else ""
        return (_text(self.end.get("outcome", self.end.get("status"))) or "unknown") + rolled_back


@dataclass
class ReceiptView:
    """Everything ``summarize`` and ``render_html`` show, read from one receipt file."""

    path: str
    verdict: VerifyResult
    bad_lines: list[str] = field(default_factory=list)
    run_start: Data | None = None
    run_end: Data | None = None
    baseline: list[Data] = field(default_factory=list)
    attempts: dict[str, Group] = field(default_factory=dict)
    cases: dict[str, Group] = field(default_factory=dict)
    file_changes: list[Data] = field(default_factory=list)
    file_changes_total: int = 0
    file_changes_unverified: int = 0
    other_types: Counter[str] = field(default_factory=Counter)
    other_unverified: Counter[str] = field(default_factory=Counter)
    tokens: int = 0
    cost_usd: float = 0.0
    unverified_tokens: int = 0
    unverified_cost_usd: float = 0.0
    lines_read: int = 0

    @property
    def unverified_from(self) -> int | None:
        """The line index from which the chain vouches for nothing, or None when it all holds.

        A chain broken at seq N proves nothing about seq N and after. A bad signature makes the
        whole receipt unproven: whoever changed an event could have rehashed the chain. A cut
        tail (incomplete) leaves every line there intact.
        """
        verdict = self.verdict
        if verdict.status != "tampered":
            return None
        if verdict.reason == "bad_signature":
            return 0
        return verdict.first_bad_seq if verdict.first_bad_seq is not None else 0

    @property
    def unverified_lines(self) -> int:
        start = self.unverified_from
        return 0 if start is None else max(self.lines_read - start, 0)


def summarize(path: str | Path) -> str:
    """The terminal summary of the receipt at ``path``; ReceiptError if it cannot be read."""
    return format_summary(read_receipt(path))


def render_html(path: str | Path) -> str:
    """One self-contained HTML page for the receipt at ``path``; everything from it is escaped."""
    return render_view_html(read_receipt(path))


def read_receipt(path: str | Path) -> ReceiptView:
    """Read and verify ``path``: the content as far as it parses, and the verifier's verdict.

    Raises ReceiptError when ``path`` cannot be read or is no receipt at all (the verifier's
    ``input_error``): there is nothing to show, and a view of it would read as a tampered receipt.
    """
    from trialrun.receipt.verify import verify_receipt

    target = Path(path)
    verdict = verify_receipt(target)
    if verdict.input_error is not None:
        raise ReceiptError(f"{target}: {verdict.input_error}")
    reader = _Reader(ReceiptView(path=_text(str(target)), verdict=verdict))
    try:
        with target.open("rb") as handle:
            for index, raw in enumerate(handle):
                reader.add_line(index, raw)
                reader.view.lines_read = index + 1
    except OSError as exc:
        raise ReceiptError(f"{target}: cannot read the receipt: {exc.strerror or exc}") from exc
    return reader.view


@dataclass
class _Reader:
    """Files each event under the run, an attempt or a case, in file order."""

    view: ReceiptView
    current_case: str | None = None

    def add_line(self, index: int, raw: bytes) -> None:
        try:
            event = json.loads(raw.decode("utf-8"))
            data = _clean(event.get("data")) if isinstance(event, dict) else None
        except (UnicodeDecodeError, ValueError, RecursionError):
            _keep(self.view.bad_lines, f"line {index + 1}: not valid JSON")
            return
        if not isinstance(data, dict):
            _keep(self.view.bad_lines, f"line {index + 1}: not an event object with data")
            return
        data[SEQ_KEY], data[TS_KEY] = index, _text(event.get("ts"))
        start = self.view.unverified_from
        data[UNVERIFIED_KEY] = start is not None and index >= start
        self.add_event(_text(event.get("type")), data)

    def add_event(self, kind: str, data: Data) -> None:
        view = self.view
        unverified = data.get(UNVERIFIED_KEY) is True
        if kind == "run_start":
            view.run_start = data
        elif kind == "run_end":
            view.run_end = data
        elif kind == "attempt_start":
            self.mark(self.attempt(data), unverified).start = data
        elif kind == "attempt_end":
            self.mark(self.attempt(data), unverified).end = data
        elif kind == "case_start":
            self.current_case = _text(data.get("case"))
            self.mark(self.case(self.current_case), unverified).start = data
        elif kind == "case_end":
            case_id = _text(data.get("case")) or self.current_case or ""
            self.mark(self.case(case_id), unverified).end = data
            self.current_case = None
        elif kind == "tool_call":
            group = self.mark(self.owner(data), unverified)
            group.tool_calls_total += 1
            group.tool_calls_failed += data.get("ok") is False
            group.tool_calls_unverified += unverified
            _keep(group.tool_calls, data)
        elif kind == "usage":
            tokens, cost = int(_float(data.get("totalTokens"))), _float(data.get("costUsd"))
            group = self.mark(self.owner(data), unverified)
            group.usage_events += 1
            group.tokens, group.cost_usd = group.tokens + tokens, group.cost_usd + cost
            view.tokens, view.cost_usd = view.tokens + tokens, view.cost_usd + cost
            if unverified:
                view.unverified_tokens += tokens
                view.unverified_cost_usd += cost
        elif kind == "verifier_result":
            is_baseline = data.get("attempt") == 0
            if is_baseline:
                _keep(view.baseline, data)
            else:
                _keep(self.mark(self.attempt(data), unverified).verifier_results, data)
        elif kind == "rollback":
            _keep(self.mark(self.attempt(data), unverified).rollbacks, _text(data.get("reason")))
        elif kind == "file_change":
            view.file_changes_total += 1
            view.file_changes_unverified += unverified
            _keep(view.file_changes, data)
        else:
            view.other_types[kind] += 1
            view.other_unverified[kind] += unverified

    @staticmethod
    def mark(group: Group, unverified: bool) -> Group:
        group.unverified_events += unverified
        return group

    def attempt(self, data: Data) -> Group:
        return _group(self.view.attempts, _text(data.get("attempt")) or "?", LIST_MAX)

    def case(self, case_id: str) -> Group:
        return _group(self.view.cases, case_id, CASES_MAX)

    def owner(self, data: Data) -> Group:
        """A suite run's events belong to a case; an attempt run's to an attempt."""
        case_id = _text(data.get("case")) or self.current_case
        return self.case(case_id) if case_id else self.attempt(data)


def _group(groups: dict[str, Group], key: str, limit: int) -> Group:
    # Past the limit, events are still read (for the totals) but their group is not kept.
    group = groups.get(key) or Group(key=key)
    if key not in groups and len(groups) < limit:
        groups[key] = group
    return group


def format_summary(view: ReceiptView) -> str:
    """The terminal text of ``view``: verdict first, then the run as the receipt tells it."""
    lines = [f"Receipt: {view.path}", *verdict_lines(view.verdict), *unverified_note(view)]
    lines += ["", *run_lines(view)]
    for result in view.baseline:
        lines += ["", *_verifier_lines("Baseline", result, indent="")]
    for attempt in view.attempts.values():
        lines += ["", *_attempt_lines(attempt)]
    if view.cases:
        lines += ["", *_case_lines(view)]
    if view.file_changes_total:
        shown = _shown(view.file_changes_total, view.file_changes)
        unverified = view.file_changes_unverified
        marked = f", {unverified} NOT VERIFIED" if unverified else ""
        lines += ["", f"Files changed: {view.file_changes_total}{marked}{shown}"]
        for change in view.file_changes:
            note = " (diff truncated)" if change.get("diffTruncated") is True else ""
            note += " [NOT VERIFIED]" if _unverified(change) else ""
            lines.append(f"  {_text(change.get('status')):<9} {_text(change.get('path'))}{note}")
    if view.other_types:
        counts = ", ".join(
            f"{kind} x{count}" + _not_verified_count(view.other_unverified[kind])
            for kind, count in sorted(view.other_types.items())
        )
        lines += ["", f"Other events: {counts}"]
    lines += ["", *totals_lines(view)]
    if view.bad_lines:
        lines += ["", "Unreadable lines:", *(f"  {line}" for line in view.bad_lines)]
    return "\n".join(lines) + "\n"


def verdict_lines(result: VerifyResult) -> list[str]:
    """The verifier's verdict as ``receipt verify`` and ``receipt show`` print it."""
    lines = [
        _verdict_head(result),
        f"  events:    {result.event_count}",
        f"  signature: {_signature_text(result.signature)}",
    ]
    if result.last_hash is not None:
        lines.append(f"  last hash: {_text(result.last_hash)}")
    if result.key_order == "codepoint":
        lines.append("  note:      hashed with keys in code-point order, not UTF-16 order")
    return lines


def unverified_note(view: ReceiptView) -> list[str]:
    """What of the shown content the chain does not vouch for, when the receipt is tampered."""
    start = view.unverified_from
    if start is None:
        return []
    if view.verdict.reason == "bad_signature":
        where = "all of it: the signature does not match, so the chain proves nothing"
    else:
        where = f"every line from seq {start} on ({view.unverified_lines} of {view.lines_read})"
    return [f"  shown but NOT VERIFIED: {where}"]


def _verdict_head(result: VerifyResult) -> str:
    # A signature verdict concerns the whole receipt, not the seq of run_end that carries it.
    message = _text(result.message)
    if result.ok:
        return f"Verified: {message}"
    if result.reason == "unsigned":
        chain = f"its chain is intact ({result.event_count} events, run complete)"
        return f"NOT SIGNED (unsigned): the receipt is not signed, but one is required; {chain}"
    if result.reason == "untrusted_key":
        return f"UNTRUSTED SIGNER (untrusted_key): {message}"
    if result.reason == "bad_signature":
        return f"TAMPERED or invalid signature (bad_signature): {message}"
    if result.reason == "truncated":
        # What a crash or an interrupt leaves: every event there is intact, the end is missing.
        last = result.event_count - 1
        intact = f"the {result.event_count} events up to there are intact"
        return f"{INCOMPLETE}: no run_end after seq {last} ({intact})"
    seq = result.first_bad_seq if result.first_bad_seq is not None else 0
    return f"TAMPERED or invalid at seq {seq} ({result.reason or 'unknown'}): {message}"


def _signature_text(signature: SignatureResult) -> str:
    if not signature.present:
        return "none"
    key = f"public key {_text(signature.public_key)}" if signature.public_key else ""
    if signature.valid is None:
        # The chain broke before run_end: a signature over a broken chain proves nothing.
        claims = f" (claims {key})" if key else ""
        return f"present, not checked because the chain is broken{claims}"
    return ", ".join(part for part in ("valid" if signature.valid else "INVALID", key) if part)


def run_lines(view: ReceiptView) -> list[str]:
    """Goal, verify command, repository and tool, from run_start."""
    start = view.run_start
    if start is None:
        return ["No run_start event could be read."]
    tool = start["tool"] if isinstance(start.get("tool"), dict) else {}
    branch = _text(start.get("branch"))
    ended = f", ended {_text(view.run_end.get(TS_KEY))}" if view.run_end else ""
    head = ["run_start: NOT VERIFIED (at or after the break)"] if _unverified(start) else []
    return [
        *head,
        f"Goal:    {_text(start.get('goal'))}",
        f"Verify:  {_text(start.get('verifyCommand'))}",
        f"Repo:    {_text(start.get('repoHead')) or '(no commit)'}"
        + (f" on {branch}" if branch else ""),
        f"Tool:    {_text(tool.get('name'))} {_text(tool.get('version'))}".rstrip(),
        f"Started: {_text(start.get(TS_KEY))}{ended}",
    ]


def totals_lines(view: ReceiptView) -> list[str]:
    """Usage summed over usage events, then what run_end states."""
    usage = f"Usage:   {view.tokens:,} tokens, ${_number(view.cost_usd)} (sum of usage events"
    if view.unverified_tokens or view.unverified_cost_usd:
        usage += (
            f"; {view.unverified_tokens:,} tokens, ${_number(view.unverified_cost_usd)} of it "
            "NOT VERIFIED"
        )
    usage += ")"
    end = view.run_end
    if end is None:
        return [usage, "Run end: missing (the run did not finish or the receipt was cut)"]
    totals = _pairs(end.get("totals"), ("attempts", "totalTokens", "costUsd", "filesChanged"))
    cases = _pairs(end.get("cases"), ("total", "passed", "failed", "errors"))
    stop, verified = _text(end.get("stopReason")), _text(end.get("verified"))
    text = "Run end" + (" (NOT VERIFIED)" if _unverified(end) else "")
    text += f": stop reason {stop}, verified {verified}"
    text += f"; totals: {totals}" if totals else ""
    return [usage, text + (f"; cases: {cases}" if cases else "")]


def render_view_html(view: ReceiptView) -> str:
    """The page for ``view``: jinja2 with autoescape, no script, a CSP that forbids loading."""
    template = _environment().get_template(TEMPLATE_NAME)
    summary = [*run_lines(view), *totals_lines(view)]
    verdict = [*verdict_lines(view.verdict), *unverified_note(view)]
    page = template.render(view=view, verdict_lines=verdict, summary=summary)
    return _SURROGATE.sub("\ufffd", page)  # values are clean already: a guard for the encoding


@lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    # jinja2 costs import time; only ``receipt show --html`` pays for it.
    import jinja2

    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATE_DIR)),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=visible_value,
    )
    environment.filters["number"] = _number
    environment.filters["ok_text"] = _ok_text
    environment.filters["text"] = _text
    environment.filters["tool_call_counts"] = tool_call_counts
    return environment


def _attempt_lines(attempt: Group) -> list[str]:
    model = _text(attempt.start.get("model"))
    lines = [
        f"Attempt {attempt.key}"
        + (f" ({model})" if model else "")
        + f": {attempt.outcome}"
        + _group_mark(attempt)
    ]
    lines.extend(_activity_lines(attempt))
    for result in attempt.verifier_results:
        lines.extend(_verifier_lines("verifier", result, indent="  "))
    lines.extend(f"  rollback: {reason}" for reason in attempt.rollbacks)
    return lines


def _activity_lines(group: Group) -> list[str]:
    lines = [f"  tool calls: {tool_call_counts(group)}"]
    for call in group.tool_calls:
        duration = call.get("durationMs")
        lines.append(
            f"    {_ok_text(call.get('ok')):<4} {_text(call.get('name'))} "
            + _text(call.get("argsSummary")).replace("\n", " ")
            + (f" {_number(duration)} ms" if duration is not None else "")
            + (" [redacted]" if call.get("redacted") is True else "")
            + (" [NOT VERIFIED]" if _unverified(call) else "")
        )
    if group.usage_events:
        lines.append(f"  usage: {group.tokens:,} tokens, ${_number(group.cost_usd)}")
    return lines


def tool_call_counts(group: Group) -> str:
    """``3, 1 failed, 2 not verified (first 2 shown)``: the counts the page and summary show."""
    text = str(group.tool_calls_total)
    text += f", {group.tool_calls_failed} failed" if group.tool_calls_failed else ""
    text += f", {group.tool_calls_unverified} NOT VERIFIED" if group.tool_calls_unverified else ""
    return text + _shown(group.tool_calls_total, group.tool_calls)


def _not_verified_count(count: int) -> str:
    return f" ({count} NOT VERIFIED)" if count else ""


def _group_mark(group: Group) -> str:
    return " [NOT VERIFIED]" if group.unverified_events else ""


def _unverified(data: Data | None) -> bool:
    return data is not None and data.get(UNVERIFIED_KEY) is True


def _verifier_lines(label: str, result: Data, *, indent: str) -> list[str]:
    passed = result.get("passed")
    verdict = "passed" if passed is True else "FAILED" if passed is False else "unknown"
    details = f"exit {_number(result.get('exitCode'))}, score {_number(result.get('failureScore'))}"
    details += ", timed out" if result.get("timedOut") is True else ""
    details += ", NOT VERIFIED" if _unverified(result) else ""
    lines = [f"{indent}{label}: {verdict} ({details}): {_text(result.get('command'))}"]
    output = _text(result.get("output")).splitlines()
    shown = output[-TERMINAL_OUTPUT_LINES:]
    if len(output) > len(shown):
        lines.append(f"{indent}  ... {len(output) - len(shown)} earlier output lines")
    lines.extend(f"{indent}  | {line}" for line in shown)
    return lines


def _case_lines(view: ReceiptView) -> list[str]:
    statuses = Counter(case.outcome for case in view.cases.values())
    counts = ", ".join(f"{count} {status}" for status, count in sorted(statuses.items()))
    unverified = sum(1 for case in view.cases.values() if case.unverified_events)
    counts += f"; {unverified} NOT VERIFIED" if unverified else ""
    lines = [f"Cases ({len(view.cases)}): {counts}"]
    for case in view.cases.values():
        # trialrun writes camelCase members; the first draft of the contract spelled snake_case.
        kind = _text((case.end or {}).get("failureKind", (case.end or {}).get("failure_kind")))
        usage = f", {case.tokens:,} tokens" if case.usage_events else ""
        lines.append(
            f"  {case.outcome:<10} {case.key}"
            + (f" ({kind})" if kind else "")
            + f": {case.tool_calls_total} tool calls{usage}"
            + _group_mark(case)
        )
    return lines


def _pairs(values: Any, keys: tuple[str, ...]) -> str:
    found = values if isinstance(values, dict) else {}
    return ", ".join(f"{key} {_number(found[key])}" for key in keys if key in found)


def _clean(value: Any) -> Any:
    """A copy of parsed JSON with every string made displayable (see ``_text``)."""
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, dict):
        return {_text(key, limit=200): _clean(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_clean(item) for item in value[:LIST_MAX]]
    return value


def _keep(items: list[Any], item: Any) -> None:
    if len(items) < LIST_MAX:
        items.append(item)


def _shown(total: int, kept: list[Any]) -> str:
    return f" (first {len(kept)} shown)" if total > len(kept) else ""


def _text(value: Any, *, limit: int = TEXT_CHARS_MAX) -> str:
    """Displayable text, cut at ``limit``: control and bidi characters (newline and tab aside)
    shown as escapes (``base.visible``), so a receipt cannot colour or reorder what it shows."""
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    # A receipt from another harness may hold what trialrun's writer would have redacted;
    # redaction reads the text before its characters are escaped.
    # A CR before a LF is a line end, kept by ``visible``; shown as the LF alone, so no view
    # prints a CR whatever it does with line ends.
    text = visible(redact_text(text)).replace("\r\n", "\n")
    if len(text) > limit:
        # Exactly ``limit`` long once cut, so cleaning a cleaned text changes nothing.
        suffix = f"... ({len(text):,} characters)"
        text = text[: limit - len(suffix)] + suffix
    return text


def _float(value: Any) -> float:
    """A finite JSON number as float, anything else (a tampered member) as 0."""
    number = 0.0 if isinstance(value, bool) or not isinstance(value, int | float) else float(value)
    return number if number == number and abs(number) != float("inf") else 0.0


def _number(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return _text(value)
    if isinstance(value, float) and not value.is_integer():
        return f"{value:.6g}"
    return f"{int(value):,}" if abs(value) < 1e21 else f"{value:g}"


def _ok_text(ok: Any) -> str:
    return "ok" if ok is True else "FAIL" if ok is False else "?"
