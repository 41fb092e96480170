"""Goal: the distribution states compatible ranges and the build installs exact versions.

Method: read pyproject.toml and constraints.txt as text and data; no install.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PROJECT = PYPROJECT["project"]
PINNED_TOOLS = {"ruff", "mypy", "grpcio-tools", "pulsar-client"}
"""Pinned exactly on purpose: a new linter release must not fail CI on unchanged code, a new
protoc must not make the committed generated module look stale, and the official client the
interop tests referee against is the release issue 23 names."""


def _name(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9._-]+", requirement)
    assert match, requirement
    return re.sub(r"[-_.]+", "-", match.group(0)).lower()


def _constraints() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[_name(name)] = version
    return pins


def _requirements() -> list[str]:
    return [*PROJECT["dependencies"], *(r for extra in PROJECT["optional-dependencies"].values() for r in extra)]


def test_runtime_dependencies_are_ranges_not_pins() -> None:
    pinned = [r for r in PROJECT["dependencies"] if "==" in r]
    assert not pinned, f"pin these in constraints.txt, not pyproject.toml: {pinned}"


def test_only_the_tools_are_pinned_in_the_extras() -> None:
    extras = [r for extra in PROJECT["optional-dependencies"].values() for r in extra]
    assert {_name(r) for r in extras if "==" in r} == PINNED_TOOLS


def test_every_requirement_has_an_exact_version_in_the_constraints() -> None:
    pins = _constraints()
    missing = sorted({_name(r) for r in _requirements()} - set(pins))
    assert not missing, f"run `make lock`: constraints.txt lacks {missing}"


def test_the_license_is_declared_and_shipped() -> None:
    assert PROJECT["license"] == "Apache-2.0"
    assert "Apache License" in (ROOT / "LICENSE").read_text()
    assert (ROOT / "minipulsar" / "py.typed").exists()
    assert "py.typed" in PYPROJECT["tool"]["setuptools"]["package-data"]["minipulsar"]


def test_the_web_consoles_files_are_package_data() -> None:
    """A non-editable install (the Docker image's ``pip install .``) must serve the console too."""
    from fnmatch import fnmatch

    static = ROOT / "broker" / "console" / "static"
    patterns = PYPROJECT["tool"]["setuptools"]["package-data"]["minipulsar.broker.console"]
    files = [
        p.relative_to(static.parent).as_posix() for p in static.rglob("*") if p.is_file() and p.name != "README.md"
    ]
    assert {"static/index.html", "static/console.js", "static/vendor/uplot/uPlot.iife.min.js"} <= set(files)
    missing = [
        f for f in files if not any(fnmatch(f, pattern) and f.count("/") == pattern.count("/") for pattern in patterns)
    ]
    assert not missing, f"add to [tool.setuptools.package-data]: {missing}"
