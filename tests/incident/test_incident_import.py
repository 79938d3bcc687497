"""Incident import: every export format to one normalized, redacted incident."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from paths import DATA_DIR
from trialrun.errors import ConfigError
from trialrun.incident.importers import apply_redact_paths, import_export, read_records
from trialrun.incident.importers._common import decode_text, parse_iso
from trialrun.incident.model import (
    Incident,
    IncidentCall,
    is_inconclusive,
    load_incident,
    write_incident,
)

DATA = DATA_DIR / "incidents"
FIXTURES = {
    "trialrun_run.jsonl": "trialrun-run-jsonl",
    "runledger_run.jsonl": "runledger-run-jsonl",
    "otlp_collector.jsonl": "otlp",
    "otlp_protobuf.json": "otlp",
    "openai_agents_spans.jsonl": "openai-agents",
    "langsmith_runs.json": "langsmith",
    "langfuse_trace.json": "langfuse",
}
# The card number and the e-mail address go by default (trialrun.incident.personal).
REFUND_ARGS = {"order_id": "ord_1042", "amount": 129.0, "card_number": "[REDACTED]"}
EXPECTED_CALLS = [
    ("lookup_order", {"order_id": "ord_1042"}, True, None),
    ("issue_refund", REFUND_ARGS, False, "gateway timeout"),
    ("issue_refund", REFUND_ARGS, True, None),
    ("issue_refund", REFUND_ARGS, True, None),
    ("send_email", {"to": "[REDACTED]", "template": "refund_confirmation"}, True, None),
]
SECRETS = ("4111111111111111", "dana.reyes@example.com", "pm_tok_9f8e7d6c5b4a")
REDACT_PATHS = ("calls.*.args.card_number", "calls.*.args.to", "input.customer.email")


def _core(incident: Incident) -> dict[str, Any]:
    document = incident.to_json()
    return {k: document[k] for k in ("input", "final_output", "calls", "missing")}


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_each_format_imports_the_same_refund_incident(name: str) -> None:
    incident = import_export(DATA / name)
    assert incident.source_format == FIXTURES[name]
    assert incident.source_file.endswith(name)
    found = [(c.name, c.args, c.ok, c.error) for c in incident.calls]
    assert found == EXPECTED_CALLS
    assert [c.index for c in incident.calls] == [0, 1, 2, 3, 4]
    assert incident.calls[2].result == {"refund_id": "re_5531", "status": "succeeded"}
    assert incident.calls[3].result == {"refund_id": "re_5532", "status": "succeeded"}
    assert incident.calls[1].result is None
    assert incident.calls[0].started_at == "2026-11-30T14:02:12.370000Z"
    assert [c.duration_ms for c in incident.calls] == [38.0, 5000.0, 412.0, 398.0, 121.0]
    assert incident.input["request"].startswith("My order ord_1042")
    assert incident.final_output["refund_ids"] == ["re_5531", "re_5532"]
    assert incident.missing == []
    assert incident.violations == []
    assert not is_inconclusive(incident)
    assert _core(incident) == _core(import_export(DATA / "trialrun_run.jsonl"))


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_each_format_is_redacted_before_anything_is_written(name: str, tmp_path: Path) -> None:
    incident = import_export(DATA / name, redact_paths=REDACT_PATHS)
    assert incident.calls[0].result["payment_token"] == "[REDACTED]"  # default secret rules
    assert all(c.args and c.args["card_number"] == "[REDACTED]" for c in incident.calls[1:4])
    assert incident.calls[4].args == {"to": "[REDACTED]", "template": "refund_confirmation"}
    assert incident.input["customer"] == {"id": "cus_8812", "email": "[REDACTED]"}
    out = tmp_path / "sanitized" / "incident.json"
    write_incident(out, incident)
    text = out.read_text(encoding="utf-8")
    assert not any(secret in text for secret in SECRETS)
    assert load_incident(out) == incident


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_without_redact_paths_custom_fields_stay_but_secrets_and_personal_data_go(
    name: str,
) -> None:
    incident = import_export(DATA / name)
    assert incident.calls[1].args == REFUND_ARGS
    assert incident.calls[0].result["payment_token"] == "[REDACTED]"
    assert incident.input["customer"] == {"id": "cus_8812", "email": "[REDACTED]"}
    text = json.dumps(incident.to_json())
    assert not any(secret in text for secret in SECRETS)


def test_a_bad_redact_path_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="no empty segment"):
        import_export(DATA / "langfuse_trace.json", redact_paths=["calls..args"])


@pytest.mark.parametrize(
    ("path", "hint"),
    [
        ("calls.*.args.card_numbr", " (did you mean 'calls.*.args.card_number'?)"),
        ("input.custmer.email", " (did you mean 'input.customer.email'?)"),
        # lookup_order has no card; the others have one
        ("calls.0.args.card_number", " (did you mean 'calls.*.args.card_number'?)"),
        ("zzz", " (the incident's top-level fields: calls, final_output, input, "),
    ],
)
def test_a_redact_path_that_matches_nothing_is_an_error(path: str, hint: str) -> None:
    with pytest.raises(ConfigError) as caught:
        import_export(DATA / "trialrun_run.jsonl", redact_paths=["calls.*.args.to", path])
    assert caught.value.file is not None and caught.value.file.endswith("trialrun_run.jsonl")
    assert caught.value.message.startswith(
        f"--redact-path '{path}' matches nothing in the incident, so it would redact nothing{hint}"
    )


def test_a_redact_path_matching_some_calls_only_is_fine() -> None:
    incident = import_export(DATA / "trialrun_run.jsonl", redact_paths=["calls.*.args.amount"])
    assert [c.args.get("amount") for c in incident.calls] == [None, *["[REDACTED]"] * 3, None]


# ---- missing capture -> inconclusive, per format ---------------------------------------------


def _lines(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (DATA / name).read_text().splitlines() if line]


def _write_lines(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _otlp_without_content(tmp_path: Path) -> Path:
    request = _lines("otlp_collector.jsonl")[0]
    for span in request["resourceSpans"][0]["scopeSpans"][0]["spans"]:
        dropped = {"gen_ai.tool.call.arguments", "gen_ai.tool.call.result"}
        dropped |= {"gen_ai.input.messages", "gen_ai.output.messages"}
        span["attributes"] = [a for a in span["attributes"] if a["key"] not in dropped]
    return _write_lines(tmp_path / "otlp.jsonl", [request])


def _agents_without_content(tmp_path: Path) -> Path:
    records = _lines("openai_agents_spans.jsonl")
    for record in records:
        data = record.get("span_data") or {}
        if data.get("type") == "generation":
            data["input"] = data["output"] = None
        if data.get("type") == "function":
            data["input"] = ""
            data["output"] = None
    return _write_lines(tmp_path / "agents.jsonl", records)


def _langsmith_without_content(tmp_path: Path) -> Path:
    runs = json.loads((DATA / "langsmith_runs.json").read_text())
    for run in runs:
        run["inputs"], run["outputs"] = {}, None
    path = tmp_path / "runs.json"
    path.write_text(json.dumps(runs), encoding="utf-8")
    return path


def _langfuse_without_content(tmp_path: Path) -> Path:
    trace = json.loads((DATA / "langfuse_trace.json").read_text())
    trace["input"] = trace["output"] = None
    for observation in trace["observations"]:
        observation["input"] = observation["output"] = None
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(trace), encoding="utf-8")
    return path


def _run_jsonl_without_content(tmp_path: Path) -> Path:
    records = [
        r
        for r in _lines("runledger_run.jsonl")
        if r["type"] not in ("task_start", "tool_result", "final_output")
    ]
    for record in records:
        if record["type"] == "tool_call":
            record["args"] = None
    return _write_lines(tmp_path / "run.jsonl", records)


@pytest.mark.parametrize(
    "make",
    [
        _otlp_without_content,
        _agents_without_content,
        _langsmith_without_content,
        _langfuse_without_content,
        _run_jsonl_without_content,
    ],
)
def test_missing_capture_is_listed_and_inconclusive(make: Any, tmp_path: Path) -> None:
    incident = import_export(make(tmp_path))
    assert is_inconclusive(incident)
    assert "input" in incident.missing
    names = [c.name for c in incident.calls]
    assert names == [c[0] for c in EXPECTED_CALLS]
    for call in incident.calls:
        assert call.args is None
        assert f"calls[{call.index}].args ({call.name})" in incident.missing
        if call.index != 1:  # the timeout is an error, which every format still records
            assert call.ok is None
            assert f"calls[{call.index}].result ({call.name})" in incident.missing


def test_run_jsonl_without_final_output_is_not_a_capture_gap(tmp_path: Path) -> None:
    records = [r for r in _lines("trialrun_run.jsonl") if r["type"] != "final_output"]
    incident = import_export(_write_lines(tmp_path / "run.jsonl", records))
    assert incident.final_output is None
    assert incident.missing == []


def test_run_jsonl_with_several_cases_takes_the_only_failing_one(tmp_path: Path) -> None:
    failing = _lines("runledger_run.jsonl")
    failing[-1]["passed"] = False
    passing = [dict(r, case_id="other") for r in _lines("runledger_run.jsonl")[:3]]
    passing.append({"type": "case_end", "case_id": "other", "timestamp": 1.0, "passed": True})
    incident = import_export(_write_lines(tmp_path / "run.jsonl", passing + failing))
    assert len(incident.calls) == 5


def test_run_jsonl_with_several_passing_cases_is_ambiguous(tmp_path: Path) -> None:
    records = _lines("runledger_run.jsonl")
    records += [dict(r, case_id="other") for r in records]
    with pytest.raises(ConfigError, match="exactly one failing case, found 2 cases"):
        import_export(_write_lines(tmp_path / "run.jsonl", records))


# ---- format details ------------------------------------------------------------------------


def test_otlp_keeps_only_the_outermost_tool_span() -> None:
    records = read_records(DATA / "otlp_collector.jsonl")
    spans = records[0]["resourceSpans"][0]["scopeSpans"][0]["spans"]
    assert sum("tools/call" in s["name"] for s in spans) == 1  # the nested MCP server span
    assert [c.name for c in import_export(DATA / "otlp_collector.jsonl").calls][-1:] == [
        "send_email"
    ]


def test_otlp_mcp_client_span_takes_the_tool_name_from_the_span_name(tmp_path: Path) -> None:
    span = {
        "traceId": "5b8efff798038103d269b633813fc60c",
        "spanId": "AAAAAAAAAAE=",
        "name": "MCP send tools/call refund_status",
        "kind": "SPAN_KIND_CLIENT",
        "startTimeUnixNano": "1796047331120000000",
        "endTimeUnixNano": 1796047331220000000,
        "attributes": [
            {"key": "mcp.method.name", "value": {"stringValue": "tools/call"}},
            {
                "key": "gen_ai.tool.call.arguments",
                "value": {
                    "kvlistValue": {
                        "values": [
                            {"key": "order_id", "value": {"stringValue": "ord_1"}},
                            {"key": "tries", "value": {"intValue": "3"}},
                            {"key": "ids", "value": {"arrayValue": {"values": [{"boolValue": 1}]}}},
                        ]
                    }
                },
            },
        ],
        "status": {"code": "STATUS_CODE_ERROR"},
    }
    path = _write_lines(
        tmp_path / "mcp.jsonl", [{"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}]
    )
    (call,) = import_export(path).calls
    assert call.name == "refund_status"
    assert call.args == {"order_id": "ord_1", "tries": 3, "ids": [True]}
    assert (call.ok, call.error) == (False, "error")
    assert call.duration_ms == 100.0


def test_langsmith_tool_message_with_error_status_is_a_failed_call(tmp_path: Path) -> None:
    runs = json.loads((DATA / "langsmith_runs.json").read_text())
    lookup = next(r for r in runs if r["name"] == "lookup_order")
    lookup["outputs"]["output"]["kwargs"].update(status="error", content="order service down")
    path = tmp_path / "runs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in runs), encoding="utf-8")
    call = import_export(path).calls[0]
    assert (call.ok, call.result, call.error) == (False, None, "order service down")


def test_openai_agents_redacted_tool_error_keeps_the_sdk_message(tmp_path: Path) -> None:
    records = _lines("openai_agents_spans.jsonl")
    for record in records:
        if record.get("error"):
            record["error"]["data"] = None
    call = import_export(_write_lines(tmp_path / "agents.jsonl", records)).calls[1]
    assert call.error == "Error running tool (non-fatal)"


def test_langfuse_observations_page_uses_the_root_observation(tmp_path: Path) -> None:
    trace = json.loads((DATA / "langfuse_trace.json").read_text())
    path = tmp_path / "page.json"
    path.write_text(json.dumps({"data": trace["observations"], "meta": {}}), encoding="utf-8")
    assert _core(import_export(path)) == _core(import_export(DATA / "langfuse_trace.json"))


# ---- unusable exports ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"hello": "world"}', "unrecognized export format"),
        ("", "export is empty"),
        ('{"type": "tool_call", "case_id": "a"}\nnot json\n', "invalid JSON"),
    ],
)
def test_unusable_exports_are_config_errors_naming_the_file(
    text: str, message: str, tmp_path: Path
) -> None:
    path = tmp_path / "export.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=message) as caught:
        import_export(path)
    assert caught.value.file is not None and caught.value.file.endswith("export.json")


def test_invalid_json_line_reports_its_line(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    path.write_text('{"a": 1}\n\n{oops\n', encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        read_records(path)
    assert caught.value.line == 3


def test_missing_export_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read export"):
        import_export(tmp_path / "absent.json")


# Ids, parents and types that are JSON arrays or objects: set lookups of them raised TypeError.
def _langfuse_with(tmp_path: Path, index: int, key: str, value: Any) -> Path:
    trace = json.loads((DATA / "langfuse_trace.json").read_text())
    trace["observations"][index][key] = value
    path = tmp_path / "langfuse.json"
    path.write_text(json.dumps(trace), encoding="utf-8")
    return path


def test_an_observation_type_that_is_not_text_is_no_langfuse_export(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unrecognized export format"):
        import_export(_langfuse_with(tmp_path, 1, "type", ["GENERATION"]))


@pytest.mark.parametrize(("key", "value"), [("id", ["obs-gen-1"]), ("parentObservationId", {})])
def test_langfuse_ids_that_are_not_text_name_no_observation(
    tmp_path: Path, key: str, value: Any
) -> None:
    incident = import_export(_langfuse_with(tmp_path, 1, key, value))
    assert _core(incident)["calls"] == _core(import_export(DATA / "langfuse_trace.json"))["calls"]


def test_langsmith_ids_that_are_not_text_name_no_run(tmp_path: Path) -> None:
    runs = json.loads((DATA / "langsmith_runs.json").read_text())
    runs[0]["id"], runs[-1]["parent_run_id"] = ["x"], {"y": 1}
    path = tmp_path / "langsmith.json"
    path.write_text(json.dumps(runs), encoding="utf-8")
    names = [call.name for call in import_export(path).calls]
    assert names == [call[0] for call in EXPECTED_CALLS]


# ---- model ---------------------------------------------------------------------------------

_json_scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=8)
_json = st.recursive(
    _json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
_calls = st.builds(
    IncidentCall,
    index=st.integers(0, 50),
    name=st.text(min_size=1, max_size=10),
    args=st.none() | st.dictionaries(st.text(max_size=5), _json, max_size=3),
    ok=st.none() | st.booleans(),
    result=_json,
    error=st.none() | st.text(max_size=10),
    started_at=st.none() | st.just("2026-11-30T14:02:12.370000Z"),
    duration_ms=st.none() | st.floats(0, 1e6),
)
_incidents = st.builds(
    Incident,
    source_format=st.sampled_from(sorted(set(FIXTURES.values()))),
    source_file=st.text(max_size=10),
    input=_json,
    final_output=_json,
    calls=st.lists(_calls, max_size=4),
    missing=st.lists(st.text(max_size=10), max_size=3),
    violations=st.lists(st.fixed_dictionaries({"rule": st.text(max_size=5)}), max_size=2),
)


@given(_incidents)
def test_incident_json_round_trips(incident: Incident) -> None:
    document = json.loads(json.dumps(incident.to_json()))
    assert document["schema_version"] == 1
    assert Incident.from_json(document) == incident


def test_is_inconclusive_on_each_kind_of_gap() -> None:
    complete = IncidentCall(index=0, name="t", args={}, ok=True, result=1)
    assert not is_inconclusive(Incident("otlp", "f", None, None, [complete], []))
    assert is_inconclusive(Incident("otlp", "f", None, None, [complete], ["input"]))
    no_args = IncidentCall(index=0, name="t", args=None, ok=True)
    no_result = IncidentCall(index=0, name="t", args={}, ok=None)
    assert is_inconclusive(Incident("otlp", "f", None, None, [no_args], []))
    assert is_inconclusive(Incident("otlp", "f", None, None, [no_result], []))


@pytest.mark.parametrize(
    ("mutate", "key"),
    [
        (lambda d: d.update(schema_version=2), "schema_version"),
        (lambda d: d.update(calls={}), "calls"),
        (lambda d: d["calls"][0].update(index="0"), "calls[0].index"),
        (lambda d: d["calls"][0].update(name=""), "calls[0].name"),
        (lambda d: d["calls"][0].update(args=[1]), "calls[0].args"),
        (lambda d: d["calls"][0].update(ok="yes"), "calls[0].ok"),
        (lambda d: d["calls"][0].update(duration_ms=True), "calls[0].duration_ms"),
        (lambda d: d.update(missing=[1]), "missing"),
        (lambda d: d.update(source_format=None), "source_format"),
    ],
)
def test_load_incident_rejects_invalid_documents(mutate: Any, key: str, tmp_path: Path) -> None:
    document = import_export(DATA / "trialrun_run.jsonl").to_json()
    mutate(document)
    path = tmp_path / "incident.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(ConfigError, match="expected") as caught:
        load_incident(path)
    assert caught.value.key == key
    assert caught.value.file == str(path)


def _rename(mapping: dict[str, Any], old: str, new: str) -> None:
    mapping[new] = mapping.pop(old)


@pytest.mark.parametrize(
    ("mutate", "marker", "message"),
    [
        (
            lambda d: _rename(d, "calls", "cals"),
            '"cals"',
            "unknown key 'cals' in the incident (did you mean 'calls'?)",
        ),
        (
            lambda d: _rename(d["calls"][2], "name", "nmae"),
            '"nmae"',
            "unknown key 'nmae' in calls[2] (did you mean 'name'?)",
        ),
        (
            lambda d: _rename(d["calls"][1], "duration_ms", "Duration_ms"),
            '"Duration_ms"',
            "unknown key 'Duration_ms' in calls[1] (did you mean 'duration_ms'?)",
        ),
        (
            lambda d: d["calls"][3].update(index="MARKER"),
            '"MARKER"',
            'calls[3].index: expected an integer, found "MARKER"',
        ),
        (
            lambda d: d.update(missing=["x", 7]),
            '"missing"',
            "missing: expected a list of strings",
        ),
        (
            lambda d: d["calls"][1].pop("name"),
            '"args"',  # the call's first key (sorted): the call's "{" is the line above
            "missing required key 'name' in calls[1]",
        ),
    ],
)
def test_load_incident_reports_each_problem_at_its_line(
    mutate: Any, marker: str, message: str, tmp_path: Path
) -> None:
    """A hand-edited incident.json: the error line points at the key or value at fault."""
    document = import_export(DATA / "trialrun_run.jsonl").to_json()
    mutate(document)
    text = json.dumps(document, indent=2, sort_keys=True)
    path = tmp_path / "incident.json"
    path.write_text(text, encoding="utf-8")
    lines = [n for n, line in enumerate(text.splitlines(), 1) if marker in line]
    line = lines[1] - 1 if marker == '"args"' else lines[0]
    with pytest.raises(ConfigError) as caught:
        load_incident(path)
    assert str(caught.value).startswith(f"{path}:{line}: {message}")


def test_load_incident_reports_unreadable_and_non_json_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read incident file"):
        load_incident(tmp_path / "absent.json")
    path = tmp_path / "incident.json"
    path.write_text("{\n  oops", encoding="utf-8")
    with pytest.raises(ConfigError, match="invalid JSON") as caught:
        load_incident(path)
    assert caught.value.line == 2


def test_write_incident_redacts_a_hand_built_incident(tmp_path: Path) -> None:
    call = IncidentCall(index=0, name="login", args={"password": "hunter2"}, ok=True, result=1)
    path = tmp_path / "incident.json"
    write_incident(path, Incident("otlp", "f", None, None, [call], []))
    assert "hunter2" not in path.read_text(encoding="utf-8")


# ---- helpers -------------------------------------------------------------------------------


@given(_json, st.lists(st.sampled_from(["*", "0", "1", "a", "b"]), min_size=1, max_size=3))
def test_redact_paths_are_idempotent_and_never_mutate(document: Any, segments: list[str]) -> None:
    before = json.dumps(document)
    once = apply_redact_paths(document, [".".join(segments)])
    assert json.dumps(document) == before
    assert apply_redact_paths(once, [".".join(segments)]) == once


def test_redact_paths_index_lists_and_keep_nulls() -> None:
    document = {"calls": [{"args": {"card": "1"}}, {"args": {"card": None}}, {"args": {}}]}
    assert apply_redact_paths(document, ["calls.0.args.card", "calls.1.args.card"]) == {
        "calls": [{"args": {"card": "[REDACTED]"}}, {"args": {"card": None}}, {"args": {}}]
    }
    assert apply_redact_paths(document, ["calls.7.args", "nothing.here"]) == document


@pytest.mark.parametrize(
    ("raw", "decoded"),
    [
        ('{"a": 1}', {"a": 1}),
        ("{'a': True, 'b': (1, 2)}", {"a": True, "b": [1, 2]}),
        ("[1, 2]", [1, 2]),
        ("42", "42"),
        ("plain text", "plain text"),
        ("{not python", "{not python"),
        ("{1, 2}", "{1, 2}"),
        (7, 7),
    ],
)
def test_decode_text(raw: Any, decoded: Any) -> None:
    assert decode_text(raw) == decoded


def test_parse_iso_accepts_z_offsets_naive_and_nanoseconds() -> None:
    expected = parse_iso("2026-11-30T14:02:12.370000Z")
    assert expected is not None
    assert parse_iso("2026-11-30T14:02:12.370000+00:00") == expected
    assert parse_iso("2026-11-30T14:02:12.370000") == expected
    assert parse_iso("2026-11-30T14:02:12.370000123Z") == expected
    assert parse_iso("yesterday") is None
    assert parse_iso(None) is None


def test_parse_iso_gives_utc_or_none_for_moments_without_a_utc_form() -> None:
    assert parse_iso("2026-11-30T16:02:12+02:00") == parse_iso("2026-11-30T14:02:12Z")
    assert parse_iso("0001-01-01T00:00:00+14:00") is None  # before year 1 in UTC
    assert parse_iso("9999-12-31T23:59:59-14:00") is None  # after year 9999 in UTC


# Start times of the first tool call that no datetime holds, as exports carry them (JSON text):
# each raised while the file was read.
OTLP_START = '"startTimeUnixNano":"1796047332370000000"'
RUN_START = '"timestamp":1796047332.37'
LANGFUSE_START = '"startTime": "2026-11-30T14:02:12.370Z"'
FAR_STARTS = [
    *(("otlp_collector.jsonl", OTLP_START, f'"startTimeUnixNano":{far}') for far in
      ("1e400", "1e300", "-1e300", "9223372036854775807999", '"99999999999999999999999999"')),
    *(("trialrun_run.jsonl", RUN_START, f'"timestamp":{far}') for far in
      ("1e400", "1e300", "-1e300", "9223372036854775807999")),
    ("langfuse_trace.json", LANGFUSE_START, '"startTime": "0001-01-01T00:00:00+14:00"'),
]  # fmt: skip


@pytest.mark.parametrize(("name", "known", "far"), FAR_STARTS)
def test_a_start_time_beyond_any_calendar_is_a_missing_one(
    name: str, known: str, far: str, tmp_path: Path
) -> None:
    text = (DATA / name).read_text()
    assert text.count(known) == 1
    export = tmp_path / name
    export.write_text(text.replace(known, far))
    incident = import_export(export)
    assert [call.name for call in incident.calls] == [call[0] for call in EXPECTED_CALLS]
    missing_start = [call.started_at is None for call in incident.calls]
    assert missing_start == [True, False, False, False, False]


def test_an_empty_incident_file_has_no_line_number(tmp_path: Path) -> None:
    path = tmp_path / "incident.json"
    path.write_text("\n", encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_incident(path)
    assert str(caught.value) == f"{path}: the incident file is empty; expected a JSON object"
