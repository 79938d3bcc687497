"""The tests' own layout: a folder per package, unique file names, no imports across folders.

pytest's default import mode imports every test file by its bare name, so two files of the same
name anywhere under tests/ break collection; a test importing a test file of another folder
works only when that folder happens to be collected first.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

from paths import PACKAGE_DIR, TESTS_DIR

# Folders of tests that do not test one package.
WHOLE_PROJECT = {"project", "security"}


def all_test_files() -> list[Path]:
    return sorted(TESTS_DIR.rglob("test_*.py"))


def folders_for_tests() -> set[str]:
    packages = {path.parent.name for path in PACKAGE_DIR.glob("*/__init__.py")}
    return packages | WHOLE_PROJECT


def misplaced(files: list[Path], allowed: set[str]) -> list[str]:
    """Test files not in ``tests/<allowed folder>/``."""
    return [
        str(path.relative_to(TESTS_DIR))
        for path in files
        if path.parent.parent != TESTS_DIR or path.parent.name not in allowed
    ]


def same_names(files: list[Path]) -> list[str]:
    counts = Counter(path.name for path in files)
    return sorted(name for name, count in counts.items() if count > 1)


def imports_across_folders(path: Path, root: Path = TESTS_DIR) -> list[str]:
    """The test modules of other folders that ``path`` imports, anywhere in the file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        for name in names:
            if name.startswith("test_") and not (path.parent / f"{name}.py").is_file():
                found.append(f"{path.relative_to(root)}:{node.lineno}: {name}")
    return found


def test_every_test_file_is_in_the_folder_of_a_package() -> None:
    assert misplaced(all_test_files(), folders_for_tests()) == []


def test_misplaced_files_are_found() -> None:
    # Guards the check above: a file at the top of tests/ or in an unknown folder is named.
    files = [TESTS_DIR / "test_x.py", TESTS_DIR / "nowhere" / "test_y.py", TESTS_DIR / "base" / "t"]
    assert misplaced(files, {"base"}) == ["test_x.py", "nowhere/test_y.py"]


def test_test_file_names_are_unique() -> None:
    assert same_names(all_test_files()) == []
    assert same_names([Path("a/test_x.py"), Path("b/test_x.py"), Path("b/test_y.py")]) == [
        "test_x.py"
    ]


def test_no_test_imports_a_test_file_of_another_folder() -> None:
    assert [line for path in all_test_files() for line in imports_across_folders(path)] == []


def test_an_import_across_folders_is_found(tmp_path: Path) -> None:
    # Guards the check above: an import of a neighbour passes, one of another folder's file is
    # named, even inside a function.
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "test_near.py").write_text("")
    probe = tmp_path / "a" / "test_probe.py"
    probe.write_text("import test_near\n\n\ndef f():\n    from test_far import x\n")
    assert imports_across_folders(probe, tmp_path) == ["a/test_probe.py:5: test_far"]
