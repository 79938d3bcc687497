"""Incident importers as plugins: the entry-point group, built-ins through it, broken plugins."""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path
from typing import Any

import pytest

from builders import call_cli
from fake_entry_point import FakeEntryPoint
from paths import DATA_DIR
from trialrun.errors import ConfigError
from trialrun.incident.importers import api, import_export, langfuse, otlp
from trialrun.incident.importers.api import (
    BUILTIN_IMPORTERS,
    Importer,
    ImporterRegistry,
    RawCall,
    build_incident,
)
from trialrun.incident.model import Incident

DATA = DATA_DIR / "incidents"
TOKEN = "ghp_" + "a1B2c3D4e5" * 4
GROUP = "trialrun.incident_importers"


# -- a third-party importer, written only against the public contract ---------------------------


def _detect(records: list[Any]) -> bool:
    return len(records) == 1 and isinstance(records[0], dict) and "acme_trace" in records[0]


def _to_incident(records: list[Any], source_file: str) -> Incident:
    trace = records[0]["acme_trace"]
    calls = [
        RawCall(name=call["tool"], args=call["args"], ok=True, result=call["result"])
        for call in trace["calls"]
    ]
    return build_incident(
        source_format="acme",
        source_file=source_file,
        input_value=trace["input"],
        final_output=trace["output"],
        calls=calls,
        missing=[],
    )


ACME = Importer("acme", _detect, _to_incident)

ACME_EXPORT = {
    "acme_trace": {
        "input": {"ask": "refund order 7"},
        "output": {"done": True},
        "calls": [
            {
                "tool": "issue_refund",
                "args": {"order_id": "7", "card": "4111111111111111", "token": TOKEN},
                "result": {"ok": True},
            }
        ],
    }
}


def install(monkeypatch: pytest.MonkeyPatch, *found: FakeEntryPoint) -> None:
    """Make ``found`` the installed entry points of the group, for a fresh default registry."""
    monkeypatch.setattr(
        importlib.metadata, "entry_points", lambda group: list(found) if group == GROUP else []
    )
    monkeypatch.setattr(api, "_DEFAULT_REGISTRY", ImporterRegistry(builtins=BUILTIN_IMPORTERS))


@pytest.fixture
def acme_export(tmp_path: Path) -> Path:
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(ACME_EXPORT), encoding="utf-8")
    return path


# -- built-ins through the real, installed entry points -----------------------------------------


def test_the_builtin_table_is_what_pyproject_declares() -> None:
    declared = {ep.name: ep.value for ep in api.discover_entry_points()}
    assert declared == dict(BUILTIN_IMPORTERS)
    for name, value in BUILTIN_IMPORTERS.items():
        module, _, attribute = value.partition(":")
        assert getattr(importlib.import_module(module), attribute).name == name
    assert otlp.IMPORTER.name == "otlp" and langfuse.IMPORTER.name == "langfuse"


def test_builtins_are_tried_in_order_without_listing_the_entry_points() -> None:
    listed = 0

    def discover() -> list[FakeEntryPoint]:
        nonlocal listed
        listed += 1
        return [FakeEntryPoint("acme", "acme:IMPORTER", ACME)]

    registry = ImporterRegistry(discover, builtins=BUILTIN_IMPORTERS)
    records = [json.loads(DATA.joinpath("langfuse_trace.json").read_text(encoding="utf-8"))]
    found = registry.recognise(records, "langfuse_trace.json")
    assert found is not None and found.source_format == "langfuse"
    assert listed == 0
    assert registry.names() == [*BUILTIN_IMPORTERS, "acme"]
    assert listed == 1


# -- plugins ------------------------------------------------------------------------------------


def test_a_plugin_importer_works_end_to_end_and_its_incident_is_redacted(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    acme_export: Path,
) -> None:
    install(monkeypatch, FakeEntryPoint("acme", "acme_importer:IMPORTER", ACME))
    argv = ["incident", "import", str(acme_export), "--out", str(tmp_path / "out")]
    code, out, err = call_cli([*argv, "--redact-path", "calls.*.args.card"], capsys)
    assert code == 0, err
    assert "Imported 1 tool call from acme" in out
    written = (tmp_path / "out" / "incident.json").read_text(encoding="utf-8")
    document = json.loads(written)
    assert document["source_format"] == "acme"
    [call] = document["calls"]
    assert call["name"] == "issue_refund"
    assert call["args"]["card"] == "[REDACTED]"
    assert TOKEN not in written and "4111111111111111" not in written


def test_a_plugin_cannot_take_a_builtin_name_or_a_builtin_format(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # A rival "otlp", and a plugin that would claim every file: built-ins come first.
    rival = FakeEntryPoint("otlp", "rival:IMPORTER", Importer("otlp", _detect, _to_incident))
    greedy = FakeEntryPoint("any", "greedy:IMPORTER", Importer("any", lambda r: True, _to_incident))
    install(monkeypatch, rival, greedy)
    code, out, err = call_cli(
        ["incident", "import", str(DATA / "otlp_collector.jsonl"), "--out", str(tmp_path / "out")],
        capsys,
    )
    assert code == 0, err
    assert "from otlp" in out
    assert rival.loads == 0 and greedy.loads == 0


@pytest.mark.parametrize(
    ("entry_point", "message"),
    [
        (
            FakeEntryPoint("acme", "acme_importer:IMPORTER", error=ModuleNotFoundError("no acme")),
            "cannot load incident importer 'acme' from entry point 'acme = acme_importer:IMPORTER'"
            " (group trialrun.incident_importers): ModuleNotFoundError: no acme",
        ),
        (
            FakeEntryPoint("acme", "acme_importer:IMPORTER", error=SystemExit(3)),
            "cannot load incident importer 'acme' from entry point 'acme = acme_importer:IMPORTER'"
            " (group trialrun.incident_importers): SystemExit: 3",
        ),
        (
            FakeEntryPoint("acme", "acme_importer:detect", _detect),
            "entry point 'acme = acme_importer:detect' (group trialrun.incident_importers) is not "
            "an incident importer: expected an object with a string 'name' and detect(records) "
            "and to_incident(records, source_file) methods, found function",
        ),
        (
            FakeEntryPoint(
                "acme", "acme_importer:IMPORTER", Importer("other", _detect, _to_incident)
            ),
            "entry point 'acme = acme_importer:IMPORTER' (group trialrun.incident_importers) "
            "provides an incident importer named 'other'; the entry point name and the incident "
            "importer's name must match",
        ),
    ],
)
def test_a_plugin_that_cannot_be_loaded_is_one_error_line_naming_it(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    acme_export: Path,
    entry_point: FakeEntryPoint,
    message: str,
) -> None:
    install(monkeypatch, entry_point)
    code, _, err = call_cli(
        ["incident", "import", str(acme_export), "--out", str(tmp_path / "out")], capsys
    )
    assert code == 2
    assert err == f"error: {message}\n"
    assert not (tmp_path / "out").exists()


def _raises(exc: BaseException) -> Any:
    def fail(*args: Any) -> Any:
        raise exc

    return fail


@pytest.mark.parametrize(
    ("importer", "what"),
    [
        (Importer("acme", _raises(KeyError("spans")), _to_incident), "failed while detecting the "
         "format: KeyError: 'spans'"),
        (Importer("acme", _detect, _raises(SystemExit(1))), "failed while reading the export: "
         "SystemExit: 1"),
        (Importer("acme", _detect, lambda records, source: {"calls": []}), "returned dict, "
         "expected an Incident"),
    ],
)  # fmt: skip
def test_a_plugin_failing_while_it_reads_is_one_error_line_naming_it(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    acme_export: Path,
    importer: Importer,
    what: str,
) -> None:
    install(monkeypatch, FakeEntryPoint("acme", "acme_importer:IMPORTER", importer))
    code, _, err = call_cli(
        ["incident", "import", str(acme_export), "--out", str(tmp_path / "out")], capsys
    )
    assert code == 2
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("error: ")
    assert (
        "incident importer 'acme' from entry point 'acme = acme_importer:IMPORTER' "
        f"(group trialrun.incident_importers) {what}" in err
    )


def test_an_export_nobody_reads_names_the_installed_importers(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    install(monkeypatch, FakeEntryPoint("acme", "acme_importer:IMPORTER", ACME))
    path = tmp_path / "odd.json"
    path.write_text('{"something": "else"}', encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        import_export(path)
    assert str(info.value).endswith(
        "LangSmith runs or a Langfuse trace/observations export, or a format of an installed "
        "importer (acme)"
    )
