"""trialrun uses the interpreter through its public API only, and its JSON reads and writes as json.

CPython's private JSON machinery (``json.encoder.c_make_encoder``, a decoder's ``scan_once``, the
``_json`` module) changes between versions without notice: Python 3.13 gave the C encoder's
``indent`` argument a new meaning. Those are not used; the encoders and decoders that trialrun
builds once are ``json.JSONEncoder`` and ``json.JSONDecoder`` with options, called through their
documented methods. The tests below check the source for private names and check that what the
hot paths read and write is what ``json.dumps`` and ``json.loads`` give with the same options,
edge cases included (NaN, nesting past the stack, byte-order marks, lone surrogates, huge ints).
"""

from __future__ import annotations

import ast
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from paths import PACKAGE_DIR
from strategies import json_values
from trialrun.artifacts import rundir
from trialrun.base.jsonnumbers import refuse_constant
from trialrun.base.signedjson import unique_keys
from trialrun.conversation.protocol import encode
from trialrun.receipt.linehash import EventHasher

PACKAGE_DIR = PACKAGE_DIR

# Names of the json package's undocumented machinery, wherever they appear (an attribute, an
# import, or a string handed to getattr or vars).
PRIVATE_JSON_NAMES = frozenset(
    {
        "c_make_encoder",
        "c_make_scanner",
        "make_scanner",
        "py_make_scanner",
        "scan_once",
        "scanstring",
        "c_scanstring",
        "py_scanstring",
        "encode_basestring",
        "encode_basestring_ascii",
        "c_encode_basestring",
        "c_encode_basestring_ascii",
        "py_encode_basestring",
        "py_encode_basestring_ascii",
        "_make_iterencode",
        "_default_encoder",
        "_default_decoder",
    }
)
# Its public names are the ones the json package exports; these modules hold the private ones.
PRIVATE_JSON_MODULES = frozenset({"json.encoder", "json.decoder", "json.scanner"})

# Underscored names that are documented as public.
DOCUMENTED = frozenset({"os._exit"})


def _stdlib(module: str) -> bool:
    return module.split(".")[0] in sys.stdlib_module_names


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_uses(source: str) -> Iterator[tuple[int, str]]:
    """(line, what) of every private interpreter internal ``source`` uses."""
    tree = ast.parse(source)
    modules: dict[str, str] = {}  # local name -> stdlib module it is bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _stdlib(alias.name):
                    modules[alias.asname or alias.name.split(".")[0]] = alias.name.split(".")[0]
                    if any(_private(part) for part in alias.name.split(".")):
                        yield node.lineno, f"import {alias.name}"
                    if alias.name in PRIVATE_JSON_MODULES:
                        yield node.lineno, f"import {alias.name}"
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if not _stdlib(node.module) or node.module == "__future__":
                continue
            if node.module in PRIVATE_JSON_MODULES or any(
                _private(part) for part in node.module.split(".")
            ):
                yield node.lineno, f"from {node.module} import"
            for alias in node.names:
                if _private(alias.name) or alias.name in PRIVATE_JSON_NAMES:
                    yield node.lineno, f"from {node.module} import {alias.name}"
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            if node.attr in PRIVATE_JSON_NAMES:
                yield node.lineno, f".{node.attr}"
            elif isinstance(node.value, ast.Name) and node.value.id in modules:
                dotted = f"{modules[node.value.id]}.{node.attr}"
                if _private(node.attr) and dotted not in DOCUMENTED:
                    yield node.lineno, dotted
        elif isinstance(node, ast.Name) and node.id in PRIVATE_JSON_NAMES:
            yield node.lineno, node.id
        elif isinstance(node, ast.Constant) and node.value in PRIVATE_JSON_NAMES:
            yield node.lineno, repr(node.value)


def test_the_source_uses_no_private_interpreter_internals() -> None:
    found = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        relative = path.relative_to(PACKAGE_DIR).as_posix()
        for line, what in private_uses(path.read_text(encoding="utf-8")):
            found.append(f"{relative}:{line}: {what}")
    assert found == []


# -- one process, one way out ---------------------------------------------------------------

# The signed receipt comes from the one process that ran the cases, along one code path, and
# the command line ends as any Python program does (atexit, live threads, buffered files).
FORKS_OR_SKIPS_EXIT = frozenset({"os.fork", "os.forkpty", "os._exit", "atexit._run_exitfuncs"})


def forks_or_skips_exit(source: str) -> Iterator[tuple[int, str]]:
    """(line, what) of every use of ``FORKS_OR_SKIPS_EXIT`` in ``source``."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in ("os", "atexit"):
            for alias in node.names:
                if f"{node.module}.{alias.name}" in FORKS_OR_SKIPS_EXIT:
                    yield node.lineno, f"from {node.module} import {alias.name}"
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and f"{node.value.id}.{node.attr}" in FORKS_OR_SKIPS_EXIT
        ):
            yield node.lineno, f"{node.value.id}.{node.attr}"


OWN_PROCESS = frozenset({"conversation/seal_spawner.py"})
"""Programs trialrun runs as processes of their own (``python -I -S FILE``), never imports: the
agent spawner starts every agent and seals a replayed one before its exec (docs/internals.md)."""


def test_the_source_neither_forks_nor_skips_the_interpreters_exit() -> None:
    found = [
        f"{path.relative_to(PACKAGE_DIR).as_posix()}:{line}: {what}"
        for path in sorted(PACKAGE_DIR.rglob("*.py"))
        for line, what in forks_or_skips_exit(path.read_text(encoding="utf-8"))
    ]
    assert found == []


def test_what_runs_as_its_own_process_is_never_imported() -> None:
    names = {f"trialrun.{path.removesuffix('.py').replace('/', '.')}" for path in OWN_PROCESS}
    found = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            imported = []
            if isinstance(node, ast.Import):
                imported = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module is not None:
                imported = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            found += [f"{path.name}:{node.lineno}: {name}" for name in imported if name in names]
    assert found == []


@pytest.mark.parametrize(
    "source",
    [
        "import os\nos.fork()",
        "import os\nos._exit(0)",
        "from os import _exit",
        "import atexit\natexit._run_exitfuncs()",
    ],
)
def test_the_fork_check_sees_each_use(source: str) -> None:
    assert list(forks_or_skips_exit(source))


@pytest.mark.parametrize(
    "source",
    [
        "from json.encoder import c_make_encoder",
        "import json\nscan = vars(json.JSONDecoder())['scan_once']",
        "import json\njson.JSONDecoder().scan_once('1', 0)",
        "import json.scanner",
        "import _json",
        "import sys\nsys._getframe()",
        "import atexit as a\na._run_exitfuncs()",
        "from threading import _shutdown",
    ],
)
def test_the_check_sees_each_kind_of_private_use(source: str) -> None:
    assert list(private_uses(source))


@pytest.mark.parametrize(
    "source",
    [
        "import json\njson.JSONEncoder(separators=(',', ':')).encode({})",
        "import json\njson.JSONDecoder().raw_decode('1')",
        "import os\nos._exit(0)",
        "import sys\nsys.__stdout__",
        "class A:\n    def f(self):\n        return self._x",
        "from __future__ import annotations",
    ],
)
def test_the_check_passes_public_use(source: str) -> None:
    assert list(private_uses(source)) == []


# -- what the receipt verifier reads -------------------------------------------------------


def _outcome(read: Any, given: Any) -> tuple[str, Any]:
    try:
        return "value", read(given)
    except RecursionError:
        return "too deep", None
    except ValueError:  # JSONDecodeError, DuplicateKeyError, NaN, an int too long
        return "refused", None


def _reference(text: str) -> Any:
    decoder = json.JSONDecoder(object_pairs_hook=unique_keys, parse_constant=refuse_constant)
    return decoder.decode(text)


_around = st.sampled_from(["", " ", "\n", "\r\n", "\t", "\ufeff", " x", ",1", "{}"])
_lines = st.one_of(
    st.tuples(_around, json_values.map(json.dumps), _around).map("".join),
    st.text(alphabet='{}[]",:0123456789.eE-+ \t\nnulltruefalseNaInfity\ufeff', max_size=30),
    st.sampled_from(
        [
            '{"a":1,"a":2}\n',
            '{"a":NaN}\n',
            "[-Infinity]\n",
            "1" * 5000 + "\n",
            "[" * 100_000 + "]" * 100_000 + "\n",
            "\ufeff{}\n",
            '"\\ud800"\n',
        ]
    ),
)


@given(_lines)
def test_the_verifier_reads_and_refuses_a_line_as_its_decoder_does(text: str) -> None:
    assert _outcome(EventHasher().parse, text) == _outcome(_reference, text)


# -- what goes to the agent and to run.jsonl -------------------------------------------------


def _nested(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("value", "error"),
    [
        (10**5000, ValueError),  # past the interpreter's limit on int digits
        ({1j: 1}, TypeError),
        ({1, 2}, TypeError),
        (_nested(100_000), RecursionError),
    ],
    ids=["huge int", "complex key", "set", "nested past the stack"],
)
def test_values_json_cannot_hold_fail_the_message_as_json_dumps_does(
    value: Any, error: type[Exception]
) -> None:
    with pytest.raises(error):
        json.dumps(value)
    with pytest.raises(error):
        encode({"type": "task_start", "input": value})


def test_a_message_with_a_huge_int_fails_and_the_next_one_is_written() -> None:
    with pytest.raises(ValueError):
        encode({"type": "task_start", "input": 10**5000})
    assert encode({"type": "task_start", "input": 10**20}) == (
        b'{"type":"task_start","input":100000000000000000000}\n'
    )


@given(st.lists(st.dictionaries(st.text(max_size=8), json_values, max_size=4), max_size=4))
def test_run_jsonl_lines_are_what_json_dumps_writes(events: list[dict[str, Any]]) -> None:
    expected = "".join(
        json.dumps(event, ensure_ascii=False, separators=(",", ":"), default=str) + "\n"
        for event in events
    )
    assert rundir._event_lines(events) == expected.encode("utf-8", "backslashreplace")


def test_run_jsonl_writes_values_json_cannot_hold_as_their_text() -> None:
    events = [{"path": Path("a/b"), "ids": {1}, "bad": "\ud800"}]
    assert rundir._event_lines(events) == b'{"path":"a/b","ids":"{1}","bad":"\\ud800"}\n'
