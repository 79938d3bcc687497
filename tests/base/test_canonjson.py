"""canonjson: byte-exact ECMAScript canonical JSON, checked against the reference's vectors."""

from __future__ import annotations

import hashlib
import json
import math
import struct
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trialrun.base import canonjson
from trialrun.base.canonjson import dumps, dumps_codepoint

# ---- conformance vectors ----------------------------------------------------------------


def _canonical_cases(conformance: Path) -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = json.loads((conformance / "canonical-cases.json").read_text())
    assert len(cases) >= 34
    return cases


def test_every_canonical_case_matches_the_reference_bytes(conformance: Path) -> None:
    mismatches = []
    for case in _canonical_cases(conformance):
        value = json.loads(case["input"])
        reference = case["reference"]
        if reference.startswith("THROWS"):
            with pytest.raises(ValueError, match="non-finite"):
                dumps(value)
            continue
        text = dumps(value)
        encoded = text.encode("utf-8")  # lone surrogates are escaped, so this never fails
        if (text, encoded.hex(), hashlib.sha256(encoded).hexdigest()) != (
            reference,
            case["referenceUtf8Hex"],
            case["referenceSha256"],
        ):
            mismatches.append((case["name"], text, reference))
    assert mismatches == []


def test_every_canonical_case_in_code_point_order(conformance: Path) -> None:
    checked = 0
    for case in _canonical_cases(conformance):
        if "codePointOrder" not in case:
            continue
        value = json.loads(case["input"])
        assert dumps_codepoint(value) == case["codePointOrder"], case["name"]
        assert (dumps_codepoint(value) != dumps(value)) == case["codePointDiffers"], case["name"]
        checked += 1
    assert checked >= 33


def test_every_es_number_case(conformance: Path) -> None:
    lines = (conformance / "es-number-cases.txt").read_text().splitlines()
    assert len(lines) == 15770
    mismatches = []
    for line in lines:
        ieee_hex, expected = line.split(",")
        (value,) = struct.unpack(">d", bytes.fromhex(ieee_hex.rjust(16, "0")))
        if dumps(value) != expected:
            mismatches.append((ieee_hex, expected, dumps(value)))
    assert mismatches == []


# ---- numbers -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0, "0"),
        (-0.0, "0"),
        (1.0, "1"),
        (-1.5, "-1.5"),
        (1e21, "1e+21"),
        (1e20, "100000000000000000000"),
        (123456789012345680000.0, "123456789012345680000"),
        (1e-7, "1e-7"),
        (1.5e-7, "1.5e-7"),
        (0.000001, "0.000001"),
        (0.00001234, "0.00001234"),
        (-2.5e-300, "-2.5e-300"),
        (2**53 - 1, "9007199254740991"),
        (-(2**53) - 1, "-9007199254740992"),
        (2**64, "18446744073709552000"),
        (10**21, "1e+21"),
        (True, "true"),
        (False, "false"),
        (None, "null"),
    ],
)
def test_number_and_literal_text(value: Any, expected: str) -> None:
    assert dumps(value) == expected
    assert dumps([value]) == f"[{expected}]"  # the same inside a container (fast path)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, 10**400, [1, math.nan]])
def test_non_finite_numbers_are_refused(value: Any) -> None:
    with pytest.raises(ValueError, match="canonical JSON"):
        dumps(value)
    with pytest.raises(ValueError, match="canonical JSON"):
        dumps_codepoint({"k": value})


# ---- strings, containers, errors ---------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("plain", '"plain"'),
        ("\x00\x1f\x7f", '"\\u0000\\u001f\x7f"'),
        ('q"b\\', '"q\\"b\\\\"'),
        ("\b\f\n\r\t", '"\\b\\f\\n\\r\\t"'),
        ("\u2028</script>", '"\u2028</script>"'),
        ("\ud800x\udfff", '"\\ud800x\\udfff"'),
        # a pair held as two code points is one character to JavaScript
        ("\ud83d\ude00", '"\U0001f600"'),
        ("\U0001f600\udc00", '"\U0001f600\\udc00"'),
    ],
)
def test_string_escapes(value: str, expected: str) -> None:
    assert dumps(value) == expected
    assert dumps({"k": value}) == '{"k":' + expected + "}"
    dumps(value).encode("utf-8")


def test_tuples_are_arrays_and_nesting_is_sorted() -> None:
    assert dumps({"b": (1, [2.5, {"z": None, "a": "x"}]), "a": []}) == (
        '{"a":[],"b":[1,[2.5,{"a":"x","z":null}]]}'
    )


def test_utf16_and_code_point_orders_differ_only_on_astral_keys() -> None:
    value = {"\uff01": 1, "\U0001f600": 2, "\ue000": 3, "a": 4}
    assert dumps(value) == '{"a":4,"\U0001f600":2,"\ue000":3,"\uff01":1}'
    assert dumps_codepoint(value) == '{"a":4,"\ue000":3,"\uff01":1,"\U0001f600":2}'


@pytest.mark.parametrize("value", [{1: "a"}, {"a": {None: 1}}, {(1, 2): 3}])
def test_non_string_keys_are_a_type_error(value: Any) -> None:
    with pytest.raises(TypeError, match="object keys must be str"):
        dumps(value)


@pytest.mark.parametrize("value", [{1, 2}, b"bytes", object(), {"a": [1j]}])
def test_non_json_values_are_a_type_error(value: Any) -> None:
    with pytest.raises(TypeError, match="expected a JSON value"):
        dumps(value)


def test_subclasses_are_written_as_their_base_value() -> None:
    class Name(str):
        pass

    class Count(int):
        pass

    assert dumps({"n": Name("x"), "c": Count(3), "f": True}) == '{"c":3,"f":true,"n":"x"}'


# ---- properties --------------------------------------------------------------------------

_exact_ints = st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
_finite_floats = st.floats(allow_nan=False, allow_infinity=False)
_well_formed_text = st.text(st.characters(exclude_categories=["Cs"]))
_round_trippable = st.recursive(
    st.none() | st.booleans() | _exact_ints | _finite_floats | _well_formed_text,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(_well_formed_text, children, max_size=4)
    ),
    max_leaves=20,
)
_any_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | _finite_floats
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4)
    ),
    max_leaves=20,
)


@given(_round_trippable)
def test_output_parses_back_to_an_equal_value(value: Any) -> None:
    # Read numbers as JavaScript does (doubles): 6.930259339538715e16 is written as an integer.
    assert json.loads(dumps(value), parse_int=float) == value


@given(_any_json)
def test_fast_path_equals_the_general_writer(value: Any) -> None:
    # The stdlib fast path must be invisible: same bytes as the writer that handles everything.
    assert dumps(value) == canonjson._write(value, canonjson._utf16_units)
    assert dumps_codepoint(value) == canonjson._write(value, None)


@given(_any_json)
def test_output_is_always_valid_utf8_json(value: Any) -> None:
    text = dumps(value)
    text.encode("utf-8")
    json.loads(text)


@given(st.dictionaries(st.text(), _exact_ints, min_size=1, max_size=8), st.randoms())
def test_insertion_order_never_changes_the_output(mapping: dict[str, int], rnd: Any) -> None:
    items = list(mapping.items())
    rnd.shuffle(items)
    shuffled = dict(items)
    assert dumps(shuffled) == dumps(mapping)
    assert dumps_codepoint(shuffled) == dumps_codepoint(mapping)


@given(st.dictionaries(st.text(), st.none(), max_size=8))
def test_keys_come_out_in_utf16_code_unit_order(mapping: dict[str, None]) -> None:
    keys = list(json.loads(dumps(mapping)))
    assert keys == sorted(mapping, key=lambda k: k.encode("utf-16-be", "surrogatepass"))


# Scalars at the edges of the fast path's checks, as members of flat objects and arrays
# (where the fast path tests them inline) and nested one level down.
_edge_scalars = (
    st.sampled_from([1e-4, 1e-4 - 1e-20, 9.999999999999998e15, 1e16, 0.0, -0.0, 2.0, 2**53 - 1.5])
    | st.integers(min_value=-(2**54), max_value=2**54)
    | st.sampled_from([2**53 - 1, 2**53, -(2**53) + 1, -(2**53), 10**21, True, False, None])
    | _finite_floats
    | st.text(max_size=4)
)


@given(
    st.dictionaries(st.text(max_size=3), _edge_scalars | st.lists(_edge_scalars, max_size=3))
    | st.lists(_edge_scalars | st.dictionaries(st.text(max_size=3), _edge_scalars, max_size=3))
)
def test_flat_values_take_the_fast_path_only_when_it_is_exact(value: Any) -> None:
    assert dumps(value) == canonjson._write(value, canonjson._utf16_units)
    assert dumps_codepoint(value) == canonjson._write(value, None)
