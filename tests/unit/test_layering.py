"""Goal: the dependency direction of DESIGN §2 / STYLE §A holds in every module, checked
statically by walking each module's imports with ``ast`` (lazy imports inside functions count).

Rules (an edge "A → B" also covers every sub-module of A and B):
- minipulsar.protocol → never minipulsar.net, asyncio or uvloop (sans-IO);
- minipulsar → never bookie, broker, client; except minipulsar.cli (the only place that
  starts servers) and the package root's lazy client re-export (DESIGN §2:
  ``from minipulsar import Client``);
- client → never broker, bookie;  bookie → never broker, client;  broker → never bookie, client.

bookie/, broker/ and client/ may be missing or partial; whatever exists is checked.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("minipulsar", "bookie", "broker", "client")


@dataclass(frozen=True)
class Rule:
    importer: str
    forbidden: tuple[str, ...]
    exempt: tuple[str, ...] = ()
    """Importing modules (and their sub-modules) the rule does not apply to."""
    exempt_edges: tuple[tuple[str, str], ...] = ()
    """Exact ``(module, imported package)`` edges allowed despite the rule."""


RULES = [
    Rule("minipulsar.protocol", ("minipulsar.net", "asyncio", "uvloop")),
    Rule("minipulsar", ("bookie", "broker", "client"),
         exempt=("minipulsar.cli", "minipulsar.__main__"),
         exempt_edges=(("minipulsar", "client"),)),
    Rule("client", ("broker", "bookie")),
    Rule("bookie", ("broker", "client")),
    Rule("broker", ("bookie", "client")),
]


@dataclass(frozen=True)
class Import:
    module: str
    target: str
    path: Path
    line: int

    def __str__(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}: {self.module} imports {self.target}"


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(source: str, module: str, path: Path, is_package: bool) -> list[Import]:
    """Every module ``source`` may import. ``from X import a`` yields X and X.a (a may be a module)."""
    package = module if is_package else module.rpartition(".")[0]
    found: list[Import] = []
    for node in ast.walk(ast.parse(source, str(path))):
        if isinstance(node, ast.Import):
            found += [Import(module, alias.name, path, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(node, package)
            found.append(Import(module, base, path, node.lineno))
            found += [Import(module, f"{base}.{alias.name}", path, node.lineno)
                      for alias in node.names if alias.name != "*"]
    return found


def _resolve(node: ast.ImportFrom, package: str) -> str:
    if not node.level:
        return node.module or ""
    parts = package.split(".") if package else []
    if node.level - 1 > len(parts):
        raise AssertionError(f"relative import beyond the top-level package in {package}")
    base = parts[: len(parts) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def violations(rule: Rule, found: list[Import]) -> list[Import]:
    bad = []
    for imp in found:
        if not within(imp.module, rule.importer) or any(within(imp.module, e) for e in rule.exempt):
            continue
        for forbidden in rule.forbidden:
            if within(imp.target, forbidden) and (imp.module, forbidden) not in rule.exempt_edges:
                bad.append(imp)
    return bad


def all_imports() -> list[Import]:
    found: list[Import] = []
    for package in PACKAGES:
        directory = ROOT / package
        if not directory.is_dir():
            continue
        for path in sorted(directory.rglob("*.py")):
            found += imports_of(path.read_text(), module_name(path), path, path.name == "__init__.py")
    return found


@pytest.fixture(scope="module")
def project_imports() -> list[Import]:
    return all_imports()


def test_walk_sees_the_core(project_imports: list[Import]) -> None:
    """A walk that found nothing would pass every rule."""
    targets = {imp.target for imp in project_imports if imp.module == "minipulsar.net.connection"}
    assert "minipulsar.protocol.codec" in targets
    assert any(imp.module == "minipulsar.protocol.frames" for imp in project_imports)


@pytest.mark.parametrize("rule", RULES, ids=lambda r: f"{r.importer}-not-{'-'.join(r.forbidden)}")
def test_no_forbidden_import(rule: Rule, project_imports: list[Import]) -> None:
    bad = violations(rule, project_imports)
    assert not bad, "forbidden imports:\n" + "\n".join(map(str, bad))


# -- the checker itself: a rule that sees nothing would pass forever ---------------------------

def _check(source: str, module: str, is_package: bool = False) -> list[str]:
    found = imports_of(source, module, ROOT / "x.py", is_package)
    return sorted({imp.target for rule in RULES for imp in violations(rule, found)})


@pytest.mark.parametrize("source, module, is_package, expected", [
    ("import asyncio", "minipulsar.protocol.codec", False, ["asyncio"]),
    ("def f():\n    from minipulsar.net import connection", "minipulsar.protocol.frames", False,
     ["minipulsar.net", "minipulsar.net.connection"]),
    ("from ..net import writer", "minipulsar.protocol.codec", False, ["minipulsar.net", "minipulsar.net.writer"]),
    ("from .. import net", "minipulsar.protocol", True, ["minipulsar.net"]),
    ("import broker.server", "minipulsar.metadata.server", False, ["broker.server"]),
    ("from bookie import journal", "broker.bookkeeper.client", False, ["bookie", "bookie.journal"]),
    ("from client.producer import Producer", "bookie.server", False,
     ["client.producer", "client.producer.Producer"]),
    ("import broker", "client.lookup", False, ["broker"]),
    ("import bookie", "minipulsar", True, ["bookie"]),
], ids=["asyncio", "lazy-net", "relative-net", "relative-package", "core-broker", "broker-bookie",
        "bookie-client", "client-broker", "root-bookie"])
def test_checker_reports_forbidden_edges(source: str, module: str, is_package: bool, expected: list[str]) -> None:
    assert _check(source, module, is_package) == expected


@pytest.mark.parametrize("source, module", [
    ("from broker.service import BrokerService", "minipulsar.cli.broker"),
    ("import client", "minipulsar"),
    ("import clientele\nimport brokerage", "minipulsar.config"),
    ("from minipulsar.protocol import codec\nimport asyncio", "minipulsar.net.connection"),
    ("from minipulsar.net import connect", "client.connection"),
    ("from .bookkeeper import client", "broker.server"),
])
def test_checker_allows_permitted_edges(source: str, module: str) -> None:
    assert _check(source, module, is_package=module == "minipulsar") == []
