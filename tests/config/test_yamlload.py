"""The line-aware YAML loader: data, line lookup, syntax errors, duplicate keys."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from trialrun.config import yamlload
from trialrun.config.yamlload import load_yaml_file, load_yaml_value, parse_yaml
from trialrun.errors import ConfigError, ConfigErrors

DOC = """\
suite_name: demo
agent_command:
  - python3
  - agent.py
budgets:
  max_wall_ms: 100

  max_tool_calls: 3
assertions:
  - type: required_fields
    fields: [a, b]
  - {type: must_call, tools: [x]}
"""


def test_data_is_the_constructed_document() -> None:
    doc = parse_yaml(DOC, file="suite.yaml")
    assert doc.data["agent_command"] == ["python3", "agent.py"]
    assert doc.data["budgets"] == {"max_wall_ms": 100, "max_tool_calls": 3}
    assert doc.data["assertions"][1] == {"type": "must_call", "tools": ["x"]}


@pytest.mark.parametrize(
    ("path", "line"),
    [
        ((), 1),
        (("suite_name",), 1),
        (("agent_command",), 2),
        (("agent_command", 1), 4),
        (("budgets", "max_tool_calls"), 8),
        (("assertions", 0, "fields"), 11),
        (("assertions", 0, "fields", 1), 11),
        (("assertions", 1, "tools"), 12),
    ],
)
def test_line_of_finds_keys_and_items(path: tuple[str | int, ...], line: int) -> None:
    assert parse_yaml(DOC, file="f").line_of(path) == line


@pytest.mark.parametrize(
    ("path", "line"),
    [
        (("nope",), 1),
        (("budgets", "max_cost_usd"), 5),
        (("agent_command", 7), 2),
        (("agent_command", -1), 2),
        (("agent_command", "x"), 2),
        (("suite_name", "deeper", 3), 1),
        (("assertions", 1, "tools", 0, "x"), 12),
    ],
)
def test_line_of_a_missing_path_is_its_nearest_existing_ancestor(
    path: tuple[str | int, ...], line: int
) -> None:
    assert parse_yaml(DOC, file="f").line_of(path) == line


def test_error_helper_places_the_error() -> None:
    error = parse_yaml(DOC, file="s.yaml").error("bad", ("budgets", "max_tool_calls"), "k")
    assert str(error) == "s.yaml:8: bad"
    assert error.key == "k"


def test_integer_keys_are_found_by_their_text() -> None:
    doc = parse_yaml("input:\n  1: one\n  2: two\n", file="f")
    assert doc.data["input"] == {1: "one", 2: "two"}
    assert doc.line_of(("input", 2)) == 3


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        (
            "a:\n  - 1\n - 2\n",
            3,
            "invalid YAML: expected <block end>, but found '<block sequence start>'",
        ),
        ("a: b: c\n", 1, "invalid YAML: mapping values are not allowed here"),
        ("a: 1\nb: [1, 2\nc: 3\n", 3, "invalid YAML: expected ',' or ']', but got ':'"),
        ("a: 1\n---\nb: 2\n", 2, "invalid YAML: but found another document"),
        ("x: !!python/object:os.system ls\n", 1, "invalid YAML: could not determine a constructor"),
        ("a: 1\nb: \x07\n", 2, "invalid YAML: unacceptable character #x0007"),
    ],
)
def test_syntax_errors_give_the_problem_line(text: str, line: int, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_yaml(text, file="bad.yaml")
    assert caught.value.file == "bad.yaml"
    assert caught.value.line == line
    assert caught.value.message.startswith(message)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "x.yaml: the file is empty; expected a mapping of keys to values"),
        ("# only a comment\n", "x.yaml: the file is empty; expected a mapping of keys to values"),
        (
            "- a\n- b\n",
            "x.yaml:1: expected a mapping of keys to values at the top level, found a list",
        ),
        (
            "\nhello\n",
            "x.yaml:2: expected a mapping of keys to values at the top level, "
            "found the scalar 'hello'",
        ),
    ],
)
def test_top_level_must_be_a_mapping(text: str, expected: str) -> None:
    # An empty file is wrong as a whole (no line); a list or scalar is wrong where it starts.
    with pytest.raises(ConfigError) as caught:
        parse_yaml(text, file="x.yaml")
    assert str(caught.value) == expected


def test_duplicate_keys_are_all_reported() -> None:
    text = "a: 1\nb:\n  c: 1\n  d: 2\n  c: 3\na: 4\n"
    with pytest.raises(ConfigErrors) as caught:
        parse_yaml(text, file="d.yaml")
    assert sorted(str(e) for e in caught.value.errors) == [
        "d.yaml:5: duplicate key 'c' (first defined at line 3; "
        "YAML would silently keep only the last one)",
        "d.yaml:6: duplicate key 'a' (first defined at line 1; "
        "YAML would silently keep only the last one)",
    ]


def test_same_text_with_different_tags_is_not_a_duplicate() -> None:
    assert parse_yaml("1: int\n'1': str\n", file="f").data == {1: "int", "1": "str"}


def test_merge_keys_are_not_duplicates_and_explicit_keys_override() -> None:
    text = "base: &b {x: 1, y: 2}\nitem:\n  <<: *b\n  y: 3\n"
    doc = parse_yaml(text, file="f")
    assert doc.data["item"] == {"x": 1, "y": 3}
    assert doc.line_of(("item", "y")) == 4


@pytest.mark.parametrize(
    ("text", "line", "where"),
    [
        ("a: &x [1, *x]\n", 1, "a.1"),
        ("name: s\ninput: &a\n  calls: 1\n  deeper:\n    - again: *a\n", 5, "input.deeper.0.again"),
        ("&top {a: 1, b: *top}\n", 1, "b"),
        ("a: &m\n  <<: *m\n", 2, "a.<<"),
    ],
)
def test_an_alias_inside_the_value_it_names_is_refused_at_its_line(
    text: str, line: int, where: str
) -> None:
    # The value would contain itself: every walk over it (validation, JSON) would never end.
    with pytest.raises(ConfigError) as caught:
        parse_yaml(text, file="f.yaml")
    assert str(caught.value) == (
        f"f.yaml:{line}: the alias at '{where}' names a value that contains it: the value "
        "would contain itself, which JSON cannot hold; write that part out instead"
    )


def test_values_nest_up_to_the_limit_and_not_one_level_more(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The top-level mapping is the first level; walks over deeper values ran out of stack.
    def nested(lists: int) -> str:
        return "name: s\ninput:\n  deep: " + "[" * lists + "]" * lists + "\n"

    assert parse_yaml(nested(98), file="f.yaml").data["input"]["deep"] is not None
    with pytest.raises(ConfigError) as caught:
        parse_yaml(nested(99), file="f.yaml")
    assert str(caught.value) == (
        "f.yaml:3: 'input.deep.0.0...' nests mappings and lists more than 100 levels deep; "
        "trialrun reads at most 100"
    )
    # So deep that PyYAML's own composer runs out of stack (the C loader refuses it first).
    for fast in (yamlload._FAST_LOADER, None):
        monkeypatch.setattr(yamlload, "_FAST_LOADER", fast)
        with pytest.raises(ConfigError, match=r"^f.yaml:3: .*more than 100 levels deep"):
            parse_yaml(nested(5000), file="f.yaml")


@pytest.mark.parametrize("lists", [99, 5000])
def test_json_nested_too_deeply_is_refused_at_its_line(tmp_path: Path, lists: int) -> None:
    target = tmp_path / "case.json"
    target.write_text('{"id": "c",\n "input": {"deep": ' + "[" * lists + "]" * lists + "}}\n")
    with pytest.raises(ConfigError) as caught:
        load_yaml_file(target, display="case.json")
    assert str(caught.value) == (
        "case.json:2: mappings and lists nest more than 100 levels deep; trialrun reads at most 100"
    )
    target.write_text('{"id": "c",\n "input": {"deep": ' + "[" * 98 + "]" * 98 + "}}\n")
    assert load_yaml_file(target).data["id"] == "c"


def test_an_alias_used_twice_side_by_side_is_no_loop() -> None:
    doc = parse_yaml("base: &b {x: [1]}\nuse: [*b, {inner: *b}]\nagain: *b\n", file="f")
    assert doc.data["use"][0] is doc.data["base"] is doc.data["use"][1]["inner"]


def test_lone_surrogates_are_kept_as_is() -> None:
    doc = parse_yaml('input: {q: "\\ud83d", pair: "\\ud83d\\ude00"}\n', file="f")
    assert doc.data["input"] == {"q": "\ud83d", "pair": "\ud83d\ude00"}


def test_the_c_loader_is_used_when_available() -> None:
    if getattr(yaml, "__with_libyaml__", False):
        assert yamlload._FAST_LOADER is yaml.CSafeLoader


def test_without_the_c_loader_the_result_is_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    fast = parse_yaml(DOC, file="f")
    monkeypatch.setattr(yamlload, "_FAST_LOADER", None)
    slow = parse_yaml(DOC, file="f")
    assert slow.data == fast.data
    assert slow.line_of(("budgets", "max_tool_calls")) == 8


def test_load_file_reads_utf8_with_or_without_bom(tmp_path: Path) -> None:
    target = tmp_path / "s.yaml"
    target.write_bytes("\ufeffname: caf\u00e9\n".encode())
    assert load_yaml_file(target).data == {"name": "caf\u00e9"}


def test_load_file_reports_bytes_that_are_not_utf8(tmp_path: Path) -> None:
    target = tmp_path / "s.yaml"
    target.write_bytes(b"a: 1\nb: caf\xe9\n")
    with pytest.raises(ConfigError) as caught:
        load_yaml_file(target, display="s.yaml")
    assert str(caught.value) == "s.yaml:2: file is not valid UTF-8: byte 0xe9 at offset 11"


def test_load_file_reports_an_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_yaml_file(tmp_path / "missing.yaml", display="missing.yaml")
    # About the file as a whole: no line number (a missing file has no line 1).
    assert str(caught.value) == "missing.yaml: cannot read file: No such file or directory"


# -- properties -----------------------------------------------------------------------------

_KEYS = st.from_regex(r"k[a-z0-9_]{0,8}", fullmatch=True)
_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(), st.text(max_size=12), st.floats(allow_nan=False)
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_KEYS, inner, max_size=4)),
    max_leaves=25,
)
_DOCUMENTS = st.dictionaries(_KEYS, _VALUES, min_size=1, max_size=6)
_PATHS = st.lists(st.one_of(_KEYS, st.integers(min_value=-2, max_value=5)), max_size=6)


def _existing_paths(value: Any, prefix: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    found: list[tuple[str | int, ...]] = []
    items = (
        value.items()
        if isinstance(value, dict)
        else enumerate(value)
        if isinstance(value, list)
        else []
    )
    for key, item in items:
        found.append((*prefix, key))
        found.extend(_existing_paths(item, (*prefix, key)))
    return found


@settings(max_examples=150)
@given(document=_DOCUMENTS, flow=st.sampled_from([False, True, None]), probes=st.lists(_PATHS))
def test_line_of_never_raises_and_stays_inside_the_file(
    document: dict[str, Any], flow: bool | None, probes: list[list[str | int]]
) -> None:
    text = yaml.safe_dump(document, default_flow_style=flow, width=80)
    doc = parse_yaml(text, file="gen.yaml")
    assert doc.data == document
    line_count = max(text.count("\n"), 1)
    for path in [*_existing_paths(document), *map(tuple, probes)]:
        assert 1 <= doc.line_of(path) <= line_count


@settings(max_examples=100)
@given(document=_DOCUMENTS)
def test_line_of_points_at_the_line_that_holds_the_key(document: dict[str, Any]) -> None:
    text = yaml.safe_dump(document, default_flow_style=False, width=10_000)
    lines = text.splitlines()
    doc = parse_yaml(text, file="gen.yaml")
    for path in _existing_paths(document):
        if isinstance(path[-1], str):
            assert f"{path[-1]}:" in lines[doc.line_of(path) - 1]


def test_an_empty_json_file_is_reported_about_the_file_without_a_line(tmp_path: Path) -> None:
    path = tmp_path / "case.json"
    path.write_text(" \n", encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_yaml_file(path)
    assert str(caught.value) == f"{path}: the file is empty; expected an object of keys to values"


@pytest.mark.parametrize(
    ("name", "text", "data", "path", "line"),
    [
        ("r.yaml", "# rules\n- id: a\n- id: b\n  tool: t\n",
         [{"id": "a"}, {"id": "b", "tool": "t"}], (1, "tool"), 4),
        ("r.json", '[\n  {"id": "a"},\n  {"id": "b",\n   "n": 1e5}\n]',
         [{"id": "a"}, {"id": "b", "n": 1e5}], (1, "n"), 4),
        ("r.yaml", "\n\njust text\n", "just text", (), 3),
        ("r.yaml", "k: [1, 2]\n", {"k": [1, 2]}, ("k", 1), 1),
    ],
)  # fmt: skip
def test_load_value_takes_any_top_level_and_keeps_lines(
    tmp_path: Path, name: str, text: str, data: Any, path: tuple[str | int, ...], line: int
) -> None:
    target = tmp_path / name
    target.write_text(text, encoding="utf-8")
    doc = load_yaml_value(target, expected="a list of rules")
    assert doc.data == data
    assert doc.line_of(path) == line
    assert str(doc.error("bad", path)) == f"{target}:{line}: bad"


@pytest.mark.parametrize(("name", "text"), [("r.yaml", "# nothing\n"), ("r.json", "\n")])
def test_load_value_reports_an_empty_file_without_a_line(
    tmp_path: Path, name: str, text: str
) -> None:
    target = tmp_path / name
    target.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_yaml_value(target, expected="a list of rules", display=name)
    assert str(caught.value) == f"{name}: the file is empty; expected a list of rules"


def test_load_value_reports_duplicate_keys_in_a_list(tmp_path: Path) -> None:
    target = tmp_path / "r.yaml"
    target.write_text("- id: a\n  id: b\n", encoding="utf-8")
    with pytest.raises(ConfigErrors) as caught:
        load_yaml_value(target, expected="a list")
    assert caught.value.line == 2
