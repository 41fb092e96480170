"""The repository's compose files brought up with a real Docker engine, for tests.

:func:`docker_unavailable_reason` says why nothing can run here (no client, no daemon, a base
image neither present nor pullable), for a visible skip. :func:`build_images` builds the images
the files name (``minipulsar:local``, ``minipulsar-zookeeper:local``) from this tree with the
host's network, as a machine whose Docker bridge has no route out needs. A
:class:`ComposeProject` runs one file under a project name of its own, with every disk
variable pointed into the test's temp dir, and is always taken down (``down -v``).

One change to the file: the broker publishes no port. The files publish the well-known 6650 and
8080 on the host, which a test must not take; clients run in the project's network instead
(:meth:`ComposeProject.minipulsar`, with ``BROKER_ADVERTISED_ADDRESS=broker`` so that lookups
answer with an address reachable there). tests/unit/test_compose.py checks the published ports.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import yaml

from tests.support.process import ERROR_LINE

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILES = {"metastore": ROOT / "docker-compose.yml", "zookeeper": ROOT / "docker-compose.zookeeper.yml"}
"""Variant (where its metadata lives) → compose file."""
BASE_IMAGES = {"BASE_IMAGE": "python:3.11-slim", "ZOOKEEPER_BASE_IMAGE": "debian:bookworm-slim"}
"""The files' base-image variables and their defaults; the environment may name local stand-ins."""
IMAGES = {
    "minipulsar:local": (ROOT / "docker" / "Dockerfile", ROOT, "BASE_IMAGE"),
    "minipulsar-zookeeper:local": (
        ROOT / "docker" / "zookeeper" / "Dockerfile",
        ROOT / "docker" / "zookeeper",
        "ZOOKEEPER_BASE_IMAGE",
    ),
}
"""Tag → (Dockerfile, context, the variable naming its base image: the Dockerfile's ``BASE_IMAGE``)."""
BUILD_TIMEOUT_S = 900.0
"""A cold build installs a JRE and every Python dependency over the network."""
COMMAND_TIMEOUT_S = 300.0
_LOG_PREFIX = re.compile(r"^\S+\s+\|\s?")
"""``docker compose logs``'s ``service_1  | `` before each line."""


def _docker(
    argv: list[str], timeout_s: float = COMMAND_TIMEOUT_S, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, env=env, stdin=subprocess.DEVNULL)


def compose_command() -> list[str] | None:
    """``docker compose`` (v2) or ``docker-compose`` (v1, Debian bookworm's), whichever works."""
    if shutil.which("docker") and _docker(["docker", "compose", "version"]).returncode == 0:
        return ["docker", "compose"]
    if shutil.which("docker-compose") and _docker(["docker-compose", "version"]).returncode == 0:
        return ["docker-compose"]
    return None


def base_image(variable: str) -> str:
    return os.environ.get(variable) or BASE_IMAGES[variable]


def docker_unavailable_reason() -> str | None:
    """Why the compose files cannot be brought up here, or None."""
    if not shutil.which("docker"):
        return "Docker: no docker client on PATH"
    if compose_command() is None:
        return "Docker: neither `docker compose` nor `docker-compose` works"
    info = _docker(["docker", "info", "--format", "{{.ServerVersion}}"], 60)
    if info.returncode != 0:
        return f"Docker: the daemon does not answer ({(info.stderr.strip().splitlines() or ['no output'])[-1]})"
    for variable in BASE_IMAGES:
        image = base_image(variable)
        if (
            _docker(["docker", "image", "inspect", image], 60).returncode != 0
            and _docker(["docker", "pull", image]).returncode != 0
        ):
            return (
                f"Docker: base image {image} is neither present nor pullable "
                f"(set {variable} to a local Debian bookworm image)"
            )
    return None


def build_images() -> None:
    """Build both images from this tree (layers cached: seconds after the first build)."""
    for tag, (dockerfile, context, variable) in IMAGES.items():
        argv = ["docker", "build", "--network", "host", "--build-arg", f"BASE_IMAGE={base_image(variable)}"]
        result = _docker([*argv, "-f", str(dockerfile), "-t", tag, str(context)], BUILD_TIMEOUT_S)
        assert result.returncode == 0, f"docker build {tag} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"


class ComposeProject:
    """One compose file up under a project name of its own, its data in ``root``."""

    def __init__(self, variant: str, root: Path) -> None:
        command = compose_command()
        assert command is not None
        self.root, self.name = root, f"minipulsar-test-{uuid.uuid4().hex[:8]}"
        document = yaml.safe_load(COMPOSE_FILES[variant].read_text())
        self.services: dict[str, dict] = document["services"]
        self.services["broker"].pop("ports")
        self.file = root / "compose.yml"
        self.file.write_text(yaml.safe_dump(document))
        self.env = {
            **os.environ,
            **{variable: base_image(variable) for variable in BASE_IMAGES},
            **{
                disk: str(root / disk.lower())
                for disk in ("JOURNAL_DISK", "LEDGER_DISK", "METASTORE_DISK", "ZOOKEEPER_DISK")
            },
            "BROKER_ADVERTISED_ADDRESS": "broker",
        }
        self._compose = [*command, "-p", self.name, "-f", str(self.file), "--project-directory", str(ROOT)]

    def bookie_metadata_urls(self) -> set[str]:
        """The ``--metadata-url`` of every bookie service."""
        urls = set()
        for service in self.services.values():
            command = [str(arg) for arg in service.get("command", [])]
            if command[:1] == ["bookie"]:
                urls.add(command[command.index("--metadata-url") + 1])
        return urls

    def compose(self, *args: str, timeout_s: float = COMMAND_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
        return _docker([*self._compose, *args], timeout_s, self.env)

    def up(self) -> None:
        """Start every service; returns once those others depend on are healthy."""
        result = self.compose("up", "-d", "--no-build")
        assert result.returncode == 0, f"compose up failed:\n{result.stderr[-3000:]}"

    def minipulsar(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``minipulsar ARGS`` in the broker's container, in the project's network (not in a
        container of its own: a new container may take the address of one just killed, which
        would then refuse connections instead of swallowing them)."""
        return self.compose("exec", "-T", "broker", "minipulsar", *args)

    def zookeeper_mode(self, service: str) -> str | None:
        """What ``srvr`` says of ZooKeeper node ``service``: ``leader``, ``follower``, ``standalone``,
        or None when it does not serve."""
        probe = "exec 3<>/dev/tcp/127.0.0.1/2181 && printf srvr >&3 && cat <&3"
        result = self.compose("exec", "-T", service, "bash", "-c", probe, timeout_s=60)
        modes = [
            line.removeprefix("Mode: ").strip() for line in result.stdout.splitlines() if line.startswith("Mode: ")
        ]
        return modes[0] if modes else None

    def logs(self, service: str | None = None) -> list[str]:
        """Every line the services logged, without compose's ``name |`` prefix."""
        result = self.compose("logs", "--no-color", *([service] if service else []))
        return [_LOG_PREFIX.sub("", line, count=1) for line in result.stdout.splitlines()]

    def wait_logged(self, service: str, text: str, timeout_s: float = 120.0) -> None:
        """Until ``service`` logged ``text`` (polled with a deadline: the servers print READY)."""
        deadline = time.monotonic() + timeout_s
        while not any(text in line for line in self.logs(service)):
            assert time.monotonic() < deadline, f"{service} did not log {text!r} within {timeout_s:g}s:\n" + "\n".join(
                self.logs(service)[-30:]
            )
            time.sleep(0.5)

    def error_lines(self) -> list[str]:
        """The ERROR lines a project logger wrote in any container."""
        return [line for line in self.logs() if ERROR_LINE.match(line)]

    def down(self) -> None:
        self.compose("down", "-v", "--timeout", "30")
