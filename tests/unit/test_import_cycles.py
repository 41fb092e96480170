"""Goal: no two modules of the project import each other at run time, directly or round a
circle (docs/design.md §2.1): the import graph is a DAG, so every module can be read, tested
and replaced from its leaves up.

Method: the static import walk of tests/support/imports.py without the ``if TYPE_CHECKING:``
blocks (which never run); each import is an edge to the module it loads — the longest module
name it starts with, so ``from minipulsar.bookkeeper import BookKeeper`` is an edge to
the package ``minipulsar.bookkeeper``, whose ``__init__`` runs first.
"""

from __future__ import annotations

from collections import defaultdict
from graphlib import CycleError, TopologicalSorter

from tests.support.imports import Import, all_imports


def import_graph(imports: list[Import]) -> dict[str, set[str]]:
    modules = {imp.module for imp in imports}
    graph: dict[str, set[str]] = defaultdict(set)
    for imp in imports:
        target = imp.target
        while target and target not in modules:
            target = target.rpartition(".")[0]
        if target and target != imp.module:
            graph[imp.module].add(target)
    return graph


def cycle_in(graph: dict[str, set[str]]) -> list[str] | None:
    try:
        tuple(TopologicalSorter(graph).static_order())
    except CycleError as error:
        return list(error.args[1])
    return None


def test_the_graph_has_edges_between_our_modules() -> None:
    graph = import_graph(all_imports(type_only=False))
    assert "minipulsar.protocol.codec" in graph["minipulsar.net.connection"]


def test_no_module_imports_another_that_imports_it_back() -> None:
    cycle = cycle_in(import_graph(all_imports(type_only=False)))
    assert cycle is None, "an import cycle: " + " → ".join(cycle or [])


def test_the_check_sees_a_cycle_through_a_package() -> None:
    """The check itself: a package whose __init__ imports a module that imports the package."""
    graph = {"a": {"a.b"}, "a.b": {"a"}}
    assert set(cycle_in(graph) or []) == {"a", "a.b"}
    assert cycle_in({"a": {"a.b"}, "a.b": set()}) is None
