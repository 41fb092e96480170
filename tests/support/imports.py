"""The project's imports, read statically with ``ast``: what the layering and cycle tests walk.

Each module is named by its import name (``bookie/server_connection.py`` is
``minipulsar.bookie.server_connection``; the links under ``minipulsar/`` are not followed, so
each file is read once). Lazy imports inside functions count; ``from minipulsar import Client``
counts as an import of ``minipulsar.client`` (what the package root's lazy re-export loads).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import minipulsar

ROOT = Path(__file__).resolve().parents[2]
SOURCES = {
    "minipulsar": "minipulsar",
    "bookie": "minipulsar.bookie",
    "broker": "minipulsar.broker",
    "client": "minipulsar.client",
}
"""Repository folder → the import name it is installed under (the folders under ``minipulsar/``
are symbolic links to these, so the walk reads each file once, from its real folder)."""

LAZY_EXPORTS = dict.fromkeys(minipulsar.__all__, "minipulsar.client")
"""``from minipulsar import X``: the module the package root's ``__getattr__`` loads for X."""


@dataclass(frozen=True)
class Import:
    module: str
    target: str
    path: Path
    line: int

    def __str__(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}: {self.module} imports {self.target}"


def module_name(path: Path) -> str:
    folder, *rest = path.relative_to(ROOT).with_suffix("").parts
    parts = [SOURCES[folder], *rest]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(source: str, module: str, path: Path, is_package: bool, *, type_only: bool = True) -> list[Import]:
    """Every module ``source`` may import. ``from X import a`` yields X and X.a (a may be a
    module); ``from minipulsar import Client`` and ``minipulsar.Client`` yield the module that
    the lazy re-export loads. ``type_only=False`` leaves out the imports under
    ``if TYPE_CHECKING:``, which never run."""
    package = module if is_package else module.rpartition(".")[0]
    tree = ast.parse(source, str(path))
    skipped = set() if type_only else _type_checking_nodes(tree)
    found: list[Import] = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found += [Import(module, alias.name, path, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(node, package)
            found.append(Import(module, base, path, node.lineno))
            found += [
                Import(module, _from_target(base, alias.name), path, node.lineno)
                for alias in node.names
                if alias.name != "*"
            ]
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "minipulsar"
            and node.attr in LAZY_EXPORTS
        ):
            found.append(Import(module, LAZY_EXPORTS[node.attr], path, node.lineno))
    return found


def _from_target(base: str, name: str) -> str:
    if base == "minipulsar" and name in LAZY_EXPORTS:
        return LAZY_EXPORTS[name]
    return f"{base}.{name}"


def _resolve(node: ast.ImportFrom, package: str) -> str:
    if not node.level:
        return node.module or ""
    parts = package.split(".") if package else []
    if node.level - 1 > len(parts):
        raise AssertionError(f"relative import beyond the top-level package in {package}")
    base = parts[: len(parts) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    nodes: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            nodes.update(id(inner) for statement in node.body for inner in ast.walk(statement))
    return nodes


def all_imports(*, type_only: bool = True) -> list[Import]:
    found: list[Import] = []
    for folder in SOURCES:
        for path in sorted((ROOT / folder).rglob("*.py")):  # rglob does not enter the links
            is_package = path.name == "__init__.py"
            found += imports_of(path.read_text(), module_name(path), path, is_package, type_only=type_only)
    return found
