"""No "(s)" plural in any text trialrun shows: counts say ``1 file`` / ``2 files``
(``trialrun.base.words.counted``), and a list names "fields" or "field" as its length says.

Every string literal in src/ is read, f-strings' literal parts included; docstrings are left out
(they are for readers of the code). So an ``attempt(s)`` written tomorrow fails here.
"""

from __future__ import annotations

import ast
import re

import pytest

from paths import REPO_ROOT

SRC = REPO_ROOT / "src" / "trialrun"
HEDGE = re.compile(r"[A-Za-z]\((?:e?s)\)")


def docstring_nodes(tree: ast.AST) -> set[int]:
    """The ids of the constant nodes that are docstrings."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if (
                body
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                found.add(id(body[0].value))
    return found


def hedges_in(source: str, name: str) -> list[str]:
    tree = ast.parse(source, filename=name)
    docstrings = docstring_nodes(tree)
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
            continue
        if id(node) in docstrings:
            continue
        match = HEDGE.search(node.value)
        if match:
            found.append(f"{name}:{node.lineno}: {node.value.strip()[:70]!r}")
    return found


def test_no_string_in_src_says_s_in_brackets() -> None:
    found: list[str] = []
    for path in sorted(SRC.rglob("*.py")):
        found += hedges_in(path.read_text(encoding="utf-8"), str(path.relative_to(REPO_ROOT)))
    assert not found, "write the singular or plural the count asks for:\n" + "\n".join(found)


@pytest.mark.parametrize(
    "source",
    [
        'print(f"{n} attempt(s)")',
        'x = "Wrote 10 file(s)"',
        'def f():\n    """Doc."""\n    return "missing key(s)"',
    ],
)
def test_the_check_finds_a_hedge_in_code(source: str) -> None:
    assert hedges_in(source, "example.py")


@pytest.mark.parametrize(
    "source",
    [
        '"""A module docstring may say line(s)."""',
        'def f():\n    """Or a function\'s: file(s)."""',
        "x = (s.span_id for s in spans)",
        'x = "a count (s) with a space"',
    ],
)
def test_the_check_leaves_docstrings_and_code_alone(source: str) -> None:
    assert not hedges_in(source, "example.py")
