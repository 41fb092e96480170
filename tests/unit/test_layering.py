"""Goal: the dependency direction of docs/design.md §2 holds in every module, checked
statically by walking each module's imports with ``ast`` (lazy imports inside functions count).

Layers (an edge "A → B" also covers every sub-module of A and B):
- the **core** (``minipulsar.protocol``, ``net``, ``metadata``, ``config``, ``errors``,
  ``metrics`` and the small helpers beside them) never imports the servers, the client or the
  application layer — not even through the package root's lazy re-exports
  (``from minipulsar import Client`` is an import of ``minipulsar.client``);
- ``minipulsar.protocol`` and ``minipulsar.binary_protocol`` (Pulsar's binary protocol) never
  import ``minipulsar.net``, asyncio or uvloop (sans-IO);
- the **components** ``minipulsar.client``, ``minipulsar.bookie`` and ``minipulsar.broker``
  import the core and never each other, nor the application layer;
- the **application layer** (``minipulsar.cli``, which holds ``perf``, ``minipulsar.lab``, the
  tuning lab that drives whole clusters, ``minipulsar.sync`` and the package root's re-exports)
  may import anything;
- nothing imports the repository folders ``bookie``, ``broker``, ``client`` as top-level packages.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from tests.support.imports import ROOT, Import, all_imports, imports_of

COMPONENTS = ("minipulsar.bookie", "minipulsar.broker", "minipulsar.client")
APPLICATION = ("minipulsar.cli", "minipulsar.lab", "minipulsar.sync", "minipulsar.__main__")


@dataclass(frozen=True)
class Rule:
    importer: str
    forbidden: tuple[str, ...]
    exempt: tuple[str, ...] = ()
    """Importing modules (and their sub-modules) the rule does not apply to."""


RULES = [
    Rule("minipulsar", (*COMPONENTS, *APPLICATION), exempt=(*COMPONENTS, *APPLICATION)),
    Rule("minipulsar.protocol", ("minipulsar.net", "asyncio", "uvloop")),
    Rule("minipulsar.binary_protocol", ("minipulsar.net", "asyncio", "uvloop")),
    Rule("minipulsar.client", ("minipulsar.broker", "minipulsar.bookie", *APPLICATION)),
    Rule("minipulsar.bookie", ("minipulsar.broker", "minipulsar.client", *APPLICATION)),
    Rule("minipulsar.broker", ("minipulsar.bookie", "minipulsar.client", *APPLICATION)),
    Rule("", ("bookie", "broker", "client")),
]
"""The package root ``minipulsar`` itself is application layer (it re-exports the client): the
first rule applies to its sub-modules only (see :func:`violations`)."""


def within(name: str, prefix: str) -> bool:
    return prefix == "" or name == prefix or name.startswith(prefix + ".")


def violations(rule: Rule, found: list[Import]) -> list[Import]:
    bad = []
    for imp in found:
        if not within(imp.module, rule.importer) or any(within(imp.module, e) for e in rule.exempt):
            continue
        if rule.importer == "minipulsar" and imp.module == "minipulsar":
            continue
        if any(within(imp.target, forbidden) for forbidden in rule.forbidden):
            bad.append(imp)
    return bad


@pytest.fixture(scope="module")
def project_imports() -> list[Import]:
    return all_imports()


def test_walk_sees_every_layer(project_imports: list[Import]) -> None:
    """A walk that found nothing would pass every rule."""
    targets = {imp.target for imp in project_imports if imp.module == "minipulsar.net.connection"}
    assert "minipulsar.protocol.codec" in targets
    modules = {imp.module for imp in project_imports}
    assert {
        "minipulsar.protocol.frames",
        "minipulsar.broker.service",
        "minipulsar.bookie.server_connection",
        "minipulsar.client.producer",
        "minipulsar.cli.main",
    } <= modules


@pytest.mark.parametrize("rule", RULES, ids=lambda r: f"{r.importer or 'any'}-not-{'-'.join(r.forbidden)}")
def test_no_forbidden_import(rule: Rule, project_imports: list[Import]) -> None:
    bad = violations(rule, project_imports)
    assert not bad, "forbidden imports:\n" + "\n".join(map(str, bad))


# -- the checker itself: a rule that sees nothing would pass forever ---------------------------


def _check(source: str, module: str, is_package: bool = False) -> list[str]:
    found = imports_of(source, module, ROOT / "x.py", is_package)
    return sorted({imp.target for rule in RULES for imp in violations(rule, found)})


@pytest.mark.parametrize(
    "source, module, is_package, expected",
    [
        ("import asyncio", "minipulsar.protocol.codec", False, ["asyncio"]),
        (
            "def f():\n    from minipulsar.net import connection",
            "minipulsar.protocol.frames",
            False,
            ["minipulsar.net", "minipulsar.net.connection"],
        ),
        ("from ..net import writer", "minipulsar.protocol.codec", False, ["minipulsar.net", "minipulsar.net.writer"]),
        ("from .. import net", "minipulsar.protocol", True, ["minipulsar.net"]),
        ("import minipulsar.broker.server", "minipulsar.metadata.server", False, ["minipulsar.broker.server"]),
        ("from minipulsar import Client", "minipulsar.metrics", False, ["minipulsar.client"]),
        ("import minipulsar\nminipulsar.Producer", "minipulsar.config", False, ["minipulsar.client"]),
        (
            "from minipulsar.cli.perf import options",
            "minipulsar.net.loop",
            False,
            ["minipulsar.cli.perf", "minipulsar.cli.perf.options"],
        ),
        (
            "from minipulsar.sync import Client",
            "minipulsar.errors",
            False,
            ["minipulsar.sync", "minipulsar.sync.Client"],
        ),
        (
            "from minipulsar.bookie import journal",
            "minipulsar.bookkeeper.client",
            False,
            ["minipulsar.bookie", "minipulsar.bookie.journal"],
        ),
        (
            "from minipulsar.client.producer import Producer",
            "minipulsar.bookie.server",
            False,
            ["minipulsar.client.producer", "minipulsar.client.producer.Producer"],
        ),
        ("from minipulsar import Client", "minipulsar.broker.admin", False, ["minipulsar.client"]),
        ("import minipulsar.broker", "minipulsar.client.lookup", False, ["minipulsar.broker"]),
        (
            "from minipulsar.cli import common",
            "minipulsar.bookie.server",
            False,
            ["minipulsar.cli", "minipulsar.cli.common"],
        ),
        ("import client", "minipulsar.cli.main", False, ["client"]),
        (
            "from bookie.journal import Journal",
            "minipulsar.bookie.server",
            False,
            ["bookie.journal", "bookie.journal.Journal"],
        ),
    ],
    ids=[
        "asyncio",
        "lazy-net",
        "relative-net",
        "relative-package",
        "core-broker",
        "core-lazy-client",
        "core-attribute-client",
        "core-perf",
        "core-sync",
        "broker-bookie",
        "bookie-client",
        "broker-lazy-client",
        "client-broker",
        "bookie-cli",
        "old-top-level-client",
        "old-top-level-bookie",
    ],
)
def test_checker_reports_forbidden_edges(source: str, module: str, is_package: bool, expected: list[str]) -> None:
    assert _check(source, module, is_package) == expected


@pytest.mark.parametrize(
    "source, module",
    [
        ("from minipulsar.broker.service import BrokerService", "minipulsar.cli.broker"),
        ("from minipulsar import client", "minipulsar"),
        ("from minipulsar import Client", "minipulsar.cli.perf.producer"),
        ("from minipulsar.client import Client", "minipulsar.sync"),
        ("import clientele\nimport brokerage", "minipulsar.config"),
        ("from minipulsar.protocol import codec\nimport asyncio", "minipulsar.net.connection"),
        ("from minipulsar.net import connect", "minipulsar.client.connection"),
        ("from .bookkeeper import client", "minipulsar.broker.server"),
        ("from minipulsar import errors", "minipulsar.metadata.client"),
    ],
)
def test_checker_allows_permitted_edges(source: str, module: str) -> None:
    assert _check(source, module, is_package=module == "minipulsar") == []
