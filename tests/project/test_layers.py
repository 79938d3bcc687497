"""The layering of src/trialrun: lower layers never import higher ones, and nothing goes in circles.

``LAYERS`` is the one written statement of the layer order (docs/internals.md draws it). Every
module of the package belongs to the layer of its top-level package (``trialrun.running.runner``
to ``trialrun.running``). A module may import its own package and any package of a lower layer;
importing a higher layer, or another package of its own layer (sideways), is a violation.

Every import counts, including the ones inside functions that keep start-up lazy, because they
run all the same, the ``else:`` of a ``TYPE_CHECKING`` test, and ``importlib.import_module`` /
``__import__`` of a literal name. Imports under ``if TYPE_CHECKING:`` are exempt: they never run
and only name types for annotations (the root ``trialrun/__init__.py`` names its public API that
way; its runtime exports are looked up by name on first use).
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from paths import SRC_DIR

SRC = SRC_DIR
PACKAGE_DIR = SRC / "trialrun"

# Bottom to top. Each entry: a layer's name and the packages (or top-level modules) in it.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    # The errors users catch, which stay at trialrun.errors.
    ("errors", ("trialrun.errors",)),
    # Plain data and utilities.
    ("base", ("trialrun.base",)),
    # The root package: the version and the lazy table of public names (loaded through
    # trialrun.base.lazyexport, shared with trialrun.receipt).
    ("root", ("trialrun",)),
    # The SDK that agents import (they talk to the harness over the protocol, not through imports).
    ("agent sdk", ("trialrun.agent",)),
    # What the suite, case, compare and plan files say.
    ("config", ("trialrun.config",)),
    # Stored records: the trialrun home (compare runs, team caches) and Run Receipt v0.
    ("stores", ("trialrun.home", "trialrun.receipt")),
    # What an agent calls while it runs: recorded or live tools, the MCP proxy, the model gateway.
    # The HTTP(S) recorder under every network boundary (the gateway builds on it).
    ("recorder", ("trialrun.httprec",)),
    ("backends", ("trialrun.tools", "trialrun.mcp_proxy", "trialrun.gateway")),
    # The harness side of the agent conversation: protocol, agent process, session.
    ("conversation", ("trialrun.conversation",)),
    # The verdict on a case from its events.
    ("checks", ("trialrun.checks",)),
    # Running a suite: preflight, services, shards, the case runner.
    ("running", ("trialrun.running",)),
    # Reports of a finished run.
    ("report", ("trialrun.report",)),
    # What a run leaves behind: run directory, recording, baselines, shard merges, diffs.
    ("artifacts", ("trialrun.artifacts",)),
    # Features built on the layers below, independent of each other.
    ("features", ("trialrun.scenario", "trialrun.incident", "trialrun.attempt", "trialrun.team")),
    # Comparing agent versions (fetches published agents through team).
    ("compare", ("trialrun.compare",)),
    # The logic of commands that span layers: doctor, init, verify.
    ("commands", ("trialrun.commands",)),
    # The user's ways in: the CLI and the pytest plugin.
    ("interfaces", ("trialrun.cli", "trialrun.pytest_plugin")),
    ("main", ("trialrun.__main__",)),
)


def layer_index() -> dict[str, int]:
    return {unit: rank for rank, (_, units) in enumerate(LAYERS) for unit in units}


def module_name(path: Path, src: Path = SRC) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def source_files(package_dir: Path = PACKAGE_DIR) -> list[Path]:
    """Every Python module of the package except the templates users copy (they import nothing)."""
    skipped = {"templates", "pack_template"}
    return [
        path
        for path in sorted(package_dir.rglob("*.py"))
        if not skipped.intersection(path.relative_to(package_dir).parts)
    ]


def known_modules() -> set[str]:
    return {module_name(path) for path in source_files()}


_KNOWN: set[str] = set()


def known_modules_cached() -> set[str]:
    if not _KNOWN:
        _KNOWN.update(known_modules())
    return _KNOWN


@dataclass(frozen=True)
class Import:
    module: str  # the importing module
    target: str  # the trialrun module imported
    line: int
    text: str  # the import statement as written, for the message
    file: str = ""  # where the module is, for the message (src/trialrun/... by default)


_Importing = ast.Import | ast.ImportFrom | ast.Call


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _dynamic_import(node: ast.AST) -> str | None:
    """The module an ``importlib.import_module("...")`` or ``__import__("...")`` call names.

    Only a literal name can be known without running the code; a name looked up in a table
    (the CLI's commands, the lazy public API) is a deliberate late binding, not an import edge.
    """
    if not isinstance(node, ast.Call) or not node.args:
        return None
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    first = node.args[0]
    if name in ("import_module", "__import__") and isinstance(first, ast.Constant):
        return first.value if isinstance(first.value, str) else None
    return None


def _runtime_imports(node: ast.AST) -> Iterator[_Importing]:
    """Imports anywhere below ``node`` (functions too), skipping ``if TYPE_CHECKING:`` bodies."""
    for child in ast.iter_child_nodes(node):
        yield from _imports_at(child)


def _imports_at(node: ast.AST) -> Iterator[_Importing]:
    if isinstance(node, ast.If) and _is_type_checking(node.test):
        # The ``else:`` of a TYPE_CHECKING test is what runs.
        for statement in node.orelse:
            yield from _imports_at(statement)
        return
    if isinstance(node, ast.Import | ast.ImportFrom) or (
        isinstance(node, ast.Call) and _dynamic_import(node) is not None
    ):
        yield node
    yield from _runtime_imports(node)


def _resolve(
    statement: _Importing, module: str, is_package: bool, modules: set[str] | None = None
) -> list[str]:
    modules = known_modules_cached() if modules is None else modules
    if isinstance(statement, ast.Call):
        return [_dynamic_import(statement) or ""]
    if isinstance(statement, ast.Import):
        return [alias.name for alias in statement.names]
    base = statement.module or ""
    if statement.level:
        anchor = module.split(".") if is_package else module.split(".")[:-1]
        anchor = anchor[: len(anchor) - statement.level + 1]
        base = ".".join([*anchor, base] if base else anchor)
    # ``from trialrun.x import y`` imports the module trialrun.x.y when there is one, else names
    # of trialrun.x.
    return [
        f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
        for alias in statement.names
    ]


def scan_imports(src: Path) -> tuple[Import, ...]:
    """Every runtime import of a trialrun module by a module of ``src/trialrun``."""
    files = source_files(src / "trialrun")
    modules = {module_name(path, src) for path in files}
    found = []
    for path in files:
        module = module_name(path, src)
        source = path.read_text(encoding="utf-8")
        lines = source.splitlines()
        tree = ast.parse(source, filename=str(path))
        shown = path.relative_to(src.parent).as_posix()
        for statement in _runtime_imports(tree):
            resolved = _resolve(statement, module, path.name == "__init__.py", modules)
            for target in dict.fromkeys(resolved):
                if target == "trialrun" or target.startswith("trialrun."):
                    end = statement.end_lineno or statement.lineno
                    text = " ".join(lines[statement.lineno - 1 : end])
                    found.append(Import(module, target, statement.lineno, text, shown))
    return tuple(found)


@functools.cache
def trialrun_imports() -> tuple[Import, ...]:
    return scan_imports(SRC)


def unit_of(module: str) -> str:
    """The layer unit of a module: its top-level package or module (the root is its own)."""
    parts = module.split(".")
    return ".".join(parts[:2])


def where(imp: Import) -> str:
    file = imp.file
    if not file:
        path = PACKAGE_DIR.parent / (imp.module.replace(".", "/"))
        full = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
        file = full.relative_to(SRC.parent).as_posix()
    return f"{file}:{imp.line}: {' '.join(imp.text.split())}"


def test_every_package_has_a_layer() -> None:
    index = layer_index()
    missing = sorted({unit_of(m) for m in known_modules()} - set(index))
    assert not missing, f"add these to LAYERS in {Path(__file__).name}: {missing}"


def layering_problem(module: str, target: str) -> str | None:
    """Why ``module`` may not import ``target``, or None when it may."""
    index = layer_index()
    source, wanted = unit_of(module), unit_of(target)
    if source == wanted:
        return None
    names = {unit: name for name, units in LAYERS for unit in units}
    if index[wanted] > index[source]:
        kind = "imports a higher layer"
    elif index[wanted] == index[source]:
        kind = "imports sideways within its layer"
    else:
        return None
    return f"{module} ({names[source]}) {kind}: {target} ({names[wanted]})"


def test_no_import_goes_up_or_sideways() -> None:
    problems = []
    for imp in trialrun_imports():
        problem = layering_problem(imp.module, imp.target)
        if problem is not None:
            problems.append(f"{where(imp)}: {problem}")
    assert not problems, "layering violations:\n" + "\n".join(problems)


def _cycles(edges: dict[str, dict[str, Import]]) -> list[str]:
    """One import circle per group of nodes that reach each other, each hop with its import."""
    problems = []
    reported: set[str] = set()
    for start in sorted(edges):
        if start in reported:
            continue
        path = _path_back(edges, start)
        if path is None:
            continue
        reported.update(path)
        hops = [edges[a][b] for a, b in zip(path, [*path[1:], start], strict=True)]
        problems.append(
            " -> ".join([*path, start]) + "\n" + "\n".join(f"    {where(hop)}" for hop in hops)
        )
    return problems


def _path_back(edges: dict[str, dict[str, Import]], start: str) -> list[str] | None:
    """The shortest path of imports from ``start`` back to itself, if there is one."""
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for target in sorted(edges.get(node, {})):
                if target == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return path[::-1]
                if target not in previous:
                    previous[target] = node
                    following.append(target)
        frontier = following
    return None


def test_no_import_circle_between_packages() -> None:
    edges: dict[str, dict[str, Import]] = {}
    for imp in trialrun_imports():
        source, target = unit_of(imp.module), unit_of(imp.target)
        if source != target:
            edges.setdefault(source, {}).setdefault(target, imp)
    problems = _cycles(edges)
    assert not problems, "import circles between packages:\n" + "\n".join(problems)


def module_circles(imports: Iterable[Import]) -> list[str]:
    """Every circle of imports between modules, each named with the imports that close it."""
    listed = tuple(imports)
    modules = {imp.module for imp in listed}
    edges: dict[str, dict[str, Import]] = {}
    for imp in listed:
        if imp.target != imp.module and imp.target in modules:
            edges.setdefault(imp.module, {}).setdefault(imp.target, imp)
    return _cycles(edges)


def test_no_import_circle_between_modules() -> None:
    # Inside a package too: modules importing each other (even lazily) means what they share
    # belongs in a module below them.
    problems = module_circles(trialrun_imports())
    assert not problems, "import circles between modules:\n" + "\n".join(problems)


# The checks above must catch what they claim to: run them on made-up sources.


def _imports_of(source: str, module: str) -> list[str]:
    tree = ast.parse(source)
    return [
        target
        for statement in _runtime_imports(tree)
        for target in _resolve(statement, module, is_package=False)
    ]


def test_function_level_imports_count_and_type_checking_ones_do_not() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from trialrun.cli import main\n"
        "def later():\n"
        "    from trialrun.running import runner\n"
    )
    assert _imports_of(source, "trialrun.base.x") == ["typing", "trialrun.running.runner"]


def test_the_else_of_a_type_checking_test_counts() -> None:
    source = (
        "if TYPE_CHECKING:\n"
        "    from trialrun.cli import main\n"
        "else:\n"
        "    from trialrun.running import runner\n"
    )
    assert _imports_of(source, "trialrun.base.x") == ["trialrun.running.runner"]


def test_an_import_by_literal_name_counts() -> None:
    source = (
        "import importlib\n"
        "def later(name):\n"
        "    importlib.import_module('trialrun.running.runner')\n"
        "    __import__('trialrun.report')\n"
        "    importlib.import_module(name)\n"
    )
    assert _imports_of(source, "trialrun.base.x") == [
        "importlib",
        "trialrun.running.runner",
        "trialrun.report",
    ]


def _write_package(src: Path, modules: dict[str, str]) -> None:
    for name, text in modules.items():
        path = src / (name.replace(".", "/") + ".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


@pytest.mark.parametrize(
    "back",
    [
        "from trialrun.a.first import X\n",
        "def later():\n    from trialrun.a import first\n",
        "def later():\n    import importlib\n    importlib.import_module('trialrun.a.first')\n",
        "if TYPE_CHECKING:\n    pass\nelse:\n    from trialrun.a.first import X\n",
    ],
)
def test_a_circle_between_two_modules_fails_with_the_circle_named(
    tmp_path: Path, back: str
) -> None:
    src = tmp_path / "src"
    _write_package(
        src,
        {
            "trialrun.__init__": "",
            "trialrun.a.__init__": "",
            "trialrun.a.first": "from trialrun.a.second import Y\nX = 1\n",
            "trialrun.a.second": f"Y = 2\n{back}",
        },
    )
    [problem] = module_circles(scan_imports(src))
    assert problem.startswith("trialrun.a.first -> trialrun.a.second -> trialrun.a.first\n")
    assert "src/trialrun/a/first.py:1: from trialrun.a.second import Y" in problem
    assert "src/trialrun/a/second.py:" in problem


def test_imports_only_for_type_checking_make_no_circle(tmp_path: Path) -> None:
    src = tmp_path / "src"
    _write_package(
        src,
        {
            "trialrun.__init__": "",
            "trialrun.first": "from trialrun.second import Y\n",
            "trialrun.second": "if TYPE_CHECKING:\n    from trialrun.first import X\nY = 2\n",
        },
    )
    assert module_circles(scan_imports(src)) == []


def test_from_package_import_module_resolves_to_the_module() -> None:
    assert _imports_of("from trialrun.base import canonjson", "trialrun.tools.x") == [
        "trialrun.base.canonjson"
    ]
    assert _imports_of("from trialrun import __version__", "trialrun.report.x") == ["trialrun"]


@pytest.mark.parametrize(
    ("module", "target", "expected"),
    [
        ("trialrun.running.runner", "trialrun.checks.verdict", None),
        ("trialrun.report.junit", "trialrun.report.console", None),
        ("trialrun.cli", "trialrun", None),
        (
            "trialrun.checks.verdict",
            "trialrun.running.runner",
            "trialrun.checks.verdict (checks) imports a higher layer: "
            "trialrun.running.runner (running)",
        ),
        (
            "trialrun.tools.base",
            "trialrun.gateway.server",
            "trialrun.tools.base (backends) imports sideways within its layer: "
            "trialrun.gateway.server (backends)",
        ),
    ],
)
def test_layering_problem_names_module_and_import(
    module: str, target: str, expected: str | None
) -> None:
    assert layering_problem(module, target) == expected


def test_circles_are_reported_with_every_import() -> None:
    there = Import("trialrun.team.store", "trialrun.compare.store", 3, "from x import y")
    back = Import("trialrun.compare.arms", "trialrun.team.store", 9, "from z import w")
    edges = {
        "trialrun.team": {"trialrun.compare": there},
        "trialrun.compare": {"trialrun.team": back},
        "trialrun.cli": {"trialrun.team": back},
    }
    [problem] = _cycles(edges)
    assert problem.startswith("trialrun.compare -> trialrun.team -> trialrun.compare\n")
    assert "team/store.py:3: from x import y" in problem
    assert "compare/arms.py:9: from z import w" in problem
    assert _cycles({"a": {"b": there}, "b": {"c": back}}) == []
