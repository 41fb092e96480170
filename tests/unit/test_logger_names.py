"""Goal: every logger the code names by a string is one of ours by its import name, or a
library's; a string left behind by a rename silently configures a logger nobody writes to.

Method: find each ``logging.getLogger("…")`` literal in the product code with ``ast`` and
check our names resolve to an importable module or package."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("minipulsar", "bookie", "broker", "client", "bench")
LIBRARIES = ("aiohttp", "asyncio", "uvloop")
SHARED_NAMES = {"minipulsar.standalone"}
"""Loggers named for what an operator runs rather than for one module (the standalone launcher's
plan, supervisor and command log as one)."""


def named_loggers() -> list[tuple[str, str]]:
    found = []
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "getLogger"
                    and node.args
                    and isinstance(node.args[0], ast.Constant)
                    and isinstance(node.args[0].value, str)
                ):
                    found.append((f"{path.relative_to(ROOT)}:{node.lineno}", node.args[0].value))
    return found


def test_the_search_finds_the_loggers_named_by_string() -> None:
    assert any(name == "minipulsar.client" for _, name in named_loggers())


@pytest.mark.parametrize("where, name", named_loggers())
def test_a_named_logger_is_a_module_of_ours_or_a_library(where: str, name: str) -> None:
    if name.split(".")[0] in LIBRARIES or name in SHARED_NAMES:
        return
    assert name.split(".")[0] == "minipulsar", f"{where}: {name!r} is not under minipulsar"
    assert importlib.util.find_spec(name) is not None, f"{where}: no module {name!r}"
