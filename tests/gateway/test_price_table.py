"""The gateway's price table read as a spec record: every problem at its line, nothing else."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trialrun.errors import ConfigError
from trialrun.gateway.usage import Price, load_prices


def _problems(tmp_path: Path, text: str, name: str = "prices.yaml") -> list[str]:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_prices(path, display=name)
    return str(caught.value).splitlines()


def test_a_cached_price_is_read_and_an_integer_is_a_number(tmp_path: Path) -> None:
    path = tmp_path / "prices.yaml"
    path.write_text(
        "m:\n  input_per_mtok: 3\n  output_per_mtok: 15\n  cached_input_per_mtok: 0.3\n"
    )
    assert load_prices(path) == {"m": Price(3.0, 15.0, 0.3)}
    assert load_prices(path)["m"].input_per_mtok.__class__ is float


def test_a_misspelt_key_is_suggested_and_not_also_reported_missing(tmp_path: Path) -> None:
    assert _problems(tmp_path, "m:\n  input_per_mtk: 1\n  output_per_mtok: 2\n") == [
        "prices.yaml:2: unknown key 'input_per_mtk' in prices of 'm' "
        "(did you mean 'input_per_mtok'?)"
    ]


def test_a_missing_price_names_the_model(tmp_path: Path) -> None:
    assert _problems(tmp_path, "m: {input_per_mtok: 1}\n") == [
        "prices.yaml:1: missing required key 'output_per_mtok' in prices of 'm'"
    ]


@pytest.mark.parametrize("value", [".inf", "-.inf", ".nan", "true", "'1'", "[1]"])
def test_a_price_must_be_a_finite_number(tmp_path: Path, value: str) -> None:
    (problem,) = _problems(tmp_path, f"m:\n  input_per_mtok: 1\n  output_per_mtok: {value}\n")
    assert problem.startswith("prices.yaml:3: prices of 'm': 'output_per_mtok' must be ")


def test_a_model_name_that_is_no_string_is_reported_at_its_line(tmp_path: Path) -> None:
    text = (
        "m: {input_per_mtok: 1, output_per_mtok: 2}\n5: {input_per_mtok: 1, output_per_mtok: 2}\n"
    )
    assert _problems(tmp_path, text) == [
        "prices.yaml:2: keys of the file must be strings, found integer 5"
    ]


def test_every_problem_of_a_json_table_is_reported_at_its_line(tmp_path: Path) -> None:
    text = '{\n "a": {"input_per_mtok": -1, "output_per_mtok": 1},\n "b": []\n}'
    assert _problems(tmp_path, text, "prices.json") == [
        "prices.json:2: prices of 'a': 'input_per_mtok' must be >= 0, found -1",
        "prices.json:3: 'b' must be a mapping, found a list",
    ]


_SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
_ENTRY = st.dictionaries(
    st.sampled_from(["input_per_mtok", "output_per_mtok", "cached_input_per_mtok", "input"]),
    _VALUES,
)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.text(min_size=1, max_size=8), _ENTRY | _VALUES, max_size=4))
def test_any_table_loads_or_fails_with_located_config_errors(table: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "prices.json"
        path.write_text(json.dumps(table), encoding="utf-8")
        try:
            prices = load_prices(path, display="prices.json")
        except ConfigError as exc:
            lines = str(exc).splitlines()
            assert lines and all(line.startswith("prices.json:") for line in lines)
            return
    for model, price in prices.items():
        entry = table[model]
        assert price == Price(
            float(entry["input_per_mtok"]),
            float(entry["output_per_mtok"]),
            None if "cached_input_per_mtok" not in entry else float(entry["cached_input_per_mtok"]),
        )
