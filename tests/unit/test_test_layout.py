"""The shape of tests/: four kinds of test and one support package, each helper defined once.

- tests/ holds ``unit/ component/ cluster/ faults/ support/`` and its conftest, nothing else;
- no module under tests/support is named ``test_*`` (support is imported, never collected);
- no top-level helper (a function or class not named ``test*``/``Test*``, pytest hooks and
  ``main`` entry points aside) is
  defined in more than one module under tests/: a second copy goes to tests/support instead;
- no test module imports another test module: what two share lives in tests/support.
"""

from __future__ import annotations

import ast
import collections
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
KINDS = {"unit", "component", "cluster", "faults"}
TOP_LEVEL_DIRS = KINDS | {"support"}
TOP_LEVEL_FILES = {"__init__.py", "conftest.py"}


def modules() -> list[Path]:
    return sorted(path for path in TESTS.rglob("*.py") if "__pycache__" not in path.parts)


def name_of(path: Path) -> str:
    return path.relative_to(TESTS.parent).as_posix()


def helpers(path: Path) -> set[str]:
    """Top-level functions and classes of a module that are neither tests nor pytest hooks."""
    return {
        node.name
        for node in ast.parse(path.read_text()).body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        and not node.name.startswith(("test", "Test", "pytest_"))
        and node.name != "main"  # the entry point of a ``python -m tests.support.…`` module
    }


def defined_twice() -> dict[str, list[str]]:
    """Each helper name defined in more than one module, with those modules."""
    where: dict[str, list[str]] = collections.defaultdict(list)
    for path in modules():
        for helper in helpers(path):
            where[helper].append(name_of(path))
    return {helper: paths for helper, paths in where.items() if len(paths) > 1}


def imported_test_modules(path: Path) -> set[str]:
    """The modules of tests/unit, component, cluster and faults that ``path`` imports."""
    imported = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module)
        elif isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
    return {name for name in imported if _is_test_module(name)}


def _is_test_module(name: str) -> bool:
    parts = name.split(".")
    return len(parts) >= 2 and parts[0] == "tests" and parts[1] in KINDS


def test_tests_holds_the_four_kinds_and_support() -> None:
    entries = {path.name for path in TESTS.iterdir() if path.name != "__pycache__"}
    assert entries == TOP_LEVEL_DIRS | TOP_LEVEL_FILES
    assert all((TESTS / name).is_dir() for name in TOP_LEVEL_DIRS)


def test_no_support_module_is_named_like_a_test() -> None:
    named_like_tests = [name_of(path) for path in (TESTS / "support").rglob("test_*.py")]
    assert named_like_tests == []


def test_no_helper_is_defined_in_two_modules() -> None:
    assert defined_twice() == {}, "define each once, in tests/support"


def test_no_test_module_imports_another() -> None:
    imports = {(name_of(path), module) for path in modules() for module in imported_test_modules(path)}
    assert imports == set(), "share it through tests/support"
